//! [`ServerEvent`]: each notification a server sends, read once at the connection edge.
//!
//! The inbox keeps a notification as the wire had it (method and params), while roster's
//! listeners need to know what it says (which list went stale, which resource changed, which
//! call the progress belongs to). Both come from one [`ServerEvent`], built once per
//! notification: listeners match on its kind, and the method names live only here. A new kind
//! of notification is one arm here and one listener that matches it.

use rmcp::model::ServerNotification;
use serde_json::Value;

use super::relay::LOG_MESSAGE;

/// A server's tools changed: its tools are re-listed.
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";

/// A server's prompts changed: its prompts are re-listed.
pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";

/// A server's resources changed: its resources and resource templates are re-listed.
pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";

/// The notification a server sends when a subscribed resource changed.
pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";

/// Progress of a request in flight, for the call that asked for it.
pub const PROGRESS: &str = "notifications/progress";

/// Notifications a call's result waits for: the transports count them as they arrive (see
/// [`super::wire`]) and [`ServerEvent::awaited_by_results`] as they are handled. The log messages
/// and progress of the call in flight reach its caller before its result; a `list_changed` the
/// server sent before the result has marked its list stale, so the caller's next turn lists it
/// (a tool that adds tools, then the client's `tools/list`, sees the new ones).
pub(crate) const AWAITED_BY_RESULTS: [&str; 5] = [
    LOG_MESSAGE,
    PROGRESS,
    TOOLS_LIST_CHANGED,
    PROMPTS_LIST_CHANGED,
    RESOURCES_LIST_CHANGED,
];

/// Which of a server's lists a `list_changed` makes stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ListKind {
    /// `tools/list`.
    Tools,
    /// `prompts/list`.
    Prompts,
    /// `resources/list` and `resources/templates/list`.
    Resources,
}

impl ListKind {
    /// Every kind, in the order their notifications are named above.
    pub const ALL: [ListKind; 3] = [ListKind::Tools, ListKind::Prompts, ListKind::Resources];

    /// The `list_changed` notification of this kind.
    pub const fn method(self) -> &'static str {
        match self {
            ListKind::Tools => TOOLS_LIST_CHANGED,
            ListKind::Prompts => PROMPTS_LIST_CHANGED,
            ListKind::Resources => RESOURCES_LIST_CHANGED,
        }
    }

    /// The kind whose `list_changed` `method` is, if it is one.
    pub fn of_method(method: &str) -> Option<ListKind> {
        ListKind::ALL
            .into_iter()
            .find(|kind| kind.method() == method)
    }
}

/// One notification a server sent, with what roster's listeners act on. Every kind keeps its
/// wire params, so [`ServerEvent::method`] and [`ServerEvent::params`] give the notification
/// back exactly as it came (the inbox records that).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerEvent {
    /// A `list_changed`: that list of the server is stale.
    ListChanged {
        /// Which list.
        list: ListKind,
        /// The notification's params (`null`, or only `_meta`).
        params: Value,
    },
    /// `notifications/resources/updated` for a resource roster subscribed to.
    ResourceUpdated {
        /// The resource that changed.
        uri: String,
        /// The notification's params.
        params: Value,
    },
    /// `notifications/progress` of a request in flight.
    Progress {
        /// The `progressToken` as JSON text (the key a call listens under); `None` when the
        /// server sent none.
        token: Option<String>,
        /// The notification's params.
        params: Value,
    },
    /// `notifications/message`: a log message.
    Log {
        /// The notification's params (`level`, `logger`, `data`).
        params: Value,
    },
    /// Any other notification (cancelled, task status, roster's own drop report, a server's
    /// own methods), kept for reading.
    Other {
        /// The method as sent.
        method: String,
        /// The notification's params.
        params: Value,
    },
}

impl ServerEvent {
    /// The event a notification of `method` with `params` is.
    pub fn new(method: &str, params: Value) -> ServerEvent {
        if let Some(list) = ListKind::of_method(method) {
            return ServerEvent::ListChanged { list, params };
        }
        match method {
            RESOURCES_UPDATED => match params.get("uri").and_then(Value::as_str) {
                Some(uri) => ServerEvent::ResourceUpdated {
                    uri: uri.to_owned(),
                    params,
                },
                // Nothing to relay without a URI; the inbox still has it.
                None => ServerEvent::Other {
                    method: method.to_owned(),
                    params,
                },
            },
            PROGRESS => ServerEvent::Progress {
                token: params.get("progressToken").map(Value::to_string),
                params,
            },
            LOG_MESSAGE => ServerEvent::Log { params },
            _ => ServerEvent::Other {
                method: method.to_owned(),
                params,
            },
        }
    }

