//! The isolation table of `bench/RESULTS.md` (issue 39): calls of a healthy echo server's `echo`
//! with 0, 1 and 10 misbehaving servers beside it, through roster and each peer, by the clients
//! people use. `bench/run` writes one folder per row under `isolation/`: the row's `row.json`
//! (the gateway's start, CPU and memory) and one result per client (`loadgen.json`, `ts.json`,
//! `py2.json`, or the client's `.err` when it wrote none).

use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::measure::CallsReport;
use crate::report::{ClientCallsReport, ReportError};
use crate::stats::Percentiles;

/// The clients of a row, in the order `bench/run` runs them: file stem and display name.
pub const CLIENTS: [(&str, &str); 3] = [
    ("loadgen", "loadgen (Rust, rmcp)"),
    ("ts", "TypeScript SDK"),
    ("py2", "Python SDK 2.x"),
];

/// The kinds of misbehaviour, in table order: `bench/run`'s name and what the table says.
pub const KINDS: [(&str, &str); 4] = [
    ("none", "none"),
    ("hang", "hung listing"),
    ("ttl0", "`ttlMs: 0`, silent"),
    ("flood", "flood"),
];

/// One client's run in a row.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    /// The client's file stem: `loadgen`, `ts`, `py2`.
    pub client: String,
    /// Calls that returned a result.
    pub ok: usize,
    /// Calls (or steps before them) that failed or went unanswered.
    pub errors: usize,
    /// The first failure (or why the client wrote no result).
    pub first_error: Option<String>,
    /// Whether a limit cut the run short.
    pub timed_out: bool,
    /// The first `tools/list`, ms.
    pub list_ms: Option<f64>,
    /// The slowest of the few untimed warm-up calls, ms.
    pub warmup_max_ms: Option<f64>,
    /// Latency of the timed calls that succeeded.
    pub latency_us: Option<Percentiles>,
}

/// One row: a target started with the echo server and `count` servers of one kind beside it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Row {
    /// `roster`, or a peer's label.
    pub target: String,
    /// `none`, `hang`, `ttl0` or `flood`.
    pub misbehaving: String,
    /// How many misbehaving servers.
    pub count: usize,
    /// From the start of the process until it answered HTTP, ms (`None`: it did not).
    #[serde(default)]
    pub ready_ms: Option<f64>,
    /// The gateway's CPU with no client, share of one core, % (on the none and flood rows).
    #[serde(default)]
    pub cpu_idle_pct: Option<f64>,
    /// The gateway's CPU while the clients ran, %.
    #[serde(default)]
    pub cpu_calls_pct: Option<f64>,
    /// The gateway's resident memory before the clients, KiB.
    #[serde(default)]
    pub rss_start_kib: Option<u64>,
    /// After them, KiB.
    #[serde(default)]
    pub rss_end_kib: Option<u64>,
    /// Its peak, KiB.
    #[serde(default)]
    pub rss_peak_kib: Option<u64>,
    /// What went wrong with the gateway itself, if anything.
    #[serde(default)]
    pub note: String,
    /// Each client's run.
    #[serde(skip)]
    pub cells: Vec<Cell>,
    /// How many rounds of this row the run made (`bench/run` repeats roster's rows,
    /// interleaved): each cell is its client's median round by p50, the row's own figures
    /// (start, CPU, memory) its median round by CPU during the calls.
    #[serde(skip)]
    pub rounds: usize,
}

impl Row {
    fn cell(&self, client: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.client == client)
    }

    /// `none`, or `hang × 10`.
    fn beside(&self) -> String {
        let kind = KINDS
            .iter()
            .find(|(k, _)| *k == self.misbehaving)
            .map_or(self.misbehaving.as_str(), |(_, shown)| shown);
        if self.count == 0 {
            kind.to_owned()
        } else {
            format!("{} × {kind}", self.count)
        }
    }

    fn rank(&self) -> (usize, usize) {
        let kind = KINDS
            .iter()
            .position(|(k, _)| *k == self.misbehaving)
            .unwrap_or(KINDS.len());
        (kind, self.count)
    }
}

