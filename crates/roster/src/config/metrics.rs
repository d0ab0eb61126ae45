//! The `[gateway]` keys of the metrics (`metrics`, `metrics_listen`, `metrics_tool_labels`);
//! [`crate::metrics`] records and serves what they say.

/// The `[gateway]` keys of the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `metrics`: record and serve metrics (default `true`).
    pub enabled: bool,
    /// `metrics_listen`: a second address serving only `GET /metrics`, plain HTTP without
    /// auth (default: none).
    pub listen: Option<String>,
    /// `metrics_tool_labels`: label call metrics with the exposed tool name too (default
    /// `false`).
    pub tool_labels: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: None,
            tool_labels: false,
        }
    }
}

impl MetricsConfig {
    /// The settings the three keys give; `Err` says what `metrics_listen` must hold.
    pub(crate) fn from_keys(
        enabled: Option<bool>,
        listen: Option<String>,
        tool_labels: Option<bool>,
    ) -> Result<Self, String> {
        if let Some(addr) = &listen
            && !is_host_port(addr)
        {
            return Err(format!(
                "an address as host:port (e.g. \"127.0.0.1:9464\"), not {addr:?}"
            ));
        }
        Ok(Self {
            enabled: enabled.unwrap_or(true),
            listen,
            tool_labels: tool_labels.unwrap_or(false),
        })
    }
}

/// `host:port` with a port number (a bracketed IPv6 host is fine).
fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.contains(char::is_whitespace) && port.parse::<u16>().is_ok()
    })
}
