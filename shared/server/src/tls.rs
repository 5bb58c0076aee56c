//! TLS for the gRPC port (rustls with the ring provider, the tree's one TLS stack),
//! optionally mutual: with `--tls-client-ca` a client must present a certificate
//! signed by that CA or its handshake fails.

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// TLS on the gRPC port. Both `--tls-cert` and `--tls-key`, or neither (plaintext).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// Serve gRPC over TLS with this certificate chain (PEM); needs --tls-key
    #[arg(long, env = "ADK_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert
    #[arg(long, env = "ADK_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Mutual TLS: refuse clients without a certificate signed by this CA (PEM); needs --tls-cert
    #[arg(long, env = "ADK_TLS_CLIENT_CA", value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
}

/// A TLS file that cannot be read or used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)")]
    ClientCaWithoutCert,
    #[error("--tls-cert and --tls-key go together: give both or neither")]
    Incomplete,
    #[error("{what} {path} cannot be used (PEM files for --tls-cert, --tls-key, --tls-client-ca): {reason}")]
    Unusable {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
}

impl TlsArgs {
    /// Whether the port speaks TLS.
    pub fn enabled(&self) -> bool {
        self.tls_cert.is_some()
    }

    /// The TLS acceptor of the gRPC port, None for plaintext. The files are read and
    /// checked here, so a missing or unusable one is a startup error. The server does the
    /// handshakes itself (server.rs) so that one deadline covers the TLS handshake and
    /// the HTTP/2 preface after it (handshake.rs).
    pub(crate) fn acceptor(&self) -> Result<Option<TlsAcceptor>, TlsError> {
        let (cert, key) = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => (cert, key),
            (None, None) if self.tls_client_ca.is_some() => return Err(TlsError::ClientCaWithoutCert),
            (None, None) => return Ok(None),
            _ => return Err(TlsError::Incomplete),
        };
        let chain = CertificateDer::pem_slice_iter(&read(cert, "the TLS certificate")?)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| unusable("the TLS certificate", cert, e))?;
        let private_key =
            PrivateKeyDer::from_pem_slice(&read(key, "the TLS key")?).map_err(|e| unusable("the TLS key", key, e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| unusable("the TLS certificate", cert, e))?;
        let builder = match &self.tls_client_ca {
            Some(ca) => {
                let bad_ca = |e: &dyn std::fmt::Display| unusable("the TLS client CA", ca, e);
                let mut roots = RootCertStore::empty();
                for certificate in CertificateDer::pem_slice_iter(&read(ca, "the TLS client CA")?) {
                    let certificate = certificate.map_err(|e| bad_ca(&e))?;
                    roots.add(certificate).map_err(|e| bad_ca(&e))?;
                }
                // Mutual TLS: a client without a certificate from this CA fails its handshake.
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| bad_ca(&e))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, private_key)
            .map_err(|e| unusable("the TLS certificate or key", cert, e))?;
        // gRPC is HTTP/2 only.
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Some(TlsAcceptor::from(Arc::new(config))))
    }
}

fn unusable(what: &'static str, path: &Path, reason: impl std::fmt::Display) -> TlsError {
    TlsError::Unusable {
        what,
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}
