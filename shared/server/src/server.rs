//! The serve loop every binary runs: bind, health, reflection, one span and one
//! set of metrics per RPC (see rpc.rs), the Prometheus endpoint, graceful
//! shutdown with a hard deadline.

use crate::args::{GrpcArgs, MetricsArgs};
use crate::auth::layer::AuthLayer;
use crate::auth::{AuthError, AuthMode, Authenticator};
use crate::cancel::CancelledRequestsFail;
use crate::handshake::HandshakeDeadline;
use crate::health::{HealthMonitor, NamedProbe, StoreProbe};
use crate::metrics::MetricsEndpoint;
use crate::rpc::{Methods, RpcLayer};
use crate::shutdown::Shutdown;
use crate::tls::TlsError;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::server::NamedService;
use tonic::service::RoutesBuilder;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_reflection::server::v1::ServerReflectionServer;
use tonic_reflection::server::v1alpha::ServerReflectionServer as ServerReflectionServerV1Alpha;

/// Why a server could not start or stopped serving. The cause is the error's
/// `source()`, so `{:#}` (anyhow) prints e.g. "cannot listen on 0.0.0.0:50051:
/// Address already in use (os error 98)".
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}")]
    Bind { addr: String, source: std::io::Error },
    #[error("cannot serve metrics on {addr} (--metrics-listen / ADK_METRICS_LISTEN; `off` turns the endpoint off)")]
    MetricsBind { addr: String, source: std::io::Error },
    #[error("cannot build the reflection service")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("the gRPC server failed")]
    Transport(#[from] tonic::transport::Error),
    #[error("the TLS settings (--tls-cert, --tls-key, --tls-client-ca) are not valid")]
    Tls(#[from] TlsError),
    #[error("the auth settings are not valid")]
    Auth(#[from] AuthError),
}

/// Collects the services and stores of one gRPC server. Add the services, name the
/// stores whose outage should make the server NOT_SERVING, then [`GrpcServer::serve`]
/// (or [`GrpcServer::bind`] first to learn the port, e.g. for `127.0.0.1:0` in tests).
pub struct GrpcServer {
    routes: RoutesBuilder,
    service_names: Vec<&'static str>,
    probes: Vec<NamedProbe>,
    grpc: GrpcArgs,
    metrics: MetricsArgs,
    /// Served on the metrics port beside `/metrics`.
    http_routes: axum::Router,
    shutdown: Shutdown,
}

impl GrpcServer {
    /// A server without a metrics endpoint until [`GrpcServer::metrics`] asks for one.
    pub fn new(grpc: &GrpcArgs, shutdown: Shutdown) -> Self {
        GrpcServer {
            routes: RoutesBuilder::default(),
            service_names: Vec::new(),
            probes: Vec::new(),
            grpc: grpc.clone(),
            metrics: MetricsArgs::default(),
            http_routes: axum::Router::new(),
            shutdown,
        }
    }

    /// Serves `routes` on the HTTP port of [`GrpcServer::metrics`] beside `/metrics`
    /// (nowhere when that port is off).
    pub fn http_routes(mut self, routes: axum::Router) -> Self {
        self.http_routes = self.http_routes.merge(routes);
        self
    }

    /// Serves the Prometheus endpoint as `metrics` says (its address, or off),
    /// beside the gRPC port, for as long as the server runs.
    pub fn metrics(mut self, metrics: &MetricsArgs) -> Self {
        self.metrics = metrics.clone();
        self
    }

    /// Serves a generated tonic service; its name is reported by health and reflection.
    /// A client that cancels a call mid-request reaches its handler as an error on the
    /// request stream, never as a complete request (see [`CancelledRequestsFail`]).
    pub fn add_service<S>(mut self, service: S) -> Self
    where
        S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        self.routes.add_service(CancelledRequestsFail::new(service));
        self.service_names.push(S::NAME);
        self
    }

    /// Pings `store` every health interval; the server reports NOT_SERVING while it does not answer.
    /// `name` appears in the logs ("session store").
    pub fn health_check(mut self, name: impl Into<String>, store: impl StoreProbe) -> Self {
        self.probes.push(NamedProbe::new(name.into(), Box::new(store)));
        self
    }

    /// Binds the listen address (`host:port`; port 0 picks a free one) and the
    /// metrics address, if any. Failing here, before anything is served, makes a
    /// taken port a clear startup error.
    pub async fn bind(self, listen: &str) -> Result<BoundServer, ServeError> {
        let bind_error = |source| ServeError::Bind {
            addr: listen.to_string(),
            source,
        };
        // TLS files and credentials are read and checked first: a bad one is a startup error.
        let tls = self.grpc.tls.acceptor()?;
        let authenticator = Authenticator::from_args(&self.grpc.auth)?;
        if self.grpc.auth.auth == AuthMode::Required && tls.is_none() {
            tracing::warn!("--auth required without --tls-cert: bearer tokens cross the network in the clear");
        }
        let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        let metrics = match self.metrics.listen_addr() {
            Some(addr) => Some(
                MetricsEndpoint::bind(addr)
                    .await
                    .map_err(|source| ServeError::MetricsBind {
                        addr: addr.to_string(),
                        source,
                    })?,
            ),
            None => None,
        };
        Ok(BoundServer {
            server: self,
            listener,
            local_addr,
            metrics,
            tls,
            authenticator,
        })
    }

    /// Binds and serves until the shutdown fires and the drain completes (or the grace period ends).
    pub async fn serve(self, listen: &str) -> Result<(), ServeError> {
        self.bind(listen).await?.serve().await
    }
}

/// A server whose port is bound but which does not accept calls yet.
pub struct BoundServer {
    server: GrpcServer,
    listener: TcpListener,
    local_addr: SocketAddr,
    metrics: Option<MetricsEndpoint>,
    tls: Option<TlsAcceptor>,
    authenticator: Option<Arc<Authenticator>>,
}

impl BoundServer {
    /// The address actually bound (with the port the OS picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The metrics endpoint's address, when it is on.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|metrics| metrics.local_addr)
    }

    /// Serves until shutdown. Then: health turns NOT_SERVING, the listener closes,
    /// long-lived streams end (they watch the same [`Shutdown`]), in-flight calls
    /// finish; after the grace period the remaining connections are dropped.
    pub async fn serve(self) -> Result<(), ServeError> {
        let BoundServer {
            server,
            listener,
            local_addr,
            metrics,
            tls,
            authenticator,
        } = self;
        let GrpcServer {
            routes,
            service_names,
            probes,
            grpc,
            metrics: _,
            http_routes,
            shutdown,
        } = server;

        let (reflection_v1, reflection_v1alpha) = reflection(&service_names)?;
        let (reporter, health_service) = tonic_health::server::health_reporter();
        let names = std::iter::once("")
            .chain(service_names.iter().copied())
            .map(String::from)
            .collect();
        let mut monitor = HealthMonitor::new(reporter, names, probes, grpc.health_interval());
        // The first check happens before the first call is accepted, so a probe that
        // connects as soon as the port answers already sees the real status.
        monitor.check_once().await;
        let health_task = tokio::spawn(monitor.run(shutdown.clone()));

        let metrics_task = metrics.map(|metrics| {
            tracing::info!("serving metrics on http://{}/metrics", metrics.local_addr);
            metrics.serve(http_routes, shutdown.clone())
        });

        // Every method this server can describe, for the RPC metrics' `method` label.
        let methods = Methods::from_descriptor_sets(&[
            adk_grpc_proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
        ]);
        // gRPC-Web from a browser arrives over HTTP/1.1 (browsers speak HTTP/2 only over TLS).
        let builder = Server::builder().accept_http1(grpc.web.grpc_web);
        let auth = AuthLayer::new(
            authenticator,
            grpc.auth.auth_public_health,
            grpc.auth.auth_public_reflection,
            grpc.max_message_bytes,
            grpc.limits.quotas(),
        );
        let router = builder
            // Pings a connection the client has been silent on, so a client that vanished
            // without closing it (crashed host, dropped NAT entry) or stopped answering is
            // noticed and its connection and streams freed.
            .http2_keepalive_interval(Some(grpc.limits.keepalive_interval()))
            .http2_keepalive_timeout(Some(grpc.limits.keepalive_timeout()))
            .max_concurrent_streams(Some(grpc.limits.max_concurrent_streams))
            // With --grpc-web: CORS, then gRPC-Web translated to gRPC for every layer below (web.rs).
            .layer(grpc.web.layers())
            // One span and one set of metrics per call, health and reflection included.
            .layer(RpcLayer::new(methods))
            // The client's deadline, and INVALID_ARGUMENT for undecodable messages (limits.rs).
            .layer(crate::limits::LimitsLayer {
                max_message_bytes: grpc.max_message_bytes,
            })
            // gzip, deflate and zstd: requests decompressed (within the message limit) before
            // auth reads them, responses compressed for clients that accept it (compression.rs).
            .layer(crate::compression::CompressionLayer {
                max_message_bytes: grpc.max_message_bytes,
                responses: grpc.compression.compression_min_bytes,
            })
            // Authentication, authorization of what each call touches (auth/layer.rs), and
            // concurrent streams and runs per user and per connection (quota.rs).
            .layer(auth)
            .add_routes(routes.routes())
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha);
        // A client that connects and never finishes its handshake is dropped (handshake.rs).
        let handshake_timeout = grpc.limits.handshake_timeout();
        let serving: Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>> = match tls {
            None => {
                let incoming = TcpIncoming::from(listener)
                    .with_nodelay(Some(true))
                    .map(move |accepted| accepted.map(|tcp| HandshakeDeadline::new(tcp, handshake_timeout)));
                Box::pin(router.serve_with_incoming_shutdown(incoming, shutdown.triggered()))
            }
            Some(acceptor) => {
                let incoming = tls_incoming(listener, acceptor, handshake_timeout);
                Box::pin(router.serve_with_incoming_shutdown(incoming, shutdown.triggered()))
            }
        };

        tracing::info!(services = ?service_names, "listening on {local_addr}");
        let grace = grpc.shutdown_grace();
        let deadline = async {
            shutdown.triggered().await;
            tokio::time::sleep(grace).await;
        };
        let outcome = tokio::select! {
            served = serving => served.map_err(ServeError::from),
            () = deadline => {
                tracing::warn!("calls still running after the {grace:?} grace period; exiting anyway");
                Ok(())
            }
        };
        health_task.abort();
        if let Some(task) = metrics_task {
            task.abort();
        }
        if outcome.is_ok() {
            tracing::info!("stopped");
        }
        outcome
    }
}

