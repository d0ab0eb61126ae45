//! The `[gateway]` table as serde reads it, and its mapping to a [`GatewayConfig`]: durations,
//! bounds and the per-server limits every server gets.

use std::time::Duration;

use serde::Deserialize;

use super::ctx::{Ctx, RawDuration};
use super::filter::AlwaysListed;
use super::sandbox::{self, RawSandboxSetting};
use super::state_dir;
use super::{ConfigError, GatewayConfig, NamingMode, ServerLimits, ToolsMode};
use roster_core::pin::{NewTools, PinPolicy};

/// The least `gateway.page_bytes`: room for a tool of a few lines.
const MIN_PAGE_BYTES: usize = 1024;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGateway {
    naming: Option<NamingMode>,
    separator: Option<String>,
    refresh_interval: Option<RawDuration>,
    debounce: Option<RawDuration>,
    dynamic_tools: Option<bool>,
    subscriptions: Option<Vec<String>>,
    state_dir: Option<String>,
    sandbox: Option<RawSandboxSetting>,
    admin_max_line: Option<usize>,
    call_timeout: Option<RawDuration>,
    connect_timeout: Option<RawDuration>,
    list_timeout: Option<RawDuration>,
    turn_wait: Option<RawDuration>,
    min_ttl: Option<RawDuration>,
    ping_interval: Option<RawDuration>,
    backoff_initial: Option<RawDuration>,
    backoff_max: Option<RawDuration>,
    stable_period: Option<RawDuration>,
    crash_loop_after: Option<u32>,
    startup_wait: Option<RawDuration>,
    listen: Option<String>,
    delta_notes: Option<bool>,
    allowed_hosts: Option<Vec<String>>,
    allowed_origins: Option<Vec<String>>,
    page_size: Option<usize>,
    page_bytes: Option<usize>,
    tools_mode: Option<ToolsMode>,
    always: Option<Vec<String>>,
    task_after: Option<RawDuration>,
    task_ttl: Option<RawDuration>,
    max_tasks: Option<usize>,
    max_connections: Option<usize>,
    header_read_timeout: Option<RawDuration>,
    body_read_timeout: Option<RawDuration>,
    max_sessions: Option<usize>,
    max_sessions_per_client: Option<usize>,
    session_idle_timeout: Option<RawDuration>,
    admin_token_env: Option<String>,
    ui_listen: Option<String>,
    notification_rate: Option<u32>,
    notification_burst: Option<u32>,
    max_tools: Option<usize>,
    max_listing_bytes: Option<usize>,
    max_log_line: Option<usize>,
    kill_grace: Option<RawDuration>,
    pin: Option<PinPolicy>,
    new_tools: Option<NewTools>,
    watch_config: Option<bool>,
    metrics: Option<bool>,
    metrics_listen: Option<String>,
    metrics_tool_labels: Option<bool>,
}

/// `always` patterns (of `[gateway]` or a client, named by `key`), compiled.
pub(super) fn always_listed(
    ctx: &Ctx<'_>,
    key: &str,
    patterns: Vec<String>,
) -> Result<AlwaysListed, ConfigError> {
    AlwaysListed::new(patterns)
        .map_err(|e| ctx.invalid(key, format!("glob patterns on exposed tool names ({e})")))
}

