//! Exposed names: how a server's tool is named to clients.
//!
//! A client sees one flat list of tools, so every (server, tool) pair needs a name that is unique
//! across all servers, never shadows a native tool, and fits the MCP tool-name rules that clients
//! enforce (1–64 characters of `[A-Za-z0-9_.-]`).
//!
//! Each pair has a *chain* of candidate names, best first:
//! - the bare tool name, when the mode does not prefix (`never`, or `conditional` with one server);
//! - the prefixed name `server<sep>tool`;
//! - hashed variants of the prefixed name with a growing salt.
//!
//! A name that is not already valid (bad characters, too long, empty) is never used as is: it is
//! sanitized, cut, and given a short hash of the original name(s). So `a b` and `a_b` never meet:
//! `a_b` stays `a_b`, `a b` becomes `a_b_1f2e3d4c`. Which pair gets a contested candidate is
//! decided by the registry (see [`crate::registry`]): native tools first, then servers in config
//! order.

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The longest exposed name clients accept.
pub const MAX_NAME_LEN: usize = 64;

/// The tools roster serves itself; they always win a name clash. The last three are served to
/// clients in search mode only, but their names are kept in every mode, so a tool's exposed
/// name never depends on who lists it.
pub const NATIVE_TOOLS: [&str; 9] = [
    "list_skills",
    "search_skills",
    "get_skill",
    "resolve_flow_template",
    "refresh_tools",
    "channels",
    "search_tools",
    "describe_tools",
    "call_tool",
];

/// Who keeps a name that a native tool holds, as reported in [`Collision::kept_by`].
pub const NATIVE_OWNER: &str = "roster";

/// Hex digits of the hash suffix given to names that had to be sanitized or cut.
const HASH_LEN: usize = 8;

/// Whether servers' tools are exposed as `server<sep>tool` or by their bare names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NamingMode {
    /// Always prefix: `server__tool`.
    #[default]
    Always,
    /// Prefix only when more than one server is configured.
    Conditional,
    /// Bare names; on a clash the first server in config order keeps the bare name and the
    /// other server's tool is exposed prefixed (reported as a [`Collision`]).
    Never,
}

/// How exposed names are formed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NamingConfig {
    /// Prefixing mode.
    pub mode: NamingMode,
    /// What goes between the server name and the tool name.
    pub separator: String,
}

impl Default for NamingConfig {
    fn default() -> Self {
        NamingConfig {
            mode: NamingMode::Always,
            separator: "__".to_string(),
        }
    }
}

/// A naming configuration that cannot produce readable names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NamingError {
    /// The separator is empty.
    #[error("the tool name separator is empty; set it to something like \"__\"")]
    EmptySeparator,
    /// The separator has characters outside `[A-Za-z0-9_.-]` or is too long.
    #[error(
        "the tool name separator {0:?} must be 1-8 characters of A-Z, a-z, 0-9, '_', '.' or '-'"
    )]
    InvalidSeparator(String),
    /// A server name that leaves no room for a tool name in `server<sep>tool` (64 characters).
    #[error(
        "server name {server:?} is {len} characters; with the separator {separator:?} and at least \
         one character of tool name, exposed names allow at most {max}: shorten it"
    )]
    ServerNameTooLong {
        /// The server's name.
        server: String,
        /// Its length in bytes.
        len: usize,
        /// The separator in use.
        separator: String,
        /// The longest server name that still leaves room.
        max: usize,
    },
}

impl NamingConfig {
    /// Checks that the separator can appear in an exposed name.
    ///
    /// An invalid separator still yields valid, unique names (they are all hashed), but they are
    /// unreadable, so configuration should reject it.
    pub fn validate(&self) -> Result<(), NamingError> {
        if self.separator.is_empty() {
            return Err(NamingError::EmptySeparator);
        }
        if self.separator.len() > 8 || !self.separator.bytes().all(is_name_byte) {
            return Err(NamingError::InvalidSeparator(self.separator.clone()));
        }
        Ok(())
    }

    /// The longest server name that leaves room for one character of tool name in
    /// `server<sep>tool`.
    pub fn max_server_name_len(&self) -> usize {
        MAX_NAME_LEN.saturating_sub(self.separator.len() + 1)
    }

    /// Checks that `server`'s prefixed names can hold a tool name. Only modes that may prefix
    /// are checked: with `never` a prefix is used only to settle a clash, and a name that does
    /// not fit is then hashed like any other.
    pub fn check_server_name(&self, server: &str) -> Result<(), NamingError> {
        let max = self.max_server_name_len();
        if self.mode != NamingMode::Never && server.len() > max {
            return Err(NamingError::ServerNameTooLong {
                server: server.to_owned(),
                len: server.len(),
                separator: self.separator.clone(),
                max,
            });
        }
        Ok(())
    }

