//! Prometheus metrics of one [`crate::Roster`]: what its calls, listings and notifications
//! did (counters and histograms, recorded by one-line hooks where they happen) and what its
//! servers, inbox, skills and pins are now (gauges read from the live state at each scrape by
//! [`collect`]'s collectors, so nothing has to be kept in step). The page is the Prometheus
//! text format as the maintained `prometheus-client` crate encodes it; `http` serves it at
//! `GET /metrics`.
//!
//! Every [`Metrics`] is its own registry (one per roster, never a process global), so tests
//! and embedders each see only their own. `[gateway] metrics = false` makes every hook a
//! no-op: the same binary can be measured both ways (`cargo bench -p roster --bench metrics`).
//!
//! Label values are bounded: `server` only ever holds a configured server's name (hooks take
//! it from the server's slot or the registry, never from a client), methods come from the
//! specification's fixed lists (anything else is `other`), and tool names appear only with
//! `metrics_tool_labels = true`, at most [`labels::MAX_TOOL_LABELS`] of them.

use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use roster_core::Delta;

use crate::sync::lock;

mod collect;
pub mod http;
pub(crate) mod labels;
pub(crate) mod stdio;

pub use crate::config::MetricsConfig;
pub(crate) use collect::{GatewaySource, Gauges, family, watch_gateway, watch_runtime};
#[doc(hidden)]
pub use labels::CallOutcome;
use labels::{
    CallLabels, Labels, MAX_TOOL_LABELS, ToolLabels, Value, bounded_method, client_request_label,
};

/// Seconds: 100 µs to ~105 s, doubling (a call through roster to a local server is well under
/// a millisecond; `call_timeout` defaults to 60 s).
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 21))
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// A source of how many client sessions of one era are open, read at each scrape (`None` once
/// its owner is gone).
type SessionCount = Box<dyn Fn() -> Option<usize> + Send + Sync>;

struct Inner {
    registry: Mutex<Registry>,
    tool_labels: Option<Mutex<ToolLabels>>,
    calls: Histograms<CallLabels>,
    calls_refused: Family<Labels<1>, Counter>,
    requests: Family<Labels<1>, Counter>,
    listings: Family<Labels<2>, Counter>,
    listing_seconds: Histograms<Labels<1>>,
    deltas: Family<Labels<2>, Counter>,
    notifications: Family<Labels<2>, Counter>,
    sessions: Family<Labels<2>, Gauge>,
    session_counts: Mutex<Vec<(&'static str, SessionCount)>>,
}

/// The metrics of one roster: cheap to clone, every clone records into the same registry.
/// [`Metrics::default`] is off: it records nothing and [`Metrics::encode`] gives `None`.
#[derive(Clone, Default)]
pub struct Metrics {
    inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("on", &self.is_on())
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry with roster's metrics, or an off one when `config.enabled` is false.
    pub fn new(config: &MetricsConfig) -> Metrics {
        if !config.enabled {
            return Metrics::default();
        }
        let inner = Inner {
            registry: Mutex::new(Registry::default()),
            tool_labels: config
                .tool_labels
                .then(|| Mutex::new(ToolLabels::default())),
            calls: Family::new_with_constructor(seconds_histogram),
            calls_refused: Family::default(),
            requests: Family::default(),
            listings: Family::default(),
            listing_seconds: Family::new_with_constructor(seconds_histogram),
            deltas: Family::default(),
            notifications: Family::default(),
            sessions: Family::default(),
            session_counts: Mutex::new(Vec::new()),
        };
        {
            let mut registry = lock(&inner.registry);
            registry.register(
                "roster_tool_call_duration_seconds",
                "tools/call of a server's tool, by server and outcome (ok, tool_error, \
                 protocol_error, timeout, cancelled, server_down): time from routing to answer",
                inner.calls.clone(),
            );
            registry.register(
                "roster_tool_calls_refused",
                "tools/call refused before any server: unknown_tool, withheld, ambiguous",
                inner.calls_refused.clone(),
            );
            registry.register(
                "roster_client_requests",
                "client requests by MCP method (methods outside the specification: other)",
                inner.requests.clone(),
            );
            registry.register(
                "roster_listings",
                "tools/list listings of a server, by outcome (ok, failed)",
                inner.listings.clone(),
            );
            registry.register(
                "roster_listing_duration_seconds",
                "time one tools/list listing (every page) of a server took",
                inner.listing_seconds.clone(),
            );
            registry.register(
                "roster_tool_changes",
                "tools added, changed and removed by reconciles, by server",
                inner.deltas.clone(),
            );
            registry.register(
                "roster_server_notifications",
                "notifications received from a server, by method (outside the \
                 specification: other)",
                inner.notifications.clone(),
            );
            registry.register(
                "roster_client_sessions",
                "client sessions open, by protocol era (initialize, stateless) and transport",
                inner.sessions.clone(),
            );
        }
        Metrics {
            inner: Some(Arc::new(inner)),
        }
    }

