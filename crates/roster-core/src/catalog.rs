//! The skill catalog: visibility, listing with filters and pagination, and ranked search.
//!
//! Visibility: a skill with a `visibility` list is seen only by a caller holding one of those
//! subscriptions. A skill the caller cannot see is answered exactly as one that does not exist
//! ([`SkillError::SkillNotFound`], same message), and list entries say nothing about
//! subscriptions, so nothing leaks.
//!
//! Search is BM25F over four fields, boosted name 4, tags 3, description 2, content 1, with
//! lower-casing, a small stop-word list and light suffix stemming (plurals, `-ing`, `-ed`, a
//! final `e`) applied to documents and queries alike. A query equal to a skill's name or id
//! (case-insensitive, spaces read as `-`) ranks that skill first. Scores of a term in a document
//! do not depend on the query, so they are computed once at build time; a query only adds up
//! the postings of its terms. Equal scores rank in load order.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use serde_json::Value;

use crate::flow::{FlowTemplates, ResolvedStep};
use crate::skills::{Availability, LoadReport, Skill, SkillError, SkillKind, SkillRegistry};
use crate::text::analyze;

/// The subscriptions a caller holds (from its bearer token, or the config default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscriptions(BTreeSet<String>);

impl Subscriptions {
    /// No subscriptions: only public skills are visible.
    pub fn none() -> Self {
        Subscriptions::default()
    }

    /// Whether `subscription` is held.
    pub fn contains(&self, subscription: &str) -> bool {
        self.0.contains(subscription)
    }
}

impl<S: Into<String>> FromIterator<S> for Subscriptions {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        Subscriptions(iter.into_iter().map(Into::into).collect())
    }
}

/// Which skills [`Catalog::list`] returns, and which page of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListFilter {
    /// Only skills of this kind.
    pub kind: Option<SkillKind>,
    /// Only skills carrying every one of these tags (case-insensitive).
    pub tags: Vec<String>,
    /// Continue after this cursor (a page's [`SkillPage::next_cursor`]).
    pub cursor: Option<String>,
    /// At most this many entries (at least 1 is returned when any match).
    pub limit: usize,
}

impl Default for ListFilter {
    fn default() -> Self {
        ListFilter {
            kind: None,
            tags: Vec::new(),
            cursor: None,
            limit: 50,
        }
    }
}

/// A skill as list and search show it: nothing about subscriptions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkillEntry {
    /// Namespaced id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Kind.
    pub kind: SkillKind,
    /// Tags.
    pub tags: Vec<String>,
    /// Availability after the last refresh.
    pub availability: Availability,
}

impl SkillEntry {
    fn new(skill: &Skill, availability: &Availability) -> Self {
        SkillEntry {
            id: skill.id.clone(),
            name: skill.name.clone(),
            description: skill.description.clone(),
            kind: skill.kind,
            tags: skill.tags.clone(),
            availability: availability.clone(),
        }
    }
}

/// One page of [`Catalog::list`], ordered by id.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkillPage {
    /// The entries.
    pub entries: Vec<SkillEntry>,
    /// Pass as [`ListFilter::cursor`] for the next page; `None` on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    /// The skill.
    #[serde(flatten)]
    pub entry: SkillEntry,
    /// Its relevance (higher is better; comparable within one query only).
    pub score: f32,
}

/// A whole skill as `get_skill` shows it, with its availability.
#[derive(Debug, Clone, Serialize)]
pub struct SkillDetail<'a> {
    /// The skill (its `visibility` is never serialized).
    #[serde(flatten)]
    pub skill: &'a Skill,
    /// Availability after the last refresh.
    pub availability: &'a Availability,
}

/// The read-only catalog: the skill registry, compiled flow templates and the search index.
#[derive(Debug)]
pub struct Catalog {
    registry: SkillRegistry,
    flows: FlowTemplates,
    index: SearchIndex,
    /// Load-order positions sorted by id, for listing.
    by_id: Vec<u32>,
}

