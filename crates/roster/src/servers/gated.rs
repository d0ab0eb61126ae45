//! rmcp's streamable HTTP transport behind a server's [`NotificationGate`]: the gate's rate on
//! what rmcp's transport reads, the messages of roster's own requests' response streams
//! ([`super::http_direct`]) handed to rmcp in order, and the notifications a call's result
//! waits for counted as they reach rmcp. roster's own transports (stdio, SSE) gate in
//! [`super::wire`] instead.

use std::time::Instant;

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::event::ServerEvent;
use super::gate::{Admit, COALESCED, NotificationGate};
use super::http_direct::Injected;
use super::wire::RawResults;

/// rmcp's streamable HTTP transport behind a [`NotificationGate`] (roster's own transports
/// gate in [`super::wire`], where they also count what a call waits for). rmcp's transport
/// buffers a bounded number of messages, so a flood backs up into the HTTP stream.
/// Also takes what came on the response streams of roster's own requests
/// ([`super::http_direct`]), and counts the notifications a call's result waits for as they
/// reach rmcp (see [`super::wire::RawResults::awaited_seen`]).
pub(crate) struct GatedTransport<T> {
    inner: T,
    gate: NotificationGate,
    injected: Option<mpsc::Receiver<Injected>>,
    raw: RawResults,
    /// An answer (or a call's barrier) waiting for a coalesced `list_changed` handed on
    /// before it ([`NotificationGate::release_before_answer`]).
    held: Option<Injected>,
}

impl<T> GatedTransport<T> {
    /// A coalesced notification the gate lets out now: delivered to roster's listeners
    /// (`Some(None)`), or a `list_changed` for rmcp to see (`Some(Some)`); `None`: neither.
    fn release(&mut self, method: &'static str) -> Option<Option<RxJsonRpcMessage<RoleClient>>> {
        self.raw.count_awaited();
        if self.gate.delivers(method) {
            self.gate.deliver(&ServerEvent::new(method, Value::Null));
            return Some(None);
        }
        list_changed(method).map(|notification| Some(JsonRpcMessage::notification(notification)))
    }

    pub(crate) fn new(
        inner: T,
        gate: NotificationGate,
        injected: mpsc::Receiver<Injected>,
        raw: RawResults,
    ) -> Self {
        GatedTransport {
            inner,
            gate,
            injected: Some(injected),
            raw,
            held: None,
        }
    }
}

/// The next message of roster's own requests' streams; pending once there can be none.
async fn next_injected(injected: &mut Option<mpsc::Receiver<Injected>>) -> Injected {
    if let Some(rx) = injected {
        if let Some(message) = rx.recv().await {
            return message;
        }
        *injected = None;
    }
    std::future::pending().await
}

/// Whether a call's result waits until this notification is handled
/// ([`super::event::AWAITED_BY_RESULTS`]).
fn awaited_by_results(notification: &ServerNotification) -> bool {
    matches!(
        notification,
        ServerNotification::LoggingMessageNotification(_)
            | ServerNotification::ProgressNotification(_)
            | ServerNotification::ToolListChangedNotification(_)
            | ServerNotification::PromptListChangedNotification(_)
            | ServerNotification::ResourceListChangedNotification(_)
    )
}

/// The method a gate decides on: the coalesced kinds by name, any other notification alike.
fn method_of(notification: &ServerNotification) -> &'static str {
    match notification {
        ServerNotification::ToolListChangedNotification(_) => COALESCED[0],
        ServerNotification::PromptListChangedNotification(_) => COALESCED[1],
        ServerNotification::ResourceListChangedNotification(_) => COALESCED[2],
        _ => "notifications/*",
    }
}

fn list_changed(method: &str) -> Option<ServerNotification> {
    let value = json!({"jsonrpc": "2.0", "method": method});
    match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value) {
        Ok(JsonRpcMessage::Notification(n)) => Some(n.notification),
        _ => None,
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for GatedTransport<T> {
    type Error = T::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            // Every message counts against the task's budget, so a server that writes faster
            // than roster reads is read in slices and the worker's other tasks get their turn.
            tokio::task::coop::consume_budget().await;
            if let Some(method) = self.gate.tick(Instant::now()) {
                match self.release(method) {
                    Some(Some(message)) => return Some(message),
                    Some(None) => continue,
                    None => {}
                }
            }
            let next = match self.held.take() {
                Some(held) => held,
                None => {
                    let sleep = self.gate.until_wake();
                    let paused = self.gate.paused();
                    let (inner, injected) = (&mut self.inner, &mut self.injected);
                    // rmcp's transport hands out whole messages from a channel, as does the
                    // channel of roster's own streams: dropping either receive for another
                    // loses nothing. A flood paced past its rate waits in the stream (roster's
                    // own streams, which answer its own calls, are never paused).
                    tokio::select! {
                        message = async {
                            paused.await;
                            inner.receive().await
                        } => Injected::Message(Box::new(message?)),
                        injected = next_injected(injected) => injected,
                        () = sleep => continue,
                    }
                }
            };
            // An answer to one of roster's requests: a barrier (the answer of a call roster
            // POSTed itself comes next) or a response rmcp waits for.
            let answers = match &next {
                Injected::Barrier(_) => true,
                Injected::Message(message) => matches!(
                    **message,
                    JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)
                ),
            };
            if answers && let Some(method) = self.gate.release_before_answer() {
                self.held = Some(next);
                if let Some(Some(message)) = self.release(method) {
                    return Some(message);
                }
                continue;
            }
            let message = match next {
                Injected::Message(message) => *message,
                Injected::Barrier(done) => {
                    let _ = done.send(());
                    continue;
                }
            };
            let method = match &message {
                JsonRpcMessage::Notification(n) => Some(method_of(&n.notification)),
                JsonRpcMessage::Request(_) => Some("requests/*"),
                _ => None,
            };
            if let Some(method) = method
                && self.gate.admit(method, Instant::now()) != Admit::Pass
            {
                continue;
            }
            if let JsonRpcMessage::Notification(n) = &message {
                if awaited_by_results(&n.notification) {
                    self.raw.count_awaited();
                }
                if self.gate.delivering()
                    && let Some(event) = ServerEvent::from_notification(&n.notification)
                    && self.gate.delivers(event.method())
                {
                    self.gate.deliver(&event);
                    continue;
                }
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesced_kinds_survive_the_typed_round_trip() {
        for method in COALESCED {
            let notification = list_changed(method).expect("a typed notification");
            assert_eq!(method_of(&notification), method);
        }
    }

    #[test]
    fn the_typed_awaited_kinds_are_the_awaited_methods() {
        let typed = |method: &str, params: Value| {
            let value = json!({"jsonrpc": "2.0", "method": method, "params": params});
            match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value) {
                Ok(JsonRpcMessage::Notification(n)) => n.notification,
                other => panic!("{method} is no typed notification: {other:?}"),
            }
        };
        for method in super::super::event::AWAITED_BY_RESULTS {
            let params = match method {
                super::super::event::PROGRESS => json!({"progressToken": 1, "progress": 1}),
                super::super::relay::LOG_MESSAGE => json!({"level": "info", "data": "x"}),
                _ => json!({}),
            };
            assert!(awaited_by_results(&typed(method, params)), "{method}");
        }
        let updated = typed(
            super::super::event::RESOURCES_UPDATED,
            json!({"uri": "test://x"}),
        );
        assert!(!awaited_by_results(&updated));
    }
}
