//! A server run as a child process, speaking newline-delimited JSON-RPC on stdin/stdout.
//!
//! The child is owned by a waiter task: it is reaped when it exits on its own (no zombies), and
//! ended when the [`ChildGuard`] is dropped (roster shutting down, or the connection being
//! replaced): SIGTERM to its process group at once, SIGKILL after `kill_grace`. The child leads
//! its own process group, and the group is killed when the child ends either way, so the
//! grandchildren of a wrapper such as `npx` do not outlive it; on Linux the child also dies with
//! roster (a parent-death signal), even on `kill -9`, and so does its group: a watch of the
//! group ([`GroupWatch`]) kills it when roster is gone, however it went. Its stderr goes to the log, one line per
//! event, under the server's name, cut at `max_log_line` with control characters escaped.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use futures::StreamExt;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::{oneshot, watch};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedRead};

use super::gate::NotificationGate;
use super::wire::{Outgoing, RawResults, Received, WireTransport, log_line, parse_line};
use crate::config::{Sandbox, ServerLimits};

/// The longest line read from a server's stdout or stderr (64 MiB); a longer one is dropped as
/// garbage rather than buffered without bound.
const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;

/// A sandbox launcher's lines taken as its own (warnings, the inbox) at most, per start.
const MAX_LAUNCHER_LINES: usize = 8;

/// The read buffer of a server's stderr (its log lines).
const STDERR_BUFFER: usize = 2 * 1024;

/// Reads the next line of at most `MAX_LINE_BYTES` into `buf`, decoded lossily; `None` at end
/// of stream. Bytes, not `lines()`: a line of invalid UTF-8 is garbage to drop, not the end of
/// the stream. An over-long line is skipped whole and reading goes on with the next one.
async fn read_line<'a, R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &'a mut Vec<u8>,
) -> std::io::Result<Option<std::borrow::Cow<'a, str>>> {
    read_line_capped(reader, buf, MAX_LINE_BYTES).await
}

async fn read_line_capped<'a, R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &'a mut Vec<u8>,
    limit: u64,
) -> std::io::Result<Option<std::borrow::Cow<'a, str>>> {
    loop {
        buf.clear();
        if (&mut *reader).take(limit).read_until(b'\n', buf).await? == 0 {
            return Ok(None);
        }
        if buf.ends_with(b"\n") || (buf.len() as u64) < limit {
            return Ok(Some(String::from_utf8_lossy(buf)));
        }
        tracing::warn!(limit, "dropped an over-long line from a server");
        loop {
            buf.clear();
            let read = (&mut *reader).take(limit).read_until(b'\n', buf).await?;
            if read == 0 {
                return Ok(None);
            }
            if buf.ends_with(b"\n") {
                break;
            }
        }
    }
}

/// The most of a server's read buffer kept once it is empty (a larger one is let go).
const KEPT_READ_BUFFER: usize = 16 * 1024;

/// Newline-delimited JSON from a server's stdout, cut into lines as bytes arrive. An item is
/// `None` for a line that is not JSON-RPC (logged and dropped by [`parse_line`]); a line longer
/// than the limit is dropped whole. Unlike a read loop, a [`FramedRead`] keeps a half-read line
/// in its buffer when the read is dropped, so the transport can be polled from a `select!`.
pub(crate) struct JsonLines {
    server: Arc<str>,
    limit: usize,
    /// Where the search for the next newline resumes (the bytes before it have none).
    scanned: usize,
    /// Inside an over-long line: skip to its end.
    discarding: bool,
}

impl JsonLines {
    pub(crate) fn new(server: Arc<str>, limit: u64) -> Self {
        JsonLines {
            server,
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            scanned: 0,
            discarding: false,
        }
    }

    fn dropped_long_line(&self) {
        tracing::warn!(server = %self.server, limit = self.limit, "dropped an over-long line from a server");
    }

    fn line(&self, bytes: BytesMut) -> Option<Received> {
        parse_line(&self.server, bytes.freeze())
    }
}

