//! What a reconcile changed, in exposed names, and the per-session queue that holds deltas until
//! the client's next turn.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// Exposed names added, changed (description or schema fingerprint differs, or the name now
/// routes to another tool) and removed.
///
/// A name is in at most one of the three lists. The registry renders a renamed tool as its old
/// name removed and its new name added.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Delta {
    /// Names that did not exist before.
    pub added: Vec<String>,
    /// Names that still exist but whose tool changed.
    pub changed: Vec<String>,
    /// Names that no longer exist.
    pub removed: Vec<String>,
    /// Why, for names a person set rules for: "its description changed since it was approved",
    /// "withheld until a person approves it: …". Only names in one of the three lists.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasons: BTreeMap<String, String>,
}

/// How many names a note lists per kind before it says "and N more".
const NOTE_NAMES: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Added,
    Changed,
    Removed,
}

impl Kind {
    /// The net effect of `self` followed by `later` on one name; `None` when nothing happened.
    fn then(self, later: Kind) -> Option<Kind> {
        use Kind::*;
        match (self, later) {
            (Added, Removed) => None,
            (Added, Added | Changed) => Some(Added),
            (Removed, Added | Changed) => Some(Changed),
            (Removed, Removed) => Some(Removed),
            (Changed, Removed) => Some(Removed),
            (Changed, Added | Changed) => Some(Changed),
        }
    }
}

impl Delta {
    /// True when nothing was added, changed or removed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    /// Folds a later delta into this one, so the result says what changed from before `self`
    /// to after `later`: added then removed is nothing, removed then added is changed, changed
    /// then removed is removed, added then changed is still added.
    ///
    /// Names keep the order in which they first appeared.
    pub fn merge(&mut self, mut later: Delta) {
        if later.is_empty() {
            return;
        }
        if self.is_empty() {
            *self = later;
            return;
        }
        // A later delta that names a name says all there is to say about it now.
        let mut reasons = std::mem::take(&mut self.reasons);
        for name in later.names() {
            reasons.remove(name);
        }
        reasons.extend(std::mem::take(&mut later.reasons));
        let mut order: Vec<(String, Option<Kind>)> = Vec::with_capacity(self.len() + later.len());
        let mut index: HashMap<String, usize> = HashMap::with_capacity(order.capacity());
        for (name, kind) in std::mem::take(self).into_entries() {
            match index.get(&name) {
                // A malformed delta naming one name twice: treat as sequential.
                Some(&i) => order[i].1 = order[i].1.map_or(Some(kind), |k| k.then(kind)),
                None => {
                    index.insert(name.clone(), order.len());
                    order.push((name, Some(kind)));
                }
            }
        }
        for (name, kind) in later.into_entries() {
            match index.get(&name) {
                Some(&i) => {
                    order[i].1 = match order[i].1 {
                        Some(earlier) => earlier.then(kind),
                        // Added then removed earlier, so this name was absent again.
                        None => Some(kind),
                    }
                }
                None => {
                    index.insert(name.clone(), order.len());
                    order.push((name, Some(kind)));
                }
            }
        }
        for (name, kind) in order {
            match kind {
                Some(Kind::Added) => self.added.push(name),
                Some(Kind::Changed) => self.changed.push(name),
                Some(Kind::Removed) => self.removed.push(name),
                None => {}
            }
        }
        if !reasons.is_empty() {
            let named: std::collections::HashSet<&String> = self.names().collect();
            reasons.retain(|name, _| named.contains(name));
        }
        self.reasons = reasons;
    }

    fn names(&self) -> impl Iterator<Item = &String> {
        self.added.iter().chain(&self.changed).chain(&self.removed)
    }

    fn len(&self) -> usize {
        self.added.len() + self.changed.len() + self.removed.len()
    }

    /// Removed first: within one delta a name is in one list only, and reading removals first
    /// keeps a malformed delta's "removed then added" meaning changed.
    fn into_entries(self) -> impl Iterator<Item = (String, Kind)> + use<> {
        let removed = self.removed.into_iter().map(|n| (n, Kind::Removed));
        let added = self.added.into_iter().map(|n| (n, Kind::Added));
        let changed = self.changed.into_iter().map(|n| (n, Kind::Changed));
        removed.chain(added).chain(changed)
    }

    /// A short plain-text note for the model, carried on a tool result; `None` when empty.
    pub fn note(&self) -> Option<String> {
        self.note_for(SchemaSource::ToolsList)
    }