impl Catalog {
    /// A catalog of `skills` with their compiled `flows` (as [`crate::skills::load`] makes them).
    pub fn new(skills: Vec<Skill>, flows: FlowTemplates) -> Self {
        let registry = SkillRegistry::new(skills);
        let index = SearchIndex::build(registry.iter().map(|(skill, _)| skill));
        let mut order: Vec<(&str, u32)> = registry
            .iter()
            .enumerate()
            .map(|(at, (skill, _))| (skill.id.as_str(), at as u32))
            .collect();
        // Stores hand sources over ordered by directory; sort only when they were not.
        if !order.is_sorted() {
            order.sort_unstable();
        }
        let by_id = order.into_iter().map(|(_, at)| at).collect();
        Catalog {
            registry,
            flows,
            index,
            by_id,
        }
    }

    /// A catalog of the skills a load report holds (its invalid sources are the caller's to
    /// report).
    pub fn from_report(report: LoadReport) -> Self {
        Catalog::new(report.skills, report.flows)
    }

    /// The skill registry (availability after refresh).
    pub fn registry(&self) -> &SkillRegistry {
        &self.registry
    }

    /// The skill registry, to refresh skills or set its tool lookup.
    pub fn registry_mut(&mut self) -> &mut SkillRegistry {
        &mut self.registry
    }

    /// How many skills the catalog holds (visible or not).
    pub fn len(&self) -> usize {
        self.registry.len()
    }

    /// Whether the catalog is empty.
    pub fn is_empty(&self) -> bool {
        self.registry.is_empty()
    }

    fn visible(
        &self,
        subscriptions: &Subscriptions,
        id: &str,
    ) -> Result<(&Skill, &Availability), SkillError> {
        self.registry
            .position(id)
            .map(|at| self.registry.at(at))
            .filter(|(skill, _)| skill.is_visible_to(subscriptions))
            .ok_or_else(|| SkillError::SkillNotFound { id: id.to_owned() })
    }

    /// The whole skill `id`, if the caller may see it.
    pub fn get(
        &self,
        subscriptions: &Subscriptions,
        id: &str,
    ) -> Result<SkillDetail<'_>, SkillError> {
        let (skill, availability) = self.visible(subscriptions, id)?;
        Ok(SkillDetail {
            skill,
            availability,
        })
    }

    /// The visible skills matching `filter`, ordered by id, one page at a time.
    pub fn list(&self, subscriptions: &Subscriptions, filter: &ListFilter) -> SkillPage {
        let start = match &filter.cursor {
            Some(cursor) => self.by_id.partition_point(|&at| {
                self.registry.at(at as usize).0.id.as_str() <= cursor.as_str()
            }),
            None => 0,
        };
        let limit = filter.limit.max(1);
        let mut matching = self.by_id[start..]
            .iter()
            .map(|&at| self.registry.at(at as usize))
            .filter(|(skill, _)| {
                skill.is_visible_to(subscriptions)
                    && filter.kind.is_none_or(|kind| kind == skill.kind)
                    && filter
                        .tags
                        .iter()
                        .all(|tag| skill.tags.iter().any(|t| t.eq_ignore_ascii_case(tag)))
            });
        let entries: Vec<SkillEntry> = matching
            .by_ref()
            .take(limit)
            .map(|(skill, availability)| SkillEntry::new(skill, availability))
            .collect();
        let next_cursor = match (entries.last(), matching.next()) {
            (Some(last), Some(_)) => Some(last.id.clone()),
            _ => None,
        };
        SkillPage {
            entries,
            next_cursor,
        }
    }

    /// The visible skills most relevant to `query`, best first, at most `limit`.
    pub fn search(
        &self,
        subscriptions: &Subscriptions,
        query: &str,
        limit: usize,
    ) -> Vec<SearchHit> {
        self.index
            .search(query, limit, |at| {
                self.registry.at(at).0.is_visible_to(subscriptions)
            })
            .into_iter()
            .map(|(at, score)| {
                let (skill, availability) = self.registry.at(at);
                SearchHit {
                    entry: SkillEntry::new(skill, availability),
                    score,
                }
            })
            .collect()
    }

    /// Resolves flow template `id` with `params` (see [`crate::flow::FlowTemplate::resolve`]),
    /// if the caller may see it and its last refresh did not fail.
    pub fn resolve_flow(
        &self,
        subscriptions: &Subscriptions,
        id: &str,
        params: &Value,
    ) -> Result<Vec<ResolvedStep>, SkillError> {
        let (skill, availability) = self.visible(subscriptions, id)?;
        if skill.kind != SkillKind::FlowTemplate {
            return Err(SkillError::NotAFlowTemplate { id: id.to_owned() });
        }
        if let Availability::Unavailable { reason } = availability {
            return Err(SkillError::SkillUnavailable {
                id: id.to_owned(),
                reason: reason.clone(),
            });
        }
        self.flows.resolve(id, params)
    }
}

