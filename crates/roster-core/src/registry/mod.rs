//! The live tool registry: which server offers which tool, under which exposed name.
//!
//! Entries are keyed by (server, tool name) and hold the [`Tool`] as received plus a
//! [`Fingerprint`] of what the model relies on (description, input and output schemas,
//! annotations). [`ToolRegistry::reconcile`] replaces one server's entries with a new listing and
//! returns the [`Delta`]; nothing owned by another server is dropped or replaced.
//!
//! # Exposed names
//! Each (server, tool) pair has a chain of candidate names ([`NamingConfig::candidate`]). Names are
//! handed out as if every pair chose in priority order — pairs of servers earlier in config order
//! first, then by tool name — each taking the first candidate of its chain that no native tool and
//! no earlier pair took. So the outcome depends only on the configured servers and their current
//! listings, never on which server answered first: in `never` mode the first server in config
//! order keeps a bare name whatever order the listings arrive in.
//!
//! That rule means one server's reconcile can change the exposed name of *another* server's tool
//! (in `never` mode, an earlier server starts offering a name a later server had bare; or stops
//! offering it, and the later server gets the bare name back). The registry keeps the other
//! server's entry (its tool and fingerprint are untouched) and reports the rename in the returned
//! delta as the old name removed and the new name added, so every session learns of it. A name
//! that leaves one tool and goes to another in the same reconcile is reported as changed.
//!
//! Chains never end (hashed variants with a growing salt), so two pairs never share a name even
//! if a hash suffix happens to spell another pair's name. The assignment is maintained
//! incrementally: only pairs whose names are contested are revisited. The one exception is
//! `conditional` mode when a server that was not configured reconciles and so makes the count
//! cross one: every tool is renamed, and the delta says so.
//!
//! # Calls by a server's own name
//! [`ToolRegistry::route_call`] is how a `tools/call` name finds its tool: an exposed name first;
//! else a server's *own* tool name that exactly one listed server has (an MCP App inside a host
//! calls its server's tools by the server's names). Native tool names never fall through to a
//! server, and when several servers have the name the error names each one's exposed name, so
//! the caller can pick.
//!
//! # Cost
//! A reconcile hashes every tool of the listing and frees one of the two copies of each tool it
//! already had; at 10,000 tools both dwarf the bookkeeping (see `bench/core.md`). A runtime that
//! holds the registry behind a lock can fingerprint each page as it arrives ([`Listing`]) and
//! free the superseded copies after unlocking ([`ToolRegistry::reconcile_listing`]).

mod names;

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::delta::Delta;
pub use crate::fingerprint::Fingerprint;
use crate::naming::{Collision, NamingConfig, is_native};
use crate::tool::{Tool, ToolLookup, ToolPresence};
use crate::tool_search::ToolIndex;
use names::{InlineName, NameHasher, NameMap};

/// The fields a [`Fingerprint`] leaves out, compared, so a new title or `_meta` is still taken.
fn same_unfingerprinted_fields(a: &Tool, b: &Tool) -> bool {
    a.title == b.title && a.icons == b.icons && a.meta == b.meta && a.extra == b.extra
}

/// Where a call of an exposed tool goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Route<'a> {
    /// The server that offers the tool.
    pub server: &'a str,
    /// The tool as that server listed it; `tool.name` is the name to call it by there.
    pub tool: &'a Tool,
}

/// A `tools/call` name that reaches no tool, or more than one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallRouteError {
    /// Neither an exposed name nor any listed server's own tool name.
    #[error("unknown tool {0:?}; list the tools again with tools/list")]
    Unknown(String),
    /// Not an exposed name, and several servers have a tool of this own name.
    #[error(
        "tool {name:?} is not an exposed name and {} servers have a tool of that name; call it by \
         one of its exposed names: {}",
        exposed.len(),
        exposed.join(", ")
    )]
    Ambiguous {
        /// The name called.
        name: String,
        /// The exposed name of each server's tool of that name, servers in config order.
        exposed: Vec<String>,
    },
}

