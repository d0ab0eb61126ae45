//! The local admin endpoint: a Unix socket in roster's state directory (owner-only), through
//! which `roster status`, `roster tools`, `roster refresh` and `roster reload` talk to a running
//! gateway.
//!
//! The protocol is one JSON line each way: `{"command": "status" | "tools" | "refresh" |
//! "reload" | "config" | "ui"}` (`reload` may add `"allow_empty": true`) and
//! the answer `{"ok": true, "result": ...}` or `{"ok": false, "error": "..."}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::Gateway;
pub use super::inbox_request::InboxRequest;
use super::inbox_request::{NO_INBOX, run_inbox};

/// The socket's file name inside the state directory.
pub const SOCKET_NAME: &str = "admin.sock";

/// The longest request line the admin socket reads, when the config does not say.
pub use crate::config::DEFAULT_ADMIN_MAX_LINE as DEFAULT_MAX_LINE;

/// What an admin client can ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdminCommand {
    /// Per-server status.
    Status,
    /// The exposed tools.
    Tools,
    /// Mark every server stale.
    Refresh,
    /// Read the configuration file again and apply it.
    Reload,
    /// The configuration's file, load time and last reload.
    Config,
    /// A one-time link to the dashboard on a loopback listener: `{"url": "..."}`.
    Ui,
}

/// One request line: either a gateway `command` or an `inbox` request.
#[derive(Debug, Serialize, Deserialize)]
struct AdminRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<AdminCommand>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inbox: Option<InboxRequest>,
    /// With `reload`: apply a file that names no server, removing every server
    /// (`roster reload --allow-empty`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    allow_empty: bool,
}

/// Why the admin endpoint or a request to it failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The state directory or socket could not be set up.
    #[error("cannot open the admin socket at {path}: {source}")]
    Listen {
        /// The socket path.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The socket's path holds something that is not a socket; roster does not delete what it
    /// did not make.
    #[error(
        "{path} exists and is not a socket, so roster will not replace it; move it away or use \
         another state_dir"
    )]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Nothing listens at the socket: no gateway is running with this state directory.
    #[error(
        "no running gateway at {path} ({source}); start one with `roster serve` or set ROSTER_STATE_DIR"
    )]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The conversation broke off or the answer was not understood.
    #[error("the gateway's admin answer could not be read: {0}")]
    Protocol(String),
    /// The gateway refused the request.
    #[error("the gateway refused the request: {0}")]
    Refused(String),
}

/// The admin socket's path for a state directory.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET_NAME)
}

/// Binds the admin socket (replacing a stale one) with owner-only permissions and serves it
/// until the gateway shuts down; the socket file is removed then. Request lines longer than
/// [`DEFAULT_MAX_LINE`] are refused.
pub async fn serve(gateway: Arc<Gateway>, path: PathBuf) -> Result<(), AdminError> {
    serve_with(gateway, path, DEFAULT_MAX_LINE).await
}

/// [`serve`] with request lines of at most `max_line` bytes (`[gateway] admin_max_line`).
pub async fn serve_with(
    gateway: Arc<Gateway>,
    path: PathBuf,
    max_line: usize,
) -> Result<(), AdminError> {
    let (listener, bound) = bind(&path)?;
    let stop = gateway.shutdown_token();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(answer(gateway.clone(), stream, max_line));
                }
                Err(e) => tracing::warn!("admin socket accept failed: {e}"),
            }
        }
    }
    // Only the socket this gateway bound: another process may have replaced it since.
    if file_id(&path) == Some(bound) {
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

/// Device and inode of the file at `path` (not following a symlink).
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

fn bind(path: &Path) -> Result<(UnixListener, (u64, u64)), AdminError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let err = |source| AdminError::Listen {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        crate::store::ensure_state_dir(dir).map_err(err)?;
    }
    // A socket left behind by a gateway that did not exit cleanly would make bind fail; one
    // that still answers belongs to a live gateway and must not be taken over. Anything that
    // is not a socket is not roster's to delete.
    if let Ok(existing) = std::fs::symlink_metadata(path) {
        if !existing.file_type().is_socket() {
            return Err(AdminError::NotASocket {
                path: path.to_owned(),
            });
        }
        if answers(path) {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another gateway is running with this state directory",
            )));
        }
        std::fs::remove_file(path).map_err(err)?;
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    let bound = file_id(path).ok_or_else(|| {
        err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the socket vanished right after it was bound",
        ))
    })?;
    Ok((listener, bound))
}

/// How much of an over-long request is read past the limit to find its end, so the answer
/// reaches the client instead of a reset connection.
const DISCARD_CAP: u64 = 16 * 1024 * 1024;

/// Why a request line was not taken.
enum LineError {
    /// Longer than the limit; the rest of it is still unread.
    TooLong(usize),
    /// Could not be read or is not text.
    Unreadable(String),
}

/// Reads one request line of at most `max_line` bytes (newline excluded). `Ok(None)`: the peer
/// sent nothing.
async fn read_request(
    reader: &mut (impl AsyncBufRead + Unpin),
    max_line: usize,
) -> Result<Option<String>, LineError> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    let limit = u64::try_from(max_line)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    reader
        .take(limit)
        .read_until(b'\n', &mut bytes)
        .await
        .map_err(|e| LineError::Unreadable(format!("the admin request could not be read: {e}")))?;
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    } else if bytes.len() > max_line {
        return Err(LineError::TooLong(max_line));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| LineError::Unreadable("the admin request is not UTF-8".to_owned()))
}

