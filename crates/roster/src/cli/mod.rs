//! The `roster` subcommands' logic that lives in the library; `main.rs` only parses arguments
//! and dispatches. (`inbox` and `completions` are binary-side modules under this folder,
//! included by `main.rs`.)

pub mod skills;
