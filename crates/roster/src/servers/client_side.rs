//! roster's side of the rmcp client: what roster answers when a server sends a request, and
//! how each server notification reaches the listener hub (as one [`ServerEvent`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientResult, CustomResult, ElicitResult, ElicitationAction, ErrorCode,
    ErrorData, Implementation, InitializeRequestParams, ProtocolVersion, ServerNotification,
    ServerRequest,
};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, RequestContext, Subscription, SubscriptionEnd,
};
use rmcp::{RoleClient, Service};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::event::ServerEvent;
use super::notifications::Notifications;
use super::relay::{self, CallerRelay, InFlight, LogLevel};
use crate::inbox::{ConfirmDecision, ConfirmRequest};

/// How long a server's `elicitation/create` waits for a person before it is declined.
pub const ELICITATION_WAIT: Duration = Duration::from_secs(300);
/// roster's side of the rmcp client: answers the requests a server sends (relaying them to the
/// caller in flight, see [`super::relay`]) and turns every notification into a
/// [`ServerEvent`] for [`Notifications`].
pub(super) struct ClientSide {
    pub(super) shared: Arc<ClientShared>,
}

/// What the rmcp client side and the [`Connection`] share: the requests in flight with their
/// callers, and who decides what no caller can.
pub(super) struct ClientShared {
    pub(super) server: Arc<str>,
    pub(super) notifications: Arc<Notifications>,
    pub(super) in_flight: InFlight,
    /// How many notifications a result waits for were handled (see [`super::wire`]).
    pub(super) awaited_handled: watch::Sender<u64>,
}

impl ClientShared {
    /// Handles one notification of the server, however it came (rmcp's notification handler,
    /// or a `subscriptions/listen` stream): a log message goes to the caller it belongs to,
    /// every event to the listeners, and one a call's result waits for is counted as handled.
    /// One place, so the count of handled events can never fall behind the count the wire saw
    /// (a call would then wait out its bound on every later call).
    pub(super) fn handle(&self, event: &ServerEvent) {
        if let ServerEvent::Log { params } = event {
            self.relay_log(params);
        }
        self.notifications.dispatch(event);
        if event.awaited_by_results() {
            self.awaited_handled.send_modify(|handled| *handled += 1);
        }
    }
}

/// Why a server's request got no result.
pub(super) enum Unanswered {
    /// Nobody could be asked: no caller, or one without the capability (the reason says which).
    Refused(String),
    /// The caller was asked and answered with this error.
    Failed(ErrorData),
}

impl Service<RoleClient> for ClientSide {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        match request {
            ServerRequest::PingRequest(_) => Ok(ClientResult::empty(())),
            // rmcp runs each request handler on its own task, so waiting here for the client
            // or a person does not stall the reader.
            ServerRequest::CreateMessageRequest(_)
            | ServerRequest::ElicitRequest(_)
            | ServerRequest::ListRootsRequest(_) => {
                let value = serde_json::to_value(&request).unwrap_or_default();
                let method = method_of(&value).to_owned();
                let params = value.get("params").cloned().unwrap_or_else(|| json!({}));
                // Streamable HTTP names the request whose response stream carried this one.
                let origin = match context.extensions.get::<InboundStreamOrigin>() {
                    Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
                    _ => None,
                };
                let caller = self.shared.in_flight.caller(origin.as_ref());
                match self
                    .shared
                    .answer(caller, &method, params, &context.ct)
                    .await
                {
                    Ok(result) => Ok(ClientResult::CustomResult(CustomResult(result))),
                    Err(Unanswered::Refused(reason)) => Err(ErrorData::invalid_request(
                        format!(
                            "roster cannot relay `{method}` from server `{}`: {reason}",
                            self.shared.server
                        ),
                        None,
                    )),
                    Err(Unanswered::Failed(error)) => Err(error),
                }
            }
            other => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "roster does not serve `{}` to its servers",
                    method_of(&serde_json::to_value(&other).unwrap_or_default())
                ),
                None,
            )),
        }
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        _context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        if let Some(event) = ServerEvent::from_notification(&notification) {
            self.shared.handle(&event);
        }
        Ok(())
    }

    fn get_info(&self) -> InitializeRequestParams {
        // What roster can relay to its clients (elicitation also to the inbox). A 2026-07-28
        // server hears each caller's own capabilities with every request instead.
        let capabilities: ClientCapabilities = serde_json::from_value(json!({
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
            "roots": {},
        }))
        .unwrap_or_default();
        let mut info = InitializeRequestParams::new(capabilities, implementation());
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

impl ClientShared {
    /// Answers one server request: the caller when it declared the capability, else the inbox
    /// for an elicitation; sampling and roots without a caller are refused.
    pub(super) async fn answer(
        &self,
        caller: Option<Arc<dyn CallerRelay>>,
        method: &str,
        params: Value,
        cancelled: &CancellationToken,
    ) -> Result<Value, Unanswered> {
        let refused = match caller {
            Some(caller) => match relay::refusal(&caller.capabilities(), method, &params) {
                None => {
                    return tokio::select! {
                        answer = caller.ask(method, params) => answer.map_err(Unanswered::Failed),
                        _ = cancelled.cancelled() => Err(Unanswered::Failed(ErrorData::new(
                            ErrorCode::INTERNAL_ERROR,
                            format!("the {method} request was cancelled before the client answered"),
                            None,
                        ))),
                    };
                }
                Some(reason) => reason,
            },
            None => "no client request is in flight to this server".to_owned(),
        };
        if method == relay::ELICITATION {
            tracing::info!(server = %self.server, reason = %refused, "elicitation goes to the inbox");
            let result = self.elicit(params, cancelled).await;
            return serde_json::to_value(result)
                .map_err(|e| Unanswered::Failed(ErrorData::internal_error(e.to_string(), None)));
        }
        Err(Unanswered::Refused(refused))
    }

    /// Gives a log message to the caller in flight when it asked for that level; one sent
    /// outside any request goes to the log fallback.
    fn relay_log(&self, params: &Value) {
        if self.in_flight.is_empty() {
            if let Some(fallback) = self.notifications.log_fallback() {
                fallback(params);
            }
            return;
        }
        let Some(caller) = self.in_flight.caller(None) else {
            return;
        };
        let wanted = caller.log_level().is_some_and(|least| {
            LogLevel::of_message(params).unwrap_or(LogLevel::Emergency) >= least
        });
        if wanted {
            caller.log(params.clone());
        }
    }

    /// What a 2026-07-28 server is told the client can do, for one request of `caller`: the
    /// caller's relayable capabilities; for an initialize-era caller (or none) also form
    /// elicitation when the inbox can ask a person.
    pub(super) fn declared_for(&self, caller: Option<&Arc<dyn CallerRelay>>) -> Value {
        let mut capabilities = caller
            .map(|c| relay::relayable(&c.capabilities()))
            .unwrap_or_default();
        let passes_through = caller.is_some_and(|c| c.takes_input_required());
        if !passes_through && self.notifications.confirmer().is_some() {
            capabilities
                .entry("elicitation")
                .or_insert_with(|| json!({"form": {}}));
        }
        Value::Object(capabilities)
    }

    /// A form elicitation becomes a yes/no confirm for a person; URL elicitations, forms whose
    /// required fields have no answer roster can give, and every no or expiry are declined.
    async fn elicit(&self, params: Value, cancelled: &CancellationToken) -> ElicitResult {
        let decline = ElicitResult::new(ElicitationAction::Decline);
        let Some(confirmer) = self.notifications.confirmer() else {
            return decline;
        };
        if params.get("mode").and_then(Value::as_str) == Some("url") {
            tracing::info!(%params, "declined a URL elicitation: roster opens no URLs");
            return decline;
        }
        let Some(content) = confirm_content(params.get("requestedSchema")) else {
            tracing::info!(%params, "declined an elicitation that asks for more than a yes");
            return decline;
        };
        let request = ConfirmRequest {
            method: "elicitation/create".to_owned(),
            params,
            ttl: ELICITATION_WAIT,
        };
        let decision = tokio::select! {
            decision = confirmer(request) => decision,
            _ = cancelled.cancelled() => ConfirmDecision::Expired,
        };
        match decision {
            ConfirmDecision::Confirmed => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content)
            }
            ConfirmDecision::Declined | ConfirmDecision::Expired => decline,
        }
    }
}

