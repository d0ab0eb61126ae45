//! Gauges read from the live state at each scrape: the servers' state, tools, restarts and
//! debounce savings ([`crate::Roster::status`] and the refresh hooks), pins, and on a gateway
//! its inbox, skills and stateless sessions (read through [`GatewaySource`], which the gateway
//! implements). Nothing is kept in step by hooks; a collector holds its source weakly and
//! reports nothing once the source is gone.

use std::sync::{Arc, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::Metrics;
use super::labels::{Labels, Value};
use crate::inbox::Inbox;
use crate::servers::ServerState;
use crate::servers::runtime::Runtime;

/// Every connection state a server can be in, so each server has one series per state (1 for
/// its state, 0 for the others) and a dashboard sees a state end.
const SERVER_STATES: [ServerState; 6] = [
    ServerState::Disabled,
    ServerState::Connecting,
    ServerState::Connected,
    ServerState::Disconnected,
    ServerState::CrashLoop,
    ServerState::NeedsLogin,
];

/// Registers the runtime's gauges with its own metrics.
pub(crate) fn watch_runtime(rt: &Arc<Runtime>) {
    rt.metrics.add_collector(RuntimeGauges(Arc::downgrade(rt)));
}

/// What a gateway's gauges read at each scrape. The gateway implements it: metrics sit below
/// the gateway and know it only through this.
pub(crate) trait GatewaySource: Send + Sync {
    /// The inbox, if this gateway owns one.
    fn inbox(&self) -> Option<&Inbox>;
    /// The skills in the catalog: how many are available, and how many are not.
    fn skills_by_availability(&self) -> (u64, u64);
    /// How many client identities hold a stateless-era session.
    fn stateless_sessions(&self) -> usize;
}

/// Registers a gateway's gauges (inbox, skills, stateless sessions) with its roster's
/// `metrics`.
pub(crate) fn watch_gateway<G: GatewaySource + 'static>(metrics: &Metrics, gateway: &Arc<G>) {
    let weak: Weak<G> = Arc::downgrade(gateway);
    metrics.add_collector(GatewayGauges(weak.clone()));
    metrics.count_sessions("stateless", move || {
        weak.upgrade().map(|g| g.stateless_sessions())
    });
}

struct RuntimeGauges(Weak<Runtime>);

impl std::fmt::Debug for RuntimeGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RuntimeGauges")
    }
}

fn server(name: &str) -> (&'static str, Value) {
    ("server", Value::Server(name.to_owned()))
}

/// One metric of `kind` with a sample per `(labels, value)`.
fn family<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: impl IntoIterator<Item = (L, u64)>,
) -> std::fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in samples {
        let sample = metric.encode_family(&labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(value).encode(sample)?,
            _ => ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX)).encode(sample)?,
        }
    }
    Ok(())
}

impl Collector for RuntimeGauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let Some(rt) = self.0.upgrade() else {
            return Ok(());
        };
        let status = rt.status();
        family(
            &mut encoder,
            "roster_server_state",
            "a server's connection state: 1 for the state it is in, 0 for the others",
            MetricType::Gauge,
            status.iter().flat_map(|s| {
                SERVER_STATES.iter().map(move |state| {
                    let labels = Labels([server(&s.name), ("state", Value::Fixed(state.as_str()))]);
                    (labels, u64::from(s.state == *state))
                })
            }),
        )?;
        family(
            &mut encoder,
            "roster_server_restarts",
            "how often a server was restarted or reconnected after a drop",
            MetricType::Counter,
            status
                .iter()
                .map(|s| (Labels([server(&s.name)]), s.restarts)),
        )?;
        family(
            &mut encoder,
            "roster_tools_exposed",
            "a server's tools clients are served now",
            MetricType::Gauge,
            status
                .iter()
                .map(|s| (Labels([server(&s.name)]), s.tools as u64)),
        )?;
        let slots = rt.slots();
        family(
            &mut encoder,
            "roster_relists_saved_by_debounce",
            "list_changed notifications that caused no background re-list of their own (the \
             debounce folded them into another's)",
            MetricType::Counter,
            slots.iter().filter_map(|slot| {
                let hook = slot.refresh_hook()?;
                Some((Labels([server(&slot.name)]), hook.coalesced_count()))
            }),
        )?;
        let (withheld, waiting) = rt.pinning.counts();
        family(
            &mut encoder,
            "roster_pins_withheld_tools",
            "a server's tools withheld until a person approves their definition",
            MetricType::Gauge,
            withheld
                .iter()
                // Only configured servers become labels, whatever the store holds.
                .filter(|(name, _)| slots.iter().any(|slot| slot.name == **name))
                .map(|(name, count)| (Labels([server(name)]), *count as u64)),
        )?;
        family(
            &mut encoder,
            "roster_pins_waiting_for_person",
            "listed tool definitions that differ from their pin and wait for a person",
            MetricType::Gauge,
            [(Labels::<0>([]), waiting as u64)],
        )
    }
}

struct GatewayGauges(Weak<dyn GatewaySource>);

impl std::fmt::Debug for GatewayGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GatewayGauges")
    }
}

impl Collector for GatewayGauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let Some(gateway) = self.0.upgrade() else {
            return Ok(());
        };
        if let Some(inbox) = gateway.inbox() {
            let counts = [
                (
                    "roster_inbox_entries",
                    "notifications the inbox ring holds now",
                    inbox.entry_count(),
                ),
                (
                    "roster_inbox_unread",
                    "inbox entries the local default identity has not acknowledged",
                    inbox.unread_count(),
                ),
                (
                    "roster_inbox_pending_confirmations",
                    "server requests waiting for a person's yes or no (roster inbox confirm)",
                    inbox.pending_confirms().len(),
                ),
            ];
            for (name, help, count) in counts {
                family(
                    &mut encoder,
                    name,
                    help,
                    MetricType::Gauge,
                    [(Labels::<0>([]), count as u64)],
                )?;
            }
        }
        let (available, unavailable) = gateway.skills_by_availability();
        family(
            &mut encoder,
            "roster_skills",
            "skills in the catalog, by availability (unavailable: a tool they need is missing \
             or withheld)",
            MetricType::Gauge,
            [
                (
                    Labels([("availability", Value::Fixed("available"))]),
                    available,
                ),
                (
                    Labels([("availability", Value::Fixed("unavailable"))]),
                    unavailable,
                ),
            ],
        )
    }
}
