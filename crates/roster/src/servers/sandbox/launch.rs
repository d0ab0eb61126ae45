//! The launcher: `roster __sandbox SPEC -- COMMAND ARGS…`. It runs single-threaded, before
//! anything else in the process, and in this order:
//!
//! 1. with `network = "none"` (and no `connect` ports) or `processes`, a user namespace of its
//!    own (the same uid and gid inside), and for the former a network namespace with nothing
//!    in it;
//! 2. its resource limits: `memory` as `RLIMIT_DATA`, `processes` as `RLIMIT_NPROC` (counted in
//!    the new user namespace, so only the server's own processes count), `open_files` as
//!    `RLIMIT_NOFILE`;
//! 3. Landlock: files readable (and executable) only beneath the system directories, the
//!    command's install directory, the cwd and `read`; writable only beneath `write` and its
//!    private `HOME` and `TMPDIR`; with `connect`, TCP only to those ports; no signals to
//!    processes outside, no abstract UNIX sockets outside (where the kernel scopes them);
//!    `no_new_privs` set;
//! 4. unless `unix_sockets`, a seccomp filter that answers `socket(AF_UNIX, …)` with `EACCES`:
//!    a server cannot reach local daemons through their sockets (`docker.sock`, D-Bus), which
//!    neither a network namespace nor (before Linux 7.1) Landlock rules; `socketpair` works;
//! 5. `exec` of the server, which keeps the launcher's pid.
//!
//! What the kernel cannot enforce is an error with `required = true` (the server does not
//! start) and a warning otherwise; both are lines on stderr starting with
//! [`super::STDERR_PREFIX`], which roster logs (and keeps a warning in the inbox).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::sched::CloneFlags;
use nix::sys::resource::{Resource, setrlimit};

use super::{LaunchSpec, STDERR_PREFIX};
use crate::config::Network;

/// The Landlock ABI whose file rights roster asks for (Linux 6.10); an older kernel enforces
/// what it has of them.
const ABI_FS: ABI = ABI::V5;

/// Readable beneath these, for any program to run: its loader and libraries, an
/// interpreter's, configuration (TLS roots, time zones, name service).
const SYSTEM_READ: &[&str] = &[
    "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys",
];

/// Devices any program may open for reading and writing.
const DEVICES_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// Devices any program may read.
const DEVICES_READ: &[&str] = &["/dev/random", "/dev/urandom"];

/// Runs the launcher with `spec` (JSON) and `command` (the server's program and arguments);
/// returns only when it could not start the server.
pub fn run(spec: &str, command: &[OsString]) -> ExitCode {
    let spec: LaunchSpec = match serde_json::from_str(spec) {
        Ok(spec) => spec,
        Err(error) => {
            eprintln!("{STDERR_PREFIX}cannot read the sandbox's rules: {error}");
            return ExitCode::from(126);
        }
    };
    let say = |line: &str| eprintln!("{STDERR_PREFIX}server `{}`: {line}", spec.server);
    let Some((program, args)) = command.split_first() else {
        say("no command to run");
        return ExitCode::from(126);
    };
    match apply(&spec, program) {
        Ok(warnings) => warnings
            .iter()
            .for_each(|w| say(&format!("warning: {w}; it runs without that"))),
        Err(error) => {
            say(&format!(
                "{error}; set [servers.{}.sandbox] required = false to run it with what the \
                 kernel can enforce",
                spec.server
            ));
            return ExitCode::from(126);
        }
    }
    let error = std::process::Command::new(program).args(args).exec();
    let hint = if error.kind() == std::io::ErrorKind::PermissionDenied {
        " (the sandbox may not let it read its program: add the program's directory to \
         `read`)"
    } else {
        ""
    };
    say(&format!(
        "cannot run {}: {error}{hint}",
        Path::new(program).display()
    ));
    ExitCode::from(127)
}

