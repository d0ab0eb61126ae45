//! `roster inbox`: the person's side of the inbox.
//!
//! Every command goes through an [`InboxBackend`], picked by [`backend_for`]: [`AdminBackend`]
//! when a gateway answers on the admin socket of the state directory (it owns the inbox, and
//! only it can answer a server waiting on a confirm), else [`DirectBackend`], which works on the
//! audit trail the [`Stores`] keep (the state dir's, or the log replicas share). Both end in the same [`Inbox`] calls, and the output is rendered here for
//! both.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::store::Stores;

use super::state::{resolve_state_dir, stores_for};
use crate::gateway::admin::{self, InboxRequest};
use crate::i18n::text;
use crate::inbox::{
    ClearReport, ConfirmDecision, ConfirmEntry, ConfirmId, DEFAULT_CAPACITY, DEFAULT_LIST_LIMIT,
    Entry, FsyncPolicy, Inbox, InboxConfig, Reader, Seq, render_for,
};
use anyhow::{Context as _, bail};
use clap::{Args, Subcommand, ValueEnum, ValueHint};

/// Options shared by every `roster inbox` command.
#[derive(Debug, Args)]
pub struct InboxArgs {
    /// roster's state directory, where the audit trail lives [default: the configuration's
    /// `[gateway] state_dir`, else $XDG_STATE_HOME/roster, else ~/.local/state/roster]
    #[arg(long, env = "ROSTER_STATE_DIR", global = true, value_hint = ValueHint::DirPath)]
    pub state_dir: Option<PathBuf>,

    /// What to do.
    #[command(subcommand)]
    pub command: InboxCommand,
}

