//! How the clients reach a server that wants TLS, mutual TLS or a bearer token.
//!
//! ```ignore
//! let options = ConnectOptions::new()
//!     .ca_certificate_pem(std::fs::read("ca.pem")?)          // TLS, trusting this CA
//!     .client_identity_pem(client_cert_pem, client_key_pem)   // mutual TLS
//!     .bearer_token(api_key_or_jwt);                          // --auth required
//! let sessions = RemoteSessionService::connect_with("https://sessions.internal:50051", &options).await?;
//! ```

use adk_grpc_core::{AdkError, Result};
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// The channel the clients use: every call carries the bearer token, if any.
pub(crate) type AuthChannel = InterceptedService<Channel, BearerToken>;

/// Builder of the connection settings of [`crate::RemoteSessionService::connect_with`] and
/// [`crate::RemoteArtifactService::connect_with`]. Without any setting it connects like `connect`.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    tls: Option<ClientTlsConfig>,
    token: Option<String>,
}

impl ConnectOptions {
    pub fn new() -> Self {
        ConnectOptions::default()
    }

    fn tls(self) -> ClientTlsConfig {
        self.tls.unwrap_or_default()
    }

    /// Speak TLS and trust servers whose certificate this CA (PEM) signed. Use an
    /// `https://` endpoint. Call it again to trust several CAs.
    pub fn ca_certificate_pem(self, pem: impl AsRef<[u8]>) -> Self {
        let certificate = Certificate::from_pem(pem);
        ConnectOptions {
            tls: Some(self.clone().tls().ca_certificate(certificate)),
            ..self
        }
    }

    /// Present this certificate chain and key (PEM) to a server that requires mutual
    /// TLS (`--tls-client-ca`).
    pub fn client_identity_pem(self, cert_pem: impl AsRef<[u8]>, key_pem: impl AsRef<[u8]>) -> Self {
        let identity = Identity::from_pem(cert_pem, key_pem);
        ConnectOptions {
            tls: Some(self.clone().tls().identity(identity)),
            ..self
        }
    }

    /// The name the server's certificate must carry, when it differs from the endpoint's host.
    pub fn domain_name(self, domain_name: impl Into<String>) -> Self {
        ConnectOptions {
            tls: Some(self.clone().tls().domain_name(domain_name)),
            ..self
        }
    }

    /// Send `authorization: Bearer <token>` (an API key or a JWT) with every call.
    pub fn bearer_token(self, token: impl Into<String>) -> Self {
        ConnectOptions {
            token: Some(token.into()),
            ..self
        }
    }

    /// A channel to `endpoint` with these settings, and the token interceptor.
    pub(crate) async fn connect(&self, endpoint: String) -> Result<AuthChannel> {
        let interceptor = BearerToken::new(self.token.as_deref())?;
        let mut builder = Endpoint::from_shared(endpoint.clone())
            .map_err(|err| AdkError::invalid("endpoint", format!("{endpoint:?} is not a valid URI: {err}")))?;
        if let Some(tls) = &self.tls {
            if builder.uri().scheme_str() != Some("https") {
                return Err(AdkError::invalid(
                    "endpoint",
                    format!("{endpoint:?}: TLS settings need an https:// endpoint"),
                ));
            }
            builder = builder
                .tls_config(tls.clone())
                .map_err(|err| AdkError::invalid_with("tls", format!("the TLS settings are not valid: {err}")))?;
        }
        let channel = builder
            .connect()
            .await
            .map_err(|err| AdkError::Unavailable(format!("cannot connect to {endpoint}: {}", error_chain(&err))))?;
        Ok(InterceptedService::new(channel, interceptor))
    }
}

/// `err` and its causes, so a TLS failure says why (unknown CA, bad certificate…).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Adds the bearer token, if any, to each call's metadata.
#[derive(Clone, Default)]
pub(crate) struct BearerToken {
    value: Option<AsciiMetadataValue>,
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself.
        f.debug_struct("BearerToken")
            .field("set", &self.value.is_some())
            .finish()
    }
}

impl BearerToken {
    pub(crate) fn new(token: Option<&str>) -> Result<BearerToken> {
        let value = match token {
            Some(token) => {
                let mut value: AsciiMetadataValue = MetadataValue::try_from(format!("Bearer {}", token.trim()))
                    .map_err(|_| {
                        AdkError::invalid_with("token", "the bearer token holds characters metadata cannot carry")
                    })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(BearerToken { value })
    }
}

impl Interceptor for BearerToken {
    fn call(&mut self, mut request: tonic::Request<()>) -> std::result::Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.value {
            request.metadata_mut().insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// The constructors every remote service has alike, over its own `from_auth_channel`
/// (which makes its stubs from the channel).
macro_rules! remote_constructors {
    () => {
        /// Connects to `endpoint` (`http://host:port`). UNAVAILABLE when nothing answers there;
        /// INVALID_ARGUMENT when the endpoint is not a URI.
        pub async fn connect(endpoint: impl Into<String>) -> ::adk_grpc_core::Result<Self> {
            Self::connect_with(endpoint, &$crate::ConnectOptions::new()).await
        }

        /// Connects to `endpoint` (`https://host:port` with TLS) with TLS and bearer-token
        /// settings. UNAVAILABLE when nothing answers or the TLS handshake fails.
        pub async fn connect_with(
            endpoint: impl Into<String>,
            options: &$crate::ConnectOptions,
        ) -> ::adk_grpc_core::Result<Self> {
            Ok(Self::from_auth_channel(options.connect(endpoint.into()).await?))
        }

        /// Uses an existing channel (TLS, timeouts, load balancing configured by the caller).
        pub fn from_channel(channel: ::tonic::transport::Channel) -> Self {
            Self::from_auth_channel(::tonic::service::interceptor::InterceptedService::new(
                channel,
                $crate::connect::BearerToken::default(),
            ))
        }
    };
}
pub(crate) use remote_constructors;
