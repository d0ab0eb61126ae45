//! The label values roster's metrics may carry, each from a fixed set or a bounded one: a
//! client or a server choosing a method name, or a server choosing tool names, can never grow
//! a metric's series without limit.

use std::collections::HashSet;
use std::fmt::Write;

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, EncodeLabelValue, LabelSetEncoder};

/// The value of a method label outside the fixed list.
pub(crate) const OTHER: &str = "other";

/// The most distinct tool names the call metrics carry with `metrics_tool_labels = true`; calls
/// of tools beyond them are labelled [`OTHER`]. Each name is a latency histogram of its own
/// (some 2 KB of the page per outcome): a thousand made the page 2.3 MB, and servers that keep
/// adding tools of new names would grow it for ever.
pub(crate) const MAX_TOOL_LABELS: usize = 100;

/// `method` when it is one of `known`, else [`OTHER`].
/// The label of a client's request `method`: the method, when it is one of the spec's
/// (`roster_core::methods`), else [`OTHER`].
pub(crate) fn client_request_label(method: &str) -> &'static str {
    roster_core::methods::client_request(method).map_or(OTHER, |request| request.name)
}

pub(crate) fn bounded_method(method: &str, known: &[&'static str]) -> &'static str {
    known
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or(OTHER)
}

/// How a `tools/call` that reached a server ended (a server's answer says which: see
/// `servers/outcome.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    /// A result (including an `input_required` result).
    Ok,
    /// A result with `isError: true`.
    ToolError,
    /// A JSON-RPC error from the server, an answer roster cannot read, or input the client
    /// could not give.
    ProtocolError,
    /// No answer within `call_timeout`.
    Timeout,
    /// The client cancelled.
    Cancelled,
    /// The server is not connected, or its connection closed under the call.
    ServerDown,
}

impl CallOutcome {
    /// Every outcome.
    pub(crate) const ALL: [CallOutcome; 6] = [
        CallOutcome::Ok,
        CallOutcome::ToolError,
        CallOutcome::ProtocolError,
        CallOutcome::Timeout,
        CallOutcome::Cancelled,
        CallOutcome::ServerDown,
    ];

    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::ProtocolError => "protocol_error",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Cancelled => "cancelled",
            CallOutcome::ServerDown => "server_down",
        }
    }
}

/// The labels of one call series: the server, how it ended, and (with
/// `metrics_tool_labels = true`) the exposed tool name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CallLabels {
    pub(crate) server: String,
    pub(crate) outcome: CallOutcome,
    pub(crate) tool: Option<String>,
}

impl EncodeLabelSet for CallLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> std::fmt::Result {
        EncodeLabel::encode(&("server", self.server.as_str()), encoder.encode_label())?;
        EncodeLabel::encode(&("outcome", self.outcome.as_str()), encoder.encode_label())?;
        if let Some(tool) = &self.tool {
            EncodeLabel::encode(&("tool", tool.as_str()), encoder.encode_label())?;
        }
        Ok(())
    }
}

/// A label set of fixed keys: `[("server", "fs"), ("method", "tools/list")]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Labels<const N: usize>(pub(crate) [(&'static str, Value); N]);

/// A label value: one of a fixed set (`&'static str`) or a configured server's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Value {
    Fixed(&'static str),
    Server(String),
}

impl EncodeLabelValue for &Value {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder<'_>,
    ) -> std::fmt::Result {
        match self {
            Value::Fixed(v) => encoder.write_str(v),
            Value::Server(v) => EncodeLabelValue::encode(&v.as_str(), encoder),
        }
    }
}

impl<const N: usize> EncodeLabelSet for Labels<N> {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> std::fmt::Result {
        for (key, value) in &self.0 {
            EncodeLabel::encode(&(*key, value), encoder.encode_label())?;
        }
        Ok(())
    }
}

/// The tool names call metrics have carried so far, at most [`MAX_TOOL_LABELS`].
#[derive(Debug, Default)]
pub(crate) struct ToolLabels {
    seen: HashSet<String>,
}

impl ToolLabels {
    /// The tool names in use as labels, and [`OTHER`] (which the names past the bound share).
    pub(crate) fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.seen.iter().cloned().chain([OTHER.to_owned()])
    }

    /// The label for a call of `tool`: its name while fewer than `limit` names are in use (or
    /// it is one of them), else [`OTHER`].
    pub(crate) fn label(&mut self, tool: &str, limit: usize) -> String {
        if self.seen.contains(tool) {
            return tool.to_owned();
        }
        if self.seen.len() >= limit {
            return OTHER.to_owned();
        }
        self.seen.insert(tool.to_owned());
        tool.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_outside_the_spec_are_other() {
        assert_eq!(client_request_label("tools/call"), "tools/call");
        assert_eq!(client_request_label("tools/call "), OTHER);
        assert_eq!(client_request_label("x/custom"), OTHER);
        assert_eq!(
            bounded_method(
                "notifications/tools/list_changed",
                roster_core::methods::SERVER_NOTIFICATIONS
            ),
            "notifications/tools/list_changed"
        );
        assert_eq!(
            bounded_method(
                "notifications/roster/dropped",
                roster_core::methods::SERVER_NOTIFICATIONS
            ),
            OTHER
        );
        // A thousand invented methods make one label value.
        let values: HashSet<&str> = (0..1000)
            .map(|n| client_request_label(&format!("m/{n}")))
            .collect();
        assert_eq!(values, HashSet::from([OTHER]));
    }

    #[test]
    fn tool_labels_stop_at_their_bound() {
        let mut labels = ToolLabels::default();
        assert_eq!(labels.label("a__x", 2), "a__x");
        assert_eq!(labels.label("a__y", 2), "a__y");
        assert_eq!(
            labels.label("a__z", 2),
            OTHER,
            "a third name is over the bound"
        );
        assert_eq!(
            labels.label("a__x", 2),
            "a__x",
            "a name in use keeps its label"
        );
        assert_eq!(labels.seen.len(), 2);
    }
}
