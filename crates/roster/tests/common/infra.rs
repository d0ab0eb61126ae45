//! Real infrastructure for replica tests: a throwaway PostgreSQL cluster ([`Postgres`]) and a
//! round-robin HTTP load balancer ([`Balancer`], HAProxy) in front of several
//! `roster serve --http` processes.
//!
//! - PostgreSQL: `initdb` and `pg_ctl` from env `ROSTER_TEST_PG_BIN` (a bin dir) when set, else
//!   from `PATH`, else from the newest `/usr/lib/postgresql/*/bin` (Debian's `postgresql`).
//! - HAProxy: `haproxy` from `PATH`, else `/usr/sbin/haproxy` (Debian's `haproxy`).
//!
//! `scripts/test` installs both. Every helper gets its own temp dir and port, so tests in one
//! binary can run them in parallel; each is stopped and its dir removed when dropped.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{KillOnDrop, free_port, stdout_of};

/// A PostgreSQL cluster of its own in a temp dir, listening on `127.0.0.1:PORT`, with the
/// superuser `roster` (password [`Postgres::PASSWORD`]) and an empty database `roster`.
///
/// Authentication: TCP connections need the password (`scram-sha-256`); connections over the
/// Unix socket in the temp dir are trusted. [`Postgres::url`] carries no password, so a test
/// gives it the way roster is meant to read it (e.g. from an env var); [`Postgres::url_with_password`]
/// has it inline.
///
/// PostgreSQL refuses to run as root: when the tests run as root (this machine and CI do), the
/// cluster is created and run by the `postgres` system user if there is one (Debian's package
/// creates it), else by `nobody`, through `runuser`, and the temp dir is handed to that user.
///
/// Stopped (`pg_ctl stop -m immediate`) and removed when dropped.
pub struct Postgres {
    /// `postgres://roster@127.0.0.1:PORT/roster`, without the password.
    pub url: String,
    /// The TCP port it listens on (127.0.0.1).
    pub port: u16,
    /// The bin dir `initdb`, `pg_ctl` and `psql` came from.
    pub bin: PathBuf,
    /// The unprivileged user running the cluster when the tests run as root.
    run_as: Option<String>,
    /// The server options it runs with (`pg_ctl -o`), for a restart.
    options: String,
    /// Holds `data/` (the cluster), `postgres.log`, and the Unix socket.
    dir: tempfile::TempDir,
}

impl Postgres {
    /// The password of the `roster` superuser.
    pub const PASSWORD: &'static str = "roster-test";
    /// The user name (a superuser, owner of the database).
    pub const USER: &'static str = "roster";
    /// The database `start` creates.
    pub const DATABASE: &'static str = "roster";
    /// The database of a TLS cluster that takes only client certificates.
    pub const CERT_DATABASE: &'static str = "certified";
    /// The database of a TLS cluster that takes connections without TLS too.
    pub const PLAIN_DATABASE: &'static str = "plain";

    /// Creates a cluster in a new temp dir, starts it on a free port, waits until it accepts
    /// connections and creates the database `roster`. Panics (with PostgreSQL's log) on failure.
    pub fn start() -> Postgres {
        Self::start_with(false)
    }

    /// [`Postgres::start`] with TLS only: the server's certificate (for `localhost`, not
    /// `127.0.0.1`) is signed by a CA of its own, [`Postgres::ca`]; TCP connections without TLS
    /// are refused (`hostssl` only). [`Postgres::url`] asks for `verify-ca` with that CA. The
    /// database [`Postgres::CERT_DATABASE`] takes only a client certificate of that CA naming
    /// the user (`cert` authentication): `client.pem` and `client.key` beside [`Postgres::ca`];
    /// [`Postgres::PLAIN_DATABASE`] takes connections without TLS too.
    /// Needs `openssl` (Debian's `openssl`, which `scripts/test` installs).
    pub fn start_with_tls() -> Postgres {
        Self::start_with(true)
    }