    /// Whether metrics are recorded (`[gateway] metrics`).
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// The whole page in the Prometheus text format (version 0.0.4); `None` when off.
    pub fn encode(&self) -> Option<String> {
        let inner = self.inner.as_ref()?;
        inner.refresh_sessions();
        let mut page = String::new();
        let registry = lock(&inner.registry);
        // Writing to a String cannot fail; a collector that fails leaves its part out.
        if let Err(error) =
            prometheus_client::encoding::prometheus_text::encode(&mut page, &registry)
        {
            tracing::warn!(%error, "a metric could not be encoded");
        }
        Some(page)
    }

    /// Adds gauges computed at each scrape.
    pub(crate) fn add_collector(&self, collector: impl Collector) {
        if let Some(inner) = &self.inner {
            lock(&inner.registry).register_collector(Box::new(collector));
        }
    }

    /// Counts, at each scrape, the sessions of `era` that `count` reports while it reports
    /// any (an HTTP endpoint's initialize-era sessions).
    pub(crate) fn count_sessions(
        &self,
        era: &'static str,
        count: impl Fn() -> Option<usize> + Send + Sync + 'static,
    ) {
        if let Some(inner) = &self.inner {
            let mut counts = lock(&inner.session_counts);
            counts.retain(|(_, count)| count().is_some());
            counts.push((era, Box::new(count)));
        }
    }

    /// One open session of `era` while the guard lives (a stdio client).
    pub(crate) fn session_open(&self, era: &'static str) -> SessionGuard {
        let gauge = self.inner.as_ref().map(|inner| {
            let gauge = inner.sessions.get_or_create_owned(&era_labels(era, true));
            gauge.inc();
            gauge
        });
        SessionGuard(gauge)
    }

    /// Now, when metrics are on (the start of something timed).
    pub(crate) fn started(&self) -> Option<Instant> {
        self.inner.as_ref().map(|_| Instant::now())
    }

    /// A `tools/call` of `server`'s tool `exposed` answered (or failed) with `outcome` (a
    /// server's answer says which [`CallOutcome`] it is, only while metrics are on).
    pub(crate) fn call(
        &self,
        server: &str,
        exposed: &str,
        started: Option<Instant>,
        outcome: impl Into<CallOutcome>,
    ) {
        if self.is_on() {
            self.call_ended(server, exposed, started, outcome.into());
        }
    }

    /// [`Metrics::call`] timed from now, for `benches/metrics.rs` (what recording costs).
    #[doc(hidden)]
    pub fn bench_call(&self, server: &str, exposed: &str, outcome: impl Into<CallOutcome>) {
        self.call(server, exposed, self.started(), outcome);
    }

    /// A `tools/call` of a server that is not connected.
    pub(crate) fn call_unavailable(&self, server: &str, exposed: &str) {
        self.call_ended(server, exposed, self.started(), CallOutcome::ServerDown);
    }