const FIELDS: usize = 4;
const NAME: usize = 0;
const TAGS: usize = 1;
const DESCRIPTION: usize = 2;
const CONTENT: usize = 3;
const BOOST: [f32; FIELDS] = [4.0, 3.0, 2.0, 1.0];
/// Length normalisation per field: short fields (name, tags) barely normalised.
const B: [f32; FIELDS] = [0.3, 0.3, 0.75, 0.75];
const K1: f32 = 1.2;

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    impact: f32,
}

type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<TermHasher>>;

/// One-shot xxh3 per `write`: terms are short, and a streaming hasher's setup would cost more
/// than hashing them. Skill text is the operator's own files, so flooding is not a concern.
#[derive(Default)]
struct TermHasher(u64);

impl std::hash::Hasher for TermHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    fn write_u8(&mut self, byte: u8) {
        self.0 = self.0.rotate_left(8) ^ u64::from(byte);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// An inverted index with precomputed BM25F impacts.
#[derive(Debug, Default)]
struct SearchIndex {
    terms: FastMap<Box<str>, u32>,
    /// Per term, in document order.
    postings: Vec<Box<[Posting]>>,
    /// Lower-cased names and ids, for the exact-name rule.
    exact: FastMap<Box<str>, Vec<u32>>,
    /// Per document: visible to everyone. Kept here, dense, so ranking does not touch the
    /// skills themselves for the common case.
    public: Vec<bool>,
    docs: usize,
}

/// A candidate in ranking order: higher score first, then earlier document.
#[derive(Debug, Clone, Copy)]
struct Ranked {
    score: f32,
    doc: u32,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    /// Greater is better.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.doc.cmp(&self.doc))
    }
}

