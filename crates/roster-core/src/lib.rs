//! The pure logic of roster, an MCP gateway with a live tool registry and a skill catalog.
//!
//! Nothing in this crate does I/O or needs an async runtime. Time enters as an argument
//! (`now: Instant`), so every rule (TTL, staleness, backoff, debounce) is tested without sleeping.
//!
//! The words used here are those of the design: a *server* offers tools, its *listing* is the
//! result of paging `tools/list` to its end, the [`registry::ToolRegistry`] reconciles one
//! server's listing at a time into a [`delta::Delta`], and skills name the tools they rely on.

pub mod debounce;
pub mod delta;
pub mod naming;
pub mod registry;
pub mod schedule;
pub mod tool;

pub use debounce::{DebounceError, Debouncer, Fire};
pub use delta::{Delta, DeltaQueue};
pub use naming::{Collision, NATIVE_TOOLS, NamingConfig, NamingError, NamingMode};
pub use registry::{ExposedTool, Fingerprint, Listing, Route, Superseded, ToolRegistry};
pub use schedule::{
    BackoffConfig, ListingState, Schedule, ScheduleConfig, ScheduleConfigError, ServerSchedule,
};
pub use tool::{Tool, ToolLookup, ToolPresence};
