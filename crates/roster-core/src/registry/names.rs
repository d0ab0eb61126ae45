//! Exposed names: the hasher and inline keys of the registry's name maps, and the assignment of
//! names to (server, tool) pairs (each pair takes the first candidate of its chain that no
//! native tool and no pair ahead of it took; see the registry's module docs).

use std::collections::HashMap;
use std::fmt;

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::reconcile::Changes;
use super::{Entry, PairRef, ToolRegistry};
use crate::naming::{Collision, MAX_NAME_LEN, NATIVE_OWNER, is_native};

/// A `BuildHasher` for the registry's maps: xxh3 keyed with a per-map random seed (taken from
/// the standard library's `RandomState`), several times faster than SipHash on short names.
#[derive(Debug, Clone)]
pub(super) struct NameHasher {
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
pub(super) struct NameHash(u64);

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

pub(super) type NameMap<V> = HashMap<Box<str>, V, NameHasher>;

/// An exposed name stored inline in the route table (exposed names are at most 64 bytes), so a
/// lookup compares bytes inside the table instead of following a pointer per probe.
#[derive(Clone, Copy)]
pub(super) struct InlineName {
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

impl ToolRegistry {
    /// Every pair chooses again, from scratch (the prefixing decision changed).
    pub(super) fn rename_all(&mut self, changes: &mut Changes) {
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

    pub(super) fn entry(&self, pair: PairRef) -> &Entry {
        self.servers[pair.server as usize].slots[pair.slot as usize]
            .as_ref()
            .unwrap_or_else(|| unreachable!("pair {pair:?} refers to a live entry"))
    }

    pub(super) fn entry_mut(&mut self, pair: PairRef) -> &mut Entry {
        self.servers[pair.server as usize].slots[pair.slot as usize]
            .as_mut()
            .unwrap_or_else(|| unreachable!("pair {pair:?} refers to a live entry"))
    }

    pub(super) fn bare_first(&self) -> bool {
        !self.naming.prefixes(self.servers.len())
    }

    pub(super) fn candidate(&self, pair: PairRef, k: u32) -> String {
        let server = &self.servers[pair.server as usize].name;
        let tool = &self.entry(pair).tool.name;
        self.naming.candidate(server, tool, self.bare_first(), k)
    }

    /// `a` chooses before `b`: earlier server in config order, then smaller tool name.
    pub(super) fn ahead(&self, a: PairRef, b: PairRef) -> bool {
        (a.server, self.entry(a).tool.name.as_str()) < (b.server, self.entry(b).tool.name.as_str())
    }

    pub(super) fn note_rename(&mut self, pair: PairRef, changes: &mut Changes) {
        let entry = self.entry_mut(pair);
        if entry.fresh || entry.renamed_from.is_some() {
            return;
        }
        entry.renamed_from = Some(entry.exposed.clone());
        changes.touched.push(pair);
    }

    pub(super) fn set_name(&mut self, pair: PairRef, name: Box<str>, rank: u32) {
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
    pub(super) fn claim(&mut self, pair: PairRef, rank: u32, changes: &mut Changes) {
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
    pub(super) fn withdraw(&mut self, pair: PairRef) -> Box<str> {
        let (name, rank) = {
            let entry = self.entry(pair);
            (entry.exposed.clone(), entry.rank)
        };
        self.holders.remove(name.as_bytes());
        self.bumped.remove(&pair);
        self.leave_waiting(pair, 0..rank);
        name
    }

    pub(super) fn leave_waiting(&mut self, pair: PairRef, ranks: std::ops::Range<u32>) {
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
    pub(super) fn hand_over(&mut self, name: Box<str>, changes: &mut Changes) {
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

    pub(super) fn rebuild_collisions(&mut self) {
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
}
