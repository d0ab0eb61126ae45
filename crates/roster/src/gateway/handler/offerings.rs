//! The servers' offerings (prompts, resources, resource templates, completions) and roster's
//! own skill files, as clients list, read and watch them.

use rmcp::model::{
    CacheScope, CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, GetSkillRequestParams, GetSkillResult, InputRequiredResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, PaginatedRequestParams,
    Prompt, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceTemplate, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::{GatewayHandler, input_round, not_a_call, read_answer};
use crate::gateway::caller::{self, Step};
use crate::gateway::forward::route_error;
use crate::gateway::{ClientIdentity, Gateway, Outcome, watches};
use crate::servers::{InputRound, Needs, RouteError, relay};

impl GatewayHandler {
    pub(super) async fn prompts_page(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.session(&context)
            .begin_turn_keeping_note(Needs::Lists)
            .await;
        let who = self.identity(&context);
        let mut prompts = self.gateway.prompts();
        prompts.retain(|p| who.may_use_prompt(&p.name));
        list_page!(self, ListPromptsResult, &prompts, request, scope_for(&who))
    }

    pub(super) async fn prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if !self.identity(&context).may_use_prompt(&request.name) {
            // Exactly what a prompt no server offers is answered with.
            return Err(route_error(RouteError::UnknownPrompt(request.name)));
        }
        let params = serde_json::json!({"name": request.name, "arguments": request.arguments});
        let input = input_round(request.input_responses, request.request_state);
        let answer = self
            .forward_relayed(&context, "prompts/get", &request.name, params, input)
            .await?;
        Ok(match answer {
            Ok(result) => {
                GetPromptResponse::Complete(read_answer::<GetPromptResult>("prompts/get", result)?)
            }
            Err(input_required) => GetPromptResponse::InputRequired(input_required),
        })
    }

    pub(super) async fn completion(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.session(&context)
            .begin_turn_keeping_note(Needs::Lists)
            .await;
        let params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let who = self.identity(&context);
        let permitted = match &params["ref"] {
            reference if reference["type"] == "ref/prompt" => {
                who.may_use_prompt(reference["name"].as_str().unwrap_or_default())
            }
            reference if reference["type"] == "ref/resource" => {
                who.may_use_resource(reference["uri"].as_str().unwrap_or_default())
            }
            _ => true,
        };
        if !permitted {
            return Err(route_error(RouteError::UnknownReference(
                params["ref"].to_string(),
            )));
        }
        let answer = self.gateway.forward("completion/complete", params).await?;
        read_answer("completion/complete", answer)
    }

    pub(super) async fn resources_page(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.session(&context)
            .begin_turn_keeping_note(Needs::Lists)
            .await;
        let who = self.identity(&context);
        let mut resources = self
            .gateway
            .skills()
            .resources(&self.subscriptions(&context));
        resources.extend(self.gateway.resources());
        resources.retain(|r| who.may_use_resource(&r.uri));
        list_page!(
            self,
            ListResourcesResult,
            &resources,
            request,
            CacheScope::Private
        )
    }

    pub(super) async fn templates_page(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.session(&context)
            .begin_turn_keeping_note(Needs::Lists)
            .await;
        let who = self.identity(&context);
        let mut templates = self.gateway.resource_templates();
        templates.retain(|t| who.may_use_resource(&t.uri_template));
        list_page!(
            self,
            ListResourceTemplatesResult,
            &templates,
            request,
            scope_for(&who)
        )
    }

    pub(super) async fn resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let subscriptions = self.subscriptions(&context);
        let not_found = || {
            ErrorData::resource_not_found(
                format!("resource {} not found", request.uri),
                Some(serde_json::json!({"uri": request.uri})),
            )
        };
        if !self.identity(&context).may_use_resource(&request.uri) {
            // Exactly what a URI no one offers is answered with.
            return Err(if request.uri.starts_with("skill://") {
                not_found()
            } else {
                route_error(RouteError::UnknownResource(request.uri))
            });
        }
        let skills = self.gateway.skills();
        let skill_file = match skills.read_synced(&request.uri, &subscriptions).await {
            Some(Ok(read)) => Some(read),
            Some(Err(why)) => return Err(ErrorData::internal_error(why, None)),
            None => skills
                .files_for(&request.uri, &subscriptions)
                .and_then(|files| files.iter().find_map(|f| f.read_resource(&request.uri))),
        };
        let mut result = match skill_file {
            Some(result) => result,
            // roster's own skill:// resources stay roster's; anything else is a server's.
            None if request.uri.starts_with("skill://") => return Err(not_found()),
            None => {
                let params = serde_json::json!({ "uri": request.uri });
                let input = input_round(
                    request.input_responses.clone(),
                    request.request_state.clone(),
                );
                let answer = self
                    .forward_relayed(&context, "resources/read", &request.uri, params, input)
                    .await?;
                return Ok(match answer {
                    Ok(result) => ReadResourceResponse::Complete(
                        read_answer::<ReadResourceResult>("resources/read", result)?,
                    ),
                    Err(input_required) => ReadResourceResponse::InputRequired(input_required),
                });
            }
        };
        result.ttl_ms = Some(0);
        result.cache_scope = Some(CacheScope::Private);
        Ok(result.into())
    }

    pub(super) async fn skills_page(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let skills = self
            .gateway
            .skills()
            .skill_files(&self.subscriptions(&context));
        // What a caller sees depends on its subscriptions.
        Ok(ListSkillsResult::with_all_items(skills)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }

    pub(super) async fn skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        let subscriptions = self.subscriptions(&context);
        let skills = self.gateway.skills();
        if let Some(entry) = skills.synced_skill(&request.uri, &subscriptions) {
            return Ok(GetSkillResult::new(entry)
                .with_ttl_ms(0)
                .with_cache_scope(CacheScope::Private));
        }
        let files = skills
            .files_for(&request.uri, &subscriptions)
            .ok_or_else(|| unknown_skill_uri(&request.uri))?;
        let found = files.iter().find_map(|f| f.get_skill(&request.uri).ok());
        let mut result = found.ok_or_else(|| unknown_skill_uri(&request.uri))?;
        result.ttl_ms = Some(0);
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    pub(super) async fn skill_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        let subscriptions = self.subscriptions(&context);
        let not_found =
            || ErrorData::invalid_params(format!("{} is not a directory", request.uri), None);
        if let Some(children) = self
            .gateway
            .skills()
            .synced_directory(&request.uri, &subscriptions)
        {
            return Ok(ReadResourceDirectoryResult::with_all_items(children));
        }
        let files = self
            .gateway
            .skills()
            .files_for(&request.uri, &subscriptions)
            .ok_or_else(not_found)?;
        files
            .iter()
            .find_map(|f| f.read_resource_directory(&request.uri).ok())
            .ok_or_else(not_found)
    }

    pub(super) fn watchable_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = requested.supported_by(&self.get_info().capabilities);
        watches::keep_watchable(&mut accepted, self.gateway.roster());
        Some(accepted)
    }

    pub(super) async fn watch(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.identity(&context).may_use_resource(&request.uri) {
            return Err(route_error(RouteError::UnknownResource(request.uri)));
        }
        self.watches
            .watch(self.gateway.roster(), &request.uri)
            .await
    }

    pub(super) async fn unwatch(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.watches.unwatch(&request.uri);
        Ok(())
    }

    /// Starts a turn and forwards `prompts/get` or `resources/read` of `name` (the prompt or
    /// URI) with the client as the caller and its answers to an earlier `input_required`;
    /// the server's result, or an `input_required` result for a 2026-07-28 client.
    async fn forward_relayed(
        &self,
        context: &RequestContext<RoleServer>,
        method: &'static str,
        name: &str,
        params: serde_json::Value,
        input: Option<InputRound>,
    ) -> Result<Result<serde_json::Value, InputRequiredResult>, ErrorData> {
        let session = self.session(context);
        session.begin_turn_keeping_note(Needs::Lists).await;
        let target = format!("{method} {name}");
        let gateway = self.gateway.clone();
        let work = move |relay| -> futures::future::BoxFuture<'static, Outcome> {
            Box::pin(
                async move { Outcome::Forward(gateway.forward_with(method, params, relay).await) },
            )
        };
        let owner = self.identity(context).name;
        let step =
            caller::run_relayed(&self.gateway, context, &session, owner, target, input, work)
                .await?;
        let answer = match step {
            Step::InputRequired(result) => return Ok(Err(result)),
            Step::Done(Outcome::Forward(answer)) => answer?,
            Step::Done(Outcome::Call(_)) => return Err(not_a_call(method)),
        };
        if relay::is_input_required(&answer) {
            return Ok(Err(read_answer(method, answer)?));
        }
        Ok(Ok(answer))
    }
}

