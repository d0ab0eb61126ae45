//! The measurements `loadgen` makes. Every loop here is bounded in count and in time.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, JsonObject, PaginatedRequestParams, Tool};
use rmcp::service::Peer;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Barrier;

use crate::client::{
    Session, Target, Watcher, call_json, connect, connect_with_pid, lists_tool, resolve_tool,
};
use crate::echo::unix_micros;
use crate::stats::Percentiles;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What `calls` measures.
#[derive(Debug, Clone)]
pub struct CallsConfig {
    /// Where to send the calls.
    pub target: Target,
    /// Concurrent sessions (HTTP: one MCP session each; stdio: workers sharing the one child).
    pub sessions: usize,
    /// Timed calls per session.
    pub calls: usize,
    /// Untimed calls per session before timing starts.
    pub warmup: usize,
    /// Timing stops at this limit even if calls remain.
    pub time_limit: Duration,
    /// The echo server's tool to call (found under any exposed name, see
    /// [`resolve_tool`]); `echo` for the figures of `bench/run`.
    pub tool: String,
    /// Its arguments; `None` is `echo`'s `{"text": "hello from session N"}`.
    pub arguments: Option<JsonObject>,
    /// A process whose CPU time (utime + stime) is read over the timed phase: the server or
    /// gateway behind an HTTP target. A stdio target's spawned child is read without it.
    pub cpu_pid: Option<u32>,
    /// The whole run — connecting, the first listing, warm-up and timed calls — ends at this
    /// limit; a call still unanswered then counts as an error. `None`: only `time_limit`
    /// bounds the timed phase.
    pub total_limit: Option<Duration>,
}

impl CallsConfig {
    /// `echo(text)` calls: what `bench/run` measures.
    pub fn echo(
        target: Target,
        sessions: usize,
        calls: usize,
        warmup: usize,
        time_limit: Duration,
    ) -> Self {
        Self {
            target,
            sessions,
            calls,
            warmup,
            time_limit,
            tool: "echo".to_owned(),
            arguments: None,
            cpu_pid: None,
            total_limit: None,
        }
    }

    fn request(&self, tool: &str, session: usize) -> CallToolRequestParams {
        let args = self.arguments.clone().unwrap_or_else(|| {
            let mut args = JsonObject::new();
            args.insert(
                "text".into(),
                json!(format!("hello from session {session}")),
            );
            args
        });
        CallToolRequestParams::new(tool.to_owned()).with_arguments(args)
    }
}

/// Throughput and latency of tool calls (`echo` unless told otherwise).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallsReport {
    /// `"http"` or `"stdio"`.
    pub transport: String,
    /// Concurrent sessions.
    pub sessions: usize,
    /// Timed calls asked of each session.
    pub calls_per_session: usize,
    /// The exposed name the echo tool was found under.
    pub tool: String,
    /// Calls that returned a result.
    pub ok: usize,
    /// Calls that failed (transport error or tool error).
    pub errors: usize,
    /// The first failure, for the report.
    pub first_error: Option<String>,
    /// Whether the time limit cut the run short.
    pub timed_out: bool,
    /// Wall time of the timed phase, seconds.
    pub elapsed_s: f64,
    /// Successful calls per second over the timed phase.
    pub calls_per_s: f64,
    /// Latency of successful calls.
    pub latency_us: Option<Percentiles>,
    /// How long the first `tools/list` (every page) took, ms.
    #[serde(default)]
    pub list_ms: Option<f64>,
    /// CPU time of the measured process (`cpu_pid`, or a stdio target's child) per successful
    /// timed call, µs: utime + stime from `/proc/PID/stat` over the timed phase.
    #[serde(default)]
    pub server_cpu_us_per_call: Option<f64>,
    /// The same CPU time as a share of one core over the timed phase, %.
    #[serde(default)]
    pub server_cpu_pct: Option<f64>,
    /// The slowest untimed warm-up call, ms (`None` without warm-up).
    #[serde(default)]
    pub warmup_max_ms: Option<f64>,
}

#[derive(Default)]
struct WorkerResult {
    latencies: Vec<u64>,
    /// The slowest untimed warm-up call.
    warmup_max: Duration,
    errors: usize,
    first_error: Option<String>,
    timed_out: bool,
}

