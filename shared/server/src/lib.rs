//! What every ADK gRPC binary shares: command-line flags with env fallbacks,
//! tracing setup, graceful shutdown, `grpc.health.v1` driven by store pings,
//! server reflection (v1 and v1alpha) and the serve loop.
//!
//! A binary flattens [`StoreArgs`], the flag groups of the services it serves
//! ([`SessionArgs`], [`ArtifactArgs`]), [`GrpcArgs`], [`MetricsArgs`] and
//! [`LogArgs`] into its own clap parser, declares `--listen` itself, and then:
//!
//! ```ignore
//! let telemetry = init_tracing(&cli.log, ServiceInfo { name: "adk-session-server", version })?;
//! let shutdown = Shutdown::on_signals()?;
//! GrpcServer::new(&cli.grpc, shutdown.clone())
//!     .metrics(&cli.metrics)
//!     .add_service(session_service(store.clone(), &cli.grpc, shutdown))
//!     .health_check("session store", store)
//!     .serve(&cli.listen)
//!     .await?;
//! telemetry.shutdown().await; // flushes the last spans
//! ```
//!
//! Observability: every RPC gets a span (the OpenTelemetry server span, parented
//! on the client's W3C trace context) and RPC metrics; spans are exported over
//! OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; `/metrics` serves the
//! Prometheus registry of adk-grpc-telemetry.
//!
//! Security, also part of [`GrpcArgs`] so no binary can leave it out: TLS and
//! mutual TLS on the gRPC port ([`TlsArgs`]), and authentication plus per-call
//! authorization of apps and users in one layer in front of every route
//! ([`AuthArgs`]; off unless `--auth required`).

mod args;
mod auth;
mod cancel;
mod compression;
mod handshake;
mod health;
mod limits;
mod logging;
mod message;
mod metrics;
mod otel;
mod quota;
mod rpc;
mod server;
mod shutdown;
mod tls;
mod web;

pub use args::{
    ArtifactArgs, DEFAULT_MAX_MESSAGE_BYTES, DefaultStoreUrl, GrpcArgs, LogArgs, LogFormat, MemoryArgs,
    MemoryByDefault, MemoryGenerationArgs, MetricsArgs, RedisByDefault, SessionArgs, StoreArgs, redact_url,
};
pub use auth::{ApiKeysError, Apps, AuthArgs, AuthError, AuthMode, JwtError, Principal, Subject};
pub use cancel::CancelledRequestsFail;
pub use compression::{CompressionArgs, DEFAULT_COMPRESSION_MIN_BYTES, ResponseCompression};
pub use health::StoreProbe;
pub use limits::{
    DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_KEEPALIVE_INTERVAL_MS, DEFAULT_KEEPALIVE_TIMEOUT_MS,
    DEFAULT_MAX_CONCURRENT_STREAMS, DEFAULT_MAX_RUNS, DEFAULT_MAX_RUNS_PER_CONNECTION, DEFAULT_MAX_RUNS_PER_USER,
    DEFAULT_MAX_STREAMS_PER_USER, DEFAULT_MAX_WATCHES, LimitArgs, LimitsLayer,
};
pub use logging::{exit_code, init_tracing, run_binary};
pub use message::{check_fits, fit_in_message, message_too_large};
pub use otel::{ServiceInfo, Telemetry};
pub use server::{BoundServer, GrpcServer, ServeError};
pub use shutdown::Shutdown;
pub use tls::{TlsArgs, TlsError};
pub use web::{CorsOrigin, GrpcWebArgs};
