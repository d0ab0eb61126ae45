//! The gateway over this process's stdin/stdout: one client, one session.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::future::BoxFuture;
use rmcp::ServiceExt;
use rmcp::model::RequestId;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::Mutex;
use tokio_util::bytes::{Bytes, BytesMut};

use super::lane::{AsideQueue, FastLane, Probe, set_aside};
use super::{Gateway, GatewayHandler};

/// Why serving over stdio stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// The client never completed the MCP handshake.
    #[error("the MCP client on stdio did not start a session: {0}")]
    Start(String),
    /// The session task failed.
    #[error("the stdio session ended abnormally: {0}")]
    Run(String),
}

/// Serves one client on stdin/stdout until it disconnects or the gateway shuts down.
pub async fn serve(gateway: Arc<Gateway>) -> Result<(), StdioError> {
    let shutdown = gateway.shutdown_token();
    // Pipes (as clients launch servers) are read and written on the IO reactor; anything else
    // (a terminal, a file) falls back to tokio's stdin/stdout, one blocking-pool hop per read.
    let (read, write) = rmcp::transport::stdio_pipes();
    let out = Lines::new(write);
    let aside = AsideQueue::default();
    let read = SetAside::new(read, aside.clone());
    let pipes = AsyncRwTransport::<rmcp::RoleServer, _, _>::new(read, out.writer());
    let transport = crate::metrics::stdio::counted(pipes, gateway.roster().metrics());
    let lane = FastLane::new(transport).with_lines(out).with_aside(aside);
    let service = GatewayHandler::new(gateway)
        .serve_with_ct(lane, shutdown.child_token())
        .await
        .map_err(|e| StdioError::Start(e.to_string()))?;
    service
        .waiting()
        .await
        .map_err(|e| StdioError::Run(e.to_string()))?;
    Ok(())
}

/// rmcp's longest stdio line: a longer one passes as it is (and rmcp drops it).
const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// stdin as rmcp reads it, with each `tools/call`'s arguments set aside ([`super::lane::ArgumentsText`]):
/// the line rmcp parses holds `{}` in their place, and the lane puts them back into the
/// request, so they go to the server as the client wrote them. Every other line, and any line
/// this cannot read, passes as it is.
struct SetAside<R> {
    inner: R,
    aside: AsideQueue,
    /// Read, not yet a whole line; the first `scanned` bytes hold no newline.
    pending: BytesMut,
    scanned: usize,
    /// Passing the rest of a line too long to read through as it is.
    passing: bool,
    /// Lines ready for rmcp.
    ready: VecDeque<Bytes>,
    eof: bool,
}

impl<R> SetAside<R> {
    fn new(inner: R, aside: AsideQueue) -> Self {
        SetAside {
            inner,
            aside,
            pending: BytesMut::new(),
            scanned: 0,
            passing: false,
            ready: VecDeque::new(),
            eof: false,
        }
    }

    /// Moves what `pending` holds of whole lines to `ready`, setting arguments aside.
    fn lines(&mut self) {
        while let Some(newline) = memchr::memchr(b'\n', &self.pending[self.scanned..]) {
            let line = self.pending.split_to(self.scanned + newline + 1).freeze();
            self.scanned = 0;
            // A line rmcp will refuse as too long (its newline counted, as rmcp does).
            if std::mem::take(&mut self.passing) || line.len() > MAX_LINE {
                self.ready.push_back(line);
            } else {
                self.ready.push_back(self.set_aside(line));
            }
        }
        self.scanned = self.pending.len();
        if self.pending.len() > MAX_LINE || (self.passing && !self.pending.is_empty()) {
            self.passing = true;
            self.scanned = 0;
            self.ready.push_back(self.pending.split().freeze());
        }
    }

