//! A reconcile: one server's listing replaces its entries, names are handed out again where
//! they are contested, and the [`Delta`] says what changed in exposed names. Its input is a
//! [`Listing`] (fingerprinted page by page) and what it leaves behind is [`Superseded`].

use std::collections::HashSet;

use super::search::key;
use super::{Entry, Fingerprint, PairRef, ToolRegistry};
use crate::delta::Delta;
use crate::tool::Tool;

/// The fields a [`Fingerprint`] leaves out, compared, so a new title or `_meta` is still taken.
fn same_unfingerprinted_fields(a: &Tool, b: &Tool) -> bool {
    a.title == b.title && a.icons == b.icons && a.meta == b.meta && a.extra == b.extra
}

/// A server's listing with each tool's fingerprint, built page by page as `tools/list`
/// answers arrive, so the hashing happens while each page is fresh and outside any lock.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    tools: Vec<(Tool, Fingerprint)>,
}

impl Listing {
    /// An empty listing.
    pub fn new() -> Self {
        Listing::default()
    }

    /// Adds the next tool of the listing.
    pub fn push(&mut self, tool: Tool) {
        let fingerprint = Fingerprint::of(&tool);
        self.tools.push((tool, fingerprint));
    }

    /// Number of tools so far.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True before the first tool.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl From<Vec<Tool>> for Listing {
    fn from(tools: Vec<Tool>) -> Self {
        tools.into_iter().collect()
    }
}

impl FromIterator<Tool> for Listing {
    fn from_iter<I: IntoIterator<Item = Tool>>(tools: I) -> Self {
        let mut listing = Listing::new();
        tools.into_iter().for_each(|tool| listing.push(tool));
        listing
    }
}

impl Extend<Tool> for Listing {
    fn extend<I: IntoIterator<Item = Tool>>(&mut self, tools: I) {
        tools.into_iter().for_each(|tool| self.push(tool));
    }
}

/// Tool copies a reconcile did not keep (unchanged tools' second copies, replaced and removed
/// tools), from [`ToolRegistry::reconcile_deferring_drop`]: drop it where freeing memory does
/// not hold anyone up.
#[derive(Debug, Default)]
pub struct Superseded {
    keep: bool,
    tools: Vec<Tool>,
}

impl Superseded {
    fn dropping() -> Self {
        Superseded::default()
    }

    fn keeping(capacity: usize) -> Self {
        Superseded {
            keep: true,
            tools: Vec::with_capacity(capacity),
        }
    }

    fn put(&mut self, tool: Tool) {
        if self.keep {
            self.tools.push(tool);
        }
    }

    /// Number of tool copies held.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when nothing was superseded.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// What one operation did to names besides the reconciled server's own additions.
#[derive(Default)]
pub(super) struct Changes {
    pub(super) fresh: Vec<PairRef>,
    pub(super) touched: Vec<PairRef>,
}

impl ToolRegistry {
    /// Replaces `server`'s entries with `listing` and marks the server listed.
    ///
    /// Only `server`'s entries are replaced; other servers keep theirs (though, see the module
    /// docs, another server's tool can be renamed, which the delta reports). A tool whose
    /// fingerprint is unchanged is not in the delta, but a new title, icons or `_meta` are
    /// still taken. A second tool of the same name in one listing is ignored. A server not given
    /// to [`ToolRegistry::new`] is added after the configured ones.
    pub fn reconcile(&mut self, server: &str, listing: Vec<Tool>) -> Delta {
        let listing = listing.into_iter().map(|tool| {
            let fingerprint = Fingerprint::of(&tool);
            (tool, fingerprint)
        });
        self.reconcile_into(server, listing, &mut Superseded::dropping())
    }

    /// [`ToolRegistry::reconcile`], handing back the tool copies it did not keep instead of
    /// freeing them. At thousands of tools freeing them is most of a reconcile's time, so a
    /// runtime that holds the registry behind a lock can drop them after unlocking.
    pub fn reconcile_deferring_drop(
        &mut self,
        server: &str,
        listing: Vec<Tool>,
    ) -> (Delta, Superseded) {
        self.reconcile_listing(server, Listing::from(listing))
    }

    /// Reconciles a [`Listing`] whose fingerprints were taken as its pages arrived, and hands
    /// back the superseded copies: the least work a reconcile can do while the registry is
    /// locked.
    pub fn reconcile_listing(&mut self, server: &str, listing: Listing) -> (Delta, Superseded) {
        // Nearly every tool of a relisting supersedes one copy; growing the Vec costs more.
        let mut superseded = Superseded::keeping(listing.len());
        let delta = self.reconcile_into(server, listing.tools.into_iter(), &mut superseded);
        (delta, superseded)
    }

    fn reconcile_into(
        &mut self,
        server: &str,
        listing: impl ExactSizeIterator<Item = (Tool, Fingerprint)>,
        superseded: &mut Superseded,
    ) -> Delta {
        let before = self.servers.len();
        let s = match self.server_index.get(server) {
            Some(&s) => s,
            None => self.add_server(server.to_string()),
        };
        let mut changes = Changes::default();
        if self.naming.prefixes(before) != self.naming.prefixes(self.servers.len()) {
            self.rename_all(&mut changes);
        }
        let mut delta = self.replace_listing(s, listing, &mut changes, superseded);
        self.servers[s as usize].listed = true;
        self.finish(&mut delta, changes);
        delta
    }

