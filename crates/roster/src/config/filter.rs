//! `tools.allow`/`tools.deny` and `tasks.required`/`tasks.forbidden`: glob patterns on a server's own
//! tool names, compiled once when the configuration is read; and a client identity's
//! [`Permissions`], the same globs on the names and URIs the client sees.

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

/// `tools_mode`: what a client's `tools/list` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolsMode {
    /// Every tool the client may use.
    #[default]
    All,
    /// roster's native tools, the `always` tools and `search_tools` / `describe_tools` /
    /// `call_tool`; every other tool is found by search and still callable by name.
    Search,
}

/// `always`: in search mode, the tools that stay listed, as globs on exposed names. Empty
/// (the default) lists none.
#[derive(Debug, Clone, Default)]
pub struct AlwaysListed {
    patterns: Vec<String>,
    set: Option<GlobSet>,
}

impl AlwaysListed {
    /// The tools matching `patterns`.
    pub fn new(patterns: Vec<String>) -> Result<Self, globset::Error> {
        Ok(AlwaysListed {
            set: glob_set(&patterns)?,
            patterns,
        })
    }

    /// Whether the tool exposed as `exposed` stays listed.
    pub fn lists(&self, exposed: &str) -> bool {
        self.set.as_ref().is_some_and(|set| set.is_match(exposed))
    }

    /// Whether no tool stays listed.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The patterns as written.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// Equal when their patterns are: what a reload compares.
impl PartialEq for AlwaysListed {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for AlwaysListed {}

/// `tools.allow` / `tools.deny`: glob patterns on a server's own tool names.
///
/// Applied to every listing, so a tool renamed by its server is judged by its new name.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    allow: Vec<String>,
    deny: Vec<String>,
    allow_set: Option<GlobSet>,
    deny_set: Option<GlobSet>,
}

impl ToolFilter {
    /// A filter from allow and deny patterns; an empty allow list allows everything.
    pub fn new(allow: Vec<String>, deny: Vec<String>) -> Result<Self, globset::Error> {
        Ok(ToolFilter {
            allow_set: glob_set(&allow)?,
            deny_set: glob_set(&deny)?,
            allow,
            deny,
        })
    }

    /// Whether a tool with this (server-side) name is taken.
    pub fn permits(&self, tool_name: &str) -> bool {
        let allowed = self
            .allow_set
            .as_ref()
            .is_none_or(|set| set.is_match(tool_name));
        let denied = self
            .deny_set
            .as_ref()
            .is_some_and(|set| set.is_match(tool_name));
        allowed && !denied
    }

    /// The allow patterns as written.
    pub fn allow(&self) -> &[String] {
        &self.allow
    }

    /// The deny patterns as written.
    pub fn deny(&self) -> &[String] {
        &self.deny
    }
}

/// Two filters are equal when their patterns are: what a reload compares.
impl PartialEq for ToolFilter {
    fn eq(&self, other: &Self) -> bool {
        self.allow == other.allow && self.deny == other.deny
    }
}

impl Eq for ToolFilter {}

impl ToolFilter {
    /// Whether this filter lets everything through (no pattern at all).
    pub fn allows_all(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

/// What one client identity may use, by the names it sees: `tools.allow`/`tools.deny` on
/// exposed tool names (native tools included), `prompts.*` on exposed prompt names and
/// `resources.*` on resource URIs (and resource templates' URI templates). What a client may
/// not use is answered exactly as what does not exist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    /// Exposed tool names.
    pub tools: ToolFilter,
    /// Exposed prompt names.
    pub prompts: ToolFilter,
    /// Resource URIs and URI templates.
    pub resources: ToolFilter,
}

impl Permissions {
    /// Whether anything is held back: a list then depends on who asks (`cacheScope: private`).
    pub fn restricts(&self) -> bool {
        !(self.tools.allows_all() && self.prompts.allows_all() && self.resources.allows_all())
    }
}

/// One set of glob patterns (`None` for none).
fn glob_set(patterns: &[String]) -> Result<Option<GlobSet>, globset::Error> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        builder.add(Glob::new(pattern)?);
    }
    builder.build().map(Some)
}

/// Whether a tool call may, must or must not run as a task (SEP-2663; the 2025-11-25
/// `execution.taskSupport` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never a task.
    Forbidden,
    /// A task when the client opted in and the call is slow.
    Optional,
    /// Only as a task: a client that did not opt in is refused.
    Required,
}

impl TaskSupport {
    /// The `execution.taskSupport` value (`forbidden`, `optional`, `required`).
    pub fn parse(value: &str) -> Option<TaskSupport> {
        match value {
            "forbidden" => Some(TaskSupport::Forbidden),
            "optional" => Some(TaskSupport::Optional),
            "required" => Some(TaskSupport::Required),
            _ => None,
        }
    }
}

/// `tasks.required` / `tasks.forbidden`: glob patterns on a server's own tool names that say
/// how its tools run as tasks, over what the server's tools declare.
#[derive(Debug, Clone, Default)]
pub struct TaskPolicy {
    required: Option<GlobSet>,
    forbidden: Option<GlobSet>,
    /// The patterns as written, for comparing policies.
    patterns: (Vec<String>, Vec<String>),
}

/// Two policies are equal when their patterns are: what a reload compares.
impl PartialEq for TaskPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl TaskPolicy {
    /// A policy from the two pattern lists (`forbidden` wins where both match).
    pub fn new(required: &[String], forbidden: &[String]) -> Result<Self, globset::Error> {
        Ok(TaskPolicy {
            required: glob_set(required)?,
            forbidden: glob_set(forbidden)?,
            patterns: (required.to_vec(), forbidden.to_vec()),
        })
    }

    /// What the configuration says of the tool, if anything.
    pub fn of(&self, tool_name: &str) -> Option<TaskSupport> {
        let matches = |set: &Option<GlobSet>| set.as_ref().is_some_and(|s| s.is_match(tool_name));
        if matches(&self.forbidden) {
            Some(TaskSupport::Forbidden)
        } else if matches(&self.required) {
            Some(TaskSupport::Required)
        } else {
            None
        }
    }
}