    /// `line` with its arguments set aside, if it is a `tools/call` with an object of them.
    fn set_aside(&self, line: Bytes) -> Bytes {
        if memchr::memmem::find(&line, b"\"tools/call\"").is_none() {
            return line;
        }
        let Ok(probe) = serde_json::from_slice::<Probe<'_>>(&line) else {
            return line;
        };
        let at = probe.arguments_at(&line);
        let id = probe
            .id
            .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
        match (at, id) {
            (Some(at), Some(id)) => {
                let (rest, text) = set_aside(line, at);
                self.aside.put(id, text.0);
                rest
            }
            _ => line,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for SetAside<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if let Some(line) = this.ready.front_mut() {
                let n = line.len().min(buf.remaining());
                buf.put_slice(&line.split_to(n));
                if line.is_empty() {
                    this.ready.pop_front();
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // What is left without a newline goes as it is; then the end.
                if !this.pending.is_empty() {
                    this.ready.push_back(this.pending.split().freeze());
                    continue;
                }
                return Poll::Ready(Ok(()));
            }
            this.pending.reserve(8 * 1024);
            let read = ready!(tokio_util::io::poll_read_buf(
                Pin::new(&mut this.inner),
                cx,
                &mut this.pending
            ))?;
            if read == 0 {
                this.eof = true;
            } else {
                this.lines();
            }
        }
    }
}

type Out = Arc<Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// stdout shared by rmcp's transport and the fast lane, one whole line at a time: the lane
/// writes answers it already holds as JSON text (a `tools/list` page) without rmcp's
/// serializer, and no line of one writer can land inside a line of the other.
#[derive(Clone)]
pub(crate) struct Lines {
    out: Out,
}

impl Lines {
    fn new(write: impl AsyncWrite + Send + Unpin + 'static) -> Self {
        Lines {
            out: Arc::new(Mutex::new(Box::new(write))),
        }
    }

    /// The writer rmcp's transport writes through: each of its messages is one flush.
    fn writer(&self) -> LineWriter {
        LineWriter {
            out: self.out.clone(),
            pending: Vec::new(),
            flushing: None,
        }
    }

    /// Writes `parts` (of one JSON-RPC message and its newline) as a whole line.
    pub(crate) fn write(&self, parts: [Bytes; 3]) -> BoxFuture<'static, io::Result<()>> {
        whole(self.out.clone(), parts.into())
    }
}

/// Writes `parts` to `out` as one line, the lock held from its first byte to its flush: in
/// one system call when the pipe takes it all (a vectored write).
fn whole(out: Out, parts: Vec<Bytes>) -> BoxFuture<'static, io::Result<()>> {
    Box::pin(async move {
        let mut out = out.lock().await;
        let mut parts = parts;
        parts.retain(|part| !part.is_empty());
        while !parts.is_empty() {
            let slices: Vec<io::IoSlice<'_>> = parts.iter().map(|p| io::IoSlice::new(p)).collect();
            let mut written = out.write_vectored(&slices).await?;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            while let Some(first) = parts.first_mut() {
                if written < first.len() {
                    let _ = first.split_to(written);
                    break;
                }
                written -= first.len();
                parts.remove(0);
            }
        }
        out.flush().await
    })
}

/// Holds what rmcp's codec writes until it flushes, then writes it whole under the lock.
struct LineWriter {
    out: Out,
    pending: Vec<u8>,
    flushing: Option<BoxFuture<'static, io::Result<()>>>,
}

