//! [`Offerings`]: the servers' prompts, resources and resource templates, aggregated the way
//! tools are. Prompts get exposed names by the tools' naming rules (in `never` mode the first
//! server in config order keeps a bare name); resources keep their URIs, and a URI belongs to
//! the first server whose listing holds it (or, failing that, whose template matches it).

use std::collections::{BTreeMap, HashSet};

use roster_core::NamingConfig;
use serde_json::Value;

use super::RequestError;

/// A `prompts/get`, `resources/read`, `completion/complete` or resource subscription could not
/// be routed or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// No prompt is exposed under that name (list the prompts again).
    #[error("no prompt named `{0}` is available; list the prompts again")]
    UnknownPrompt(String),
    /// No server lists that resource URI nor has a template that matches it.
    #[error("no server offers the resource `{0}`; list the resources again")]
    UnknownResource(String),
    /// The completion reference names no prompt or resource template of a server.
    #[error("the completion reference {0} names no prompt or resource template of a server")]
    UnknownReference(String),
    /// The owning server is restarting or disconnected.
    #[error("the server `{0}` is not connected right now")]
    Unavailable(String),
    /// The resource's server does not take subscriptions (no `resources.subscribe`).
    #[error(
        "the resource `{uri}` belongs to server `{server}`, which does not support subscriptions (it does not declare resources.subscribe)"
    )]
    NotSubscribable {
        /// The server owning the resource.
        server: String,
        /// The resource.
        uri: String,
    },
    /// The request failed on the way or the server answered with an error.
    #[error("the request to server `{server}` failed: {source}")]
    Request {
        /// The server.
        server: String,
        /// What happened (boxed: a server's error data can be large).
        #[source]
        source: Box<RequestError>,
    },
}

/// What one server offers besides tools, as its last listings gave it (raw JSON items).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ServerOfferings {
    pub(crate) prompts: Vec<Value>,
    pub(crate) resources: Vec<Value>,
    pub(crate) templates: Vec<Value>,
    /// Its skills (SEP-2640), when roster takes them (`skills`).
    pub(crate) skills: Vec<super::skills::SyncedSkill>,
}

/// Which client-visible sets an update changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Changed {
    pub(crate) prompts: bool,
    pub(crate) resources: bool,
    /// The server's skills changed.
    pub(crate) skills: bool,
}

/// One server prompt under the name clients get it by.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptEntry {
    /// The name clients get it by.
    pub exposed_name: String,
    /// The server offering it.
    pub server: String,
    /// The prompt as the server listed it (its own name).
    pub prompt: Value,
}

impl PromptEntry {
    /// The prompt as a client should see it: the server's definition under the exposed name.
    pub fn exposed_prompt(&self) -> Value {
        let mut prompt = self.prompt.clone();
        if let Some(object) = prompt.as_object_mut() {
            object.insert("name".to_owned(), Value::String(self.exposed_name.clone()));
        }
        prompt
    }

