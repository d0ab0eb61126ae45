//! Durations as written in roster's settings, one parser for all of them: `roster.toml`'s
//! duration keys and the inbox's `interval:<duration>` fsync policy.

use std::time::Duration;

/// A duration as text: what `humantime` reads (`"500ms"`, `"30s"`, `"5m"`, `"1h"`,
/// `"1h 30m"`), or a bare number of seconds (`"30"`, `"1.5"`). The error says why in a few
/// words, for a message that also names the key.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return seconds(secs);
    }
    // humantime only says "expected number" here, which hides the actual mistake.
    if text.starts_with('-') {
        return Err("it is negative".to_owned());
    }
    humantime::parse_duration(text).map_err(|e| match e {
        humantime::DurationError::NumberOverflow => "it is too large".to_owned(),
        humantime::DurationError::UnknownUnit { unit, .. } if !unit.is_empty() => {
            format!("unknown unit `{unit}`")
        }
        other => other.to_string(),
    })
}

/// A number of seconds (a TOML number, or a bare number as text) as a duration.
pub(super) fn seconds(secs: f64) -> Result<Duration, String> {
    if !secs.is_finite() {
        return Err("it is not a finite number".to_owned());
    }
    if secs < 0.0 {
        return Err("it is negative".to_owned());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| "it is too large".to_owned())
}
