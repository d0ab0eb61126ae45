//! What reading any table of the file needs besides its values: the file (every error names
//! it and the key; relative paths resolve against its folder) and the environment (`${VAR}`),
//! held in [`Ctx`]; and the value shapes several tables share, durations, sizes and allow/deny
//! lists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use super::duration::{parse_duration, seconds};
use super::env::{EnvLookup, ExpandError, expand_vars};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToolFilter {
    #[serde(default)]
    pub(super) allow: Vec<String>,
    #[serde(default)]
    pub(super) deny: Vec<String>,
}

impl RawToolFilter {
    /// The allow and deny patterns.
    pub(super) fn into_parts(self) -> (Vec<String>, Vec<String>) {
        (self.allow, self.deny)
    }
}

/// A size as written: a number of bytes, or `"512KiB"`, `"1MiB"`, `"1MB"`.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
pub(super) enum RawSize {
    Bytes(u64),
    Text(String),
}

/// `raw` in bytes (`KiB` 1,024, `KB` 1,000); `None` when it is not a size.
pub(super) fn parse_size(raw: &RawSize) -> Option<u64> {
    let text = match raw {
        RawSize::Bytes(n) => return Some(*n),
        RawSize::Text(text) => text.trim(),
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// A duration as written: text [`parse_duration`] reads (`"500ms"`, `"30s"`, `"2m"`, `"1h"`),
/// or a number of seconds.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
pub(super) enum RawDuration {
    Text(String),
    Seconds(f64),
}

/// What building from `Raw*` needs besides the values: the file (for errors and relative
/// paths) and the environment (for `${VAR}`).
pub(super) struct Ctx<'a> {
    path: PathBuf,
    pub(super) base: PathBuf,
    pub(super) env: EnvLookup<'a>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(path: &Path, env: EnvLookup<'a>) -> Self {
        Ctx {
            path: path.to_owned(),
            base: path.parent().map(Path::to_owned).unwrap_or_default(),
            env,
        }
    }

    pub(super) fn invalid(
        &self,
        key: impl Into<String>,
        expected: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.clone(),
            key: key.into(),
            expected: expected.into(),
        }
    }

    pub(super) fn resolve(&self, p: &str) -> PathBuf {
        let p = PathBuf::from(p);
        if p.is_absolute() {
            p
        } else {
            self.base.join(p)
        }
    }

    pub(super) fn duration(&self, key: &str, raw: &RawDuration) -> Result<Duration, ConfigError> {
        let parsed = match raw {
            RawDuration::Text(text) => parse_duration(text),
            RawDuration::Seconds(secs) => seconds(*secs),
        };
        parsed.map_err(|why| {
            self.invalid(
                key,
                format!("a non-negative duration such as \"500ms\", \"30s\", \"1h\" ({why})"),
            )
        })
    }

    pub(super) fn expand_map(
        &self,
        key: &str,
        map: BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        map.into_iter()
            .map(|(k, v)| {
                let full = format!("{key}.{k}");
                self.expand(&full, &v).map(|v| (k, v))
            })
            .collect()
    }

    /// `${VAR}` in the value of `key` replaced from the environment.
    pub(super) fn expand(&self, key: &str, value: &str) -> Result<String, ConfigError> {
        expand_vars(value, self.env).map_err(|e| match e {
            ExpandError::Missing(var) => ConfigError::MissingVariable {
                path: self.path.clone(),
                key: key.to_owned(),
                var,
            },
            ExpandError::Unclosed => self.invalid(key, "a value whose `${` is closed by `}`"),
        })
    }

    /// The URL with `${VAR}` expanded first, so an unset variable is named rather than
    /// reported as a malformed URL.
    pub(super) fn url(&self, key: &str, url: &str) -> Result<String, ConfigError> {
        let url = &self.expand(key, url)?;
        match reqwest::Url::parse(url) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(url.to_owned()),
            Ok(parsed) => Err(self.invalid(
                key,
                format!("an http:// or https:// URL, not a {}: URL", parsed.scheme()),
            )),
            Err(e) => Err(self.invalid(key, format!("an http:// or https:// URL ({e})"))),
        }
    }
}
