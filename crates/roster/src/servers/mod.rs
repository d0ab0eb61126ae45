//! Connections to servers: stdio child processes, streamable HTTP, legacy SSE; the
//! notification fan-out, the debounced re-list on `list_changed`, and supervision.
//!
//! - [`Connection`]: one live connection on rmcp's client side. It speaks both eras: it
//!   probes `server/discover` (2026-07-28) and falls back to `initialize` (2025-11-25 and
//!   older), or uses the one `protocol = "legacy" | "modern"` asks for. On a 2026-07-28
//!   connection it opens `subscriptions/listen` for `toolsListChanged` (and
//!   `promptsListChanged` / `resourcesListChanged` where declared), on every reconnect.
//! - Transports: rmcp's streamable HTTP client (a caller's requests to an initialize-era server
//!   POSTed by roster itself past it: [`http_direct`]); roster's own stdio transport (stderr into the
//!   log, cut and escaped; a waiter task that reaps the child; its process group ended with
//!   SIGTERM, then SIGKILL after `kill_grace`; a parent-death signal on Linux) and legacy SSE
//!   client (rmcp no longer ships one). Both of roster's own transports drop lines that are not
//!   JSON-RPC, and answers to nothing roster asked during the handshake.
//! - [`gate`]: every transport reads a server's notifications through its per-server rate
//!   (`notification_rate`, `notification_burst`): past it a `list_changed` is coalesced and
//!   anything else dropped, counted, and reported once a second in the inbox. Reading is paced
//!   by the task budget, so one server's flood never starves another's calls.
//! - **Why raw JSON for tools.** rmcp's typed `Tool` drops fields it does not model (e.g.
//!   2025-11-25 `execution`). On stdio and SSE the raw `result` of `tools/list` and
//!   `tools/call` is kept by request id and [`roster_core::Tool`] is built from it, unknown
//!   fields included. On streamable HTTP rmcp decodes inside its transport, so the tool is
//!   rebuilt from rmcp's typed value and fields rmcp does not know are lost there.
//! - [`ServerEvent`]: each notification a server sends, read once at the connection edge
//!   (`event`); listeners match on its kind, and it gives back its method and params as sent.
//!   [`Notifications`] (`notifications`, the listener hub) fans it out per server, surviving
//!   restarts; [`NotificationSink`] is where the inbox records each one.
//! - [`relay`]: a server's requests (`sampling/createMessage`, `elicitation/create`,
//!   `roots/list`), its `input_required` results (2026-07-28) and its log messages go to the
//!   caller of the request in flight ([`CallerRelay`]). An elicitation nobody can take becomes
//!   a pending confirm in the inbox (via [`NotificationSink::confirm`]); a yes accepts with the
//!   schema's defaults (booleans without one `true`), a no or expiry declines.
//! - [`RefreshHook`]: `list_changed` → debounced re-list of that one server, on its own task
//!   (the background one: the server is marked stale at once, and the next turn lists it).
//!   Each kind re-lists only its own list: tools, prompts, or resources with their templates.
//! - Resource watches ([`ResourceWatch`], `watches`): one watch per URI at the server that
//!   owns it while any client session watches it (`resources/subscribe`, or on a 2026-07-28
//!   connection a `subscriptions/listen` stream per URI), made again on every reconnect; the
//!   server's `notifications/resources/updated` are published as [`ResourceUpdate`]s.
//! - The runtime behind [`crate::Roster`] (`runtime`: registry, schedule, listings, delta
//!   fan-out, status) and supervision (`supervisor`): exit, drop or an unanswered ping
//!   removes the server's tools, then reconnects with the core schedule's backoff; tools
//!   return after the new connection is listed; repeated failures park the server in
//!   `crash-loop`.

pub(crate) mod answer;
mod call;
mod client_side;
mod connection;
mod error;
mod event;
pub mod gate;
mod gated;
mod gauges;
pub(crate) mod http_direct;
pub(crate) mod listing;
mod notifications;
pub(crate) mod offerings;
mod outcome;
pub(crate) mod pinning;
mod refresh;
pub mod relay;
pub(crate) mod runtime;
pub mod sandbox;
mod sink;
pub(crate) mod skills;
pub(crate) mod sse;
pub(crate) mod status;
pub(crate) mod stdio;
mod supervisor;
mod tools_page;
mod turn;
pub(crate) mod watches;
pub(crate) mod wire;

pub use answer::Answer;
pub use call::{CallOptions, InputRound, ToolArguments};
pub use client_side::ELICITATION_WAIT;
pub(crate) use connection::json_size;
pub use connection::{Connection, Negotiated, ToolListing};
pub use error::{ConnectError, RequestError};
pub use event::{
    ListKind, PROGRESS, PROMPTS_LIST_CHANGED, RESOURCES_LIST_CHANGED, RESOURCES_UPDATED,
    ServerEvent, TOOLS_LIST_CHANGED,
};
pub use listing::RelistError;
pub use notifications::{
    Confirmer, ListenerId, LogFallback, NotificationListener, Notifications, ProgressListener,
};
pub use offerings::{PromptEntry, RouteError};
pub use refresh::{RefreshHook, RefreshHookError, Relist};
pub use relay::{CallerRelay, InputRequiredOnly, LogLevel};
pub use runtime::{
    Change, OfferingsGeneration, RECENT_CHANGES, ReconcileHook, ServerLog, SkillsHook,
};
pub use sink::{ConfirmFuture, LogSink, NotificationSink};
pub use skills::SyncedSkill;
pub use sse::{SseError, SseGuard};
pub use status::{ServerState, ServerStatus};
pub use stdio::{ChildExit, ChildGuard, SpawnError};
pub use turn::Needs;
pub use watches::{ResourceUpdate, ResourceWatch};
pub use wire::WireError;
