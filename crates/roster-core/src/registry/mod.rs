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
mod reconcile;
mod route;
mod search;

use std::collections::{BTreeSet, HashMap};

pub use crate::fingerprint::Fingerprint;
use crate::naming::{Collision, NamingConfig};
use crate::tool::Tool;
use crate::tool_search::ToolIndex;
use names::{InlineName, NameHasher, NameMap};
pub use reconcile::{Listing, Superseded};
pub use route::{CallRouteError, Route};

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
}

fn exposed_tool<'a>(server: &'a ServerSlot, entry: &'a Entry) -> ExposedTool<'a> {
    ExposedTool {
        exposed_name: &entry.exposed,
        server: &server.name,
        tool: &entry.tool,
        fingerprint: entry.fingerprint,
    }
}

#[cfg(test)]
mod tests;
