//! Ranked search over live tools: the index behind `tools_mode = "search"`.
//!
//! A [`ToolIndex`] holds one document per tool, keyed by a `u64` its owner chooses (the
//! registry uses its (server, slot) pair, which also orders ties: config order of servers, then
//! the server's own order). Documents are added, replaced and removed one at a time as deltas
//! arrive — nothing is rebuilt — so the figures BM25 needs (document frequencies, average field
//! lengths) are kept as running totals and a term's score is computed at query time.
//!
//! Ranking is BM25F over four fields: the tool's name with its server's name (boost 3), title
//! (2), description (1) and the input schema's property names and descriptions (0.5), analysed
//! as skills are (see `text`). A query's *concepts* are its own words, less the words of a
//! request that name no tool ("what", "my", "please"); each is searched as itself (weight 1) and
//! as its related words (`folder` for `directory`, weight 0.7), so a person's wording meets a
//! tool's. A tool's score is then scaled by the share of the query's concepts it speaks to, so a
//! tool that answers the whole request ranks above one that matches a single word strongly.
//! The weights were tuned on `bench/tool-search`'s labelled set (its RESULTS.md says how).
//!
//! Tool text comes from servers, so everything here is bounded by what the index holds: terms
//! whose last document leaves are forgotten, each field reads at most [`FIELD_BYTES`] bytes and
//! the schema at most [`SCHEMA_PROPERTIES`] properties, and maps use a keyed hasher.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::text::{analyze, is_query_stop_word, related};
use crate::tool::Tool;

const FIELDS: usize = 4;
const NAME: usize = 0;
const TITLE: usize = 1;
const DESCRIPTION: usize = 2;
const SCHEMA: usize = 3;
const BOOST: [f32; FIELDS] = [3.0, 2.0, 1.0, 0.5];
/// Length normalisation per field: names and titles barely normalised.
const B: [f32; FIELDS] = [0.3, 0.3, 0.75, 0.75];
const K1: f32 = 1.2;
/// Weight of a word related to a query's word, against 1 for the word itself.
const RELATED_WEIGHT: f32 = 0.7;
/// How strongly the share of a query's concepts a tool covers scales its score.
const COVERAGE_POWER: f32 = 1.0;
/// Bytes of one field analysed (a longer description is cut at a character boundary).
pub const FIELD_BYTES: usize = 4096;
/// Input-schema properties analysed per tool (top level and one level down).
pub const SCHEMA_PROPERTIES: usize = 64;

/// One result of [`ToolIndex::search`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolSearchHit {
    /// The document's key.
    pub key: u64,
    /// Relevance: higher is better; comparable within one query only.
    pub score: f32,
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: [u16; FIELDS],
}

#[derive(Debug)]
struct Doc {
    key: u64,
    length: [u32; FIELDS],
    /// The term ids this document has a posting under, to take them out again.
    terms: Box<[u32]>,
}

/// An incrementally maintained BM25F index of tools.
#[derive(Debug)]
pub struct ToolIndex {
    terms: HashMap<Box<str>, u32>,
    /// Per term id: its text (empty while the id is free) and postings.
    term_text: Vec<Box<str>>,
    postings: Vec<Vec<Posting>>,
    free_terms: Vec<u32>,
    docs: Vec<Option<Doc>>,
    free_docs: Vec<u32>,
    by_key: HashMap<u64, u32>,
    total_length: [u64; FIELDS],
    /// Queries are widened with related words (see [`ToolIndex::set_related_words`]).
    related: bool,
}

impl Default for ToolIndex {
    fn default() -> Self {
        ToolIndex {
            terms: HashMap::new(),
            term_text: Vec::new(),
            postings: Vec::new(),
            free_terms: Vec::new(),
            docs: Vec::new(),
            free_docs: Vec::new(),
            by_key: HashMap::new(),
            total_length: [0; FIELDS],
            related: true,
        }
    }
}

impl ToolIndex {
    /// An empty index.
    pub fn new() -> Self {
        ToolIndex::default()
    }

    /// Number of tools indexed.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Number of distinct terms held (bounded by the indexed tools' text).
    pub fn term_count(&self) -> usize {
        self.terms.len()
    }