    /// The CA file of a cluster started with [`Postgres::start_with_tls`].
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn start_with(tls: bool) -> Postgres {
        let bin = pg_bin();
        let run_as = unprivileged_user();
        let dir = tempfile::tempdir().expect("temp dir");
        let pwfile = dir.path().join("pwfile");
        std::fs::write(&pwfile, Self::PASSWORD).expect("write the password file");
        if let Some(user) = &run_as {
            let (uid, gid) = user_ids(user);
            for path in [dir.path(), &pwfile] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .unwrap_or_else(|e| panic!("chown {} to {user}: {e}", path.display()));
            }
        }
        let data = dir.path().join("data");
        let mut initdb = pg_command(&bin, "initdb", run_as.as_deref(), dir.path());
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", Self::USER, "--no-locale", "-E", "UTF8", "--no-sync"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()));
        stdout_of(&mut initdb);
        let mut tls_options = String::new();
        if tls {
            make_certificates(dir.path());
            let key = dir.path().join("server.key");
            if let Some(user) = &run_as {
                let (uid, gid) = user_ids(user);
                std::os::unix::fs::chown(&key, Some(uid), Some(gid)).expect("chown the key");
            }
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
                .expect("key mode");
            // TCP only with TLS.
            let hba = data.join("pg_hba.conf");
            let text = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
            let certified = format!(
                "hostssl {cert} all 127.0.0.1/32 cert\nhostssl {cert} all ::1/128 cert\n\
                 host {plain} all 127.0.0.1/32 scram-sha-256\n",
                cert = Self::CERT_DATABASE,
                plain = Self::PLAIN_DATABASE,
            );
            let text: String = std::iter::once(certified)
                .chain(text.lines().map(|line| match line.strip_prefix("host ") {
                    Some(rest) => format!("hostssl {rest}\n"),
                    None => format!("{line}\n"),
                }))
                .collect();
            std::fs::write(&hba, text).expect("write pg_hba.conf");
            tls_options = format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={} -c ssl_ca_file={}",
                dir.path().join("server.pem").display(),
                key.display(),
                dir.path().join("ca.pem").display()
            );
        }

        // The port is free when picked, but another test may take it before the server binds:
        // then start again on another one.
        let log = dir.path().join("postgres.log");
        let mut attempts = 0;
        let (port, options) = loop {
            attempts += 1;
            let port = free_port();
            let options = format!(
                "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off \
                 -c synchronous_commit=off -c full_page_writes=off -c max_connections=100 \
                 -c shared_buffers=16MB{tls_options}",
                dir.path().display()
            );
            let status = pg_command(&bin, "pg_ctl", run_as.as_deref(), dir.path())
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-o", &options, "start"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run pg_ctl start");
            if status.success() {
                break (port, options);
            }
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                attempts < 5 && text.contains("could not bind"),
                "pg_ctl start failed ({status}); postgres.log:\n{text}"
            );
        };

        let ca = dir.path().join("ca.pem");
        let postgres = Postgres {
            url: format!(
                "postgres://{}@127.0.0.1:{port}/{}{}",
                Self::USER,
                Self::DATABASE,
                if tls {
                    format!("?sslmode=verify-ca&sslrootcert={}", ca.display())
                } else {
                    String::new()
                }
            ),
            port,
            bin,
            run_as,
            options,
            dir,
        };
        postgres.psql_in("postgres", &format!("CREATE DATABASE {}", Self::DATABASE));
        if tls {
            for database in [Self::CERT_DATABASE, Self::PLAIN_DATABASE] {
                postgres.psql_in("postgres", &format!("CREATE DATABASE {database}"));
            }
        }
        postgres
    }

    /// `postgres://roster:roster-test@127.0.0.1:PORT/roster`.
    pub fn url_with_password(&self) -> String {
        format!(
            "postgres://{}:{}@127.0.0.1:{}/{}",
            Self::USER,
            Self::PASSWORD,
            self.port,
            Self::DATABASE
        )
    }

    /// Runs `sql` in the database `roster` with `psql` (over TCP, with the password) and
    /// returns its output unaligned and without headers (`psql -XAt`): one row a line, columns
    /// separated by `|`, trailing newline trimmed. Panics showing psql's stderr on an error.
    pub fn psql(&self, sql: &str) -> String {
        self.psql_in(Self::DATABASE, sql)
    }

    /// [`Postgres::psql`] in another database of the cluster.
    pub fn psql_in(&self, database: &str, sql: &str) -> String {
        let mut command = Command::new(self.bin.join("psql"));
        command
            .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", Self::USER, "-d", database, "-c", sql])
            .env("PGPASSWORD", Self::PASSWORD)
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null());
        stdout_of(&mut command).trim_end().to_owned()
    }

    /// Stops the server (`pg_ctl stop -m fast`): its clients' connections are closed.
    pub fn stop(&self) {
        let status = self
            .pg_ctl()
            .args(["-m", "fast", "-w", "stop"])
            .status()
            .expect("run pg_ctl stop");
        assert!(status.success(), "pg_ctl stop failed: {}", self.log());
    }

    /// Starts the stopped server again, on the same port, with the same data.
    pub fn start_again(&self) {
        let status = self
            .pg_ctl()
            .arg("-l")
            .arg(self.dir.path().join("postgres.log"))
            .args(["-w", "-t", "60", "-o", &self.options, "start"])
            .status()
            .expect("run pg_ctl start");
        assert!(status.success(), "pg_ctl start failed: {}", self.log());
    }

    fn pg_ctl(&self) -> Command {
        let mut command = pg_command(&self.bin, "pg_ctl", self.run_as.as_deref(), self.dir.path());
        command
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    }

    /// PostgreSQL's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .pg_ctl()
            .args(["-m", "immediate", "-w", "stop"])
            .status();
        // `dir` is removed after this (root may remove the other user's files; otherwise they
        // are ours).
    }
}

