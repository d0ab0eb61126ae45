//! `bench/RESULTS.md` and the latency plot, from the JSON files one `bench/run` wrote.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::measure::{CallsReport, PropagationReport, ScaleReport, StormReport};
use crate::stats::Percentiles;

/// One run of an official SDK client (`tests/node/bench_calls.mjs`,
/// `tests/python/clients/bench_calls.py`): one session, sequential `echo` calls.
#[derive(Debug, Clone, Deserialize)]
pub struct ClientCallsReport {
    /// Which client and version, e.g. `typescript-sdk 1.32.2`.
    pub client: String,
    /// The protocol version the client negotiated, when it tells.
    #[serde(default)]
    pub protocol_version: Option<String>,
    /// `http`, `sse` or `stdio`.
    pub transport: String,
    /// Calls that returned a result.
    pub ok: usize,
    /// Calls that failed.
    pub errors: usize,
    /// The first failure.
    #[serde(default)]
    pub first_error: Option<String>,
    /// Whether the time limit cut the run short.
    #[serde(default)]
    pub timed_out: bool,
    /// Successful calls per second.
    #[serde(default)]
    pub calls_per_s: f64,
    /// Latency of successful calls, from the raw samples the client wrote.
    #[serde(skip)]
    pub latency_us: Option<Percentiles>,
}

impl ClientCallsReport {
    /// Reads a client's JSON; the percentiles are computed here from its `latencies_ns`, by
    /// the same rule as loadgen's, whatever language the client is in.
    pub fn from_json(value: Value) -> Result<Self, serde_json::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(flatten)]
            report: ClientCallsReport,
            #[serde(default)]
            latencies_ns: Vec<u64>,
        }
        let raw: Raw = serde_json::from_value(value)?;
        Ok(Self {
            latency_us: Percentiles::from_nanos(raw.latencies_ns),
            ..raw.report
        })
    }
}

/// TypeScript first (what most desktop hosts are built on), then the Python lines in order.
fn client_rank(client: &str) -> (u8, &str) {
    (u8::from(!client.starts_with("typescript")), client)
}

/// The same-client baseline of a target: a server serving the transport itself.
fn baseline_of(transport: &str) -> &'static str {
    if transport == "stdio" {
        "direct"
    } else {
        "direct-http"
    }
}

/// Not a gateway: the baselines and roster itself.
fn is_peer(label: &str) -> bool {
    ![
        "roster",
        "roster-sandbox",
        "roster-stdio",
        "roster-remote",
        "direct",
        "direct-http",
        "everything-http",
    ]
    .contains(&label)
}

/// Everything one run measured, by kind, each with its target's label.
#[derive(Debug, Default)]
pub struct Run {
    /// `tools/call` runs of loadgen.
    pub calls: Vec<(String, CallsReport)>,
    /// `tools/call` runs of the clients people use (the official TypeScript and Python SDKs),
    /// one session each, by target label.
    pub client_calls: Vec<(String, ClientCallsReport)>,
    /// `list_changed` propagation runs.
    pub propagate: Vec<(String, PropagationReport)>,
    /// Notification storms.
    pub storm: Vec<(String, StormReport)>,
    /// Scale runs.
    pub scale: Vec<(String, ScaleReport)>,
    /// The isolation table's rows (issue 39), from the run's `isolation/` folder.
    pub isolation: Vec<crate::isolation::Row>,
    /// Targets or steps that did not run, and why.
    pub skipped: Vec<(String, String)>,
}

/// What `bench/run` records about the run itself.
#[derive(Debug, Default, Deserialize)]
pub struct Meta {
    /// When the run started (UTC).
    #[serde(default)]
    pub date: String,
    /// `nproc`.
    #[serde(default)]
    pub nproc: String,
    /// The CPU model.
    #[serde(default)]
    pub cpu: String,
    /// The exact command.
    #[serde(default)]
    pub command: String,
    /// The run's wall time, seconds.
    #[serde(default)]
    pub wall_s: Option<f64>,
    /// The isolation table's share of it, seconds.
    #[serde(default)]
    pub isolation_wall_s: Option<f64>,
    /// The machine's load around the run (other work shares the cores).
    #[serde(default)]
    pub load: String,
    /// Component → version.
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    /// What each target is, by label.
    #[serde(default)]
    pub targets: BTreeMap<String, String>,
}

