//! `loadgen`: the load generator `bench/run` drives. Prints one JSON object per run.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args as ClapArgs, Parser, Subcommand};
use roster_bench::client::Target;
use roster_bench::measure::{self, CallsConfig, ChurnConfig, ScaleTarget};
use serde_json::{Value, json};

/// MCP load generator: loopback targets only, every run bounded in count and time.
#[derive(Debug, Parser)]
#[command(name = "loadgen", version, about)]
struct Cli {
    /// A label carried into the JSON (e.g. `roster`, `mcp-proxy`).
    #[arg(long, global = true, default_value = "target")]
    label: String,
    /// Also write the JSON to this file.
    #[arg(long, global = true)]
    out: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, ClapArgs)]
struct TargetArgs {
    /// A streamable HTTP endpoint on loopback, e.g. http://127.0.0.1:8931/mcp.
    #[arg(long, conflicts_with = "stdio")]
    url: Option<String>,
    /// A stdio server command line (whitespace-separated), spawned once and shared.
    #[arg(long)]
    stdio: Option<String>,
}

impl TargetArgs {
    fn target(&self) -> anyhow::Result<Target> {
        Ok(Target::parse(self.url.as_deref(), self.stdio.as_deref())?)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// N concurrent sessions × M `echo` calls: calls/s and latency percentiles.
    Calls {
        #[command(flatten)]
        target: TargetArgs,
        /// Concurrent sessions.
        #[arg(long, default_value_t = 1)]
        sessions: usize,
        /// Timed calls per session.
        #[arg(long, default_value_t = 1000)]
        calls: usize,
        /// Untimed calls per session first.
        #[arg(long, default_value_t = 50)]
        warmup: usize,
        /// Stop timing after this many seconds even if calls remain.
        #[arg(long, default_value_t = 30.0)]
        time_limit: f64,
        /// Call this tool of the echo server (or a gateway's native one) instead of `echo`,
        /// found under any exposed name (`storm` → `echo__storm`).
        #[arg(long, default_value = "echo")]
        tool: String,
        /// The tool's arguments as a JSON object (default: `echo`'s `{"text": …}`).
        #[arg(long)]
        args: Option<String>,
        /// Read this process's CPU time (utime + stime) over the timed phase: the gateway or
        /// server behind an HTTP target. A stdio target's child is read without it.
        #[arg(long)]
        cpu_pid: Option<u32>,
        /// End the whole run (connecting, the first listing, warm-up, calls) after this many
        /// seconds; a call still unanswered then counts as an error and the JSON is written.
        #[arg(long)]
        total_limit: Option<f64>,
    },
    /// WORKERS concurrent workers × TURNS of: open a session, one `echo` call, close it.
    Churn {
        #[command(flatten)]
        target: TargetArgs,
        /// Concurrent workers, one session open at a time each.
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// Timed turns per worker.
        #[arg(long, default_value_t = 100)]
        turns: usize,
        /// Untimed turns per worker first.
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        /// Stop timing after this many seconds even if turns remain.
        #[arg(long, default_value_t = 30.0)]
        time_limit: f64,
    },
    /// The server adds a tool and notifies: how long until the client sees it.
    Propagate {
        #[command(flatten)]
        target: TargetArgs,
        /// How many changes.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// How long each round waits for the notification, ms.
        #[arg(long, default_value_t = 3000)]
        timeout_ms: u64,
    },
    /// The server sends COUNT notifications: how many `tools/list` it then answered.
    Storm {
        #[command(flatten)]
        target: TargetArgs,
        /// Notifications to send.
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// The listing count must hold still this long, ms.
        #[arg(long, default_value_t = 1500)]
        quiet_ms: u64,
        /// Read it no later than this, ms.
        #[arg(long, default_value_t = 15000)]
        max_wait_ms: u64,
    },
    /// Cold start to the first complete listing, listing latency, memory.
    Scale {
        /// Spawn this command line (then reach it at --url)…
        #[arg(long, requires = "url")]
        spawn: Option<String>,
        /// …at this streamable HTTP endpoint.
        #[arg(long)]
        url: Option<String>,
        /// Or spawn this stdio server command line and talk to it directly.
        #[arg(long, conflicts_with_all = ["spawn", "url"])]
        stdio: Option<String>,
        /// The spawned command's stderr goes here.
        #[arg(long)]
        log: Option<PathBuf>,
        /// The first complete listing must hold at least this many tools.
        #[arg(long)]
        expect_tools: usize,
        /// Timed listings after the first.
        #[arg(long, default_value_t = 100)]
        lists: usize,
        /// Give up on the cold start after this many seconds.
        #[arg(long, default_value_t = 60.0)]
        startup_limit: f64,
        /// List with a raw client (answers read as bytes, tools counted, nothing typed).
        #[arg(long)]
        raw: bool,
    },
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.001, 3600.0))
}

