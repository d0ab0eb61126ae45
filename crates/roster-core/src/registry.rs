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
//! The assignment is maintained incrementally: only pairs whose names are contested are revisited.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

use serde_json::Value;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::delta::Delta;
use crate::naming::{Collision, NATIVE_OWNER, NamingConfig, is_native};
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
        let parts = [
            tool.description
                .as_deref()
                .map_or(NONE, |d| str_hash(d, SEED_STR)),
            value_hash(&tool.input_schema),
            tool.output_schema.as_ref().map_or(NONE, value_hash),
            tool.annotations.as_ref().map_or(NONE, value_hash),
        ];
        let mut bytes = [0u8; 32];
        for (chunk, part) in bytes.chunks_exact_mut(8).zip(parts) {
            chunk.copy_from_slice(&part.to_le_bytes());
        }
        Fingerprint(xxh3_64_with_seed(&bytes, SEED_TOOL))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

const NONE: u64 = 0x9e37_79b9_7f4a_7c15;
const SEED_TOOL: u64 = 1;
const SEED_NULL: u64 = 2;
const SEED_BOOL: u64 = 3;
const SEED_UINT: u64 = 4;
const SEED_INT: u64 = 5;
const SEED_FLOAT: u64 = 6;
const SEED_STR: u64 = 7;
const SEED_ARRAY: u64 = 8;
const SEED_OBJECT: u64 = 9;
const SEED_KEY: u64 = 10;

fn str_hash(s: &str, seed: u64) -> u64 {
    xxh3_64_with_seed(s.as_bytes(), seed)
}

fn mix(value: u64, seed: u64) -> u64 {
    xxh3_64_with_seed(&value.to_le_bytes(), seed)
}

/// A Merkle-style hash of a JSON value. Objects combine their entries with a wrapping sum, so the
/// result does not depend on key order even if serde_json's `preserve_order` is switched on by
/// some other crate in the build.
fn value_hash(value: &Value) -> u64 {
    match value {
        Value::Null => mix(0, SEED_NULL),
        Value::Bool(b) => mix(u64::from(*b), SEED_BOOL),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                mix(u, SEED_UINT)
            } else if let Some(i) = n.as_i64() {
                mix(i as u64, SEED_INT)
            } else {
                mix(n.as_f64().map_or(0, f64::to_bits), SEED_FLOAT)
            }
        }
        Value::String(s) => str_hash(s, SEED_STR),
        Value::Array(items) => items
            .iter()
            .fold(mix(items.len() as u64, SEED_ARRAY), |acc, item| {
                mix(value_hash(item), acc)
            }),
        Value::Object(map) => {
            let sum = map.iter().fold(0u64, |acc, (key, item)| {
                acc.wrapping_add(mix(value_hash(item), str_hash(key, SEED_KEY)))
            });
            mix(sum, SEED_OBJECT ^ (map.len() as u64).rotate_left(32))
        }
    }
}

