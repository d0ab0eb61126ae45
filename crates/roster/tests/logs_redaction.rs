//! No log line, at any level, carries a URL's userinfo or query string: a real `roster serve`
//! at `ROSTER_LOG=trace` (and `RUST_LOG=trace`) whose servers' URLs hold secrets, each failing
//! through a different error path of rmcp and of roster's own SSE client — a streamable HTTP
//! URL nothing listens at, an SSE URL nothing listens at, and URLs that answer garbage (bytes
//! that are not HTTP, and HTTP whose body is not MCP).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

/// What a garbage server answers every connection with.
#[derive(Clone, Copy)]
enum Garbage {
    /// Bytes that are not HTTP.
    NotHttp,
    /// An HTTP 200 whose body is a web page (for SSE: an event stream that names nothing).
    NotMcp,
}

/// A TCP server on a free port answering every connection with `garbage`, for as long as the
/// test runs.
fn garbage_server(garbage: Garbage) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let answer: &[u8] = match garbage {
                Garbage::NotHttp => b"\x00\xffgarbage, not HTTP\r\n\r\n",
                Garbage::NotMcp => {
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 21\r\n\r\n<html>not mcp</html>\n"
                }
            };
            let _ = stream.write_all(answer);
        }
    });
    port
}

/// `text` without its ANSI colour codes (the log's field names are in italics).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\x1b') {
        out.push_str(&rest[..at]);
        let code = &rest[at..];
        let end = code.find('m').map_or(code.len(), |m| m + 1);
        rest = &code[end..];
    }
    out.push_str(rest);
    out
}

/// The secrets the servers' URLs hold; none may be in the log.
const SECRETS: [&str; 6] = [
    "USERSECRET",
    "QUERYSECRET1",
    "QUERYSECRET2",
    "QUERYSECRET3",
    "QUERYSECRET4",
    "QUERYSECRET5",
];

#[test]
fn no_log_line_at_any_level_carries_a_url_s_userinfo_or_query_string() {
    let dir = tempfile::tempdir().expect("temp dir");
    let closed = common::free_port();
    let not_http = garbage_server(Garbage::NotHttp);
    let not_mcp = garbage_server(Garbage::NotMcp);
    let config = format!(
        r#"[gateway]
state_dir = {state:?}
backoff_initial = "50ms"
backoff_max = "200ms"

[servers.unreachable]
url = "http://alice:USERSECRET@127.0.0.1:{closed}/mcp?api_key=QUERYSECRET1"

[servers.unreachable_sse]
url = "http://127.0.0.1:{closed}/sse?token=QUERYSECRET2"
transport = "sse"

[servers.not_http]
url = "http://127.0.0.1:{not_http}/mcp?api_key=QUERYSECRET3"

[servers.not_mcp]
url = "http://127.0.0.1:{not_mcp}/mcp?api_key=QUERYSECRET4"

[servers.not_mcp_sse]
url = "http://127.0.0.1:{not_mcp}/sse?api_key=QUERYSECRET5"
transport = "sse"
"#,
        state = dir.path().join("state"),
    );
    let path = dir.path().join("roster.toml");
    std::fs::write(&path, config).expect("write config");
    let log_path = dir.path().join("roster.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_roster"))
        .arg("--config")
        .arg(&path)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env_remove("ROSTER_STATE_DIR")
        .env("ROSTER_LOG", "trace")
        .env("RUST_LOG", "trace")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start roster serve");
    let _roster = common::KillOnDrop(child);

    // Every error path has been taken at least twice (a first try and a retry).
    let read = |path: &Path| without_colours(&std::fs::read_to_string(path).unwrap_or_default());
    let seen = |log: &str, needle: &str| log.matches(needle).count() >= 2;
    common::wait_until("every server's failure is logged twice", || {
        let log = read(&log_path);
        seen(&log, "rmcp::transport::worker")
            && seen(&log, &format!("127.0.0.1:{closed}/mcp"))
            && seen(&log, &format!("127.0.0.1:{closed}/sse"))
            && seen(&log, &format!("127.0.0.1:{not_http}/mcp"))
            && seen(&log, "server=not_mcp ")
            && seen(&log, &format!("127.0.0.1:{not_mcp}/sse"))
    });
    let log = read(&log_path);
    let leaked: Vec<&str> = log
        .lines()
        .filter(|line| SECRETS.iter().any(|secret| line.contains(secret)))
        .collect();
    assert!(
        leaked.is_empty(),
        "{} log line(s) carry a secret of a URL, the first:\n{}",
        leaked.len(),
        leaked.first().copied().unwrap_or_default()
    );
    // The lines are there, with the URLs in the form a person can still place.
    assert!(
        log.contains(&format!("127.0.0.1:{not_http}/mcp?***")),
        "{log}"
    );
    assert!(log.contains("TRACE"), "the log is at trace level");
}