/// Open sessions and the peers the workers call through.
struct Pool {
    sessions: Vec<Session>,
    peers: Vec<Peer<RoleClient>>,
    /// A stdio target's child.
    pid: Option<u32>,
}

impl Pool {
    /// HTTP: `n` sessions. Stdio: one child shared by `n` workers — the shape a gateway has
    /// behind it, so direct and gateway runs load one echo server process alike.
    async fn open(target: &Target, n: usize) -> anyhow::Result<Self> {
        let (sessions, pid) = match target {
            Target::Stdio(_) => {
                let (session, pid) = connect_with_pid(target).await?;
                (vec![session], pid)
            }
            Target::Http(_) | Target::Sse(_) => (
                futures::future::try_join_all((0..n).map(|_| connect(target, Watcher::default())))
                    .await?,
                None,
            ),
        };
        let peers = (0..n)
            .map(|i| sessions[i % sessions.len()].peer().clone())
            .collect();
        Ok(Self {
            sessions,
            peers,
            pid,
        })
    }

    async fn close(self) {
        for session in self.sessions {
            let _ = session.cancel().await;
        }
    }
}

impl CallsReport {
    /// The report of `total`, the workers' results over `elapsed` seconds.
    fn of(
        transport: &str,
        sessions: usize,
        calls_per_session: usize,
        tool: String,
        total: WorkerResult,
        elapsed: f64,
    ) -> Self {
        let ok = total.latencies.len();
        CallsReport {
            transport: transport.to_owned(),
            sessions,
            calls_per_session,
            tool,
            ok,
            errors: total.errors,
            first_error: total.first_error,
            timed_out: total.timed_out,
            elapsed_s: elapsed,
            calls_per_s: if elapsed > 0.0 {
                ok as f64 / elapsed
            } else {
                0.0
            },
            latency_us: Percentiles::from_nanos(total.latencies),
            list_ms: None,
            server_cpu_us_per_call: None,
            server_cpu_pct: None,
            warmup_max_ms: (total.warmup_max > Duration::ZERO)
                .then_some(total.warmup_max.as_secs_f64() * 1000.0),
        }
    }
}

/// Waits for every worker started at `started` and adds their results up; a worker stuck in a
/// call past `limit` (and 10 s of grace) is abandoned, not waited for.
async fn join_workers(
    workers: Vec<tokio::task::JoinHandle<WorkerResult>>,
    started: Instant,
    limit: Duration,
) -> WorkerResult {
    let mut total = WorkerResult::default();
    for worker in workers {
        let grace =
            (started + limit + Duration::from_secs(10)).saturating_duration_since(Instant::now());
        match tokio::time::timeout(grace, worker).await {
            Ok(Ok(r)) => {
                total.latencies.extend(r.latencies);
                total.warmup_max = total.warmup_max.max(r.warmup_max);
                total.errors += r.errors;
                total.timed_out |= r.timed_out;
                if total.first_error.is_none() {
                    total.first_error = r.first_error;
                }
            }
            Ok(Err(e)) => {
                total.errors += 1;
                total.first_error.get_or_insert_with(|| e.to_string());
            }
            Err(_) => total.timed_out = true,
        }
    }
    total
}

/// utime + stime of `pid` in clock ticks, from `/proc/PID/stat` (the whole process: every
/// thread, those that ended included).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces; count after it.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the file; `rest` starts at field 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second of `/proc/PID/stat` (Linux's USER_HZ, 100 on every architecture
/// roster builds for).
pub const TICKS_PER_S: f64 = 100.0;

