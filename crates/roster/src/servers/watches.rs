//! Resource watches: a client session's interest in a server resource's updates, made once at
//! the server however many sessions share it.
//!
//! A client session that subscribes to a resource (`resources/subscribe`) holds a
//! [`ResourceWatch`]; [`ResourceWatches`] watches a URI at the server that owns it (the server
//! whose listing holds the URI, or whose template matches it) on its first watch and stops on
//! its last. On a connection a watch is a [`ConnectionWatch`]: `resources/subscribe` in the
//! initialize era, a `subscriptions/listen` stream for the URI on 2026-07-28; a server's
//! watches are made again on each new connection. Every `notifications/resources/updated` a
//! server sends is published as a [`ResourceUpdate`]; the gateway relays each one to the
//! sessions that watch that URI on that server.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use rmcp::model::SubscriptionFilter;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::client_side::relay_listen;
use super::connection::Connection;
use super::error::RequestError;
use super::event::ServerEvent;
use super::notifications::Notifications;
use super::offerings::RouteError;

/// How many updates wait for a slow relay before it skips ahead.
const UPDATES_KEPT: usize = 256;

/// A server's `notifications/resources/updated`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUpdate {
    /// The server that sent it.
    pub server: String,
    /// The resource that changed.
    pub uri: String,
}

/// One resource watched at its server, for as long as any session watches it.
struct Watched {
    server: String,
    holders: usize,
    /// The watch on the connection it was made on; `None` while the server is down (or
    /// refused it on reconnect).
    on_server: Option<(Weak<Connection>, ConnectionWatch)>,
}

/// Every resource watched at the servers, with how many sessions' watches hold it.
pub(crate) struct ResourceWatches {
    table: tokio::sync::Mutex<BTreeMap<String, Watched>>,
    updates: broadcast::Sender<ResourceUpdate>,
}

impl Default for ResourceWatches {
    fn default() -> Self {
        ResourceWatches {
            table: tokio::sync::Mutex::new(BTreeMap::new()),
            updates: broadcast::channel(UPDATES_KEPT).0,
        }
    }
}

impl ResourceWatches {
    /// Publishes `server`'s `notifications/resources/updated` (from its `notifications`) as
    /// [`ResourceUpdate`]s. The listener runs on the connection's reader and only hands the
    /// update on.
    pub(crate) fn relay_updates_of(&self, server: &str, notifications: &Notifications) {
        let updates = self.updates.clone();
        let server = server.to_owned();
        notifications.add_notification_listener(move |event| {
            if let ServerEvent::ResourceUpdated { uri, .. } = event {
                // Nobody listening is fine: no session watches anything right now.
                let _ = updates.send(ResourceUpdate {
                    server: server.clone(),
                    uri: uri.clone(),
                });
            }
        });
    }

    /// Every server's resource updates from now on.
    pub(crate) fn updates(&self) -> broadcast::Receiver<ResourceUpdate> {
        self.updates.subscribe()
    }

    /// Makes the watches of `server` again on its new connection.
    pub(crate) async fn watch_again(&self, server: &str, connection: &Arc<Connection>) {
        let mut table = self.table.lock().await;
        for (uri, watched) in table.iter_mut().filter(|(_, w)| w.server == server) {
            watched.on_server = None;
            if !connection.advertises_subscribe() {
                tracing::warn!(server = %server, %uri, "the server no longer declares resources.subscribe; its updates are not heard");
                continue;
            }
            match connection.watch_resource(uri).await {
                Ok(watch) => watched.on_server = Some((Arc::downgrade(connection), watch)),
                Err(error) => {
                    tracing::warn!(server = %server, %uri, %error, "cannot subscribe to the resource again");
                }
            }
        }
    }

    /// Watches `uri`: at the server `owner` names (with its connection, see
    /// `ResourceWatches::watchable_at`), unless some session already watches it.
    pub(crate) async fn hold(
        self: &Arc<Self>,
        uri: &str,
        owner: impl FnOnce() -> Result<(String, Arc<Connection>), RouteError>,
    ) -> Result<ResourceWatch, RouteError> {
        let mut table = self.table.lock().await;
        let server =
            match table.get_mut(uri) {
                Some(watched) => {
                    watched.holders += 1;
                    watched.server.clone()
                }
                None => {
                    let (server, connection) = owner()?;
                    let watch = connection.watch_resource(uri).await.map_err(|source| {
                        RouteError::Request {
                            server: server.clone(),
                            source: Box::new(source),
                        }
                    })?;
                    table.insert(
                        uri.to_owned(),
                        Watched {
                            server: server.clone(),
                            holders: 1,
                            on_server: Some((Arc::downgrade(&connection), watch)),
                        },
                    );
                    server
                }
            };
        Ok(ResourceWatch {
            watches: Arc::downgrade(self),
            server,
            uri: uri.to_owned(),
        })
    }

