//! The stdio servers' sandbox, through real processes: a real `roster serve --http`, the
//! official Python SDK client calling tools, and a probe server (`sandbox_probe.py`) that tries
//! to read, write, connect, read roster's environment, allocate and signal — sandboxed, and
//! unsandboxed beside it as the control. Real servers (the reference filesystem server from
//! npm, `mcp-server-time` from PyPI) work sandboxed.

mod common;

use std::path::Path;

use common::{Gateway, call_tools};
use serde_json::{Value, json};

const ADMIN: &str = "sandbox-admin";

/// The probe's answers to `calls`, each tool called on `server`, as text (`ok: …` or
/// `refused: …`).
fn probe(gateway: &Gateway, server: &str, calls: &[(&str, Value)]) -> Vec<String> {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(tool, args)| json!([format!("{server}__{tool}"), args]))
        .collect();
    let report = call_tools(&["--url", &gateway.url], &Value::Array(calls));
    report["results"]
        .as_array()
        .expect("a result per call")
        .iter()
        .map(common::text_of)
        .collect()
}

/// `[servers.NAME]` running the probe, with `more` lines after it.
fn probe_server(name: &str, more: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = {py}\nargs = [{probe}]\nenv = {{ GIVEN = \"by the entry\" }}\n{more}\n",
        py = common::toml_str(&common::python().to_string_lossy()),
        probe = common::toml_str(&common::python_fixture("sandbox_probe.py").to_string_lossy()),
    )
}

fn gateway_header(dir: &Path) -> String {
    format!(
        "[gateway]\nstate_dir = {state}\nadmin_token_env = \"ROSTER_TEST_ADMIN\"\n\n",
        state = common::toml_str(&dir.join("state").to_string_lossy()),
    )
}

/// The directory of the Python fixtures, which a probe's sandbox must let it read.
fn probe_dir() -> String {
    common::python_fixture("sandbox_probe.py")
        .parent()
        .expect("the fixtures' dir")
        .to_string_lossy()
        .into_owned()
}

/// Server `name` in `health` (`/healthz` as the admin token sees it).
fn server_of(health: &Value, name: &str) -> Value {
    health["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("{name} in {health}"))
}

fn assert_ok(what: &str, answer: &str) {
    assert!(answer.starts_with("ok: "), "{what}: {answer}");
}

fn assert_refused(what: &str, answer: &str) {
    assert!(answer.starts_with("refused: "), "{what}: {answer}");
}

#[tokio::test]
async fn a_sandboxed_server_reaches_only_what_its_entry_gives_and_the_control_reaches_it_all() {
    let outside = tempfile::tempdir().expect("temp dir");
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "roster's own secret").expect("write");
    let shared = outside.path().join("shared");
    let drop_box = outside.path().join("drop");
    std::fs::create_dir_all(&shared).expect("mkdir");
    std::fs::create_dir_all(&drop_box).expect("mkdir");
    std::fs::write(shared.join("readme.txt"), "for the server").expect("write");
    // A port that answers on 127.0.0.1: the control reaches it, the sandbox has no network.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    // A local daemon's socket (as docker.sock), in a directory the sandbox may read.
    let daemon_socket = shared.join("daemon.sock");
    let daemon = std::os::unix::net::UnixListener::bind(&daemon_socket).expect("listen");
    let port = listener.local_addr().expect("addr").port();

    let (probe_dir, shared_s, drop_s) = (
        probe_dir(),
        shared.to_string_lossy().into_owned(),
        drop_box.to_string_lossy().into_owned(),
    );
    let gateway = Gateway::start(
        |dir| {
            format!(
                "{header}{boxed}{open}",
                header = gateway_header(dir),
                boxed = probe_server(
                    "boxed",
                    &format!(
                        "[servers.boxed.sandbox]\nread = [{}, {}]\nwrite = [{}]\nenv = [\"PASSED_ON\"]\nmemory = \"256MiB\"\n",
                        common::toml_str(&probe_dir),
                        common::toml_str(&shared_s),
                        common::toml_str(&drop_s),
                    )
                ),
                open = probe_server("open", ""),
            )
        },
        &[
            ("ROSTER_TEST_ADMIN", ADMIN),
            ("SECRET_KEY", "hunter2"),
            ("PASSED_ON", "named in sandbox.env"),
        ],
    );
    let calls = [
        ("read_file", json!({"path": secret})),
        ("read_file", json!({"path": shared.join("readme.txt")})),
        ("write_file", json!({"path": drop_box.join("boxed.txt")})),
        (
            "write_file",
            json!({"path": outside.path().join("escaped.txt")}),
        ),
        ("connect", json!({"host": "127.0.0.1", "port": port})),
        ("getenv", json!({"name": "SECRET_KEY"})),
        ("getenv", json!({"name": "PASSED_ON"})),
        ("getenv", json!({"name": "GIVEN"})),
        ("allocate", json!({"mib": 512})),
        ("signal_parent", json!({})),
        ("connect_unix", json!({"path": daemon_socket})),
    ];
    let boxed = probe(&gateway, "boxed", &calls);
    assert_refused("read a file outside `read`", &boxed[0]);
    assert_ok("read a file beneath `read`", &boxed[1]);
    assert_ok("write beneath `write`", &boxed[2]);
    assert_refused("write outside `write`", &boxed[3]);
    assert_refused("connect with network = \"none\"", &boxed[4]);
    assert_refused("read roster's environment", &boxed[5]);
    assert_eq!(boxed[6], "ok: named in sandbox.env");
    assert_eq!(boxed[7], "ok: by the entry");
    assert_refused("allocate past `memory`", &boxed[8]);
    assert!(boxed[8].contains("MemoryError"), "{}", boxed[8]);
    assert_refused("signal roster", &boxed[9]);
    assert_refused("connect to a local daemon's socket", &boxed[10]);
    assert!(
        !outside.path().join("escaped.txt").exists(),
        "the sandbox wrote outside"
    );

    // The control, the same server unsandboxed: every one of those works.
    let open = probe(&gateway, "open", &calls);
    for (i, answer) in open.iter().enumerate() {
        if i == 6 {
            assert_eq!(answer, "ok: named in sandbox.env");
        } else {
            assert_ok(&format!("unsandboxed call {i} ({:?})", calls[i]), answer);
        }
    }
    assert_eq!(open[5], "ok: hunter2");

    // `roster status --json`'s shape (here /healthz for the admin token): which servers are
    // sandboxed, with their rules.
    let health = gateway.started(ADMIN).await;
    let of = |name: &str| server_of(&health, name);
    assert_eq!(of("boxed")["sandbox"]["network"], "none", "{health}");
    assert_eq!(of("boxed")["sandbox"]["memory"], 256 * 1024 * 1024);
    assert_eq!(of("boxed")["sandbox"]["write"], json!([drop_s]));
    assert!(of("open")["sandbox"].is_null(), "{health}");
    drop((listener, daemon));
}

/// `processes` holds for a user: a fork past it fails. The kernel never holds root to it, so
/// run as root (as CI is) the launcher says so instead: an error with `required`, a warning
/// and no limit without.
#[tokio::test]
async fn a_process_limit_holds_or_the_launcher_says_why_it_cannot() {
    let probe_dir = probe_dir();
    let rules = |required: bool| {
        format!(
            "read = [{}]\nprocesses = 24\nrequired = {required}\n",
            common::toml_str(&probe_dir)
        )
    };
    let gateway = Gateway::start_at_once(
        |dir| {
            format!(
                "{}{}{}",
                gateway_header(dir),
                probe_server(
                    "strict",
                    &format!("[servers.strict.sandbox]\n{}", rules(true))
                ),
                probe_server(
                    "lenient",
                    &format!("[servers.lenient.sandbox]\n{}", rules(false))
                ),
            )
        },
        &[("ROSTER_TEST_ADMIN", ADMIN)],
    );
    let health = gateway.started(ADMIN).await;
    let server = |name: &str| server_of(&health, name);
    let root = nix::unistd::getuid().is_root();
    if root {
        let strict = server("strict");
        let error = strict["last_error"].as_str().unwrap_or_default();
        assert_ne!(strict["connection"], "connected", "{strict}");
        assert!(
            error.contains("does not hold root") && error.contains("required = false"),
            "{strict}"
        );
        assert!(error.contains("[servers.strict.sandbox]"), "{strict}");
        // Without `required`, it runs; the warning is in the log and the inbox.
        assert_eq!(server("lenient")["connection"], "connected", "{health}");
        let answers = probe(&gateway, "lenient", &[("spawn", json!({"count": 4}))]);
        assert_ok("spawn under a limit that does not hold", &answers[0]);
        let inbox = std::process::Command::new(common::roster_bin())
            .arg("--config")
            .arg(gateway.dir.path().join("roster.toml"))
            .args(["inbox", "list", "--json", "--channel", "lenient"])
            .env("ROSTER_LANG", "en")
            .output()
            .expect("roster inbox list");
        let text = String::from_utf8_lossy(&inbox.stdout);
        assert!(
            text.contains("roster.sandbox") && text.contains("does not hold root"),
            "{text}"
        );
    } else {
        let answers = probe(
            &gateway,
            "strict",
            &[
                ("spawn", json!({"count": 4})),
                ("spawn", json!({"count": 60})),
            ],
        );
        assert_ok("spawn under the limit", &answers[0]);
        assert_refused("spawn past the limit", &answers[1]);
    }
}

#[tokio::test]
async fn a_kernel_without_landlock_is_an_error_unless_the_sandbox_is_not_required() {
    let probe_dir = probe_dir();
    let read = format!("read = [{}]\n", common::toml_str(&probe_dir));
    let gateway = Gateway::start_at_once(
        |dir| {
            format!(
                "{}{}{}",
                gateway_header(dir),
                probe_server("strict", &format!("[servers.strict.sandbox]\n{read}")),
                probe_server(
                    "lenient",
                    &format!("[servers.lenient.sandbox]\n{read}required = false\n")
                ),
            )
        },
        &[
            ("ROSTER_TEST_ADMIN", ADMIN),
            ("ROSTER_TEST_SANDBOX_WITHOUT_LANDLOCK", "1"),
        ],
    );
    let health = gateway.started(ADMIN).await;
    let server = |name: &str| server_of(&health, name);
    let strict = server("strict");
    let error = strict["last_error"].as_str().unwrap_or_default();
    assert_ne!(strict["connection"], "connected", "{strict}");
    assert!(
        error.contains("does not enforce Landlock") && error.contains("required = false"),
        "{strict}"
    );
    assert_eq!(server("lenient")["connection"], "connected", "{health}");
    // The lenient one runs without its file rules, as the warning says.
    let answers = probe(
        &gateway,
        "lenient",
        &[(
            "read_file",
            json!({"path": gateway.dir.path().join("roster.toml")}),
        )],
    );
    assert_ok("read outside `read` without Landlock", &answers[0]);
}

#[tokio::test]
async fn real_servers_work_sandboxed() {
    let node = common::node22();
    let filesystem = common::npm_bin("@modelcontextprotocol/server-filesystem");
    let time = common::python().with_file_name("mcp-server-time");
    let files = tempfile::tempdir().expect("temp dir");
    std::fs::write(files.path().join("hello.txt"), "hello from a sandbox").expect("write");
    let s = |p: &Path| common::toml_str(&p.to_string_lossy());
    let modules = common::npm_dir().join("node_modules");
    let gateway = Gateway::start(
        |dir| {
            format!(
                "{header}[servers.fs]\ncommand = {node}\nargs = [{fs}, {files}]\n\
                 [servers.fs.sandbox]\nread = [{modules}]\nwrite = [{files}]\n\n\
                 [servers.time]\ncommand = {time}\nargs = [\"--local-timezone\", \"UTC\"]\nsandbox = true\n",
                header = gateway_header(dir),
                node = s(&node),
                fs = s(&filesystem),
                files = s(files.path()),
                modules = s(&modules),
                time = s(&time),
            )
        },
        &[("ROSTER_TEST_ADMIN", ADMIN)],
    );
    let report = call_tools(
        &["--url", &gateway.url],
        &json!([
            ["fs__read_text_file", {"path": files.path().join("hello.txt")}],
            ["fs__write_file", {"path": files.path().join("new.txt"), "content": "written"}],
            ["time__get_current_time", {"timezone": "UTC"}],
        ]),
    );
    let results = report["results"].as_array().expect("results");
    assert_eq!(
        common::text_of(&results[0]),
        "hello from a sandbox",
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(files.path().join("new.txt")).expect("the server wrote it"),
        "written"
    );
    assert!(
        common::text_of(&results[2]).contains("\"timezone\": \"UTC\""),
        "{report}"
    );
    let health = gateway.started(ADMIN).await;
    for server in health["servers"].as_array().expect("servers") {
        assert!(server["sandbox"].is_object(), "{server}");
        assert!(server["pid"].is_u64(), "{server}");
    }
}