/// The `roster inbox` commands.
#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// Show recent notifications, newest first.
    List {
        /// Only notifications from this server.
        #[arg(long, value_name = "SERVER")]
        channel: Option<String>,
        /// Show at most this many.
        #[arg(long, default_value_t = DEFAULT_LIST_LIMIT)]
        limit: usize,
        /// One JSON object per line instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show notifications not yet acknowledged, oldest first.
    Unread {
        /// One JSON object per line instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Mark notifications as read: all of them, or those up to SEQ.
    Ack {
        /// Acknowledge up to and including this seq.
        seq: Option<Seq>,
    },
    /// Show server requests waiting for your yes or no.
    Pending {
        /// One JSON object per line instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Answer a pending server request.
    Confirm {
        /// The request's id (from `roster inbox pending`).
        id: ConfirmId,
        /// Your answer.
        answer: Answer,
    },
    /// Write the whole audit trail as JSON lines to stdout, oldest first: `audit.jsonl.1` and
    /// `audit.jsonl`, or with `[store]` the log every replica shares.
    Export,
    /// Empty the inbox (acknowledging everything, declining pending requests). The audit trail
    /// stays on disk, so a restart replays it; --all purges it too.
    Clear {
        /// Also delete the audit trail on disk, so nothing comes back after a restart.
        #[arg(long)]
        all: bool,
    },
}

/// A person's answer to a pending request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Answer {
    /// Confirm.
    Yes,
    /// Decline.
    No,
}

/// The operations `roster inbox` needs, whoever carries them out.
pub trait InboxBackend {
    /// Recent entries, newest first.
    fn list(&self, channel: Option<&str>, limit: usize) -> anyhow::Result<Vec<Entry>>;
    /// Unread entries, oldest first.
    fn unread(&self) -> anyhow::Result<Vec<Entry>>;
    /// Pending confirms, oldest first.
    fn pending_confirms(&self) -> anyhow::Result<Vec<ConfirmEntry>>;
    /// Acknowledges up to `up_to` (or everything); returns how many entries changed.
    fn ack(&self, up_to: Option<Seq>) -> anyhow::Result<usize>;
    /// Clears the inbox (and with `all` the audit trail).
    fn clear(&self, all: bool) -> anyhow::Result<ClearReport>;
    /// Decides a pending confirm.
    fn confirm(&self, id: ConfirmId, yes: bool) -> anyhow::Result<ConfirmDecision>;
}

/// Works on the audit trail the stores keep. Reads need no lock, so they also show a running
/// gateway's trail; changes open the inbox: in a state dir that takes its lock, which a running
/// gateway holds; the log replicas share has no owner, and a decision made here reaches the
/// server request waiting for it on whichever replica that is.
#[derive(Debug, Clone)]
pub struct DirectBackend {
    stores: Stores,
}

impl DirectBackend {
    /// The backend for the trail `stores` keep.
    pub fn new(stores: Stores) -> Self {
        DirectBackend { stores }
    }

    fn snapshot(&self) -> anyhow::Result<crate::inbox::InboxSnapshot> {
        Ok(Inbox::snapshot(&self.stores, DEFAULT_CAPACITY)?)
    }

    fn open(&self) -> anyhow::Result<Inbox> {
        // A one-shot command: each change is synced before the process exits. It speaks for
        // the person, whatever identities the trail holds.
        let config = InboxConfig {
            fsync: FsyncPolicy::Always,
            max_identities: usize::MAX,
            ..InboxConfig::new(self.stores.clone())
        };
        Ok(Inbox::open(config)?)
    }
}

impl InboxBackend for DirectBackend {
    fn list(&self, channel: Option<&str>, limit: usize) -> anyhow::Result<Vec<Entry>> {
        Ok(self.snapshot()?.list(channel, limit))
    }

    fn unread(&self) -> anyhow::Result<Vec<Entry>> {
        Ok(self.snapshot()?.unread())
    }

    fn pending_confirms(&self) -> anyhow::Result<Vec<ConfirmEntry>> {
        Ok(self.snapshot()?.pending_confirms())
    }

    fn ack(&self, up_to: Option<Seq>) -> anyhow::Result<usize> {
        Ok(self.open()?.ack(up_to))
    }

    fn clear(&self, all: bool) -> anyhow::Result<ClearReport> {
        Ok(self.open()?.clear(all))
    }

    fn confirm(&self, id: ConfirmId, yes: bool) -> anyhow::Result<ConfirmDecision> {
        // Owning a state dir's inbox means no gateway runs, so no server waits: opening expires
        // what was pending, and the answer says so. In the shared log, the replica whose server
        // waits gets the decision.
        Ok(self.open()?.confirm(id, yes)?)
    }
}

/// Asks the gateway running on the state directory, over its admin socket; the gateway's own
/// inbox answers.
#[derive(Debug)]
pub struct AdminBackend {
    socket: PathBuf,
    runtime: tokio::runtime::Runtime,
}

/// How long a command waits for the gateway's answer before it gives up.
const ADMIN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl AdminBackend {
    /// The backend talking to the gateway whose admin socket is at `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the runtime that talks to the gateway")?;
        Ok(AdminBackend {
            socket: socket.into(),
            runtime,
        })
    }

    fn ask<T: serde::de::DeserializeOwned>(&self, request: InboxRequest) -> anyhow::Result<T> {
        let answer = self.runtime.block_on(async {
            tokio::time::timeout(ADMIN_WAIT, admin::inbox_request(&self.socket, request)).await
        });
        let value = match answer {
            Ok(value) => value?,
            Err(_) => bail!(
                "the gateway at {} did not answer within {}s",
                self.socket.display(),
                ADMIN_WAIT.as_secs()
            ),
        };
        serde_json::from_value(value).context("the gateway's answer is not what roster expects")
    }
}

/// The answer to [`InboxRequest::Ack`].
#[derive(serde::Deserialize)]
struct Acknowledged {
    acknowledged: usize,
}

/// The answer to [`InboxRequest::Confirm`].
#[derive(serde::Deserialize)]
struct Decided {
    decision: ConfirmDecision,
}

/// The answer to [`InboxRequest::Clear`].
#[derive(serde::Deserialize)]
struct Cleared {
    cleared: usize,
    declined_confirms: usize,
    partial_warning: Option<String>,
}

impl InboxBackend for AdminBackend {
    fn list(&self, channel: Option<&str>, limit: usize) -> anyhow::Result<Vec<Entry>> {
        self.ask(InboxRequest::List {
            channel: channel.map(str::to_owned),
            limit,
        })
    }

    fn unread(&self) -> anyhow::Result<Vec<Entry>> {
        self.ask(InboxRequest::Unread)
    }

    fn pending_confirms(&self) -> anyhow::Result<Vec<ConfirmEntry>> {
        self.ask(InboxRequest::Pending)
    }

    fn ack(&self, up_to: Option<Seq>) -> anyhow::Result<usize> {
        let answer: Acknowledged = self.ask(InboxRequest::Ack { up_to })?;
        Ok(answer.acknowledged)
    }

