//! What the gateway pushes to a client unasked: `list_changed` notices, resource updates and
//! servers' log messages, on an initialize-era session's own stream or a 2026-07-28
//! `subscriptions/listen` stream.

use std::sync::Arc;

use rmcp::model::{ResourceUpdatedNotificationParam, ServerNotification};
use rmcp::service::{NotificationContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer};
use tokio::sync::broadcast::error::RecvError;

use super::GatewayHandler;
use crate::Session;
use crate::gateway::watches::SessionWatches;
use crate::servers::{LogLevel, ServerLog, relay};

impl GatewayHandler {
    pub(super) async fn open_streams(&self, context: NotificationContext<RoleServer>) {
        // Initialize-era clients get list_changed on their own stream (stdio, or the HTTP GET
        // stream). Each forwarder holds the session's peer, so each ends when the session
        // does: a client that never hears anything must not keep them (and the peer) forever.
        let mut notices = self.own_session().notices();
        let peer = context.peer.clone();
        let end = self.session_end.clone();
        let roster = self.gateway.roster();
        forward_offering_changes(roster.offerings_changed(), peer.clone(), end.clone());
        let logs = roster.server_logs();
        forward_server_logs(logs, self.own_session().clone(), peer.clone(), end.clone());
        let updates = roster.resource_updates();
        let (watches, relay_peer) = (self.watches.clone(), peer.clone());
        let relay_end = end.clone();
        tokio::spawn(async move {
            watches
                .relay(updates, relay_end, |uri| {
                    let peer = relay_peer.clone();
                    async move {
                        let update = ResourceUpdatedNotificationParam::new(uri);
                        peer.notify_resource_updated(update).await.is_ok()
                    }
                })
                .await;
        });
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = end.cancelled() => return,
                    notice = notices.next() => {
                        if !notice || peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }

    pub(super) async fn listen_stream(
        &self,
        context: SubscriptionContext,
    ) -> Result<(), ErrorData> {
        // The stream's resource watches last as long as the stream.
        let watches = SessionWatches::default();
        let roster = self.gateway.roster();
        for uri in context.accepted().resource_subscriptions.iter().flatten() {
            if let Err(error) = watches.watch(roster, uri).await {
                tracing::warn!(%uri, %error, "a listen stream's resource watch failed");
            }
        }
        let relay = async {
            let sink = context.sink().clone();
            watches
                .relay(roster.resource_updates(), self.session_end.clone(), |uri| {
                    let sink = sink.clone();
                    async move { sink.notify_resource_updated(uri).await.is_ok() }
                })
                .await;
        };
        tokio::select! {
            outcome = self.listen_changes(&context) => outcome,
            // The relay ends only when the client is gone or the gateway stops.
            () = relay => Ok(()),
        }
    }

    /// The list_changed half of a `subscriptions/listen` stream.
    async fn listen_changes(&self, context: &SubscriptionContext) -> Result<(), ErrorData> {
        let session = self.session(context.request_context());
        let mut notices = session.notices();
        let stop = self.gateway.shutdown_token();
        let mut offerings = self.gateway.roster().offerings_changed();
        let mut last = *offerings.borrow_and_update();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                now = next_offerings(&mut offerings) => {
                    // A kind the client's filter did not accept is refused by the sink; that
                    // is no reason to end the stream.
                    if now.prompts != last.prompts {
                        let _ = context.sink().notify_prompt_list_changed().await;
                    }
                    if now.resources != last.resources {
                        let _ = context.sink().notify_resource_list_changed().await;
                    }
                    last = now;
                }
                // Graceful teardown: the final listen result tells the client we are going.
                () = stop.cancelled() => return Ok(()),
                notice = notices.next() => {
                    if !notice || context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// Sends `notifications/prompts/list_changed` / `resources/list_changed` to an
/// initialize-era client each time the servers' sets change, until its session `end`s.
fn forward_offering_changes(
    mut changes: tokio::sync::watch::Receiver<crate::servers::OfferingsGeneration>,
    peer: rmcp::service::Peer<RoleServer>,
    end: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        let mut last = *changes.borrow_and_update();
        loop {
            tokio::select! {
                () = end.cancelled() => return,
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let now = *changes.borrow_and_update();
                    let sent = async {
                        if now.prompts != last.prompts {
                            peer.notify_prompt_list_changed().await?;
                        }
                        if now.resources != last.resources {
                            peer.notify_resource_list_changed().await?;
                        }
                        Ok::<(), rmcp::service::ServiceError>(())
                    };
                    if sent.await.is_err() {
                        return;
                    }
                    last = now;
                }
            }
        }
    });
}

/// The next generation of a watch; never, once it closed.
async fn next_offerings(
    offerings: &mut tokio::sync::watch::Receiver<crate::servers::OfferingsGeneration>,
) -> crate::servers::OfferingsGeneration {
    if offerings.changed().await.is_ok() {
        return *offerings.borrow_and_update();
    }
    std::future::pending().await
}

/// Sends the servers' log messages outside any request to an initialize-era client at the
/// level its session asked for, until its session `end`s.
fn forward_server_logs(
    mut logs: tokio::sync::broadcast::Receiver<ServerLog>,
    session: Arc<Session>,
    peer: rmcp::service::Peer<RoleServer>,
    end: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            let log = tokio::select! {
                () = end.cancelled() => return,
                log = logs.recv() => match log {
                    Ok(log) => log,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                },
            };
            let level = LogLevel::of_message(&log.params).unwrap_or(LogLevel::Emergency);
            if session.log_level().is_none_or(|least| level < least) {
                continue;
            }
            let message = serde_json::json!({"method": relay::LOG_MESSAGE, "params": log.params});
            let Ok(notification) = serde_json::from_value::<ServerNotification>(message) else {
                continue;
            };
            if peer.send_notification(notification).await.is_err() {
                return;
            }
        }
    });
}
