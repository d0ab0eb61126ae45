//! Gauges read from the live state at each scrape: the servers' state, tools, restarts and
//! debounce savings, pins (the runtime's [`Gauges`], which `servers/gauges.rs` encodes), and
//! on a gateway its inbox, skills and stateless sessions (read through [`GatewaySource`], which
//! the gateway implements). Nothing is kept in step by hooks; a collector holds its source
//! weakly and reports nothing once the source is gone.

use std::sync::{Arc, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::Metrics;
use super::labels::{Labels, Value};
use crate::inbox::Inbox;

/// A source of gauges read at each scrape (the runtime: its servers and pins), registered with
/// its own metrics by [`watch_runtime`].
pub(crate) trait Gauges: Send + Sync + 'static {
    /// The metrics its gauges go to.
    fn metrics(&self) -> &Metrics;

    /// Encodes its gauges as they are now.
    fn encode_gauges(&self, encoder: &mut DescriptorEncoder<'_>) -> std::fmt::Result;
}

/// Registers the runtime's gauges with its own metrics.
pub(crate) fn watch_runtime<G: Gauges>(rt: &Arc<G>) {
    rt.metrics()
        .add_collector(RuntimeGauges(Arc::downgrade(rt)));
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

struct RuntimeGauges<G>(Weak<G>);

impl<G> std::fmt::Debug for RuntimeGauges<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RuntimeGauges")
    }
}

impl<G: Gauges> Collector for RuntimeGauges<G> {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let Some(rt) = self.0.upgrade() else {
            return Ok(());
        };
        rt.encode_gauges(&mut encoder)
    }
}

/// One metric of `kind` with a sample per `(labels, value)`.
pub(crate) fn family<L: EncodeLabelSet>(
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