    /// The event rmcp's typed notification is; `None` (logged) if it cannot be written back as
    /// JSON. Read from its wire form rather than its rmcp type: the inbox needs that form
    /// anyway, and a known method whose params rmcp cannot type still reads as that method.
    pub(crate) fn from_notification(notification: &ServerNotification) -> Option<ServerEvent> {
        match serde_json::to_value(notification) {
            Ok(mut value) => {
                let params = value.get_mut("params").map_or(Value::Null, Value::take);
                let method = value.get("method").and_then(Value::as_str).unwrap_or("?");
                Some(ServerEvent::new(method, params))
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read a server notification");
                None
            }
        }
    }

    /// The notification's method, as the server sent it.
    pub fn method(&self) -> &str {
        match self {
            ServerEvent::ListChanged { list, .. } => list.method(),
            ServerEvent::ResourceUpdated { .. } => RESOURCES_UPDATED,
            ServerEvent::Progress { .. } => PROGRESS,
            ServerEvent::Log { .. } => LOG_MESSAGE,
            ServerEvent::Other { method, .. } => method,
        }
    }

    /// The notification's params, as the server sent them (`null` when it sent none).
    pub fn params(&self) -> &Value {
        match self {
            ServerEvent::ListChanged { params, .. }
            | ServerEvent::ResourceUpdated { params, .. }
            | ServerEvent::Progress { params, .. }
            | ServerEvent::Log { params }
            | ServerEvent::Other { params, .. } => params,
        }
    }

    /// Whether a call's result waits until it is handled (see [`AWAITED_BY_RESULTS`]).
    pub(crate) fn awaited_by_results(&self) -> bool {
        matches!(
            self,
            ServerEvent::Progress { .. }
                | ServerEvent::Log { .. }
                | ServerEvent::ListChanged { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_gives_back_its_method_and_params() {
        let cases = [
            (TOOLS_LIST_CHANGED, Value::Null),
            (PROMPTS_LIST_CHANGED, json!({"_meta": {"k": 1}})),
            (RESOURCES_LIST_CHANGED, Value::Null),
            (RESOURCES_UPDATED, json!({"uri": "file:///a"})),
            (RESOURCES_UPDATED, json!({})),
            (PROGRESS, json!({"progressToken": 7, "progress": 1})),
            (PROGRESS, json!({"progress": 1})),
            (LOG_MESSAGE, json!({"level": "info", "data": "hi"})),
            ("notifications/cancelled", json!({"requestId": 3})),
        ];
        for (method, params) in cases {
            let event = ServerEvent::new(method, params.clone());
            assert_eq!((event.method(), event.params()), (method, &params));
        }
    }

    #[test]
    fn kinds_carry_what_listeners_act_on() {
        assert_eq!(
            ServerEvent::new(PROMPTS_LIST_CHANGED, Value::Null),
            ServerEvent::ListChanged {
                list: ListKind::Prompts,
                params: Value::Null
            }
        );
        let updated = ServerEvent::new(RESOURCES_UPDATED, json!({"uri": "file:///a"}));
        assert!(matches!(updated, ServerEvent::ResourceUpdated { uri, .. } if uri == "file:///a"));
        let progress = ServerEvent::new(PROGRESS, json!({"progressToken": "t"}));
        assert!(matches!(progress, ServerEvent::Progress { token: Some(t), .. } if t == "\"t\""));
        for method in AWAITED_BY_RESULTS {
            assert!(
                ServerEvent::new(method, Value::Null).awaited_by_results(),
                "{method}"
            );
        }
        assert!(
            !ServerEvent::new(RESOURCES_UPDATED, json!({"uri": "file:///a"})).awaited_by_results()
        );
        assert!(!ServerEvent::new("notifications/cancelled", Value::Null).awaited_by_results());
    }

    #[test]
    fn typed_notifications_read_as_their_wire_form() {
        for kind in ListKind::ALL {
            let wire = json!({"jsonrpc": "2.0", "method": kind.method()});
            let message: rmcp::model::ServerJsonRpcMessage =
                serde_json::from_value(wire).expect("a notification");
            let rmcp::model::JsonRpcMessage::Notification(n) = message else {
                panic!("not a notification");
            };
            let event = ServerEvent::from_notification(&n.notification).expect("an event");
            assert_eq!(
                event,
                ServerEvent::ListChanged {
                    list: kind,
                    params: Value::Null
                }
            );
        }
    }
}