impl Decoder for JsonLines {
    type Item = Option<Received>;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        loop {
            let Some(at) = src[self.scanned..].iter().position(|&b| b == b'\n') else {
                if src.len() > self.limit {
                    if !self.discarding {
                        self.dropped_long_line();
                    }
                    self.discarding = true;
                    src.clear();
                }
                self.scanned = src.len();
                return Ok(None);
            };
            let line = src.split_to(self.scanned + at + 1);
            self.scanned = 0;
            // The line shares the buffer's allocation, which is at least the line and what
            // is left after it.
            if src.is_empty() && line.len() + src.capacity() > KEPT_READ_BUFFER {
                // A large line (a listing) grew the buffer; most lines are small answers, so
                // fifty idle servers do not each keep a listing's worth of buffer.
                *src = BytesMut::new();
            }
            if std::mem::take(&mut self.discarding) {
                continue;
            }
            if line.len() > self.limit {
                self.dropped_long_line();
                continue;
            }
            return Ok(Some(self.line(line)));
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        if let Some(item) = self.decode(src)? {
            return Ok(Some(item));
        }
        self.scanned = 0;
        if src.is_empty() || std::mem::take(&mut self.discarding) {
            src.clear();
            return Ok(None);
        }
        let rest = src.split();
        Ok(Some(self.line(rest)))
    }
}

/// How a child process ended, as seen by its waiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildExit {
    /// Still running.
    Running,
    /// Exited with this description (`exit status: 1`, `signal: 9`).
    Exited(String),
}

/// Keeps a child process alive; dropping it kills the child.
#[derive(Debug)]
pub struct ChildGuard {
    kill: Option<oneshot::Sender<()>>,
    exit: watch::Receiver<ChildExit>,
    pid: Option<u32>,
    /// What a sandboxed server's launcher said last, and whether its stderr has ended.
    launcher: watch::Receiver<(Option<String>, bool)>,
}

impl ChildGuard {
    /// The last line a sandbox launcher wrote (why it did not start the server), once the
    /// server's stderr has ended or `wait` has passed; `None` when it said nothing.
    pub(crate) async fn launcher_said(&self, wait: std::time::Duration) -> Option<String> {
        let mut launcher = self.launcher.clone();
        let _ = tokio::time::timeout(wait, launcher.wait_for(|(_, ended)| *ended)).await;
        launcher.borrow().0.clone()
    }

    /// The child's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// A receiver that changes to [`ChildExit::Exited`] when the child is gone.
    pub fn exit(&self) -> watch::Receiver<ChildExit> {
        self.exit.clone()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // At once, not on the waiter: at roster's exit the runtime may be torn down before the
        // waiter runs again, and tokio's own kill reaches only the child, not its group.
        signal_group(self.pid, GroupSignal::Term);
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
    }
}

/// The spawn failed: the program is missing or not executable.
#[derive(Debug, thiserror::Error)]
#[error("cannot start `{command}`: {source}")]
pub struct SpawnError {
    /// The program.
    pub command: String,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Sends `signal` to the child's process group (the child and whatever it started that stayed
/// in it).
fn signal_group(pid: Option<u32>, signal: GroupSignal) {
    #[cfg(unix)]
    if let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let signal = match signal {
            GroupSignal::Term => rustix::process::Signal::TERM,
            GroupSignal::Kill => rustix::process::Signal::KILL,
        };
        if let Err(error) = rustix::process::kill_process_group(pid, signal) {
            tracing::debug!(%error, "cannot signal the server's process group");
        }
    }
    #[cfg(not(unix))]
    let _ = (pid, signal);
}

#[derive(Debug, Clone, Copy)]
enum GroupSignal {
    Term,
    Kill,
}

