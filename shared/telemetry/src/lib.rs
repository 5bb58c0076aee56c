//! What the suite records for observability, in one place so every crate uses the
//! same names:
//!
//! - [`metrics`]: the Prometheus registry every binary serves on `/metrics`;
//! - the spans (and metrics) of the shared choke points: [`RedisOp`],
//!   [`ModelCall`], [`ToolCall`], [`HookCall`], [`Invocation`];
//! - W3C trace-context propagation over HTTP headers: [`inject_current_context`]
//!   for outgoing requests, [`extract_context`] for incoming ones.
//!
//! Exporting spans (OTLP) and serving `/metrics` are the binaries' business
//! (adk-grpc-server-kit); this crate only records, so the library crates that use it
//! (store, models, runner) take on nothing heavy. Without an exporter the spans
//! are ordinary `tracing` spans and propagation is a no-op.

pub mod metrics;
mod propagation;
mod spans;

pub use propagation::{extract_context, inject_current_context};
pub use spans::{HookCall, Invocation, ModelCall, RedisOp, ToolCall, UNKNOWN_TOOL};

use tonic::Code;

/// The canonical name of a gRPC status code (`OK`, `NOT_FOUND`, ...): the `code`
/// and `outcome` label values of the metrics and the `error.type` of spans.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
