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
    let answer: Result<roster::servers::Answer, roster::servers::RequestError> =
        Ok(roster::servers::Answer::Value(json!({"content": []})));
    let started = Instant::now();
    for _ in 0..iterations {
        metrics.bench_call("demo", "demo__echo", &answer);
    }
    started.elapsed().as_nanos() as f64 / iterations as f64
}

/// Per-call times of each roster, one entry per round, in microseconds.
struct Rounds {
    on: Vec<f64>,
    off: Vec<f64>,
    control: Vec<f64>,
}

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let rounds = count("ROSTER_BENCH_ROUNDS", 200, 2, benching);
    let per_round = count("ROSTER_BENCH_CALLS", 200, 5, benching);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let measured = runtime.block_on(async {
        // `control` is a second roster with metrics off: how far two identical rosters differ
        // is the noise floor the on/off difference is read against.
        let rosters = [start(true).await, start(false).await, start(false).await];
        // Warm all: the children's allocators, the page cache, the branch predictors.
        for roster in &rosters {
            calls(roster, per_round).await;
        }
        let mut times: [Vec<f64>; 3] = Default::default();
        for round in 0..rounds {
            // Each round starts with another roster, so none always runs first or last.
            for k in 0..rosters.len() {
                let at = (round + k) % rosters.len();
                let took = calls(&rosters[at], per_round).await;
                times[at].push(took.as_secs_f64() * 1e6 / per_round as f64);
            }
        }
        let page = rosters[0].metrics().encode().expect("metrics on");
        assert!(page.contains("roster_tool_call_duration_seconds_count{server=\"demo\""));
        assert_eq!(rosters[1].metrics().encode(), None);
        for roster in &rosters {
            roster.shutdown_and_wait().await;
        }
        let [on, off, control] = times;
        Rounds { on, off, control }
    });
    let paired = |a: &[f64], b: &[f64]| median(a.iter().zip(b).map(|(a, b)| a / b).collect());
    let on_off = paired(&measured.on, &measured.off);
    let control_off = paired(&measured.control, &measured.off);
    let off = median(measured.off.clone());
    let recording = recording_ns(count("ROSTER_BENCH_RECORDINGS", 1_000_000, 10, benching));
    let percent = |ratio: f64| (ratio - 1.0) * 100.0;
    println!(
        "Roster::call demo__echo over stdio, {rounds} rounds of {per_round} calls per roster:"
    );
    println!(
        "  metrics on           : {:8.2} µs per call (median of rounds)",
        median(measured.on.clone())
    );
    println!("  metrics off          : {off:8.2} µs per call (median of rounds)");
    println!(
        "  metrics off, control : {:8.2} µs per call (median of rounds)",
        median(measured.control.clone())
    );
    println!(
        "  on / off      (median of the rounds' ratios): {on_off:.4} ({:+.2}%)",
        percent(on_off)
    );
    println!(
        "  control / off (median of the rounds' ratios): {control_off:.4} ({:+.2}%), the noise floor",
        percent(control_off)
    );
    println!(
        "  recording one call's metrics alone: {recording:.0} ns ({:.3}% of a call with metrics off)",
        recording / (off * 1000.0) * 100.0
    );
}
