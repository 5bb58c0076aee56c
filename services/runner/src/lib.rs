//! The `adk.v1.AgentRunner` gRPC service: runs agents built with the runner
//! library (`adk-grpc-agents`) and streams their events.
//!
//! Two ways to get the [`App`]s it serves:
//! - from an agents file (YAML, see [`AgentsConfig`] and `examples/agents.yaml`):
//!   models, HTTP and client tools, and one agent tree per app, checked when the
//!   file is loaded, with errors that name the file, the app, the agent and the field;
//! - in Rust: build agents with the runner library, wrap each [`Runner`] in an
//!   [`App`], and serve them with [`runner_service`].
//!
//! ```no_run
//! # use adk_grpc_agents::{LlmAgentBuilder, Runner};
//! # use adk_grpc_runner_service::{App, RunnerServices, runner_service};
//! # use adk_grpc_server_kit::{GrpcArgs, GrpcServer, Shutdown};
//! # use std::sync::Arc;
//! # async fn demo() -> anyhow::Result<()> {
//! let services = RunnerServices::in_memory();
//! let agent = LlmAgentBuilder::new("assistant")
//!     .model(Arc::new(adk_grpc_models::MockModel::echo()))
//!     .build()?;
//! let runner = Runner::new(services.runner_config("my_app", Arc::new(agent)))?;
//! let grpc = GrpcArgs::default();
//! let shutdown = Shutdown::on_signals()?;
//! GrpcServer::new(&grpc, shutdown.clone())
//!     .add_service(runner_service(vec![App::new(runner)], &grpc, shutdown)?)
//!     .serve("127.0.0.1:50053")
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! The handlers are transport only: every rule about invocations (leases, what is
//! stored, resumption, cancellation) lives in the runner library.

pub mod a2a;
mod app;
mod config;
mod replies;
mod service;
mod stores;

pub use app::{AgentDescription, App, DescribedToolset, ToolDescription};
pub use config::{AgentsConfig, ConfigError, Problem};
pub use replies::ReplyArgs;
pub use service::{RunnerGrpcService, runner_service};
pub use stores::{LeaseArgs, RunnerServices};