/// What a client's stderr says went wrong: its first line naming an error, or else its last
/// line that says anything; cut short.
fn last_words(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .find(|l| l.contains("Error") || l.contains("error:"))
        .or(lines.last())
        .copied()
        .unwrap_or("no output");
    line.chars().take(160).collect()
}

fn cell_from_json(client: &str, value: Value) -> Result<Cell, String> {
    if value.get("client").is_some_and(|c| !c.is_null()) {
        let list_ms = value.get("list_ms").and_then(Value::as_f64);
        let warmup_max_ms = value.get("warmup_max_ms").and_then(Value::as_f64);
        let r = ClientCallsReport::from_json(value).map_err(|e| e.to_string())?;
        Ok(Cell {
            client: client.to_owned(),
            ok: r.ok,
            errors: r.errors,
            first_error: r.first_error,
            timed_out: r.timed_out,
            list_ms,
            warmup_max_ms,
            latency_us: r.latency_us,
        })
    } else {
        let r: CallsReport = serde_json::from_value(value).map_err(|e| e.to_string())?;
        Ok(Cell {
            client: client.to_owned(),
            ok: r.ok,
            errors: r.errors,
            first_error: r.first_error,
            timed_out: r.timed_out,
            list_ms: r.list_ms,
            warmup_max_ms: r.warmup_max_ms,
            latency_us: r.latency_us,
        })
    }
}

/// Reads every row folder under `dir` (`bench/run`'s `isolation/`); none when it is absent.
pub fn read(dir: &Path) -> Result<Vec<Row>, ReportError> {
    let read_err = |path: &Path, source| ReportError::Read {
        path: path.display().to_string(),
        source,
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut folders: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("row.json").is_file())
        .collect();
    folders.sort();
    let mut rows = Vec::new();
    for folder in folders {
        let path = folder.join("row.json");
        let text = std::fs::read_to_string(&path).map_err(|e| read_err(&path, e))?;
        let mut row: Row = serde_json::from_str(&text).map_err(|e| ReportError::Parse {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        for (client, _) in CLIENTS {
            let json = folder.join(format!("{client}.json"));
            let err = folder.join(format!("{client}.err"));
            if let Ok(text) = std::fs::read_to_string(&json) {
                let value: Value = serde_json::from_str(&text).map_err(|e| ReportError::Parse {
                    path: json.display().to_string(),
                    reason: e.to_string(),
                })?;
                let cell = cell_from_json(client, value).map_err(|reason| ReportError::Parse {
                    path: json.display().to_string(),
                    reason,
                })?;
                row.cells.push(cell);
            } else if let Ok(text) = std::fs::read_to_string(&err) {
                row.cells.push(Cell {
                    client: client.to_owned(),
                    errors: 1,
                    first_error: Some(format!("no result: {}", last_words(&text))),
                    ..Cell::default()
                });
            }
        }
        row.rounds = 1;
        rows.push(row);
    }
    let mut rows = medians(rows);
    // Targets in the order they were measured (roster first), then kinds and counts in order.
    let target_rank = |t: &str| {
        [
            "roster",
            "mcp-hub",
            "mcp-proxy",
            "supergateway",
            "mcp-proxy-rs",
        ]
        .iter()
        .position(|x| *x == t)
        .unwrap_or(usize::MAX)
    };
    rows.sort_by(|a, b| {
        (target_rank(&a.target), &a.target, a.rank()).cmp(&(
            target_rank(&b.target),
            &b.target,
            b.rank(),
        ))
    });
    Ok(rows)
}

/// One row per target, kind and count: the rounds of a row (`NAME--rK` folders) made one,
/// each client's cell its median round by p50 (a cell without latency ranks last), the row's
/// own figures its median round by CPU during the calls. A middle round, not an average: every
/// figure of a cell comes from one run of its client.
fn medians(rows: Vec<Row>) -> Vec<Row> {
    let mut groups: Vec<Vec<Row>> = Vec::new();
    for row in rows {
        match groups.iter_mut().find(|g| {
            g[0].target == row.target
                && g[0].misbehaving == row.misbehaving
                && g[0].count == row.count
        }) {
            Some(group) => group.push(row),
            None => groups.push(vec![row]),
        }
    }
    groups
        .into_iter()
        .map(|mut group| {
            let rounds = group.len();
            if rounds == 1 {
                return group.remove(0);
            }
            let mut cells = Vec::new();
            for (client, _) in CLIENTS {
                let mut runs: Vec<Cell> = group
                    .iter()
                    .filter_map(|r| r.cell(client).cloned())
                    .collect();
                runs.sort_by(|a, b| {
                    let p50 = |c: &Cell| c.latency_us.map_or(f64::INFINITY, |l| l.p50);
                    p50(a).total_cmp(&p50(b))
                });
                if !runs.is_empty() {
                    let middle = runs.len() / 2;
                    cells.push(runs.swap_remove(middle));
                }
            }
            group.sort_by(|a, b| {
                let cpu = |r: &Row| r.cpu_calls_pct.unwrap_or(f64::INFINITY);
                cpu(a).total_cmp(&cpu(b))
            });
            let middle = group.len() / 2;
            let mut row = group.swap_remove(middle);
            row.cells = cells;
            row.rounds = rounds;
            row
        })
        .collect()
}

fn client_name(client: &str) -> &str {
    CLIENTS
        .iter()
        .find(|(c, _)| *c == client)
        .map_or(client, |(_, name)| name)
}

/// The row of `target` with nothing beside the echo server.
fn baseline<'a>(rows: &'a [Row], target: &str) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.target == target && r.misbehaving == "none")
}

