//! The tools a client is served ([`ServedTools`]): native tools first (they win any clash),
//! then the servers' under their exposed names, built once per change of the servers' tools
//! and shared by every request until the next; and the `tools/list` pages every caller shares,
//! kept as JSON text.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;

use rmcp::model::Tool;
use tokio_util::bytes::Bytes;

use super::{handler, native};
use crate::ToolEntry;
use crate::config::PageLimits;
use crate::sync::lock;

/// The tools a client is served: native tools first (they win any clash), then the servers'.
/// Built once per change of the servers' tools and shared by every request until the next.
pub(crate) struct ServedTools {
    /// The registry version the servers' tools were read at.
    pub(super) version: u64,
    /// Native tools, then the servers' tools in rmcp's model under their exposed names (each
    /// held once).
    tools: Vec<Tool>,
    /// Servers' tools a native tool's name hides, each with its place among the servers' tools.
    shadowed: Vec<(usize, Tool)>,
    index: NameIndex,
    /// How many of `tools` (the first) are native.
    native: usize,
    /// `search_tools`, `describe_tools` and `call_tool`: served in search mode only.
    search: Vec<Tool>,
    /// The `tools/list` pages every caller shares, as JSON text, made on first request.
    texts: Mutex<PageTexts>,
}

/// Page texts of one [`ServedTools`]: by era (2026-07-28 and later, then older) and by the
/// page's first item, for the page limits they were made at. Only pages at the cursors roster
/// hands out are kept (`starts`), so there are at most as many as the list has pages.
#[derive(Default)]
struct PageTexts {
    limits: Option<PageLimits>,
    /// Each tool's length as JSON text, measured once (what the typed path measures, so both
    /// cut the same pages).
    lengths: Vec<usize>,
    /// Where each page starts under `limits`.
    starts: Vec<usize>,
    pages: [HashMap<usize, Bytes>; 2],
}

impl PageTexts {
    /// Made ready for `limits`: the pages made at other limits are dropped.
    fn ready(&mut self, tools: &[Tool], limits: PageLimits) {
        if self.lengths.len() != tools.len() {
            self.lengths = tools.iter().map(crate::servers::json_size).collect();
        }
        if self.limits == Some(limits) {
            return;
        }
        self.limits = Some(limits);
        self.pages = Default::default();
        self.starts.clear();
        let mut start = 0;
        while start < tools.len() {
            self.starts.push(start);
            start = limits.end(start, tools.len(), |i| self.lengths[i]);
        }
    }
}

impl ServedTools {
    pub(super) fn build(native: Vec<Tool>, version: u64, entries: Vec<ToolEntry>) -> Self {
        let mut tools = native;
        let native_count = tools.len();
        tools.reserve(entries.len());
        let mut index = NameIndex::with_capacity(native_count + entries.len());
        for at in 0..tools.len() {
            index.insert(&tools, at);
        }
        let mut shadowed = Vec::new();
        for (at, tool) in entries.into_iter().filter_map(to_rmcp).enumerate() {
            if index.get(&tools, &tool.name).is_some() {
                shadowed.push((at, tool));
            } else {
                tools.push(tool);
                index.insert(&tools, tools.len() - 1);
            }
        }
        Self {
            version,
            shadowed,
            tools,
            index,
            native: native_count,
            search: native::search_tools(),
            texts: Mutex::default(),
        }
    }

    /// The page of every tool that `cursor` asks for, as the JSON text of a `tools/list`
    /// result every caller shares (`cacheScope` public), in the shape of the caller's era
    /// (`modern`: 2026-07-28 or later) exactly as rmcp's dispatch would send it.
    pub(crate) fn page_text(
        &self,
        cursor: Option<&str>,
        limits: PageLimits,
        modern: bool,
    ) -> Result<Bytes, rmcp::ErrorData> {
        let len = self.tools.len();
        let start = handler::page_start(len, cursor)?;
        let era = usize::from(!modern);
        let (end, kept, bytes) = {
            let mut texts = lock(&self.texts);
            texts.ready(&self.tools, limits);
            if let Some(text) = texts.pages[era].get(&start) {
                return Ok(text.clone());
            }
            let end = limits.end(start, len, |i| texts.lengths[i]);
            let bytes: usize = texts.lengths[start..end].iter().sum();
            (end, texts.starts.binary_search(&start).is_ok(), bytes)
        };
        let mut result =
            rmcp::model::ListToolsResult::with_all_items(self.tools[start..end].to_vec())
                .with_ttl_ms(0)
                .with_cache_scope(rmcp::model::CacheScope::Public);
        result.next_cursor = handler::next_cursor(end, len);
        let mut result = rmcp::model::ServerResult::ListToolsResult(result);
        if modern {
            result.fill_missing_cache_hints();
        } else {
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
        }
        // Written at once into room for it (the tools, their commas and the members around
        // them): a page's text is kept, and a text grown by doubling leaves its earlier
        // buffers behind in the heap.
        let mut text = Vec::with_capacity(bytes + (end - start) + 256);
        serde_json::to_writer(&mut text, &result)
            .map_err(|e| rmcp::ErrorData::internal_error(format!("tools/list page: {e}"), None))?;
        let text = Bytes::from(text);
        if kept {
            let mut texts = lock(&self.texts);
            if texts.limits == Some(limits) {
                texts.pages[era].insert(start, text.clone());
            }
        }
        Ok(text)
    }