async fn run(command: Command) -> anyhow::Result<(&'static str, Value)> {
    Ok(match command {
        Command::Calls {
            target,
            sessions,
            calls,
            warmup,
            time_limit,
            tool,
            args,
            cpu_pid,
            total_limit,
        } => {
            let mut config = CallsConfig::echo(
                target.target()?,
                sessions,
                calls,
                warmup,
                seconds(time_limit),
            );
            config.tool = tool;
            config.cpu_pid = cpu_pid;
            config.total_limit = total_limit.map(seconds);
            config.arguments = match args {
                None => None,
                Some(text) => match serde_json::from_str::<Value>(&text)? {
                    Value::Object(map) => Some(map),
                    _ => anyhow::bail!("--args must be a JSON object, not {text}"),
                },
            };
            (
                "calls",
                serde_json::to_value(measure::calls(config).await?)?,
            )
        }
        Command::Churn {
            target,
            workers,
            turns,
            warmup,
            time_limit,
        } => {
            let config = ChurnConfig {
                target: target.target()?,
                workers,
                turns,
                warmup,
                time_limit: seconds(time_limit),
            };
            (
                "churn",
                serde_json::to_value(measure::churn(config).await?)?,
            )
        }
        Command::Propagate {
            target,
            rounds,
            timeout_ms,
        } => {
            let report = measure::propagate(
                &target.target()?,
                rounds,
                Duration::from_millis(timeout_ms.min(60_000)),
            )
            .await?;
            ("propagate", serde_json::to_value(report)?)
        }
        Command::Storm {
            target,
            count,
            quiet_ms,
            max_wait_ms,
        } => {
            let report = measure::storm(
                &target.target()?,
                count,
                Duration::from_millis(quiet_ms.min(60_000)),
                Duration::from_millis(max_wait_ms.min(120_000)),
            )
            .await?;
            ("storm", serde_json::to_value(report)?)
        }
        Command::Scale {
            spawn,
            url,
            stdio,
            log,
            expect_tools,
            lists,
            startup_limit,
            raw,
        } => {
            let target = match (spawn, url, stdio) {
                (Some(spawn), Some(url), _) => ScaleTarget::Spawn {
                    command: words(&spawn),
                    url,
                    log,
                },
                (None, None, Some(stdio)) => ScaleTarget::Stdio(words(&stdio)),
                _ => anyhow::bail!("give --spawn CMD --url URL, or --stdio CMD"),
            };
            let report = measure::scale(
                target,
                expect_tools,
                lists.min(10_000),
                seconds(startup_limit),
                raw,
            )
            .await?;
            ("scale", serde_json::to_value(report)?)
        }
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (kind, report) = run(cli.command).await?;
    let mut out = json!({"kind": kind, "label": cli.label});
    if let (Some(map), Value::Object(fields)) = (out.as_object_mut(), report) {
        map.extend(fields);
    }
    let text = serde_json::to_string_pretty(&out)?;
    if let Some(path) = &cli.out {
        std::fs::write(path, format!("{text}\n"))?;
    }
    println!("{text}");
    Ok(())
}
