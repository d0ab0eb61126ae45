//! A client that speaks MCP as JSON lines (stdio) or JSON bodies (streamable HTTP) and builds
//! no typed values: a `tools/list` page is read only for how many tools it holds and its
//! `nextCursor`. What it times is the server's answer and the transport, not a client's parse
//! of every tool into its own types (loadgen's rmcp client spends ~4 µs a tool on that).

use std::process::Stdio;

use serde::Deserialize;
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The protocol version the raw client asks for: the initialize era, which every server in
/// the bench speaks.
const PROTOCOL: &str = "2025-11-25";

/// A raw MCP client over stdio or streamable HTTP.
pub struct RawClient {
    wire: Wire,
    next_id: u64,
}

// One per client, never moved after it is made.
#[allow(clippy::large_enum_variant)]
enum Wire {
    /// A spawned server spoken to line by line.
    Stdio {
        /// Killed when the client goes.
        _child: Child,
        stdin: ChildStdin,
        stdout: BufReader<ChildStdout>,
        line: Vec<u8>,
    },
    /// A streamable HTTP endpoint, one initialize-era session on keep-alive connections.
    Http {
        http: reqwest::Client,
        url: String,
        session: Option<String>,
    },
}

/// Just what the client reads of an answer.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    id: Option<IgnoredAny>,
    #[serde(default)]
    method: Option<IgnoredAny>,
    #[serde(default)]
    result: Option<Page>,
    #[serde(default)]
    error: Option<Value>,
}

/// A `tools/list` result, counted (any other result reads as an empty page).
#[derive(Deserialize, Default)]
struct Page {
    #[serde(default, deserialize_with = "count")]
    tools: usize,
    #[serde(default, rename = "nextCursor")]
    next_cursor: Option<String>,
}

fn count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    struct Count;
    impl<'de> Visitor<'de> for Count {
        type Value = usize;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
            let mut n = 0;
            while seq.next_element::<IgnoredAny>()?.is_some() {
                n += 1;
            }
            Ok(n)
        }
    }
    d.deserialize_seq(Count)
}

impl RawClient {
    /// Spawns `words` and opens an initialize-era session on its stdin/stdout; with its pid.
    pub async fn stdio(words: &[String]) -> anyhow::Result<(RawClient, Option<u32>)> {
        let (program, args) = words
            .split_first()
            .ok_or_else(|| anyhow::anyhow!("the command to spawn is empty"))?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| anyhow::anyhow!("could not start {program:?}: {e}"))?;
        let pid = child.id();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            anyhow::bail!("{program:?} has no pipes");
        };
        let mut client = RawClient {
            wire: Wire::Stdio {
                _child: child,
                stdin,
                stdout: BufReader::new(stdout),
                line: Vec::new(),
            },
            next_id: 0,
        };
        client.initialize().await?;
        Ok((client, pid))
    }

    /// Opens an initialize-era session at the streamable HTTP endpoint `url`.
    pub async fn http(url: &str) -> anyhow::Result<RawClient> {
        let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
        let mut client = RawClient {
            wire: Wire::Http {
                http,
                url: url.to_owned(),
                session: None,
            },
            next_id: 0,
        };
        client.initialize().await?;
        Ok(client)
    }

    async fn initialize(&mut self) -> anyhow::Result<()> {
        let params = json!({
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "loadgen-raw", "version": env!("CARGO_PKG_VERSION")},
        });
        self.request("initialize", params).await?;
        self.notify("notifications/initialized").await
    }

    async fn notify(&mut self, method: &str) -> anyhow::Result<()> {
        let message = json!({"jsonrpc": "2.0", "method": method});
        match &mut self.wire {
            Wire::Stdio { stdin, .. } => {
                stdin.write_all(format!("{message}\n").as_bytes()).await?;
            }
            Wire::Http {
                http, url, session, ..
            } => {
                post(http, url, session.as_deref(), &message)
                    .send()
                    .await?
                    .error_for_status()?;
            }
        }
        Ok(())
    }

    /// Sends a request and reads its answer (passing over notifications before it).
    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Page> {
        self.next_id += 1;
        let message =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        match &mut self.wire {
            Wire::Stdio {
                stdin,
                stdout,
                line,
                ..
            } => {
                stdin.write_all(format!("{message}\n").as_bytes()).await?;
                loop {
                    line.clear();
                    if stdout.read_until(b'\n', line).await? == 0 {
                        anyhow::bail!("the server closed its stdout");
                    }
                    let answer: Answer = serde_json::from_slice(line)?;
                    if answer.id.is_some() && answer.method.is_none() {
                        return page_of(answer, method);
                    }
                }
            }
            Wire::Http { http, url, session } => {
                let response = post(http, url, session.as_deref(), &message)
                    .send()
                    .await?
                    .error_for_status()?;
                if let Some(id) = response.headers().get("mcp-session-id") {
                    *session = Some(id.to_str()?.to_owned());
                }
                let sse = response
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with("text/event-stream"));
                let body = response.bytes().await?;
                if !sse {
                    return page_of(serde_json::from_slice(&body)?, method);
                }
                for data in body
                    .split(|&b| b == b'\n')
                    .filter_map(|l| l.strip_prefix(b"data:"))
                {
                    let answer: Answer = match serde_json::from_slice(data) {
                        Ok(answer) => answer,
                        Err(_) => continue,
                    };
                    if answer.id.is_some() && answer.method.is_none() {
                        return page_of(answer, method);
                    }
                }
                anyhow::bail!("{method}: the event stream held no answer")
            }
        }
    }

    /// One `tools/list` page: how many tools it holds and the next cursor.
    pub async fn list_page(
        &mut self,
        cursor: Option<&str>,
    ) -> anyhow::Result<(usize, Option<String>)> {
        let params = match cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let page = self.request("tools/list", params).await?;
        Ok((page.tools, page.next_cursor))
    }

    /// Every page of `tools/list`: how many tools and pages.
    pub async fn list_all(&mut self) -> anyhow::Result<(usize, usize)> {
        let mut tools = 0;
        let mut cursor = None;
        for pages in 1..=10_000 {
            let (n, next) = self.list_page(cursor.as_deref()).await?;
            tools += n;
            cursor = next;
            if cursor.is_none() {
                return Ok((tools, pages));
            }
        }
        anyhow::bail!("tools/list did not end within 10000 pages")
    }
}

/// A POST of `message` to the session's endpoint.
fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    message: &Value,
) -> reqwest::RequestBuilder {
    let post = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .json(message);
    match session {
        Some(id) => post.header("mcp-session-id", id),
        None => post,
    }
}

fn page_of(answer: Answer, method: &str) -> anyhow::Result<Page> {
    match (answer.result, answer.error) {
        (_, Some(error)) => anyhow::bail!("{method} failed: {error}"),
        (Some(page), None) => Ok(page),
        (None, None) => Ok(Page::default()),
    }
}