    /// [`Delta::note`] telling the model to read schemas where its client can: `tools/list`,
    /// or `describe_tools` for a client in search mode.
    pub fn note_for(&self, source: SchemaSource) -> Option<String> {
        let how = source.how();
        if self.is_empty() {
            return None;
        }
        let mut parts = vec!["The available tools changed.".to_string()];
        if !self.added.is_empty() {
            parts.push(format!(
                "New tools: {}. Call them by these names, and fetch their schemas with \
                 {how} before first use.",
                name_list(&self.added)
            ));
        }
        if !self.changed.is_empty() {
            parts.push(format!(
                "Changed tools: {}. Their descriptions or schemas differ; fetch them again \
                 with {how} before the next call.",
                name_list(&self.changed)
            ));
        }
        if !self.removed.is_empty() {
            parts.push(format!(
                "Removed tools: {}. They are no longer available; do not call them.",
                name_list(&self.removed)
            ));
        }
        for (name, reason) in self.reasons.iter().take(NOTE_NAMES) {
            parts.push(format!("{name}: {reason}."));
        }
        Some(parts.join(" "))
    }
}

/// Where a change note tells the model to read a tool's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaSource {
    /// `tools/list` (a client that lists every tool).
    #[default]
    ToolsList,
    /// `describe_tools` (a client in search mode).
    DescribeTools,
}

impl SchemaSource {
    fn how(self) -> &'static str {
        match self {
            SchemaSource::ToolsList => "tools/list",
            SchemaSource::DescribeTools => "describe_tools",
        }
    }
}

fn name_list(names: &[String]) -> String {
    let shown = names.iter().take(NOTE_NAMES).map(String::as_str);
    let mut list = shown.collect::<Vec<_>>().join(", ");
    if names.len() > NOTE_NAMES {
        list.push_str(&format!(" and {} more", names.len() - NOTE_NAMES));
    }
    list
}

/// One session's deltas, merged until the session's next turn drains them.
#[derive(Debug, Clone, Default)]
pub struct DeltaQueue {
    pending: Delta,
}

impl DeltaQueue {
    /// An empty queue.
    pub fn new() -> Self {
        DeltaQueue::default()
    }

    /// Queues a delta, merging it with what is already waiting.
    pub fn push(&mut self, delta: Delta) {
        self.pending.merge(delta);
    }

    /// Takes the merged delta; `None` when the deltas cancelled out or none came.
    pub fn drain(&mut self) -> Option<Delta> {
        let delta = std::mem::take(&mut self.pending);
        (!delta.is_empty()).then_some(delta)
    }