/// The bin dir holding `initdb` and `pg_ctl` (see the module doc).
pub fn pg_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("ROSTER_TEST_PG_BIN") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("initdb").is_file() && dir.join("pg_ctl").is_file(),
            "ROSTER_TEST_PG_BIN={} holds no initdb and pg_ctl",
            dir.display()
        );
        return dir;
    }
    // In PATH, possibly as symlinks (e.g. in /usr/local/bin): the real dir has psql too.
    if let Some(initdb) = in_path("initdb")
        && let Ok(real) = initdb.canonicalize()
        && let Some(dir) = real.parent()
        && dir.join("pg_ctl").is_file()
    {
        return dir.to_owned();
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max();
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "no PostgreSQL found (initdb and pg_ctl: ROSTER_TEST_PG_BIN, PATH or \
             /usr/lib/postgresql/*/bin): install Debian's postgresql (scripts/test does)"
        ),
    }
}

/// `name`'s path in `PATH`, if it is there.
fn in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `None` when not root; else the user to run PostgreSQL as: `postgres` when it exists, else
/// `nobody`.
fn unprivileged_user() -> Option<String> {
    let euid = stdout_of(Command::new("id").arg("-u"));
    if euid.trim() != "0" {
        return None;
    }
    let postgres_exists = Command::new("id")
        .arg("postgres")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let user = if postgres_exists {
        "postgres"
    } else {
        "nobody"
    };
    Some(user.to_owned())
}

/// The uid and primary gid of `user`.
fn user_ids(user: &str) -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        stdout_of(Command::new("id").args([flag, user]))
            .trim()
            .parse()
            .expect("a numeric id")
    };
    (id("-u"), id("-g"))
}

/// `bin/program`, run as `run_as` (through `runuser`) when given, in `cwd` (a dir that user can
/// enter, unlike the test's own working dir under /root).
/// A CA (`ca.pem`) and certificates it signed for `localhost` (`server.pem`, `server.key`) and
/// for the user `roster` (`client.pem`, `client.key`) in `dir`, made with `openssl`; also a
/// second CA (`other-ca.pem`) that signed nothing here.
fn make_certificates(dir: &Path) {
    let openssl = in_path("openssl").expect(
        "the TLS store test needs openssl (apt-get install openssl; scripts/test installs it)",
    );
    let run = |args: &str| {
        let mut command = Command::new(&openssl);
        command
            .current_dir(dir)
            .args(args.split(' '))
            .stderr(Stdio::piped());
        stdout_of(&mut command);
    };
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    for (name, cn) in [("ca", "test-CA"), ("other-ca", "another-CA")] {
        run(&format!(
            "req -x509 {ec} -keyout {name}.key -out {name}.pem -days 2 -subj /CN={cn}"
        ));
    }
    // Extensions make them X.509 v3 certificates, the only kind rustls takes.
    std::fs::write(dir.join("server.ext"), "subjectAltName=DNS:localhost\n").expect("write");
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").expect("write");
    for (name, cn) in [("server", "localhost"), ("client", "roster")] {
        run(&format!(
            "req {ec} -keyout {name}.key -out {name}.csr -subj /CN={cn}"
        ));
        run(&format!(
            "x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
             -out {name}.pem -days 2 -extfile {name}.ext"
        ));
    }
}

