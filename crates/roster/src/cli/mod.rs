//! The `roster` subcommands' logic, one module each; `main.rs` only parses arguments and
//! dispatches here.

pub mod auth;
pub mod completions;
pub mod inbox;
pub mod probe;
pub mod skills;
pub mod state;
pub mod tools;