/// A cell's p50 and p99 against the same target's and client's none row.
fn ratios(rows: &[Row], row: &Row, cell: &Cell) -> (Option<f64>, Option<f64>) {
    let base = baseline(rows, &row.target)
        .and_then(|b| b.cell(&cell.client))
        .filter(|c| c.errors == 0)
        .and_then(|c| c.latency_us);
    match (cell.latency_us, base) {
        (Some(p), Some(b)) if b.p50 > 0.0 && b.p99 > 0.0 => {
            (Some(p.p50 / b.p50), Some(p.p99 / b.p99))
        }
        _ => (None, None),
    }
}

fn fmt_ratio(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}×")
    } else if v >= 10.0 {
        format!("{v:.1}×")
    } else {
        format!("{v:.2}×")
    }
}

fn fmt_us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn fmt_opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "—".to_owned())
}

fn mib(kib: Option<u64>) -> String {
    fmt_opt(kib, |k| format!("{:.1}", k as f64 / 1024.0))
}

fn short_error(e: &str) -> String {
    e.replace('|', "/").chars().take(90).collect()
}

/// What the rounds of each target were, in words (nothing when every row ran once).
fn rounds_note(rows: &[Row]) -> String {
    let mut repeated: Vec<(&str, usize)> = Vec::new();
    for r in rows.iter().filter(|r| r.rounds > 1) {
        if !repeated.iter().any(|(t, _)| *t == r.target) {
            repeated.push((&r.target, r.rounds));
        }
    }
    if repeated.is_empty() {
        return String::new();
    }
    let each: Vec<String> = repeated
        .iter()
        .map(|(t, n)| format!("{t}'s rows ran {n} times"))
        .collect();
    format!(
        " {} (the rows taken in turn, round after round, so that the machine's drift over \
         minutes falls on every row alike); each figure is its client's median round by p50, one \
         run's figures, not an average. The other targets' rows ran once.",
        each.join(", ")
    )
}

