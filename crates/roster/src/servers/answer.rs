//! A server's answer to a request roster makes for a caller (`tools/call`, `prompts/get`,
//! `resources/read`), kept as the server wrote it where roster reads the wire itself.
//!
//! roster only forwards such a result: parsing it into a tree of values and writing that out
//! again is work (a tool's text is unescaped, copied and escaped again) for nothing roster
//! needs. Roster's own transports (stdio, legacy SSE) therefore hand the `result` of an answer
//! to one of roster's requests over as its JSON text ([`Answer::Raw`]); roster reads only its
//! top-level members (`resultType`, `isError`), and a tool result goes to the client as that
//! text when nothing must change inside it ([`RawResult::tool_text`]). Streamable HTTP servers
//! are read by rmcp, which parses every answer ([`Answer::Value`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::RequestError;

/// A server's result for a caller's request.
#[derive(Debug)]
pub enum Answer {
    /// As the server wrote it (roster's own transports).
    Raw(RawResult),
    /// Parsed (rmcp's transports).
    Value(Value),
}

/// A result as the server wrote it, with the top-level members roster reads of it.
#[derive(Debug)]
pub struct RawResult {
    text: Box<RawValue>,
    /// `resultType`, when it is a string.
    result_type: Option<Box<str>>,
    is_error: bool,
}

impl Answer {
    /// The result's `resultType` (2026-07-28), when it is a string.
    pub fn result_type(&self) -> Option<&str> {
        match self {
            Answer::Raw(raw) => raw.result_type.as_deref(),
            Answer::Value(value) => value.get("resultType").and_then(Value::as_str),
        }
    }

    /// Whether this is an `input_required` result (2026-07-28).
    pub fn is_input_required(&self) -> bool {
        self.result_type() == Some("input_required")
    }

    /// Whether the result says `isError: true`.
    pub fn is_error(&self) -> bool {
        match self {
            Answer::Raw(raw) => raw.is_error,
            Answer::Value(value) => value.get("isError") == Some(&Value::Bool(true)),
        }
    }

    /// The result parsed.
    pub fn into_value(self) -> Result<Value, RequestError> {
        match self {
            Answer::Raw(raw) => serde_json::from_str(raw.text.get())
                .map_err(|e| RequestError::Unexpected(format!("an unreadable result: {e}"))),
            Answer::Value(value) => Ok(value),
        }
    }
}

impl RawResult {
    /// The result `text` (read once, for its top-level members).
    pub(crate) fn new(text: Box<RawValue>) -> Self {
        let (mut result_type, mut is_error) = (None, false);
        for (key, value) in members(text.get()).unwrap_or_default() {
            match key.as_ref() {
                "resultType" => {
                    result_type = serde_json::from_str::<Cow<'_, str>>(value.get())
                        .ok()
                        .map(|t| t.into())
                }
                "isError" => is_error = value.get() == "true",
                _ => {}
            }
        }
        RawResult {
            text,
            result_type,
            is_error,
        }
    }

    /// This tool result's JSON text as a client of the era given (`modern`: 2026-07-28) gets
    /// it — what rmcp would write for it, but for members rmcp does not model, which pass as
    /// the server wrote them. `None` when the text cannot go as it is: a shape rmcp would not
    /// read as a complete tool result (the typed path then says what is wrong), or a change
    /// inside it (a legacy client gets a non-object `structuredContent` as text).
    pub(crate) fn tool_text(&self, modern: bool) -> Option<String> {
        let text = self.text.get();
        let members = members(text)?;
        let mut known = false;
        let mut legacy_change = false;
        for (key, value) in &members {
            let value = value.get();
            let ok = match key.as_ref() {
                "resultType" => self.result_type.as_deref() == Some("complete"),
                "content" => {
                    known = true;
                    serde_json::from_str::<Vec<Block<'_>>>(value)
                        .is_ok_and(|blocks| blocks.iter().all(Block::is_valid))
                }
                "structuredContent" => {
                    known = true;
                    legacy_change |= !value.starts_with('{');
                    true
                }
                "isError" => {
                    known = true;
                    value == "true" || value == "false"
                }
                "_meta" => value.starts_with('{'),
                _ => true,
            };
            if !ok {
                return None;
            }
        }
        if !known || (!modern && legacy_change) {
            return None;
        }
        match (modern, self.result_type.is_some()) {
            (true, true) | (false, false) => Some(text.to_owned()),
            // rmcp tells a 2026-07-28 client a result without `resultType` is complete.
            (true, false) => {
                let rest = text.trim_start().strip_prefix('{')?;
                let mut out = String::with_capacity(text.len() + 26);
                out.push_str(r#"{"resultType":"complete","#);
                out.push_str(rest);
                Some(out)
            }
            // ... and strips it for an older client.
            (false, true) => {
                let mut out = String::with_capacity(text.len());
                out.push('{');
                for (key, value) in members.iter().filter(|(k, _)| k != "resultType") {
                    if out.len() > 1 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(key).ok()?);
                    out.push(':');
                    out.push_str(value.get());
                }
                out.push('}');
                Some(out)
            }
        }
    }
}

/// The top-level members of a JSON object as written, in order; `None` when `text` is not
/// an object.
pub(crate) fn members(text: &str) -> Option<Vec<(Cow<'_, str>, &RawValue)>> {
    serde_json::from_str::<Members<'_>>(text).ok().map(|m| m.0)
}

struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Members<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// What rmcp needs of a content block to read it, as written.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(rename = "mimeType", borrow, default)]
    mime_type: Option<&'a RawValue>,
    #[serde(borrow, default)]
    resource: Option<&'a RawValue>,
    #[serde(borrow, default)]
    uri: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    annotations: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
}

impl Block<'_> {
    /// Whether rmcp reads this block as it is. Annotations are left to rmcp (their values
    /// are typed); so is anything this check does not know.
    fn is_valid(&self) -> bool {
        let string = |v: Option<&RawValue>| v.is_some_and(|v| v.get().starts_with('"'));
        let object = |v: Option<&RawValue>| v.is_none_or(|v| v.get().starts_with('{'));
        if self.annotations.is_some() || !object(self.meta) {
            return false;
        }
        match self.kind.as_ref() {
            "text" => string(self.text),
            "image" | "audio" => string(self.data) && string(self.mime_type),
            "resource_link" => string(self.uri) && string(self.name),
            "resource" => self.resource.is_some_and(|r| {
                let members = members(r.get()).unwrap_or_default();
                let member = |name: &str| members.iter().find(|(k, _)| k == name).map(|m| m.1);
                string(member("uri")) && (string(member("text")) || string(member("blob")))
            }),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;
    use serde_json::json;

    fn raw(value: &Value) -> RawResult {
        RawResult::new(RawValue::from_string(value.to_string()).expect("json"))
    }

    /// What rmcp writes for `result` to a client of the era given.
    fn typed(result: &Value, modern: bool) -> Value {
        let mut result = result.clone();
        result
            .as_object_mut()
            .expect("object")
            .entry("resultType")
            .or_insert(json!("complete"));
        let mut typed = rmcp::model::ServerResult::CallToolResult(
            serde_json::from_value::<CallToolResult>(result).expect("a tool result"),
        );
        if !modern {
            typed.strip_result_type_for_legacy_peer();
        }
        serde_json::to_value(typed).expect("json")
    }

    #[test]
    fn a_tool_result_goes_as_rmcp_would_write_it_in_each_era() {
        let results = [
            json!({"content": [{"type": "text", "text": "hi \"there\"\n"}]}),
            json!({"content": [], "isError": true}),
            json!({"resultType": "complete", "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]}),
            json!({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "x"}}], "structuredContent": {"a": 1}}),
            json!({"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}], "_meta": {"k": 1}}),
            json!({"content": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav", "_meta": {}}]}),
        ];
        for result in &results {
            for modern in [true, false] {
                let text = raw(result).tool_text(modern);
                let text = text.unwrap_or_else(|| panic!("{result} modern={modern} goes raw"));
                let sent: Value = serde_json::from_str(&text).expect("json");
                assert_eq!(sent, typed(result, modern), "{result} modern={modern}");
            }
        }
    }

    #[test]
    fn what_rmcp_would_read_otherwise_or_refuse_takes_the_typed_path() {
        let results = [
            json!(5),
            json!({}),
            json!({"_meta": {}}),
            json!({"resultType": "input_required", "inputRequests": {}}),
            json!({"content": "text"}),
            json!({"content": [{"type": "text"}]}),
            json!({"content": [{"type": "text", "text": 5}]}),
            json!({"content": [{"type": "video", "data": "AA=="}]}),
            json!({"content": [{"type": "image", "data": "AA=="}]}),
            json!({"content": [{"type": "resource", "resource": {"uri": "file:///a"}}]}),
            json!({"content": [{"type": "text", "text": "a", "annotations": {"priority": 1}}]}),
            json!({"content": [], "isError": "yes"}),
            json!({"content": [], "_meta": 1}),
        ];
        for result in &results {
            for modern in [true, false] {
                assert_eq!(raw(result).tool_text(modern), None, "{result}");
            }
        }
        // A non-object structuredContent is made text for a legacy client (by rmcp).
        for result in [
            json!({"content": [], "structuredContent": [1, 2]}),
            json!({"content": [], "structuredContent": null}),
        ] {
            let text = raw(&result)
                .tool_text(true)
                .expect("raw for a 2026-07-28 client");
            let sent: Value = serde_json::from_str(&text).expect("json");
            assert_eq!(sent, typed(&result, true));
            assert_eq!(raw(&result).tool_text(false), None);
        }
    }

    #[test]
    fn members_rmcp_does_not_model_pass_as_written() {
        let result = json!({"content": [], "later": {"x": [1, 2]}});
        let text = raw(&result).tool_text(false).expect("raw");
        assert_eq!(serde_json::from_str::<Value>(&text).expect("json"), result);
        let text = raw(&result).tool_text(true).expect("raw");
        let sent: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(sent["later"], result["later"]);
        assert_eq!(sent["resultType"], "complete");
    }

    #[test]
    fn an_answer_reads_its_result_type_and_error_flag() {
        let raw_answer = Answer::Raw(raw(&json!({"resultType": "input_required"})));
        assert!(raw_answer.is_input_required());
        assert!(!raw_answer.is_error());
        let raw_error = Answer::Raw(raw(&json!({"content": [], "isError": true})));
        assert!(raw_error.is_error());
        assert_eq!(raw_error.result_type(), None);
        let value = Answer::Value(json!({"content": [], "isError": true}));
        assert!(value.is_error());
        assert_eq!(
            Answer::Raw(raw(&json!({"a": [1]})))
                .into_value()
                .expect("json"),
            json!({"a": [1]})
        );
    }
}
