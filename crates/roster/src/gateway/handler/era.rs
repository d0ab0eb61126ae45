//! Requests rmcp could not type, and requests whose answer depends on the protocol era
//! (2026-07-28 removed `logging/setLevel`, `resources/subscribe` and others, SEP-2575).

use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::GatewayHandler;
use crate::gateway::caller;
use crate::servers::LogLevel;

impl GatewayHandler {
    /// rmcp hands over as "custom" every request it could not type: an unknown method, or a
    /// method of the spec whose params do not fit it (a `tools/call` without a `name`). The
    /// second is the client's mistake in its params, which JSON-RPC calls -32602, not -32601.
    pub(super) async fn custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        let method = request.method.as_str();
        // A request of the spec that roster serves in the caller's era: one rmcp could not
        // type had params that do not fit (2026-07-28 removed some, SEP-2575).
        let served = roster_core::methods::client_request(method).is_some_and(|request| {
            request.served && !(request.removed_in_2026_07_28 && caller::is_modern(&context))
        });
        if served {
            let why = match method {
                "tools/call" => "`params.name` (the tool's name, a string) is required",
                "prompts/get" => "`params.name` (the prompt's name, a string) is required",
                "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                    "`params.uri` (a string) is required"
                }
                _ => "they do not fit the MCP schema of this method",
            };
            return Err(ErrorData::invalid_params(
                format!("invalid params for `{method}`: {why}"),
                None,
            ));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("unknown method `{method}`"),
            None,
        ))
    }

    #[allow(deprecated)]
    pub(super) async fn set_level_for(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if caller::is_modern(&context) {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "logging/setLevel is gone in 2026-07-28: set io.modelcontextprotocol/logLevel \
                 in a request's _meta instead",
                None,
            ));
        }
        let level: LogLevel = serde_json::to_value(request.level)
            .and_then(serde_json::from_value)
            .map_err(|e| ErrorData::invalid_params(format!("unknown log level: {e}"), None))?;
        self.session(&context).set_log_level(level);
        self.gateway.roster().set_log_level(level).await;
        Ok(())
    }
}