/// The isolation section (nothing when the run had no isolation rows).
pub fn markdown(md: &mut String, rows: &[Row], wall_s: Option<f64>) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## Isolation: a healthy server beside misbehaving ones\n"
    );
    let _ = writeln!(
        md,
        "Calls of `echo` on the bench's echo server (over stdio, named `e`) through each target, \
         with 0, 1 or 10 misbehaving stdio servers beside it: a **hung listing** \
         (`tests/python/servers/misbehaving.py --hang-listing`: answers `initialize` and calls, \
         never `tools/list`), a **`ttlMs: 0`, silent** server (PyPI's `mcp-server-time`, on the \
         Python SDK 2.x: lists with `ttlMs: 0`, never announces a change) and a **flood** \
         (`misbehaving.py --flood 0`: `notifications/message` in a tight loop from the \
         handshake on). Each row starts the target afresh; once it answers HTTP, loadgen, the \
         TypeScript SDK client and the Python SDK 2.x client each open one session, list once \
         and make sequential calls (a few untimed warm-up calls first, then the timed ones), each \
         client's whole run bounded in time. Ratios are to the same target's and client's row with nothing beside it, in \
         the same run.{} supergateway serves one stdio server per process, so only its row with \
         nothing beside it exists. mcp-proxy (Python) serves each server at its own path \
         (`/servers/NAME/mcp`) of one process; the others serve every server's tools at one \
         endpoint.{}\n",
        rounds_note(rows),
        wall_s.map_or(String::new(), |w| format!(
            " The whole table took {w:.0} s of the run."
        ))
    );

    // The summary: p50 and p99 ratios, one line per target and client.
    let mut columns: Vec<(String, usize)> = Vec::new();
    for r in rows {
        if r.misbehaving != "none" && !columns.contains(&(r.misbehaving.clone(), r.count)) {
            columns.push((r.misbehaving.clone(), r.count));
        }
    }
    columns.sort_by_key(|(k, n)| {
        (
            KINDS
                .iter()
                .position(|(x, _)| x == k)
                .unwrap_or(KINDS.len()),
            *n,
        )
    });
    let header: Vec<String> = columns
        .iter()
        .map(|(k, n)| {
            Row {
                misbehaving: k.clone(),
                count: *n,
                ..Row::default()
            }
            .beside()
        })
        .collect();
    let _ = writeln!(
        md,
        "p50 / p99 of each client's calls; with servers beside the echo server, as × the same \
         target's and client's p50 / p99 with none (\"n calls\" when a bounded run made fewer \
         than asked, \"failed\" when it made none):\n"
    );
    let _ = writeln!(
        md,
        "| target | client | none: p50 / p99 µs | {} |\n| --- | --- | ---: |{}",
        header.join(" | "),
        " ---: |".repeat(header.len())
    );
    let mut targets: Vec<&str> = Vec::new();
    for r in rows {
        if !targets.contains(&r.target.as_str()) {
            targets.push(&r.target);
        }
    }
    for target in &targets {
        for (client, _) in CLIENTS {
            let of = |kind: &str, n: usize| {
                rows.iter()
                    .find(|r| r.target == *target && r.misbehaving == kind && r.count == n)
            };
            if !rows
                .iter()
                .any(|r| r.target == *target && r.cell(client).is_some())
            {
                continue;
            }
            let none = of("none", 0).and_then(|r| r.cell(client));
            let none_cell = match none {
                Some(c) => match c.latency_us {
                    Some(p) => with_count(format!("{} / {}", fmt_us(p.p50), fmt_us(p.p99)), c),
                    None => "failed".to_owned(),
                },
                None => "—".to_owned(),
            };
            let cells: Vec<String> = columns
                .iter()
                .map(|(k, n)| {
                    let Some(row) = of(k, *n) else {
                        return "—".to_owned();
                    };
                    let Some(cell) = row.cell(client) else {
                        return if row.ready_ms.is_none() {
                            "not up".to_owned()
                        } else {
                            "—".to_owned()
                        };
                    };
                    match (cell.latency_us, ratios(rows, row, cell)) {
                        (None, _) => "failed".to_owned(),
                        (Some(_), (Some(a), Some(b))) => {
                            with_count(format!("{} / {}", fmt_ratio(a), fmt_ratio(b)), cell)
                        }
                        (Some(p), _) => {
                            with_count(format!("{} / {} µs", fmt_us(p.p50), fmt_us(p.p99)), cell)
                        }
                    }
                })
                .collect();
            let _ = writeln!(
                md,
                "| {target} | {} | {none_cell} | {} |",
                client_name(client),
                cells.join(" | ")
            );
        }
    }

    let _ = writeln!(
        md,
        "\nEvery client's run in full. \"first list\" is the client's first `tools/list` through \
         the target (what waits for a server that was never listed); \"warm-up max\" the \
         slowest untimed call before the timed ones; \"max\" the slowest timed call.\n"
    );
    let _ = writeln!(
        md,
        "| target | beside the echo server | client | calls | first list ms | warm-up max ms | p50 µs | p99 µs | max µs | × none (p50) | × none (p99) | errors |\n\
         | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    );
    for row in rows {
        if row.cells.is_empty() {
            let _ = writeln!(
                md,
                "| {} | {} | — | — | — | — | — | — | — | — | — | {} |",
                row.target,
                row.beside(),
                if row.note.is_empty() {
                    "no client ran".to_owned()
                } else {
                    short_error(&row.note)
                }
            );
            continue;
        }
        for cell in &row.cells {
            let (a, b) = ratios(rows, row, cell);
            let p = cell.latency_us;
            let errors = match &cell.first_error {
                Some(e) => format!("{} ({})", cell.errors, short_error(e)),
                None => cell.errors.to_string(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {}{} | {} | {} | {} | {} | {} | {} | {} | {errors} |",
                row.target,
                row.beside(),
                client_name(&cell.client),
                cell.ok,
                if cell.timed_out { " (limit hit)" } else { "" },
                fmt_opt(cell.list_ms, |v| format!("{v:.1}")),
                fmt_opt(cell.warmup_max_ms, |v| format!("{v:.1}")),
                fmt_opt(p, |p| fmt_us(p.p50)),
                fmt_opt(p, |p| fmt_us(p.p99)),
                fmt_opt(p, |p| fmt_us(p.max)),
                fmt_opt(a, fmt_ratio),
                fmt_opt(b, fmt_ratio),
            );
        }
    }

    let _ = writeln!(
        md,
        "\nThe target's own process in each row: from its start until it answered HTTP; its CPU \
         (utime + stime from `/proc`, as a share of one core) at rest for a few seconds before \
         the clients (on the rows with nothing or a flood beside the echo server) and while they \
         ran; its resident memory before and after them (and its peak).\n"
    );
    let _ = writeln!(
        md,
        "| target | beside the echo server | answered HTTP after ms | CPU at rest % | CPU during the calls % | RSS MiB before → after (peak) | note |\n\
         | --- | --- | ---: | ---: | ---: | --- | --- |"
    );
    for row in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} → {} ({}) | {} |",
            row.target,
            row.beside(),
            fmt_opt(row.ready_ms, |v| format!("{v:.0}")),
            fmt_opt(row.cpu_idle_pct, |v| format!("{v:.1}")),
            fmt_opt(row.cpu_calls_pct, |v| format!("{v:.1}")),
            mib(row.rss_start_kib),
            mib(row.rss_end_kib),
            mib(row.rss_peak_kib),
            short_error(&row.note),
        );
    }
}

