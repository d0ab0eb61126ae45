//! What differs between the running configuration and a new one, for a reload: servers added,
//! removed and changed, the `[gateway]` and `[[clients]]` settings a reload puts in force, and
//! the keys whose new values only a restart applies.

use serde::{Deserialize, Serialize};

use super::{Config, GatewayConfig};

/// How `new` differs from `old`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigChanges {
    /// Servers only `new` has, in its order.
    pub added: Vec<String>,
    /// Servers only `old` has.
    pub removed: Vec<String>,
    /// Servers both have with a different effective entry (its own keys, or a `[gateway]`
    /// default it inherits): each is reconnected.
    pub changed: Vec<String>,
    /// Settings whose new value is in force from the next request (`gateway.delta_notes`,
    /// `gateway.subscriptions`, `gateway.page_size`, `gateway.page_bytes`, `clients`, `auth`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<String>,
    /// Keys whose new value takes effect only at the next start (`gateway.listen`, `skills`,
    /// `clients`, …).
    pub need_restart: Vec<String>,
}

impl ConfigChanges {
    /// Whether a reload has anything to do with the servers.
    pub fn touches_servers(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty())
    }
}

/// `[gateway]` keys that servers inherit: a new value reaches a server as a change of its
/// effective entry, and so applies by reconnecting it.
const INHERITED: &[&str] = &[
    "call_timeout",
    "connect_timeout",
    "list_timeout",
    "ping_interval",
    "min_ttl",
    "server_limits",
    "pin",
    "new_tools",
    "sandbox",
];

/// `[gateway]` keys the gateway puts in force at a reload (see `Gateway::apply`); `[[clients]]`
/// follows a reload too.
pub(crate) const LIVE: &[&str] = &[
    "subscriptions",
    "delta_notes",
    "page_size",
    "page_bytes",
    "tools_mode",
    "always",
];

/// Takes `new`'s live settings (see [`LIVE`]) and `[[clients]]` into `running`, so the next
/// reload compares against what is in force.
pub(crate) fn take_live(running: &mut Config, new: &Config) {
    running.gateway.subscriptions = new.gateway.subscriptions.clone();
    running.gateway.delta_notes = new.gateway.delta_notes;
    running.gateway.page_size = new.gateway.page_size;
    running.gateway.page_bytes = new.gateway.page_bytes;
    running.gateway.tools_mode = new.gateway.tools_mode;
    running.gateway.always = new.gateway.always.clone();
    running.clients = new.clients.clone();
    running.auth = new.auth.clone();
}

/// What differs between `old` and `new`.
pub fn changes(old: &Config, new: &Config) -> ConfigChanges {
    let mut out = ConfigChanges::default();
    for name in &new.server_order {
        match (old.servers.get(name), new.servers.get(name)) {
            (None, Some(_)) => out.added.push(name.clone()),
            (Some(before), Some(after)) if before != after => out.changed.push(name.clone()),
            _ => {}
        }
    }
    // A hand-built config may name servers outside its order.
    for name in new.servers.keys() {
        if !new.server_order.contains(name) && !old.servers.contains_key(name) {
            out.added.push(name.clone());
        }
    }
    for name in old.servers.keys() {
        if !new.servers.contains_key(name) {
            out.removed.push(name.clone());
        }
    }
    for key in gateway_keys(&old.gateway, &new.gateway) {
        if LIVE.contains(&key) {
            out.applied.push(format!("gateway.{key}"));
        } else if !INHERITED.contains(&key) {
            out.need_restart.push(format!("gateway.{key}"));
        }
    }
    if old.clients != new.clients {
        out.applied.push("clients".to_owned());
    }
    if old.auth != new.auth {
        out.applied.push("auth".to_owned());
    }
    if old.skills != new.skills {
        out.need_restart.push("skills".to_owned());
    }
    out
}

/// The `[gateway]` fields that differ, by name.
fn gateway_keys(old: &GatewayConfig, new: &GatewayConfig) -> Vec<&'static str> {
    let mut keys = Vec::new();
    macro_rules! compare {
        ($($field:ident),* $(,)?) => {
            // Destructured so a field added to GatewayConfig must be named here too.
            let GatewayConfig { $($field: _),* } = old;
            $(if old.$field != new.$field { keys.push(stringify!($field)); })*
        };
    }
    compare!(
        naming,
        separator,
        refresh_interval,
        debounce,
        dynamic_tools,
        subscriptions,
        state_dir,
        sandbox,
        admin_max_line,
        call_timeout,
        connect_timeout,
        list_timeout,
        turn_wait,
        min_ttl,
        ping_interval,
        backoff_initial,
        backoff_max,
        stable_period,
        crash_loop_after,
        startup_wait,
        listen,
        delta_notes,
        allowed_hosts,
        allowed_origins,
        page_size,
        page_bytes,
        tools_mode,
        always,
        task_after,
        task_ttl,
        max_tasks,
        max_connections,
        header_read_timeout,
        body_read_timeout,
        max_sessions,
        max_sessions_per_client,
        session_idle_timeout,
        admin_token_env,
        ui_listen,
        server_limits,
        pin,
        new_tools,
        watch_config,
        metrics,
    );
    keys.retain(|key| *key != "watch_config");
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        let env = |_: &str| None;
        Config::from_toml(text, std::path::Path::new("/etc/roster/roster.toml"), &env)
            .expect("valid test config")
    }

    #[test]
    fn servers_added_removed_and_changed_are_named_and_the_rest_left_alone() {
        let old = parse(
            "[servers.a]\ncommand = \"a\"\n[servers.b]\ncommand = \"b\"\n[servers.c]\ncommand = \"c\"\n",
        );
        let new = parse(
            "[servers.a]\ncommand = \"a\"\n[servers.c]\ncommand = \"c\"\nargs = [\"-v\"]\n[servers.d]\ncommand = \"d\"\n",
        );
        let found = changes(&old, &new);
        assert_eq!(found.added, ["d"]);
        assert_eq!(found.removed, ["b"]);
        assert_eq!(found.changed, ["c"]);
        assert!(found.need_restart.is_empty(), "{found:?}");
        assert!(changes(&new, &new) == ConfigChanges::default());
    }

    #[test]
    fn an_inherited_gateway_default_changes_the_servers_and_the_rest_needs_a_restart() {
        let old = parse(
            "[servers.a]\ncommand = \"a\"\n[servers.b]\ncommand = \"b\"\ncall_timeout = \"5s\"\n",
        );
        let new = parse(
            "[gateway]\ncall_timeout = \"9s\"\nlisten = \"127.0.0.1:9000\"\ndelta_notes = false\n\
             [skills]\npaths = [\"s\"]\n\
             [[clients]]\nname = \"ci\"\ntoken_env = \"CI_TOKEN\"\ntools.deny = [\"x\"]\n\
             [auth]\nissuer = \"https://idp.example\"\naudience = \"https://r.example/mcp\"\n\
             [servers.a]\ncommand = \"a\"\n[servers.b]\ncommand = \"b\"\ncall_timeout = \"5s\"\n",
        );
        let found = changes(&old, &new);
        assert_eq!(found.changed, ["a"], "b keeps its own timeout");
        assert_eq!(found.need_restart, ["gateway.listen", "skills"]);
        assert_eq!(found.applied, ["gateway.delta_notes", "clients", "auth"]);
        let mut running = old.clone();
        take_live(&mut running, &new);
        let again = changes(&running, &new);
        assert!(again.applied.is_empty(), "in force now: {again:?}");
        assert_eq!(again.need_restart, ["gateway.listen", "skills"]);
    }
}
