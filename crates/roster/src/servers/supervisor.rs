//! Supervision: each enabled server started ([`Runtime::launch`], [`Runtime::add_server`]):
//! its notifications wired to the inbox, the metrics, the resource watches and its refresh
//! hook, then one task per server that connects, lists, then watches the connection (exit,
//! stream drop, failed ping).
//!
//! When a connection ends, the server's tools are removed (a delta like any other), the
//! failure goes to the core [`roster_core::Schedule`], and the next connection waits out the
//! backoff the schedule computes — parked at the longest backoff once the schedule calls it a
//! crash loop. Tools return only after the new connection has been initialized and listed.

use crate::sync::lock;
use std::sync::Arc;
use std::time::Duration;

use roster_core::ListingState;

use super::connection::Connection;
use super::event::ServerEvent;
use super::listing::Relisting;
use super::refresh::{RefreshHook, RefreshHookError};
use super::runtime::{Runtime, ServerLog, Slot};
use super::status::ServerState;
use crate::config::ServerConfig;

impl Runtime {
    /// Wires notifications (inbox, refresh hook) and starts every enabled server's supervisor.
    pub(crate) fn launch(self: &Arc<Self>) -> Result<(), RefreshHookError> {
        for slot in self.slots() {
            self.start_slot(&slot)?;
        }
        self.watch_pin_decisions();
        Ok(())
    }

    /// Wires one server's notifications and starts its supervisor (nothing for a disabled
    /// server).
    fn start_slot(self: &Arc<Self>, slot: &Arc<Slot>) -> Result<(), RefreshHookError> {
        if !slot.config.enabled {
            return Ok(());
        }
        let dynamic = self.gateway.dynamic_tools;
        if self.sink.can_confirm() {
            let sink = self.sink.clone();
            let channel = slot.name.clone();
            slot.notifications
                .set_confirmer(Some(Arc::new(move |request| {
                    sink.confirm(&channel, request)
                })));
        }
        let logs = self.server_logs.clone();
        let channel = slot.name.clone();
        slot.notifications
            .set_log_fallback(Some(Arc::new(move |params| {
                // Nobody listening is fine: the inbox has the message.
                let _ = logs.send(ServerLog {
                    server: channel.clone(),
                    params: params.clone(),
                });
            })));
        let sink = self.sink.clone();
        let channel = slot.name.clone();
        slot.notifications.add_notification_listener(move |event| {
            let handled = match event {
                ServerEvent::ListChanged { .. } => dynamic,
                ServerEvent::Progress { .. } => true,
                _ => false,
            };
            sink.record(&channel, event.method(), event.params().clone(), handled);
        });
        self.resource_watches
            .relay_updates_of(&slot.name, &slot.notifications);
        if let Some(count) = self.metrics.notification_counter(&slot.name) {
            slot.notifications
                .add_notification_listener(move |event| count(event.method()));
        }
        if dynamic {
            let weak_rt = Arc::downgrade(self);
            let weak_slot = Arc::downgrade(slot);
            let hook = RefreshHook::leading(
                self.gateway.debounce,
                Arc::new(move || {
                    let (rt, slot) = (weak_rt.upgrade(), weak_slot.upgrade());
                    Box::pin(async move {
                        if let (Some(rt), Some(slot)) = (rt, slot) {
                            let _ = rt.relist(&slot, Relisting::IfStale).await;
                            rt.list_offerings(&slot, Relisting::IfStale).await;
                        }
                    })
                }),
            )?;
            let weak_rt = Arc::downgrade(self);
            let (name, nudge) = (slot.name.clone(), hook.clone());
            slot.notifications.add_notification_listener(move |event| {
                let ServerEvent::ListChanged { list, .. } = event else {
                    return;
                };
                // On the reader: record and return; the listing is the next turn's
                // (or the trailing edge's) to take.
                if let Some(rt) = weak_rt.upgrade() {
                    rt.mark_stale(&name, *list);
                }
                nudge.schedule();
            });
            slot.set_refresh_hook(hook);
        }
        tokio::spawn(supervise(self.clone(), slot.clone()));
        Ok(())
    }

    /// Starts a server a reload added (or the new entry of one it changed): listed, named and
    /// scheduled after the servers configured before it ([`Runtime::add_slot`]).
    pub(crate) fn add_server(
        self: &Arc<Self>,
        name: &str,
        config: &ServerConfig,
    ) -> Result<(), RefreshHookError> {
        let slot = self.add_slot(name, config);
        self.start_slot(&slot)
    }
}