    /// What a client in search mode lists: the native tools, the search tools, then the
    /// servers' tools; each one only if `keep` keeps it (told whether it is roster's own).
    pub(crate) fn searching(&self, mut keep: impl FnMut(&Tool, bool) -> bool) -> Vec<Tool> {
        let (native, servers) = self.tools.split_at(self.native);
        let own = native.iter().chain(&self.search).map(|t| (t, true));
        let theirs = servers.iter().map(|t| (t, false));
        own.chain(theirs)
            .filter(|&(tool, native)| keep(tool, native))
            .map(|(tool, _)| tool.clone())
            .collect()
    }

    /// The servers' tools alone (those a native tool hides too), in their registry order.
    pub(crate) fn servers(&self) -> Vec<&Tool> {
        let mut served = self.tools[self.native..].iter();
        let mut shadowed = self.shadowed.iter().peekable();
        let mut all = Vec::with_capacity(self.tools.len() - self.native + self.shadowed.len());
        loop {
            let next = match shadowed.next_if(|(at, _)| *at == all.len()) {
                Some((_, tool)) => tool,
                None => match served.next() {
                    Some(tool) => tool,
                    None => break,
                },
            };
            all.push(next);
        }
        all
    }

    /// Every tool, in the order `tools/list` pages them.
    pub(crate) fn all(&self) -> &[Tool] {
        &self.tools
    }

    /// Whether `name` is a native tool's.
    pub(crate) fn is_native(&self, name: &str) -> bool {
        self.index
            .get(&self.tools, name)
            .is_some_and(|i| i < self.native)
    }

    /// The tool served under `name` (the search tools too).
    pub(crate) fn get(&self, name: &str) -> Option<&Tool> {
        match self.index.get(&self.tools, name) {
            Some(i) => Some(&self.tools[i]),
            None => self.search.iter().find(|t| t.name == name),
        }
    }
}

/// Where each tool of a list is, by name, without a copy of the name: the table holds
/// positions, and a lookup compares with the listed tool's own name.
struct NameIndex {
    table: hashbrown::HashTable<u32>,
    hasher: std::hash::RandomState,
}

impl NameIndex {
    fn with_capacity(capacity: usize) -> Self {
        NameIndex {
            table: hashbrown::HashTable::with_capacity(capacity),
            hasher: std::hash::RandomState::new(),
        }
    }

    /// Where the tool named `name` is in `tools`.
    fn get(&self, tools: &[Tool], name: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(name);
        let found = self.table.find(hash, |&at| tools[at as usize].name == name);
        found.map(|&at| at as usize)
    }

    /// Indexes `tools[at]`, whose name no tool indexed so far has.
    fn insert(&mut self, tools: &[Tool], at: usize) {
        let hasher = &self.hasher;
        let hash_of = |at: usize| hasher.hash_one(tools[at].name.as_ref() as &str);
        let position = u32::try_from(at).expect("fewer than 2^32 tools");
        self.table
            .insert_unique(hash_of(at), position, |&at| hash_of(at as usize));
    }
}

/// The server's tool definition in rmcp's model under its exposed name. The input schema is
/// shared with the registry's copy, not duplicated; the rest goes through rmcp's own reading.
fn to_rmcp(entry: ToolEntry) -> Option<Tool> {
    let ToolEntry {
        exposed_name,
        mut tool,
        ..
    } = entry;
    let schema = std::mem::take(&mut tool.input_schema);
    tool.name = exposed_name;
    let value = serde_json::to_value(&tool).ok()?;
    match serde_json::from_value::<Tool>(value) {
        Ok(mut served) => {
            served.input_schema = schema;
            Some(served)
        }
        Err(e) => {
            tracing::warn!("tool {:?} cannot be served: {e}", tool.name);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn entry(name: &str) -> ToolEntry {
        ToolEntry {
            exposed_name: name.to_owned(),
            server: "s".to_owned(),
            tool: roster_core::Tool::new(name),
        }
    }

    fn native(name: &str) -> Tool {
        Tool::new(
            name.to_owned(),
            "",
            Arc::new(rmcp::model::JsonObject::new()),
        )
    }

    /// Every tool is held once; a server's tool a native one hides is still among the
    /// servers' tools, in its place, and never served.
    #[test]
    fn served_tools_hold_each_tool_once_and_keep_hidden_ones_in_place() {
        let served = ServedTools::build(
            vec![native("refresh_tools")],
            1,
            vec![entry("a"), entry("refresh_tools"), entry("b"), entry("c")],
        );
        let names =
            |tools: &[&Tool]| -> Vec<String> { tools.iter().map(|t| t.name.to_string()).collect() };
        let all: Vec<&Tool> = served.all().iter().collect();
        assert_eq!(names(&all), ["refresh_tools", "a", "b", "c"]);
        assert_eq!(names(&served.servers()), ["a", "refresh_tools", "b", "c"]);
        assert!(served.is_native("refresh_tools"));
        let last = ServedTools::build(vec![native("c")], 1, vec![entry("a"), entry("c")]);
        assert_eq!(names(&last.servers()), ["a", "c"]);
    }
}