/// One tool as a client sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExposedTool<'a> {
    /// The name the client calls it by.
    pub exposed_name: &'a str,
    /// The server that offers it.
    pub server: &'a str,
    /// The tool as that server listed it.
    pub tool: &'a Tool,
    /// Fingerprint of its description and schemas.
    pub fingerprint: Fingerprint,
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

/// A (server, tool) pair: the server's index in config order and the tool's slot in it. Slots
/// stay put while the tool is listed, so routes need no update when a listing is reordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct PairRef {
    server: u32,
    slot: u32,
}

#[derive(Debug)]
struct Entry {
    tool: Tool,
    fingerprint: Fingerprint,
    /// Empty only while a new pair waits for its name inside one reconcile.
    exposed: Box<str>,
    /// Position of `exposed` in the pair's candidate chain.
    rank: u32,
    /// The reconcile generation that last saw this tool in a listing.
    seen: u64,
    /// Added by the reconcile in progress, so a rename of it is not news to anyone.
    fresh: bool,
    /// The name it had before the operation in progress renamed it.
    renamed_from: Option<Box<str>>,
}

#[derive(Debug)]
struct ServerSlot {
    name: String,
    listed: bool,
    /// Boxed so a route resolves from this dense array of pointers without reading the entry.
    slots: Vec<Option<Box<Entry>>>,
    free: Vec<u32>,
    by_name: NameMap<u32>,
    /// The server's own listing order, as slots.
    order: Vec<u32>,
}

impl ServerSlot {
    fn new(name: String) -> Self {
        ServerSlot {
            name,
            listed: false,
            slots: Vec::new(),
            free: Vec::new(),
            by_name: NameMap::default(),
            order: Vec::new(),
        }
    }

    /// The slot [`ServerSlot::alloc`] will use next.
    fn next_slot(&self) -> u32 {
        self.free.last().copied().unwrap_or(self.slots.len() as u32)
    }

    fn alloc(&mut self, entry: Entry) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(Box::new(entry));
                slot
            }
            None => {
                self.slots.push(Some(Box::new(entry)));
                (self.slots.len() - 1) as u32
            }
        }
    }
}

/// The union of all servers' tools, with exposed names and routes.
#[derive(Debug)]
pub struct ToolRegistry {
    naming: NamingConfig,
    servers: Vec<ServerSlot>,
    server_index: HashMap<String, u32>,
    holders: HashMap<InlineName, PairRef, NameHasher>,
    /// For a name, the pairs that would take it but for a pair ahead of them; it goes to the
    /// first of them when it frees up.
    waiting: NameMap<Vec<PairRef>>,
    /// Pairs not on the first candidate of their chain.
    bumped: BTreeSet<PairRef>,
    collisions: Vec<Collision>,
    generation: u64,
    /// Bumped whenever what [`ToolRegistry::tools`] yields may have changed.
    version: u64,
    len: usize,
    /// The search index of every entry, while search is on ([`ToolRegistry::set_search`]).
    search: Option<ToolIndex>,
}

/// What one operation did to names besides the reconciled server's own additions.
#[derive(Default)]
struct Changes {
    fresh: Vec<PairRef>,
    touched: Vec<PairRef>,
}

impl ToolRegistry {
    /// An empty registry for `servers`, in config order (duplicates after the first are ignored).
    pub fn new(servers: Vec<String>, naming: NamingConfig) -> Self {
        let mut registry = ToolRegistry {
            naming,
            servers: Vec::with_capacity(servers.len()),
            server_index: HashMap::with_capacity(servers.len()),
            holders: HashMap::default(),
            waiting: NameMap::default(),
            bumped: BTreeSet::new(),
            collisions: Vec::new(),
            generation: 0,
            version: 0,
            len: 0,
            search: None,
        };
        for server in servers {
            registry.add_server(server);
        }
        registry
    }

    fn add_server(&mut self, name: String) -> u32 {
        if let Some(&i) = self.server_index.get(&name) {
            return i;
        }
        let i = self.servers.len() as u32;
        self.server_index.insert(name.clone(), i);
        self.servers.push(ServerSlot::new(name));
        i
    }

    /// The naming configuration.
    pub fn naming(&self) -> &NamingConfig {
        &self.naming
    }