    /// Indexes `tool` of `server` under `key`, replacing what `key` had.
    pub fn upsert(&mut self, key: u64, server: &str, tool: &Tool) {
        self.remove(key);
        let mut counts: HashMap<u32, [u16; FIELDS]> = HashMap::new();
        let mut length = [0u32; FIELDS];
        let mut buffer = String::new();
        let mut add = |index: &mut ToolIndex, field: usize, text: &str| {
            analyze(cut(text), &mut buffer, |term| {
                let id = index.term_id(term);
                let tf = counts.entry(id).or_insert([0; FIELDS]);
                tf[field] = tf[field].saturating_add(1);
                length[field] += 1;
            });
        };
        add(self, NAME, server);
        add(self, NAME, &tool.name);
        if let Some(title) = &tool.title {
            add(self, TITLE, title);
        }
        if let Some(description) = &tool.description {
            add(self, DESCRIPTION, description);
        }
        let mut seen = 0;
        schema_text(&tool.input_schema, 0, &mut seen, &mut |text| {
            add(self, SCHEMA, text)
        });

        let doc = match self.free_docs.pop() {
            Some(doc) => doc,
            None => {
                self.docs.push(None);
                (self.docs.len() - 1) as u32
            }
        };
        let mut terms: Vec<u32> = Vec::with_capacity(counts.len());
        for (term, tf) in counts {
            self.postings[term as usize].push(Posting { doc, tf });
            terms.push(term);
        }
        for (total, field) in self.total_length.iter_mut().zip(length) {
            *total += u64::from(field);
        }
        self.docs[doc as usize] = Some(Doc {
            key,
            length,
            terms: terms.into_boxed_slice(),
        });
        self.by_key.insert(key, doc);
    }

    /// Takes `key`'s tool out of the index (nothing when it has none).
    pub fn remove(&mut self, key: u64) {
        let Some(doc) = self.by_key.remove(&key) else {
            return;
        };
        let Some(old) = self.docs[doc as usize].take() else {
            return;
        };
        for (total, field) in self.total_length.iter_mut().zip(old.length) {
            *total -= u64::from(field);
        }
        for &term in old.terms.iter() {
            let list = &mut self.postings[term as usize];
            if let Some(at) = list.iter().position(|p| p.doc == doc) {
                list.swap_remove(at);
            }
            if list.is_empty() {
                let text = std::mem::take(&mut self.term_text[term as usize]);
                self.terms.remove(&text);
                list.shrink_to_fit();
                self.free_terms.push(term);
            }
        }
        self.free_docs.push(doc);
    }

    fn term_id(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.terms.get(term) {
            return id;
        }
        let id = match self.free_terms.pop() {
            Some(id) => {
                self.term_text[id as usize] = term.into();
                id
            }
            None => {
                self.term_text.push(term.into());
                self.postings.push(Vec::new());
                (self.term_text.len() - 1) as u32
            }
        };
        self.terms.insert(term.into(), id);
        id
    }

