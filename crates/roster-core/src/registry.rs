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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::LazyLock;

use serde_json::Value;
use xxhash_rust::xxh3::{Xxh3Default, xxh3_64_with_seed};

use crate::delta::Delta;
use crate::naming::{Collision, MAX_NAME_LEN, NATIVE_OWNER, NamingConfig, is_native};
use crate::tool::{Tool, ToolLookup, ToolPresence};

/// A stable hash of a tool's description, input schema, output schema and annotations.
///
/// It is the same across runs and machines, and does not depend on the order of keys in JSON
/// objects. Title, icons and `_meta` are not part of it: they do not change how a model calls
/// the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub u64);

impl Fingerprint {
    /// The fingerprint of a tool.
    pub fn of(tool: &Tool) -> Self {
        let mut h = Canon::new();
        match &tool.description {
            Some(d) => {
                h.update(&[1]);
                hash_str(&mut h, d);
            }
            None => h.update(&[0]),
        }
        hash_object(&mut h, &tool.input_schema, *MAPS_ARE_SORTED);
        for part in [&tool.output_schema, &tool.annotations] {
            match part {
                Some(v) => {
                    h.update(&[1]);
                    hash_value(&mut h, v);
                }
                None => h.update(&[0]),
            }
        }
        Fingerprint(h.digest())
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Whether `serde_json::Map` iterates in key order. It does unless some crate in the build turns
/// on serde_json's `preserve_order`, which makes it iterate in insertion order; fingerprints
/// must not depend on which, so objects are then hashed with their keys sorted.
static MAPS_ARE_SORTED: LazyLock<bool> = LazyLock::new(|| {
    let mut map = serde_json::Map::new();
    map.insert("b".into(), Value::Null);
    map.insert("a".into(), Value::Null);
    map.keys().next().is_some_and(|k| k == "a")
});

/// The canonical encoding on its way into xxh3, gathered in a stack buffer first: the encoding
/// comes in pieces of a few bytes, and one streaming update per piece costs more than the
/// hashing itself. Chunking does not change a streaming hash, so neither does the buffer.
struct Canon {
    hasher: Xxh3Default,
    buf: [u8; CANON_BUF],
    len: usize,
}

const CANON_BUF: usize = 512;

impl Canon {
    fn new() -> Self {
        Canon {
            hasher: Xxh3Default::new(),
            buf: [0; CANON_BUF],
            len: 0,
        }
    }

    #[inline]
    fn update(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > CANON_BUF {
            self.hasher.update(&self.buf[..self.len]);
            self.len = 0;
            if bytes.len() > CANON_BUF {
                self.hasher.update(bytes);
                return;
            }
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn digest(mut self) -> u64 {
        self.hasher.update(&self.buf[..self.len]);
        self.len = 0;
        self.hasher.digest()
    }
}

fn hash_str(h: &mut Canon, s: &str) {
    h.update(&(s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}

/// Feeds a canonical encoding of `value` to the hasher: a tag per type, lengths before
/// contents (so no two values share an encoding), object keys in sorted order.
fn hash_value(h: &mut Canon, value: &Value) {
    hash_value_with(h, value, *MAPS_ARE_SORTED);
}

/// [`hash_value`], told whether map iteration is already in key order.
fn hash_value_with(h: &mut Canon, value: &Value, maps_are_sorted: bool) {
    match value {
        Value::Null => h.update(&[0]),
        Value::Bool(false) => h.update(&[1]),
        Value::Bool(true) => h.update(&[2]),
        Value::Number(n) => {
            let (tag, bits) = if let Some(u) = n.as_u64() {
                (3, u)
            } else if let Some(i) = n.as_i64() {
                (4, i as u64)
            } else {
                (5, n.as_f64().map_or(0, f64::to_bits))
            };
            let mut bytes = [tag; 9];
            bytes[1..].copy_from_slice(&bits.to_le_bytes());
            h.update(&bytes);
        }
        Value::String(s) => {
            h.update(&[6]);
            hash_str(h, s);
        }
        Value::Array(items) => {
            h.update(&[7]);
            h.update(&(items.len() as u64).to_le_bytes());
            for item in items {
                hash_value_with(h, item, maps_are_sorted);
            }
        }
        Value::Object(map) => hash_object(h, map, maps_are_sorted),
    }
}

/// [`hash_value_with`] of a JSON object, its keys in sorted order whatever the map's own order.
fn hash_object(h: &mut Canon, map: &serde_json::Map<String, Value>, maps_are_sorted: bool) {
    h.update(&[8]);
    h.update(&(map.len() as u64).to_le_bytes());
    if maps_are_sorted {
        for (key, item) in map {
            hash_str(h, key);
            hash_value_with(h, item, maps_are_sorted);
        }
    } else {
        let mut entries: Vec<_> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (key, item) in entries {
            hash_str(h, key);
            hash_value_with(h, item, maps_are_sorted);
        }
    }
}

/// A `BuildHasher` for the registry's maps: xxh3 keyed with a per-map random seed (taken from
/// the standard library's `RandomState`), several times faster than SipHash on short names.
#[derive(Debug, Clone)]
struct NameHasher {
    seed: u64,
}

impl Default for NameHasher {
    fn default() -> Self {
        use std::hash::{BuildHasher, Hasher};
        NameHasher {
            seed: std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish(),
        }
    }
}

impl std::hash::BuildHasher for NameHasher {
    type Hasher = NameHash;

    fn build_hasher(&self) -> NameHash {
        NameHash(self.seed)
    }
}

/// The running state of one [`NameHasher`] hash.
struct NameHash(u64);

impl std::hash::Hasher for NameHash {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxh3_64_with_seed(bytes, self.0);
    }

    fn write_u8(&mut self, byte: u8) {
        self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type NameMap<V> = HashMap<Box<str>, V, NameHasher>;

/// An exposed name stored inline in the route table (exposed names are at most 64 bytes), so a
/// lookup compares bytes inside the table instead of following a pointer per probe.
#[derive(Clone, Copy)]
struct InlineName {
    len: u8,
    bytes: [u8; MAX_NAME_LEN],
}

impl InlineName {
    fn new(name: &str) -> Self {
        let Ok(len) = u8::try_from(name.len()) else {
            unreachable!("exposed names are at most {MAX_NAME_LEN} bytes");
        };
        let mut bytes = [0; MAX_NAME_LEN];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        InlineName { len, bytes }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl PartialEq for InlineName {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for InlineName {}

impl std::hash::Hash for InlineName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Must hash exactly like the `[u8]` it borrows as.
        self.as_bytes().hash(state);
    }
}

impl std::borrow::Borrow<[u8]> for InlineName {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for InlineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&String::from_utf8_lossy(self.as_bytes()), f)
    }
}

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
                } else if !same_unfingerprinted_fields(&entry.tool, &tool) {
                    rewritten = true;
                    superseded.put(std::mem::replace(&mut entry.tool, tool));
                } else {
                    // Dropping the listing's copy now, while hashing has just brought it into
                    // cache, costs several times less than dropping the long-cold old copy.
                    superseded.put(tool);
                }
                order.push(slot);
            } else {
                let name: Box<str> = tool.name.as_str().into();
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

    /// Every pair chooses again, from scratch (the prefixing decision changed).
    fn rename_all(&mut self, changes: &mut Changes) {
        self.holders.clear();
        self.waiting.clear();
        self.bumped.clear();
        let mut pairs = Vec::with_capacity(self.len);
        for (s, server) in self.servers.iter_mut().enumerate() {
            for &slot in &server.order {
                let Some(entry) = server.slots[slot as usize].as_mut() else {
                    continue;
                };
                entry.renamed_from = Some(std::mem::take(&mut entry.exposed));
                entry.rank = 0;
                pairs.push(PairRef {
                    server: s as u32,
                    slot,
                });
            }
        }
        for &pair in &pairs {
            self.claim(pair, 0, changes);
        }
        changes.touched.extend(pairs);
    }

    fn entry(&self, pair: PairRef) -> &Entry {
        self.servers[pair.server as usize].slots[pair.slot as usize]
            .as_ref()
            .unwrap_or_else(|| unreachable!("pair {pair:?} refers to a live entry"))
    }

    fn entry_mut(&mut self, pair: PairRef) -> &mut Entry {
        self.servers[pair.server as usize].slots[pair.slot as usize]
            .as_mut()
            .unwrap_or_else(|| unreachable!("pair {pair:?} refers to a live entry"))
    }

    fn bare_first(&self) -> bool {
        !self.naming.prefixes(self.servers.len())
    }

    fn candidate(&self, pair: PairRef, k: u32) -> String {
        let server = &self.servers[pair.server as usize].name;
        let tool = &self.entry(pair).tool.name;
        self.naming.candidate(server, tool, self.bare_first(), k)
    }

    /// `a` chooses before `b`: earlier server in config order, then smaller tool name.
    fn ahead(&self, a: PairRef, b: PairRef) -> bool {
        (a.server, self.entry(a).tool.name.as_str()) < (b.server, self.entry(b).tool.name.as_str())
    }

    fn note_rename(&mut self, pair: PairRef, changes: &mut Changes) {
        let entry = self.entry_mut(pair);
        if entry.fresh || entry.renamed_from.is_some() {
            return;
        }
        entry.renamed_from = Some(entry.exposed.clone());
        changes.touched.push(pair);
    }

    fn set_name(&mut self, pair: PairRef, name: Box<str>, rank: u32) {
        if rank == 0 {
            self.bumped.remove(&pair);
        } else {
            self.bumped.insert(pair);
        }
        self.version += 1;
        let entry = self.entry_mut(pair);
        entry.exposed = name.clone();
        entry.rank = rank;
        self.holders.insert(InlineName::new(&name), pair);
    }

    /// Gives `pair` (which holds no name) the first free candidate from `rank` on, bumping any
    /// holder that chooses after it; bumped pairs choose again further down their chains.
    fn claim(&mut self, pair: PairRef, rank: u32, changes: &mut Changes) {
        let mut work = vec![(pair, rank)];
        while let Some((pair, mut k)) = work.pop() {
            loop {
                let name = self.candidate(pair, k);
                if is_native(&name) {
                    k += 1;
                    continue;
                }
                match self.holders.get(name.as_bytes()).copied() {
                    None => {
                        self.set_name(pair, name.into(), k);
                        break;
                    }
                    Some(holder) if self.ahead(pair, holder) => {
                        self.note_rename(holder, changes);
                        let holder_rank = self.entry(holder).rank;
                        let name: Box<str> = name.into();
                        self.waiting.entry(name.clone()).or_default().push(holder);
                        self.set_name(pair, name, k);
                        work.push((holder, holder_rank + 1));
                        break;
                    }
                    Some(_) => {
                        self.waiting.entry(name.into()).or_default().push(pair);
                        k += 1;
                    }
                }
            }
        }
    }

    /// Takes `pair` out of the contest and returns the name it held.
    fn withdraw(&mut self, pair: PairRef) -> Box<str> {
        let (name, rank) = {
            let entry = self.entry(pair);
            (entry.exposed.clone(), entry.rank)
        };
        self.holders.remove(name.as_bytes());
        self.bumped.remove(&pair);
        self.leave_waiting(pair, 0..rank);
        name
    }

    fn leave_waiting(&mut self, pair: PairRef, ranks: std::ops::Range<u32>) {
        for k in ranks {
            let name = self.candidate(pair, k);
            if let Some(waiters) = self.waiting.get_mut(name.as_str()) {
                waiters.retain(|&w| w != pair);
                if waiters.is_empty() {
                    self.waiting.remove(name.as_str());
                }
            }
        }
    }

    /// `name` is free: the first pair waiting for it takes it, freeing its own name in turn.
    fn hand_over(&mut self, name: Box<str>, changes: &mut Changes) {
        let mut free = vec![name];
        while let Some(name) = free.pop() {
            if self.holders.contains_key(name.as_bytes()) {
                continue;
            }
            let Some(waiters) = self.waiting.get(&name) else {
                continue;
            };
            let mut best = waiters[0];
            for &w in &waiters[1..] {
                if self.ahead(w, best) {
                    best = w;
                }
            }
            let (old, old_rank) = {
                let entry = self.entry(best);
                (entry.exposed.clone(), entry.rank)
            };
            let Some(k) = (0..old_rank).find(|&k| *self.candidate(best, k) == *name) else {
                unreachable!("a waiting pair has the name it waits for in its chain");
            };
            self.note_rename(best, changes);
            self.holders.remove(old.as_bytes());
            self.leave_waiting(best, k..old_rank);
            self.set_name(best, name, k);
            free.push(old);
        }
    }

    fn rebuild_collisions(&mut self) {
        let mut collisions = Vec::with_capacity(self.bumped.len());
        for &pair in &self.bumped {
            let wanted = self.candidate(pair, 0);
            let kept_by = if is_native(&wanted) {
                NATIVE_OWNER.to_string()
            } else {
                match self.holders.get(wanted.as_bytes()) {
                    Some(holder) => self.servers[holder.server as usize].name.clone(),
                    None => continue,
                }
            };
            collisions.push((
                pair.server,
                self.entry(pair).tool.name.clone(),
                Collision {
                    name: wanted,
                    kept_by,
                    server: self.servers[pair.server as usize].name.clone(),
                    exposed_as: self.entry(pair).exposed.to_string(),
                },
            ));
        }
        collisions.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        self.collisions = collisions.into_iter().map(|(_, _, c)| c).collect();
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
mod tests {
    use super::*;
    use crate::naming::NamingMode;
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    fn registry(servers: &[&str], mode: NamingMode) -> ToolRegistry {
        ToolRegistry::new(
            servers.iter().map(|s| s.to_string()).collect(),
            NamingConfig {
                mode,
                ..NamingConfig::default()
            },
        )
    }

    fn tools(names: &[&str]) -> Vec<Tool> {
        names
            .iter()
            .map(|n| Tool::new(*n).with_description(format!("{n} does things")))
            .collect()
    }

    /// A JSON object literal as a map.
    fn object(value: Value) -> serde_json::Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn exposed(r: &ToolRegistry) -> Vec<String> {
        r.tools().map(|t| t.exposed_name.to_string()).collect()
    }

    #[test]
    fn first_listing_adds_prefixed_names_in_listing_order() {
        let mut r = registry(&["gh", "fs"], NamingMode::Always);
        let delta = r.reconcile("fs", tools(&["read", "write"]));
        assert_eq!(delta.added, names(&["fs__read", "fs__write"]));
        r.reconcile("gh", tools(&["issue"]));
        assert_eq!(exposed(&r), names(&["gh__issue", "fs__read", "fs__write"]));
        assert_eq!(r.tool_counts(), vec![("gh", 1), ("fs", 2)]);
        assert_eq!(r.len(), 3);
        let route = r.route("fs__write").expect("routes");
        assert_eq!((route.server, route.tool.name.as_str()), ("fs", "write"));
        assert!(r.route("write").is_none());
    }

    #[test]
    fn same_listing_twice_is_empty() {
        let mut r = registry(&["a"], NamingMode::Always);
        assert!(!r.reconcile("a", tools(&["x", "y"])).is_empty());
        assert!(r.reconcile("a", tools(&["x", "y"])).is_empty());
        assert!(
            r.reconcile("a", tools(&["y", "x"])).is_empty(),
            "order alone is no news"
        );
        assert_eq!(
            exposed(&r),
            names(&["a__y", "a__x"]),
            "but the order is kept"
        );
    }

    #[test]
    fn description_or_schema_change_is_changed() {
        let mut r = registry(&["a"], NamingMode::Always);
        r.reconcile("a", tools(&["x", "y"]));
        let mut listing = tools(&["x", "y"]);
        listing[0].description = Some("new words".into());
        assert_eq!(r.reconcile("a", listing.clone()).changed, names(&["a__x"]));
        listing[1].input_schema = Arc::new(object(
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        ));
        let d = r.reconcile("a", listing.clone());
        assert_eq!(
            (d.added.len(), d.changed, d.removed.len()),
            (0, names(&["a__y"]), 0)
        );
        listing[1].output_schema = Some(json!({"type": "object"}));
        assert_eq!(r.reconcile("a", listing.clone()).changed, names(&["a__y"]));
        listing[0].annotations = Some(json!({"readOnlyHint": true}));
        assert_eq!(r.reconcile("a", listing).changed, names(&["a__x"]));
    }

    #[test]
    fn title_and_meta_are_kept_but_are_no_news() {
        let mut r = registry(&["a"], NamingMode::Always);
        r.reconcile("a", tools(&["x"]));
        let mut listing = tools(&["x"]);
        listing[0].title = Some("X".into());
        listing[0].meta = Some(json!({"v": 2}));
        assert!(r.reconcile("a", listing).is_empty());
        let tool = r.route("a__x").expect("routes").tool;
        assert_eq!(tool.title.as_deref(), Some("X"));
        assert_eq!(tool.meta, Some(json!({"v": 2})));
    }

    #[test]
    fn fingerprint_ignores_key_order_and_sees_nesting() {
        let mut one = serde_json::Map::new();
        one.insert("type".into(), json!("object"));
        one.insert(
            "properties".into(),
            json!({"a": {"type": "string"}, "b": {"type": "integer"}}),
        );
        let mut two = serde_json::Map::new();
        two.insert(
            "properties".into(),
            json!({"b": {"type": "integer"}, "a": {"type": "string"}}),
        );
        two.insert("type".into(), json!("object"));
        let t1 = Tool::new("t").with_input_schema(one);
        let t2 = Tool::new("t").with_input_schema(two);
        assert_eq!(Fingerprint::of(&t1), Fingerprint::of(&t2));
        let swapped = Tool::new("t").with_input_schema(object(
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}),
        ));
        assert_ne!(Fingerprint::of(&t1), Fingerprint::of(&swapped));
        let moved = Tool::new("t").with_input_schema(object(json!({"type": "object"})));
        let as_output = Tool {
            output_schema: Some(json!({"type": "object"})),
            ..Tool::new("t").with_input_schema(object(json!({})))
        };
        assert_ne!(Fingerprint::of(&moved), Fingerprint::of(&as_output));
        let items = |list: Value| object(json!({"enum": list}));
        assert_ne!(
            Fingerprint::of(&Tool::new("t").with_input_schema(items(json!([1, 2])))),
            Fingerprint::of(&Tool::new("t").with_input_schema(items(json!([2, 1]))))
        );
    }

    #[test]
    fn fingerprint_is_stable_across_runs() {
        // Fixed input, fixed output: a change here means every deployed fingerprint changes.
        let tool = Tool::new("t")
            .with_description("d")
            .with_input_schema(object(json!({"type": "object", "required": ["a"]})));
        assert_eq!(Fingerprint::of(&tool).to_string(), "8952a8260712dc49");
    }

    #[test]
    fn removed_tools_and_servers() {
        let mut r = registry(&["a", "b"], NamingMode::Always);
        r.reconcile("a", tools(&["x", "y"]));
        r.reconcile("b", tools(&["x"]));
        assert_eq!(r.reconcile("a", tools(&["y"])).removed, names(&["a__x"]));
        assert!(r.route("b__x").is_some(), "b's x is not a's x");
        let d = r.remove_server("b");
        assert_eq!(d.removed, names(&["b__x"]));
        assert!(!r.is_listed("b") && r.is_listed("a"));
        assert_eq!(r.tool_counts(), vec![("a", 1), ("b", 0)]);
        assert!(r.remove_server("nope").is_empty());
        assert!(r.remove_server("b").is_empty());
    }

    #[test]
    fn deferring_drop_hands_back_every_copy_not_kept() {
        let mut plain = registry(&["a"], NamingMode::Always);
        let mut deferring = registry(&["a"], NamingMode::Always);
        plain.reconcile("a", tools(&["x", "y", "z"]));
        deferring.reconcile("a", tools(&["x", "y", "z"]));
        let mut listing = tools(&["x", "y", "w", "w"]);
        listing[1].description = Some("changed".into());
        let expected = plain.reconcile("a", listing.clone());
        let (delta, superseded) = deferring.reconcile_deferring_drop("a", listing);
        assert_eq!(delta, expected);
        // x's and y's second copies, the duplicate w, the removed z.
        assert_eq!(superseded.len(), 4);
        assert_eq!(exposed(&plain), exposed(&deferring));
        let y = deferring.route("a__y").expect("routes").tool;
        assert_eq!(y.description.as_deref(), Some("changed"));

        // A listing built page by page reconciles like the whole Vec.
        let mut paged = registry(&["a"], NamingMode::Always);
        paged.reconcile("a", tools(&["x", "y", "z"]));
        let mut listing = Listing::new();
        listing.extend(tools(&["x"]));
        listing.extend(tools(&["y", "w"]).into_iter().map(|mut t| {
            if t.name == "y" {
                t.description = Some("changed".into());
            }
            t
        }));
        assert_eq!(listing.len(), 3);
        let (delta, _) = paged.reconcile_listing("a", listing);
        assert_eq!(delta, expected);
    }

    #[test]
    fn duplicate_names_in_one_listing_keep_the_first() {
        let mut r = registry(&["a"], NamingMode::Always);
        let mut listing = tools(&["x", "x"]);
        listing[1].description = Some("second".into());
        let d = r.reconcile("a", listing);
        assert_eq!(d.added, names(&["a__x"]));
        assert_eq!(r.len(), 1);
        assert_eq!(
            r.route("a__x").expect("routes").tool.description.as_deref(),
            Some("x does things")
        );
    }

    #[test]
    fn conditional_prefixes_only_with_several_servers() {
        let mut one = registry(&["a"], NamingMode::Conditional);
        one.reconcile("a", tools(&["x"]));
        assert_eq!(exposed(&one), names(&["x"]));
        let mut two = registry(&["a", "b"], NamingMode::Conditional);
        two.reconcile("a", tools(&["x"]));
        assert_eq!(exposed(&two), names(&["a__x"]));
        // A server that was not configured joins: everyone is prefixed now, and told so.
        let d = one.reconcile("late", tools(&["y"]));
        assert_eq!(exposed(&one), names(&["a__x", "late__y"]));
        assert_eq!(d.added, names(&["late__y", "a__x"]));
        assert_eq!(d.removed, names(&["x"]));
    }

    #[test]
    fn never_mode_first_server_in_config_keeps_the_bare_name() {
        for first in ["a", "b"] {
            let mut r = registry(&["a", "b"], NamingMode::Never);
            let second = if first == "a" { "b" } else { "a" };
            r.reconcile(first, tools(&["x", "only"]));
            r.reconcile(second, tools(&["x"]));
            assert_eq!(
                r.route("x").expect("routes").server,
                "a",
                "arrival order {first}"
            );
            assert_eq!(r.route("b__x").expect("routes").server, "b");
            assert_eq!(
                r.collisions(),
                &[Collision {
                    name: "x".into(),
                    kept_by: "a".into(),
                    server: "b".into(),
                    exposed_as: "b__x".into(),
                }]
            );
        }
    }

    #[test]
    fn never_mode_renames_of_other_servers_are_in_the_delta() {
        let mut r = registry(&["a", "b"], NamingMode::Never);
        r.reconcile("b", tools(&["x"]));
        assert_eq!(exposed(&r), names(&["x"]));
        let d = r.reconcile("a", tools(&["x"]));
        // a's x now owns "x" (a different tool under the old name), b's x moved to "b__x".
        assert_eq!(d.changed, names(&["x"]));
        assert_eq!(d.added, names(&["b__x"]));
        assert!(d.removed.is_empty());
        assert_eq!(r.route("b__x").expect("b keeps its tool").tool.name, "x");
        let d = r.reconcile("a", Vec::new());
        assert_eq!(d.changed, names(&["x"]));
        assert_eq!(d.removed, names(&["b__x"]));
        assert_eq!(r.route("x").expect("bare again").server, "b");
        assert!(r.collisions().is_empty());
    }

    #[test]
    fn native_names_are_never_shadowed() {
        let mut r = registry(&["s"], NamingMode::Never);
        r.reconcile("s", tools(&["list_skills", "refresh_tools", "other"]));
        assert_eq!(
            exposed(&r),
            names(&["s__list_skills", "s__refresh_tools", "other"])
        );
        assert!(r.route("list_skills").is_none());
        assert_eq!(r.collisions().len(), 2);
        assert_eq!(r.collisions()[0].kept_by, NATIVE_OWNER);
        let mut always = registry(&["s"], NamingMode::Always);
        always.reconcile("s", tools(&["channels"]));
        assert_eq!(exposed(&always), names(&["s__channels"]));
        assert!(always.collisions().is_empty());
        // A prefixed name can spell a native name too.
        let mut odd = ToolRegistry::new(
            vec!["list".into()],
            NamingConfig {
                mode: NamingMode::Always,
                separator: "_".into(),
            },
        );
        odd.reconcile("list", tools(&["skills"]));
        assert_ne!(exposed(&odd), names(&["list_skills"]));
    }

    #[test]
    fn sanitized_names_stay_apart() {
        let mut r = registry(&["my server"], NamingMode::Always);
        r.reconcile(
            "my server",
            tools(&["a b", "a_b", "ünï", &"long".repeat(30)]),
        );
        let all = exposed(&r);
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), 4);
        for name in &all {
            assert!(crate::naming::is_valid_exposed_name(name), "{name}");
        }
        let route = r.route(&all[0]).expect("routes");
        assert_eq!(
            (route.server, route.tool.name.as_str()),
            ("my server", "a b")
        );
    }

    #[test]
    fn presence_follows_listings() {
        let mut r = registry(&["a", "b"], NamingMode::Always);
        assert_eq!(r.presence("a__x"), ToolPresence::Unknown);
        r.reconcile("a", tools(&["x"]));
        assert_eq!(r.presence("a__x"), ToolPresence::Present);
        assert_eq!(r.presence("a__y"), ToolPresence::Missing);
        assert_eq!(r.presence("b__y"), ToolPresence::Unknown);
        assert_eq!(
            r.presence("zzz__y"),
            ToolPresence::Missing,
            "no such server"
        );
        r.remove_server("a");
        assert_eq!(r.presence("a__x"), ToolPresence::Unknown);

        let mut bare = registry(&["a", "b"], NamingMode::Never);
        bare.reconcile("a", tools(&["x"]));
        assert_eq!(bare.presence("x"), ToolPresence::Present);
        assert_eq!(
            bare.presence("y"),
            ToolPresence::Unknown,
            "b may still offer it"
        );
        bare.reconcile("b", Vec::new());
        assert_eq!(bare.presence("y"), ToolPresence::Missing);
    }

    // ---- properties ----

    /// Serial dictatorship from scratch: the assignment the incremental one must equal.
    fn reference_names(r: &ToolRegistry) -> BTreeMap<(u32, String), String> {
        let bare_first = r.bare_first();
        let mut pairs: Vec<(u32, String)> = Vec::new();
        for (s, server) in r.servers.iter().enumerate() {
            for &slot in &server.order {
                let entry = server.slots[slot as usize].as_ref().expect("live slot");
                pairs.push((s as u32, entry.tool.name.clone()));
            }
        }
        pairs.sort();
        let mut taken = HashSet::new();
        let mut out = BTreeMap::new();
        for (s, tool) in pairs {
            let server = &r.servers[s as usize].name;
            let name = (0..)
                .map(|k| r.naming.candidate(server, &tool, bare_first, k))
                .find(|c| !is_native(c) && !taken.contains(c))
                .expect("chains are endless");
            taken.insert(name.clone());
            out.insert((s, tool), name);
        }
        out
    }

    /// exposed name -> (server, tool name, fingerprint), and per server its (tool, fingerprint)s.
    type Snapshot = (
        BTreeMap<String, (String, String, Fingerprint)>,
        BTreeMap<String, Vec<(Tool, Fingerprint)>>,
    );

    /// What a client would be served, in order.
    fn listed(r: &ToolRegistry) -> Vec<(String, Tool)> {
        r.tools()
            .map(|t| (t.exposed_name.to_string(), t.tool.clone()))
            .collect()
    }

    fn snapshot(r: &ToolRegistry) -> Snapshot {
        let mut by_name = BTreeMap::new();
        let mut by_server: BTreeMap<String, Vec<(Tool, Fingerprint)>> = BTreeMap::new();
        for t in r.tools() {
            by_name.insert(
                t.exposed_name.to_string(),
                (t.server.to_string(), t.tool.name.clone(), t.fingerprint),
            );
            by_server
                .entry(t.server.to_string())
                .or_default()
                .push((t.tool.clone(), t.fingerprint));
        }
        (by_name, by_server)
    }

    fn expected_delta(
        before: &Snapshot,
        after: &Snapshot,
    ) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
        let (b, a) = (&before.0, &after.0);
        let added = a.keys().filter(|n| !b.contains_key(*n)).cloned().collect();
        let removed = b.keys().filter(|n| !a.contains_key(*n)).cloned().collect();
        let changed = a
            .iter()
            .filter(|(n, t)| b.get(*n).is_some_and(|old| old != *t))
            .map(|(n, _)| n.clone())
            .collect();
        (added, changed, removed)
    }

    fn as_sets(d: &Delta) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
        let set = |v: &Vec<String>| v.iter().cloned().collect::<BTreeSet<_>>();
        (set(&d.added), set(&d.changed), set(&d.removed))
    }

