//! Refresh: checking each skill's flattened tool set against the live tools.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use super::model::Skill;
use super::resolve::flattened_tools;
use super::{Availability, SkillError};
use crate::tool::{ToolLookup, ToolPresence};

/// What one refresh (of one skill, or of all) found, skill ids sorted into three outcomes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SkillRefreshResult {
    /// Skills whose every tool reference was found (or that could not be checked because no
    /// tool registry is configured).
    pub refreshed: Vec<String>,
    /// Skills that failed, each with the reason: the missing references, or a resolution error.
    pub failed: BTreeMap<String, String>,
    /// Skills with a reference whose server has no listing yet, so nothing can be said.
    pub skipped: Vec<String>,
}

impl SkillRefreshResult {
    /// How many skills were refreshed.
    pub fn total_refreshed(&self) -> usize {
        self.refreshed.len()
    }

    /// How many skills failed.
    pub fn total_failed(&self) -> usize {
        self.failed.len()
    }

    /// How many skills were skipped.
    pub fn total_skipped(&self) -> usize {
        self.skipped.len()
    }

    /// One line for the log: `refreshed: 3, failed: 1, skipped: 0`.
    pub fn to_summary(&self) -> String {
        format!(
            "refreshed: {}, failed: {}, skipped: {}",
            self.total_refreshed(),
            self.total_failed(),
            self.total_skipped()
        )
    }

    /// Adds `other`'s outcomes to this one: lists are concatenated, maps merged (on the same id,
    /// `other`'s reason wins, being the newer).
    pub fn merge(&mut self, other: SkillRefreshResult) {
        self.refreshed.extend(other.refreshed);
        self.failed.extend(other.failed);
        self.skipped.extend(other.skipped);
    }
}

impl fmt::Display for SkillRefreshResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_summary())
    }
}

/// How to give the registry a tool lookup, said in the warning logged when there is none.
const NO_TOOL_REGISTRY: &str = "no tool registry configured: skill tool references were not checked \
and every skill counts as refreshed; configure one with SkillRegistry::set_tool_lookup \
(the roster gateway does this when servers are configured under [servers.NAME])";

/// The loaded skills with, for each, its availability after the last refresh.
pub struct SkillRegistry {
    skills: Vec<Skill>,
    by_id: HashMap<String, usize>,
    availability: Vec<Availability>,
    tools: Option<Arc<dyn ToolLookup + Send + Sync>>,
}

impl fmt::Debug for SkillRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkillRegistry")
            .field("skills", &self.skills.len())
            .field("tool_lookup", &self.tools.is_some())
            .finish()
    }
}

enum Outcome {
    Refreshed,
    Failed(String),
    Skipped,
}

impl SkillRegistry {
    /// A registry of `skills` (ids must be unique, as [`crate::skills::load`] guarantees; a
    /// later duplicate replaces an earlier one), all available, with no tool lookup.
    pub fn new(skills: impl IntoIterator<Item = Skill>) -> Self {
        let mut registry = SkillRegistry {
            skills: Vec::new(),
            by_id: HashMap::new(),
            availability: Vec::new(),
            tools: None,
        };
        for skill in skills {
            match registry.by_id.get(&skill.id) {
                Some(&at) => registry.skills[at] = skill,
                None => {
                    registry
                        .by_id
                        .insert(skill.id.clone(), registry.skills.len());
                    registry.skills.push(skill);
                    registry.availability.push(Availability::Available);
                }
            }
        }
        registry
    }

    /// Sets the tool lookup refreshes check references against (the tool registry).
    pub fn set_tool_lookup(&mut self, tools: Arc<dyn ToolLookup + Send + Sync>) {
        self.tools = Some(tools);
    }

    /// The same registry with a tool lookup.
    pub fn with_tool_lookup(mut self, tools: Arc<dyn ToolLookup + Send + Sync>) -> Self {
        self.set_tool_lookup(tools);
        self
    }

    /// The skill with this id.
    pub fn get(&self, id: &str) -> Option<&Skill> {
        self.by_id.get(id).map(|&at| &self.skills[at])
    }

    /// The availability of the skill with this id, as its last refresh left it.
    pub fn availability(&self, id: &str) -> Option<&Availability> {
        self.by_id.get(id).map(|&at| &self.availability[at])
    }