/// Where a call of an exposed tool goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Route<'a> {
    /// The server that offers the tool.
    pub server: &'a str,
    /// The tool as that server listed it; `tool.name` is the name to call it by there.
    pub tool: &'a Tool,
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
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    by_name: HashMap<Box<str>, u32>,
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
            by_name: HashMap::new(),
            order: Vec::new(),
        }
    }

    fn alloc(&mut self, entry: Entry) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(entry);
                slot
            }
            None => {
                self.slots.push(Some(entry));
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
    holders: HashMap<Box<str>, PairRef>,
    /// For a name, the pairs that would take it but for a pair ahead of them; it goes to the
    /// first of them when it frees up.
    waiting: HashMap<Box<str>, Vec<PairRef>>,
    /// Pairs not on the first candidate of their chain.
    bumped: BTreeSet<PairRef>,
    collisions: Vec<Collision>,
    generation: u64,
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
            holders: HashMap::new(),
            waiting: HashMap::new(),
            bumped: BTreeSet::new(),
            collisions: Vec::new(),
            generation: 0,
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
    /// fingerprint is unchanged is not in the delta, but its entry takes the listing's copy, so a
    /// new title or `_meta` is served. A second tool of the same name in one listing is ignored.
    /// A server not given to [`ToolRegistry::new`] is added after the configured ones.
    pub fn reconcile(&mut self, server: &str, listing: Vec<Tool>) -> Delta {
        let before = self.servers.len();
        let s = match self.server_index.get(server) {
            Some(&s) => s,
            None => self.add_server(server.to_string()),
        };
        let mut changes = Changes::default();
        if self.naming.prefixes(before) != self.naming.prefixes(self.servers.len()) {
            self.rename_all(&mut changes);
        }
        let mut delta = self.replace_listing(s, listing, &mut changes);
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
        let mut delta = self.replace_listing(s, Vec::new(), &mut changes);
        self.servers[s as usize].listed = false;
        self.finish(&mut delta, changes);
        delta
    }

    /// Where a call of `exposed_name` goes.
    pub fn route(&self, exposed_name: &str) -> Option<Route<'_>> {
        let pair = *self.holders.get(exposed_name)?;
        let server = &self.servers[pair.server as usize];
        let entry = server.slots[pair.slot as usize].as_ref()?;
        Some(Route {
            server: &server.name,
            tool: &entry.tool,
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

    /// Number of exposed tools.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no server offers a tool.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    // ---- reconcile internals ----

    fn replace_listing(&mut self, s: u32, listing: Vec<Tool>, changes: &mut Changes) -> Delta {
        self.generation += 1;
        let generation = self.generation;
        let mut delta = Delta::default();
        let mut changed = Vec::new();
        let server = &mut self.servers[s as usize];
        let mut order = Vec::with_capacity(listing.len());
        for tool in listing {
            let fingerprint = Fingerprint::of(&tool);
            if let Some(&slot) = server.by_name.get(tool.name.as_str()) {
                let Some(entry) = server.slots[slot as usize].as_mut() else {
                    continue;
                };
                if entry.seen == generation {
                    continue;
                }
                entry.seen = generation;
                if entry.fingerprint != fingerprint {
                    entry.fingerprint = fingerprint;
                    changed.push(slot);
                }
                entry.tool = tool;
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
        let old_order = std::mem::replace(&mut server.order, order);

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
        let entry = self.entry_mut(pair);
        entry.exposed = name.clone();
        entry.rank = rank;
        self.holders.insert(name, pair);
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
                match self.holders.get(name.as_str()).copied() {
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
        self.holders.remove(&name);
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
            if self.holders.contains_key(&name) {
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
            self.holders.remove(&old);
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
                match self.holders.get(wanted.as_str()) {
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

impl ToolLookup for ToolRegistry {
    /// Present when `reference` routes. Otherwise the owning server decides: the one whose name
    /// prefixes the reference, or, when tools are exposed bare, every server. Missing when the
    /// owners are all listed (or no configured server can own it), Unknown while one is not.
    fn presence(&self, reference: &str) -> ToolPresence {
        if self.holders.contains_key(reference) {
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
        listing[1].input_schema =
            json!({"type": "object", "properties": {"q": {"type": "string"}}});
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
        let t1 = Tool::new("t").with_input_schema(Value::Object(one));
        let t2 = Tool::new("t").with_input_schema(Value::Object(two));
        assert_eq!(Fingerprint::of(&t1), Fingerprint::of(&t2));
        let swapped = Tool::new("t").with_input_schema(
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}),
        );
        assert_ne!(Fingerprint::of(&t1), Fingerprint::of(&swapped));
        let moved = Tool::new("t").with_input_schema(json!({"type": "object"}));
        let as_output = Tool {
            output_schema: Some(json!({"type": "object"})),
            ..Tool::new("t").with_input_schema(json!({}))
        };
        assert_ne!(Fingerprint::of(&moved), Fingerprint::of(&as_output));
        assert_ne!(
            Fingerprint::of(&Tool::new("t").with_input_schema(json!([1, 2]))),
            Fingerprint::of(&Tool::new("t").with_input_schema(json!([2, 1])))
        );
    }

    #[test]
    fn fingerprint_is_stable_across_runs() {
        // Fixed input, fixed output: a change here means every deployed fingerprint changes.
        let tool = Tool::new("t")
            .with_description("d")
            .with_input_schema(json!({"type": "object", "required": ["a"]}));
        assert_eq!(Fingerprint::of(&tool), Fingerprint::of(&tool.clone()));
        assert_eq!(Fingerprint::of(&tool).to_string().len(), 16);
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
                    .with_input_schema(json!({"type": "object", "properties": {}})),
            })
            .collect()
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

                // Same listing again: nothing.
                if let Op::Reconcile(s, spec) = &op {
                    prop_assert!(r.reconcile(&servers[*s], listing(spec)).is_empty());
                }
            }
        }
    }
}
