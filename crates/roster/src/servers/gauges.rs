//! The runtime's gauges, read from the live state at each scrape: the servers' state, tools,
//! restarts and debounce savings (their status and refresh hooks), and pins. The metrics hold
//! the runtime weakly ([`crate::metrics::watch_runtime`]) and report nothing once it is gone.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use super::runtime::Runtime;
use super::status::ServerState;
use crate::metrics::labels::{Labels, Value};
use crate::metrics::{Gauges, Metrics, family};

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

fn server(name: &str) -> (&'static str, Value) {
    ("server", Value::Server(name.to_owned()))
}

impl Gauges for Runtime {
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn encode_gauges(&self, encoder: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
        let status = self.status();
        family(
            encoder,
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
            encoder,
            "roster_server_restarts",
            "how often a server was restarted or reconnected after a drop",
            MetricType::Counter,
            status
                .iter()
                .map(|s| (Labels([server(&s.name)]), s.restarts)),
        )?;
        family(
            encoder,
            "roster_tools_exposed",
            "a server's tools clients are served now",
            MetricType::Gauge,
            status
                .iter()
                .map(|s| (Labels([server(&s.name)]), s.tools as u64)),
        )?;
        let slots = self.slots();
        family(
            encoder,
            "roster_relists_saved_by_debounce",
            "list_changed notifications that caused no background re-list of their own (the \
             debounce folded them into another's)",
            MetricType::Counter,
            slots.iter().filter_map(|slot| {
                let hook = slot.refresh_hook()?;
                Some((Labels([server(&slot.name)]), hook.coalesced_count()))
            }),
        )?;
        let (withheld, waiting) = self.pinning.counts();
        family(
            encoder,
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
            encoder,
            "roster_pins_waiting_for_person",
            "listed tool definitions that differ from their pin and wait for a person",
            MetricType::Gauge,
            [(Labels::<0>([]), waiting as u64)],
        )
    }
}
