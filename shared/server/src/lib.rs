//! What every ADK gRPC binary shares: command-line flags with env fallbacks,
//! tracing setup, graceful shutdown, `grpc.health.v1` driven by store pings,
//! server reflection (v1 and v1alpha) and the serve loop.
//!
//! A binary flattens [`StoreArgs`], the flag groups of the services it serves
//! ([`SessionArgs`], [`ArtifactArgs`]), [`GrpcArgs`] and [`LogArgs`] into its own
//! clap parser, declares `--listen` itself, and then:
//!
//! ```ignore
//! let shutdown = Shutdown::on_signals()?;
//! GrpcServer::new(&cli.grpc, shutdown.clone())
//!     .add_service(session_service(store.clone(), &cli.grpc, shutdown))
//!     .health_check("session store", store)
//!     .serve(&cli.listen)
//!     .await?;
//! ```

mod args;
mod cancel;
mod health;
mod logging;
mod message;
mod server;
mod shutdown;

pub use args::{
    ArtifactArgs, DEFAULT_MAX_MESSAGE_BYTES, DefaultStoreUrl, GrpcArgs, LogArgs, LogFormat, MemoryByDefault,
    RedisByDefault, SessionArgs, StoreArgs, redact_url,
};
pub use cancel::CancelledRequestsFail;
pub use health::StoreProbe;
pub use logging::{exit_code, init_tracing};
pub use message::{fit_in_message, message_too_large};
pub use server::{BoundServer, GrpcServer, ServeError};
pub use shutdown::Shutdown;
