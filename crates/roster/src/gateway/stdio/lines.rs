//! stdout as the stdio gateway writes it: [`Lines`], shared by rmcp's transport and the fast
//! lane, one whole line at a time.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::future::BoxFuture;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio_util::bytes::Bytes;

type Out = Arc<Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// stdout shared by rmcp's transport and the fast lane, one whole line at a time: the lane
/// writes answers it already holds as JSON text (a `tools/list` page) without rmcp's
/// serializer, and no line of one writer can land inside a line of the other.
#[derive(Clone)]
pub(crate) struct Lines {
    out: Out,
}

impl Lines {
    pub(crate) fn new(write: impl AsyncWrite + Send + Unpin + 'static) -> Self {
        Lines {
            out: Arc::new(Mutex::new(Box::new(write))),
        }
    }

    /// The writer rmcp's transport writes through: each of its messages is one flush.
    pub(crate) fn writer(&self) -> LineWriter {
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
pub(crate) struct LineWriter {
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
