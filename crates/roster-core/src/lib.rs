//! The pure logic of roster, an MCP gateway with a live tool registry and a skill catalog.
//!
//! Nothing in this crate does I/O or needs an async runtime. Time enters as an argument
//! (`now: Instant`), so every rule (TTL, staleness, backoff, debounce) is tested without sleeping.
//!
//! The words used here are those of the design: a *server* offers tools, its *listing* is the
//! result of paging `tools/list` to its end, the [`registry::ToolRegistry`] reconciles one
//! server's listing at a time into a [`delta::Delta`], and skills name the tools they rely on.

pub mod catalog;
pub mod debounce;
pub mod delta;
pub mod fingerprint;
pub mod flow;
pub mod methods;
pub mod naming;
pub mod pin;
pub mod registry;
pub mod schedule;
pub mod skills;
mod text;
pub mod tool;
pub mod tool_search;

pub use catalog::{Catalog, ListFilter, SearchHit, SkillEntry, SkillPage, Subscriptions};
pub use debounce::{DebounceError, Debouncer, Fire};
pub use delta::{Delta, DeltaQueue};
pub use flow::{FlowError, FlowTemplate, FlowTemplates, ResolvedStep};
pub use naming::{Collision, NATIVE_TOOLS, NamingConfig, NamingError, NamingMode};
pub use registry::{
    CallRouteError, ExposedTool, Fingerprint, Listing, Route, Superseded, ToolRegistry,
};
pub use schedule::{
    BackoffConfig, ListingState, ListingTicket, Schedule, ScheduleConfig, ScheduleConfigError,
    ServerSchedule,
};
pub use skills::{
    Availability, InvalidSkill, LoadReport, ResolveError, Skill, SkillError, SkillFileError,
    SkillKind, SkillRefreshResult, SkillRegistry, SkillSource, Step,
};
pub use tool::{Tool, ToolLookup, ToolPresence};
pub use tool_search::{ToolIndex, ToolSearchHit};