    fn call_ended(
        &self,
        server: &str,
        exposed: &str,
        started: Option<Instant>,
        outcome: CallOutcome,
    ) {
        let (Some(inner), Some(started)) = (&self.inner, started) else {
            return;
        };
        let tool = inner
            .tool_labels
            .as_ref()
            .map(|labels| lock(labels).label(exposed, MAX_TOOL_LABELS));
        let labels = CallLabels {
            server: server.to_owned(),
            outcome,
            tool,
        };
        inner
            .calls
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
    }

    /// A `tools/call` refused before any server, for `reason` (`withheld`, `ambiguous`,
    /// `unknown_tool`: a fixed set, so the label stays bounded).
    pub(crate) fn call_refused(&self, reason: &'static str) {
        if let Some(inner) = &self.inner {
            inner
                .calls_refused
                .get_or_create(&Labels([("reason", Value::Fixed(reason))]))
                .inc();
        }
    }

    /// A `tools/call` whose name routed nowhere (`withheld`: it names a withheld tool).
    pub(crate) fn route_refused(&self, error: &roster_core::CallRouteError, withheld: bool) {
        let reason = match error {
            roster_core::CallRouteError::Unknown(_) if withheld => "withheld",
            roster_core::CallRouteError::Unknown(_) => "unknown_tool",
            _ => "ambiguous",
        };
        self.call_refused(reason);
    }

    /// A client request of `method`.
    pub(crate) fn request(&self, method: &str) {
        if let Some(inner) = &self.inner {
            let method = client_request_label(method);
            inner
                .requests
                .get_or_create(&Labels([("method", Value::Fixed(method))]))
                .inc();
        }
    }

    /// A `tools/list` listing of `server` that began at `started` ended.
    pub(crate) fn listing(&self, server: &str, started: Option<Instant>, ok: bool) {
        let (Some(inner), Some(started)) = (&self.inner, started) else {
            return;
        };
        let outcome = if ok { "ok" } else { "failed" };
        inner
            .listings
            .get_or_create(&Labels([
                ("server", Value::Server(server.to_owned())),
                ("outcome", Value::Fixed(outcome)),
            ]))
            .inc();
        inner
            .listing_seconds
            .get_or_create(&Labels([("server", Value::Server(server.to_owned()))]))
            .observe(started.elapsed().as_secs_f64());
    }

    /// A reconcile (or a server going down) changed `server`'s tools by `delta`.
    pub(crate) fn delta(&self, server: &str, delta: &Delta) {
        let Some(inner) = &self.inner else { return };
        for (change, count) in [
            ("added", delta.added.len()),
            ("changed", delta.changed.len()),
            ("removed", delta.removed.len()),
        ] {
            if count > 0 {
                inner
                    .deltas
                    .get_or_create(&Labels([
                        ("server", Value::Server(server.to_owned())),
                        ("change", Value::Fixed(change)),
                    ]))
                    .inc_by(count as u64);
            }
        }
    }

    /// Drops every series of `server` (a server removed from the config at run time), so a
    /// dashboard stops showing it; its gauges already follow the live state.
    pub fn forget_server(&self, server: &str) {
        let Some(inner) = &self.inner else { return };
        let name = || Value::Server(server.to_owned());
        let tools: Vec<Option<String>> = match &inner.tool_labels {
            Some(labels) => lock(labels).names().map(Some).collect(),
            None => vec![None],
        };
        for outcome in CallOutcome::ALL {
            for tool in &tools {
                inner.calls.remove(&CallLabels {
                    server: server.to_owned(),
                    outcome,
                    tool: tool.clone(),
                });
            }
        }
        for outcome in ["ok", "failed"] {
            inner.listings.remove(&Labels([
                ("server", name()),
                ("outcome", Value::Fixed(outcome)),
            ]));
        }
        inner.listing_seconds.remove(&Labels([("server", name())]));
        for change in ["added", "changed", "removed"] {
            inner.deltas.remove(&Labels([
                ("server", name()),
                ("change", Value::Fixed(change)),
            ]));
        }
        let methods = roster_core::methods::SERVER_NOTIFICATIONS
            .iter()
            .chain([&labels::OTHER]);
        for method in methods {
            inner.notifications.remove(&Labels([
                ("server", name()),
                ("method", Value::Fixed(method)),
            ]));
        }
    }