    /// Whether tools are prefixed when `server_count` servers are configured.
    pub fn prefixes(&self, server_count: usize) -> bool {
        match self.mode {
            NamingMode::Always => true,
            NamingMode::Conditional => server_count > 1,
            NamingMode::Never => false,
        }
    }

    /// Candidate `k` of the chain for `tool` of `server` (see the module docs). `bare_first`
    /// is `!self.prefixes(server_count)`. Every candidate is a valid exposed name.
    pub fn candidate(&self, server: &str, tool: &str, bare_first: bool, k: u32) -> String {
        match (bare_first, k) {
            (true, 0) => self.bare(tool),
            (true, k) => self.prefixed(server, tool, k - 1),
            (false, k) => self.prefixed(server, tool, k),
        }
    }

    fn bare(&self, tool: &str) -> String {
        if is_valid_exposed_name(tool) {
            return tool.to_string();
        }
        // Hashed over the tool name alone: the same odd name from two servers must still clash
        // as bare names, so the first server in config order keeps it.
        let hash = xxh3_64_with_seed(tool.as_bytes(), 0);
        hashed([tool].into_iter(), hash)
    }

    fn prefixed(&self, server: &str, tool: &str, salt: u32) -> String {
        if salt == 0 && self.prefix_is_exact(server, tool) {
            let mut name = String::with_capacity(server.len() + self.separator.len() + tool.len());
            name.push_str(server);
            name.push_str(&self.separator);
            name.push_str(tool);
            return name;
        }
        hashed(
            [server, self.separator.as_str(), tool].into_iter(),
            pair_hash(server, tool, salt),
        )
    }

    /// `server<sep>tool` can be used verbatim only when it is valid and cannot be read back as
    /// another pair: the first separator in it must be the one after the server name
    /// (`a__` + `b__c` and `a__b` + `__` + `c` would otherwise meet, as would `a_` + `__` + `b`
    /// and `a` + `__` + `_b`).
    fn prefix_is_exact(&self, server: &str, tool: &str) -> bool {
        let sep = self.separator.as_str();
        let len = server.len() + sep.len() + tool.len();
        if sep.is_empty() || len > MAX_NAME_LEN || server.is_empty() || tool.is_empty() {
            return false;
        }
        if !(server.bytes().all(is_name_byte)
            && sep.bytes().all(is_name_byte)
            && tool.bytes().all(is_name_byte))
        {
            return false;
        }
        // Only the tail of the server name can run into the separator.
        let tail_start = server.len().saturating_sub(sep.len() - 1);
        let mut probe = String::with_capacity(2 * sep.len());
        probe.push_str(&server[tail_start..]);
        probe.push_str(sep);
        !server.contains(sep) && probe.find(sep) == Some(server.len() - tail_start)
    }
}

/// A tool that could not be exposed under its preferred name because another holder keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Collision {
    /// The name both wanted (the bare name in `never` mode).
    pub name: String,
    /// The server that keeps `name` (earlier in config order), or [`NATIVE_OWNER`] when it is a
    /// native tool's name.
    pub kept_by: String,
    /// The server whose tool had to take another name.
    pub server: String,
    /// The name that tool is exposed as instead.
    pub exposed_as: String,
}

/// Whether `name` is a native tool's name.
pub fn is_native(name: &str) -> bool {
    NATIVE_TOOLS.contains(&name)
}

/// Whether `name` is 1–64 characters of `[A-Za-z0-9_.-]`.
pub fn is_valid_exposed_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN && name.bytes().all(is_name_byte)
}

/// Whether `b` may appear in an exposed name (and so in a server name or the separator):
/// `[A-Za-z0-9_.-]`.
pub fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// The parts, sanitized and concatenated, cut to leave room for `_` and the hash.
fn hashed<'a>(parts: impl Iterator<Item = &'a str>, hash: u64) -> String {
    const BASE_MAX: usize = MAX_NAME_LEN - HASH_LEN - 1;
    let mut name = String::with_capacity(MAX_NAME_LEN);
    'parts: for part in parts {
        for c in part.chars() {
            if name.len() == BASE_MAX {
                break 'parts;
            }
            let ok = c.is_ascii() && is_name_byte(c as u8);
            name.push(if ok { c } else { '_' });
        }
    }
    name.push('_');
    let hex = format!("{hash:016x}");
    name.push_str(&hex[..HASH_LEN]);
    name
}

