//! roster: an MCP gateway with a live tool registry and a skill catalog.
//!
//! The pure rules live in [`roster_core`]; this crate wires them to processes and sockets.
//!
//! - [`config`]: `roster.toml` and the `mcpServers` JSON of Claude Desktop, Cursor, VS Code.
//! - [`servers`]: connections (stdio, streamable HTTP, legacy SSE), notifications, re-listing.
//! - [`Roster`]: the library façade for agent hosts, and what the gateway serves.
//! - [`metrics`]: Prometheus metrics of one roster, served at `GET /metrics`.
//! - [`telemetry`]: OpenTelemetry traces of client and server requests.
//! - [`logs`]: the log writer that keeps URLs' userinfo and query strings out of every line.

pub use roster_core as core;

// The catalogues of crate::i18n, built in; `t!` falls back to English.
rust_i18n::i18n!("locales", fallback = "en");

pub mod cli;
pub mod config;
pub mod demo;
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod i18n;
pub mod inbox;
pub mod logs;
mod memory;
pub use memory::tune_for_serving;
pub mod metrics;
pub mod oauth;
pub mod reviews;
mod roster;
pub mod servers;
mod session;
mod skills;
pub mod store;
mod sync;
pub mod telemetry;

pub use config::Config;
pub use roster::{
    CallError, HIT_DESCRIPTION_CHARS, RestartError, Roster, RosterOptions, StartError, ToolEntry,
    ToolHit,
};
pub use servers::Needs;
pub use session::{Session, Turn};
