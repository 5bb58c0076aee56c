//! TLS for the gRPC port (rustls with the ring provider, through tonic's `tls-ring`),
//! optionally mutual: with `--tls-client-ca` a client must present a certificate
//! signed by that CA or its handshake fails.

use std::path::{Path, PathBuf};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

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
}

impl TlsArgs {
    /// Whether the port speaks TLS.
    pub fn enabled(&self) -> bool {
        self.tls_cert.is_some()
    }

    /// The server's TLS settings, None for plaintext. The files are read here, so a
    /// missing one is a startup error; a PEM that does not parse fails when the
    /// server is built (tonic checks it then), also before anything is served.
    pub fn server_config(&self) -> Result<Option<ServerTlsConfig>, TlsError> {
        let (cert, key) = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => (cert, key),
            (None, None) if self.tls_client_ca.is_some() => return Err(TlsError::ClientCaWithoutCert),
            (None, None) => return Ok(None),
            _ => return Err(TlsError::Incomplete),
        };
        let identity = Identity::from_pem(read(cert, "the TLS certificate")?, read(key, "the TLS key")?);
        let mut config = ServerTlsConfig::new().identity(identity);
        if let Some(ca) = &self.tls_client_ca {
            config = config
                .client_ca_root(Certificate::from_pem(read(ca, "the TLS client CA")?))
                .client_auth_optional(false);
        }
        Ok(Some(config))
    }
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}