/// A hash of the pair that no other pair shares by construction of the input (the server
/// name's length comes first), salted so a contested hashed name has further variants.
fn pair_hash(server: &str, tool: &str, salt: u32) -> u64 {
    let mut bytes = Vec::with_capacity(8 + server.len() + tool.len());
    bytes.extend_from_slice(&(server.len() as u64).to_le_bytes());
    bytes.extend_from_slice(server.as_bytes());
    bytes.extend_from_slice(tool.as_bytes());
    xxh3_64_with_seed(&bytes, 1 + u64::from(salt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn always() -> NamingConfig {
        NamingConfig::default()
    }

    #[test]
    fn a_server_name_must_leave_room_for_a_tool_name() {
        let naming = always();
        assert_eq!(naming.max_server_name_len(), 61);
        let longest = "s".repeat(61);
        assert!(naming.check_server_name(&longest).is_ok());
        assert_eq!(
            naming.candidate(&longest, "t", false, 0).len(),
            MAX_NAME_LEN
        );
        let too_long = "s".repeat(62);
        let err = naming
            .check_server_name(&too_long)
            .expect_err("no room left");
        assert!(err.to_string().contains("at most 61"), "{err}");
        assert!(err.to_string().contains(&too_long), "{err}");
        let never = NamingConfig {
            mode: NamingMode::Never,
            ..always()
        };
        assert!(never.check_server_name(&too_long).is_ok());
    }

    #[test]
    fn default_is_always_with_double_underscore() {
        let naming = NamingConfig::default();
        assert_eq!(naming.mode, NamingMode::Always);
        assert_eq!(naming.separator, "__");
        assert_eq!(naming.validate(), Ok(()));
    }

    #[test]
    fn modes_deserialize_lowercase() {
        let mode: NamingMode = serde_json::from_str("\"conditional\"").expect("lowercase mode");
        assert_eq!(mode, NamingMode::Conditional);
        let config: NamingConfig =
            serde_json::from_value(serde_json::json!({"mode": "never"})).expect("partial config");
        assert_eq!(config.separator, "__");
        assert_eq!(config.mode, NamingMode::Never);
    }

    #[test]
    fn bad_separators_are_rejected_by_name() {
        let mut naming = always();
        naming.separator = String::new();
        assert_eq!(naming.validate(), Err(NamingError::EmptySeparator));
        naming.separator = "/".into();
        let err = naming.validate().expect_err("slash is not allowed");
        assert!(err.to_string().contains("\"/\""), "{err}");
    }

    #[test]
    fn clean_names_are_used_verbatim() {
        let naming = always();
        assert_eq!(
            naming.candidate("github", "create_issue", false, 0),
            "github__create_issue"
        );
        assert_eq!(
            naming.candidate("github", "create_issue", true, 0),
            "create_issue"
        );
        assert_eq!(
            naming.candidate("github", "create_issue", true, 1),
            "github__create_issue"
        );
    }

    #[test]
    fn sanitized_names_do_not_meet_clean_ones() {
        let naming = always();
        let clean = naming.candidate("s", "a_b", false, 0);
        let spaced = naming.candidate("s", "a b", false, 0);
        assert_eq!(clean, "s__a_b");
        assert_ne!(clean, spaced);
        assert!(spaced.starts_with("s__a_b_"), "{spaced}");
        assert_ne!(naming.candidate("s", "a b", true, 0), "a_b");
    }

    #[test]
    fn separator_ambiguity_is_hashed_away() {
        let naming = always();
        let one = naming.candidate("a", "b__c", false, 0);
        let two = naming.candidate("a__b", "c", false, 0);
        assert_eq!(one, "a__b__c");
        assert_ne!(one, two);
        let three = naming.candidate("a_", "b", false, 0);
        let four = naming.candidate("a", "_b", false, 0);
        assert_ne!(three, four);
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let naming = always();
        let tool = "t".repeat(100);
        let name = naming.candidate("server", &tool, false, 0);
        assert_eq!(name.len(), MAX_NAME_LEN);
        assert_eq!(name, naming.candidate("server", &tool, false, 0));
        let other = naming.candidate("server", &format!("{tool}x"), false, 0);
        assert_ne!(name, other);
    }

    #[test]
    fn salted_candidates_differ() {
        let naming = always();
        let names: std::collections::HashSet<String> = (0..20)
            .map(|k| naming.candidate("s", "t", false, k))
            .collect();
        assert_eq!(names.len(), 20);
    }

    fn any_name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_]{0,6}",
            "[A-Za-z0-9_.-]{60,70}",
            "\\PC{0,10}",
            ".{0,3}",
            "[ a-z/_]{1,5}",
            "(__|_|a){1,4}",
        ]
    }

    proptest! {
        #[test]
        fn every_candidate_is_valid(server in any_name(), tool in any_name(), bare in any::<bool>(), k in 0u32..4) {
            for naming in [always(), NamingConfig { mode: NamingMode::Never, separator: ".".into() }, NamingConfig { mode: NamingMode::Never, separator: "/".into() }] {
                let name = naming.candidate(&server, &tool, bare, k);
                prop_assert!(is_valid_exposed_name(&name), "{:?}", name);
            }
        }

        #[test]
        fn distinct_pairs_get_distinct_first_prefixed_names(
            a in (any_name(), any_name()), b in (any_name(), any_name())
        ) {
            prop_assume!(a != b);
            let naming = always();
            prop_assert_ne!(
                naming.candidate(&a.0, &a.1, false, 0),
                naming.candidate(&b.0, &b.1, false, 0)
            );
        }
    }
}
