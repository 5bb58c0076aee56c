//! Agent2Agent (A2A v1.0, gRPC binding): every app of the runner is an A2A agent. The
//! protocol's rules, its conversions and the remote agents live in the runner library
//! (`adk_grpc_agents::a2a`); this module serves them:
//!
//! - [`card`]: the agent card of an app, over gRPC and HTTP, and the servers' A2A flags;
//! - [`handler`]: the thin `lf.a2a.v1.A2AService` handlers: pick the app (the tenant)
//!   and the user (the credential), call the app's [`adk_grpc_agents::a2a::A2aTaskService`].

pub mod card;
pub mod handler;

pub use card::{A2aArgs, CardArgs, agent_card, card_routes};
pub use handler::{A2aGrpcService, DEFAULT_USER, USER_HEADER, a2a_service};
