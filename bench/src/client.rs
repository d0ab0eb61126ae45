//! The load generator's MCP client side: connecting to a target, watching for
//! `notifications/tools/list_changed`, finding the echo server's tools under whatever name a
//! gateway exposes them, and reading their results.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientCacheConfig, ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::{Mutex, Notify};

use crate::echo::unix_micros;

/// Where the load generator sends its requests.
#[derive(Debug, Clone)]
pub enum Target {
    /// A streamable HTTP endpoint, e.g. `http://127.0.0.1:8931/mcp`. Loopback only.
    Http(String),
    /// A legacy HTTP+SSE endpoint (`GET` the event stream, `POST` to the endpoint it names),
    /// for peers that serve nothing newer. Loopback only.
    Sse(String),
    /// A command spawned as a child and spoken to over stdio; every session shares it.
    Stdio(Vec<String>),
}

/// The HTTP client loadgen speaks streamable HTTP with: keep-alive connections and
/// `TCP_NODELAY`, as the SDK clients people use (the TypeScript SDK's fetch, the Python SDK's
/// httpx) keep theirs. rmcp's default client opens a connection per request (it turns idle
/// pooling off against a Delayed-ACK stall with bodies left unread), which put a connect and an
/// accept into every call loadgen timed over HTTP.
fn keep_alive_client() -> reqwest::Client {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap_or_default()
}

/// Why a target could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The URL points off this machine.
    #[error(
        "{0:?} is not a loopback URL; the load generator only talks to 127.0.0.1, localhost or [::1]"
    )]
    NotLoopback(String),
    /// The stdio command is empty.
    #[error("the stdio command is empty; give the server's program and arguments")]
    EmptyCommand,
    /// Spawning the stdio command failed.
    #[error("could not start {command:?}: {source}")]
    Spawn {
        /// The program that failed to start.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The MCP handshake failed.
    #[error("the MCP handshake with {target} failed: {reason}")]
    Handshake {
        /// The target, as given.
        target: String,
        /// Why.
        reason: String,
    },
    /// No tool of the echo server was found in the target's listing.
    #[error(
        "no tool named {wanted:?} (or ending in a separator and {wanted:?}) among {count} tools"
    )]
    ToolNotFound {
        /// The echo server's own tool name.
        wanted: String,
        /// How many tools the target listed.
        count: usize,
    },
}

impl Target {
    /// A target from exactly one of a URL or a whitespace-separated stdio command line. A
    /// URL prefixed `sse+` (`sse+http://127.0.0.1:1/sse`) is a legacy HTTP+SSE endpoint.
    pub fn parse(url: Option<&str>, stdio: Option<&str>) -> Result<Self, TargetError> {
        match (url, stdio) {
            (Some(url), _) => {
                let (sse, plain) = match url.strip_prefix("sse+") {
                    Some(rest) => (true, rest),
                    None => (false, url),
                };
                if !is_loopback_url(plain) {
                    Err(TargetError::NotLoopback(url.to_owned()))
                } else if sse {
                    Ok(Self::Sse(plain.to_owned()))
                } else {
                    Ok(Self::Http(plain.to_owned()))
                }
            }
            (None, Some(cmd)) => {
                let words: Vec<String> = cmd.split_whitespace().map(str::to_owned).collect();
                if words.is_empty() {
                    Err(TargetError::EmptyCommand)
                } else {
                    Ok(Self::Stdio(words))
                }
            }
            (None, None) => Err(TargetError::EmptyCommand),
        }
    }

    /// `"http"`, `"sse"` or `"stdio"`.
    pub fn transport(&self) -> &'static str {
        match self {
            Self::Http(_) => "http",
            Self::Sse(_) => "sse",
            Self::Stdio(_) => "stdio",
        }
    }
}

/// Whether `url` is `http://` to 127.0.0.0/8, `localhost` or `[::1]`.
fn is_loopback_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Counts `notifications/tools/list_changed` and remembers when each arrived.
#[derive(Debug, Clone, Default)]
pub struct Watcher {
    inner: Arc<WatcherInner>,
}

#[derive(Debug, Default)]
struct WatcherInner {
    count: AtomicU64,
    arrivals: Mutex<Vec<u64>>,
    notify: Notify,
}

impl Watcher {
    /// How many `list_changed` notifications have arrived.
    pub fn count(&self) -> u64 {
        self.inner.count.load(Ordering::SeqCst)
    }

    /// When (unix µs) the notification with this zero-based index arrived, if it has.
    pub async fn arrival(&self, index: u64) -> Option<u64> {
        let arrivals = self.inner.arrivals.lock().await;
        usize::try_from(index)
            .ok()
            .and_then(|i| arrivals.get(i).copied())
    }

