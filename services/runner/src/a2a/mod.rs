//! Agent2Agent (A2A v1.0, gRPC binding): every app of the runner is an A2A agent.
//!
//! - [`convert`]: ADK `Content`/`Part` <-> A2A `Message`/`Part`, task ids;
//! - [`task`]: tasks and their states read from a session's log (any replica answers);
//! - [`card`]: the agent card of an app, over gRPC and HTTP;
//! - [`service`]: the thin `lf.a2a.v1.A2AService` handlers;
//! - [`remote`]: the client side, an agent served elsewhere over A2A as an agent of ours.
//!
//! An A2A context is a session (created on first use), a task is the invocation a
//! message started together with the invocations that answer its pending calls.

pub mod card;
pub mod convert;
pub mod remote;
pub mod service;
pub mod task;

pub use card::{A2aArgs, CardArgs, agent_card, card_routes};
pub use remote::{RemoteA2aAgent, RemoteA2aConfig, RemoteA2aTool};
pub use service::{A2aGrpcService, DEFAULT_USER, USER_HEADER, a2a_service};
