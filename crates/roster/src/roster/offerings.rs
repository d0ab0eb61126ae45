//! The servers' prompts, resources and completions through [`Roster`]: listed under their
//! exposed names, each request sent to the server that owns it; resource watches.

use serde_json::{Map, Value};

use super::Roster;
use crate::servers::watches::ResourceWatches;
use crate::servers::{
    Answer, CallOptions, OfferingsGeneration, PromptEntry, ResourceUpdate, ResourceWatch,
    RouteError,
};
use crate::sync::lock;

impl Roster {
    /// The servers' prompts under their exposed names (the tools' naming rules), servers in
    /// config order.
    pub fn prompts(&self) -> Vec<PromptEntry> {
        lock(&self.rt.offerings).prompts()
    }

    /// The servers' resources as `(server, resource)`, servers in config order; a URI two
    /// servers list belongs to the first.
    pub fn resources(&self) -> Vec<(String, Value)> {
        lock(&self.rt.offerings).resources()
    }

    /// The servers' resource templates as `(server, template)`, servers in config order.
    pub fn resource_templates(&self) -> Vec<(String, Value)> {
        lock(&self.rt.offerings).templates()
    }

    /// A watch that changes whenever the prompt set or the resource set changes.
    pub fn offerings_changed(&self) -> tokio::sync::watch::Receiver<OfferingsGeneration> {
        self.rt.offerings_changed.subscribe()
    }

    /// `prompts/get` of an exposed prompt, sent to its server under the server's own name;
    /// returns the server's `GetPromptResult` JSON.
    pub async fn get_prompt(
        &self,
        exposed_name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Value, RouteError> {
        self.get_prompt_with(exposed_name, arguments, CallOptions::default())
            .await
    }

    /// [`Roster::get_prompt`] for a caller (who answers the server's requests, see
    /// [`crate::servers::relay`]); `options.timeout` unset means the server's `list_timeout`.
    pub async fn get_prompt_with(
        &self,
        exposed_name: &str,
        arguments: Option<Map<String, Value>>,
        options: CallOptions,
    ) -> Result<Value, RouteError> {
        let (server, name) = lock(&self.rt.offerings)
            .prompt_route(exposed_name)
            .ok_or_else(|| RouteError::UnknownPrompt(exposed_name.to_owned()))?;
        let mut params = serde_json::json!({ "name": name });
        if let Some(arguments) = arguments {
            params["arguments"] = Value::Object(arguments);
        }
        self.forward_interactive(&server, "prompts/get", params, options)
            .await
    }

    /// `resources/read` of `uri`, sent to the server whose listing holds it (or whose template
    /// matches it); returns the server's `ReadResourceResult` JSON.
    pub async fn read_resource(&self, uri: &str) -> Result<Value, RouteError> {
        self.read_resource_with(uri, CallOptions::default()).await
    }

    /// [`Roster::read_resource`] for a caller, as [`Roster::get_prompt_with`].
    pub async fn read_resource_with(
        &self,
        uri: &str,
        options: CallOptions,
    ) -> Result<Value, RouteError> {
        let server = lock(&self.rt.offerings)
            .resource_owner(uri)
            .ok_or_else(|| RouteError::UnknownResource(uri.to_owned()))?;
        let params = serde_json::json!({ "uri": uri });
        self.forward_interactive(&server, "resources/read", params, options)
            .await
    }

    /// `completion/complete` for a `ref/prompt` (by exposed name, sent under the server's own
    /// name) or a `ref/resource` (by template or URI); returns the server's `CompleteResult`.
    pub async fn complete(&self, mut params: Value) -> Result<Value, RouteError> {
        let reference = params.get("ref").cloned().unwrap_or(Value::Null);
        let unknown = || RouteError::UnknownReference(reference.to_string());
        let kind = reference.get("type").and_then(Value::as_str);
        let server = match kind {
            Some("ref/prompt") => {
                let exposed = reference.get("name").and_then(Value::as_str).unwrap_or("");
                let (server, name) = lock(&self.rt.offerings)
                    .prompt_route(exposed)
                    .ok_or_else(unknown)?;
                params["ref"]["name"] = Value::String(name);
                server
            }
            Some("ref/resource") => {
                let uri = reference.get("uri").and_then(Value::as_str).unwrap_or("");
                lock(&self.rt.offerings)
                    .template_owner(uri)
                    .ok_or_else(unknown)?
            }
            _ => return Err(unknown()),
        };
        self.forward(&server, "completion/complete", params).await
    }

    /// Watches a server resource's updates for one client session: the first watch of a URI
    /// subscribes at the server that owns it (`resources/subscribe`, or a
    /// `subscriptions/listen` stream on a 2026-07-28 server); dropping the last one
    /// unsubscribes there. The updates arrive through [`Roster::resource_updates`].
    pub async fn watch_resource(&self, uri: &str) -> Result<ResourceWatch, RouteError> {
        ResourceWatches::watch(&self.rt, uri).await
    }

    /// Whether a watch of `uri` could be made now: its server is connected and declares
    /// `resources.subscribe`.
    pub fn can_watch_resource(&self, uri: &str) -> bool {
        ResourceWatches::watchable_at(&self.rt, uri).is_ok()
    }

    /// Whether any connected server takes resource watches (declares `resources.subscribe`).
    pub fn takes_resource_watches(&self) -> bool {
        self.rt
            .slots()
            .into_iter()
            .filter_map(|slot| slot.connection())
            .any(|connection| connection.advertises_subscribe())
    }

    /// Every server's `notifications/resources/updated` from now on (a slow reader skips
    /// ahead: it is told how many it missed).
    pub fn resource_updates(&self) -> tokio::sync::broadcast::Receiver<ResourceUpdate> {
        self.rt.resource_watches.updates()
    }

    async fn forward_interactive(
        &self,
        server: &str,
        method: &str,
        params: Value,
        mut options: CallOptions,
    ) -> Result<Value, RouteError> {
        let slot = self
            .rt
            .slot(server)
            .ok_or_else(|| RouteError::Unavailable(server.to_owned()))?;
        let connection = slot
            .connection()
            .ok_or_else(|| RouteError::Unavailable(server.to_owned()))?;
        if options.timeout.is_none() {
            options.timeout = Some(slot.config.list_timeout);
        }
        connection
            .interactive(method, params, options)
            .await
            .and_then(Answer::into_value)
            .map_err(|source| RouteError::Request {
                server: server.to_owned(),
                source: Box::new(source),
            })
    }

    async fn forward(
        &self,
        server: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, RouteError> {
        let connection = self
            .rt
            .slot(server)
            .and_then(|slot| slot.connection())
            .ok_or_else(|| RouteError::Unavailable(server.to_owned()))?;
        connection
            .request(method, params)
            .await
            .map_err(|source| RouteError::Request {
                server: server.to_owned(),
                source: Box::new(source),
            })
    }

    /// `resources/read` of one file of a synced skill at the server that serves it.
    pub async fn read_skill_file(&self, server: &str, uri: &str) -> Result<Value, RouteError> {
        self.forward(server, "resources/read", serde_json::json!({ "uri": uri }))
            .await
    }
}
