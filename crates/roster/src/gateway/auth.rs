//! Who is calling: `[[clients]]` bearer tokens, the subscriptions they hold and what they may
//! use.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::config::{AlwaysListed, Permissions, ToolsMode};

pub use crate::config::ClientConfig as ClientEntry;

/// A client that cannot be admitted as configured.
#[derive(Debug, thiserror::Error)]
pub enum ClientEntryError {
    /// Neither way of giving the token was used.
    #[error("client {0:?} has no token: set token_env or token_sha256")]
    NoToken(String),
    /// The named environment variable is unset or empty.
    #[error("client {name:?}: environment variable {var} (token_env) is not set")]
    MissingEnv {
        /// The client's name.
        name: String,
        /// The variable it names.
        var: String,
    },
    /// The hash is not 64 hex digits.
    #[error("client {0:?}: token_sha256 must be 64 hex digits")]
    BadHash(String),
}

/// A resolved client: its token digest, subscriptions and own settings.
#[derive(Debug, Clone)]
pub(crate) struct AdmittedClient {
    digest: [u8; 32],
    identity: ClientIdentity,
    /// `None`: as `[gateway] delta_notes` says.
    delta_notes: Option<bool>,
    /// `None`: as `[gateway] tools_mode` says.
    tools_mode: Option<ToolsMode>,
    /// `None`: as `[gateway] always` says.
    always: Option<Arc<AlwaysListed>>,
}

/// Who a request comes from, as far as visibility is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The `[[clients]]` name (or the name an `[[auth.rules]]` entry gives a verified token),
    /// or `None` for the default (stdio, or HTTP with no clients).
    pub name: Option<String>,
    /// The subscriptions this caller holds.
    pub subscriptions: Vec<String>,
    /// The tools, prompts and resources this caller may use; what it may not use is answered
    /// as what does not exist.
    pub permissions: Arc<Permissions>,
}

impl ClientIdentity {
    /// Whether this caller may use the tool served under `exposed` (native tools included).
    pub fn may_use_tool(&self, exposed: &str) -> bool {
        self.permissions.tools.permits(exposed)
    }

    /// Whether this caller may use the prompt served under `exposed`.
    pub fn may_use_prompt(&self, exposed: &str) -> bool {
        self.permissions.prompts.permits(exposed)
    }

    /// Whether this caller may use the resource at `uri` (or the template `uri` is).
    pub fn may_use_resource(&self, uri: &str) -> bool {
        self.permissions.resources.permits(uri)
    }
}

impl ClientEntry {
    /// Reads the token (from the environment when `token_env` is used) into a digest.
    pub(crate) fn admit(&self) -> Result<AdmittedClient, ClientEntryError> {
        let digest = match (&self.token_env, &self.token_sha256) {
            (Some(var), _) => match std::env::var(var) {
                Ok(token) if !token.is_empty() => digest(&token),
                _ => {
                    return Err(ClientEntryError::MissingEnv {
                        name: self.name.clone(),
                        var: var.clone(),
                    });
                }
            },
            (None, Some(hex)) => {
                parse_hex(hex).ok_or_else(|| ClientEntryError::BadHash(self.name.clone()))?
            }
            (None, None) => return Err(ClientEntryError::NoToken(self.name.clone())),
        };
        Ok(AdmittedClient {
            digest,
            identity: ClientIdentity {
                name: Some(self.name.clone()),
                subscriptions: self.subscriptions.clone(),
                permissions: Arc::new(self.permissions.clone()),
            },
            delta_notes: self.delta_notes,
            tools_mode: self.tools_mode,
            always: self.always.clone().map(Arc::new),
        })
    }
}

impl AdmittedClient {
    /// The entry's own `tools_mode`, if it sets one.
    pub(crate) fn tools_mode(&self) -> Option<ToolsMode> {
        self.tools_mode
    }
}

/// Resolves every entry; the first that cannot be admitted stops the start.
pub(crate) fn admit_all(entries: &[ClientEntry]) -> Result<Vec<AdmittedClient>, ClientEntryError> {
    entries.iter().map(ClientEntry::admit).collect()
}

/// The client whose token this is. Comparing digests keeps the comparison independent of how
/// much of the token matches.
pub(crate) fn authenticate(clients: &[AdmittedClient], token: &str) -> Option<ClientIdentity> {
    let presented = digest(token);
    clients
        .iter()
        .find(|c| c.digest == presented)
        .map(|c| c.identity.clone())
}

