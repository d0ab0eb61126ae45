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
    let out = dir.join("RESULTS.md");
    let status = Command::new(env!("CARGO_BIN_EXE_bench-report"))
        .arg("--dir")
        .arg(&dir)
        .arg("--meta")
        .arg(dir.join("meta.json"))
        .arg("--out")
        .arg(&out)
        .status()
        .expect("bench-report runs");
    assert!(status.success());
    let md = std::fs::read_to_string(&out).expect("RESULTS.md written");
    assert!(md.contains("| direct | 1 | 3 |"), "{md}");
    assert!(md.contains("- **mcp-hub**: not installed"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}
