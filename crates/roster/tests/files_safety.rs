//! Config errors and files, seen from the `roster` binary: a broken config is reported as what
//! it is, roster leaves alone what it did not make (a state dir's mode, a stray `admin.sock`),
//! the admin socket bounds its request lines, and skill files are bounded and stay inside
//! their root.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use common::{mode_of, stderr_of};

/// `roster --config CONFIG ARGS`, without the developer's `ROSTER_TEST_UNSET_URL`.
fn roster(config: &Path, args: &[&str]) -> common::Cli {
    common::cli(args)
        .config(config)
        .env_remove("ROSTER_TEST_UNSET_URL")
}

#[test]
fn status_and_serve_report_a_broken_config_as_such() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "[gateway]\nnaming = \"always\"\n[servers.x\n").expect("write");
    for args in [&["status"][..], &["serve"][..]] {
        let stderr = roster(&broken, args).fails();
        assert!(
            stderr.contains("configuration has an error") && stderr.contains("broken.toml"),
            "{args:?}: {stderr}"
        );
        assert!(
            !stderr.contains("cannot start without"),
            "{args:?}: {stderr}"
        );
    }
    // A file that is not there is still that, for serve.
    let out = roster(&dir.path().join("missing.toml"), &["serve"]).output();
    assert!(
        stderr_of(&out).contains("cannot start without a configuration"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn an_unset_variable_in_a_url_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = common::write_roster_toml(
        dir.path(),
        "[servers.web]\nurl = \"${ROSTER_TEST_UNSET_URL}/mcp\"\n",
    );
    let out = roster(&config, &["serve"]).output();
    assert!(!out.status.success());
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("servers.web.url") && stderr.contains("ROSTER_TEST_UNSET_URL"),
        "{stderr}"
    );
    assert!(!stderr.contains("relative URL"), "{stderr}");
}

/// A gateway on `state` (no servers), with its stderr lines sent to the returned receiver.
struct Gateway {
    child: Child,
    lines: mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_gateway(state: &Path, gateway_extra: &str) -> Gateway {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = common::write_roster_toml(
        dir.path(),
        &format!("[gateway]\nstate_dir = {state:?}\n{gateway_extra}\n"),
    );
    let mut child = common::serve_command(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start roster serve");
    let stderr = child.stderr.take().expect("stderr piped");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    Gateway {
        child,
        lines,
        _dir: dir,
    }
}

impl Gateway {
    /// The first stderr line containing `needle`; panics if roster exits or 30 s pass (a hang,
    /// not a speed requirement).
    fn line_with(&self, needle: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("roster never printed {needle:?} ({e})"),
            }
        }
    }
}

fn wait_for_admin(state: &Path) {
    let socket = state.join("admin.sock");
    for _ in 0..1500 {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the admin socket never answered at {}", socket.display());
}

#[test]
fn roster_sets_the_mode_only_of_a_state_dir_it_creates() {
    let dir = tempfile::tempdir().expect("temp dir");
    let existing = dir.path().join("existing");
    common::make_dir(&existing, 0o755);
    let gateway = start_gateway(&existing, "");
    wait_for_admin(&existing);
    assert_eq!(
        mode_of(&existing),
        0o755,
        "an existing state dir keeps its mode"
    );
    drop(gateway);

    let fresh = dir.path().join("fresh/state");
    let _gateway = start_gateway(&fresh, "");
    wait_for_admin(&fresh);
    assert_eq!(
        mode_of(&fresh),
        0o700,
        "a state dir roster creates is owner-only"
    );
}

#[test]
fn a_stray_file_named_admin_sock_is_left_alone_and_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    let stray = state.join("admin.sock");
    std::fs::write(&stray, "not roster's\n").expect("write stray file");
    let mut gateway = start_gateway(&state, "");
    let warning = gateway.line_with("is not a socket");
    assert!(warning.contains(&stray.display().to_string()), "{warning}");
    // A clean exit removes only what roster made.
    terminate(&gateway.child);
    gateway.child.wait().expect("roster exits");
    assert_eq!(
        std::fs::read_to_string(&stray).expect("the stray file is still there"),
        "not roster's\n"
    );
}

fn terminate(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

#[test]
fn the_admin_socket_refuses_a_line_over_its_limit_and_keeps_serving() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let _gateway = start_gateway(&state, "admin_max_line = 1024");
    wait_for_admin(&state);
    let mut stream =
        std::os::unix::net::UnixStream::connect(state.join("admin.sock")).expect("connect");
    let mut request = vec![b'x'; 4096];
    request.push(b'\n');
    // The gateway may answer and close before reading all of it; that is the point.
    let _ = stream.write_all(&request);
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("read the answer");
    let reply: Value = serde_json::from_str(reply.trim()).expect("a JSON answer");
    assert_eq!(reply["ok"], false, "{reply}");
    let error = reply["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("1024 bytes") && error.contains("admin_max_line"),
        "{error}"
    );
    // A request within the limit is answered as ever.
    let config = dir.path().join("status.toml");
    std::fs::write(&config, format!("[gateway]\nstate_dir = {state:?}\n")).expect("write");
    roster(&config, &["status", "--json"]).stdout();
}

const SKILL: &str = "---\nname: NAME\ndescription: A test skill.\ntags: [test]\n---\n\n# Body\n";

fn skill(dir: &Path, name: &str, padding: usize) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    let mut text = SKILL.replace("NAME", name);
    text.push_str(&"x".repeat(padding));
    text.push('\n');
    let file = dir.join("SKILL.md");
    std::fs::write(&file, text).expect("write SKILL.md");
    file
}

/// A skills root with a small skill, a 2 MiB one, a directory symlink out of the root and a
/// symlinked `SKILL.md`.
fn skills_tree(base: &Path) -> PathBuf {
    let root = base.join("skills");
    skill(&root.join("local/small"), "small", 0);
    skill(&root.join("local/big"), "big", 2 * 1024 * 1024);
    let outside = skill(&base.join("outside/escape"), "escape", 0);
    std::os::unix::fs::symlink(base.join("outside/escape"), root.join("local/escape"))
        .expect("symlink a directory");
    std::fs::create_dir_all(root.join("local/linked")).expect("mkdir");
    std::os::unix::fs::symlink(&outside, root.join("local/linked/SKILL.md"))
        .expect("symlink a file");
    root
}

#[test]
fn skills_check_applies_the_size_limit_and_stays_inside_the_root() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = skills_tree(dir.path());
    let root_arg = root.to_str().expect("utf-8 path");
    let out = roster(
        &dir.path().join("none.toml"),
        &["skills", "check", root_arg],
    )
    .output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("ok       local/small"), "{stdout}");
    let big = stdout
        .lines()
        .find(|l| l.contains("local/big/SKILL.md"))
        .unwrap_or_else(|| panic!("the big skill is not reported: {stdout}"));
    assert!(
        big.contains("limit of 1048576 bytes") && big.contains("max_file_size"),
        "{big}"
    );
    let linked = stdout
        .lines()
        .find(|l| l.contains("local/linked/SKILL.md"))
        .unwrap_or_else(|| panic!("the symlinked SKILL.md is not reported: {stdout}"));
    assert!(linked.contains("symlink"), "{linked}");
    assert!(
        !stdout.contains("local/escape"),
        "nothing is read through a symlink out of the root: {stdout}"
    );

    // The limit is the config's.
    let config = dir.path().join("roster.toml");
    std::fs::write(&config, "[skills]\nmax_file_size = \"4MiB\"\n").expect("write");
    let out = roster(&config, &["skills", "check", root_arg]).output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ok       local/big"), "{stdout}");
}
