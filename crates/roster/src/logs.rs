//! roster's log: every line any crate logs — roster's own, rmcp's, reqwest's, hyper's — passes
//! through [`crate::config::redact_urls`] on its way out, so no URL's userinfo or query string
//! (where API keys and tokens tend to live) reaches the log at any level.
//!
//! The rule sits at the writer rather than at each call site: roster redacts the URLs it logs
//! itself, but the libraries under it log URLs in their own words (rmcp's transport worker logs
//! a reqwest error with the whole URL in it at ERROR). [`Redacted`] wraps any
//! [`MakeWriter`]; `roster serve` logs to stderr through it, and an embedder can do the same.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

/// A [`MakeWriter`] whose every log line has the userinfo and query string of each URL in it
/// masked, as [`crate::config::redact_urls`] masks them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Redacted<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Redacted<M> {
    type Writer = RedactedLine<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactedLine::new(self.0.make_writer())
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        RedactedLine::new(self.0.make_writer_for(meta))
    }
}

/// One event's text, held until it is whole (the formatter may write it in pieces, and a URL
/// may span two of them), then written redacted when flushed or dropped.
#[derive(Debug)]
pub struct RedactedLine<W: Write> {
    inner: W,
    line: Vec<u8>,
}

impl<W: Write> RedactedLine<W> {
    fn new(inner: W) -> Self {
        RedactedLine {
            inner,
            line: Vec::new(),
        }
    }

    fn emit(&mut self) -> io::Result<()> {
        if self.line.is_empty() {
            return Ok(());
        }
        let line = std::mem::take(&mut self.line);
        // Most lines hold no URL at all: they go out as they came.
        let may_hold_url = |bytes: &[u8]| {
            bytes.windows(3).any(|w| w == b"://") || bytes.windows(5).any(|w| w == b"Url {")
        };
        if may_hold_url(&line) {
            let text = String::from_utf8_lossy(&line);
            self.inner
                .write_all(crate::config::redact_urls(&text).as_bytes())
        } else {
            self.inner.write_all(&line)
        }
    }
}

impl<W: Write> Write for RedactedLine<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.emit()?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for RedactedLine<W> {
    fn drop(&mut self) {
        // A log line that cannot be written has nowhere else to go.
        let _ = self.emit();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            crate::sync::lock(&self.0).extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn logged(log: impl FnOnce()) -> String {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(true)
            .with_writer(Redacted(move || sink.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        let bytes = crate::sync::lock(&captured.0).clone();
        String::from_utf8(bytes).expect("UTF-8")
    }

    #[test]
    fn a_url_s_userinfo_and_query_never_reach_the_log_in_any_field_or_form() {
        let text = logged(|| {
            let url = "http://user:PASSWORD@127.0.0.1:9/mcp?api_key=QUERY";
            let span = tracing::trace_span!("connect", uri = url);
            let _in = span.enter();
            tracing::error!("worker quit: Client(reqwest::Error {{ url: \"{url}\" }})");
            tracing::debug!(url, "as a field");
            tracing::trace!(?url, "debug of a string");
            tracing::warn!(
                "Url {{ scheme: \"http\", username: \"user\", password: Some(\"PASSWORD\"), \
                 path: \"/mcp\", query: Some(\"api_key=QUERY\"), fragment: None }}"
            );
            tracing::info!("postgres://roster:PASSWORD@db/roster?sslmode=require");
            tracing::info!("nothing to hide at http://127.0.0.1:9/mcp");
        });
        assert!(!text.contains("PASSWORD"), "{text}");
        assert!(!text.contains("QUERY"), "{text}");
        assert_eq!(text.lines().count(), 6, "{text}");
        assert!(text.contains("http://***@127.0.0.1:9/mcp?***"), "{text}");
        assert!(
            text.contains("nothing to hide at http://127.0.0.1:9/mcp"),
            "{text}"
        );
        assert!(text.contains("query: Some(\"***\")"), "{text}");
    }
}
