//! Agent2Agent (A2A v1.0, gRPC binding `lf.a2a.v1.A2AService`), both ways:
//!
//! - [`A2aTaskService`]: an app served as an A2A agent, every rule of the protocol over
//!   its [`Runner`](crate::runner::Runner) and sessions; a server's handlers only pick the app and
//!   the user (see `adk-grpc-runner-service`'s `a2a` module);
//! - [`RemoteA2aAgent`] and [`RemoteA2aTool`]: an agent served elsewhere over A2A, as an
//!   agent of our tree (a transfer target) or a tool of an LLM agent;
//! - [`convert`]: ADK `Content`/`Part` <-> A2A `Message`/`Part`, and task ids;
//! - [`task`]: tasks and their states read from a session's log (any replica answers).
//!
//! An A2A context is a session (created on first use), a task is the invocation a
//! message started together with the invocations that answer its pending calls.

pub mod convert;
mod remote;
mod service;
pub mod task;
#[cfg(test)]
mod tests;

pub use convert::TaskId;
pub use remote::{
    INPUT_CALL, REMOTE_CONTEXT_KEY, REMOTE_STATE_KEY, REMOTE_TASK_KEY, RemoteA2aAgent, RemoteA2aConfig, RemoteA2aTool,
};
pub use service::{A2aTaskService, TaskUpdates};