    /// Servers in config order.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.servers.iter().map(|s| s.name.as_str())
    }

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

    /// Where a call of `exposed_name` goes.
    pub fn route(&self, exposed_name: &str) -> Option<Route<'_>> {
        let pair = *self.holders.get(exposed_name.as_bytes())?;
        let server = &self.servers[pair.server as usize];
        let entry = server.slots[pair.slot as usize].as_ref()?;
        Some(Route {
            server: &server.name,
            tool: &entry.tool,
        })
    }

    /// The tool a `tools/call` of `name` reaches: the tool exposed under `name`, else the one
    /// tool a listed server offers under that *own* name (MCP Apps call their server's tools
    /// so). A native tool's name only ever routes as an exposed name: native tools win.
    pub fn route_call(&self, name: &str) -> Result<ExposedTool<'_>, CallRouteError> {
        if let Some(pair) = self.holders.get(name.as_bytes()) {
            let server = &self.servers[pair.server as usize];
            if let Some(entry) = server.slots[pair.slot as usize].as_ref() {
                return Ok(exposed_tool(server, entry));
            }
        }
        if is_native(name) {
            return Err(CallRouteError::Unknown(name.to_owned()));
        }
        let mut owners = self.servers.iter().filter_map(|server| {
            let slot = *server.by_name.get(name)?;
            let entry = server.slots[slot as usize].as_ref()?;
            Some(exposed_tool(server, entry))
        });
        let Some(first) = owners.next() else {
            return Err(CallRouteError::Unknown(name.to_owned()));
        };
        let rest: Vec<ExposedTool<'_>> = owners.collect();
        if rest.is_empty() {
            return Ok(first);
        }
        let exposed = std::iter::once(first)
            .chain(rest)
            .map(|t| t.exposed_name.to_owned())
            .collect();
        Err(CallRouteError::Ambiguous {
            name: name.to_owned(),
            exposed,
        })
    }

    /// Every exposed tool: servers in config order, each server's tools in its listing order.
    pub fn tools(&self) -> impl Iterator<Item = ExposedTool<'_>> {
        self.servers.iter().flat_map(|server| {
            server.order.iter().filter_map(move |&slot| {
                let entry = server.slots[slot as usize].as_ref()?;
                Some(ExposedTool {
                    exposed_name: &entry.exposed,
                    server: &server.name,
                    tool: &entry.tool,
                    fingerprint: entry.fingerprint,
                })
            })
        })
    }

    /// The name `server`'s tool of its own name `tool` is exposed under, if it is listed.
    pub fn exposed_name(&self, server: &str, tool: &str) -> Option<&str> {
        let server = &self.servers[*self.server_index.get(server)? as usize];
        let slot = *server.by_name.get(tool)?;
        server.slots[slot as usize]
            .as_ref()
            .map(|entry| &*entry.exposed)
    }

    /// The name `tool` of `server` would be exposed under if nothing contested it (its first
    /// candidate): how to name a tool that is not listed now.
    pub fn first_candidate(&self, server: &str, tool: &str) -> String {
        self.naming.candidate(server, tool, self.bare_first(), 0)
    }

    /// Whether `server` has a listing (reconciled and not removed since).
    pub fn is_listed(&self, server: &str) -> bool {
        self.server_index
            .get(server)
            .is_some_and(|&s| self.servers[s as usize].listed)
    }

    /// Number of tools per server, in config order.
    pub fn tool_counts(&self) -> Vec<(&str, usize)> {
        self.servers
            .iter()
            .map(|s| (s.name.as_str(), s.order.len()))
            .collect()
    }

    /// Tools that could not take their preferred name, ordered by server (config order) and
    /// tool name.
    pub fn collisions(&self) -> &[Collision] {
        &self.collisions
    }

    /// A number that changes whenever [`ToolRegistry::tools`] may yield something else (a
    /// tool added, removed, renamed, redefined or reordered); equal numbers, the same tools.
    /// Lets a reader keep a converted copy of the listing until it changes.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Number of exposed tools.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no server offers a tool.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Turns the search index on (built from the entries held now, then kept by every
    /// reconcile) or off (dropped).
    pub fn set_search(&mut self, on: bool) {
        if !on {
            self.search = None;
            return;
        }
        if self.search.is_some() {
            return;
        }
        let mut index = ToolIndex::new();
        for (s, server) in self.servers.iter().enumerate() {
            for &slot in &server.order {
                if let Some(entry) = server.slots[slot as usize].as_ref() {
                    index.upsert(key(s as u32, slot), &server.name, &entry.tool);
                }
            }
        }
        self.search = Some(index);
    }

    /// Whether the search index is on.
    pub fn searches(&self) -> bool {
        self.search.is_some()
    }

    /// The exposed tools best matching `query`, best first, at most `limit`, among those
    /// `accept` lets through; empty while search is off. A query that is a tool's exposed name
    /// (or the own name a call would route by) ranks that tool first.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        mut accept: impl FnMut(&ExposedTool<'_>) -> bool,
    ) -> Vec<(ExposedTool<'_>, f32)> {
        let Some(index) = &self.search else {
            return Vec::new();
        };
        let exact = self
            .route_call(query.trim())
            .ok()
            .filter(|tool| accept(tool));
        let skip = exact.map(|tool| tool.exposed_name);
        let mut hits: Vec<(ExposedTool<'_>, f32)> = Vec::with_capacity(limit);
        let mut ranked = index.search(query, limit, |key| {
            let Some(tool) = self.by_key(key) else {
                return false;
            };
            Some(tool.exposed_name) != skip && accept(&tool)
        });
        if let Some(tool) = exact {
            let score = ranked.first().map_or(1.0, |best| best.score);
            hits.push((tool, score));
            ranked.truncate(limit.saturating_sub(1));
        }
        hits.extend(
            ranked
                .into_iter()
                .filter_map(|hit| Some((self.by_key(hit.key)?, hit.score))),
        );
        hits
    }

    fn by_key(&self, key: u64) -> Option<ExposedTool<'_>> {
        let server = self.servers.get((key >> 32) as usize)?;
        let entry = server.slots.get(key as u32 as usize)?.as_ref()?;
        Some(exposed_tool(server, entry))
    }

    // ---- reconcile internals ----

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

    /// The servers a reference names by prefix (`server<sep>…`, also with the server name
    /// sanitized as exposed names have it).
    fn prefixed_owners<'a>(&'a self, reference: &'a str) -> impl Iterator<Item = &'a ServerSlot> {
        let sep = self.naming.separator.as_str();
        self.servers.iter().filter(move |server| {
            let rest = reference.strip_prefix(server.name.as_str()).or_else(|| {
                let sanitized: String = server
                    .name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                reference.strip_prefix(sanitized.as_str())
            });
            !sep.is_empty() && rest.is_some_and(|rest| rest.starts_with(sep))
        })
    }
}