impl AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.pending.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if let Some(flushing) = self.flushing.as_mut() {
                let done = ready!(flushing.as_mut().poll(cx));
                self.flushing = None;
                done?;
            }
            if self.pending.is_empty() {
                return Poll::Ready(Ok(()));
            }
            let line = std::mem::take(&mut self.pending);
            self.flushing = Some(whole(self.out.clone(), vec![line.into()]));
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_flush(cx))?;
        // stdout stays open for the lane's last answers; the process's exit closes it.
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// What `input` reads as through [`SetAside`] when each read of stdin takes `chunk` bytes,
    /// and the arguments it set aside.
    async fn set_aside_in(input: &str, chunk: usize) -> (String, AsideQueue) {
        let (mut write, read) = tokio::io::duplex(chunk);
        let input = input.to_owned();
        let writing = tokio::spawn(async move {
            write.write_all(input.as_bytes()).await.expect("written");
        });
        let aside = AsideQueue::default();
        let mut reader = SetAside::new(read, aside.clone());
        let mut got = String::new();
        reader.read_to_string(&mut got).await.expect("read");
        writing.await.expect("joined");
        (got, aside)
    }

    #[tokio::test]
    async fn a_call_s_arguments_are_set_aside_and_every_other_line_passes_as_it_is() {
        let call = r#"{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"t","arguments":{"s":"}\n{\"","n":1.50},"_meta":{}}}"#;
        let list =
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"arguments":{"x":1}}}"#;
        let named = r#"{"jsonrpc":"2.0","id":3,"method":"notifications/x","params":{"text":"\"tools/call\""}}"#;
        let no_arguments =
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t"}}"#;
        let broken = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{"#;
        let input = format!("{call}\n{list}\n{named}\r\n{no_arguments}\n{broken}\n{call}");
        for chunk in [1, 7, 64, 4096] {
            let (got, aside) = set_aside_in(&input, chunk).await;
            let set = call.replace(r#"{"s":"}\n{\"","n":1.50}"#, "{}");
            // The last line has no newline: rmcp drops it, and it passes as it is.
            let expected = format!("{set}\n{list}\n{named}\r\n{no_arguments}\n{broken}\n{call}");
            assert_eq!(got, expected, "reads of {chunk} bytes");
            let id = RequestId::String("c1".into());
            let text = aside.take(&id).expect("the first call's arguments");
            assert_eq!(&text[..], br#"{"s":"}\n{\"","n":1.50}"#);
            assert!(aside.take(&id).is_none(), "reads of {chunk} bytes");
        }
    }

    #[tokio::test]
    async fn a_line_longer_than_rmcp_reads_passes_as_it_is() {
        // Just over the bound (its end read with it), and well over (passed on in parts).
        for over in [0, 200 * 1024] {
            let long = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"s":"{}"}}}}}}"#,
                "x".repeat(MAX_LINE + over)
            );
            let after =
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{"a":1}}}"#;
            let (got, aside) = set_aside_in(&format!("{long}\n{after}\n"), 64 * 1024).await;
            let expected = after.replace(r#"{"a":1}"#, "{}");
            assert_eq!(got.len(), long.len() + 1 + expected.len() + 1);
            assert!(got.ends_with(&format!("}}\n{expected}\n")));
            assert!(aside.take(&RequestId::Number(1)).is_none());
            assert_eq!(
                aside.take(&RequestId::Number(2)).as_deref(),
                Some(&br#"{"a":1}"#[..])
            );
        }
    }

    #[tokio::test]
    async fn a_line_in_parts_goes_out_whole_however_little_each_write_takes() {
        // Each write takes at most 7 bytes: parts are cut anywhere.
        let (write, mut read) = tokio::io::duplex(7);
        let lines = Lines::new(write);
        let body = Bytes::from("x".repeat(1000));
        let parts = [
            Bytes::from_static(b"{\"a\":\""),
            body,
            Bytes::from_static(b"\"}\n"),
        ];
        let other = lines.writer();
        let writing = tokio::spawn(async move {
            lines.write(parts).await.expect("written");
            // rmcp's writer's line comes after, never inside it.
            let mut other = other;
            other.write_all(b"{}\n").await.expect("buffered");
            other.flush().await.expect("written");
        });
        let mut got = Vec::new();
        while !got.ends_with(b"{}\n") {
            let mut chunk = [0; 64];
            let n = read.read(&mut chunk).await.expect("read");
            got.extend_from_slice(&chunk[..n]);
        }
        writing.await.expect("joined");
        let expected = format!("{{\"a\":\"{}\"}}\n{{}}\n", "x".repeat(1000));
        assert_eq!(String::from_utf8(got).expect("utf-8"), expected);
    }
}