/// Whether `who`'s tool results carry the change note: its `[[clients]]` entry's
/// `delta_notes`, else `default` (the `[gateway]` setting).
pub(crate) fn delta_notes(clients: &[AdmittedClient], who: &ClientIdentity, default: bool) -> bool {
    entry_of(clients, who)
        .and_then(|c| c.delta_notes)
        .unwrap_or(default)
}

/// How `who` is shown the servers' tools: its `[[clients]]` entry's `tools_mode` and `always`,
/// each else the `[gateway]` one (`default`).
pub(crate) fn tool_view(
    clients: &[AdmittedClient],
    who: &ClientIdentity,
    default: &ToolView,
) -> ToolView {
    let Some(entry) = entry_of(clients, who) else {
        return default.clone();
    };
    ToolView {
        mode: entry.tools_mode.unwrap_or(default.mode),
        always: entry
            .always
            .clone()
            .unwrap_or_else(|| default.always.clone()),
        own: entry.tools_mode.is_some() || entry.always.is_some(),
    }
}

/// The `[[clients]]` entry `who` was admitted by, if any.
fn entry_of<'a>(clients: &'a [AdmittedClient], who: &ClientIdentity) -> Option<&'a AdmittedClient> {
    let name = who.name.as_deref()?;
    clients
        .iter()
        .find(|c| c.identity.name.as_deref() == Some(name))
}

/// How a client is shown the servers' tools (`tools_mode`, `always`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolView {
    /// All tools, or search.
    pub(crate) mode: ToolsMode,
    /// In search mode, the tools that stay listed.
    pub(crate) always: Arc<AlwaysListed>,
    /// Set by the client's own entry rather than `[gateway]`: its list is its own.
    pub(crate) own: bool,
}

impl ToolView {
    /// Whether the client searches rather than lists.
    pub(crate) fn searches(&self) -> bool {
        self.mode == ToolsMode::Search
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hash: &str) -> ClientEntry {
        ClientEntry {
            name: "ci".into(),
            token_env: None,
            token_sha256: Some(hash.into()),
            subscriptions: vec!["pro".into()],
            delta_notes: None,
            permissions: Permissions::default(),
            tools_mode: None,
            always: None,
        }
    }

    #[test]
    fn a_hashed_token_admits_only_that_token() {
        // sha256("secret")
        let hash = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b";
        let clients = admit_all(&[entry(hash)]).expect("valid hash");
        let who = authenticate(&clients, "secret").expect("token admitted");
        assert_eq!(who.name.as_deref(), Some("ci"));
        assert_eq!(who.subscriptions, vec!["pro".to_owned()]);
        assert!(authenticate(&clients, "secret ").is_none());
        assert!(authenticate(&clients, "").is_none());
    }

    #[test]
    fn a_clients_delta_notes_overrides_the_gateway_default() {
        // sha256("secret") and sha256("other")
        let quiet = ClientEntry {
            name: "quiet".into(),
            delta_notes: Some(false),
            ..entry("2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b")
        };
        let plain = ClientEntry {
            name: "plain".into(),
            ..entry("d9298a10d1b0735837dc4bd85dac641b0f3cef27a47e5d53a54f2f3f5b2fcffa")
        };
        let clients = admit_all(&[quiet, plain]).expect("valid");
        let who = |token| authenticate(&clients, token).expect("admitted");
        assert!(!delta_notes(&clients, &who("secret"), true));
        assert!(delta_notes(&clients, &who("other"), true));
        assert!(!delta_notes(&clients, &who("other"), false));
        let anonymous = ClientIdentity {
            name: None,
            subscriptions: Vec::new(),
            permissions: Arc::default(),
        };
        assert!(delta_notes(&clients, &anonymous, true));
    }

    #[test]
    fn malformed_or_missing_tokens_are_refused_at_start() {
        assert!(matches!(
            entry("abc").admit(),
            Err(ClientEntryError::BadHash(_))
        ));
        let none = ClientEntry {
            token_sha256: None,
            ..entry("")
        };
        assert!(matches!(none.admit(), Err(ClientEntryError::NoToken(_))));
        let env = ClientEntry {
            token_env: Some("ROSTER_TEST_TOKEN_THAT_IS_NEVER_SET".into()),
            ..none
        };
        assert!(matches!(
            env.admit(),
            Err(ClientEntryError::MissingEnv { .. })
        ));
    }
}