    /// The best `limit` tools for `query` among those `accept` lets through, best first; equal
    /// scores in key order. Only tools sharing a term (or a related term) with the query are
    /// candidates, so `accept` is asked about those only.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        mut accept: impl FnMut(u64) -> bool,
    ) -> Vec<ToolSearchHit> {
        let n = self.by_key.len();
        if limit == 0 || n == 0 {
            return Vec::new();
        }
        // The query's concepts (its own distinct words, at most 64) and the terms that stand
        // for them with their weights: the word itself 1, a related word 0.5. A term serves
        // every concept it stands for.
        let mut concepts: Vec<String> = Vec::new();
        analyze(query, &mut String::new(), |term| {
            if concepts.len() < 64
                && !is_query_stop_word(term)
                && !concepts.iter().any(|c| c == term)
            {
                concepts.push(term.to_owned());
            }
        });
        let mut weighted: Vec<(u32, f32, u64)> = Vec::new();
        for (at, concept) in concepts.iter().enumerate() {
            self.weigh(concept, 1.0, 1 << at, &mut weighted);
        }
        if self.related {
            for (at, concept) in concepts.iter().enumerate() {
                for other in related(concept) {
                    self.weigh(other, RELATED_WEIGHT, 1 << at, &mut weighted);
                }
            }
        }
        // Concepts no tool has a word for (a name, a number) say nothing either way.
        let known = weighted.iter().fold(0u64, |mask, w| mask | w.2);
        let known_count = known.count_ones() as f32;
        let average: [f32; FIELDS] =
            std::array::from_fn(|f| (self.total_length[f] as f32 / n as f32).max(1.0));
        let mut scores: HashMap<u32, (f32, u64)> = HashMap::new();
        for &(term, weight, serves) in &weighted {
            let list = &self.postings[term as usize];
            let df = list.len() as f32;
            let idf = (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln();
            for posting in list {
                let Some(doc) = &self.docs[posting.doc as usize] else {
                    continue;
                };
                let tf: f32 = (0..FIELDS)
                    .filter(|&f| posting.tf[f] > 0)
                    .map(|f| {
                        let norm = 1.0 - B[f] + B[f] * doc.length[f] as f32 / average[f];
                        BOOST[f] * f32::from(posting.tf[f]) / norm
                    })
                    .sum();
                let entry = scores.entry(posting.doc).or_insert((0.0, 0));
                entry.0 += weight * idf * tf / (K1 + tf);
                entry.1 |= serves;
            }
        }
        // A tool that speaks to more of the query's concepts ranks above one that matches one
        // of them strongly: the score is scaled by the share of known concepts it covers.
        let scores = scores.into_iter().map(|(doc, (score, covered))| {
            let coverage = covered.count_ones() as f32 / known_count.max(1.0);
            (doc, score * coverage.powf(COVERAGE_POWER))
        });
        let mut ranked: Vec<ToolSearchHit> = scores
            .into_iter()
            .filter_map(|(doc, score)| {
                let key = self.docs[doc as usize].as_ref()?.key;
                Some(ToolSearchHit { key, score })
            })
            .collect();
        ranked.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
        ranked
            .into_iter()
            .filter(|hit| accept(hit.key))
            .take(limit)
            .collect()
    }

    /// Adds `term` to a query at `weight`, serving the concepts `serves`; a term already there
    /// keeps its weight and serves these concepts too. Unknown terms are left out.
    fn weigh(&self, term: &str, weight: f32, serves: u64, weighted: &mut Vec<(u32, f32, u64)>) {
        let Some(&id) = self.terms.get(term) else {
            return;
        };
        match weighted.iter_mut().find(|w| w.0 == id) {
            Some(known) => known.2 |= serves,
            None => weighted.push((id, weight, serves)),
        }
    }

    /// Whether queries are widened with related words (on by default); off, a query meets only
    /// its own words (what the bench compares against).
    pub fn set_related_words(&mut self, on: bool) {
        self.related = on;
    }
}

