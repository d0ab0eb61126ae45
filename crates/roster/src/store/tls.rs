//! TLS to the shared store's PostgreSQL: the driver's connector for what `[store] url` asks
//! ([`crate::config::store_tls`] reads it, as libpq does).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::store_tls::{Roots, TlsSettings, Verify};

/// The driver's TLS connector for these settings. Fails naming the root file when it
/// cannot be read or holds no certificate.
pub fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    match &settings.roots {
        Roots::File(path) => {
            let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<_, _>>())
                .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            if certificates.is_empty() {
                return Err(format!(
                    "sslrootcert {}: no PEM certificate in it",
                    path.display()
                ));
            }
            for certificate in certificates {
                roots
                    .add(certificate)
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            }
        }
        Roots::System if settings.verify != Verify::Nothing => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err("no system root certificates found for sslrootcert=system \
                                (or sslmode verify-ca / verify-full without sslrootcert)"
                    .to_owned());
            }
        }
        Roots::System => {}
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = match settings.verify {
        Verify::Full => builder.with_root_certificates(roots),
        Verify::Chain | Verify::Nothing => {
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            );
            let chain = match settings.verify {
                Verify::Chain => Some(webpki.build().map_err(|e| e.to_string())?),
                _ => None,
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Lenient { chain, provider }))
        }
    };
    let config = match &settings.client {
        None => config.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("sslcert {}: {e}", cert.display()))?;
            if chain.is_empty() {
                return Err(format!(
                    "sslcert {}: no PEM certificate in it",
                    cert.display()
                ));
            }
            let key_der = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("sslkey {}: {e}", key.display()))?;
            config.with_client_auth_cert(chain, key_der).map_err(|e| {
                format!(
                    "sslcert {} with sslkey {}: {e}",
                    cert.display(),
                    key.display()
                )
            })?
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The verifier of `verify-ca` (`chain`: the chain checked, the name not) and of `prefer` /
/// `require` without roots (`chain` `None`: the certificate taken as it is). Either way the
/// handshake's signatures are checked with the certificate's key.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> TlsSettings {
        TlsSettings::from_url(url).expect("settings")
    }

    #[test]
    fn a_root_file_that_holds_no_certificate_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("ca.pem");
        std::fs::write(&file, "not a certificate\n").expect("write");
        let url = format!(
            "postgres://u@h/d?sslmode=verify-ca&sslrootcert={}",
            file.display()
        );
        let error = connector(&settings(&url)).err().expect("an error");
        assert!(
            error.contains("ca.pem") && error.contains("no PEM certificate"),
            "{error}"
        );
        let missing = format!(
            "postgres://u@h/d?sslmode=verify-ca&sslrootcert={}/none.pem",
            dir.path().display()
        );
        let error = connector(&settings(&missing)).err().expect("an error");
        assert!(error.contains("none.pem"), "{error}");
    }
}