/// Applies `spec` to this process; what the kernel could not enforce, when that is allowed.
fn apply(spec: &LaunchSpec, program: &OsString) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    // What the kernel cannot enforce: refused with `required`, else said.
    let unenforced = |warnings: &mut Vec<String>, what: String| -> Result<(), String> {
        if spec.rules.required {
            Err(what)
        } else {
            warnings.push(what);
            Ok(())
        }
    };
    let no_network = spec.rules.network == Network::None && spec.rules.connect.is_empty();
    // Without a network namespace, Landlock's TCP rules (no port allowed) keep what they can.
    let mut tcp_rules = !spec.rules.connect.is_empty();
    // A user namespace only where it is needed: for an empty network namespace, and so that
    // `processes` counts only the server's own.
    let needs_namespace = no_network || spec.rules.processes.is_some();
    if needs_namespace && let Err(error) = own_namespaces(no_network) {
        let what = if no_network {
            tcp_rules = true;
            "no network (only TCP is kept from it, where Landlock has TCP rules)"
        } else {
            "a process count of its own"
        };
        unenforced(
            &mut warnings,
            format!("the kernel refused a user namespace ({error}), needed for {what}"),
        )?;
    }
    if spec.rules.processes.is_some() && nix::unistd::getuid().is_root() {
        unenforced(
            &mut warnings,
            "the kernel does not hold root (uid 0) to a process limit, so `processes` does \
             not hold while roster runs as root"
                .to_owned(),
        )?;
    }
    limits(spec)?;
    let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    read.extend(install_dirs(program));
    read.extend(spec.cwd.iter().cloned());
    read.extend(spec.rules.read.iter().cloned());
    let mut write = spec.rules.write.clone();
    write.extend([spec.home.clone(), spec.tmp.clone()]);
    for path in spec.rules.read.iter().chain(&spec.rules.write) {
        if !path.exists() {
            return Err(format!(
                "`{}` (in its `read` or `write`) does not exist",
                path.display()
            ));
        }
    }
    match landlock(spec, &read, &write, tcp_rules) {
        Ok(RulesetStatus::FullyEnforced) => {}
        // Reading, writing and running are ruled since the first Landlock; what an older one
        // lacks (truncation, renames across directories, device ioctls) is said, not refused.
        Ok(RulesetStatus::PartiallyEnforced) => warnings.push(
            "the kernel's Landlock is older than roster's and enforces only part of the file \
             rules (reading, writing and running are ruled; truncation or device ioctls may \
             not be)"
                .to_owned(),
        ),
        Ok(RulesetStatus::NotEnforced) => unenforced(
            &mut warnings,
            "the kernel does not enforce Landlock (not built in, or not in the `lsm=` boot \
             list), so its file rules do not hold"
                .to_owned(),
        )?,
        Err(error) => unenforced(&mut warnings, error)?,
    }
    if !spec.rules.unix_sockets
        && let Err(error) = no_unix_sockets()
    {
        unenforced(
            &mut warnings,
            format!(
                "the kernel refused the seccomp filter that keeps it from UNIX sockets ({error})"
            ),
        )?;
    }
    Ok(warnings)
}

/// A seccomp filter: `socket(AF_UNIX, …)` fails with `EACCES`, every other call is allowed.
fn no_unix_sockets() -> Result<(), String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        nix::libc::AF_UNIX as u64,
    )
    .map_err(|e| e.to_string())?;
    let rule = SeccompRule::new(vec![unix]).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        [(nix::libc::SYS_socket, vec![rule])].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(nix::libc::EACCES as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    // Landlock set it already; without Landlock the filter needs it too.
    nix::sys::prctl::set_no_new_privs().map_err(|e| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

/// A user namespace of its own, the same uid and gid inside, and with `no_network` an empty
/// network namespace.
fn own_namespaces(no_network: bool) -> Result<(), String> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if no_network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    nix::sched::unshare(flags).map_err(|e| e.to_string())?;
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text).map_err(|e| format!("{file}: {e}"))
    };
    write("setgroups", "deny".to_owned())?;
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))
}

/// `memory`, `processes` and `open_files`, soft and hard.
fn limits(spec: &LaunchSpec) -> Result<(), String> {
    let set = |resource: Resource, value: Option<u64>, key: &str| match value {
        None => Ok(()),
        Some(n) => setrlimit(resource, n, n).map_err(|e| format!("cannot set `{key}` to {n}: {e}")),
    };
    set(Resource::RLIMIT_DATA, spec.rules.memory, "memory")?;
    set(Resource::RLIMIT_NPROC, spec.rules.processes, "processes")?;
    set(Resource::RLIMIT_NOFILE, spec.rules.open_files, "open_files")
}