    /// Drops `server`'s entries (it crashed or was disabled) and marks it unlisted, so its tools'
    /// presence is unknown until it is listed again.
    pub fn remove_server(&mut self, server: &str) -> Delta {
        let Some(&s) = self.server_index.get(server) else {
            return Delta::default();
        };
        let mut changes = Changes::default();
        let mut superseded = Superseded::dropping();
        let mut delta = self.replace_listing(
            s,
            std::iter::empty::<(Tool, Fingerprint)>(),
            &mut changes,
            &mut superseded,
        );
        self.servers[s as usize].listed = false;
        self.finish(&mut delta, changes);
        delta
    }

    fn replace_listing(
        &mut self,
        s: u32,
        listing: impl ExactSizeIterator<Item = (Tool, Fingerprint)>,
        changes: &mut Changes,
        superseded: &mut Superseded,
    ) -> Delta {
        self.generation += 1;
        let generation = self.generation;
        let mut delta = Delta::default();
        let mut changed = Vec::new();
        let mut rewritten = false;
        let server = &mut self.servers[s as usize];
        let mut order = Vec::with_capacity(listing.len());
        for (tool, fingerprint) in listing {
            if let Some(&slot) = server.by_name.get(tool.name.as_str()) {
                let Some(entry) = server.slots[slot as usize].as_mut() else {
                    superseded.put(tool);
                    continue;
                };
                if entry.seen == generation {
                    superseded.put(tool);
                    continue;
                }
                entry.seen = generation;
                if entry.fingerprint != fingerprint {
                    entry.fingerprint = fingerprint;
                    changed.push(slot);
                    superseded.put(std::mem::replace(&mut entry.tool, tool));
                    if let Some(index) = &mut self.search {
                        index.upsert(key(s, slot), &server.name, &entry.tool);
                    }
                } else if !same_unfingerprinted_fields(&entry.tool, &tool) {
                    rewritten = true;
                    superseded.put(std::mem::replace(&mut entry.tool, tool));
                    if let Some(index) = &mut self.search {
                        index.upsert(key(s, slot), &server.name, &entry.tool);
                    }
                } else {
                    // Dropping the listing's copy now, while hashing has just brought it into
                    // cache, costs several times less than dropping the long-cold old copy.
                    superseded.put(tool);
                }
                order.push(slot);
            } else {
                let name: Box<str> = tool.name.as_str().into();
                if let Some(index) = &mut self.search {
                    index.upsert(key(s, server.next_slot()), &server.name, &tool);
                }
                let slot = server.alloc(Entry {
                    tool,
                    fingerprint,
                    exposed: Box::from(""),
                    rank: 0,
                    seen: generation,
                    fresh: true,
                    renamed_from: None,
                });
                server.by_name.insert(name, slot);
                order.push(slot);
                changes.fresh.push(PairRef { server: s, slot });
            }
        }
        let reordered = server.order != order;
        let old_order = std::mem::replace(&mut server.order, order);
        if reordered || rewritten || !changed.is_empty() {
            self.version += 1;
        }

        // Take every dropped pair out of the contest before handing any name on, so a dropped
        // pair never receives a name on its way out.
        let mut freed = Vec::new();
        for slot in old_order {
            let pair = PairRef { server: s, slot };
            if self.entry(pair).seen == generation {
                continue;
            }
            let name = self.withdraw(pair);
            if let Some(index) = &mut self.search {
                index.remove(key(s, slot));
            }
            let server = &mut self.servers[s as usize];
            if let Some(entry) = server.slots[slot as usize].take() {
                server.by_name.remove(entry.tool.name.as_str());
                superseded.put(entry.tool);
            }
            server.free.push(slot);
            self.len -= 1;
            delta.removed.push(name.to_string());
            freed.push(name);
        }
        for name in freed {
            self.hand_over(name, changes);
        }

        for &pair in &changes.fresh.clone() {
            self.len += 1;
            self.claim(pair, 0, changes);
        }
        for slot in changed {
            delta
                .changed
                .push(self.entry(PairRef { server: s, slot }).exposed.to_string());
        }
        delta
    }

    /// Adds the names of new pairs and the renames, and turns a name both removed and added
    /// into changed.
    fn finish(&mut self, delta: &mut Delta, changes: Changes) {
        for &pair in &changes.fresh {
            let entry = self.entry_mut(pair);
            entry.fresh = false;
            delta.added.push(entry.exposed.to_string());
        }
        let mut renamed = HashSet::new();
        for &pair in &changes.touched {
            let entry = self.entry_mut(pair);
            let Some(old) = entry.renamed_from.take() else {
                continue;
            };
            if old != entry.exposed {
                delta.removed.push(old.into());
                delta.added.push(entry.exposed.to_string());
                renamed.insert(entry.exposed.clone());
            }
        }
        if !renamed.is_empty() {
            // A renamed tool is news as removed + added, not as changed.
            delta.changed.retain(|n| !renamed.contains(n.as_str()));
        }
        if !delta.added.is_empty() && !delta.removed.is_empty() {
            let removed: HashSet<&str> = delta.removed.iter().map(String::as_str).collect();
            let both: HashSet<String> = delta
                .added
                .iter()
                .filter(|n| removed.contains(n.as_str()))
                .cloned()
                .collect();
            if !both.is_empty() {
                delta.added.retain(|n| !both.contains(n));
                delta.removed.retain(|n| !both.contains(n));
                for name in both {
                    if !delta.changed.contains(&name) {
                        delta.changed.push(name);
                    }
                }
            }
        }
        self.rebuild_collisions();
    }
}