    fn clear(&self, all: bool) -> anyhow::Result<ClearReport> {
        let answer: Cleared = self.ask(InboxRequest::Clear { all })?;
        Ok(ClearReport {
            cleared: answer.cleared,
            declined_confirms: answer.declined_confirms,
            partial_warning: answer.partial_warning,
        })
    }

    fn confirm(&self, id: ConfirmId, yes: bool) -> anyhow::Result<ConfirmDecision> {
        let answer: Decided = self.ask(InboxRequest::Confirm { id, yes })?;
        Ok(answer.decision)
    }
}

/// The backend for the trail `stores` keep: the running gateway's, when one answers on the
/// admin socket of the state dir `dir` (it owns that trail); else the direct one (also when the
/// socket file is a leftover of a gateway that died, and always for the log replicas share,
/// which no gateway owns).
pub fn backend_for(dir: &Path, stores: Stores) -> anyhow::Result<Box<dyn InboxBackend>> {
    let socket = admin::socket_path(dir);
    if !stores.is_shared() && admin::answers(&socket) {
        return Ok(Box::new(AdminBackend::new(socket)?));
    }
    Ok(Box::new(DirectBackend::new(stores)))
}

/// Runs one `roster inbox` command; `config_path` is the configuration `--config` names.
pub fn run(args: InboxArgs, config_path: &Path) -> anyhow::Result<()> {
    let dir = resolve_state_dir(args.state_dir.clone(), config_path)?;
    let stores = stores_for(args.state_dir, config_path)?;
    let mut out = std::io::stdout().lock();
    if let InboxCommand::Export = args.command {
        crate::inbox::export(&stores, &mut out)?;
        return Ok(());
    }
    let backend = backend_for(&dir, stores)?;
    match args.command {
        InboxCommand::Export => unreachable!("exported above"),
        InboxCommand::List {
            channel,
            limit,
            json,
        } => {
            let entries = backend.list(channel.as_deref(), limit)?;
            print_entries(&mut out, &entries, json)?;
        }
        InboxCommand::Unread { json } => {
            let entries = backend.unread()?;
            print_entries(&mut out, &entries, json)?;
        }
        InboxCommand::Ack { seq } => {
            let changed = backend.ack(seq)?;
            writeln!(out, "{}", count_text("cli.inbox.acknowledged", changed))?;
        }
        InboxCommand::Pending { json } => {
            let pending = backend.pending_confirms()?;
            if json {
                for confirm in &pending {
                    writeln!(out, "{}", serde_json::to_string(confirm)?)?;
                }
            } else if pending.is_empty() {
                writeln!(out, "{}", text("cli.inbox.no_pending", &[]))?;
            } else {
                for confirm in &pending {
                    writeln!(out, "{}", confirm_line(confirm))?;
                }
            }
        }
        InboxCommand::Confirm { id, answer } => {
            let decision = backend.confirm(id, answer == Answer::Yes)?;
            let decision = text(&format!("cli.inbox.state.{decision}"), &[]);
            writeln!(
                out,
                "{}",
                text("cli.inbox.decided", &[("id", &id), ("decision", &decision)])
            )?;
        }
        InboxCommand::Clear { all } => {
            let report = backend.clear(all)?;
            let mut line = count_text("cli.inbox.cleared", report.cleared);
            if report.declined_confirms > 0 {
                line.push_str(&count_text("cli.inbox.declined", report.declined_confirms));
            }
            writeln!(out, "{line}")?;
            if let Some(warning) = report.partial_warning {
                bail!(warning);
            }
        }
    }
    Ok(())
}

fn print_entries(
    out: &mut impl std::io::Write,
    entries: &[Entry],
    json: bool,
) -> anyhow::Result<()> {
    if json {
        for entry in entries {
            writeln!(out, "{}", serde_json::to_string(entry)?)?;
        }
    } else {
        writeln!(
            out,
            "{}",
            render_for(Reader::Person, entries, usize::MAX, usize::MAX)
        )?;
    }
    Ok(())
}

fn confirm_line(confirm: &ConfirmEntry) -> String {
    format!(
        "#{} {} {} {} {} {}",
        confirm.id,
        confirm.at,
        confirm.channel,
        confirm.method,
        text("cli.inbox.expires", &[("at", &confirm.expires_at)]),
        confirm.params
    )
}

/// `KEY.one` for one, else `KEY.other`, with `%{count}` filled.
fn count_text(key: &str, count: usize) -> String {
    let form = if count == 1 { "one" } else { "other" };
    text(&format!("{key}.{form}"), &[("count", &count)])
}
