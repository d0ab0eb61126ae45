//! The resources one client session watches, and the relay of the servers'
//! `notifications/resources/updated` to the sessions that watch them.
//!
//! - Initialize era: `resources/subscribe` / `resources/unsubscribe` add and drop a watch of
//!   the session's [`SessionWatches`]; updates go out on the session's own stream (stdio, or
//!   the HTTP GET stream) until the session ends, which drops its watches.
//! - 2026-07-28: a `subscriptions/listen` stream's `resourceSubscriptions` are watched for as
//!   long as that stream is open, and their updates go out on it.
//!
//! roster is subscribed at a server while any session watches the URI (see
//! [`crate::servers::ResourceWatch`]).

use crate::sync::lock;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use rmcp::ErrorData;
use rmcp::model::SubscriptionFilter;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::forward::route_error;
use crate::Roster;
use crate::servers::{ResourceUpdate, ResourceWatch};

/// The resources one session (or one listen stream) watches; dropping it drops the watches.
#[derive(Default)]
pub(crate) struct SessionWatches {
    watches: Mutex<HashMap<String, ResourceWatch>>,
}

impl SessionWatches {
    fn watches(&self) -> std::sync::MutexGuard<'_, HashMap<String, ResourceWatch>> {
        lock(&self.watches)
    }

    /// Watches `uri` for this session (again is fine: one watch per URI).
    pub(crate) async fn watch(&self, roster: &Roster, uri: &str) -> Result<(), ErrorData> {
        if uri.starts_with("skill://") {
            return Err(ErrorData::invalid_params(
                format!("{uri} is one of roster's skill files, which take no subscriptions"),
                Some(serde_json::json!({ "uri": uri })),
            ));
        }
        if self.watches().contains_key(uri) {
            return Ok(());
        }
        let watch = roster.watch_resource(uri).await.map_err(route_error)?;
        self.watches().entry(uri.to_owned()).or_insert(watch);
        Ok(())
    }

    /// Drops this session's watch of `uri`, if it had one.
    pub(crate) fn unwatch(&self, uri: &str) {
        let watch = self.watches().remove(uri);
        drop(watch);
    }

    /// Whether this session watches the resource the update is about.
    fn wants(&self, update: &ResourceUpdate) -> bool {
        self.watches()
            .get(&update.uri)
            .is_some_and(|watch| watch.server() == update.server)
    }

    /// Sends each update this session watches with `send` (false: the client is
    /// gone), until `stop` is cancelled.
    pub(crate) async fn relay<F, Fut>(
        &self,
        mut updates: broadcast::Receiver<ResourceUpdate>,
        stop: CancellationToken,
        mut send: F,
    ) where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = bool>,
    {
        loop {
            let update = tokio::select! {
                () = stop.cancelled() => return,
                update = updates.recv() => update,
            };
            match update {
                Ok(update) if self.wants(&update) => {
                    if !send(update.uri).await {
                        return;
                    }
                }
                Ok(_) => {}
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        missed,
                        "resource updates came faster than a client read them; some were skipped"
                    );
                }
                Err(RecvError::Closed) => return,
            }
        }
    }
}

/// Keeps in `accepted` only the resource URIs roster can watch at their servers now.
pub(crate) fn keep_watchable(accepted: &mut SubscriptionFilter, roster: &Roster) {
    if let Some(uris) = accepted.resource_subscriptions.as_mut() {
        uris.retain(|uri| !uri.starts_with("skill://") && roster.can_watch_resource(uri));
        if uris.is_empty() {
            accepted.resource_subscriptions = None;
        }
    }
}