    /// Waits until more than `seen` notifications arrived, or `timeout` passes; true if they did.
    pub async fn wait_beyond(&self, seen: u64, timeout: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.notify.notified();
            if self.count() > seen {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.count() > seen;
            }
        }
    }
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let at = unix_micros();
        // Keep only the first arrivals: a storm would otherwise grow this without bound, and
        // the propagation figure only reads the first few.
        {
            let mut arrivals = self.inner.arrivals.lock().await;
            if arrivals.len() < 10_000 {
                arrivals.push(at);
            }
        }
        self.inner.count.fetch_add(1, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }
}

/// One client session with a target.
pub type Session = RunningService<RoleClient, Watcher>;

/// Opens one session. For a stdio target this spawns the command (its stderr is discarded).
pub async fn connect(target: &Target, watcher: Watcher) -> Result<Session, TargetError> {
    Ok(open(target, watcher).await?.0)
}

/// Spawns a stdio target and opens one session with it; also returns the child's pid.
pub async fn connect_with_pid(target: &Target) -> Result<(Session, Option<u32>), TargetError> {
    open(target, Watcher::default()).await
}

async fn open(target: &Target, watcher: Watcher) -> Result<(Session, Option<u32>), TargetError> {
    let shown = match target {
        Target::Http(url) | Target::Sse(url) => url.clone(),
        Target::Stdio(words) => words.join(" "),
    };
    let handshake = |e: rmcp::service::ClientInitializeError| TargetError::Handshake {
        target: shown.clone(),
        reason: e.to_string(),
    };
    let (session, pid) = match target {
        Target::Http(url) => {
            let transport = StreamableHttpClientTransport::with_client(
                keep_alive_client(),
                StreamableHttpClientTransportConfig::with_uri(url.as_str()),
            );
            (watcher.serve(transport).await.map_err(handshake)?, None)
        }
        Target::Sse(url) => {
            let transport = sse::connect(url)
                .await
                .map_err(|reason| TargetError::Handshake {
                    target: shown.clone(),
                    reason,
                })?;
            (watcher.serve(transport).await.map_err(handshake)?, None)
        }
        Target::Stdio(words) => {
            let (program, args) = words.split_first().ok_or(TargetError::EmptyCommand)?;
            let mut command = tokio::process::Command::new(program);
            command.args(args);
            let (child, _stderr) = TokioChildProcess::builder(command)
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|source| TargetError::Spawn {
                    command: program.clone(),
                    source,
                })?;
            let pid = child.id();
            (watcher.serve(child).await.map_err(handshake)?, pid)
        }
    };
    // Every listing the bench times must reach the target, never a client-side cache.
    session
        .peer()
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    Ok((session, pid))
}

/// A client for the legacy HTTP+SSE transport (protocol 2024-11-05), which rmcp no longer
/// ships: one `GET` stream carries every server message, and each client message is a `POST`
/// to the endpoint the stream's first `endpoint` event names.
mod sse {
    use futures::channel::mpsc;
    use futures::{SinkExt as _, StreamExt as _};
    use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};

    /// The transport's two halves, as rmcp takes them.
    pub type Halves = (
        mpsc::Sender<ClientJsonRpcMessage>,
        mpsc::Receiver<ServerJsonRpcMessage>,
    );

    /// Opens the event stream and waits (up to 10 s) for the `endpoint` event.
    pub async fn connect(url: &str) -> Result<Halves, String> {
        let http = reqwest::Client::new();
        let response = http
            .get(url)
            .header("accept", "text/event-stream")
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("GET {url}: {e}"))?;
        let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
        let endpoint = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| format!("reading {url}: {e}"))?;
                if event.event.as_deref() == Some("endpoint") {
                    return event
                        .data
                        .ok_or_else(|| "an endpoint event without data".to_owned());
                }
            }
            Err(format!("{url} closed before naming its endpoint"))
        })
        .await
        .map_err(|_| format!("{url} named no endpoint within 10 s"))??;
        let endpoint = absolute(url, endpoint.trim());
        let (to_server, mut outgoing) = mpsc::channel::<ClientJsonRpcMessage>(64);
        let (mut incoming, from_server) = mpsc::channel::<ServerJsonRpcMessage>(1024);
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let Ok(event) = event else { break };
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data else { continue };
                match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                    Ok(message) => {
                        if incoming.send(message).await.is_err() {
                            break;
                        }
                    }
                    Err(e) => eprintln!("loadgen: unreadable SSE message ({e}): {data}"),
                }
            }
        });
        tokio::spawn(async move {
            // The answer arrives on the event stream; the POST only has to be accepted.
            while let Some(message) = outgoing.next().await {
                match http.post(&endpoint).json(&message).send().await {
                    Ok(r) if r.status().is_success() => {}
                    Ok(r) => eprintln!("loadgen: POST {endpoint}: HTTP {}", r.status()),
                    Err(e) => {
                        eprintln!("loadgen: POST {endpoint}: {e}");
                        break;
                    }
                }
            }
        });
        Ok((to_server, from_server))
    }

    /// The endpoint as an absolute URL (servers usually send a path).
    fn absolute(base: &str, endpoint: &str) -> String {
        if endpoint.starts_with("http://") {
            return endpoint.to_owned();
        }
        let origin_end = base
            .strip_prefix("http://")
            .and_then(|rest| rest.find('/'))
            .map_or(base.len(), |i| i + "http://".len());
        format!(
            "{}/{}",
            &base[..origin_end],
            endpoint.trim_start_matches('/')
        )
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn endpoints_resolve_against_the_origin() {
            assert_eq!(
                super::absolute("http://127.0.0.1:3/mcp", "/messages?sessionId=a"),
                "http://127.0.0.1:3/messages?sessionId=a"
            );
            assert_eq!(
                super::absolute("http://127.0.0.1:3", "messages"),
                "http://127.0.0.1:3/messages"
            );
            assert_eq!(super::absolute("http://x/y", "http://z/m"), "http://z/m");
        }
    }
}

