//! A process spoken to in JSON lines over its stdin and stdout: `roster serve` over stdio, or a
//! stdio MCP server with no roster in between. The test writes each message and reads each
//! line as it was written.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// `command` started (killed when dropped) with its stdin and stdout piped and its stderr
/// dropped: the child and both pipes.
pub fn spawn_piped(mut command: Command) -> (Child, ChildStdout, ChildStdin) {
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {command:?}: {e}"));
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        panic!("the pipes of {command:?}");
    };
    (child, stdout, stdin)
}

/// A child process (killed when dropped) and its piped stdin and stdout.
pub struct JsonLines {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl JsonLines {
    /// Starts `command` as [`spawn_piped`] does.
    pub fn spawn(command: Command) -> JsonLines {
        let (child, stdout, stdin) = spawn_piped(command);
        JsonLines {
            _child: child,
            stdin,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// Writes `message` as JSON on one line.
    pub async fn send(&mut self, message: &Value) {
        self.send_text(&message.to_string()).await;
    }

    /// Writes `message` as it is written, on one line.
    pub async fn send_text(&mut self, message: &str) {
        let line = format!("{message}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to the process");
    }

    /// The next line whose message `wanted` picks (the others are passed over), as it was
    /// written and parsed; panics when the process stays silent for `wait` (a hang), closes its
    /// stdout, or writes a line that is no JSON.
    pub async fn next_where(
        &mut self,
        wait: Duration,
        wanted: impl Fn(&Value) -> bool,
    ) -> (String, Value) {
        loop {
            let line = tokio::time::timeout(wait, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("the process stayed silent for {wait:?}"))
                .expect("read the process's stdout")
                .expect("the process's stdout is open");
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("a line that is no JSON ({e}): {line}"));
            if wanted(&message) {
                return (line, message);
            }
        }
    }
}
