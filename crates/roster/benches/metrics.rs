//! What metrics cost a `tools/call`: the same `roster` binary's library path (`Roster::call`
//! against its built-in demo server over stdio), once with `[gateway] metrics = true` and once
//! with `false`, in one run, and the recording itself in isolation.
//!
//! The two rosters are measured in alternating rounds (on, off, off, on, ...) so a change in
//! the machine's load falls on both; each side's figure is the median of its rounds' mean
//! per-call time. `cargo bench -p roster --bench metrics` (`ROSTER_BENCH_ROUNDS`,
//! `ROSTER_BENCH_CALLS` change the counts); under `cargo test` it runs a few calls only.

use std::hint::black_box;
use std::time::{Duration, Instant};

use roster::config::{Config, ServerConfig};
use roster::metrics::{Metrics, MetricsConfig};
use roster::{Roster, RosterOptions};
use serde_json::{Map, Value, json};

fn count(var: &str, bench: usize, test: usize, benching: bool) -> usize {
    if !benching {
        return test;
    }
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(bench)
}

async fn start(metrics: bool) -> Roster {
    let mut config = Config::with_servers(Default::default());
    config.servers.insert(
        "demo".into(),
        ServerConfig::stdio(env!("CARGO_BIN_EXE_roster"), vec!["demo-server".into()]),
    );
    config.server_order = vec!["demo".into()];
    config.gateway.metrics.enabled = metrics;
    let roster = Roster::start_with(config, RosterOptions::default())
        .await
        .expect("roster starts");
    assert!(
        roster
            .tools()
            .iter()
            .any(|t| t.exposed_name == "demo__echo"),
        "the demo server is listed"
    );
    roster
}

fn arguments() -> Option<Map<String, Value>> {
    json!({"text": "hello"}).as_object().cloned()
}

async fn calls(roster: &Roster, n: usize) -> Duration {
    let started = Instant::now();
    for _ in 0..n {
        black_box(
            roster
                .call("demo__echo", arguments())
                .await
                .expect("echo answers"),
        );
    }
    started.elapsed()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// The recording a call adds with metrics on (a histogram observation under its labels), per
/// call, in nanoseconds.
fn recording_ns(iterations: usize) -> f64 {
    let metrics = Metrics::new(&MetricsConfig::default());
    let answer: Result<Value, roster::servers::RequestError> = Ok(json!({"content": []}));
    let started = Instant::now();
    for _ in 0..iterations {
        metrics.bench_call("demo", "demo__echo", &answer);
    }
    started.elapsed().as_nanos() as f64 / iterations as f64
}

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let rounds = count("ROSTER_BENCH_ROUNDS", 30, 2, benching);
    let per_round = count("ROSTER_BENCH_CALLS", 1000, 5, benching);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let (on, off) = runtime.block_on(async {
        let on = start(true).await;
        let off = start(false).await;
        // Warm both: the children's allocators, the page cache, the branch predictors.
        calls(&on, per_round).await;
        calls(&off, per_round).await;
        let (mut on_us, mut off_us) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let per_call = |d: Duration| d.as_secs_f64() * 1e6 / per_round as f64;
            if round.is_multiple_of(2) {
                on_us.push(per_call(calls(&on, per_round).await));
                off_us.push(per_call(calls(&off, per_round).await));
            } else {
                off_us.push(per_call(calls(&off, per_round).await));
                on_us.push(per_call(calls(&on, per_round).await));
            }
        }
        let page = on.metrics().encode().expect("metrics on");
        assert!(page.contains("roster_tool_call_duration_seconds_count{server=\"demo\""));
        assert_eq!(off.metrics().encode(), None);
        on.shutdown_and_wait().await;
        off.shutdown_and_wait().await;
        (median(on_us), median(off_us))
    });
    let recording = recording_ns(count("ROSTER_BENCH_RECORDINGS", 1_000_000, 10, benching));
    println!(
        "Roster::call demo__echo over stdio, {rounds} alternating rounds of {per_round} calls:"
    );
    println!("  metrics on : {on:8.2} µs per call (median of rounds)");
    println!("  metrics off: {off:8.2} µs per call (median of rounds)");
    println!(
        "  on / off   : {:8.4} ({:+.2}%)",
        on / off,
        (on / off - 1.0) * 100.0
    );
    println!(
        "  recording one call's metrics alone: {recording:.0} ns ({:.3}% of a call with metrics off)",
        recording / (off * 1000.0) * 100.0
    );
}