/// The exposed name of the echo server's tool `wanted`: the name itself, or the shortest name
/// that ends in a separator (`_`, `.`, `-`, `/`) followed by it (`echo__echo`, `echo.echo`).
pub fn resolve_tool(tools: &[Tool], wanted: &str) -> Result<String, TargetError> {
    if tools.iter().any(|t| t.name == wanted) {
        return Ok(wanted.to_owned());
    }
    tools
        .iter()
        .map(|t| t.name.as_ref())
        .filter(|name| {
            name.strip_suffix(wanted)
                .is_some_and(|head| head.ends_with(['_', '.', '-', '/']))
        })
        .min_by_key(|name| name.len())
        .map(str::to_owned)
        .ok_or_else(|| TargetError::ToolNotFound {
            wanted: wanted.to_owned(),
            count: tools.len(),
        })
}

/// Whether `tools` holds the echo server's tool `wanted` under any exposed name.
pub fn lists_tool(tools: &[Tool], wanted: &str) -> bool {
    resolve_tool(tools, wanted).is_ok()
}

/// The first text block of a result that parses as a JSON object (a gateway may add a note
/// block after a change; the echo server's own block comes first).
pub fn json_of(result: &CallToolResult) -> Option<serde_json::Map<String, Value>> {
    if let Some(Value::Object(map)) = &result.structured_content {
        return Some(map.clone());
    }
    result
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .find_map(|t| match serde_json::from_str::<Value>(&t.text) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        })
}

/// Calls `name` with `arguments` and reads its JSON result; a tool error is an error.
pub async fn call_json(
    session: &Session,
    name: &str,
    arguments: Value,
) -> anyhow::Result<serde_json::Map<String, Value>> {
    let arguments = match arguments {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    let result = session
        .peer()
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await?;
    if result.is_error == Some(true) {
        anyhow::bail!("{name} failed: {:?}", result.content);
    }
    json_of(&result).ok_or_else(|| anyhow::anyhow!("{name} returned no JSON object"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc as StdArc;

    fn tools(names: &[&str]) -> Vec<Tool> {
        names
            .iter()
            .map(|n| Tool::new(n.to_string(), "", StdArc::new(JsonObject::new())))
            .collect()
    }

    #[test]
    fn resolves_exact_then_prefixed_names() {
        assert_eq!(
            resolve_tool(&tools(&["x__echo", "echo"]), "echo").expect("exact"),
            "echo"
        );
        assert_eq!(
            resolve_tool(&tools(&["other__echo", "e__echo", "echoecho"]), "echo")
                .expect("prefixed"),
            "e__echo"
        );
        assert!(resolve_tool(&tools(&["echoecho", "xecho"]), "echo").is_err());
        assert!(lists_tool(&tools(&["s.extra_3"]), "extra_3"));
        assert!(!lists_tool(&tools(&["s.extra_31"]), "extra_3"));
    }

    #[test]
    fn only_loopback_urls_are_targets() {
        assert!(Target::parse(Some("http://127.0.0.1:1/mcp"), None).is_ok());
        assert!(Target::parse(Some("http://localhost:1/mcp"), None).is_ok());
        assert!(Target::parse(Some("http://10.0.0.1:1/mcp"), None).is_err());
        assert!(Target::parse(Some("http://[::1]:1/mcp"), None).is_ok());
        assert!(Target::parse(Some("http://127.example.com/mcp"), None).is_err());
        assert!(Target::parse(Some("https://127.0.0.1/mcp"), None).is_err());
        assert!(matches!(
            Target::parse(None, Some("a b")),
            Ok(Target::Stdio(w)) if w == ["a", "b"]
        ));
        assert!(Target::parse(None, Some("  ")).is_err());
    }
}