/// Runs `work`, giving up at `hard` (when set) with an error naming `what`.
async fn bounded<T, E>(
    hard: Option<Instant>,
    what: &str,
    work: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<T>
where
    anyhow::Error: From<E>,
{
    match hard {
        Some(at) => match tokio::time::timeout_at(at.into(), work).await {
            Ok(outcome) => Ok(outcome?),
            Err(_) => anyhow::bail!("{what} unanswered at the total limit"),
        },
        None => Ok(work.await?),
    }
}

/// Sessions × calls of `echo(text)` (or `config.tool`), all sessions connected and warmed
/// before timing starts.
pub async fn calls(config: CallsConfig) -> anyhow::Result<CallsReport> {
    let n = config.sessions.max(1);
    let hard = config.total_limit.map(|l| Instant::now() + l);
    let pool = bounded(hard, "the connection", Pool::open(&config.target, n)).await?;
    let listed_from = Instant::now();
    let tools = bounded(hard, "tools/list", pool.peers[0].list_all_tools()).await?;
    let list_ms = listed_from.elapsed().as_secs_f64() * 1000.0;
    let tool = resolve_tool(&tools, &config.tool)?;
    let cpu_pid = config.cpu_pid.or(pool.pid);
    let barrier = Arc::new(Barrier::new(n + 1));
    let deadline = Arc::new(OnceLock::<Instant>::new());
    let mut workers = Vec::new();
    for (i, peer) in pool.peers.iter().enumerate() {
        let peer = peer.clone();
        let barrier = barrier.clone();
        let deadline = deadline.clone();
        let (calls, warmup) = (config.calls, config.warmup);
        let request = config.request(&tool, i);
        workers.push(tokio::spawn(async move {
            let past_hard = || hard.is_some_and(|h| Instant::now() >= h);
            let mut warmup_max = Duration::ZERO;
            for _ in 0..warmup {
                if past_hard() {
                    break;
                }
                let started = Instant::now();
                let _ = bounded(hard, "a warm-up call", peer.call_tool(request.clone())).await;
                warmup_max = warmup_max.max(started.elapsed());
            }
            barrier.wait().await;
            let deadline = deadline.get().copied().unwrap_or_else(Instant::now);
            let mut out = WorkerResult {
                latencies: Vec::with_capacity(calls),
                warmup_max,
                ..WorkerResult::default()
            };
            for _ in 0..calls {
                if Instant::now() >= deadline || past_hard() {
                    out.timed_out = true;
                    break;
                }
                let started = Instant::now();
                let outcome = bounded(hard, "a call", peer.call_tool(request.clone())).await;
                let took = started.elapsed();
                match outcome {
                    Ok(result) if result.is_error != Some(true) => out.latencies.push(nanos(took)),
                    Ok(result) => {
                        out.errors += 1;
                        out.first_error
                            .get_or_insert_with(|| format!("tool error: {:?}", result.content));
                    }
                    Err(e) => {
                        out.errors += 1;
                        out.first_error.get_or_insert_with(|| {
                            format!("{e} (after {:.0} ms)", took.as_secs_f64() * 1000.0)
                        });
                    }
                }
            }
            out
        }));
    }
    // Set before the barrier lets anyone through, so every worker reads the same deadline;
    // the warm-up is outside it (but inside the total limit).
    let timed_end = Instant::now() + config.time_limit;
    let _ = deadline.set(hard.map_or(timed_end, |h| h.min(timed_end)));
    barrier.wait().await;
    let started = Instant::now();
    let cpu_before = cpu_pid.and_then(cpu_ticks);
    let total = join_workers(workers, started, config.time_limit).await;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_after = cpu_pid.and_then(cpu_ticks);
    pool.close().await;
    let mut report = CallsReport::of(
        config.target.transport(),
        n,
        config.calls,
        tool,
        total,
        elapsed,
    );
    report.list_ms = Some(list_ms);
    if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
        let cpu_s = after.saturating_sub(before) as f64 / TICKS_PER_S;
        if report.ok > 0 {
            report.server_cpu_us_per_call = Some(cpu_s * 1e6 / report.ok as f64);
        }
        if elapsed > 0.0 {
            report.server_cpu_pct = Some(cpu_s / elapsed * 100.0);
        }
    }
    Ok(report)
}

/// What `churn` measures: sessions opened, used for one call and closed, over and over.
#[derive(Debug, Clone)]
pub struct ChurnConfig {
    /// A streamable HTTP (or legacy SSE) endpoint; a stdio target would spawn a process a turn.
    pub target: Target,
    /// Concurrent workers, each opening one session at a time.
    pub workers: usize,
    /// Timed turns per worker.
    pub turns: usize,
    /// Untimed turns per worker first.
    pub warmup: usize,
    /// Timing stops at this limit even if turns remain.
    pub time_limit: Duration,
}

