//! What `[store] url` asks of TLS to the shared store's PostgreSQL, read as libpq reads it, from the `[store] url`'s
//! `sslmode` and `sslrootcert`:
//!
//! | `sslmode` | TLS | the server's certificate |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers it (a failed handshake is followed by a connection without TLS) | not checked, unless `sslrootcert` names a file: then its chain, as `verify-ca` |
//! | `require` | always | as `prefer` |
//! | `verify-ca` | always | its chain, to `sslrootcert` (or the system's roots) |
//! | `verify-full` | always | its chain and its name (the URL's host) |
//!
//! `sslrootcert` is a PEM file of the certificates to trust, or `system` for the system's roots
//! (then `verify-full` is the default, as in libpq). `sslcert` and `sslkey` (PEM files, both or
//! neither) are roster's client certificate, for a server that asks for one. Relative paths are
//! taken from the config file's directory. The driver (`postgres`) knows only `disable`,
//! `prefer` and `require`: [`TlsSettings::from_url`] takes these parameters out of the URL it is
//! given.

use std::path::{Path, PathBuf};

/// How much of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Nothing: the connection is encrypted against a listener, not an impostor.
    Nothing,
    /// Its chain to a trusted root, not its name (`verify-ca`).
    Chain,
    /// Its chain and that it names the host (`verify-full`).
    Full,
}

/// Where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// The system's (`sslrootcert=system`, or `verify-*` without `sslrootcert`).
    System,
    /// A PEM file.
    File(PathBuf),
}

/// What the URL asks of TLS, and the URL the driver is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The URL without `sslrootcert`, its `sslmode` one the driver knows.
    pub driver_url: String,
    /// Whether the server's certificate is checked, and how far.
    pub verify: Verify,
    /// The roots it is checked against.
    pub roots: Roots,
    /// roster's client certificate and its key (`sslcert`, `sslkey`).
    pub client: Option<(PathBuf, PathBuf)>,
}

/// The URL parameters that name files (relative ones are taken from the config file's
/// directory).
const FILE_PARAMETERS: [&str; 3] = ["sslrootcert", "sslcert", "sslkey"];

impl TlsSettings {
    /// Reads `sslmode`, `sslrootcert`, `sslcert` and `sslkey` from a `postgres://` URL's query.
    /// An error names the parameter and what it takes.
    pub fn from_url(url: &str) -> Result<TlsSettings, String> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let (mut mode, mut root, mut cert, mut key) = (None, None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("sslmode", value)) => mode = Some(value.to_owned()),
                Some(("sslrootcert", value)) => root = Some(value.to_owned()),
                Some(("sslcert", value)) => cert = Some(PathBuf::from(value)),
                Some(("sslkey", value)) => key = Some(PathBuf::from(value)),
                _ => kept.push(pair.to_owned()),
            }
        }
        let client = match (cert, key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => return Err("sslcert needs sslkey: the certificate's key".to_owned()),
            (None, Some(_)) => return Err("sslkey needs sslcert: the key's certificate".to_owned()),
        };
        let roots = match root.as_deref() {
            None | Some("system") => Roots::System,
            Some("") => return Err("sslrootcert: a PEM file, or `system`".to_owned()),
            Some(path) => Roots::File(PathBuf::from(path)),
        };
        let system = root.as_deref() == Some("system");
        let (driver_mode, verify) = match mode.as_deref() {
            None if system => ("require", Verify::Full),
            None | Some("prefer") => ("prefer", file_checks(&roots)),
            Some("disable") => ("disable", Verify::Nothing),
            Some("require") => ("require", file_checks(&roots)),
            Some("verify-ca") => ("require", Verify::Chain),
            Some("verify-full") => ("require", Verify::Full),
            Some(other) => {
                return Err(format!(
                    "sslmode `{other}`: one of disable, prefer, require, verify-ca, verify-full"
                ));
            }
        };
        if system && verify == Verify::Nothing && driver_mode != "disable" {
            return Err(
                "sslrootcert=system checks the server's certificate: use sslmode verify-ca or \
                 verify-full (or leave sslmode out)"
                    .to_owned(),
            );
        }
        kept.push(format!("sslmode={driver_mode}"));
        Ok(TlsSettings {
            driver_url: format!("{base}?{}", kept.join("&")),
            verify,
            roots,
            client,
        })
    }

    /// `url` with a relative `sslrootcert`, `sslcert` or `sslkey` taken from `base` (the config
    /// file's directory).
    pub fn resolve_paths(url: &str, base: &Path) -> String {
        let Some((head, query)) = url.split_once('?') else {
            return url.to_owned();
        };
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, value))
                    if FILE_PARAMETERS.contains(&name)
                        && !value.is_empty()
                        && value != "system"
                        && Path::new(value).is_relative() =>
                {
                    format!("{name}={}", base.join(value).display())
                }
                _ => pair.to_owned(),
            })
            .collect();
        format!("{head}?{}", pairs.join("&"))
    }
}

