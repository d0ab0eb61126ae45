//! Which client identities have requests in flight at which server: what a server sends while
//! answering belongs to them (see the inbox's module docs).

use crate::sync::lock;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};

tokio::task_local! {
    /// The client identity a request's work runs for; set around that work by the gateway so the
    /// layer that picks the server (and knows nothing of clients) can attribute to it.
    static CLIENT: String;
}

/// Runs `work` on behalf of client identity `who` (`None`: the local default), so
/// [`current_client`] inside it names `who`, on whatever task the work is polled.
pub fn on_behalf_of<F: Future>(who: Option<String>, work: F) -> impl Future<Output = F::Output> {
    CLIENT.scope(who.unwrap_or_default(), work)
}

/// The client identity the current work runs for, if it was started by [`on_behalf_of`].
pub fn current_client() -> Option<String> {
    CLIENT.try_with(Clone::clone).ok()
}

/// Requests in flight per server and client identity. Cheap to clone; every clone is the same
/// table. Its size is bounded by the requests in flight, each of which holds a [`HeldRequest`].
#[derive(Debug, Clone, Default)]
pub struct Attribution {
    in_flight: Arc<Mutex<HashMap<String, BTreeMap<String, usize>>>>,
}

impl Attribution {
    /// Says that `who` has a request in flight at server `channel` until the guard is dropped.
    pub fn hold(&self, channel: &str, who: &str) -> HeldRequest {
        let mut table = self.lock();
        *table
            .entry(channel.to_owned())
            .or_default()
            .entry(who.to_owned())
            .or_default() += 1;
        HeldRequest {
            attribution: self.clone(),
            channel: channel.to_owned(),
            who: who.to_owned(),
        }
    }

    /// The identities with a request in flight at `channel`, sorted; empty when none.
    pub fn owners(&self, channel: &str) -> Vec<String> {
        self.lock()
            .get(channel)
            .map(|whos| whos.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BTreeMap<String, usize>>> {
        // Every change is one counter step, so a panic elsewhere leaves the table usable.
        lock(&self.in_flight)
    }
}

/// A request in flight at a server on behalf of a client identity; dropping it ends that.
#[derive(Debug)]
pub struct HeldRequest {
    attribution: Attribution,
    channel: String,
    who: String,
}

impl Drop for HeldRequest {
    fn drop(&mut self) {
        let mut table = self.attribution.lock();
        if let Some(whos) = table.get_mut(&self.channel) {
            if let Some(count) = whos.get_mut(&self.who) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    whos.remove(&self.who);
                }
            }
            if whos.is_empty() {
                table.remove(&self.channel);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_those_with_requests_still_in_flight() {
        let attribution = Attribution::default();
        let alice = attribution.hold("files", "alice");
        let alice_again = attribution.hold("files", "alice");
        let bob = attribution.hold("files", "bob");
        assert_eq!(attribution.owners("files"), ["alice", "bob"]);
        assert!(attribution.owners("web").is_empty());
        drop(bob);
        drop(alice);
        assert_eq!(attribution.owners("files"), ["alice"]);
        drop(alice_again);
        assert!(attribution.owners("files").is_empty());
        assert!(attribution.lock().is_empty(), "nothing is kept once idle");
    }

    #[tokio::test]
    async fn the_client_follows_the_work_it_was_given_to() {
        assert_eq!(current_client(), None);
        let seen = on_behalf_of(Some("alice".into()), async { current_client() }).await;
        assert_eq!(seen.as_deref(), Some("alice"));
        let spawned = tokio::spawn(on_behalf_of(None, async {
            tokio::task::yield_now().await;
            current_client()
        }));
        assert_eq!(spawned.await.ok().flatten().as_deref(), Some(""));
    }
}