/// `workers` × `turns` of: open a session (`initialize`, `notifications/initialized`), one
/// `echo` call, close it (rmcp's client ends it with `DELETE`). Each turn's latency is the
/// whole of it; `calls_per_s` is turns (sessions) per second.
pub async fn churn(config: ChurnConfig) -> anyhow::Result<CallsReport> {
    if matches!(config.target, Target::Stdio(_)) {
        anyhow::bail!("churn needs an HTTP target: over stdio a session is a process");
    }
    let n = config.workers.max(1);
    let tool = {
        let session = connect(&config.target, Watcher::default()).await?;
        let tools = session.peer().list_all_tools().await;
        let _ = session.cancel().await;
        resolve_tool(&tools?, "echo")?
    };
    let barrier = Arc::new(Barrier::new(n + 1));
    let deadline = Arc::new(OnceLock::<Instant>::new());
    let mut workers = Vec::new();
    for i in 0..n {
        let target = config.target.clone();
        let barrier = barrier.clone();
        let deadline = deadline.clone();
        let (turns, warmup) = (config.turns, config.warmup);
        let mut args = JsonObject::new();
        args.insert("text".into(), json!(format!("hello from worker {i}")));
        let request = CallToolRequestParams::new(tool.clone()).with_arguments(args);
        workers.push(tokio::spawn(async move {
            let turn = || async {
                let session = connect(&target, Watcher::default()).await?;
                let outcome = session.peer().call_tool(request.clone()).await;
                let _ = session.cancel().await;
                match outcome {
                    Ok(result) if result.is_error != Some(true) => Ok(()),
                    Ok(result) => Err(anyhow::anyhow!("tool error: {:?}", result.content)),
                    Err(e) => Err(anyhow::Error::from(e)),
                }
            };
            for _ in 0..warmup {
                let _ = turn().await;
            }
            barrier.wait().await;
            let deadline = deadline.get().copied().unwrap_or_else(Instant::now);
            let mut out = WorkerResult {
                latencies: Vec::with_capacity(turns),
                ..WorkerResult::default()
            };
            for _ in 0..turns {
                if Instant::now() >= deadline {
                    out.timed_out = true;
                    break;
                }
                let started = Instant::now();
                let outcome = turn().await;
                let took = started.elapsed();
                match outcome {
                    Ok(()) => out.latencies.push(nanos(took)),
                    Err(e) => {
                        out.errors += 1;
                        out.first_error.get_or_insert_with(|| e.to_string());
                    }
                }
            }
            out
        }));
    }
    let _ = deadline.set(Instant::now() + config.time_limit);
    barrier.wait().await;
    let started = Instant::now();
    let total = join_workers(workers, started, config.time_limit).await;
    let elapsed = started.elapsed().as_secs_f64();
    Ok(CallsReport::of(
        config.target.transport(),
        n,
        config.turns,
        tool,
        total,
        elapsed,
    ))
}

/// One change the server made and what the client saw of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PropagationRound {
    /// The tool the server added.
    pub added: String,
    /// Server notification → client received `list_changed`, µs; `None` if none came.
    pub notify_us: Option<u64>,
    /// Server notification → a `tools/list` answered with the new tool, µs, when the client
    /// listed on the notification; `None` if no notification came.
    pub visible_us: Option<u64>,
    /// With no notification: whether a `tools/list` after the wait showed the new tool anyway.
    pub listed_without_notice: Option<bool>,
}

/// How `list_changed` propagates through a target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PropagationReport {
    /// `"http"` or `"stdio"`.
    pub transport: String,
    /// How long each round waited for a notification, ms.
    pub timeout_ms: u64,
    /// Rounds in which a `list_changed` reached the client.
    pub notified: usize,
    /// Rounds in which the client saw the new tool in a `tools/list`.
    pub visible: usize,
    /// Notification latency over the notified rounds, µs.
    pub notify_us: Option<Percentiles>,
    /// Time to the new tool being listed over the notified rounds, µs.
    pub visible_us: Option<Percentiles>,
    /// Each round.
    pub rounds: Vec<PropagationRound>,
}

