//! The `roster` subcommands' logic; `main.rs` only parses arguments and dispatches here.

pub mod skills;
