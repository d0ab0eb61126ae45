//! A listing costs roster about its size, not thirty times it: `roster serve --http` fronting
//! a stdio server (`misbehaving.py --tools N`) that lists N tools in one page. A page over
//! `max_listing_bytes` is refused before it is parsed; one within it is read straight from its
//! text, and the tools past `max_tools` are scanned, never built. Peak RSS (VmHWM) is compared
//! with the same gateway fronting a one-tool server, with a wide margin.

mod common;

use serde_json::Value;

/// A gateway fronting `misbehaving.py --tools tools` as `big`, with `gateway` lines; its peak
/// RSS once `done` holds for the server's row in the admin's `/healthz`, and that row.
async fn peak_while_listing(tools: usize, gateway: &str, done: fn(&Value) -> bool) -> (u64, Value) {
    let script = common::python_fixture("misbehaving.py");
    let roster = common::Gateway::start(
        |dir| {
            format!(
                "[gateway]\nstate_dir = {state:?}\nadmin_token_env = \"ROSTER_TEST_ADMIN\"\n{gateway}\n\n\
                 [servers.big]\ncommand = {python:?}\nargs = [{script:?}, \"--tools\", \"{tools}\"]\n",
                state = dir.join("state"),
                python = common::python(),
            )
        },
        &[("ROSTER_TEST_ADMIN", "admin")],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let health = roster.health("admin").await;
        let row = health["servers"][0].clone();
        if done(&row) {
            return (common::proc_kib(roster.child.0.id(), "VmHWM"), row);
        }
        assert!(std::time::Instant::now() < deadline, "never done: {row}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The JSON text of `misbehaving.py --tools n`'s tools array, in KiB (its fillers are all
/// alike).
fn listing_kib(n: usize) -> u64 {
    let filler = r#"{"name":"filler_100000","inputSchema":{"type":"object"}},"#.len();
    (n * filler / 1024) as u64
}

fn listed(row: &Value) -> bool {
    row["listing"] == "listed"
}

#[tokio::test(flavor = "multi_thread")]
async fn a_listing_costs_about_its_size_and_one_over_the_bound_is_refused_unparsed() {
    let (baseline, _) = peak_while_listing(1, "", listed).await;

    // 100,000 tools (some 5 MB), cut to max_tools = 1,000.
    let (cut_peak, row) = peak_while_listing(100_000, "max_tools = 1000", listed).await;
    assert_eq!(row["tools"], 1000, "{row}");
    let bytes = listing_kib(100_000);
    eprintln!("baseline {baseline} KiB, cut {cut_peak} KiB, listing {bytes} KiB");
    assert!(
        cut_peak <= baseline + 4 * bytes,
        "peak {cut_peak} KiB listing {bytes} KiB (baseline {baseline} KiB)"
    );

    // The same listing over max_listing_bytes (1 MiB): refused, naming the key, before it is
    // parsed.
    let (refused_peak, row) = peak_while_listing(100_000, "max_listing_bytes = 1048576", |row| {
        row["last_error"].is_string()
    })
    .await;
    eprintln!("refused {refused_peak} KiB");
    let error = row["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("max_listing_bytes"), "{row}");
    assert_eq!(row["tools"], 0, "{row}");
    assert!(
        refused_peak <= baseline + 4 * bytes,
        "peak {refused_peak} KiB refusing {bytes} KiB (baseline {baseline} KiB)"
    );
}