/// `rounds` times: the server adds a tool and notifies; the client waits for the
/// notification (up to `timeout`), then lists until the tool shows (bounded by the same wait).
pub async fn propagate(
    target: &Target,
    rounds: usize,
    timeout: Duration,
) -> anyhow::Result<PropagationReport> {
    let watcher = Watcher::default();
    let session = connect(target, watcher.clone()).await?;
    let tools = session.peer().list_all_tools().await?;
    let add_tool = resolve_tool(&tools, "add_tool")?;
    let mut out = Vec::new();
    for _ in 0..rounds {
        // Listing first tells a gateway this client is up to date (it coalesces notices).
        session.peer().list_all_tools().await?;
        let seen = watcher.count();
        let result = call_json(&session, &add_tool, json!({})).await?;
        let added = result
            .get("added")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned();
        let sent_at = result
            .get("notified_at_unix_us")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(unix_micros);
        let mut round = PropagationRound {
            added: added.clone(),
            notify_us: None,
            visible_us: None,
            listed_without_notice: None,
        };
        let waited_from = Instant::now();
        if watcher.wait_beyond(seen, timeout).await {
            if let Some(at) = watcher.arrival(seen).await {
                round.notify_us = Some(at.saturating_sub(sent_at));
            }
            let give_up = waited_from + timeout;
            loop {
                let tools = session.peer().list_all_tools().await?;
                if lists_tool(&tools, &added) {
                    round.visible_us = Some(unix_micros().saturating_sub(sent_at));
                    break;
                }
                if Instant::now() >= give_up {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        } else {
            let tools = session.peer().list_all_tools().await?;
            round.listed_without_notice = Some(lists_tool(&tools, &added));
        }
        out.push(round);
    }
    let _ = session.cancel().await;
    let notify: Vec<u64> = out
        .iter()
        .filter_map(|r| r.notify_us)
        .map(|u| u * 1000)
        .collect();
    let visible: Vec<u64> = out
        .iter()
        .filter_map(|r| r.visible_us)
        .map(|u| u * 1000)
        .collect();
    Ok(PropagationReport {
        transport: target.transport().to_owned(),
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        notified: notify.len(),
        visible: out
            .iter()
            .filter(|r| r.visible_us.is_some() || r.listed_without_notice == Some(true))
            .count(),
        notify_us: Percentiles::from_nanos(notify),
        visible_us: Percentiles::from_nanos(visible),
        rounds: out,
    })
}

/// What a storm of notifications cost the server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StormReport {
    /// `"http"` or `"stdio"`.
    pub transport: String,
    /// Notifications asked for.
    pub count: u64,
    /// Notifications the server sent.
    pub sent: u64,
    /// `tools/list` the server had answered before the storm.
    pub listings_before: u64,
    /// `tools/list` the server had answered once the count settled.
    pub listings_after: u64,
    /// The difference: listings the storm caused.
    pub listings_caused: u64,
    /// `list_changed` notifications this client received.
    pub client_notices: u64,
    /// How long after the storm the count was read, ms.
    pub settled_after_ms: u64,
}

/// The server sends `count` notifications; the listings it answered because of them are
/// counted once the number stops moving (stable for `quiet`, read at most for `max_wait`).
pub async fn storm(
    target: &Target,
    count: u64,
    quiet: Duration,
    max_wait: Duration,
) -> anyhow::Result<StormReport> {
    let watcher = Watcher::default();
    let session = connect(target, watcher.clone()).await?;
    let tools = session.peer().list_all_tools().await?;
    let storm_tool = resolve_tool(&tools, "storm")?;
    let counter_tool = resolve_tool(&tools, "listings_answered")?;
    let read = |session: &Session| {
        let counter_tool = counter_tool.clone();
        let session = session.peer().clone();
        async move {
            let result = session
                .call_tool(CallToolRequestParams::new(counter_tool))
                .await?;
            crate::client::json_of(&result)
                .and_then(|m| m.get("listings").and_then(serde_json::Value::as_u64))
                .ok_or_else(|| anyhow::anyhow!("listings_answered returned no count"))
        }
    };
    let before = read(&session).await?;
    let sent = call_json(&session, &storm_tool, json!({"count": count}))
        .await?
        .get("sent")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    let storm_done = Instant::now();
    let mut last = read(&session).await?;
    let mut stable_since = Instant::now();
    while storm_done.elapsed() < max_wait {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = read(&session).await?;
        if now != last {
            last = now;
            stable_since = Instant::now();
        } else if stable_since.elapsed() >= quiet {
            break;
        }
    }
    let settled = storm_done.elapsed();
    let _ = session.cancel().await;
    Ok(StormReport {
        transport: target.transport().to_owned(),
        count,
        sent,
        listings_before: before,
        listings_after: last,
        listings_caused: last.saturating_sub(before),
        client_notices: watcher.count(),
        settled_after_ms: u64::try_from(settled.as_millis()).unwrap_or(u64::MAX),
    })
}

/// Cold start and listing cost of a target with many tools.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScaleReport {
    /// `"http"` or `"stdio"`.
    pub transport: String,
    /// How it listed: `rmcp` (rmcp's client, typed tools) or `raw` (bytes, counted).
    #[serde(default = "rmcp_client")]
    pub client: String,
    /// Tools the first complete listing had to hold.
    pub expect_tools: usize,
    /// Tools the complete listing held.
    pub tools_listed: usize,
    /// Pages in one complete listing.
    pub pages: usize,
    /// Process start → first complete `tools/list`, ms.
    pub cold_start_ms: f64,
    /// One complete listing (all pages), µs.
    pub list_all_us: Option<Percentiles>,
    /// One `tools/list` request (the first page), µs.
    pub list_page_us: Option<Percentiles>,
    /// Resident memory of the spawned process after the listings, KiB.
    pub rss_kib: Option<u64>,
    /// Peak resident memory of the spawned process, KiB.
    pub rss_peak_kib: Option<u64>,
    /// Resident memory of its child processes (the servers), KiB.
    pub children_rss_kib: Option<u64>,
    /// Its child processes.
    pub children: usize,
}