/// A list that tool permissions may have cut depends on who asks.
fn scope_for(who: &ClientIdentity) -> CacheScope {
    if who.permissions.restricts() {
        CacheScope::Private
    } else {
        CacheScope::Public
    }
}

/// Not visible and not found must read the same, so this is the one answer for both.
fn unknown_skill_uri(uri: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown skill {uri}"), None)
}

impl Gateway {
    /// The servers' prompts under their exposed names, in a deterministic order.
    pub(crate) fn prompts(&self) -> Vec<Prompt> {
        self.roster
            .prompts()
            .iter()
            .filter_map(|entry| typed("prompt", entry.exposed_prompt()))
            .collect()
    }

    /// The servers' resources (each URI once, the first server's), in a deterministic order.
    pub(crate) fn resources(&self) -> Vec<Resource> {
        self.roster
            .resources()
            .into_iter()
            .filter_map(|(_, item)| typed("resource", item))
            .collect()
    }

    /// The servers' resource templates, in a deterministic order.
    pub(crate) fn resource_templates(&self) -> Vec<ResourceTemplate> {
        self.roster
            .resource_templates()
            .into_iter()
            .filter_map(|(_, item)| typed("resource template", item))
            .collect()
    }
}

/// A server's item in rmcp's model; one that does not read is left out (and logged).
fn typed<T: serde::de::DeserializeOwned>(kind: &str, item: Value) -> Option<T> {
    match serde_json::from_value::<T>(item.clone()) {
        Ok(typed) => Some(typed),
        Err(e) => {
            tracing::warn!(%item, "a server's {kind} cannot be served: {e}");
            None
        }
    }
}
