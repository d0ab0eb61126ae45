//! How a request to a server ended, in the words the metrics and the spans record: a call's
//! [`CallOutcome`] label, and a span's `roster.outcome` and status ([`Outcome`]). The two are
//! not the same list: a span says `error` of a failure that is no JSON-RPC error (an
//! unexpected answer, a refused login, a listing too large), which a call's label counts as a
//! protocol error.

use super::answer::Answer;
use super::error::RequestError;
use crate::metrics::CallOutcome;
use crate::telemetry::Outcome;

impl From<&RequestError> for CallOutcome {
    fn from(error: &RequestError) -> CallOutcome {
        match error {
            RequestError::Timeout(_) => CallOutcome::Timeout,
            RequestError::Cancelled => CallOutcome::Cancelled,
            RequestError::Closed | RequestError::ShuttingDown(_) => CallOutcome::ServerDown,
            _ => CallOutcome::ProtocolError,
        }
    }
}

impl From<&Result<Answer, RequestError>> for CallOutcome {
    fn from(outcome: &Result<Answer, RequestError>) -> CallOutcome {
        match outcome {
            Ok(result) if result.is_error() => CallOutcome::ToolError,
            Ok(_) => CallOutcome::Ok,
            Err(error) => CallOutcome::from(error),
        }
    }
}

impl Outcome for RequestError {
    /// The call's label, but for a failure that is no JSON-RPC error (an unexpected answer, a
    /// refused login, a listing too large): `error`, not `protocol_error`.
    fn outcome(&self) -> &'static str {
        match (self, CallOutcome::from(self)) {
            (RequestError::Server { .. } | RequestError::Input { .. }, _) => "protocol_error",
            (_, CallOutcome::ProtocolError) => "error",
            (_, outcome) => outcome.as_str(),
        }
    }

    fn failure(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl Outcome for Result<Answer, RequestError> {
    fn outcome(&self) -> &'static str {
        match self {
            Ok(_) => CallOutcome::from(self).as_str(),
            Err(error) => error.outcome(),
        }
    }

    fn failure(&self) -> Option<String> {
        self.as_ref().err().and_then(Outcome::failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn call_outcomes_follow_the_answer() {
        let ok = Ok(Answer::Value(json!({"content": []})));
        let tool_error = Ok(Answer::Value(json!({"content": [], "isError": true})));
        assert_eq!(CallOutcome::from(&ok), CallOutcome::Ok);
        assert_eq!(CallOutcome::from(&tool_error), CallOutcome::ToolError);
        let timeout = Err(RequestError::Timeout(Duration::from_secs(1)));
        assert_eq!(CallOutcome::from(&timeout), CallOutcome::Timeout);
        assert_eq!(
            CallOutcome::from(&Err(RequestError::Closed)),
            CallOutcome::ServerDown
        );
        let server = Err(RequestError::Server {
            code: -32603,
            message: "boom".into(),
            data: None,
        });
        assert_eq!(CallOutcome::from(&server), CallOutcome::ProtocolError);
        let unexpected = Err(RequestError::Unexpected("?".into()));
        assert_eq!(CallOutcome::from(&unexpected), CallOutcome::ProtocolError);
    }

    #[test]
    fn span_outcomes_name_what_happened() {
        let outcome = |answer: Result<Answer, RequestError>| answer.outcome();
        assert_eq!(outcome(Ok(Answer::Value(json!({"content": []})))), "ok");
        let error = Answer::Value(json!({"isError": true}));
        assert_eq!(outcome(Ok(error)), "tool_error");
        let timeout = RequestError::Timeout(Duration::from_secs(1));
        assert_eq!(outcome(Err(timeout)), "timeout");
        assert_eq!(outcome(Err(RequestError::Closed)), "server_down");
        let refused = RequestError::Server {
            code: -32602,
            message: "no".into(),
            data: None,
        };
        assert_eq!(outcome(Err(refused)), "protocol_error");
        assert_eq!(outcome(Err(RequestError::Unexpected("?".into()))), "error");
        assert_eq!(
            Ok::<_, RequestError>(Answer::Value(json!({}))).failure(),
            None
        );
        assert!(
            Err::<Answer, _>(RequestError::Closed)
                .failure()
                .is_some_and(|f| f.contains("closed"))
        );
    }
}