fn rmcp_client() -> String {
    "rmcp".to_owned()
}

/// How `scale` starts what it measures.
#[derive(Debug, Clone)]
pub enum ScaleTarget {
    /// Spawn this command, then reach it at this URL.
    Spawn {
        /// Program and arguments.
        command: Vec<String>,
        /// Its streamable HTTP endpoint.
        url: String,
        /// Where its stderr goes.
        log: Option<PathBuf>,
    },
    /// Spawn and speak stdio to this command.
    Stdio(Vec<String>),
}

/// How `scale` lists: through rmcp's client (typed tools, what an rmcp host sees), or raw
/// (the answer's bytes only, see [`crate::raw`]).
enum Lister {
    Typed(crate::client::Session),
    Raw(Box<crate::raw::RawClient>),
}

impl Lister {
    async fn connect(target: &ScaleTarget, raw: bool) -> anyhow::Result<(Lister, Option<u32>)> {
        Ok(match (target, raw) {
            (ScaleTarget::Stdio(words), false) => {
                let (session, pid) = connect_with_pid(&Target::Stdio(words.clone())).await?;
                (Lister::Typed(session), pid)
            }
            (ScaleTarget::Stdio(words), true) => {
                let (client, pid) = crate::raw::RawClient::stdio(words).await?;
                (Lister::Raw(Box::new(client)), pid)
            }
            (ScaleTarget::Spawn { url, .. }, false) => {
                let target = Target::parse(Some(url), None)?;
                let session = tokio::time::timeout(
                    Duration::from_secs(5),
                    connect(&target, Watcher::default()),
                )
                .await??;
                (Lister::Typed(session), None)
            }
            (ScaleTarget::Spawn { url, .. }, true) => (
                Lister::Raw(Box::new(
                    tokio::time::timeout(Duration::from_secs(5), crate::raw::RawClient::http(url))
                        .await??,
                )),
                None,
            ),
        })
    }

    /// Every page: how many tools and pages.
    async fn list_all(&mut self) -> anyhow::Result<(usize, usize)> {
        match self {
            Lister::Typed(session) => {
                let (tools, pages) = list_pages(session.peer()).await?;
                Ok((tools.len(), pages))
            }
            Lister::Raw(client) => client.list_all().await,
        }
    }

    async fn first_page(&mut self) -> anyhow::Result<()> {
        match self {
            Lister::Typed(session) => drop(session.peer().list_tools(None).await?),
            Lister::Raw(client) => drop(client.list_page(None).await?),
        }
        Ok(())
    }

    async fn close(self) {
        if let Lister::Typed(session) = self {
            let _ = session.cancel().await;
        }
    }
}

