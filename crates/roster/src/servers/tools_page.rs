//! One `tools/list` result page, read into [`Tool`]s at a bounded cost.
//!
//! A listing can be large (a server with 100,000 tools writes tens of MB), and roster keeps at
//! most `max_tools` of them. Parsed into a tree of values first and into tools after, a page
//! used to cost some 30 times its size at its peak. Read from the text the transport kept
//! ([`ToolsPage::read`]), it costs its text and the tools kept: each kept tool is parsed on its
//! own, straight from the text, and the tools past the bound are scanned, never built. The
//! caller checks the page's size against `max_listing_bytes` before reading it at all.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use roster_core::Tool;

use super::error::RequestError;

/// What roster keeps of one `tools/list` result.
#[derive(Debug, Default)]
pub(crate) struct ToolsPage {
    /// The first well-formed tools, at most the bound given.
    pub(crate) tools: Vec<Tool>,
    /// `nextCursor`, when there is one.
    pub(crate) next_cursor: Option<String>,
    /// `ttlMs` (2026-07-28), when there is one.
    pub(crate) ttl_ms: Option<u64>,
}

impl ToolsPage {
    /// Reads a result page from its JSON text, building at most `at_most` tools.
    pub(crate) fn read(text: &[u8], at_most: usize) -> Result<Self, RequestError> {
        let mut deserializer = serde_json::Deserializer::from_slice(text);
        let page = PageSeed { at_most }
            .deserialize(&mut deserializer)
            .and_then(|page| deserializer.end().map(|()| page))
            .map_err(|e| {
                RequestError::Unexpected(format!("an unreadable tools/list result: {e}"))
            })?;
        page.ok_or_else(no_tools)
    }

    /// A result page rmcp's transport parsed already (a server roster does not read itself).
    pub(crate) fn of_value(mut result: Value, at_most: usize) -> Result<Self, RequestError> {
        let Some(Value::Array(items)) = result.get_mut("tools").map(Value::take) else {
            return Err(no_tools());
        };
        let mut tools = Vec::with_capacity(items.len().min(at_most));
        for item in items.into_iter().take(at_most) {
            keep(
                &mut tools,
                serde_json::from_value::<Tool>(item.clone()),
                || item.to_string(),
            );
        }
        Ok(ToolsPage {
            tools,
            next_cursor: result
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned),
            ttl_ms: result.get("ttlMs").and_then(Value::as_u64),
        })
    }
}

fn no_tools() -> RequestError {
    RequestError::Unexpected("tools/list result has no `tools` array".to_owned())
}

/// Pushes a parsed tool, or says why an entry was skipped: one malformed entry should not hide
/// the server's other tools.
fn keep(tools: &mut Vec<Tool>, parsed: Result<Tool, serde_json::Error>, text: impl Fn() -> String) {
    match parsed {
        Ok(tool) => tools.push(tool.compacted()),
        Err(error) => tracing::warn!(
            %error,
            tool = %super::wire::log_line(&text(), 300),
            "skipped a malformed tool"
        ),
    }
}

/// Reads a page object; `None` when it has no `tools` array.
struct PageSeed {
    at_most: usize,
}

impl<'de> DeserializeSeed<'de> for PageSeed {
    type Value = Option<ToolsPage>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PageSeed {
    type Value = Option<ToolsPage>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a tools/list result object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut page = ToolsPage::default();
        let mut has_tools = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "tools" if !has_tools => {
                    page.tools = map.next_value_seed(ToolsSeed {
                        at_most: self.at_most,
                    })?;
                    has_tools = true;
                }
                "nextCursor" => page.next_cursor = map.next_value::<Option<String>>()?,
                "ttlMs" => page.ttl_ms = map.next_value::<Option<f64>>()?.map(ttl_ms),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(has_tools.then_some(page))
    }
}

/// A `ttlMs` as whole milliseconds (a negative or fractional one as the spec's integer would be).
fn ttl_ms(ms: f64) -> u64 {
    if ms.is_finite() && ms > 0.0 {
        ms as u64
    } else {
        0
    }
}

/// Reads the `tools` array: the first `at_most` entries become tools, the rest are scanned.
struct ToolsSeed {
    at_most: usize,
}

impl<'de> DeserializeSeed<'de> for ToolsSeed {
    type Value = Vec<Tool>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ToolsSeed {
    type Value = Vec<Tool>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of tools")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut tools = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.at_most));
        let mut read = 0usize;
        while read < self.at_most {
            let Some(raw) = seq.next_element::<&'de RawValue>()? else {
                return Ok(tools);
            };
            read += 1;
            keep(&mut tools, serde_json::from_str::<Tool>(raw.get()), || {
                raw.get().to_owned()
            });
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &str, at_most: usize) -> ToolsPage {
        ToolsPage::read(text.as_bytes(), at_most).expect("a page")
    }

    #[test]
    fn reads_tools_cursor_and_ttl_and_keeps_unknown_fields() {
        let p = page(
            r#"{"tools":[{"name":"a","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},
                {"name":"b","description":"B \"quoted\""}],"nextCursor":"c2","ttlMs":0,"_meta":{"x":1}}"#,
            10,
        );
        let names: Vec<_> = p.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(
            p.tools[0].extra.contains_key("execution"),
            "unknown fields kept"
        );
        assert_eq!(p.tools[1].description.as_deref(), Some("B \"quoted\""));
        assert_eq!(p.next_cursor.as_deref(), Some("c2"));
        assert_eq!(p.ttl_ms, Some(0));
    }

    #[test]
    fn builds_at_most_the_bound_and_scans_the_rest() {
        let tools: Vec<String> = (0..50)
            .map(|i| format!(r#"{{"name":"t{i}","inputSchema":{{"type":"object"}}}}"#))
            .collect();
        let text = format!(r#"{{"tools":[{}],"nextCursor":"n"}}"#, tools.join(","));
        let p = page(&text, 3);
        assert_eq!(p.tools.len(), 3);
        assert_eq!(p.next_cursor.as_deref(), Some("n"), "read past the tools");
    }

    #[test]
    fn a_malformed_tool_is_skipped_and_a_page_without_tools_is_an_error() {
        let p = page(r#"{"tools":[{"description":"no name"},{"name":"ok"}]}"#, 10);
        assert_eq!(p.tools.len(), 1);
        let err = ToolsPage::read(br#"{"nextCursor":"x"}"#, 10).expect_err("no tools");
        assert!(err.to_string().contains("no `tools` array"), "{err}");
        let err = ToolsPage::read(br#"{"tools":[{"name":"a"}"#, 10).expect_err("cut");
        assert!(err.to_string().contains("unreadable"), "{err}");
    }

    #[test]
    fn a_parsed_page_reads_the_same() {
        let value: Value = serde_json::from_str(
            r#"{"tools":[{"name":"a"},{"nope":1},{"name":"c"}],"nextCursor":"n","ttlMs":5}"#,
        )
        .expect("json");
        let p = ToolsPage::of_value(value, 1).expect("page");
        assert_eq!(p.tools.len(), 1);
        assert_eq!((p.next_cursor.as_deref(), p.ttl_ms), (Some("n"), Some(5)));
    }
}