/// The TLS connections of `listener`, each handshake in a task of its own (a slow client
/// holds up no other) under the connection's handshake deadline, which then goes on
/// running until the HTTP/2 preface is in. Accepting stops when the server drops the
/// stream (shutdown), which closes the listener.
fn tls_incoming(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
) -> ReceiverStream<std::io::Result<HandshakeDeadline<TlsStream<TcpStream>>>> {
    let (ready, incoming) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = ready.closed() => break,
            };
            let tcp = match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors, typically: pause rather than spin on the error.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let deadline = Instant::now() + handshake_timeout;
            let (acceptor, ready) = (acceptor.clone(), ready.clone());
            tokio::spawn(async move {
                match tokio::time::timeout_at(deadline, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = ready.send(Ok(HandshakeDeadline::until(tls, deadline))).await;
                    }
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!("closing a connection whose TLS handshake did not finish in time"),
                }
            });
        }
    });
    ReceiverStream::new(incoming)
}

/// How long accepting pauses after an accept error.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Reflection v1 and v1alpha (grpcurl 1.8 speaks only v1alpha), advertising exactly
/// the services this server runs: adk.v1 has services that may not be served here.
fn reflection(
    service_names: &[&'static str],
) -> Result<
    (
        ServerReflectionServer<impl tonic_reflection::server::v1::ServerReflection>,
        ServerReflectionServerV1Alpha<impl tonic_reflection::server::v1alpha::ServerReflection>,
    ),
    ServeError,
> {
    let advertised: Vec<&str> = service_names
        .iter()
        .copied()
        .chain([
            tonic_health::pb::health_server::SERVICE_NAME,
            tonic_reflection::pb::v1::server_reflection_server::SERVICE_NAME,
            tonic_reflection::pb::v1alpha::server_reflection_server::SERVICE_NAME,
        ])
        .collect();
    let builder = || {
        let builder = tonic_reflection::server::Builder::configure()
            // Both reflection versions' descriptors go to both builders, so every
            // advertised name can be described through either version.
            .include_reflection_service(false)
            .register_encoded_file_descriptor_set(adk_grpc_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET);
        advertised
            .iter()
            .fold(builder, |builder, name| builder.with_service_name(*name))
    };
    Ok((builder().build_v1()?, builder().build_v1alpha()?))
}