fn with_count(text: String, cell: &Cell) -> String {
    if cell.timed_out || cell.errors > 0 {
        format!("{text} ({} calls)", cell.ok)
    } else {
        text
    }
}

/// Issue 39's isolation targets for `target` (roster): each with this run's figure and whether
/// it was met (`None`: not measured).
pub fn targets(rows: &[Row], target: &str) -> Vec<(String, String, Option<bool>)> {
    let mut out = Vec::new();
    let of = |kind: &str, n: usize| {
        rows.iter()
            .find(|r| r.target == target && r.misbehaving == kind && r.count == n)
    };
    // p50 within LIMIT× of none, every client (a client with no calls misses it).
    let p50_within = |kind: &str, limit: f64| -> (String, Option<bool>) {
        let Some(row) = of(kind, 1) else {
            return ("—".into(), None);
        };
        let mut parts = Vec::new();
        let mut met = true;
        for (client, name) in CLIENTS {
            let Some(cell) = row.cell(client) else {
                continue;
            };
            match ratios(rows, row, cell).0 {
                Some(r) if cell.errors == 0 => {
                    met &= r <= limit;
                    parts.push(format!("{name} {}", fmt_ratio(r)));
                }
                _ => {
                    met = false;
                    parts.push(format!("{name} failed ({} calls)", cell.ok));
                }
            }
        }
        if parts.is_empty() {
            return ("no client ran".into(), Some(false));
        }
        (parts.join(", "), Some(met))
    };
    let (v, ok) = p50_within("ttl0", 1.15);
    out.push((
        format!("{target}: a `ttlMs: 0` silent server beside it: every client's p50 ≤ 1.15× none"),
        v,
        ok,
    ));
    // Issue 39: no call slower than 1 s at any time (warm-up calls included), and a
    // `tools/list` waits for the hung server at most once (a first listing may wait up to
    // `turn_wait` for a server never listed; after that, none).
    let hang: Vec<&Row> = rows
        .iter()
        .filter(|r| r.target == target && r.misbehaving == "hang")
        .collect();
    let names = [
        format!("{target}: a hung listing beside it: answers HTTP within 1 s of start"),
        format!("{target}: a hung listing beside it: no call slower than 1 s"),
        format!(
            "{target}: a hung listing beside it: at most one client's first tools/list slower than 1 s, per row"
        ),
    ];
    if hang.is_empty() {
        out.extend(names.into_iter().map(|n| (n, "—".to_owned(), None)));
    } else {
        let [ready_name, calls_name, lists_name] = names;
        let ready: Vec<String> = hang
            .iter()
            .map(|r| {
                format!(
                    "{}: {}",
                    r.beside(),
                    fmt_opt(r.ready_ms, |v| format!("{v:.0} ms"))
                )
            })
            .collect();
        out.push((
            ready_name,
            ready.join(", "),
            Some(hang.iter().all(|r| r.ready_ms.is_some_and(|v| v <= 1000.0))),
        ));
        let mut slowest: Option<f64> = None;
        let mut failed = 0;
        let mut slow_lists = Vec::new();
        for r in &hang {
            if r.cells.is_empty() {
                failed += 1;
            }
            let mut slow = 0;
            for c in &r.cells {
                if c.errors > 0 || c.latency_us.is_none() {
                    failed += 1;
                }
                if c.list_ms.is_none_or(|l| l > 1000.0) {
                    slow += 1;
                }
                let worst = c
                    .latency_us
                    .map(|p| p.max / 1000.0)
                    .into_iter()
                    .chain(c.warmup_max_ms)
                    .fold(0.0, f64::max);
                slowest = Some(slowest.map_or(worst, |s: f64| s.max(worst)));
            }
            slow_lists.push((r.beside(), slow, r.cells.is_empty()));
        }
        let value = match (slowest, failed) {
            (Some(s), 0) => format!("slowest {s:.0} ms"),
            (Some(s), f) => format!("slowest answered {s:.0} ms; {f} client runs with failures"),
            (None, _) => "no client ran".into(),
        };
        out.push((
            calls_name,
            value,
            Some(failed == 0 && slowest.is_some_and(|s| s <= 1000.0)),
        ));
        let lists: Vec<String> = slow_lists
            .iter()
            .map(|(beside, slow, none)| {
                if *none {
                    format!("{beside}: no client ran")
                } else {
                    format!("{beside}: {slow}")
                }
            })
            .collect();
        out.push((
            lists_name,
            lists.join(", "),
            Some(slow_lists.iter().all(|(_, slow, none)| !none && *slow <= 1)),
        ));
    }
    let (v, ok) = p50_within("flood", 1.2);
    out.push((
        format!("{target}: a flood beside it: every client's p50 ≤ 1.2× none"),
        v,
        ok,
    ));
    let flood_cpu = of("flood", 1).and_then(|r| r.cpu_idle_pct);
    out.push((
        format!("{target}: a flood beside it: its CPU at rest < 25% of a core"),
        fmt_opt(flood_cpu, |c| format!("{c:.1}%")),
        flood_cpu.map(|c| c < 25.0),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(client: &str, p50: f64, ok: usize, errors: usize) -> Cell {
        Cell {
            client: client.into(),
            ok,
            errors,
            first_error: (errors > 0).then(|| "a call unanswered at the total limit".into()),
            timed_out: errors > 0,
            list_ms: Some(2.0),
            warmup_max_ms: None,
            latency_us: (ok > 0).then_some(Percentiles {
                n: ok,
                p50,
                p90: p50,
                p99: p50 * 2.0,
                p999: p50 * 2.0,
                max: p50 * 3.0,
                mean: p50,
            }),
        }
    }

    fn row(kind: &str, n: usize, ready_ms: f64, cells: Vec<Cell>) -> Row {
        Row {
            target: "roster".into(),
            misbehaving: kind.into(),
            count: n,
            ready_ms: Some(ready_ms),
            cpu_idle_pct: Some(if kind == "flood" { 180.0 } else { 0.5 }),
            cells,
            ..Row::default()
        }
    }

    #[test]
    fn the_rounds_of_a_row_are_one_row_of_median_rounds() {
        let round = |p50: [f64; 2], cpu: f64, ready_ms: f64| Row {
            cpu_calls_pct: Some(cpu),
            ..row(
                "ttl0",
                1,
                ready_ms,
                vec![cell("loadgen", p50[0], 200, 0), cell("ts", p50[1], 200, 0)],
            )
        };
        let other = row("none", 0, 30.0, vec![cell("loadgen", 290.0, 200, 0)]);
        let rows = medians(vec![
            round([300.0, 1000.0], 9.0, 10.0),
            other,
            round([500.0, 800.0], 3.0, 30.0),
            round([400.0, 1200.0], 5.0, 20.0),
        ]);
        assert_eq!(rows.len(), 2, "one row per target, kind and count");
        let merged = rows
            .iter()
            .find(|r| r.misbehaving == "ttl0")
            .expect("the row");
        assert_eq!(merged.rounds, 3);
        let p50 = |client: &str| {
            merged
                .cell(client)
                .and_then(|c| c.latency_us)
                .map(|l| l.p50)
        };
        // Each client's middle round, each on its own: loadgen's is the third, ts's the first.
        assert_eq!(p50("loadgen"), Some(400.0));
        assert_eq!(p50("ts"), Some(1000.0));
        // The row's own figures: the round with the middle CPU during the calls.
        assert_eq!(merged.cpu_calls_pct, Some(5.0));
        assert_eq!(merged.ready_ms, Some(20.0));
        let mut md = String::new();
        markdown(&mut md, &rows, None);
        assert!(md.contains("roster's rows ran 3 times"), "{md}");
    }

    #[test]
    fn ratios_are_to_the_same_target_and_client_with_nothing_beside() {
        let rows = vec![
            row(
                "none",
                0,
                40.0,
                vec![cell("loadgen", 300.0, 200, 0), cell("ts", 800.0, 200, 0)],
            ),
            row(
                "ttl0",
                1,
                60.0,
                vec![cell("loadgen", 330.0, 200, 0), cell("ts", 1000.0, 200, 0)],
            ),
            row(
                "hang",
                1,
                10_300.0,
                vec![cell("loadgen", 10_000_000.0, 1, 1)],
            ),
            row("flood", 1, 50.0, vec![cell("loadgen", 310.0, 200, 0)]),
        ];
        let mut md = String::new();
        markdown(&mut md, &rows, Some(95.0));
        assert!(md.contains("took 95 s"), "{md}");
        assert!(
            md.contains("| roster | loadgen (Rust, rmcp) | 300 / 600 | 33333× / 33333× (1 calls) | 1.10× / 1.10× | 1.03× / 1.03× |"),
            "{md}"
        );
        assert!(
            md.contains("| roster | 1 × `ttlMs: 0`, silent | TypeScript SDK | 200 | 2.0 | — | 1000 | 2000 | 3000 | 1.25× | 1.25× | 0 |"),
            "{md}"
        );
        let t = targets(&rows, "roster");
        assert_eq!(t[0].1, "loadgen (Rust, rmcp) 1.10×, TypeScript SDK 1.25×");
        assert_eq!(t[0].2, Some(false));
        assert_eq!(t[1].1, "1 × hung listing: 10300 ms");
        assert_eq!(t[1].2, Some(false));
        assert_eq!(t[2].2, Some(false), "{t:?}");
        assert_eq!(
            t[2].1,
            "slowest answered 30000 ms; 1 client runs with failures"
        );
        assert_eq!(
            (t[3].1.as_str(), t[3].2),
            ("1 × hung listing: 0", Some(true))
        );
        assert_eq!(t[4].2, Some(true), "{t:?}");
        assert_eq!((t[5].1.as_str(), t[5].2), ("180.0%", Some(false)));
    }

    #[test]
    fn rows_and_client_results_are_read_from_their_folders() {
        let dir = std::env::temp_dir().join(format!("roster-bench-iso-{}", std::process::id()));
        let row_dir = dir.join("roster--hang--1");
        std::fs::create_dir_all(&row_dir).expect("dir");
        std::fs::write(
            row_dir.join("row.json"),
            r#"{"kind": "isolation", "target": "roster", "misbehaving": "hang", "count": 1, "ready_ms": 10312, "cpu_idle_pct": null, "cpu_calls_pct": 3.5, "rss_start_kib": 20480, "rss_end_kib": 21504, "rss_peak_kib": 22528, "note": ""}"#,
        )
        .expect("row");
        std::fs::write(
            row_dir.join("loadgen.err"),
            "Error: tools/list unanswered at the total limit\n",
        )
        .expect("err");
        std::fs::write(
            row_dir.join("ts.json"),
            r#"{"kind": "calls", "client": "typescript-sdk 1.32.2", "transport": "http", "ok": 2, "errors": 1, "first_error": "a call unanswered at the total limit", "timed_out": true, "list_ms": 10012.5, "warmup_max_ms": 4.5, "latencies_ns": [10000000000, 9000000000]}"#,
        )
        .expect("ts");
        let rows = read(&dir).expect("rows");
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.ready_ms, r.rss_end_kib), (Some(10312.0), Some(21504)));
        assert_eq!(r.cells.len(), 2);
        assert_eq!(
            r.cells[0].first_error.as_deref(),
            Some("no result: Error: tools/list unanswered at the total limit")
        );
        assert_eq!(
            (r.cells[1].list_ms, r.cells[1].warmup_max_ms),
            (Some(10012.5), Some(4.5))
        );
        assert_eq!(r.cells[1].latency_us.map(|p| p.max), Some(10_000_000.0));
        assert!(read(&dir.join("absent")).expect("none").is_empty());
    }
}