/// Why the results could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The results directory or a file in it could not be read.
    #[error("could not read {path}: {source}")]
    Read {
        /// The file or directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A results file is not what loadgen writes.
    #[error("{path} is not a loadgen result: {reason}")]
    Parse {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

impl Run {
    /// Reads every `*.json` in `dir` that `loadgen` wrote (a `kind` field), plus
    /// `skipped.tsv` (label TAB reason per line) and the isolation rows under `isolation/`.
    pub fn read(dir: &Path) -> Result<Self, ReportError> {
        let read_err = |path: &Path, source| ReportError::Read {
            path: path.display().to_string(),
            source,
        };
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| read_err(dir, e))?
            .flatten()
            .map(|e| e.path())
            .collect();
        names.sort();
        let mut run = Self {
            isolation: crate::isolation::read(&dir.join("isolation"))?,
            ..Self::default()
        };
        for path in names {
            if path.file_name().is_some_and(|n| n == "skipped.tsv") {
                let text = std::fs::read_to_string(&path).map_err(|e| read_err(&path, e))?;
                run.skipped
                    .extend(text.lines().filter(|l| !l.trim().is_empty()).map(|l| {
                        let (label, reason) = l.split_once('\t').unwrap_or((l, ""));
                        (label.to_owned(), reason.to_owned())
                    }));
                continue;
            }
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(|e| read_err(&path, e))?;
            let parse_err = |reason: String| ReportError::Parse {
                path: path.display().to_string(),
                reason,
            };
            let value: Value = serde_json::from_str(&text).map_err(|e| parse_err(e.to_string()))?;
            let label = value["label"].as_str().unwrap_or("?").to_owned();
            let kind = value["kind"].as_str().map(str::to_owned);
            let client = value.get("client").is_some_and(|c| !c.is_null());
            let parsed = match kind.as_deref() {
                Some("calls") if client => ClientCallsReport::from_json(value)
                    .map(|report| run.client_calls.push((label, report)))
                    .map_err(|e| e.to_string()),
                Some("calls") => push_parsed(&mut run.calls, label, value),
                Some("propagate") => push_parsed(&mut run.propagate, label, value),
                Some("storm") => push_parsed(&mut run.storm, label, value),
                Some("scale") => push_parsed(&mut run.scale, label, value),
                _ => Ok(()),
            };
            parsed.map_err(parse_err)?;
        }
        // The order targets were measured in: direct, roster, then the peers.
        let rank = |label: &str| match label {
            "direct" => 0,
            "direct-http" => 1,
            "everything-http" => 2,
            "roster" => 3,
            "roster-sandbox" => 4,
            "roster-stdio" => 5,
            "roster-remote" => 6,
            _ => 7,
        };
        run.calls.sort_by_key(|(l, r)| (r.sessions, rank(l)));
        run.client_calls.sort_by(|(a, x), (b, y)| {
            (client_rank(&x.client), rank(a)).cmp(&(client_rank(&y.client), rank(b)))
        });
        run.propagate.sort_by_key(|(l, _)| rank(l));
        run.storm.sort_by_key(|(l, _)| rank(l));
        run.scale
            .sort_by(|(a, x), (b, y)| (rank(a), &y.client).cmp(&(rank(b), &x.client)));
        Ok(run)
    }

    fn direct_calls(&self, sessions: usize) -> Option<&CallsReport> {
        self.calls
            .iter()
            .find(|(l, r)| l == "direct" && r.sessions == sessions)
            .map(|(_, r)| r)
    }
}

fn fmt_f(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn ratio(v: f64, base: f64) -> String {
    if base > 0.0 {
        format!("{:.2}×", v / base)
    } else {
        "—".to_owned()
    }
}

fn check(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "not measured",
    }
}

/// The whole of `RESULTS.md`. `extra` sections (title, markdown) are appended verbatim.
pub fn markdown(run: &Run, meta: &Meta, plot: Option<&str>, extra: &[(String, String)]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# roster benchmarks\n");
    let _ = writeln!(
        md,
        "Written by `bench/run` from one run; every figure below comes from that run. \
         Do not edit by hand: edit `bench/analysis.md` (included at the end) or re-run.\n"
    );
    let _ = writeln!(md, "- date: {}", meta.date);
    let _ = writeln!(md, "- machine: `nproc` = {}, {}", meta.nproc, meta.cpu);
    let _ = writeln!(md, "- command: `{}`", meta.command);
    if !meta.load.is_empty() {
        let _ = writeln!(md, "- {}", meta.load);
    }
    if let Some(wall) = meta.wall_s {
        let _ = writeln!(md, "- wall time of the run: {wall:.0} s");
    }
    let _ = writeln!(md, "\n| component | version |\n| --- | --- |");
    for (k, v) in &meta.versions {
        let _ = writeln!(md, "| {k} | {v} |");
    }
    if !meta.targets.is_empty() {
        let _ = writeln!(md, "\n| target | what the client talks to |\n| --- | --- |");
        for (k, v) in &meta.targets {
            let _ = writeln!(md, "| {k} | {v} |");
        }
    }

    let _ = writeln!(md, "\n## Targets of issue 7\n");
    let labels: Vec<&str> = ["roster", "roster-stdio"]
        .into_iter()
        .filter(|l| run.calls.iter().any(|(c, _)| c == l))
        .collect();
    if labels.is_empty() {
        let _ = writeln!(
            md,
            "roster was not measured in this run (see \"Not measured\")."
        );
    } else {
        let _ = writeln!(
            md,
            "| target | {} |\n| --- |{}",
            labels.join(" | "),
            " --- |".repeat(labels.len())
        );
        let columns: Vec<_> = labels.iter().map(|l| targets_for(run, l)).collect();
        for (row, (name, _, _)) in columns[0].iter().enumerate() {
            let cells: Vec<String> = columns
                .iter()
                .map(|c| format!("{} ({})", c[row].1, check(c[row].2)))
                .collect();
            let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
        }
    }

    let issue12 = client_targets(run);
    if !issue12.is_empty() {
        let _ = writeln!(md, "\n## Targets of issue 12 (the clients people use)\n");
        let _ = writeln!(md, "| target | this run |\n| --- | --- |");
        for (name, value, ok) in &issue12 {
            let _ = writeln!(md, "| {name} | {value} ({}) |", check(*ok));
        }
    }

    let issue39 = issue39_targets(run);
    if !issue39.is_empty() {
        let _ = writeln!(md, "\n## Targets of issue 39 (the Rust peer, isolation)\n");
        let _ = writeln!(
            md,
            "The fast-path targets as ratios to the `mcp-proxy` crate (`mcp-proxy-rs`, \
             `mcp-proxy-rs-remote`) measured in the same run, 1 session of loadgen; \
             \"added p50\" is the target's p50 minus `direct-http`'s (both fronts speak \
             streamable HTTP). The isolation targets read the isolation table below.\n"
        );
        let _ = writeln!(md, "| target | this run |\n| --- | --- |");
        for (name, value, ok) in &issue39 {
            let _ = writeln!(md, "| {name} | {value} ({}) |", check(*ok));
        }
    }

    calls_section(&mut md, run, plot);
    client_calls_section(&mut md, run);
    propagation_section(&mut md, run);
    storm_section(&mut md, run);
    crate::isolation::markdown(&mut md, &run.isolation, meta.isolation_wall_s);
    scale_section(&mut md, run);

    if !run.skipped.is_empty() {
        let _ = writeln!(md, "\n## Not measured in this run\n");
        for (label, reason) in &run.skipped {
            let _ = writeln!(md, "- **{label}**: {reason}");
        }
    }
    for (title, body) in extra {
        let _ = writeln!(md, "\n## {title}\n\n{}", body.trim());
    }
    md
}

/// The `tools/call` table of loadgen, its added-latency lines and the plot (nothing when the run has none).
fn calls_section(md: &mut String, run: &Run, plot: Option<&str>) {
    if run.calls.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n## `tools/call` of `echo`\n");
    let _ = writeln!(
        md,
        "Ratios are to `direct` at the same number of sessions (loadgen → echo server over stdio; \
         with 16 sessions, 16 workers share the one stdio connection, as sessions share the one \
         server behind a gateway). `direct-http` is the echo server serving streamable HTTP \
         itself on the stack roster's front uses. \"+p50\" is the latency the path adds to \
         `direct` at the median. \"CPU µs/call\" is the CPU time (utime + stime, from `/proc`) \
         of the process the client talks to — the gateway itself, not the echo server behind \
         it; for `direct` and `direct-http`, the echo server — over the timed calls, per call.\n"
    );
    let _ = writeln!(
        md,
        "| target | sessions | calls | calls/s | × direct | p50 µs | +p50 µs | p90 µs | p99 µs | max µs | CPU µs/call | errors |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for (label, r) in &run.calls {
        let direct = run.direct_calls(r.sessions);
        let (p50, p90, p99, max) = r
            .latency_us
            .map(|p| (fmt_f(p.p50), fmt_f(p.p90), fmt_f(p.p99), fmt_f(p.max)))
            .unwrap_or_default();
        let added = match (r.latency_us, direct.and_then(|d| d.latency_us)) {
            (Some(p), Some(d)) if label != "direct" => format!("{:+.0}", p.p50 - d.p50),
            _ => "—".to_owned(),
        };
        let times = direct
            .map(|d| ratio(r.calls_per_s, d.calls_per_s))
            .unwrap_or_else(|| "—".to_owned());
        let errors = errors_cell(r.errors, r.first_error.as_deref());
        let cpu = r
            .server_cpu_us_per_call
            .map(fmt_f)
            .unwrap_or_else(|| "—".to_owned());
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {times} | {p50} | {added} | {p90} | {p99} | {max} | {cpu} | {errors}{} |",
            r.sessions,
            r.ok,
            fmt_f(r.calls_per_s),
            if r.timed_out { ", time limit hit" } else { "" }
        );
    }
    for sessions in [1, 16] {
        let p50 = |label: &str| {
            run.calls
                .iter()
                .find(|(l, r)| l == label && r.sessions == sessions)
                .and_then(|(_, r)| r.latency_us)
                .map(|p| p.p50)
        };
        if let (Some(h), Some(d)) = (p50("direct-http"), p50("direct")) {
            let mut line = format!(
                "\n{sessions} session(s), at p50: the HTTP front itself (direct-http − direct) costs \
                 {:+.0} µs",
                h - d
            );
            if let Some(r) = p50("roster") {
                let _ = write!(
                    line,
                    "; roster's forwarding behind it (roster − direct-http) {:+.0} µs",
                    r - h
                );
            }
            if let (Some(r), Some(b)) = (p50("roster"), p50("roster-sandbox")) {
                let _ = write!(
                    line,
                    "; the echo server sandboxed behind it (roster-sandbox − roster) {:+.0} µs",
                    b - r
                );
            }
            if let Some(s) = p50("roster-stdio") {
                let _ = write!(
                    line,
                    "; roster with stdio on both sides (roster-stdio − direct) {:+.0} µs",
                    s - d
                );
            }
            if let Some(r) = p50("roster-remote") {
                let _ = write!(
                    line,
                    "; roster in front of the echo server serving HTTP itself \
                     (roster-remote − direct-http) {:+.0} µs",
                    r - h
                );
            }
            let _ = writeln!(md, "{line}.");
        }
    }
    if let Some(plot) = plot {
        let _ = writeln!(md, "\n![tools/call latency percentiles per target]({plot})");
    }
}