thread_local! {
    /// Per-thread score accumulator, sized to the index, reused across queries.
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

impl SearchIndex {
    fn build<'a>(skills: impl Iterator<Item = &'a Skill>) -> Self {
        let mut index = SearchIndex::default();
        // Raw per-field term frequencies first; impacts need average field lengths and
        // document frequencies, known only at the end.
        let mut raw: Vec<Vec<(u32, [u16; FIELDS])>> = Vec::new();
        let mut lengths: Vec<[u32; FIELDS]> = Vec::new();
        // Per term: the last document it was seen in, and where in `doc_terms` it sits.
        let mut last_doc: Vec<u32> = Vec::new();
        let mut slot: Vec<u32> = Vec::new();
        let mut doc_terms: Vec<(u32, [u16; FIELDS])> = Vec::new();
        let mut buffer = String::new();
        for (doc, skill) in skills.enumerate() {
            let doc = doc as u32;
            doc_terms.clear();
            let mut length = [0u32; FIELDS];
            let mut add = |field: usize, text: &str| {
                analyze(text, &mut buffer, |term| {
                    let id = match index.terms.get(term) {
                        Some(&id) => id,
                        None => {
                            let id = index.terms.len() as u32;
                            index.terms.insert(term.into(), id);
                            raw.push(Vec::new());
                            last_doc.push(u32::MAX);
                            slot.push(0);
                            id
                        }
                    };
                    let t = id as usize;
                    if last_doc[t] != doc {
                        last_doc[t] = doc;
                        slot[t] = doc_terms.len() as u32;
                        doc_terms.push((id, [0; FIELDS]));
                    }
                    let tf = &mut doc_terms[slot[t] as usize].1;
                    tf[field] = tf[field].saturating_add(1);
                    length[field] += 1;
                });
            };
            add(NAME, &skill.name);
            for tag in &skill.tags {
                add(TAGS, tag);
            }
            if let Some((namespace, _)) = skill.id.rsplit_once('/') {
                add(TAGS, namespace);
            }
            add(DESCRIPTION, &skill.description);
            add(CONTENT, &skill.content);
            for &(term, tf) in &doc_terms {
                raw[term as usize].push((doc, tf));
            }
            lengths.push(length);
            index.public.push(skill.visibility.is_empty());
            index
                .exact
                .entry(skill.name.to_lowercase().into())
                .or_default()
                .push(doc);
            if skill.id != skill.name {
                index
                    .exact
                    .entry(skill.id.to_lowercase().into())
                    .or_default()
                    .push(doc);
            }
        }
        index.docs = lengths.len();
        let n = index.docs.max(1) as f32;
        let mut average = [0f32; FIELDS];
        for length in &lengths {
            for field in 0..FIELDS {
                average[field] += length[field] as f32 / n;
            }
        }
        // Documents were visited in order, so every list is already in document order.
        index.postings = raw
            .into_iter()
            .map(|list| {
                let df = list.len() as f32;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                list.into_iter()
                    .map(|(doc, tf)| {
                        let length = &lengths[doc as usize];
                        let weighted: f32 = (0..FIELDS)
                            .filter(|&f| tf[f] > 0)
                            .map(|f| {
                                let norm =
                                    1.0 - B[f] + B[f] * length[f] as f32 / average[f].max(1.0);
                                BOOST[f] * tf[f] as f32 / norm
                            })
                            .sum();
                        Posting {
                            doc,
                            impact: idf * weighted / (K1 + weighted),
                        }
                    })
                    .collect()
            })
            .collect();
        index
    }

    /// Best `limit` documents for `query` among those `visible`, as (position, score).
    /// `visible` is asked only about documents that are not public.
    fn search(
        &self,
        query: &str,
        limit: usize,
        visible: impl Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        if limit == 0 || self.docs == 0 {
            return Vec::new();
        }
        let can_see = |doc: u32| self.public[doc as usize] || visible(doc as usize);
        let mut terms = Vec::new();
        let mut buffer = String::new();
        analyze(query, &mut buffer, |term| {
            if let Some(&t) = self.terms.get(term)
                && !terms.contains(&t)
            {
                terms.push(t);
            }
        });
        let normalized = query.trim().to_lowercase();
        let exact: &[u32] = self
            .exact
            .get(normalized.as_str())
            .or_else(|| {
                self.exact.get(
                    normalized
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join("-")
                        .as_str(),
                )
            })
            .map_or(&[], Vec::as_slice);

        SCORES.with_borrow_mut(|scores| {
            if scores.len() < self.docs {
                scores.resize(self.docs, 0.0);
            }
            let mut touched: Vec<u32> = Vec::new();
            for &term in &terms {
                for posting in self.postings[term as usize].iter() {
                    let score = &mut scores[posting.doc as usize];
                    if *score == 0.0 {
                        touched.push(posting.doc);
                    }
                    *score += posting.impact;
                }
            }
            // The exact-name tier first, then the best of the rest through a bounded min-heap.
            let mut first: Vec<Ranked> = exact
                .iter()
                .filter(|&&doc| can_see(doc))
                .map(|&doc| Ranked {
                    score: scores[doc as usize],
                    doc,
                })
                .collect();
            first.sort_unstable_by(|a, b| b.cmp(a));
            first.truncate(limit);
            let room = limit - first.len();
            let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<Ranked>> =
                std::collections::BinaryHeap::with_capacity(room + 1);
            for &doc in &touched {
                let candidate = Ranked {
                    score: scores[doc as usize],
                    doc,
                };
                scores[doc as usize] = 0.0;
                if room == 0
                    || heap.len() == room && heap.peek().is_some_and(|worst| candidate <= worst.0)
                {
                    continue;
                }
                if !can_see(doc) || exact.contains(&doc) {
                    continue;
                }
                heap.push(std::cmp::Reverse(candidate));
                if heap.len() > room {
                    heap.pop();
                }
            }
            let rest = heap.into_sorted_vec().into_iter().map(|r| r.0);
            first
                .into_iter()
                .chain(rest)
                .map(|r| (r.doc as usize, r.score))
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::skills::{SkillSource, load};

    fn source(id: &str, extra: &str, body: &str) -> SkillSource {
        let name = id.rsplit('/').next().unwrap_or(id);
        SkillSource::new(id, format!("---\nname: {name}\n{extra}\n---\n{body}"))
    }

    fn catalog() -> Catalog {
        let report = load([
            source(
                "notes/notes-digest",
                "description: Summarise every note into a digest.\ntags: [notes, summary]",
                "Read all notes and write a digest note.",
            ),
            source(
                "notes/write-note",
                "description: Write one note.\ntags: [notes]",
                "Calls the notes tool.",
            ),
            source(
                "text/word-stats",
                "description: Count words in a text.\ntags: [text]",
                "Counting words, sentences and notes mentioned in passing.",
            ),
            source(
                "pro/release-checklist",
                "description: Steps for a release.\ntags: [release]\nvisibility: [pro]",
                "Checklists for releasing.",
            ),
            source(
                "team/secret",
                "description: Internal.\nvisibility: [team]",
                "internal release notes",
            ),
            source(
                "demo/echo-twice",
                "description: Echo a text twice.\nkind: flow_template\ntags: [demo]\nparameters: {type: object, properties: {text: {type: string}}, required: [text]}\nsteps:\n  - tool: demo__echo\n    arguments: {text: \"{text}\"}\n  - tool: demo__echo\n    arguments: {text: \"{text} again\"}",
                "",
            ),
        ]);
        assert!(report.invalid.is_empty(), "{:?}", report.invalid);
        Catalog::from_report(report)
    }

    fn ids(hits: &[SearchHit]) -> Vec<&str> {
        hits.iter().map(|h| h.entry.id.as_str()).collect()
    }

    #[test]
    fn an_exact_name_query_ranks_that_skill_first() {
        let catalog = catalog();
        let everyone = Subscriptions::none();
        for name in [
            "notes-digest",
            "write-note",
            "word-stats",
            "echo-twice",
            "WRITE-NOTE",
            "write note",
            "notes/write-note",
        ] {
            let hits = catalog.search(&everyone, name, 10);
            let expected = catalog.registry().iter().find(|(s, _)| {
                let n = name.to_lowercase().replace(' ', "-");
                s.name == n || s.id == n
            });
            assert_eq!(
                hits.first().map(|h| h.entry.id.as_str()),
                expected.map(|(s, _)| s.id.as_str()),
                "{name}"
            );
        }
    }

    #[test]
    fn search_weights_name_and_tags_above_content() {
        let catalog = catalog();
        let hits = catalog.search(&Subscriptions::none(), "note", 10);
        // word-stats mentions notes only in its body; both notes skills name it or tag it.
        let ranked = ids(&hits);
        assert_eq!(ranked.len(), 3, "{ranked:?}");
        assert_eq!(ranked[2], "text/word-stats", "{ranked:?}");
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    }

    #[test]
    fn search_is_case_and_plural_tolerant() {
        let catalog = catalog();
        let everyone = Subscriptions::none();
        assert_eq!(
            ids(&catalog.search(&everyone, "DIGESTS", 5)),
            vec!["notes/notes-digest"]
        );
        assert_eq!(
            ids(&catalog.search(&everyone, "counting", 5)),
            vec!["text/word-stats"]
        );
        assert!(catalog.search(&everyone, "zebra", 5).is_empty());
        assert!(catalog.search(&everyone, "the of", 5).is_empty());
        assert_eq!(catalog.search(&everyone, "note", 1).len(), 1);
    }

    #[test]
    fn search_hides_what_the_caller_cannot_see() {
        let catalog = catalog();
        assert_eq!(
            ids(&catalog.search(&Subscriptions::none(), "release", 10)),
            Vec::<&str>::new()
        );
        let pro: Subscriptions = ["pro"].into_iter().collect();
        assert_eq!(
            ids(&catalog.search(&pro, "release", 10)),
            vec!["pro/release-checklist"]
        );
        assert!(
            catalog
                .search(&Subscriptions::none(), "release-checklist", 10)
                .is_empty(),
            "exact names obey visibility too"
        );
    }

    #[test]
    fn a_hidden_skill_and_an_unknown_one_give_byte_identical_errors() {
        let catalog = catalog();
        let everyone = Subscriptions::none();
        // Same id asked of a catalog where it exists hidden, and of one where it does not exist.
        let hidden = catalog
            .get(&everyone, "pro/release-checklist")
            .expect_err("hidden");
        let empty = Catalog::new(Vec::new(), FlowTemplates::default());
        let unknown = empty
            .get(&everyone, "pro/release-checklist")
            .expect_err("unknown");
        assert_eq!(hidden, unknown);
        assert_eq!(
            hidden.to_string().as_bytes(),
            unknown.to_string().as_bytes()
        );
        assert_eq!(format!("{hidden:?}"), format!("{unknown:?}"));
        let hidden = catalog
            .resolve_flow(&everyone, "pro/release-checklist", &json!({}))
            .expect_err("hidden");
        let unknown = empty
            .resolve_flow(&everyone, "pro/release-checklist", &json!({}))
            .expect_err("unknown");
        assert_eq!(hidden.to_string(), unknown.to_string());
        let pro: Subscriptions = ["pro"].into_iter().collect();
        assert_eq!(
            catalog
                .get(&pro, "pro/release-checklist")
                .expect("visible")
                .skill
                .name,
            "release-checklist"
        );
    }

    #[test]
    fn list_filters_by_kind_and_tags_and_pages_by_cursor() {
        let catalog = catalog();
        let everyone = Subscriptions::none();
        let all = catalog.list(&everyone, &ListFilter::default());
        let all_ids: Vec<_> = all.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            all_ids,
            vec![
                "demo/echo-twice",
                "notes/notes-digest",
                "notes/write-note",
                "text/word-stats"
            ]
        );
        assert_eq!(all.next_cursor, None);

        let flows = catalog.list(
            &everyone,
            &ListFilter {
                kind: Some(SkillKind::FlowTemplate),
                ..ListFilter::default()
            },
        );
        assert_eq!(
            flows
                .entries
                .iter()
                .map(|e| e.id.as_str())
                .collect::<Vec<_>>(),
            vec!["demo/echo-twice"]
        );
        let tagged = catalog.list(
            &everyone,
            &ListFilter {
                tags: vec!["NOTES".into(), "summary".into()],
                ..ListFilter::default()
            },
        );
        assert_eq!(
            tagged
                .entries
                .iter()
                .map(|e| e.id.as_str())
                .collect::<Vec<_>>(),
            vec!["notes/notes-digest"]
        );

        let mut seen = Vec::new();
        let mut filter = ListFilter {
            limit: 3,
            ..ListFilter::default()
        };
        let pro: Subscriptions = ["pro"].into_iter().collect();
        loop {
            let page = catalog.list(&pro, &filter);
            assert!(page.entries.len() <= 3);
            seen.extend(page.entries.into_iter().map(|e| e.id));
            match page.next_cursor {
                Some(cursor) => filter.cursor = Some(cursor),
                None => break,
            }
        }
        assert_eq!(
            seen,
            vec![
                "demo/echo-twice",
                "notes/notes-digest",
                "notes/write-note",
                "pro/release-checklist",
                "text/word-stats"
            ]
        );
    }

    #[test]
    fn list_entries_say_nothing_about_subscriptions() {
        let catalog = catalog();
        let pro: Subscriptions = ["pro"].into_iter().collect();
        let page = catalog.list(&pro, &ListFilter::default());
        let json = serde_json::to_string(&page).expect("serializes");
        assert!(json.contains("release-checklist"));
        assert!(
            !json.contains("pro\"") && !json.contains("visibility"),
            "{json}"
        );
        let detail =
            serde_json::to_value(catalog.get(&pro, "pro/release-checklist").expect("visible"))
                .expect("serializes");
        assert_eq!(detail.get("visibility"), None);
        assert_eq!(detail["availability"], json!({"status": "available"}));
        let entry = serde_json::to_value(&page.entries[0]).expect("serializes");
        let mut keys: Vec<_> = entry.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            vec!["availability", "description", "id", "kind", "name", "tags"]
        );
    }

    #[test]
    fn failed_skills_stay_listed_as_unavailable() {
        struct NoTools;
        impl crate::ToolLookup for NoTools {
            fn presence(&self, _: &str) -> crate::ToolPresence {
                crate::ToolPresence::Missing
            }
        }
        let mut catalog = catalog();
        catalog
            .registry_mut()
            .set_tool_lookup(std::sync::Arc::new(NoTools));
        let result = catalog.registry_mut().refresh_all();
        assert_eq!(
            result.failed.keys().collect::<Vec<_>>(),
            vec!["demo/echo-twice"]
        );
        let page = catalog.list(
            &Subscriptions::none(),
            &ListFilter {
                kind: Some(SkillKind::FlowTemplate),
                ..ListFilter::default()
            },
        );
        assert_eq!(
            page.entries[0].availability,
            Availability::Unavailable {
                reason: "missing tool(s): demo__echo".into()
            }
        );
        let detail = catalog
            .get(&Subscriptions::none(), "demo/echo-twice")
            .expect("still there");
        assert_eq!(
            detail.availability.reason(),
            Some("missing tool(s): demo__echo")
        );
        let error = catalog
            .resolve_flow(
                &Subscriptions::none(),
                "demo/echo-twice",
                &json!({"text": "x"}),
            )
            .expect_err("unavailable");
        assert!(
            matches!(error, SkillError::SkillUnavailable { .. }),
            "{error:?}"
        );
    }

    #[test]
    fn resolve_flow_goes_through_the_catalog() {
        let catalog = catalog();
        let everyone = Subscriptions::none();
        let steps = catalog
            .resolve_flow(&everyone, "demo/echo-twice", &json!({"text": "hi"}))
            .expect("resolves");
        assert_eq!(
            steps
                .iter()
                .map(|s| s.arguments["text"].clone())
                .collect::<Vec<_>>(),
            vec![json!("hi"), json!("hi again")]
        );
        assert_eq!(
            catalog.resolve_flow(&everyone, "notes/write-note", &json!({})),
            Err(SkillError::NotAFlowTemplate {
                id: "notes/write-note".into()
            })
        );
    }
}