/// Starts the target, waits for the first complete listing of `expect_tools` tools (within
/// `startup_limit`), then times `lists` listings and reads the process's memory. `raw` lists
/// with [`crate::raw::RawClient`] instead of rmcp's client.
pub async fn scale(
    target: ScaleTarget,
    expect_tools: usize,
    lists: usize,
    startup_limit: Duration,
    raw: bool,
) -> anyhow::Result<ScaleReport> {
    let started = Instant::now();
    let give_up = started + startup_limit;
    let mut _child = None;
    let (mut lister, pid, transport) = match &target {
        ScaleTarget::Stdio(_) => {
            let (lister, pid) = Lister::connect(&target, raw).await?;
            (lister, pid, "stdio")
        }
        ScaleTarget::Spawn { command, url, log } => {
            let (program, args) = command
                .split_first()
                .ok_or_else(|| anyhow::anyhow!("the command to spawn is empty"))?;
            let stderr = match log {
                Some(path) => std::process::Stdio::from(std::fs::File::create(path)?),
                None => std::process::Stdio::null(),
            };
            let child = tokio::process::Command::new(program)
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(stderr)
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| anyhow::anyhow!("could not start {program:?}: {e}"))?;
            let pid = child.id();
            _child = Some(child);
            let lister = loop {
                match Lister::connect(&target, raw).await {
                    Ok((lister, _)) => break lister,
                    _ if Instant::now() >= give_up => {
                        anyhow::bail!("{url} did not accept a session within {startup_limit:?}")
                    }
                    _ => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            };
            (lister, pid, "http")
        }
    };
    let tools_listed = loop {
        let (tools, _) = lister.list_all().await?;
        if tools >= expect_tools {
            break tools;
        }
        if Instant::now() >= give_up {
            anyhow::bail!(
                "only {tools} of {expect_tools} tools were listed within {startup_limit:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let cold_start_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut all = Vec::with_capacity(lists);
    let mut page = Vec::with_capacity(lists);
    let mut pages = 0;
    // The timed listings stop at `lists` or after as long again as the cold start was allowed.
    let listing_deadline = Instant::now() + startup_limit;
    for _ in 0..lists {
        if Instant::now() >= listing_deadline {
            break;
        }
        let t = Instant::now();
        pages = lister.list_all().await?.1;
        all.push(nanos(t.elapsed()));
        let t = Instant::now();
        lister.first_page().await?;
        page.push(nanos(t.elapsed()));
    }
    let memory = pid.map(process_memory);
    lister.close().await;
    if let Some(pid) = pid.filter(|_| transport == "http") {
        // SIGTERM lets the gateway stop its servers; the drop's SIGKILL is the fallback.
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        if let Some(mut child) = _child.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        }
    }
    let (rss, peak, children, children_rss) = memory.unwrap_or_default();
    Ok(ScaleReport {
        transport: transport.to_owned(),
        client: if raw { "raw" } else { "rmcp" }.to_owned(),
        expect_tools,
        tools_listed,
        pages,
        cold_start_ms,
        list_all_us: Percentiles::from_nanos(all),
        list_page_us: Percentiles::from_nanos(page),
        rss_kib: rss,
        rss_peak_kib: peak,
        children_rss_kib: children_rss,
        children,
    })
}

/// Pages `tools/list` to its end by hand, to count the pages.
async fn list_pages(peer: &Peer<RoleClient>) -> anyhow::Result<(Vec<Tool>, usize)> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for pages in 1..=10_000 {
        let result = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await?;
        tools.extend(result.tools);
        cursor = result.next_cursor;
        if cursor.is_none() {
            return Ok((tools, pages));
        }
    }
    anyhow::bail!("tools/list did not end within 10000 pages")
}

type Memory = (Option<u64>, Option<u64>, usize, Option<u64>);

/// VmRSS and VmHWM of `pid`, and the VmRSS summed over its children, from /proc.
fn process_memory(pid: u32) -> Memory {
    let status_kib = |pid: u32, key: &str| -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    let mut children = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                children.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    let children_rss = children
        .iter()
        .map(|&c| status_kib(c, "VmRSS:"))
        .sum::<Option<u64>>();
    (
        status_kib(pid, "VmRSS:"),
        status_kib(pid, "VmHWM:"),
        children.len(),
        children_rss,
    )
}