pub(super) fn build_gateway(ctx: &Ctx<'_>, raw: RawGateway) -> Result<GatewayConfig, ConfigError> {
    let mut g = GatewayConfig::defaults(ctx.env);
    g.server_limits = build_server_limits(ctx, &raw)?;
    if let Some(naming) = raw.naming {
        g.naming = naming;
    }
    if let Some(sep) = raw.separator {
        g.separator = sep;
    }
    // The registry's own rule, checked here so the error names the file and the key.
    if g.naming_config().validate().is_err() {
        return Err(ctx.invalid("gateway.separator", "1 to 8 characters of [A-Za-z0-9_.-]"));
    }
    let dur = |key: &str, raw: &Option<RawDuration>, into: &mut Duration| {
        if let Some(raw) = raw {
            *into = ctx.duration(key, raw)?;
        }
        Ok::<(), ConfigError>(())
    };
    dur(
        "gateway.refresh_interval",
        &raw.refresh_interval,
        &mut g.refresh_interval,
    )?;
    dur("gateway.debounce", &raw.debounce, &mut g.debounce)?;
    dur(
        "gateway.call_timeout",
        &raw.call_timeout,
        &mut g.call_timeout,
    )?;
    dur(
        "gateway.backoff_initial",
        &raw.backoff_initial,
        &mut g.backoff_initial,
    )?;
    dur("gateway.backoff_max", &raw.backoff_max, &mut g.backoff_max)?;
    dur(
        "gateway.stable_period",
        &raw.stable_period,
        &mut g.stable_period,
    )?;
    dur(
        "gateway.startup_wait",
        &raw.startup_wait,
        &mut g.startup_wait,
    )?;
    if let Some(ping) = &raw.ping_interval {
        let d = ctx.duration("gateway.ping_interval", ping)?;
        g.ping_interval = (!d.is_zero()).then_some(d);
    }
    dur(
        "gateway.connect_timeout",
        &raw.connect_timeout,
        &mut g.connect_timeout,
    )?;
    dur(
        "gateway.list_timeout",
        &raw.list_timeout,
        &mut g.list_timeout,
    )?;
    dur("gateway.turn_wait", &raw.turn_wait, &mut g.turn_wait)?;
    dur("gateway.min_ttl", &raw.min_ttl, &mut g.min_ttl)?;
    for (key, value) in [
        ("gateway.call_timeout", g.call_timeout),
        ("gateway.connect_timeout", g.connect_timeout),
        ("gateway.list_timeout", g.list_timeout),
    ] {
        if value.is_zero() {
            return Err(ctx.invalid(key, "a duration above zero"));
        }
    }
    if g.backoff_max < g.backoff_initial {
        return Err(ctx.invalid(
            "gateway.backoff_max",
            "a duration no shorter than gateway.backoff_initial",
        ));
    }
    if let Some(n) = raw.crash_loop_after {
        if n == 0 {
            return Err(ctx.invalid("gateway.crash_loop_after", "a number of failures above 0"));
        }
        g.crash_loop_after = n;
    }
    // The environment switch wins over the file: it is how an operator turns re-listing off
    // without editing a shared config.
    if let Some(dynamic) = raw.dynamic_tools {
        g.dynamic_tools = dynamic && (ctx.env)("ROSTER_DYNAMIC_TOOLS").as_deref() != Some("0");
    }
    if let Some(subs) = raw.subscriptions {
        g.subscriptions = subs;
    }
    if let Some(listen) = raw.listen {
        g.listen = listen;
    }
    if let Some(notes) = raw.delta_notes {
        g.delta_notes = notes;
    }
    if let Some(hosts) = raw.allowed_hosts {
        g.allowed_hosts = hosts;
    }
    if let Some(origins) = raw.allowed_origins {
        g.allowed_origins = origins;
    }
    if let Some(size) = raw.page_size {
        if size == 0 {
            return Err(ctx.invalid("gateway.page_size", "a page size above 0"));
        }
        g.page_size = size;
    }
    if let Some(bytes) = raw.page_bytes {
        if bytes < MIN_PAGE_BYTES {
            return Err(ctx.invalid(
                "gateway.page_bytes",
                format!("a page size in bytes of {MIN_PAGE_BYTES} or more"),
            ));
        }
        g.page_bytes = bytes;
    }
    if let Some(mode) = raw.tools_mode {
        g.tools_mode = mode;
    }
    if let Some(patterns) = raw.always {
        g.always = always_listed(ctx, "gateway.always", patterns)?;
    }
    dur("gateway.task_after", &raw.task_after, &mut g.task_after)?;
    dur("gateway.task_ttl", &raw.task_ttl, &mut g.task_ttl)?;
    if g.task_ttl.is_zero() {
        return Err(ctx.invalid("gateway.task_ttl", "a duration above zero"));
    }
    if let Some(max) = raw.max_tasks {
        g.max_tasks = max;
    }
    for (key, value, slot) in [
        (
            "gateway.max_connections",
            raw.max_connections,
            &mut g.max_connections,
        ),
        (
            "gateway.max_sessions",
            raw.max_sessions,
            &mut g.max_sessions,
        ),
        (
            "gateway.max_sessions_per_client",
            raw.max_sessions_per_client,
            &mut g.max_sessions_per_client,
        ),
    ] {
        above_zero(ctx, key, value, slot)?;
    }
    for (key, value, slot) in [
        (
            "gateway.header_read_timeout",
            &raw.header_read_timeout,
            &mut g.header_read_timeout,
        ),
        (
            "gateway.body_read_timeout",
            &raw.body_read_timeout,
            &mut g.body_read_timeout,
        ),
        (
            "gateway.session_idle_timeout",
            &raw.session_idle_timeout,
            &mut g.session_idle_timeout,
        ),
    ] {
        dur(key, value, slot)?;
        if slot.is_zero() {
            return Err(ctx.invalid(key, "a duration above zero"));
        }
    }
    if let Some(pin) = raw.pin {
        g.pin = pin;
    }
    if let Some(new_tools) = raw.new_tools {
        g.new_tools = new_tools;
    }
    if let Some(watch) = raw.watch_config {
        g.watch_config = watch;
    }
    if let Some(var) = raw.admin_token_env {
        g.admin_token_env = Some(var);
    }
    if let Some(addr) = raw.ui_listen {
        if addr.parse::<std::net::SocketAddr>().is_err() {
            return Err(ctx.invalid(
                "gateway.ui_listen",
                "host:port with an IP address, such as \"127.0.0.1:8940\"",
            ));
        }
        g.ui_listen = Some(addr);
    }
    g.metrics =
        super::MetricsConfig::from_keys(raw.metrics, raw.metrics_listen, raw.metrics_tool_labels)
            .map_err(|expected| ctx.invalid("gateway.metrics_listen", expected))?;
    g.state_dir = state_dir::resolve(ctx.env, raw.state_dir.map(|dir| ctx.resolve(&dir)));
    if let Some(setting) = raw.sandbox {
        g.sandbox = sandbox::build(ctx, "gateway.sandbox", setting, None)?;
    }
    if let Some(max) = raw.admin_max_line {
        if max < 1024 {
            return Err(ctx.invalid(
                "gateway.admin_max_line",
                "at least 1024 bytes (an admin request is one JSON line)",
            ));
        }
        g.admin_max_line = max;
    }
    Ok(g)
}