/// The `list_changed` propagation table (nothing when the run has none).
fn propagation_section(md: &mut String, run: &Run) {
    if run.propagate.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n## `list_changed` propagation\n");
    let _ = writeln!(
        md,
        "The echo server adds a tool and sends `notifications/tools/list_changed`; the client \
         waits for the notification, then lists until the tool shows. Times run from the \
         server's notification (a wall-clock stamp in the tool result) to the client.\n"
    );
    let _ = writeln!(
        md,
        "| target | rounds | notified | new tool listed | notice p50 ms | visible p50 ms | visible max ms | × direct (p50) |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let direct_visible = run
        .propagate
        .iter()
        .find(|(l, _)| l == "direct")
        .and_then(|(_, r)| r.visible_us)
        .map(|p| p.p50);
    for (label, r) in &run.propagate {
        let ms = |v: Option<f64>| {
            v.map(|v| fmt_f(v / 1000.0))
                .unwrap_or_else(|| "—".to_owned())
        };
        let times = match (r.visible_us, direct_visible) {
            (Some(p), Some(d)) if label != "direct" => ratio(p.p50, d),
            _ => "—".to_owned(),
        };
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} | {} | {} | {times} |",
            r.rounds.len(),
            r.notified,
            r.visible,
            ms(r.notify_us.map(|p| p.p50)),
            ms(r.visible_us.map(|p| p.p50)),
            ms(r.visible_us.map(|p| p.max)),
        );
    }
}