fn pg_command(bin: &Path, program: &str, run_as: Option<&str>, cwd: &Path) -> Command {
    let program = bin.join(program);
    let mut command = match run_as {
        Some(user) => {
            let runuser = in_path("runuser")
                .or_else(|| {
                    ["/usr/sbin/runuser", "/sbin/runuser"]
                        .map(PathBuf::from)
                        .into_iter()
                        .find(|p| p.is_file())
                })
                .expect("running as root, PostgreSQL needs runuser (util-linux) to drop root");
            let mut c = Command::new(runuser);
            c.args(["-u", user, "--"]).arg(program);
            c
        }
        None => Command::new(program),
    };
    command.current_dir(cwd).stdin(Stdio::null());
    command
}

/// HAProxy on `127.0.0.1:PORT` balancing HTTP requests round-robin over some backends: each
/// request on its own, including consecutive requests on one keep-alive client connection
/// (no stickiness, no `prefer-last-server`), so a client's session is spread over the
/// backends. Timeouts (client, server, tunnel, keep-alive) are an hour, so SSE streams stay
/// open; a backend that stops is taken out by health checks (`/healthz` every 200 ms) and its
/// requests redispatched. Killed, and its dir removed, when dropped.
pub struct Balancer {
    /// `http://127.0.0.1:PORT` (no path: append the backends' own, e.g. `/mcp`).
    pub url: String,
    /// The port it listens on.
    pub port: u16,
    /// The haproxy process.
    child: KillOnDrop,
    /// Holds `haproxy.cfg` and `haproxy.log` (its stderr).
    dir: tempfile::TempDir,
}

impl Balancer {
    /// Starts HAProxy in front of `backends` and waits until it listens. Panics (with its
    /// output) when it does not start.
    pub fn start(backends: &[SocketAddr]) -> Balancer {
        assert!(!backends.is_empty(), "a balancer needs backends");
        let haproxy = in_path("haproxy")
            .or_else(|| Some(PathBuf::from("/usr/sbin/haproxy")).filter(|p| p.is_file()))
            .expect("no haproxy (PATH or /usr/sbin): install Debian's haproxy (scripts/test does)");
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("haproxy.cfg");
        let log = dir.path().join("haproxy.log");
        let mut attempts = 0;
        loop {
            attempts += 1;
            let port = free_port();
            std::fs::write(&config, haproxy_config(port, backends)).expect("write haproxy.cfg");
            let output = std::fs::File::create(&log).expect("create haproxy.log");
            let mut child = Command::new(&haproxy)
                .arg("-db")
                .arg("-f")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(output.try_clone().expect("clone the log file"))
                .stderr(output)
                .spawn()
                .expect("start haproxy");
            // Listening, or gone (most likely the port was taken meanwhile: try another).
            let deadline = Instant::now() + Duration::from_secs(30);
            let exited = loop {
                if let Ok(Some(status)) = child.try_wait() {
                    break Some(status);
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    break None;
                }
                assert!(Instant::now() < deadline, "haproxy never listened");
                std::thread::sleep(Duration::from_millis(20));
            };
            match exited {
                None => {
                    return Balancer {
                        url: format!("http://127.0.0.1:{port}"),
                        port,
                        child: KillOnDrop(child),
                        dir,
                    };
                }
                Some(status) => {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    assert!(
                        attempts < 5,
                        "haproxy exited ({status}):\n{text}\nhaproxy.cfg:\n{}",
                        haproxy_config(port, backends)
                    );
                }
            }
        }
    }

    /// HAProxy's output so far (warnings, errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }

    /// Whether the haproxy process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.0.try_wait(), Ok(None))
    }
}

/// The HAProxy config: HTTP mode, round-robin per request, hour-long timeouts.
fn haproxy_config(port: u16, backends: &[SocketAddr]) -> String {
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            let address = match addr {
                SocketAddr::V4(a) => format!("{}:{}", a.ip(), a.port()),
                SocketAddr::V6(a) => format!("ipv6@{}:{}", a.ip(), a.port()),
            };
            format!("    server r{i} {address} check inter 200ms fall 1 rise 1\n")
        })
        .collect();
    format!(
        "global
    maxconn 2000

defaults
    mode http
    option http-keep-alive
    # A stopped backend: its requests go to another one, and checks take it out.
    option redispatch 1
    retries 3
    timeout connect 5s
    timeout client 1h
    timeout server 1h
    timeout tunnel 1h
    timeout http-request 1h
    timeout http-keep-alive 1h

frontend replicas
    bind 127.0.0.1:{port}
    default_backend roster

backend roster
    balance roundrobin
    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host localhost
{servers}"
    )
}