    /// Drops one watch of `uri`; the last one ends the watch at the server.
    async fn release(&self, uri: &str) {
        // Held across the unwatch, so a new watch of the same URI cannot reach the server
        // before this one's end did.
        let mut table = self.table.lock().await;
        let Some(watched) = table.get_mut(uri) else {
            return;
        };
        watched.holders = watched.holders.saturating_sub(1);
        if watched.holders > 0 {
            return;
        }
        let Some(watched) = table.remove(uri) else {
            return;
        };
        if let Some((connection, watch)) = watched.on_server
            && let Some(connection) = connection.upgrade()
        {
            connection.unwatch_resource(uri, watch).await;
        }
    }
}

/// A client session's interest in one server resource's updates: while any watch of a URI
/// lives, roster watches it at its server. Dropping it releases the interest.
#[derive(Debug)]
pub struct ResourceWatch {
    watches: Weak<ResourceWatches>,
    server: String,
    uri: String,
}

impl ResourceWatch {
    /// The server the resource belongs to (only its updates of this URI count).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The resource's URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }
}

impl Drop for ResourceWatch {
    fn drop(&mut self) {
        let Some(watches) = self.watches.upgrade() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let uri = std::mem::take(&mut self.uri);
        runtime.spawn(async move { watches.release(&uri).await });
    }
}

/// A watch of one resource on one connection: a `resources/subscribe` sent (initialize era),
/// or a `subscriptions/listen` stream for that URI (2026-07-28), ended when this is dropped
/// or handed to [`Connection::unwatch_resource`].
#[derive(Debug)]
pub(crate) enum ConnectionWatch {
    /// `resources/subscribe` was answered; `resources/unsubscribe` ends it.
    Subscribed,
    /// A listen stream relays the URI's updates into [`Notifications`] until this is dropped.
    Listening(#[allow(dead_code)] tokio_util::sync::DropGuard),
}

impl Connection {
    /// Whether the server declared `resources.subscribe` (on 2026-07-28: that its listen
    /// streams take resource subscriptions).
    pub fn advertises_subscribe(&self) -> bool {
        self.capabilities
            .pointer("/resources/subscribe")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Watches `uri`: its `notifications/resources/updated` then reach this server's
    /// [`Notifications`] like any other notification. Fails when the server refuses or does
    /// not acknowledge the URI within `list_timeout`.
    async fn watch_resource(&self, uri: &str) -> Result<ConnectionWatch, RequestError> {
        if self.negotiated.legacy {
            self.request("resources/subscribe", json!({ "uri": uri }))
                .await?;
            return Ok(ConnectionWatch::Subscribed);
        }
        let filter = SubscriptionFilter::builder()
            .resource_subscription(uri)
            .build();
        let subscription = tokio::time::timeout(self.list_timeout, self.peer.listen(filter))
            .await
            .map_err(|_| RequestError::Timeout(self.list_timeout))??;
        let accepted = subscription
            .acknowledged()
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.iter().any(|u| u == uri));
        if !accepted {
            return Err(RequestError::Unexpected(format!(
                "the server did not accept a subscription to {uri}"
            )));
        }
        // Cancelling `stop` drops the subscription, which cancels the listen request.
        let stop = self.stop.child_token();
        let (server, uri) = (self.server.clone(), uri.to_owned());
        relay_listen(
            subscription,
            self.shared.clone(),
            stop.clone(),
            move |end| {
                // Heard again after the next reconnect, which watches anew.
                tracing::warn!(%server, %uri, ?end, "the resource's listen stream ended");
            },
        );
        Ok(ConnectionWatch::Listening(stop.drop_guard()))
    }

    /// Ends a watch [`Connection::watch_resource`] made (`resources/unsubscribe`, or the
    /// listen stream cancelled). A failure is logged: the server is past caring.
    async fn unwatch_resource(&self, uri: &str, watch: ConnectionWatch) {
        match watch {
            ConnectionWatch::Subscribed => {
                let params = json!({ "uri": uri });
                if let Err(error) = self.request("resources/unsubscribe", params).await {
                    tracing::debug!(server = %self.server, uri, %error, "resources/unsubscribe failed");
                }
            }
            ConnectionWatch::Listening(guard) => drop(guard),
        }
    }
}
