//! Connections to servers: stdio child processes, streamable HTTP, legacy SSE; the
//! notification fan-out, the debounced re-list on `list_changed`, and supervision.

mod connection;
mod refresh;
mod sink;
mod sse;
mod stdio;
pub(crate) mod supervisor;
mod wire;

pub use connection::{
    CallOptions, ConnectError, Connection, ListenerId, Negotiated, NotificationListener,
    Notifications, ProgressListener, RequestError, ToolListing,
};
pub use refresh::{RefreshHook, RefreshHookError, Relist, TOOLS_LIST_CHANGED};
pub use sink::{LogSink, NotificationSink};
pub use sse::{SseError, SseGuard};
pub use stdio::{ChildExit, ChildGuard, SpawnError};
pub use supervisor::{ReconcileHook, RelistError, ServerState, ServerStatus};
pub use wire::WireError;
