//! How a name finds its tool: [`ToolRegistry::route`] for an exposed name,
//! [`ToolRegistry::route_call`] for a `tools/call` name (exposed, or a server's own), and
//! [`ToolLookup::presence`] for a tool a skill names.

use super::{ExposedTool, ServerSlot, ToolRegistry, exposed_tool};
use crate::naming::is_native;
use crate::tool::{Tool, ToolLookup, ToolPresence};

/// Where a call of an exposed tool goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Route<'a> {
    /// The server that offers the tool.
    pub server: &'a str,
    /// The tool as that server listed it; `tool.name` is the name to call it by there.
    pub tool: &'a Tool,
}

/// A `tools/call` name that reaches no tool, or more than one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallRouteError {
    /// Neither an exposed name nor any listed server's own tool name.
    #[error("unknown tool {0:?}; list the tools again with tools/list")]
    Unknown(String),
    /// Not an exposed name, and several servers have a tool of this own name.
    #[error(
        "tool {name:?} is not an exposed name and {} servers have a tool of that name; call it by \
         one of its exposed names: {}",
        exposed.len(),
        exposed.join(", ")
    )]
    Ambiguous {
        /// The name called.
        name: String,
        /// The exposed name of each server's tool of that name, servers in config order.
        exposed: Vec<String>,
    },
}

impl ToolRegistry {
    /// Where a call of `exposed_name` goes.
    pub fn route(&self, exposed_name: &str) -> Option<Route<'_>> {
        let pair = *self.holders.get(exposed_name.as_bytes())?;
        let server = &self.servers[pair.server as usize];
        let entry = server.slots[pair.slot as usize].as_ref()?;
        Some(Route {
            server: &server.name,
            tool: &entry.tool,
        })
    }

    /// The tool a `tools/call` of `name` reaches: the tool exposed under `name`, else the one
    /// tool a listed server offers under that *own* name (MCP Apps call their server's tools
    /// so). A native tool's name only ever routes as an exposed name: native tools win.
    pub fn route_call(&self, name: &str) -> Result<ExposedTool<'_>, CallRouteError> {
        if let Some(pair) = self.holders.get(name.as_bytes()) {
            let server = &self.servers[pair.server as usize];
            if let Some(entry) = server.slots[pair.slot as usize].as_ref() {
                return Ok(exposed_tool(server, entry));
            }
        }
        if is_native(name) {
            return Err(CallRouteError::Unknown(name.to_owned()));
        }
        let mut owners = self.servers.iter().filter_map(|server| {
            let slot = *server.by_name.get(name)?;
            let entry = server.slots[slot as usize].as_ref()?;
            Some(exposed_tool(server, entry))
        });
        let Some(first) = owners.next() else {
            return Err(CallRouteError::Unknown(name.to_owned()));
        };
        let rest: Vec<ExposedTool<'_>> = owners.collect();
        if rest.is_empty() {
            return Ok(first);
        }
        let exposed = std::iter::once(first)
            .chain(rest)
            .map(|t| t.exposed_name.to_owned())
            .collect();
        Err(CallRouteError::Ambiguous {
            name: name.to_owned(),
            exposed,
        })
    }

    /// The servers a reference names by prefix (`server<sep>…`, also with the server name
    /// sanitized as exposed names have it).
    fn prefixed_owners<'a>(&'a self, reference: &'a str) -> impl Iterator<Item = &'a ServerSlot> {
        let sep = self.naming.separator.as_str();
        self.servers.iter().filter(move |server| {
            let rest = reference.strip_prefix(server.name.as_str()).or_else(|| {
                let sanitized: String = server
                    .name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                reference.strip_prefix(sanitized.as_str())
            });
            !sep.is_empty() && rest.is_some_and(|rest| rest.starts_with(sep))
        })
    }
}

impl ToolLookup for ToolRegistry {
    /// Present when `reference` routes. Otherwise the owning server decides: the one whose name
    /// prefixes the reference, or, when tools are exposed bare, every server. Missing when the
    /// owners are all listed (or no configured server can own it), Unknown while one is not.
    fn presence(&self, reference: &str) -> ToolPresence {
        if self.holders.contains_key(reference.as_bytes()) {
            return ToolPresence::Present;
        }
        let mut owners = self.prefixed_owners(reference).peekable();
        let any_unlisted = if owners.peek().is_some() {
            owners.any(|s| !s.listed)
        } else if self.bare_first() {
            self.servers.iter().any(|s| !s.listed)
        } else {
            false
        };
        if any_unlisted {
            ToolPresence::Unknown
        } else {
            ToolPresence::Missing
        }
    }
}