/// The storm table (nothing when the run has none).
fn storm_section(md: &mut String, run: &Run) {
    if run.storm.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n## Storm of notifications\n");
    let _ = writeln!(
        md,
        "The echo server sends a burst of `list_changed` without changing a tool; the count is \
         the `tools/list` requests it answered afterwards (read once the count held still). \
         `direct` has no gateway re-listing, so its count is the client's own (none).\n"
    );
    let _ = writeln!(
        md,
        "| target | notifications | tools/list answered | notices the client got | read after ms |\n\
         | --- | ---: | ---: | ---: | ---: |"
    );
    for (label, r) in &run.storm {
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} |",
            r.sent, r.listings_caused, r.client_notices, r.settled_after_ms
        );
    }
}

/// The scale table (nothing when the run has none).
fn scale_section(md: &mut String, run: &Run) {
    if run.scale.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n## Scale\n");
    let _ = writeln!(
        md,
        "`roster` fronts 50 echo servers × 100 filler tools (HTTP in front, stdio behind); \
         `roster-stdio` is the same roster spoken to over stdio; `direct` is one echo server \
         with 5,000 filler tools over stdio. Cold start runs from spawning the process to the \
         first complete `tools/list`. Client `rmcp` is loadgen's rmcp client, which parses \
         every tool into rmcp's types; `raw` reads each answer's bytes and only counts the \
         tools (`bench/src/raw.rs`), so its figures are the server's answer and the transport.\n"
    );
    let _ = writeln!(
        md,
        "| target | client | tools | pages | cold start ms | full listing p50 µs | p99 µs | first page p50 µs | RSS MiB | peak MiB | servers' RSS MiB |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for (label, r) in &run.scale {
        let mib = |k: Option<u64>| {
            k.map(|k| format!("{:.1}", k as f64 / 1024.0))
                .unwrap_or_else(|| "—".to_owned())
        };
        let p = |v: Option<f64>| v.map(fmt_f).unwrap_or_else(|| "—".to_owned());
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.client,
            r.tools_listed,
            r.pages,
            fmt_f(r.cold_start_ms),
            p(r.list_all_us.map(|x| x.p50)),
            p(r.list_all_us.map(|x| x.p99)),
            p(r.list_page_us.map(|x| x.p50)),
            mib(r.rss_kib),
            mib(r.rss_peak_kib),
            if r.children > 0 {
                mib(r.children_rss_kib)
            } else {
                "—".to_owned()
            },
        );
    }
}

