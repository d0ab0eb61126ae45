//! The registry's search index (`tools_mode = "search"`): turned on and off here, kept by
//! every reconcile, and queried with an exposed name ranked first.

use super::{ExposedTool, ToolRegistry, exposed_tool};
use crate::tool_search::ToolIndex;

impl ToolRegistry {
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
}

/// A pair's key in the search index: server (config order) then slot, so key order is how
/// equal scores rank.
pub(super) fn key(server: u32, slot: u32) -> u64 {
    u64::from(server) << 32 | u64::from(slot)
}