/// `text` cut to at most [`FIELD_BYTES`] bytes, at a character boundary.
fn cut(text: &str) -> &str {
    if text.len() <= FIELD_BYTES {
        return text;
    }
    let mut end = FIELD_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Calls `emit` with the names and descriptions of `schema`'s properties, top level and one
/// level down, at most [`SCHEMA_PROPERTIES`] in all.
fn schema_text(
    schema: &Map<String, Value>,
    depth: usize,
    seen: &mut usize,
    emit: &mut impl FnMut(&str),
) {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return;
    };
    for (name, property) in properties {
        if *seen == SCHEMA_PROPERTIES {
            return;
        }
        *seen += 1;
        emit(name);
        let Value::Object(property) = property else {
            continue;
        };
        if let Some(Value::String(description)) = property.get("description") {
            emit(description);
        }
        if depth == 0 {
            schema_text(property, 1, seen, emit);
            if let Some(Value::Object(items)) = property.get("items") {
                schema_text(items, 1, seen, emit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str, description: &str) -> Tool {
        Tool::new(name).with_description(description)
    }

    fn keys(hits: &[ToolSearchHit]) -> Vec<u64> {
        hits.iter().map(|h| h.key).collect()
    }

    fn index() -> ToolIndex {
        let mut index = ToolIndex::new();
        index.upsert(
            1,
            "fs",
            &tool("read_text_file", "Read a file's contents as text."),
        );
        index.upsert(
            2,
            "fs",
            &tool("create_directory", "Create a new directory."),
        );
        index.upsert(3, "git", &tool("git_log", "Show the commit logs."));
        index
    }

    #[test]
    fn a_query_finds_the_tool_that_says_it() {
        let hits = index().search("read a text file", 5, |_| true);
        assert_eq!(hits.first().map(|h| h.key), Some(1));
    }

    #[test]
    fn related_words_meet_a_tools_wording() {
        let hits = index().search("make a folder", 5, |_| true);
        assert_eq!(hits.first().map(|h| h.key), Some(2));
        // The word itself outranks its relatives: "directory" beats "folder" for key 2's score.
        let own = index().search("directory", 1, |_| true)[0].score;
        let relative = index().search("folder", 1, |_| true)[0].score;
        assert!(own > relative, "{own} vs {relative}");
    }

    #[test]
    fn schema_properties_are_searched() {
        let mut index = index();
        let schema = json!({"type": "object", "properties": {
            "timezone": {"type": "string", "description": "IANA zone name"}}});
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        index.upsert(
            4,
            "time",
            &tool("now", "Current moment.").with_input_schema(schema),
        );
        assert_eq!(keys(&index.search("IANA", 5, |_| true)), [4]);
    }

    #[test]
    fn a_removed_tool_is_never_found_and_its_terms_are_forgotten() {
        let mut index = index();
        let terms = index.term_count();
        index.upsert(9, "x", &tool("zebra_unique", "Quagga."));
        assert!(index.term_count() > terms);
        index.remove(9);
        assert!(index.search("zebra quagga", 5, |_| true).is_empty());
        assert_eq!(index.term_count(), terms);
        assert_eq!(index.len(), 3);
    }

    #[test]
    fn an_upsert_replaces_the_old_text() {
        let mut index = index();
        index.upsert(9, "x", &tool("t", "alpha words"));
        index.upsert(9, "x", &tool("t", "beta words"));
        assert!(index.search("alpha", 5, |_| true).is_empty());
        assert_eq!(keys(&index.search("beta", 5, |_| true)), [9]);
        assert_eq!(index.len(), 4);
    }

    #[test]
    fn ties_rank_in_key_order_and_accept_filters() {
        let mut index = ToolIndex::new();
        for key in [7, 3, 5] {
            index.upsert(key, "s", &tool("same", "identical words"));
        }
        assert_eq!(keys(&index.search("identical", 5, |_| true)), [3, 5, 7]);
        assert_eq!(keys(&index.search("identical", 5, |k| k != 3)), [5, 7]);
        assert_eq!(keys(&index.search("identical", 1, |_| true)), [3]);
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        let mut index = ToolIndex::new();
        let long = format!("{} needle", "é".repeat(FIELD_BYTES));
        index.upsert(1, "s", &tool("t", &long));
        assert!(index.search("needle", 5, |_| true).is_empty());
    }

    #[test]
    fn a_tool_speaking_to_the_whole_request_beats_one_strong_word() {
        let mut index = ToolIndex::new();
        index.upsert(1, "s", &tool("folder", "Folder."));
        index.upsert(
            2,
            "s",
            &tool(
                "transfer",
                "Copies each file into another folder, keeping its size, owner and group.",
            ),
        );
        for key in 3..6 {
            index.upsert(key, "s", &tool("other", "A file elsewhere."));
        }
        let hits = index.search("copy files into a folder", 5, |_| true);
        assert_eq!(keys(&hits)[..2], [2, 1], "{hits:?}");
    }

    #[test]
    fn words_of_a_request_that_name_no_tool_are_left_out() {
        let mut index = index();
        // A tool that does use those words: a query keeping them would find it.
        index.upsert(8, "s", &tool("faq", "What my team asks, please."));
        let plain = index.search("commit logs", 5, |_| true);
        let asked = index.search("what are my commit logs, please", 5, |_| true);
        assert_eq!(plain, asked);
    }
}