// ---- server limits ----------------------------------------------------------------------

fn build_server_limits(ctx: &Ctx<'_>, raw: &RawGateway) -> Result<ServerLimits, ConfigError> {
    let mut limits = ServerLimits::default();
    above_zero(
        ctx,
        "gateway.notification_rate",
        raw.notification_rate,
        &mut limits.notification_rate,
    )?;
    above_zero(
        ctx,
        "gateway.notification_burst",
        raw.notification_burst,
        &mut limits.notification_burst,
    )?;
    above_zero(
        ctx,
        "gateway.max_tools",
        raw.max_tools,
        &mut limits.max_tools,
    )?;
    above_zero(
        ctx,
        "gateway.max_listing_bytes",
        raw.max_listing_bytes,
        &mut limits.max_listing_bytes,
    )?;
    if let Some(line) = raw.max_log_line {
        if line < 64 {
            return Err(ctx.invalid("gateway.max_log_line", "a number of bytes of at least 64"));
        }
        limits.max_log_line = line;
    }
    if let Some(grace) = &raw.kill_grace {
        limits.kill_grace = ctx.duration("gateway.kill_grace", grace)?;
    }
    Ok(limits)
}

/// `value`, when the file sets it, into `into`; zero is refused, naming `key`.
fn above_zero<T: Copy + Default + PartialEq>(
    ctx: &Ctx<'_>,
    key: &str,
    value: Option<T>,
    into: &mut T,
) -> Result<(), ConfigError> {
    match value {
        Some(n) if n == T::default() => Err(ctx.invalid(key, "a number above 0")),
        Some(n) => {
            *into = n;
            Ok(())
        }
        None => Ok(()),
    }
}
