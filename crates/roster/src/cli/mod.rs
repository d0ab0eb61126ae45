//! The `roster` binary's subcommands, one module each.

pub mod completions;
pub mod inbox;