async fn supervise(rt: Arc<Runtime>, slot: Arc<Slot>) {
    loop {
        let wait_until = {
            let state = rt.state();
            match state.schedule.server(&slot.name).map(|s| s.state()) {
                Some(ListingState::Failed { next_try, .. })
                | Some(ListingState::CrashLoop { next_try, .. }) => Some(*next_try),
                _ => None,
            }
        };
        if let Some(at) = wait_until {
            tokio::select! {
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                _ = slot.stop.cancelled() => return,
            }
        }
        if !matches!(
            lock(&slot.live).state,
            ServerState::CrashLoop | ServerState::NeedsLogin
        ) {
            slot.set_state(ServerState::Connecting);
        }
        // Read before the attempt, so a login made while it runs is not missed.
        let login_seen = slot
            .config
            .oauth
            .is_some()
            .then(|| crate::oauth::stamp(&slot.name, &*rt.tokens).ok().flatten());
        // What this task awaits on the way to `watch` is boxed: the task lives as long as the
        // server, and its future would otherwise keep room for the largest of those steps
        // (connecting, listing) all that time — some 8 KiB a server.
        let connect = tokio::time::timeout(
            slot.config.connect_timeout,
            Box::pin(Connection::connect(
                &slot.name,
                &slot.config,
                slot.notifications.clone(),
                &rt.tokens,
            )),
        );
        let attempt = tokio::select! {
            attempt = connect => attempt,
            _ = slot.stop.cancelled() => return,
        };
        let attempt = attempt.unwrap_or_else(|_| {
            Err(super::ConnectError::Handshake(format!(
                "no answer within {:?}",
                slot.config.connect_timeout
            )))
        });
        let connection = match attempt {
            Ok(connection) => Arc::new(connection),
            Err(error @ super::ConnectError::NeedsLogin { .. }) => {
                let error = error.to_string();
                tracing::warn!(server = %slot.name, %error, "waiting for a login");
                rt.record_needs_login(&slot, &error);
                slot.first_attempt.send_replace(true);
                if !Box::pin(wait_for_login(&slot, &*rt.tokens, login_seen.flatten())).await {
                    return;
                }
                continue;
            }
            Err(error) => {
                let error = error.to_string();
                tracing::warn!(server = %slot.name, %error, "cannot connect");
                rt.record_failure(&slot, &error);
                slot.first_attempt.send_replace(true);
                continue;
            }
        };
        {
            let mut live = lock(&slot.live);
            live.protocol_version = Some(connection.negotiated().protocol_version.clone());
            if live.state == ServerState::NeedsLogin {
                // The login happened: asking for it is no longer news.
                live.last_error = None;
            }
            live.state = ServerState::Connected;
        }
        *lock(&slot.connection) = Some(connection.clone());
        let log_level = *lock(&rt.log_level);
        if let Some(level) = log_level
            && let Err(error) = Box::pin(connection.set_log_level(level)).await
        {
            tracing::warn!(server = %slot.name, %error, "logging/setLevel failed");
        }
        // Tools return only once the new connection has answered a listing.
        let _ = Box::pin(rt.relist(&slot, Relisting::Always)).await;
        Box::pin(rt.list_offerings(&slot, Relisting::Always)).await;
        Box::pin(rt.resource_watches.watch_again(&slot.name, &connection)).await;
        slot.first_attempt.send_replace(true);

        let Some(reason) = watch(&slot, &connection).await else {
            connection.close();
            return;
        };
        // A listing refused for want of a login ended it (`Runtime::relist`): no crash.
        let needs_login = lock(&slot.live).state == ServerState::NeedsLogin;
        if !needs_login {
            tracing::warn!(server = %slot.name, %reason, "server connection lost; restarting");
        }
        lock(&slot.connection).take();
        // Lost, not shut down: a request still in flight fails as closed, not as a shutdown.
        connection.end_lost();
        let delta = rt.state().registry.remove_server(&slot.name);
        rt.publish(&slot.name, &delta);
        rt.set_offerings(&slot.name, Default::default());
        if needs_login {
            if !Box::pin(wait_for_login(&slot, &*rt.tokens, login_seen.flatten())).await {
                return;
            }
            continue;
        }
        rt.record_failure(&slot, &reason);
        lock(&slot.live).restarts += 1;
    }
}

/// Waits until the server's row in the token store changes from `seen` (a login, or a
/// logout: either is worth one more attempt); `false` on shutdown. Never retries on its own:
/// a server that wants a person is not dialled in a loop.
async fn wait_for_login(slot: &Slot, store: &dyn crate::store::Tokens, seen: Option<i64>) -> bool {
    if slot.config.oauth.is_none() {
        return true;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(crate::oauth::LOGIN_POLL) => {}
            _ = slot.stop.cancelled() => return false,
        }
        match store.stamp(&slot.name) {
            Ok(now) if now != seen => return true,
            Ok(_) => {}
            Err(error) => tracing::debug!(server = %slot.name, %error, "token store unreadable"),
        }
    }
}

/// Waits for the connection to end; `None` on shutdown.
async fn watch(slot: &Slot, connection: &Connection) -> Option<String> {
    let ping = if connection.negotiated().legacy {
        slot.config.ping_interval
    } else {
        None
    };
    loop {
        let tick = async {
            match ping {
                Some(every) => tokio::time::sleep(every).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = connection.closed() => return Some("the connection closed".to_owned()),
            _ = tick => {
                let limit = ping.unwrap_or_default().min(Duration::from_secs(10));
                if let Err(error) = connection.ping(limit).await {
                    return Some(format!("ping failed: {error}"));
                }
            }
            _ = slot.stop.cancelled() => return None,
        }
    }
}
