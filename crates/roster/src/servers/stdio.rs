//! A server run as a child process, speaking newline-delimited JSON-RPC on stdin/stdout.
//!
//! The child is owned by a waiter task: it is reaped when it exits on its own (no zombies), and
//! killed and reaped when the [`ChildGuard`] is dropped (roster shutting down, or the connection
//! being replaced). The child leads its own process group, and the group is killed when the child
//! ends either way, so the grandchildren of a wrapper such as `npx` do not outlive it. Its stderr
//! goes to the log, one line per event, under the server's name.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot, watch};

use super::wire::{RawResults, WireTransport, parse_line};

/// The longest line read from a server's stdout or stderr (64 MiB); a longer one is dropped as
/// garbage rather than buffered without bound.
const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;

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
}

impl ChildGuard {
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

/// Kills the child's process group (the child and whatever it started that stayed in it).
fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
        && let Err(error) = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL)
    {
        tracing::debug!(%error, "cannot kill the server's process group");
    }
    #[cfg(not(unix))]
    let _ = pid;
}

pub(crate) fn spawn(
    server: Arc<str>,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
    raw: RawResults,
) -> Result<(WireTransport, ChildGuard), SpawnError> {
    let mut cmd = Command::new(command);
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Belt and braces: the waiter kills on guard drop, and tokio kills if the waiter itself
        // is dropped with the runtime.
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    // Its own process group, so shutdown reaches what a wrapper (`npx`, `uvx`, a shell
    // script) started in turn, not only the wrapper.
    #[cfg(unix)]
    cmd.process_group(0);
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

    let (in_tx, in_rx) = mpsc::channel::<Value>(256);
    let (out_tx, mut out_rx) = mpsc::channel::<Value>(256);

    let name = server.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            match read_line(&mut reader, &mut line).await {
                Ok(Some(text)) => {
                    if let Some(value) = parse_line(&name, &text)
                        && in_tx.send(value).await.is_err()
                    {
                        break;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(server = %name, %error, "stopped reading the server's stdout");
                    break;
                }
            }
        }
    });

    let name = server.clone();
    tokio::spawn(async move {
        // Drained to its end whatever it holds: a child whose stderr pipe fills up blocks.
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        while let Ok(Some(text)) = read_line(&mut reader, &mut line).await {
            let text = text.trim_end_matches(['\n', '\r']);
            tracing::info!(target: "roster::server_stderr", server = %name, "{text}");
        }
    });

    let name = server.clone();
    tokio::spawn(async move {
        let mut stdin = stdin;
        while let Some(value) = out_rx.recv().await {
            let mut line = value.to_string();
            line.push('\n');
            if let Err(error) = async {
                stdin.write_all(line.as_bytes()).await?;
                stdin.flush().await
            }
            .await
            {
                tracing::debug!(server = %name, %error, "cannot write to the server's stdin");
                break;
            }
        }
    });

    let (kill_tx, kill_rx) = oneshot::channel::<()>();
    let (exit_tx, exit_rx) = watch::channel(ChildExit::Running);
    let name = server.clone();
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => {
                // What the child left running in its group goes with it. The group id stays
                // reserved while the group has members, so this cannot hit a stranger.
                kill_group(pid);
                status
            }
            _ = kill_rx => {
                // The child is not reaped yet, so its pid is still its group's id.
                kill_group(pid);
                let _ = child.start_kill();
                child.wait().await
            }
        };
        let text = match status {
            Ok(status) => status.to_string(),
            Err(error) => format!("unknown ({error})"),
        };
        tracing::info!(server = %name, status = %text, "server process ended");
        let _ = exit_tx.send(ChildExit::Exited(text));
    });

    Ok((
        WireTransport::new(server, out_tx, in_rx, raw),
        ChildGuard {
            kill: Some(kill_tx),
            exit: exit_rx,
            pid,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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