    /// What counts each notification `server` sends, by method: called with the method of
    /// each one from now on (`None` while metrics are off). It holds the metrics weakly.
    pub(crate) fn notification_counter(
        &self,
        server: &str,
    ) -> Option<impl Fn(&str) + Send + Sync + 'static> {
        let inner = self.inner.as_ref()?;
        let weak: Weak<Inner> = Arc::downgrade(inner);
        let server = server.to_owned();
        Some(move |method: &str| {
            if let Some(inner) = weak.upgrade() {
                let method = bounded_method(method, roster_core::methods::SERVER_NOTIFICATIONS);
                inner
                    .notifications
                    .get_or_create(&Labels([
                        ("server", Value::Server(server.clone())),
                        ("method", Value::Fixed(method)),
                    ]))
                    .inc();
            }
        })
    }
}

impl Inner {
    /// Sets the session gauges the count sources report (stdio guards count themselves).
    fn refresh_sessions(&self) {
        let mut by_era: Vec<(&'static str, i64)> = Vec::new();
        lock(&self.session_counts).retain(|(era, count)| match count() {
            Some(n) => {
                match by_era.iter_mut().find(|(e, _)| e == era) {
                    Some((_, total)) => *total += n as i64,
                    None => by_era.push((era, n as i64)),
                }
                true
            }
            None => false,
        });
        for era in ["initialize", "stateless"] {
            let counted = by_era
                .iter()
                .find(|(e, _)| *e == era)
                .map_or(0, |(_, n)| *n);
            self.sessions
                .get_or_create(&era_labels(era, false))
                .set(counted);
        }
    }
}

/// The session gauge's labels; `own` tells a guard-counted (stdio) series from a counted one,
/// so a scrape never overwrites what guards keep.
fn era_labels(era: &'static str, own: bool) -> Labels<2> {
    let transport = if own { "stdio" } else { "http" };
    Labels([
        ("era", Value::Fixed(era)),
        ("transport", Value::Fixed(transport)),
    ])
}

/// Keeps one session counted as open until dropped.
pub(crate) struct SessionGuard(Option<Gauge>);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if let Some(gauge) = &self.0 {
            gauge.dec();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> Metrics {
        Metrics::new(&MetricsConfig::default())
    }