/// A pair's key in the search index: server (config order) then slot, so key order is how
/// equal scores rank.
fn key(server: u32, slot: u32) -> u64 {
    u64::from(server) << 32 | u64::from(slot)
}

fn exposed_tool<'a>(server: &'a ServerSlot, entry: &'a Entry) -> ExposedTool<'a> {
    ExposedTool {
        exposed_name: &entry.exposed,
        server: &server.name,
        tool: &entry.tool,
        fingerprint: entry.fingerprint,
    }
}

impl ToolLookup for ToolRegistry {
    /// Present when `reference` routes. Otherwise the owning server decides: the one whose name
    /// prefixes the reference, or, when tools are exposed bare, every server. Missing when the
    /// owners are all listed (or no configured server can own it), Unknown while one is not.
    fn presence(&self, reference: &str) -> ToolPresence {
        if self.holders.contains_key(reference.as_bytes()) {
            return ToolPresence::Present;
        }
        let mut owners = self.prefixed_owners(reference).peekable();
        let any_unlisted = if owners.peek().is_some() {
            owners.any(|s| !s.listed)
        } else if self.bare_first() {
            self.servers.iter().any(|s| !s.listed)
        } else {
            false
        };
        if any_unlisted {
            ToolPresence::Unknown
        } else {
            ToolPresence::Missing
        }
    }
}

#[cfg(test)]
mod tests;