/// A `tools/call` run of any client, as the by-client table shows it.
struct ClientRow<'a> {
    client: &'a str,
    label: &'a str,
    protocol: Option<&'a str>,
    transport: &'a str,
    ok: usize,
    errors: usize,
    first_error: Option<&'a str>,
    timed_out: bool,
    calls_per_s: f64,
    latency_us: Option<Percentiles>,
}

const LOADGEN: &str = "loadgen (Rust, rmcp)";

/// Every client's 1-session runs: loadgen's, then each SDK client's, in measuring order.
fn client_rows(run: &Run) -> Vec<ClientRow<'_>> {
    let loadgen = run
        .calls
        .iter()
        .filter(|(_, r)| r.sessions == 1)
        .map(|(label, r)| ClientRow {
            client: LOADGEN,
            label,
            protocol: None,
            transport: &r.transport,
            ok: r.ok,
            errors: r.errors,
            first_error: r.first_error.as_deref(),
            timed_out: r.timed_out,
            calls_per_s: r.calls_per_s,
            latency_us: r.latency_us,
        });
    let sdks = run.client_calls.iter().map(|(label, r)| ClientRow {
        client: &r.client,
        label,
        protocol: r.protocol_version.as_deref(),
        transport: &r.transport,
        ok: r.ok,
        errors: r.errors,
        first_error: r.first_error.as_deref(),
        timed_out: r.timed_out,
        calls_per_s: r.calls_per_s,
        latency_us: r.latency_us,
    });
    loadgen.chain(sdks).collect()
}

/// The p50 of `client` against `label`, when that run had successful calls.
fn p50_of(rows: &[ClientRow<'_>], client: &str, label: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.client == client && r.label == label && r.ok > 0)
        .and_then(|r| r.latency_us)
        .map(|p| p.p50)
}

fn client_calls_section(md: &mut String, run: &Run) {
    if run.client_calls.is_empty() {
        return;
    }
    let rows = client_rows(run);
    let _ = writeln!(
        md,
        "\n## `tools/call` of `echo` with the clients people use\n\n\
         One session per client: warm-up calls, then sequential timed calls on one keep-alive \
         connection (the official TypeScript SDK's `Client` with `StreamableHTTPClientTransport`, \
         `SSEClientTransport` for mcp-hub, `StdioClientTransport` for the stdio targets; the \
         Python SDK 1.x `ClientSession` with `streamablehttp_client`; the Python SDK 2.x `Client` \
         in `auto` mode), in the same run as the table above, whose 1-session rows are repeated \
         here as `{LOADGEN}`. \"× baseline\" is the p50 against the same client's p50 on the \
         server serving that transport itself: `direct-http` for HTTP targets, `direct` for \
         stdio targets. `everything-http` (server-everything serving streamable HTTP itself) is \
         a second HTTP baseline, on the TypeScript SDK's server stack. Percentiles are computed \
         from every client's raw samples by one rule.\n"
    );
    let _ = writeln!(
        md,
        "| client | target | protocol | calls | calls/s | p50 µs | p90 µs | p99 µs | × baseline (p50) | errors |\n\
         | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for r in &rows {
        let baseline = baseline_of(r.transport);
        let (p50, p90, p99) = r
            .latency_us
            .map(|p| (fmt_f(p.p50), fmt_f(p.p90), fmt_f(p.p99)))
            .unwrap_or_default();
        let times = match (r.latency_us, p50_of(&rows, r.client, baseline)) {
            (Some(p), Some(b)) if r.label != baseline => {
                format!("{} ({baseline})", ratio(p.p50, b))
            }
            _ => "—".to_owned(),
        };
        let errors = errors_cell(r.errors, r.first_error);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {p50} | {p90} | {p99} | {times} | {errors}{} |",
            r.client,
            r.label,
            r.protocol.unwrap_or("—"),
            r.ok,
            fmt_f(r.calls_per_s),
            if r.timed_out { ", time limit hit" } else { "" }
        );
    }
}