/// Reads and drops the rest of a line (at most `cap` bytes) without holding it.
async fn discard_line(reader: &mut (impl AsyncBufRead + Unpin), cap: u64) {
    let mut left = cap;
    while left > 0 {
        let buf = match reader.fill_buf().await {
            Ok(buf) if !buf.is_empty() => buf,
            _ => return,
        };
        let (n, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        reader.consume(n);
        left = left.saturating_sub(n as u64);
        if done {
            return;
        }
    }
}

async fn answer(gateway: Arc<Gateway>, stream: UnixStream, max_line: usize) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    // Nothing sent (a client checking that a gateway answers) needs no answer either.
    let outcome = match read_request(&mut reader, max_line).await {
        Ok(None) => return,
        Ok(Some(line)) => handle(&gateway, &line).await,
        Err(LineError::TooLong(max)) => {
            discard_line(&mut reader, DISCARD_CAP).await;
            Err(format!(
                "the admin request is longer than {max} bytes (admin_max_line); admin \
                 requests are one short JSON line"
            ))
        }
        Err(LineError::Unreadable(error)) => Err(error),
    };
    let reply = match outcome {
        Ok(result) => json!({"ok": true, "result": result}),
        Err(error) => json!({"ok": false, "error": error}),
    };
    let mut text = reply.to_string();
    text.push('\n');
    let _ = write.write_all(text.as_bytes()).await;
}

async fn handle(gateway: &Arc<Gateway>, line: &str) -> Result<Value, String> {
    match serde_json::from_str::<AdminRequest>(line) {
        Ok(AdminRequest {
            command: Some(command),
            inbox: None,
            allow_empty,
        }) => run(gateway, command, allow_empty).await,
        Ok(AdminRequest {
            command: None,
            inbox: Some(request),
            ..
        }) => match gateway.inbox() {
            Some(inbox) => run_inbox(inbox, request),
            None => Err(NO_INBOX.to_owned()),
        },
        Ok(_) => Err("an admin request names exactly one of `command` and `inbox`".to_owned()),
        Err(e) => Err(format!("unknown admin request: {e}")),
    }
}

async fn run(
    gateway: &Arc<Gateway>,
    command: AdminCommand,
    allow_empty: bool,
) -> Result<Value, String> {
    const NO_FILE: &str = "this gateway was not started from a configuration file";
    Ok(match command {
        AdminCommand::Status => gateway.roster().servers_json(),
        AdminCommand::Tools => Value::Array(
            gateway
                .served_tools()
                .servers()
                .into_iter()
                .map(|t| json!({"name": t.name, "description": t.description}))
                .collect(),
        ),
        AdminCommand::Refresh => json!({"servers_marked_stale": gateway.refresh()}),
        AdminCommand::Reload => {
            let reloader = gateway.reloader().ok_or(NO_FILE)?;
            let trigger = if allow_empty {
                "roster reload --allow-empty"
            } else {
                "roster reload"
            };
            serde_json::to_value(reloader.reload_with(trigger, allow_empty).await)
                .map_err(|e| e.to_string())?
        }
        AdminCommand::Config => gateway.reloader().ok_or(NO_FILE)?.status_json(),
        AdminCommand::Ui => json!({"url": super::ui::open_link(gateway).await?}),
    })
}

/// Sends one command to the gateway listening at `path` and returns its result.
pub async fn request(path: &Path, command: AdminCommand) -> Result<Value, AdminError> {
    exchange(
        path,
        &AdminRequest {
            command: Some(command),
            inbox: None,
            allow_empty: false,
        },
    )
    .await
}

/// Asks the gateway listening at `path` to reload its configuration file; with `allow_empty`,
/// a file that names no server is applied too (every server is removed).
pub async fn reload(path: &Path, allow_empty: bool) -> Result<Value, AdminError> {
    exchange(
        path,
        &AdminRequest {
            command: Some(AdminCommand::Reload),
            inbox: None,
            allow_empty,
        },
    )
    .await
}

/// Sends one inbox request to the gateway listening at `path` and returns its result (shaped
/// as each [`InboxRequest`] variant says).
pub async fn inbox_request(path: &Path, request: InboxRequest) -> Result<Value, AdminError> {
    exchange(
        path,
        &AdminRequest {
            command: None,
            inbox: Some(request),
            allow_empty: false,
        },
    )
    .await
}

/// Whether a gateway answers at `path`: something accepts connections on the socket (a socket
/// file left by a gateway that died does not).
pub fn answers(path: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(path).is_ok()
}

async fn exchange(path: &Path, request: &AdminRequest) -> Result<Value, AdminError> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(|source| AdminError::Connect {
            path: path.to_owned(),
            source,
        })?;
    let (read, mut write) = stream.into_split();
    let mut line =
        serde_json::to_string(request).map_err(|e| AdminError::Protocol(e.to_string()))?;
    line.push('\n');
    write
        .write_all(line.as_bytes())
        .await
        .map_err(|e| AdminError::Protocol(e.to_string()))?;
    let mut reply = String::new();
    BufReader::new(read)
        .read_line(&mut reply)
        .await
        .map_err(|e| AdminError::Protocol(e.to_string()))?;
    let reply: Value =
        serde_json::from_str(&reply).map_err(|e| AdminError::Protocol(e.to_string()))?;
    if reply.get("ok") == Some(&Value::Bool(true)) {
        Ok(reply.get("result").cloned().unwrap_or(Value::Null))
    } else {
        Err(AdminError::Refused(
            reply
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given")
                .to_owned(),
        ))
    }
}
