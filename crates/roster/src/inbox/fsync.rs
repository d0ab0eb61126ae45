//! When the audit trail's appends reach the disk: the [`FsyncPolicy`] and its words.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::DEFAULT_FSYNC_INTERVAL;

/// When appends to the audit trail are fsynced. See the module docs for what each one keeps
/// through a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// After every append, before `record` returns.
    Always,
    /// When the last sync is older than the interval (checked on append and by a background
    /// thread).
    Interval(Duration),
    /// Never; the OS writes back when it likes.
    Never,
}

impl Default for FsyncPolicy {
    fn default() -> Self {
        FsyncPolicy::Interval(DEFAULT_FSYNC_INTERVAL)
    }
}

impl fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsyncPolicy::Always => f.write_str("always"),
            FsyncPolicy::Never => f.write_str("never"),
            FsyncPolicy::Interval(every) => {
                write!(f, "interval:{}", humantime::format_duration(*every))
            }
        }
    }
}

impl Serialize for FsyncPolicy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FsyncPolicy {
    /// The words of [`FsyncPolicy::from_str`], so a config file says `fsync = "interval:500ms"`.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The words [`FsyncPolicy::from_str`] did not understand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "fsync policy {0:?} is not one of: always, never, interval, interval:<duration> (e.g. interval:500ms)"
)]
pub struct ParseFsyncPolicyError(String);

impl FromStr for FsyncPolicy {
    type Err = ParseFsyncPolicyError;

    /// `always`, `never`, `interval` (1 s) or `interval:<duration>` (`interval:250ms`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "always" => Ok(FsyncPolicy::Always),
            "never" => Ok(FsyncPolicy::Never),
            "interval" => Ok(FsyncPolicy::default()),
            other => other
                .strip_prefix("interval:")
                .and_then(|d| crate::config::parse_duration(d).ok())
                .filter(|d| !d.is_zero())
                .map(FsyncPolicy::Interval)
                .ok_or_else(|| ParseFsyncPolicyError(s.to_owned())),
        }
    }
}
