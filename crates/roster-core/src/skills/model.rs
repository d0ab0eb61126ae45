//! The skill as roster holds it after parsing its `SKILL.md`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a skill gives an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkillKind {
    /// Text content (the Markdown body of `SKILL.md`) for the model to read.
    Knowledge,
    /// A JSON-Schema `parameters` block and ordered tool-call steps with `{param}` placeholders.
    FlowTemplate,
}

impl SkillKind {
    /// The word used in `SKILL.md` and on the wire: `knowledge` or `flow_template`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkillKind::Knowledge => "knowledge",
            SkillKind::FlowTemplate => "flow_template",
        }
    }
}

impl std::fmt::Display for SkillKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of a flow template: a call of a tool (by exposed name) with arguments that may hold
/// `{param}` placeholders. roster never runs a step; it hands the resolved list to the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// The exposed name of the tool to call (`demo__notes_write`).
    pub tool: String,
    /// The call's arguments, as written in `SKILL.md` (placeholders not substituted).
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// What the step is for, for the model reading the resolved flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A parsed, validated skill.
///
/// Its fields are the Agent Skills front matter keys (`name`, `description`, `license`,
/// `compatibility`, `metadata`, `allowed-tools`), roster's own keys, and the Markdown body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    /// Namespaced id from the directory path under the skills root (`ns/skill-a`).
    pub id: String,
    /// The skill's name; always equal to the last segment of [`Skill::id`].
    pub name: String,
    /// What the skill does and when to use it.
    pub description: String,
    /// `knowledge` (the default) or `flow_template`.
    pub kind: SkillKind,
    /// Free labels used by list filters and search.
    pub tags: Vec<String>,
    /// Ids of other skills this one builds on; their tools count as this skill's tools.
    pub includes: Vec<String>,
    /// Tool references (exposed names) the skill relies on, besides those its steps call.
    pub tools: Vec<String>,
    /// Subscriptions that may see the skill; empty means public. Never serialized, so a client
    /// never learns which subscriptions exist.
    #[serde(skip_serializing)]
    pub visibility: Vec<String>,
    /// JSON Schema of a flow template's parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// A flow template's ordered steps.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// The Markdown body of `SKILL.md`.
    pub content: String,
    /// Agent Skills `license`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// Agent Skills `compatibility`: environment requirements, in prose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// Agent Skills `metadata`: free key/value pairs.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Agent Skills `allowed-tools` (space-delimited in the file).
    #[serde(rename = "allowed-tools", skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
}

impl Skill {
    /// Every tool reference the skill itself makes: its `tools` and the tools its steps call,
    /// in first-seen order, without duplicates. Includes are not followed here; see
    /// [`crate::skills::flattened_tools`].
    pub fn own_tool_references(&self) -> Vec<&str> {
        let mut seen = Vec::new();
        for reference in self
            .tools
            .iter()
            .chain(self.steps.iter().map(|step| &step.tool))
        {
            if !seen.contains(&reference.as_str()) {
                seen.push(reference.as_str());
            }
        }
        seen
    }

    /// Whether a caller holding `subscriptions` may see this skill.
    pub fn is_visible_to(&self, subscriptions: &crate::catalog::Subscriptions) -> bool {
        self.visibility.is_empty() || self.visibility.iter().any(|s| subscriptions.contains(s))
    }
}