/// The content a yes gives: every field's `default`, and `true` for a required boolean
/// without one. `None` when a required field is neither (roster cannot make up text).
fn confirm_content(schema: Option<&Value>) -> Option<Value> {
    let empty = Map::new();
    let properties = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, property) in properties {
        if let Some(default) = property.get("default") {
            content.insert(name.clone(), default.clone());
        } else if required.contains(&name.as_str()) {
            if property.get("type").and_then(Value::as_str) == Some("boolean") {
                content.insert(name.clone(), Value::Bool(true));
            } else {
                return None;
            }
        }
    }
    if required.iter().any(|r| !content.contains_key(*r)) {
        return None;
    }
    Some(Value::Object(content))
}

fn method_of(value: &Value) -> &str {
    value.get("method").and_then(Value::as_str).unwrap_or("?")
}

/// Hands a `subscriptions/listen` stream's notifications to the connection's
/// [`ClientShared::handle`] until `stop` is cancelled (the subscription is dropped, which
/// cancels it) or the stream ends (`ended` is told how).
pub(super) fn relay_listen(
    mut subscription: Subscription,
    shared: Arc<ClientShared>,
    stop: CancellationToken,
    ended: impl FnOnce(Option<&SubscriptionEnd>) + Send + 'static,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                next = subscription.next() => match next {
                    Ok(Some(notification)) => {
                        if let Some(event) = ServerEvent::from_notification(&notification) {
                            shared.handle(&event);
                        }
                    }
                    Ok(None) | Err(_) => {
                        ended(subscription.end());
                        return;
                    }
                },
                () = stop.cancelled() => return,
            }
        }
    });
}

/// roster as the client servers see (`clientInfo`).
pub(crate) fn implementation() -> Implementation {
    Implementation::new("roster", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_yes_gives_defaults_and_true_for_required_booleans() {
        let schema = json!({
            "type": "object",
            "properties": {
                "confirm": {"type": "boolean"},
                "note": {"type": "string", "default": "ok"},
                "optional": {"type": "string"}
            },
            "required": ["confirm"]
        });
        assert_eq!(
            confirm_content(Some(&schema)),
            Some(json!({"confirm": true, "note": "ok"}))
        );
        assert_eq!(confirm_content(None), Some(json!({})));
        let needs_text = json!({
            "properties": {"name": {"type": "string"}},
            "required": ["name"]
        });
        assert_eq!(confirm_content(Some(&needs_text)), None);
        let missing = json!({"properties": {}, "required": ["ghost"]});
        assert_eq!(confirm_content(Some(&missing)), None);
    }
}