/// The directories a program needs to read to run: where it is (through `PATH` when it is
/// a bare name) and, when that is a `bin` directory, the directory above it (a virtualenv, an
/// npm package, `/opt/x`); the same for where its symbolic links lead, and for the
/// interpreter a script's `#!` line names (a virtualenv's entry script, an npm `bin`).
fn install_dirs(program: &OsString) -> Vec<PathBuf> {
    let Some((found, mut dirs)) = program_dirs(Path::new(program)) else {
        return Vec::new();
    };
    if let Some((_, more)) = interpreter_of(&found).and_then(|i| program_dirs(&i)) {
        dirs.extend(more);
    }
    dirs
}

/// The interpreter of the script at `path`: its `#!` line's program, or the program
/// `/usr/bin/env` is asked to find.
fn interpreter_of(path: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next()?).into_owned();
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return Some(PathBuf::from(name));
    }
    Some(first)
}

/// The program found, and the install directories of it and of where its links lead.
fn program_dirs(path: &Path) -> Option<(PathBuf, Vec<PathBuf>)> {
    let found = if path.components().count() > 1 {
        Some(path.to_owned())
    } else {
        std::env::var_os("PATH").and_then(|dirs| {
            std::env::split_paths(&dirs)
                .map(|dir| dir.join(path))
                .find(|candidate| candidate.is_file())
        })
    };
    let found = found?;
    let mut dirs = Vec::new();
    for file in [Some(found.clone()), std::fs::canonicalize(&found).ok()]
        .into_iter()
        .flatten()
    {
        if let Some(dir) = file.parent() {
            let install = match dir.file_name() {
                Some(name) if name == "bin" => dir.parent().unwrap_or(dir),
                _ => dir,
            };
            dirs.push(install.to_owned());
        }
    }
    Some((found, dirs))
}

/// Restricts this process with Landlock: `read` readable and executable, `write` writable,
/// the devices, and with `connect` only those TCP ports.
fn landlock(
    spec: &LaunchSpec,
    read: &[PathBuf],
    write: &[PathBuf],
    tcp_rules: bool,
) -> Result<RulesetStatus, String> {
    if spec.without_landlock {
        return Ok(RulesetStatus::NotEnforced);
    }
    let error = |e: landlock::RulesetError| format!("Landlock: {e}");
    let fs_read = AccessFs::from_read(ABI_FS);
    let fs_all = AccessFs::from_all(ABI_FS);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(fs_all)
        .map_err(error)?;
    if tcp_rules {
        // The ports are the network's only rule here: without TCP rules the server would
        // have the whole network, which `required` refuses.
        let level = if spec.rules.required {
            CompatLevel::HardRequirement
        } else {
            CompatLevel::BestEffort
        };
        ruleset = ruleset
            .set_compatibility(level)
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(|e| format!("TCP rules for `connect` ({e})"))?
            .set_compatibility(CompatLevel::BestEffort);
    }
    let ruleset = ruleset.scope(Scope::from_all(ABI::V6)).map_err(error)?;
    let mut created = ruleset.create().map_err(error)?;
    let beneath = |paths: &[PathBuf], access| {
        paths
            .iter()
            .filter_map(|p| PathFd::new(p).ok())
            .map(move |fd| PathBeneath::new(fd, access))
            .collect::<Vec<_>>()
    };
    let devices_rw: Vec<PathBuf> = DEVICES_RW.iter().map(PathBuf::from).collect();
    let devices_read: Vec<PathBuf> = DEVICES_READ.iter().map(PathBuf::from).collect();
    let file_rw = AccessFs::ReadFile | AccessFs::WriteFile;
    for rule in beneath(read, fs_read)
        .into_iter()
        .chain(beneath(write, fs_all))
        .chain(beneath(&devices_rw, file_rw))
        .chain(beneath(&devices_read, AccessFs::ReadFile.into()))
    {
        created = created.add_rule(rule).map_err(error)?;
    }
    for port in &spec.rules.connect {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(error)?;
    }
    let status = created.restrict_self().map_err(error)?;
    Ok(status.ruleset)
}
