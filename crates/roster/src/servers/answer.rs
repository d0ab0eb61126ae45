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
use tokio_util::bytes::Bytes;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
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

/// A result as the server wrote it, with what roster reads of its top-level members.
#[derive(Debug)]
pub struct RawResult {
    /// UTF-8 (from a line read as text).
    text: Bytes,
    /// `resultType`, when it is a string.
    result_type: Option<Box<str>>,
    is_error: bool,
    /// Whether rmcp reads it as a complete tool result (see [`Shape`]).
    tool: bool,
    /// `structuredContent` is there but no object (rmcp makes it text for a legacy client).
    unstructured: bool,
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
            Answer::Raw(raw) => serde_json::from_slice(&raw.text)
                .map_err(|e| RequestError::Unexpected(format!("an unreadable result: {e}"))),
            Answer::Value(value) => Ok(value),
        }
    }
}

impl RawResult {
    /// The result's JSON text, as the server wrote it.
    pub(crate) fn into_text(self) -> Bytes {
        self.text
    }

    /// The result `text`, JSON already read once (by the transport); its top-level members
    /// are read here, in one more pass that also checks the shape of a tool result.
    pub(crate) fn new(text: Bytes) -> Self {
        let shape = serde_json::from_slice::<Shape>(&text).unwrap_or_default();
        RawResult {
            text,
            result_type: shape.result_type,
            is_error: shape.is_error,
            tool: shape.valid && shape.known,
            unstructured: shape.unstructured,
        }
    }

    /// This tool result's JSON text as a client of the era given (`modern`: 2026-07-28) gets
    /// it — what rmcp would write for it, but for members rmcp does not model, which pass as
    /// the server wrote them. `None` when the text cannot go as it is: a shape rmcp would not
    /// read as a complete tool result (the typed path then says what is wrong), or a change
    /// inside it (a legacy client gets a non-object `structuredContent` as text).
    pub(crate) fn tool_text(&self, modern: bool) -> Option<Bytes> {
        if !self.tool || (!modern && self.unstructured) {
            return None;
        }
        let text = std::str::from_utf8(&self.text).ok()?;
        match (modern, self.result_type.is_some()) {
            (true, true) | (false, false) => Some(self.text.clone()),
            // rmcp tells a 2026-07-28 client a result without `resultType` is complete.
            (true, false) => {
                let rest = text.trim_start().strip_prefix('{')?;
                let mut out = String::with_capacity(text.len() + 26);
                out.push_str(r#"{"resultType":"complete","#);
                out.push_str(rest);
                Some(out.into())
            }
            // ... and strips it for an older client.
            (false, true) => {
                let mut out = String::with_capacity(text.len());
                out.push('{');
                for (key, value) in members(text)?.iter().filter(|(k, _)| k != "resultType") {
                    if out.len() > 1 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(key).ok()?);
                    out.push(':');
                    out.push_str(value.get());
                }
                out.push('}');
                Some(out.into())
            }
        }
    }
}

/// The top-level members of a JSON object as written, in order; `None` when `text` is not
/// an object.
pub(crate) fn members(text: &str) -> Option<Vec<(Cow<'_, str>, &RawValue)>> {
    serde_json::from_str::<Members<'_>>(text)
        .ok()
        .and_then(|m| m.0)
}