    fn tool_name() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => prop::sample::select(vec![
                "x", "y", "x y", "x_y", "a__x", "b__x", "list_skills", "channels", "", "ü", "a", "b__",
                "_x", "x.y",
            ]).prop_map(String::from),
            1 => "[a-z]{60,70}",
            1 => "\\PC{0,6}",
        ]
    }

    #[derive(Debug, Clone)]
    enum Op {
        Reconcile(usize, Vec<(String, u8)>),
        Remove(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0usize..4, prop::collection::vec((tool_name(), 0u8..3), 0..6)).prop_map(|(s, l)| Op::Reconcile(s, l)),
            1 => (0usize..4).prop_map(Op::Remove),
        ]
    }

    fn mode() -> impl Strategy<Value = NamingConfig> {
        (
            prop::sample::select(vec![
                NamingMode::Always,
                NamingMode::Conditional,
                NamingMode::Never,
            ]),
            prop::sample::select(vec!["__", "_", "."]),
        )
            .prop_map(|(mode, sep)| NamingConfig {
                mode,
                separator: sep.to_string(),
            })
    }

    fn server_names() -> impl Strategy<Value = Vec<String>> {
        prop::sample::select(vec![
            vec!["a", "b", "x", "late"],
            vec!["a", "a__b", "a_", "late"],
            vec!["a b", "a_b", "ü", "late"],
            vec!["s", "list", "", "late"],
        ])
        .prop_map(|v| v.into_iter().map(String::from).collect())
    }

    fn listing(spec: &[(String, u8)]) -> Vec<Tool> {
        spec.iter()
            .map(|(name, variant)| match variant {
                0 => Tool::new(name.clone()),
                1 => Tool::new(name.clone()).with_description("described"),
                _ => Tool::new(name.clone())
                    .with_input_schema(object(json!({"type": "object", "properties": {}}))),
            })
            .collect()
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            "[a-z]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-e]{1,2}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn value_fingerprint(v: &Value, sorted: bool) -> u64 {
        let mut h = Canon::new();
        hash_value_with(&mut h, v, sorted);
        h.digest()
    }

    /// `v` with every object's keys inserted in ascending (or descending) order; with
    /// `preserve_order` that is the order they iterate in.
    fn with_key_order(v: &Value, descending: bool) -> Value {
        match v {
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|i| with_key_order(i, descending))
                    .collect(),
            ),
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                if descending {
                    keys.reverse();
                }
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), with_key_order(&map[k], descending)))
                        .collect(),
                )
            }
            other => other.clone(),
        }
    }

    proptest! {
        /// The sorting fallback hashes like the sorted iteration, whatever order the keys were
        /// inserted in, and the fingerprint tells values apart.
        #[test]
        fn fingerprint_paths_agree_and_separate(a in json_value(), b in json_value()) {
            let sorted = with_key_order(&a, false);
            let reversed = with_key_order(&a, true);
            prop_assert_eq!(value_fingerprint(&sorted, true), value_fingerprint(&a, false));
            prop_assert_eq!(value_fingerprint(&reversed, false), value_fingerprint(&a, false));
            prop_assert_eq!(value_fingerprint(&a, *MAPS_ARE_SORTED), value_fingerprint(&a, false));
            if a != b {
                prop_assert_ne!(value_fingerprint(&a, false), value_fingerprint(&b, false));
            }
        }
    }

    #[test]
    fn a_call_by_one_servers_own_name_routes_to_it() {
        let mut r = registry(&["apps", "fs"], NamingMode::Always);
        r.reconcile("apps", tools(&["poll-system-stats", "read"]));
        r.reconcile("fs", tools(&["read"]));
        let routed = r
            .route_call("poll-system-stats")
            .expect("one server has it");
        assert_eq!(
            (
                routed.server,
                routed.tool.name.as_str(),
                routed.exposed_name
            ),
            ("apps", "poll-system-stats", "apps__poll-system-stats")
        );
        let exposed = r.route_call("fs__read").expect("exposed name");
        assert_eq!((exposed.server, exposed.tool.name.as_str()), ("fs", "read"));
        assert_eq!(
            r.route_call("nope"),
            Err(CallRouteError::Unknown("nope".into()))
        );
    }

    #[test]
    fn a_call_by_an_own_name_two_servers_have_names_both_exposed_names() {
        let mut r = registry(&["apps", "fs"], NamingMode::Always);
        r.reconcile("fs", tools(&["read"]));
        r.reconcile("apps", tools(&["read"]));
        let err = r.route_call("read").expect_err("ambiguous");
        assert_eq!(
            err,
            CallRouteError::Ambiguous {
                name: "read".into(),
                exposed: names(&["apps__read", "fs__read"]),
            }
        );
        let message = err.to_string();
        assert!(
            message.contains("apps__read") && message.contains("fs__read"),
            "{message}"
        );
    }

    #[test]
    fn exposed_names_and_native_names_win_over_own_names() {
        // In `never` mode `a`'s bare `x` is exposed as `x`; `b`'s is `b__x`.
        let mut r = registry(&["a", "b"], NamingMode::Never);
        r.reconcile("a", tools(&["x"]));
        r.reconcile("b", tools(&["x", "a__x", "refresh_tools"]));
        assert_eq!(r.route_call("x").expect("exposed").server, "a");
        // `a__x` is b's own name and no exposed name (a's x is exposed bare).
        assert_eq!(r.route_call("a__x").expect("own name").server, "b");
        assert_eq!(
            r.route_call("refresh_tools"),
            Err(CallRouteError::Unknown("refresh_tools".into())),
            "a native tool's name never reaches a server"
        );
        assert_eq!(
            r.route_call("b__refresh_tools").expect("exposed").tool.name,
            "refresh_tools"
        );
    }

    #[test]
    fn a_removed_server_is_no_owner() {
        let mut r = registry(&["a", "b"], NamingMode::Always);
        r.reconcile("a", tools(&["x"]));
        r.reconcile("b", tools(&["x"]));
        assert!(matches!(
            r.route_call("x"),
            Err(CallRouteError::Ambiguous { .. })
        ));
        r.remove_server("a");
        assert_eq!(r.route_call("x").expect("only b now").server, "b");
    }

    proptest! {
        /// `route_call` is: the exposed name's tool; else, for a non-native name, the one
        /// server listing it as its own name, or an error naming every such server's exposed
        /// name in config order.
        #[test]
        fn route_call_follows_its_rule(
            naming in mode(),
            listings in prop::collection::vec(
                prop::collection::vec(
                    prop::sample::select(vec!["x", "y", "s1__x", "x__s2", "list_skills", "get_skill"]),
                    0..4,
                ),
                3,
            ),
            called in prop::sample::select(vec!["x", "y", "z", "s1__x", "s2__x", "x__s2", "list_skills", "s3__get_skill"]),
        ) {
            let servers = names(&["s1", "s2", "s3"]);
            let mut r = ToolRegistry::new(servers.clone(), naming);
            for (server, listing) in servers.iter().zip(&listings) {
                r.reconcile(server, listing.iter().map(|n| Tool::new(*n)).collect());
            }
            let outcome = r.route_call(called);
            if let Some(exposed) = r.tools().find(|t| t.exposed_name == called) {
                prop_assert_eq!(outcome, Ok(exposed));
                return Ok(());
            }
            let owners: Vec<ExposedTool<'_>> = r.tools().filter(|t| t.tool.name == called).collect();
            match (is_native(called), owners.as_slice()) {
                (true, _) | (false, []) => {
                    prop_assert_eq!(outcome, Err(CallRouteError::Unknown(called.to_owned())));
                }
                (false, [one]) => prop_assert_eq!(outcome, Ok(*one)),
                (false, many) => prop_assert_eq!(
                    outcome,
                    Err(CallRouteError::Ambiguous {
                        name: called.to_owned(),
                        exposed: many.iter().map(|t| t.exposed_name.to_owned()).collect(),
                    })
                ),
            }
        }
    }

    fn any_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9_]{0,8}",
            "\\PC{0,12}",
            "[A-Za-z0-9_.-]{60,80}",
            "\\PC{60,100}",
            "[ _/]{1,3}",
        ]
    }

    proptest! {
        /// Whatever the servers and tools are called, every exposed name is valid, unique, routes
        /// to its own tool, and a fresh registry fed the same listings agrees on every name.
        #[test]
        fn arbitrary_names_expose_valid_unique_names(
            naming in mode(),
            servers in prop::collection::vec(any_text(), 1..4),
            listings in prop::collection::vec(prop::collection::vec(any_text(), 0..6), 4),
        ) {
            let mut unique = HashSet::new();
            let servers: Vec<String> = servers.into_iter().filter(|s| unique.insert(s.clone())).collect();
            let mut r = ToolRegistry::new(servers.clone(), naming.clone());
            for (server, names) in servers.iter().zip(&listings).rev() {
                r.reconcile(server, names.iter().map(|n| Tool::new(n.clone())).collect());
            }
            let mut seen = HashSet::new();
            for t in r.tools() {
                prop_assert!(crate::naming::is_valid_exposed_name(t.exposed_name), "{:?}", t.exposed_name);
                prop_assert!(seen.insert(t.exposed_name.to_string()), "{:?} twice", t.exposed_name);
                let route = r.route(t.exposed_name).expect("routes");
                prop_assert_eq!((route.server, &route.tool.name), (t.server, &t.tool.name));
            }
            let mut forward = ToolRegistry::new(servers.clone(), naming);
            for (server, names) in servers.iter().zip(&listings) {
                forward.reconcile(server, names.iter().map(|n| Tool::new(n.clone())).collect());
            }
            let names = |r: &ToolRegistry| r.tools().map(|t| (t.server.to_string(), t.tool.name.clone(), t.exposed_name.to_string())).collect::<Vec<_>>();
            prop_assert_eq!(names(&r), names(&forward));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn registry_invariants_hold_after_every_operation(
            naming in mode(),
            servers in server_names(),
            configured in 1usize..4,
            ops in prop::collection::vec(op(), 1..12),
        ) {
            let mut r = ToolRegistry::new(servers[..configured].to_vec(), naming);
            for op in ops {
                let before = snapshot(&r);
                let listed_before = listed(&r);
                let version_before = r.version();
                let (server, delta) = match &op {
                    Op::Reconcile(s, spec) => (servers[*s].clone(), r.reconcile(&servers[*s], listing(spec))),
                    Op::Remove(s) => (servers[*s].clone(), r.remove_server(&servers[*s])),
                };
                let after = snapshot(&r);

                // Exposed names: unique, valid, routing to their tools.
                let all: Vec<ExposedTool<'_>> = r.tools().collect();
                prop_assert_eq!(all.len(), r.len());
                prop_assert_eq!(after.0.len(), r.len(), "names are unique");
                for t in &all {
                    prop_assert!(crate::naming::is_valid_exposed_name(t.exposed_name), "{:?}", t.exposed_name);
                    prop_assert!(!is_native(t.exposed_name));
                    let route = r.route(t.exposed_name).expect("every exposed name routes");
                    prop_assert_eq!((route.server, &route.tool.name), (t.server, &t.tool.name));
                    prop_assert_eq!(r.presence(t.exposed_name), ToolPresence::Present);
                }

                // Names depend on the state only, not on the history that led to it.
                let mut got = BTreeMap::new();
                for (s, srv) in r.servers.iter().enumerate() {
                    for &slot in &srv.order {
                        let e = srv.slots[slot as usize].as_ref().expect("live slot");
                        got.insert((s as u32, e.tool.name.clone()), e.exposed.to_string());
                    }
                }
                prop_assert_eq!(got, reference_names(&r));

                // No other server's entries were touched.
                for (other, entries) in &before.1 {
                    if *other != server {
                        prop_assert_eq!(Some(entries), after.1.get(other));
                    }
                }
                for (other, entries) in &after.1 {
                    if *other != server {
                        prop_assert_eq!(Some(entries), before.1.get(other));
                    }
                }

                // The delta says exactly what a client would see change.
                prop_assert_eq!(as_sets(&delta), expected_delta(&before, &after));
                let mut seen = HashSet::new();
                for n in delta.added.iter().chain(&delta.changed).chain(&delta.removed) {
                    prop_assert!(seen.insert(n.clone()), "{} listed twice in {:?}", n, delta);
                }

                // The version moves whenever the listing a client sees does.
                if listed(&r) != listed_before {
                    prop_assert_ne!(r.version(), version_before, "the tools changed, the version did not");
                }

                // Same listing again: nothing, and the version stays.
                if let Op::Reconcile(s, spec) = &op {
                    let version = r.version();
                    prop_assert!(r.reconcile(&servers[*s], listing(spec)).is_empty());
                    prop_assert_eq!(r.version(), version, "an unchanged listing moved the version");
                }
            }
        }
    }
}