/// The figures issue 12 sets for each SDK client: roster over HTTP within 10% of the same
/// client against a server serving streamable HTTP itself, and faster than every peer.
pub fn client_targets(run: &Run) -> Vec<(String, String, Option<bool>)> {
    let rows = client_rows(run);
    let mut clients: Vec<&str> = run
        .client_calls
        .iter()
        .map(|(_, r)| r.client.as_str())
        .collect();
    clients.sort_by_key(|c| client_rank(c));
    clients.dedup();
    let mut out = Vec::new();
    for client in clients {
        let roster = p50_of(&rows, client, "roster");
        for baseline in ["direct-http", "everything-http"] {
            let base = p50_of(&rows, client, baseline);
            if baseline != "direct-http" && base.is_none() {
                continue;
            }
            let times = roster.zip(base).map(|(r, b)| r / b);
            out.push((
                format!("{client}: p50 through roster over HTTP ≤ 1.10× {baseline}"),
                match (times, roster, base) {
                    (Some(t), Some(r), Some(b)) => {
                        format!("{t:.2}× ({} vs {} µs)", fmt_f(r), fmt_f(b))
                    }
                    _ => "—".into(),
                },
                times.map(|t| t <= 1.10),
            ));
        }
        let fastest_peer = rows
            .iter()
            .filter(|r| r.client == client && is_peer(r.label) && r.ok > 0)
            .filter_map(|r| Some((r.label, r.latency_us?.p50)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        out.push((
            format!("{client}: roster over HTTP faster at p50 than every peer"),
            match (roster, fastest_peer) {
                (Some(r), Some((l, p))) => {
                    format!("{} µs vs {} µs ({l}, the fastest peer)", fmt_f(r), fmt_f(p))
                }
                _ => "—".into(),
            },
            roster.zip(fastest_peer).map(|(r, (_, p))| r < p),
        ));
    }
    out
}

/// The figures issue 39 sets: roster's own CPU per forwarded call at most 0.7× the `mcp-proxy`
/// crate's and its added p50 at most the crate's, with the echo server behind both over stdio
/// and over HTTP (1 session of loadgen, the same run); then the isolation targets.
pub fn issue39_targets(run: &Run) -> Vec<(String, String, Option<bool>)> {
    let one = |label: &str| {
        run.calls
            .iter()
            .find(|(l, r)| l == label && r.sessions == 1 && r.ok > 0)
            .map(|(_, r)| r)
    };
    let mut out = Vec::new();
    let base = one("direct-http").and_then(|d| d.latency_us.map(|p| p.p50));
    for (roster, peer, behind) in [
        ("roster", "mcp-proxy-rs", "over stdio"),
        ("roster-remote", "mcp-proxy-rs-remote", "serving HTTP"),
    ] {
        let (r, p) = (one(roster), one(peer));
        if r.is_none() && p.is_none() {
            continue;
        }
        let cpu = |c: Option<&CallsReport>| c.and_then(|c| c.server_cpu_us_per_call);
        let times = cpu(r).zip(cpu(p)).map(|(r, p)| r / p);
        out.push((
            format!(
                "{roster}: own CPU per forwarded call ≤ 0.7× {peer}'s (echo server {behind} behind both)"
            ),
            match (cpu(r), cpu(p), times) {
                (Some(r), Some(p), Some(t)) => format!("{t:.2}× ({} vs {} µs)", fmt_f(r), fmt_f(p)),
                _ => "—".into(),
            },
            times.map(|t| t <= 0.7),
        ));
        let added = |c: Option<&CallsReport>| {
            c.and_then(|c| c.latency_us)
                .zip(base)
                .map(|(p, b)| p.p50 - b)
        };
        let (ra, pa) = (added(r), added(p));
        out.push((
            format!("{roster}: added p50 ≤ {peer}'s (echo server {behind} behind both)"),
            match (ra, pa) {
                (Some(r), Some(p)) => format!("{r:+.0} µs vs {p:+.0} µs"),
                _ => "—".into(),
            },
            ra.zip(pa).map(|(r, p)| r <= p),
        ));
    }
    if !run.isolation.is_empty() {
        out.extend(crate::isolation::targets(&run.isolation, "roster"));
    }
    out
}

/// The figures issue 7 sets, each with whether this run met it (`None`: not measured).
pub fn targets(run: &Run) -> Vec<(&'static str, String, Option<bool>)> {
    targets_for(run, "roster")
}

/// [`targets`] for the roster run under `roster` (e.g. `roster-stdio`).
pub fn targets_for(run: &Run, roster: &str) -> Vec<(&'static str, String, Option<bool>)> {
    let calls = |label: &str, sessions: usize| {
        run.calls
            .iter()
            .find(|(l, r)| l == label && r.sessions == sessions && r.ok > 0)
            .map(|(_, r)| r)
    };
    let mut out = Vec::new();
    let added = calls(roster, 1)
        .zip(calls("direct", 1))
        .and_then(|(r, d)| Some(r.latency_us?.p50 - d.latency_us?.p50));
    out.push((
        "roster adds < 50 µs at p50 (1 session)",
        added
            .map(|a| format!("{a:+.0} µs"))
            .unwrap_or_else(|| "—".into()),
        added.map(|a| a < 50.0),
    ));
    let kept = calls(roster, 16)
        .zip(calls("direct", 16))
        .map(|(r, d)| r.calls_per_s / d.calls_per_s);
    out.push((
        "roster keeps ≥ 90% of direct throughput (16 sessions)",
        kept.map(|k| format!("{:.0}%", k * 100.0))
            .unwrap_or_else(|| "—".into()),
        kept.map(|k| k >= 0.9),
    ));
    for sessions in [1, 16] {
        let fastest_peer = run
            .calls
            .iter()
            .filter(|(l, r)| is_peer(l) && r.sessions == sessions && r.ok > 0)
            .map(|(l, r)| (l.clone(), r.calls_per_s))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let times = calls(roster, sessions)
            .zip(fastest_peer.as_ref())
            .map(|(r, (l, p))| (r.calls_per_s / p, l.clone()));
        out.push((
            if sessions == 1 {
                "roster ≥ 10× the fastest peer's throughput (1 session)"
            } else {
                "roster ≥ 10× the fastest peer's throughput (16 sessions)"
            },
            times
                .as_ref()
                .map(|(t, l)| format!("{t:.1}× ({l})"))
                .unwrap_or_else(|| "—".into()),
            times.map(|(t, _)| t >= 10.0),
        ));
    }
    // Issue 39: a change is announced at once (leading edge), so the new tool shows about as
    // soon as through the fastest peer that forwards the notification.
    let visible_p50 = |label: &str| {
        run.propagate
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, r)| r)
            .filter(|r| r.visible == r.rounds.len() && !r.rounds.is_empty())
            .and_then(|r| r.visible_us.map(|p| p.p50))
    };
    let roster_visible = run
        .propagate
        .iter()
        .find(|(l, _)| l == roster)
        .map(|(_, r)| r);
    let fastest_peer = run
        .propagate
        .iter()
        .filter(|(l, _)| is_peer(l))
        .filter_map(|(l, _)| Some((l.as_str(), visible_p50(l)?)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    out.push((
        "list_changed to client-visible: p50 within 2× of the fastest peer",
        match (roster_visible, visible_p50(roster), fastest_peer) {
            (_, Some(r), Some((l, p))) => format!(
                "{} ms vs {} ms ({l}): {:.1}×",
                fmt_f(r / 1000.0),
                fmt_f(p / 1000.0),
                r / p
            ),
            (_, Some(r), None) => format!("{} ms (no peer showed the tool)", fmt_f(r / 1000.0)),
            (Some(r), None, _) => format!("{} of {} rounds visible", r.visible, r.rounds.len()),
            _ => "—".into(),
        },
        match (roster_visible, visible_p50(roster), fastest_peer) {
            (_, Some(r), Some((_, p))) => Some(r <= 2.0 * p),
            (Some(_), None, _) => Some(false),
            _ => None,
        },
    ));
    let storm = run.storm.iter().find(|(l, _)| l == roster).map(|(_, r)| r);
    out.push((
        "storm of 1,000 notifications: at most two listings",
        storm
            .map(|s| format!("{} tools/list", s.listings_caused))
            .unwrap_or_else(|| "—".into()),
        storm.map(|s| s.listings_caused <= 2),
    ));
    let scale = run
        .scale
        .iter()
        .find(|(l, r)| l == roster && r.client == "rmcp")
        .map(|(_, r)| r);
    out.push((
        "50 × 100 tools: cold start < 2 s",
        scale
            .map(|s| format!("{:.0} ms", s.cold_start_ms))
            .unwrap_or_else(|| "—".into()),
        scale.map(|s| s.cold_start_ms < 2000.0),
    ));
    let list_p50 = scale.and_then(|s| s.list_all_us.map(|p| p.p50));
    out.push((
        "50 × 100 tools: tools/list p50 < 1 ms (full listing, all pages)",
        list_p50
            .map(|p| format!("{:.0} µs", p))
            .unwrap_or_else(|| "—".into()),
        list_p50.map(|p| p < 1000.0),
    ));
    // Issue 20's figure: roster's own time for the whole listing over this column's
    // transport, read by the raw client.
    let raw = run
        .scale
        .iter()
        .find(|(l, r)| l == roster && r.client == "raw")
        .and_then(|(_, r)| r.list_all_us.map(|p| p.p50));
    out.push((
        "50 × 100 tools: full tools/list < 5 ms (raw client)",
        raw.map(|p| format!("{:.1} ms", p / 1000.0))
            .unwrap_or_else(|| "—".into()),
        raw.map(|p| p < 5000.0),
    ));
    let rss = scale.and_then(|s| s.rss_kib);
    out.push((
        "50 × 100 tools: roster RSS < 40 MiB",
        rss.map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
            .unwrap_or_else(|| "—".into()),
        rss.map(|k| k < 40 * 1024),
    ));
    out
}

/// One line per `tools/call` run: latency at p50, p90, p99, p99.9 and max.
pub fn plot_series(run: &Run) -> Vec<(String, [f64; 5])> {
    run.calls
        .iter()
        .filter_map(|(label, r)| {
            let p = r.latency_us?;
            Some((
                format!("{label} ×{}", r.sessions),
                [p.p50, p.p90, p.p99, p.p999, p.max],
            ))
        })
        .collect()
}

/// Parses one result file's JSON as `T` and keeps it under its target's label.
fn push_parsed<T: serde::de::DeserializeOwned>(
    into: &mut Vec<(String, T)>,
    label: String,
    value: Value,
) -> Result<(), String> {
    let parsed = serde_json::from_value(value).map_err(|e| e.to_string())?;
    into.push((label, parsed));
    Ok(())
}

/// A table's errors cell: how many, and the first one's text (cut short, pipes replaced so the
/// Markdown row holds).
fn errors_cell(errors: usize, first: Option<&str>) -> String {
    match first {
        Some(e) => format!(
            "{errors} ({})",
            e.replace('|', "/").chars().take(80).collect::<String>()
        ),
        None => errors.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Percentiles;

    fn calls(sessions: usize, calls_per_s: f64, p50: f64) -> CallsReport {
        let p = Percentiles {
            n: 10,
            p50,
            p90: p50,
            p99: p50,
            p999: p50,
            max: p50,
            mean: p50,
        };
        CallsReport {
            transport: "stdio".into(),
            sessions,
            calls_per_session: 10,
            tool: "echo".into(),
            ok: 10,
            errors: 0,
            first_error: None,
            timed_out: false,
            elapsed_s: 1.0,
            calls_per_s,
            latency_us: Some(p),
            list_ms: None,
            server_cpu_us_per_call: None,
            server_cpu_pct: None,
            warmup_max_ms: None,
        }
    }

    fn sdk_run(client: &str, transport: &str, p50_us: u64) -> ClientCallsReport {
        let samples: Vec<u64> = [p50_us - 100, p50_us, p50_us + 100]
            .iter()
            .map(|us| us * 1_000)
            .collect();
        ClientCallsReport::from_json(serde_json::json!({
            "kind": "calls", "client": client, "transport": transport, "ok": samples.len(),
            "errors": 0, "calls_per_s": 10.0, "latencies_ns": samples,
        }))
        .expect("a client's JSON")
    }

    #[test]
    fn sdk_clients_are_compared_with_their_own_baseline_and_the_peers() {
        let ts = "typescript-sdk 1.32.2";
        let run = Run {
            client_calls: vec![
                ("mcp-hub".into(), sdk_run(ts, "sse", 5300)),
                ("roster".into(), sdk_run(ts, "http", 5400)),
                ("direct-http".into(), sdk_run(ts, "http", 5000)),
                ("everything-http".into(), sdk_run(ts, "http", 6000)),
                ("roster-stdio".into(), sdk_run(ts, "stdio", 900)),
                ("direct".into(), sdk_run(ts, "stdio", 600)),
            ],
            ..Run::default()
        };
        let t = client_targets(&run);
        assert_eq!(t.len(), 3, "{t:?}");
        assert_eq!(t[0].1, "1.08× (5400 vs 5000 µs)");
        assert_eq!(t[0].2, Some(true));
        assert_eq!(t[1].1, "0.90× (5400 vs 6000 µs)", "{t:?}");
        assert_eq!(t[2].2, Some(false), "mcp-hub is faster: {t:?}");
        let md = markdown(&run, &Meta::default(), None, &[]);
        assert!(
            md.contains("| typescript-sdk 1.32.2 | roster | — | 3 | 10.0 | 5400 | 5500 | 5500 | 1.08× (direct-http) | 0 |"),
            "{md}"
        );
        assert!(
            md.contains("| typescript-sdk 1.32.2 | roster-stdio | — | 3 | 10.0 | 900 | 1000 | 1000 | 1.50× (direct) | 0 |"),
            "{md}"
        );
    }

    #[test]
    fn targets_compare_roster_with_direct_and_the_fastest_peer() {
        let run = Run {
            calls: vec![
                ("direct".into(), calls(1, 1000.0, 100.0)),
                ("roster".into(), calls(1, 900.0, 180.0)),
                ("peer-a".into(), calls(1, 50.0, 900.0)),
                ("peer-b".into(), calls(1, 120.0, 800.0)),
                ("direct".into(), calls(16, 4000.0, 100.0)),
                ("roster".into(), calls(16, 3800.0, 100.0)),
            ],
            ..Run::default()
        };
        let t = targets(&run);
        assert_eq!(t[0].1, "+80 µs");
        assert_eq!(t[0].2, Some(false));
        assert_eq!((t[1].1.as_str(), t[1].2), ("95%", Some(true)));
        assert_eq!((t[2].1.as_str(), t[2].2), ("7.5× (peer-b)", Some(false)));
        assert_eq!(t[3].2, None, "no peer at 16 sessions");
        assert!(t.iter().skip(4).all(|(_, _, ok)| ok.is_none()));
        let md = markdown(&run, &Meta::default(), Some("latency.png"), &[]);
        assert!(
            md.contains("| roster | 1 | 10 | 900 | 0.90× | 180 | +80 |"),
            "{md}"
        );
        assert!(md.contains("![tools/call latency percentiles per target](latency.png)"));
    }
}
