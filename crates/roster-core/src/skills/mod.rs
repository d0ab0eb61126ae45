//! Skills: the model, `SKILL.md` parsing, includes resolution, and refresh against the tools.
//!
//! A skill is an Agent Skills directory: `SKILL.md` with YAML front matter and a Markdown body.
//! [`load`] turns the files' text (read by the caller) into [`Skill`]s and reports each broken
//! one with its reason; [`SkillRegistry`] holds the skills and checks their flattened tool sets
//! against a [`crate::ToolLookup`] on [`SkillRegistry::refresh`] / [`SkillRegistry::refresh_all`].

mod model;
mod parse;
mod refresh;
mod resolve;

use serde::Serialize;

pub use model::{Skill, SkillKind, Step};
pub use parse::{
    InvalidSkill, LoadReport, SkillFileError, SkillSource, front_matter, load, load_adjusted,
    parse_skill,
};
pub use refresh::{SkillRefreshResult, SkillRegistry};
pub use resolve::{ResolveError, flattened_tools};

/// Whether a skill can be used, as its last refresh found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Availability {
    /// Its tools were found (or not yet checked).
    Available,
    /// Its last refresh failed; the skill stays listed with the reason.
    Unavailable {
        /// Why: the missing tool references, or the resolution error.
        reason: String,
    },
}

impl Availability {
    /// Whether the skill is available.
    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available)
    }

    /// The reason it is unavailable, if it is.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Availability::Available => None,
            Availability::Unavailable { reason } => Some(reason),
        }
    }
}

/// An error answering a question about skills (refresh, catalog, flow resolution).
///
/// A skill that exists but is not visible to the caller is [`SkillError::SkillNotFound`], with
/// the same message as one that does not exist, so nothing leaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// No skill with this id (or none the caller may see).
    #[error("skill {id:?} not found")]
    SkillNotFound {
        /// The id asked for.
        id: String,
    },
    /// The skill is a knowledge skill; only flow templates resolve.
    #[error("skill {id:?} is a knowledge skill, not a flow template; read it with get_skill")]
    NotAFlowTemplate {
        /// The skill's id.
        id: String,
    },
    /// The skill failed its last refresh.
    #[error("skill {id:?} is unavailable: {reason}; it is checked again at the next refresh")]
    SkillUnavailable {
        /// The skill's id.
        id: String,
        /// Why, as the last refresh found.
        reason: String,
    },
    /// Required parameters were not given and have no default.
    #[error("skill {id:?}: missing required parameter(s): {}", .names.join(", "))]
    MissingParameters {
        /// The skill's id.
        id: String,
        /// Every missing parameter, in schema order.
        names: Vec<String>,
    },
    /// Parameters do not satisfy the skill's `parameters` schema.
    #[error("skill {id:?}: invalid parameter(s): {}", .problems.join("; "))]
    InvalidParameters {
        /// The skill's id.
        id: String,
        /// Each violation, with its location in the parameters.
        problems: Vec<String>,
    },
    /// Optional parameters with no value and no default are used inside longer text.
    #[error("skill {id:?}: parameter(s) used inside text need a value (none given, no default): {}", .names.join(", "))]
    UnsetParameters {
        /// The skill's id.
        id: String,
        /// The parameters that need a value.
        names: Vec<String>,
    },
}
