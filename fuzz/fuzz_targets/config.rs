//! Config parsing: any text, as `roster.toml` or as an `mcpServers` JSON file, is a config or a
//! `ConfigError` naming the file, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use roster::Config;

fuzz_target!(|text: &str| {
    // Every variable is set, so `${VAR}` expansion runs on whatever the input names.
    let env = |name: &str| (name.len() % 3 != 0).then(|| format!("v-{name}"));
    let path = Path::new("/fuzz/roster.toml");
    if let Err(e) = Config::from_toml(text, path, &env) {
        assert!(e.to_string().contains("/fuzz/roster.toml"), "{e}");
    }
    let path = Path::new("/fuzz/mcp.json");
    if let Err(e) = Config::from_mcp_servers_json(text, path, &env) {
        assert!(e.to_string().contains("/fuzz/mcp.json"), "{e}");
    }
});