/// What roster reads of a result's top-level members in one pass: the members every result
/// may have, and whether rmcp would read it as a complete tool result.
#[derive(Default)]
struct Shape {
    result_type: Option<Box<str>>,
    is_error: bool,
    /// No member rmcp would refuse in a complete tool result.
    valid: bool,
    /// One of `content`, `structuredContent`, `isError` (rmcp wants one).
    known: bool,
    unstructured: bool,
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Shape;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
                let mut shape = Shape {
                    valid: true,
                    ..Shape::default()
                };
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "content" {
                        shape.known = true;
                        shape.valid &= map.next_value::<Blocks>()?.0;
                        continue;
                    }
                    let value = map.next_value::<&'de RawValue>()?.get();
                    let ok = match key.as_ref() {
                        "resultType" => {
                            let kind = serde_json::from_str::<Cow<'_, str>>(value).ok();
                            shape.result_type = kind.map(Into::into);
                            shape.result_type.as_deref() == Some("complete")
                        }
                        "structuredContent" => {
                            shape.known = true;
                            shape.unstructured = !value.starts_with('{');
                            true
                        }
                        "isError" => {
                            shape.known = true;
                            shape.is_error = value == "true";
                            value == "true" || value == "false"
                        }
                        "_meta" => value.starts_with('{'),
                        _ => true,
                    };
                    shape.valid &= ok;
                }
                Ok(shape)
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// Whether a `content` member (any JSON value) is an array of blocks rmcp reads as they are.
struct Blocks(bool);

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Blocks;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("content blocks")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Blocks, A::Error> {
                let mut valid = true;
                while let Some(block) = seq.next_element::<Members<'de>>()? {
                    valid &= block.is_valid_block();
                }
                Ok(Blocks(valid))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Blocks, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Blocks(false))
            }

            fn visit_bool<E>(self, _: bool) -> Result<Blocks, E> {
                Ok(Blocks(false))
            }

            fn visit_i64<E>(self, _: i64) -> Result<Blocks, E> {
                Ok(Blocks(false))
            }

            fn visit_u64<E>(self, _: u64) -> Result<Blocks, E> {
                Ok(Blocks(false))
            }

            fn visit_f64<E>(self, _: f64) -> Result<Blocks, E> {
                Ok(Blocks(false))
            }

            fn visit_str<E>(self, _: &str) -> Result<Blocks, E> {
                Ok(Blocks(false))
            }

            fn visit_unit<E>(self) -> Result<Blocks, E> {
                Ok(Blocks(false))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

/// A JSON value's members as written when it is an object (`None` for any other value): read
/// in one pass, borrowing from the text (a content block, a request's `params`).
pub(crate) struct Members<'a>(pub(crate) Option<Vec<(Cow<'a, str>, &'a RawValue)>>);

impl<'a> Members<'a> {
    /// The member `name`'s value as written.
    pub(crate) fn get(&self, name: &str) -> Option<&'a RawValue> {
        let own = self.0.as_ref()?;
        own.iter().find(|(k, _)| k == name).map(|m| m.1)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Members<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(Some(members)))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Members<'de>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Members(None))
            }

            fn visit_bool<E>(self, _: bool) -> Result<Members<'de>, E> {
                Ok(Members(None))
            }

            fn visit_i64<E>(self, _: i64) -> Result<Members<'de>, E> {
                Ok(Members(None))
            }

            fn visit_u64<E>(self, _: u64) -> Result<Members<'de>, E> {
                Ok(Members(None))
            }

            fn visit_f64<E>(self, _: f64) -> Result<Members<'de>, E> {
                Ok(Members(None))
            }

            fn visit_str<E>(self, _: &str) -> Result<Members<'de>, E> {
                Ok(Members(None))
            }

            fn visit_unit<E>(self) -> Result<Members<'de>, E> {
                Ok(Members(None))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

impl Members<'_> {
    /// Whether rmcp reads this content block as it is. Annotations are left to rmcp (their values
    /// are typed); so is anything this check does not know.
    fn is_valid_block(&self) -> bool {
        if self.0.is_none() {
            return false;
        }
        let member = |name: &str| self.get(name).map(RawValue::get);
        let string = |name: &str| member(name).is_some_and(|v| v.starts_with('"'));
        if member("annotations").is_some() || member("_meta").is_some_and(|m| !m.starts_with('{')) {
            return false;
        }
        match member("type") {
            Some(r#""text""#) => string("text"),
            Some(r#""image""#) | Some(r#""audio""#) => string("data") && string("mimeType"),
            Some(r#""resource_link""#) => string("uri") && string("name"),
            Some(r#""resource""#) => member("resource").is_some_and(|r| {
                let inner = members(r).unwrap_or_default();
                let member = |name: &str| inner.iter().find(|(k, _)| k == name).map(|m| m.1.get());
                let string = |name: &str| member(name).is_some_and(|v| v.starts_with('"'));
                string("uri") && (string("text") || string("blob"))
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
        RawResult::new(value.to_string().into())
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
                let text = text.map(|t| String::from_utf8(t.to_vec()).expect("utf-8"));
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
                assert!(raw(result).tool_text(modern).is_none(), "{result}");
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
            let sent: Value = serde_json::from_slice(&text).expect("json");
            assert_eq!(sent, typed(&result, true));
            assert!(raw(&result).tool_text(false).is_none());
        }
    }

    #[test]
    fn members_rmcp_does_not_model_pass_as_written() {
        let result = json!({"content": [], "later": {"x": [1, 2]}});
        let text = raw(&result).tool_text(false).expect("raw");
        assert_eq!(
            serde_json::from_slice::<Value>(&text).expect("json"),
            result
        );
        let text = raw(&result).tool_text(true).expect("raw");
        let sent: Value = serde_json::from_slice(&text).expect("json");
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