/// `prefer` and `require` check the chain when `sslrootcert` names a file (libpq's rule).
fn file_checks(roots: &Roots) -> Verify {
    match roots {
        Roots::File(_) => Verify::Chain,
        Roots::System => Verify::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> TlsSettings {
        TlsSettings::from_url(url).expect("settings")
    }

    #[test]
    fn sslmode_and_sslrootcert_read_as_libpq_reads_them() {
        let plain = settings("postgres://u@h:5432/d");
        assert_eq!(plain.driver_url, "postgres://u@h:5432/d?sslmode=prefer");
        assert_eq!(plain.verify, Verify::Nothing);
        let full = settings("postgres://u@h/d?application_name=x&sslmode=verify-full");
        assert_eq!(
            full.driver_url,
            "postgres://u@h/d?application_name=x&sslmode=require"
        );
        assert_eq!((full.verify, full.roots), (Verify::Full, Roots::System));
        let ca = settings("postgres://u@h/d?sslrootcert=/etc/ca.pem&sslmode=require");
        assert_eq!(ca.driver_url, "postgres://u@h/d?sslmode=require");
        assert_eq!(
            (ca.verify, ca.roots),
            (Verify::Chain, Roots::File("/etc/ca.pem".into()))
        );
        assert_eq!(
            settings("postgres://u@h/d?sslrootcert=system").verify,
            Verify::Full
        );
        assert_eq!(
            settings("postgres://u@h/d?sslmode=disable").driver_url,
            "postgres://u@h/d?sslmode=disable"
        );
        let wrong =
            TlsSettings::from_url("postgres://u@h/d?sslmode=allow").expect_err("no such mode");
        assert!(wrong.contains("sslmode `allow`"), "{wrong}");
        let client = settings("postgres://u@h/d?sslcert=/c.pem&sslkey=/c.key");
        assert_eq!(client.driver_url, "postgres://u@h/d?sslmode=prefer");
        assert_eq!(client.client, Some(("/c.pem".into(), "/c.key".into())));
        let half = TlsSettings::from_url("postgres://u@h/d?sslcert=/c.pem").expect_err("no key");
        assert!(half.contains("sslkey"), "{half}");
        let system = TlsSettings::from_url("postgres://u@h/d?sslrootcert=system&sslmode=require")
            .expect_err("system roots are checked");
        assert!(system.contains("verify-full"), "{system}");
    }

    #[test]
    fn a_relative_root_file_is_taken_from_the_config_files_directory() {
        let base = Path::new("/etc/roster");
        assert_eq!(
            TlsSettings::resolve_paths(
                "postgres://u@h/d?sslrootcert=ca.pem&sslmode=verify-ca&sslcert=c.pem&sslkey=k/c.key",
                base
            ),
            "postgres://u@h/d?sslrootcert=/etc/roster/ca.pem&sslmode=verify-ca\
             &sslcert=/etc/roster/c.pem&sslkey=/etc/roster/k/c.key"
        );
        for kept in [
            "postgres://u@h/d?sslrootcert=/abs/ca.pem",
            "postgres://u@h/d?sslrootcert=system",
            "postgres://u@h/d",
        ] {
            assert_eq!(TlsSettings::resolve_paths(kept, base), kept);
        }
    }
}