    /// Every skill, in load order, with its availability.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&Skill, &Availability)> {
        self.skills.iter().zip(&self.availability)
    }

    /// How many skills are loaded.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether no skill is loaded.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The skill at a load-order position, with its availability (for indexes built over the
    /// registry, such as the catalog's search index).
    pub(crate) fn at(&self, position: usize) -> (&Skill, &Availability) {
        (&self.skills[position], &self.availability[position])
    }

    /// The load-order position of a skill.
    pub(crate) fn position(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// Recomputes one skill's flattened tool set and checks it against the tool lookup.
    ///
    /// All references present → `refreshed`; some missing → `failed` listing them; a cycle or
    /// missing include → `failed` with that error; otherwise a reference whose server has no
    /// listing → `skipped` (availability left as it was). No tool lookup → `refreshed`, with a
    /// warning. An unknown id is [`SkillError::SkillNotFound`].
    pub fn refresh(&mut self, id: &str) -> Result<SkillRefreshResult, SkillError> {
        let at = self
            .position(id)
            .ok_or_else(|| SkillError::SkillNotFound { id: id.to_owned() })?;
        let tools = self.tools.clone();
        if tools.is_none() {
            tracing::warn!("{NO_TOOL_REGISTRY}");
        }
        let mut result = SkillRefreshResult::default();
        self.refresh_at(at, tools.as_deref(), &mut result);
        Ok(result)
    }

    /// Refreshes every skill and returns the merged result.
    pub fn refresh_all(&mut self) -> SkillRefreshResult {
        let tools = self.tools.clone();
        if tools.is_none() {
            tracing::warn!("{NO_TOOL_REGISTRY}");
        }
        let mut result = SkillRefreshResult::default();
        for at in 0..self.skills.len() {
            self.refresh_at(at, tools.as_deref(), &mut result);
        }
        result
    }

    fn refresh_at(
        &mut self,
        at: usize,
        tools: Option<&(dyn ToolLookup + Send + Sync)>,
        result: &mut SkillRefreshResult,
    ) {
        let outcome = self.check(&self.skills[at], tools);
        let id = self.skills[at].id.clone();
        match outcome {
            Outcome::Refreshed => {
                self.availability[at] = Availability::Available;
                result.refreshed.push(id);
            }
            Outcome::Failed(reason) => {
                self.availability[at] = Availability::Unavailable {
                    reason: reason.clone(),
                };
                result.failed.insert(id, reason);
            }
            Outcome::Skipped => result.skipped.push(id),
        }
    }

    fn check(&self, skill: &Skill, tools: Option<&(dyn ToolLookup + Send + Sync)>) -> Outcome {
        let references = match flattened_tools(skill, &|id| self.get(id)) {
            Ok(references) => references,
            Err(error) => return Outcome::Failed(error.to_string()),
        };
        let Some(tools) = tools else {
            return Outcome::Refreshed;
        };
        let mut missing = Vec::new();
        let mut withheld = Vec::new();
        let mut unknown = false;
        for reference in &references {
            match tools.presence(reference) {
                ToolPresence::Present => {}
                ToolPresence::Missing => missing.push(reference.as_str()),
                ToolPresence::Withheld => withheld.push(reference.as_str()),
                ToolPresence::Unknown => unknown = true,
            }
        }
        // A reference known to be gone outweighs one that cannot be checked yet.
        let mut reasons = Vec::new();
        if !missing.is_empty() {
            reasons.push(format!("missing tool(s): {}", missing.join(", ")));
        }
        if !withheld.is_empty() {
            reasons.push(format!(
                "withheld tool(s), changed since a person approved them: {}",
                withheld.join(", ")
            ));
        }
        if !reasons.is_empty() {
            Outcome::Failed(reasons.join("; "))
        } else if unknown {
            Outcome::Skipped
        } else {
            Outcome::Refreshed
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::Mutex;

    use super::*;
    use crate::skills::parse_skill;

    /// Stand-in for the tool registry: a fixed presence per reference, `Unknown` otherwise.
    struct Tools(HashMap<&'static str, ToolPresence>);

    impl ToolLookup for Tools {
        fn presence(&self, reference: &str) -> ToolPresence {
            self.0
                .get(reference)
                .copied()
                .unwrap_or(ToolPresence::Unknown)
        }
    }

    fn tools() -> Arc<Tools> {
        Arc::new(Tools(HashMap::from([
            ("demo__echo", ToolPresence::Present),
            ("demo__add", ToolPresence::Present),
            ("demo__gone", ToolPresence::Missing),
            ("demo__also_gone", ToolPresence::Missing),
            ("demo__changed", ToolPresence::Withheld),
        ])))
    }

    fn skill(id: &str, includes: &[&str], tools: &[&str]) -> Skill {
        let text = format!(
            "---\nname: {id}\ndescription: d\nincludes: [{}]\ntools: [{}]\n---\n",
            includes.join(", "),
            tools.join(", ")
        );
        parse_skill(id, &text).expect("test skill parses")
    }

    fn registry(skills: Vec<Skill>) -> SkillRegistry {
        SkillRegistry::new(skills).with_tool_lookup(tools())
    }

    fn result(refreshed: &[&str], failed: &[(&str, &str)], skipped: &[&str]) -> SkillRefreshResult {
        SkillRefreshResult {
            refreshed: refreshed.iter().map(|s| s.to_string()).collect(),
            failed: failed
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            skipped: skipped.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn all_references_found_is_refreshed() {
        let mut skills = registry(vec![skill("a", &[], &["demo__echo", "demo__add"])]);
        assert_eq!(
            skills.refresh("a").expect("known"),
            result(&["a"], &[], &[])
        );
        assert_eq!(skills.availability("a"), Some(&Availability::Available));
    }

    #[test]
    fn a_skill_without_references_is_refreshed() {
        let mut skills = registry(vec![skill("a", &[], &[])]);
        assert_eq!(
            skills.refresh("a").expect("known"),
            result(&["a"], &[], &[])
        );
    }

    #[test]
    fn missing_references_fail_and_are_listed() {
        let mut skills = registry(vec![skill(
            "a",
            &[],
            &["demo__echo", "demo__gone", "demo__also_gone"],
        )]);
        let expected = result(
            &[],
            &[("a", "missing tool(s): demo__also_gone, demo__gone")],
            &[],
        );
        assert_eq!(skills.refresh("a").expect("known"), expected);
        assert_eq!(
            skills.availability("a"),
            Some(&Availability::Unavailable {
                reason: "missing tool(s): demo__also_gone, demo__gone".into()
            })
        );
    }

    #[test]
    fn a_missing_reference_of_an_included_skill_fails_the_includer() {
        let mut skills = registry(vec![
            skill("a", &["b"], &["demo__echo"]),
            skill("b", &[], &["demo__gone"]),
        ]);
        assert_eq!(
            skills.refresh("a").expect("known"),
            result(&[], &[("a", "missing tool(s): demo__gone")], &[])
        );
    }

    #[test]
    fn a_cycle_fails_with_the_resolution_error() {
        let mut skills = registry(vec![skill("a", &["b"], &[]), skill("b", &["a"], &[])]);
        assert_eq!(
            skills.refresh("a").expect("known"),
            result(&[], &[("a", "include cycle: a → b → a")], &[])
        );
    }

    #[test]
    fn a_missing_include_fails_with_the_resolution_error() {
        let mut skills = registry(vec![skill("a", &["ns/gone"], &["demo__echo"])]);
        let expected = result(
            &[],
            &[("a", "missing include \"ns/gone\" (path: a → ns/gone)")],
            &[],
        );
        assert_eq!(skills.refresh("a").expect("known"), expected);
    }

    #[test]
    fn a_reference_without_a_listing_is_skipped_and_keeps_the_last_availability() {
        let mut skills = registry(vec![skill("a", &[], &["demo__echo", "never__listed"])]);
        assert_eq!(
            skills.refresh("a").expect("known"),
            result(&[], &[], &["a"])
        );
        assert_eq!(skills.availability("a"), Some(&Availability::Available));
    }

    #[test]
    fn a_withheld_reference_makes_the_skill_unavailable_and_says_why() {
        let mut skills = registry(vec![skill("a", &[], &["demo__echo", "demo__changed"])]);
        assert_eq!(
            skills.refresh("a").expect("known"),
            result(
                &[],
                &[(
                    "a",
                    "withheld tool(s), changed since a person approved them: demo__changed"
                )],
                &[]
            )
        );
    }

    #[test]
    fn a_missing_reference_outweighs_an_unknown_one() {
        let mut skills = registry(vec![skill("a", &[], &["never__listed", "demo__gone"])]);
        assert_eq!(
            skills.refresh("a").expect("known"),
            result(&[], &[("a", "missing tool(s): demo__gone")], &[])
        );
    }

    #[test]
    fn a_skill_that_failed_becomes_available_again_when_its_tools_return() {
        struct Flip(Mutex<ToolPresence>);
        impl ToolLookup for Flip {
            fn presence(&self, _: &str) -> ToolPresence {
                *self.0.lock().expect("lock")
            }
        }
        let flip = Arc::new(Flip(Mutex::new(ToolPresence::Missing)));
        let mut skills =
            SkillRegistry::new(vec![skill("a", &[], &["demo__x"])]).with_tool_lookup(flip.clone());
        assert_eq!(skills.refresh_all().total_failed(), 1);
        assert!(!skills.availability("a").expect("known").is_available());
        *flip.0.lock().expect("lock") = ToolPresence::Unknown;
        assert_eq!(skills.refresh_all().total_skipped(), 1);
        assert!(
            !skills.availability("a").expect("known").is_available(),
            "skipped keeps the failure"
        );
        *flip.0.lock().expect("lock") = ToolPresence::Present;
        assert_eq!(skills.refresh_all().total_refreshed(), 1);
        assert!(skills.availability("a").expect("known").is_available());
    }

    #[test]
    fn an_unknown_name_is_skill_not_found() {
        let mut skills = registry(vec![skill("a", &[], &[])]);
        let error = skills.refresh("nope").expect_err("unknown");
        assert!(matches!(&error, SkillError::SkillNotFound { id } if id == "nope"));
        assert_eq!(error.to_string(), "skill \"nope\" not found");
    }

    #[test]
    fn refresh_all_merges_every_outcome() {
        let mut skills = registry(vec![
            skill("ok", &[], &["demo__echo"]),
            skill("gone", &[], &["demo__gone"]),
            skill("later", &[], &["never__listed"]),
            skill("plain", &[], &[]),
        ]);
        let all = skills.refresh_all();
        assert_eq!(
            all,
            result(
                &["ok", "plain"],
                &[("gone", "missing tool(s): demo__gone")],
                &["later"]
            )
        );
        assert_eq!(all.to_summary(), "refreshed: 2, failed: 1, skipped: 1");
    }

    #[test]
    fn to_summary_is_exact() {
        let r = result(&["a", "b", "c"], &[("d", "missing tool(s): x")], &[]);
        assert_eq!(r.to_summary(), "refreshed: 3, failed: 1, skipped: 0");
        assert_eq!(
            (r.total_refreshed(), r.total_failed(), r.total_skipped()),
            (3, 1, 0)
        );
        assert_eq!(r.to_string(), "refreshed: 3, failed: 1, skipped: 0");
        assert_eq!(
            SkillRefreshResult::default().to_summary(),
            "refreshed: 0, failed: 0, skipped: 0"
        );
    }

    #[test]
    fn merge_concatenates_lists_and_merges_maps() {
        let mut left = result(&["a"], &[("f1", "r1"), ("f2", "old")], &["s1"]);
        left.merge(result(&["b", "c"], &[("f2", "new"), ("f3", "r3")], &["s2"]));
        assert_eq!(
            left,
            result(
                &["a", "b", "c"],
                &[("f1", "r1"), ("f2", "new"), ("f3", "r3")],
                &["s1", "s2"]
            )
        );
        assert_eq!(left.to_summary(), "refreshed: 3, failed: 3, skipped: 2");
    }

    /// Collects everything a `tracing` fmt subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn capture_logs(f: impl FnOnce()) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = captured.0.lock().expect("lock").clone();
        String::from_utf8(bytes).expect("utf-8 log")
    }

    #[test]
    fn without_a_tool_registry_skills_are_refreshed_with_a_warning() {
        let mut skills =
            SkillRegistry::new(vec![skill("a", &[], &["demo__gone"]), skill("b", &[], &[])]);
        let mut outcome = None;
        let logs = capture_logs(|| outcome = Some(skills.refresh_all()));
        assert_eq!(outcome, Some(result(&["a", "b"], &[], &[])));
        let warnings: Vec<_> = logs.lines().filter(|l| l.contains("WARN")).collect();
        assert_eq!(
            warnings.len(),
            1,
            "one warning per refresh, not per skill: {logs}"
        );
        assert!(
            warnings[0].contains("no tool registry configured"),
            "{logs}"
        );
        assert!(
            warnings[0].contains("SkillRegistry::set_tool_lookup"),
            "says how to configure one: {logs}"
        );

        let logs = capture_logs(|| outcome = Some(skills.refresh("a").expect("known")));
        assert_eq!(outcome, Some(result(&["a"], &[], &[])));
        assert!(
            logs.contains("WARN") && logs.contains("no tool registry configured"),
            "{logs}"
        );
    }

    #[test]
    fn with_a_tool_registry_nothing_is_warned() {
        let mut skills = registry(vec![skill("a", &[], &["demo__echo"])]);
        let logs = capture_logs(|| {
            skills.refresh_all();
        });
        assert!(!logs.contains("WARN"), "{logs}");
    }
}
