//! The OAuth side of tests: the official Python SDK's OAuth-protected fixture server, and
//! `roster auth login` with the test playing the browser.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{KillOnDrop, free_port, python, python_fixture};

/// The OAuth-protected fixture server on a free port; tokens last `token_ttl` seconds.
pub fn protected_server(transport: &str, token_ttl: u64) -> (KillOnDrop, String) {
    protected_server_with(transport, token_ttl, &[])
}

/// [`protected_server`] with more of the fixture's flags (`--open-initialize`).
pub fn protected_server_with(
    transport: &str,
    token_ttl: u64,
    extra: &[&str],
) -> (KillOnDrop, String) {
    let port = free_port();
    let child = Command::new(python())
        .arg(python_fixture("oauth_protected.py"))
        .args(["--port", &port.to_string()])
        .args(["--token-ttl", &token_ttl.to_string()])
        .args(["--transport", transport])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the OAuth-protected fixture");
    let guard = KillOnDrop(child);
    // The SDK's imports take a while on a loaded machine; wait_for_port's 30 s is not always enough.
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the OAuth fixture never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let path = if transport == "sse" { "sse" } else { "mcp" };
    (guard, format!("http://127.0.0.1:{port}/{path}"))
}

/// `roster auth login SERVER --no-browser`, the test playing the browser: it reads the printed
/// URL, GETs it and follows the redirects to roster's loopback callback. `env` is set for it.
pub fn login_as_a_person(config: &Path, server: &str, env: &[(&str, &str)]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_roster"))
        .arg("--config")
        .arg(config)
        .args(["auth", "login", server, "--no-browser", "--timeout", "60s"])
        .env_remove("ROSTER_STATE_DIR")
        // The English this test reads, whatever the machine's LANG.
        .env("ROSTER_LANG", "en")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start roster auth login");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut printed = String::new();
    let url = loop {
        let line = lines
            .next()
            .expect("roster auth login printed the URL")
            .expect("a line");
        printed.push_str(&line);
        printed.push('\n');
        if let Some(url) = line.trim().strip_prefix("http") {
            break format!("http{url}");
        }
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let page = runtime.block_on(async {
        let response = reqwest::get(&url).await.expect("the browser's GET");
        assert!(response.status().is_success(), "{}", response.status());
        response.text().await.expect("a page")
    });
    assert!(page.contains("logged in"), "{page}");
    for line in lines {
        printed.push_str(&line.expect("a line"));
        printed.push('\n');
    }
    let out = child.wait_with_output().expect("roster auth login ends");
    assert!(
        out.status.success(),
        "roster auth login failed: {printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    printed
}