/// On Linux, asks the kernel to SIGKILL the child when roster dies, so even `kill -9` of
/// roster leaves no server behind (a server that ignores the end of its stdin would run on).
/// The only unsafe code in roster: `pre_exec` is unsafe because the closure runs between
/// fork and exec, where only async-signal-safe calls are allowed; `prctl` and `getppid` are
/// plain system calls that allocate nothing and take no lock.
///
/// The signal is tied to the thread that forks, not the process: roster spawns servers from
/// its runtime's worker threads, which live as long as roster does.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_roster(cmd: &mut Command) {
    let roster = rustix::process::getpid();
    // SAFETY: the closure only makes two system calls (see above) and returns.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // roster died between fork and prctl: the signal would never come.
            if rustix::process::getppid() != Some(roster) {
                return Err(std::io::Error::other(
                    "roster exited while starting the server",
                ));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_roster(_cmd: &mut Command) {}

/// Ends a server's process group when roster dies, however it dies. The parent-death signal
/// reaches only the child roster started; what that child started in its group (`npx`'s node,
/// a shell script's programs) would run on after a `kill -9` of roster. A small `sh`, in a
/// group of its own, waits for a line on a pipe whose other end only roster holds (close on
/// exec: no other child inherits it). When roster dies the pipe ends without one, and the
/// shell kills the group; when roster ends the server itself, it writes the line first
/// ([`GroupWatch::release`]) and the shell leaves quietly.
#[cfg(unix)]
struct GroupWatch {
    release: std::fs::File,
    _shell: tokio::process::Child,
}

#[cfg(unix)]
impl GroupWatch {
    /// Watches the group `pgid`; `None` (after a warning) when no shell could be started.
    fn start(server: &str, pgid: u32) -> Option<GroupWatch> {
        let mut shell = Command::new("/bin/sh");
        shell
            // `kill -9 -PGID`: the one spelling every POSIX shell takes (dash has no `--` here).
            .args(["-c", r#"read -r line || kill -9 "-$1""#])
            .arg("roster-group-watch")
            .arg(pgid.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let started = shell.spawn().and_then(|mut shell| {
            let pipe = shell
                .stdin
                .take()
                .ok_or_else(|| std::io::Error::other("no pipe to the watch"))?
                .into_owned_fd()?;
            Ok(GroupWatch {
                release: std::fs::File::from(pipe),
                _shell: shell,
            })
        });
        match started {
            Ok(watch) => Some(watch),
            Err(error) => {
                tracing::warn!(server, %error, "cannot watch the server's process group: a `kill -9` of roster would leave what the server started running");
                None
            }
        }
    }

    /// roster ended the group itself: the watch leaves without killing anything (and is reaped
    /// by tokio once it has).
    fn release(mut self) {
        use std::io::Write;
        let _ = self.release.write_all(b"\n");
    }
}

#[cfg(not(unix))]
struct GroupWatch;

#[cfg(not(unix))]
impl GroupWatch {
    fn start(_server: &str, _pgid: u32) -> Option<GroupWatch> {
        None
    }

    fn release(self) {}
}

/// What to start, and the bounds it runs under.
pub(crate) struct Spawn<'a> {
    pub(crate) server: Arc<str>,
    pub(crate) command: &'a str,
    pub(crate) args: &'a [String],
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) cwd: Option<&'a PathBuf>,
    pub(crate) sandbox: Option<&'a Sandbox>,
    pub(crate) limits: &'a ServerLimits,
}

pub(crate) fn spawn(
    spec: Spawn<'_>,
    raw: RawResults,
    gate: NotificationGate,
) -> Result<(WireTransport, ChildGuard), SpawnError> {
    let Spawn {
        server,
        command,
        args,
        env,
        cwd,
        sandbox,
        limits,
    } = spec;
    let mut cmd =
        match sandbox {
            None => {
                let mut cmd = Command::new(command);
                cmd.args(args).envs(env);
                cmd
            }
            // The launcher in its place: it applies the rules, then becomes the server.
            Some(rules) => super::sandbox::command(&server, rules, command, args, env, cwd)
                .map_err(|source| SpawnError {
                    command: command.to_owned(),
                    source,
                })?,
        };
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Belt and braces: the waiter ends the group on guard drop, and tokio kills the child
        // if the waiter itself is dropped with the runtime.
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    // Its own process group, so shutdown reaches what a wrapper (`npx`, `uvx`, a shell
    // script) started in turn, not only the wrapper.
    #[cfg(unix)]
    cmd.process_group(0);
    die_with_roster(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| SpawnError {
        command: command.to_owned(),
        source,
    })?;
    let pid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(SpawnError {
            command: command.to_owned(),
            source: std::io::Error::other("child pipes were not created"),
        });
    };

    // Read and written by the connection's own tasks: no pump task, no channel in between.
    let name = server.clone();
    let incoming = FramedRead::new(stdout, JsonLines::new(server.clone(), MAX_LINE_BYTES))
        .filter_map(move |line| {
            std::future::ready(match line {
                Ok(value) => value,
                // The stream ends after an error: the connection sees the server as gone.
                Err(error) => {
                    tracing::warn!(server = %name, %error, "stopped reading the server's stdout");
                    None
                }
            })
        })
        .boxed();

    let name = server.clone();
    let max_log_line = limits.max_log_line;
    // A sandbox launcher's lines are warnings (kept in the inbox too) and the last one is kept
    // for the error of a start that failed.
    let launcher = sandbox.map(|_| gate.notifications());
    let (said_tx, said_rx) = watch::channel((None, false));
    tokio::spawn(async move {
        // Drained to its end whatever it holds: a child whose stderr pipe fills up blocks.
        // A small buffer (a longer line still reads whole): fifty servers keep fifty of them.
        let mut reader = BufReader::with_capacity(STDERR_BUFFER, stderr);
        let mut line = Vec::new();
        let mut launcher_lines = 0;
        while let Ok(Some(text)) = read_line(&mut reader, &mut line).await {
            let text = log_line(text.trim_end_matches(['\n', '\r']), max_log_line);
            match (&launcher, text.strip_prefix(super::sandbox::STDERR_PREFIX)) {
                // The launcher says a few lines before the server runs; past that, what looks
                // like one is the server's own text and goes to the log only, so a server
                // cannot fill the inbox past its notification rate this way.
                (Some(notifications), Some(said)) if launcher_lines < MAX_LAUNCHER_LINES => {
                    launcher_lines += 1;
                    tracing::warn!(server = %name, "{said}");
                    notifications.dispatch_notification(
                        "notifications/message",
                        &serde_json::json!({
                            "level": "warning",
                            "logger": "roster.sandbox",
                            "data": said,
                        }),
                    );
                    said_tx.send_modify(|(last, _)| *last = Some(said.to_owned()));
                }
                _ => tracing::info!(target: "roster::server_stderr", server = %name, "{text}"),
            }
            // A server that only writes to stderr must not keep this worker to itself.
            tokio::task::coop::consume_budget().await;
        }
        said_tx.send_modify(|(_, ended)| *ended = true);
    });

    let (kill_tx, kill_rx) = oneshot::channel::<()>();
    let (exit_tx, exit_rx) = watch::channel(ChildExit::Running);
    let name = server.clone();
    let grace = limits.kill_grace;
    let group_watch = pid.and_then(|pid| GroupWatch::start(&server, pid));
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => {
                // What the child left running in its group goes with it. The group id stays
                // reserved while the group has members, so this cannot hit a stranger.
                signal_group(pid, GroupSignal::Kill);
                status
            }
            _ = kill_rx => {
                // SIGTERM went to the group when the guard was dropped; the child is not
                // reaped yet, so its pid is still its group's id.
                match tokio::time::timeout(grace, child.wait()).await {
                    Ok(status) => {
                        signal_group(pid, GroupSignal::Kill);
                        status
                    }
                    Err(_) => {
                        tracing::warn!(server = %name, ?grace, "the server did not end on SIGTERM; killing its process group");
                        signal_group(pid, GroupSignal::Kill);
                        let _ = child.start_kill();
                        child.wait().await
                    }
                }
            }
        };
        // The group is ended: nothing is left for the watch to do.
        if let Some(watch) = group_watch {
            watch.release();
        }
        let text = match status {
            Ok(status) => status.to_string(),
            Err(error) => format!("unknown ({error})"),
        };
        tracing::info!(server = %name, status = %text, "server process ended");
        let _ = exit_tx.send(ChildExit::Exited(text));
    });

    Ok((
        WireTransport::new(server, Outgoing::lines(stdin), incoming, raw, gate),
        ChildGuard {
            kill: Some(kill_tx),
            exit: exit_rx,
            pid,
            launcher: said_rx,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` one at a time, as reads would deliver them, then ends the stream.
    fn decode_chunks(chunks: &[&[u8]], limit: u64) -> Vec<Option<serde_json::Value>> {
        decode_received(chunks, limit)
            .into_iter()
            .map(|item| item.map(Received::into_message))
            .collect()
    }

    fn decode_received(chunks: &[&[u8]], limit: u64) -> Vec<Option<Received>> {
        let mut decoder = JsonLines::new(Arc::from("s"), limit);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            while let Some(item) = decoder.decode(&mut buf).expect("decodes") {
                out.push(item);
            }
        }
        while let Some(item) = decoder.decode_eof(&mut buf).expect("decodes") {
            out.push(item);
        }
        out
    }

    #[test]
    fn a_large_line_does_not_leave_its_buffer_behind() {
        let mut decoder = JsonLines::new(Arc::from("s"), MAX_LINE_BYTES);
        let big = format!("{{\"text\":\"{}\"}}\n", "x".repeat(200 * 1024));
        // As a read grows it: room to spare past the line.
        let mut buf = BytesMut::with_capacity(2 * big.len());
        buf.extend_from_slice(big.as_bytes());
        let line = decoder.decode(&mut buf).expect("decodes").flatten();
        let line = line.map(Received::into_message);
        assert!(line.is_some_and(|v| v["text"].as_str().map(str::len) == Some(200 * 1024)));
        assert!(buf.capacity() <= KEPT_READ_BUFFER, "{}", buf.capacity());
        // A line a little larger than what is kept, with less than that left after it: the
        // allocation both share is let go all the same.
        let mid = format!("{{\"text\":\"{}\"}}\n", "x".repeat(KEPT_READ_BUFFER));
        let mut mid_buf = BytesMut::with_capacity(mid.len() + KEPT_READ_BUFFER / 2);
        mid_buf.extend_from_slice(mid.as_bytes());
        assert!(decoder.decode(&mut mid_buf).expect("decodes").is_some());
        assert_eq!(mid_buf.capacity(), 0, "a fresh buffer, not the shared one");
        buf.extend_from_slice(b"{\"a\":1}\n");
        let small = decoder.decode(&mut buf).expect("decodes").flatten();
        let small = small.map(Received::into_message);
        assert_eq!(small, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn json_lines_are_cut_wherever_reads_split_them() {
        let got = decode_chunks(&[b"{\"a\":", b"1}\n{\"b\"", b":2}\n\n{\"c\":3}"], 1024);
        assert_eq!(
            got,
            vec![
                Some(serde_json::json!({"a": 1})),
                Some(serde_json::json!({"b": 2})),
                None,
                Some(serde_json::json!({"c": 3})),
            ]
        );
    }

    #[test]
    fn garbage_and_over_long_json_lines_are_dropped_and_reading_goes_on() {
        let long = format!("{{\"x\":\"{}\"}}\n", "y".repeat(64));
        let got = decode_chunks(
            &[
                b"\xff\xfe not json\n",
                &long.as_bytes()[..40],
                &long.as_bytes()[40..],
                b"{\"ok\":true}\n",
            ],
            32,
        );
        assert_eq!(got, vec![None, Some(serde_json::json!({"ok": true}))]);
    }

    #[tokio::test]
    async fn lines_survive_invalid_utf8_and_over_long_lines() {
        let mut input: &[u8] = b"\xff\xfe bad\nabcdefghij-too-long\nok\nlast";
        let mut buf = Vec::new();
        let mut seen = Vec::new();
        while let Some(text) = read_line_capped(&mut input, &mut buf, 8)
            .await
            .expect("reading a slice cannot fail")
        {
            seen.push(text.into_owned());
        }
        assert_eq!(
            seen,
            vec![
                "\u{fffd}\u{fffd} bad\n".to_owned(),
                "ok\n".to_owned(),
                "last".to_owned()
            ]
        );
    }
}