    #[test]
    fn metrics_listen_must_be_host_and_port() {
        for good in [
            "127.0.0.1:9464",
            "[::1]:9464",
            "metrics.internal:80",
            "0.0.0.0:0",
        ] {
            assert!(
                MetricsConfig::from_keys(None, Some(good.into()), None).is_ok(),
                "{good}"
            );
        }
        for bad in ["9464", "127.0.0.1", "127.0.0.1:http", ":9464", "a b:1"] {
            let err =
                MetricsConfig::from_keys(None, Some(bad.into()), None).expect_err("not host:port");
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn the_gateway_keys_parse_and_a_bad_address_names_its_key() {
        let env = |_: &str| None;
        let path = std::path::Path::new("roster.toml");
        let parse = |text: &str| crate::Config::from_toml(text, path, &env);
        let config = parse("[gateway]\n").expect("defaults");
        assert_eq!(config.gateway.metrics, MetricsConfig::default());
        let config = parse(
            "[gateway]\nmetrics = false\nmetrics_listen = \"127.0.0.1:9464\"\n\
             metrics_tool_labels = true\n",
        )
        .expect("valid keys");
        assert_eq!(
            config.gateway.metrics,
            MetricsConfig {
                enabled: false,
                listen: Some("127.0.0.1:9464".into()),
                tool_labels: true,
            }
        );
        let error = parse("[gateway]\nmetrics_listen = \"9464\"\n")
            .expect_err("a port alone is no address")
            .to_string();
        assert!(
            error.contains("gateway.metrics_listen") && error.contains("host:port"),
            "{error}"
        );
        let error = parse("[gateway]\nmetrics = \"yes\"\n")
            .expect_err("metrics is a boolean")
            .to_string();
        assert!(error.contains("metrics"), "{error}");
    }

    #[test]
    fn off_records_nothing_and_serves_nothing() {
        let off = Metrics::new(&MetricsConfig {
            enabled: false,
            ..MetricsConfig::default()
        });
        off.request("tools/call");
        off.call("s", "s__t", off.started(), CallOutcome::Ok);
        assert!(!off.is_on());
        assert_eq!(off.encode(), None);
    }

    #[test]
    fn a_client_method_outside_the_spec_is_one_series() {
        let metrics = on();
        for n in 0..50 {
            metrics.request(&format!("vendor/thing{n}"));
        }
        metrics.request("tools/list");
        let page = metrics.encode().expect("on");
        assert!(
            page.contains("roster_client_requests_total{method=\"other\"} 50"),
            "{page}"
        );
        assert!(page.contains("roster_client_requests_total{method=\"tools/list\"} 1"));
        assert!(!page.contains("vendor/"), "{page}");
    }

    #[test]
    fn tool_labels_only_when_asked() {
        let plain = on();
        plain.call("s", "s__echo", plain.started(), CallOutcome::Ok);
        let page = plain.encode().expect("on");
        assert!(!page.contains("s__echo"), "{page}");
        assert!(
            page.contains("roster_tool_call_duration_seconds_count{server=\"s\",outcome=\"ok\"} 1")
        );
        let labelled = Metrics::new(&MetricsConfig {
            tool_labels: true,
            ..MetricsConfig::default()
        });
        labelled.call("s", "s__echo", labelled.started(), CallOutcome::ToolError);
        let page = labelled.encode().expect("on");
        assert!(
            page.contains("{server=\"s\",outcome=\"tool_error\",tool=\"s__echo\"} 1"),
            "{page}"
        );
    }

    #[test]
    fn refused_calls_count_by_reason() {
        let metrics = on();
        metrics.call_refused("withheld");
        metrics.route_refused(&roster_core::CallRouteError::Unknown("x__y".into()), false);
        let page = metrics.encode().expect("on");
        for reason in ["withheld", "unknown_tool"] {
            let line = format!("roster_tool_calls_refused_total{{reason=\"{reason}\"}} 1");
            assert!(page.contains(&line), "{line} in\n{page}");
        }
        assert!(!page.contains("x__y"), "a refused name is no label");
    }

    #[test]
    fn a_forgotten_server_leaves_the_page() {
        let metrics = Metrics::new(&MetricsConfig {
            tool_labels: true,
            ..MetricsConfig::default()
        });
        let delta = Delta {
            added: vec!["gone__a".into()],
            ..Delta::default()
        };
        for server in ["gone", "kept"] {
            metrics.call(server, "x__t", metrics.started(), CallOutcome::Ok);
            metrics.listing(server, metrics.started(), true);
            metrics.delta(server, &delta);
        }
        metrics.forget_server("gone");
        let page = metrics.encode().expect("on");
        assert!(!page.contains("\"gone\""), "{page}");
        for series in [
            "roster_tool_call_duration_seconds_count{server=\"kept\"",
            "roster_listings_total{server=\"kept\"",
            "roster_tool_changes_total{server=\"kept\"",
        ] {
            assert!(page.contains(series), "{series} in\n{page}");
        }
    }

    #[test]
    fn stdio_sessions_count_while_open() {
        let metrics = on();
        let guard = metrics.session_open("initialize");
        let line = "roster_client_sessions{era=\"initialize\",transport=\"stdio\"}";
        assert!(metrics.encode().expect("on").contains(&format!("{line} 1")));
        drop(guard);
        assert!(metrics.encode().expect("on").contains(&format!("{line} 0")));
    }
}