    /// True when draining would yield nothing.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn delta(added: &[&str], changed: &[&str], removed: &[&str]) -> Delta {
        let owned = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        Delta {
            added: owned(added),
            changed: owned(changed),
            removed: owned(removed),
            ..Delta::default()
        }
    }

    fn merged(first: Delta, later: Delta) -> Delta {
        let mut d = first;
        d.merge(later);
        d
    }

    #[test]
    fn merge_laws() {
        let a = || delta(&["t"], &[], &[]);
        let c = || delta(&[], &["t"], &[]);
        let r = || delta(&[], &[], &["t"]);
        assert!(merged(a(), r()).is_empty(), "added then removed is nothing");
        assert_eq!(merged(r(), a()), c(), "removed then added is changed");
        assert_eq!(merged(c(), r()), r(), "changed then removed is removed");
        assert_eq!(merged(a(), c()), a(), "added then changed is added");
        assert_eq!(merged(c(), c()), c());
        assert_eq!(merged(r(), r()), r());
        assert_eq!(merged(merged(a(), r()), a()), a(), "gone and back is added");
    }

    #[test]
    fn merge_keeps_unrelated_names_in_first_seen_order() {
        let d = merged(delta(&["b", "a"], &["x"], &[]), delta(&["c"], &[], &["y"]));
        assert_eq!(d, delta(&["b", "a", "c"], &["x"], &["y"]));
    }

    #[test]
    fn queue_drains_merged_and_empties() {
        let mut q = DeltaQueue::new();
        assert!(q.is_empty());
        assert_eq!(q.drain(), None);
        q.push(delta(&["a", "b"], &[], &[]));
        q.push(delta(&[], &[], &["a"]));
        assert!(!q.is_empty());
        assert_eq!(q.drain(), Some(delta(&["b"], &[], &[])));
        assert!(q.is_empty());
        q.push(delta(&["a"], &[], &[]));
        q.push(delta(&[], &[], &["a"]));
        assert_eq!(q.drain(), None, "cancelled out");
    }

    #[test]
    fn note_names_tools_and_says_how_to_use_them() {
        assert_eq!(Delta::default().note(), None);
        let note = delta(&["gh__new"], &["gh__edit"], &["gh__old"])
            .note()
            .expect("non-empty delta has a note");
        assert!(
            note.contains("gh__new") && note.contains("tools/list"),
            "{note}"
        );
        assert!(
            note.contains("gh__edit") && note.contains("gh__old"),
            "{note}"
        );
        let only_removed = delta(&[], &[], &["x"]).note().expect("note");
        assert!(!only_removed.contains("New tools"), "{only_removed}");
    }

    #[test]
    fn reasons_follow_the_latest_word_on_each_name() {
        let mut withheld = delta(&[], &[], &["s__echo"]);
        withheld.reasons.insert(
            "s__echo".into(),
            "withheld until a person approves it".into(),
        );
        let note = withheld.note().expect("note");
        assert!(
            note.ends_with("s__echo: withheld until a person approves it."),
            "{note}"
        );
        // Approved and served again: the reason is no longer true.
        let back = merged(withheld.clone(), delta(&["s__echo"], &[], &[]));
        assert_eq!(back, delta(&[], &["s__echo"], &[]));
        // Withheld, then something else changed: the reason stays.
        let later = merged(withheld.clone(), delta(&["s__other"], &[], &[]));
        assert_eq!(later.reasons.len(), 1);
        // Withheld after being added in the same span: nothing left to say.
        let gone = merged(delta(&["s__echo"], &[], &[]), withheld);
        assert!(gone.is_empty() && gone.reasons.is_empty(), "{gone:?}");
    }

    #[test]
    fn long_notes_are_cut() {
        let names: Vec<String> = (0..50).map(|i| format!("s__t{i}")).collect();
        let d = Delta {
            added: names,
            ..Delta::default()
        };
        let note = d.note().expect("note");
        assert!(note.contains("and 30 more"), "{note}");
        assert!(!note.contains("s__t20,"), "{note}");
    }

    /// A delta as a transition between two name sets, for checking merge against set algebra.
    fn apply(before: &BTreeSet<String>, d: &Delta) -> BTreeSet<String> {
        let mut after = before.clone();
        for n in &d.removed {
            after.remove(n);
        }
        after.extend(d.added.iter().cloned());
        after
    }

    /// The delta between two states, where `touched` names were changed in place.
    fn diff(
        before: &BTreeSet<String>,
        after: &BTreeSet<String>,
        touched: &BTreeSet<String>,
    ) -> Delta {
        Delta {
            added: after.difference(before).cloned().collect(),
            changed: touched
                .iter()
                .filter(|n| before.contains(*n) && after.contains(*n))
                .cloned()
                .collect(),
            removed: before.difference(after).cloned().collect(),
            ..Delta::default()
        }
    }

    fn sorted(mut d: Delta) -> Delta {
        d.added.sort();
        d.changed.sort();
        d.removed.sort();
        d
    }

    proptest! {
        /// Merging the deltas of a sequence of states gives the delta of its endpoints, where a
        /// name is changed if it was touched (changed, or removed and re-added) on the way.
        #[test]
        fn merged_deltas_describe_the_endpoints(
            start in proptest::collection::btree_set("[a-e]", 0..5),
            steps in proptest::collection::vec(
                (proptest::collection::btree_set("[a-e]", 0..5), proptest::collection::btree_set("[a-e]", 0..3)),
                1..6,
            ),
        ) {
            let mut state = start.clone();
            let mut queue = DeltaQueue::new();
            let mut touched = BTreeSet::new();
            for (next, changed) in steps {
                let d = diff(&state, &next, &changed);
                prop_assert_eq!(apply(&state, &d), next.clone());
                for n in d.changed.iter().chain(&d.removed) {
                    touched.insert(n.clone());
                }
                queue.push(d);
                state = next;
            }
            let expected = diff(&start, &state, &touched);
            let got = queue.drain().unwrap_or_default();
            prop_assert_eq!(sorted(got.clone()), sorted(expected));
            prop_assert_eq!(apply(&start, &got), state);
        }
    }

    #[test]
    fn a_note_for_search_mode_sends_the_model_to_describe_tools() {
        let d = delta(&["a__new"], &["a__edited"], &[]);
        let note = d.note_for(SchemaSource::DescribeTools).expect("note");
        assert!(!note.contains("tools/list"), "{note}");
        assert_eq!(note.matches("describe_tools").count(), 2, "{note}");
        assert_eq!(d.note(), d.note_for(SchemaSource::ToolsList));
    }
}