    fn own_name(&self) -> &str {
        self.prompt
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// Every server's prompts, resources and templates.
pub(crate) struct Offerings {
    naming: NamingConfig,
    order: Vec<String>,
    by_server: BTreeMap<String, ServerOfferings>,
}

impl Offerings {
    pub(crate) fn new(order: Vec<String>, naming: NamingConfig) -> Self {
        Offerings {
            naming,
            order,
            by_server: BTreeMap::new(),
        }
    }

    /// A server a reload added: its offerings come after those of the servers before it.
    pub(crate) fn add_server(&mut self, server: &str) {
        if !self.order.iter().any(|name| name == server) {
            self.order.push(server.to_owned());
        }
    }

    /// One server's offerings, if it was listed.
    pub(crate) fn by_server(&self, server: &str) -> Option<&ServerOfferings> {
        self.by_server.get(server)
    }

    /// Replaces one server's offerings.
    pub(crate) fn set(&mut self, server: &str, offerings: ServerOfferings) -> Changed {
        let before = self.by_server.get(server).cloned().unwrap_or_default();
        let changed = Changed {
            prompts: before.prompts != offerings.prompts,
            resources: before.resources != offerings.resources
                || before.templates != offerings.templates,
            skills: before.skills != offerings.skills,
        };
        self.by_server.insert(server.to_owned(), offerings);
        changed
    }

    /// The servers in config order.
    pub(crate) fn order(&self) -> &[String] {
        &self.order
    }

    /// Every server's skills that has any, servers in config order.
    pub(crate) fn skills(&self) -> impl Iterator<Item = (&str, &[super::skills::SyncedSkill])> {
        self.in_order()
            .filter(|(_, o)| !o.skills.is_empty())
            .map(|(server, o)| (server, o.skills.as_slice()))
    }

    fn in_order(&self) -> impl Iterator<Item = (&str, &ServerOfferings)> {
        self.order
            .iter()
            .filter_map(|name| self.by_server.get(name).map(|o| (name.as_str(), o)))
    }

    /// The prompts under their exposed names: servers in config order, each server's prompts
    /// in its listing order.
    pub(crate) fn prompts(&self) -> Vec<PromptEntry> {
        let bare_first = !self.naming.prefixes(self.order.len());
        let mut taken = HashSet::new();
        let mut entries = Vec::new();
        for (server, offerings) in self.in_order() {
            for prompt in &offerings.prompts {
                let Some(name) = prompt.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let exposed = (0..)
                    .map(|k| self.naming.candidate(server, name, bare_first, k))
                    .find(|candidate| !taken.contains(candidate))
                    .unwrap_or_default();
                taken.insert(exposed.clone());
                entries.push(PromptEntry {
                    exposed_name: exposed,
                    server: server.to_owned(),
                    prompt: prompt.clone(),
                });
            }
        }
        entries
    }

    /// `(server, the server's own name)` of an exposed prompt.
    pub(crate) fn prompt_route(&self, exposed: &str) -> Option<(String, String)> {
        self.prompts()
            .into_iter()
            .find(|p| p.exposed_name == exposed)
            .map(|p| (p.server.clone(), p.own_name().to_owned()))
    }

    /// Every server's resources, servers in config order; a URI a former server lists already
    /// is left out (it routes there).
    pub(crate) fn resources(&self) -> Vec<(String, Value)> {
        let mut seen = HashSet::new();
        let mut items = Vec::new();
        for (server, offerings) in self.in_order() {
            for resource in &offerings.resources {
                let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
                if seen.insert(uri.to_owned()) {
                    items.push((server.to_owned(), resource.clone()));
                }
            }
        }
        items
    }

    /// Every server's resource templates, servers in config order.
    pub(crate) fn templates(&self) -> Vec<(String, Value)> {
        self.in_order()
            .flat_map(|(server, o)| o.templates.iter().map(|t| (server.to_owned(), t.clone())))
            .collect()
    }

    /// The server a `resources/read` of `uri` goes to: the first whose listing holds the URI,
    /// else the first with a template that matches it.
    pub(crate) fn resource_owner(&self, uri: &str) -> Option<String> {
        let listed = self.in_order().find(|(_, o)| {
            o.resources
                .iter()
                .any(|r| r.get("uri").and_then(Value::as_str) == Some(uri))
        });
        let templated = || {
            self.in_order().find(|(_, o)| {
                o.templates.iter().any(|t| {
                    t.get("uriTemplate")
                        .and_then(Value::as_str)
                        .is_some_and(|template| template_matches(template, uri))
                })
            })
        };
        listed.or_else(templated).map(|(s, _)| s.to_owned())
    }

    /// The server owning a completion reference to a resource template (or resource) `uri`.
    pub(crate) fn template_owner(&self, uri: &str) -> Option<String> {
        self.in_order()
            .find(|(_, o)| {
                o.templates
                    .iter()
                    .any(|t| t.get("uriTemplate").and_then(Value::as_str) == Some(uri))
            })
            .map(|(s, _)| s.to_owned())
            .or_else(|| self.resource_owner(uri))
    }
}

/// Whether `uri` is an expansion of the RFC 6570 `template`: literal text must match exactly
/// and each `{expression}` stands for one or more characters (`/` only for `{+x}`/`{/x}`-style
/// operators, which may span segments).
pub(crate) fn template_matches(template: &str, uri: &str) -> bool {
    enum Part<'a> {
        Literal(&'a str),
        Var { spans_slash: bool },
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return template == uri;
        };
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let expression = &rest[open + 1..open + close];
        parts.push(Part::Var {
            spans_slash: expression.starts_with(['+', '#', '/']),
        });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }

    fn matches(parts: &[Part<'_>], uri: &str) -> bool {
        match parts.split_first() {
            None => uri.is_empty(),
            Some((Part::Literal(text), tail)) => {
                uri.strip_prefix(text).is_some_and(|r| matches(tail, r))
            }
            Some((Part::Var { spans_slash }, tail)) => {
                let stop = if *spans_slash {
                    uri.len()
                } else {
                    uri.find(['/', '?', '#']).unwrap_or(uri.len())
                };
                (1..=stop)
                    .filter(|&end| uri.is_char_boundary(end))
                    .any(|end| matches(tail, &uri[end..]))
            }
        }
    }
    matches(&parts, uri)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roster_core::NamingMode;
    use serde_json::json;

    fn offerings(mode: NamingMode) -> Offerings {
        let naming = NamingConfig {
            mode,
            ..NamingConfig::default()
        };
        let mut o = Offerings::new(vec!["a".to_owned(), "b".to_owned()], naming);
        o.set(
            "a",
            ServerOfferings {
                prompts: vec![json!({"name": "greet"})],
                resources: vec![json!({"uri": "test://x", "name": "x"})],
                templates: vec![json!({"uriTemplate": "test://t/{id}/data", "name": "t"})],
                skills: Vec::new(),
            },
        );
        o.set(
            "b",
            ServerOfferings {
                prompts: vec![json!({"name": "greet"}), json!({"name": "other"})],
                resources: vec![
                    json!({"uri": "test://x", "name": "x2"}),
                    json!({"uri": "test://y", "name": "y"}),
                ],
                templates: Vec::new(),
                skills: Vec::new(),
            },
        );
        o
    }

    #[test]
    fn never_mode_gives_bare_names_and_the_first_server_wins() {
        let o = offerings(NamingMode::Never);
        let names: Vec<_> = o.prompts().into_iter().map(|p| p.exposed_name).collect();
        assert_eq!(names, vec!["greet", "b__greet", "other"]);
        assert_eq!(
            o.prompt_route("b__greet"),
            Some(("b".to_owned(), "greet".to_owned()))
        );
        assert_eq!(
            o.prompt_route("greet"),
            Some(("a".to_owned(), "greet".to_owned()))
        );
        assert_eq!(o.prompt_route("nope"), None);
    }

    #[test]
    fn always_mode_prefixes_every_prompt() {
        let o = offerings(NamingMode::Always);
        let names: Vec<_> = o.prompts().into_iter().map(|p| p.exposed_name).collect();
        assert_eq!(names, vec!["a__greet", "b__greet", "b__other"]);
        assert_eq!(o.prompts()[0].exposed_prompt(), json!({"name": "a__greet"}));
    }

    #[test]
    fn resources_route_by_uri_then_by_template() {
        let o = offerings(NamingMode::Never);
        let uris: Vec<_> = o
            .resources()
            .into_iter()
            .map(|(s, r)| (s, r["uri"].clone()))
            .collect();
        assert_eq!(
            uris,
            vec![
                ("a".to_owned(), json!("test://x")),
                ("b".to_owned(), json!("test://y"))
            ]
        );
        assert_eq!(o.resource_owner("test://y").as_deref(), Some("b"));
        assert_eq!(o.resource_owner("test://t/42/data").as_deref(), Some("a"));
        assert_eq!(o.resource_owner("test://t/42/other"), None);
        assert_eq!(o.template_owner("test://t/{id}/data").as_deref(), Some("a"));
    }

    #[test]
    fn a_change_is_reported_per_kind() {
        let mut o = offerings(NamingMode::Never);
        let same = o.by_server["b"].clone();
        assert_eq!(o.set("b", same), Changed::default());
        let mut fewer = o.by_server["b"].clone();
        fewer.prompts.pop();
        assert_eq!(
            o.set("b", fewer),
            Changed {
                prompts: true,
                resources: false,
                skills: false,
            }
        );
        assert_eq!(
            o.set("a", ServerOfferings::default()),
            Changed {
                prompts: true,
                resources: true,
                skills: false,
            }
        );
    }

    #[test]
    fn templates_match_expansions_only() {
        assert!(template_matches("test://t/{id}/data", "test://t/1/data"));
        assert!(!template_matches("test://t/{id}/data", "test://t//data"));
        assert!(!template_matches("test://t/{id}/data", "test://t/1/2/data"));
        assert!(template_matches("file://{+path}", "file://a/b/c"));
        assert!(template_matches("plain://x", "plain://x"));
        assert!(!template_matches("plain://x", "plain://y"));
    }
}
