//! The one error type of the suite, and its single mapping to and from gRPC statuses.
//!
//! Every non-OK status the suite sends carries `google.rpc` details in
//! `grpc-status-details-bin`: an `ErrorInfo` whose `reason` names the failure stably
//! (a program acts on it, never on the English message), with [`ERROR_DOMAIN`] as its
//! domain; a `BadRequest` naming the request field for INVALID_ARGUMENT; a `RetryInfo`
//! where repeating the call later makes sense. The reasons are the enum
//! `adk.v1.ErrorReason` of `proto/adk/v1/errors.proto` ([`Reason`]), documented there.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// `ErrorInfo.domain` of every error the suite sends.
pub const ERROR_DOMAIN: &str = "adk.dev";

/// How long a client should wait before repeating a call that may succeed later
/// (`RetryInfo.retry_delay`), unless the failure knows better (a provider's Retry-After).
pub const RETRY_DELAY: Duration = Duration::from_secs(1);

/// `ErrorInfo.metadata` keys.
pub mod metadata {
    /// LIMIT_EXCEEDED: the limit's name (e.g. `max_message_bytes`).
    pub const LIMIT: &str = "limit";
    /// LIMIT_EXCEEDED: the limit's value.
    pub const VALUE: &str = "value";
    /// INTERNAL (and the AGENT/TOOL/MODEL errors): the id of the server's log line.
    pub const ERROR_ID: &str = "error_id";
}

/// What a NOT_FOUND is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    Session,
    /// An app the runner does not serve.
    App,
    /// An artifact, or the asked-for version of one.
    Artifact,
    /// An event id named by the request (a fork's up_to_event_id).
    Event,
    /// An invocation named by the request (a rewind's invocation id).
    Invocation,
    /// Anything else (or a peer's status without details).
    Other,
}

/// What an ALREADY_EXISTS collides with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    Session,
    /// Artifact versions are immutable: saving an explicit version twice.
    ArtifactVersion,
    Other,
}

/// Why a call was ABORTED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// The caller's precondition (expected last event / sequence) no longer holds:
    /// reload and decide again. Repeating the call unchanged fails again.
    Precondition,
    /// Another invocation runs on the session: retry later, or choose an on_busy.
    SessionBusy,
    /// The invocation lost its session lease (another took over) and stopped.
    LeaseLost,
    /// The client cancelled before its request was complete; nothing was stored.
    RequestIncomplete,
    Other,
}

/// Which RESOURCE_EXHAUSTED.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exhausted {
    /// A limit on size or count (a message, an event, the state, an artifact, model
    /// calls): the same call fails again.
    Limit {
        name: Cow<'static, str>,
        value: u64,
    },
    /// A limit on concurrent work (runs, streams, watches): it frees up as other calls
    /// end, so a retry later may succeed.
    Quota {
        name: Cow<'static, str>,
        value: u64,
    },
    /// The model provider's rate limit, with the delay it asked for.
    RateLimited {
        retry_after: Option<Duration>,
    },
    /// The store is out of memory.
    StoreFull,
    Other,
}

/// The stable reasons (`ErrorInfo.reason`): the enum `adk.v1.ErrorReason` of
/// `proto/adk/v1/errors.proto`, the one list the clients take theirs from too, where each
/// value's comment gives its gRPC code, meaning and whether a retry makes sense. The name
/// sent is the value's proto name (`as_str_name()`: `"SESSION_NOT_FOUND"`); its zero value
/// `Unspecified` is never sent.
pub use adk_grpc_proto::v1::ErrorReason as Reason;

/// Every reason the suite sends, in the proto's order: the enum's values but the zero one.
pub fn reasons() -> impl Iterator<Item = Reason> {
    // errors.proto numbers them from 1 without a gap (a test checks it against the proto).
    (1..).map_while(|number| Reason::try_from(number).ok())
}

/// `ErrorInfo.reason` back into its reason; None for a name this build's proto lacks (a
/// newer peer's) and for the zero value, which no one sends.
pub fn parse_reason(name: &str) -> Option<Reason> {
    Reason::from_str_name(name).filter(|reason| *reason != Reason::Unspecified)
}

/// Every fallible ADK operation returns this. The first variants mirror the
/// seed's `AdkError`; the rest name the gRPC outcome a client should see, with what
/// the failure's [`Reason`] needs to know.
#[derive(Debug, thiserror::Error)]
pub enum AdkError {
    #[error("agent error: {0}")]
    Agent(String),
    #[error("tool error: {0}")]
    Tool(String),
    #[error("model error: {0}")]
    Model(String),
    #[error("session error: {0}")]
    Session(String),
    #[error("artifact error: {0}")]
    Artifact(String),
    #[error("configuration error: {0}")]
    Config(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{1}")]
    NotFound(Missing, String),
    #[error("{1}")]
    AlreadyExists(Existing, String),
    /// Bad input. `field` is the request field at fault (`app_name`,
    /// `event.state_delta`, `new_message.parts[0]`), sent as the BadRequest field
    /// violation; the message names it too (see [`AdkError::invalid`]).
    #[error("{message}")]
    InvalidArgument { field: String, message: String },
    #[error("{1}")]
    Aborted(Conflict, String),
    /// A retryable failure: the store or a peer is unreachable right now.
    #[error("{0}")]
    Unavailable(String),
    /// The operation ran out of time.
    #[error("{0}")]
    DeadlineExceeded(String),
    #[error("{1}")]
    ResourceExhausted(Exhausted, String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    Cancelled(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    Unauthenticated(String),
    /// A feature asked for that this build does not have (yet).
    #[error("{0}")]
    Unimplemented(String),
    #[error("internal error: {0}")]
    Internal(String),
}

pub type Result<T, E = AdkError> = std::result::Result<T, E>;

impl AdkError {
    /// The gRPC code a client sees for this error.
    pub fn code(&self) -> Code {
        match self {
            AdkError::NotFound(..) => Code::NotFound,
            AdkError::AlreadyExists(..) => Code::AlreadyExists,
            AdkError::InvalidArgument { .. } => Code::InvalidArgument,
            AdkError::Aborted(..) => Code::Aborted,
            AdkError::Unavailable(_) | AdkError::Io(_) => Code::Unavailable,
            AdkError::DeadlineExceeded(_) => Code::DeadlineExceeded,
            AdkError::ResourceExhausted(..) => Code::ResourceExhausted,
            AdkError::FailedPrecondition(_) | AdkError::Config(_) => Code::FailedPrecondition,
            AdkError::Cancelled(_) => Code::Cancelled,
            AdkError::PermissionDenied(_) => Code::PermissionDenied,
            AdkError::Unauthenticated(_) => Code::Unauthenticated,
            AdkError::Unimplemented(_) => Code::Unimplemented,
            AdkError::Agent(_)
            | AdkError::Tool(_)
            | AdkError::Model(_)
            | AdkError::Session(_)
            | AdkError::Artifact(_)
            | AdkError::Json(_)
            | AdkError::Internal(_) => Code::Internal,
        }
    }

    /// The stable reason a client sees (`ErrorInfo.reason`).
    pub fn reason(&self) -> Reason {
        match self {
            AdkError::NotFound(missing, _) => match missing {
                Missing::Session => Reason::SessionNotFound,
                Missing::App => Reason::AppNotFound,
                Missing::Artifact => Reason::ArtifactNotFound,
                Missing::Event => Reason::EventNotFound,
                Missing::Invocation => Reason::InvocationNotFound,
                Missing::Other => Reason::NotFound,
            },
            AdkError::AlreadyExists(existing, _) => match existing {
                Existing::Session => Reason::SessionAlreadyExists,
                Existing::ArtifactVersion => Reason::ArtifactVersionExists,
                Existing::Other => Reason::AlreadyExists,
            },
            AdkError::InvalidArgument { .. } => Reason::InvalidArgument,
            AdkError::Aborted(conflict, _) => match conflict {
                Conflict::Precondition => Reason::PreconditionFailed,
                Conflict::SessionBusy => Reason::SessionBusy,
                Conflict::LeaseLost => Reason::LeaseLost,
                Conflict::RequestIncomplete => Reason::RequestIncomplete,
                Conflict::Other => Reason::Aborted,
            },
            AdkError::ResourceExhausted(exhausted, _) => match exhausted {
                Exhausted::Limit { .. } | Exhausted::Quota { .. } => Reason::LimitExceeded,
                Exhausted::RateLimited { .. } => Reason::RateLimited,
                Exhausted::StoreFull => Reason::StoreFull,
                Exhausted::Other => Reason::ResourceExhausted,
            },
            AdkError::Unavailable(_) | AdkError::Io(_) => Reason::Unavailable,
            AdkError::DeadlineExceeded(_) => Reason::DeadlineExceeded,
            AdkError::FailedPrecondition(_) => Reason::FailedPrecondition,
            AdkError::Config(_) => Reason::Misconfigured,
            AdkError::Cancelled(_) => Reason::Cancelled,
            AdkError::PermissionDenied(_) => Reason::PermissionDenied,
            AdkError::Unauthenticated(_) => Reason::Unauthenticated,
            AdkError::Unimplemented(_) => Reason::Unimplemented,
            AdkError::Agent(_) => Reason::AgentError,
            AdkError::Tool(_) => Reason::ToolError,
            AdkError::Model(_) => Reason::ModelError,
            AdkError::Session(_) | AdkError::Artifact(_) | AdkError::Json(_) | AdkError::Internal(_) => {
                Reason::Internal
            }
        }
    }

    /// When repeating the call later may succeed, after how long (`RetryInfo`): the
    /// store or a peer was unreachable, the session was busy, a concurrency quota or
    /// a rate limit was hit. None where a retry would fail the same way.
    pub fn retry_delay(&self) -> Option<Duration> {
        match self {
            AdkError::Unavailable(_) | AdkError::Io(_) => Some(RETRY_DELAY),
            AdkError::Aborted(Conflict::SessionBusy, _) => Some(RETRY_DELAY),
            AdkError::ResourceExhausted(Exhausted::Quota { .. }, _) => Some(RETRY_DELAY),
            AdkError::ResourceExhausted(Exhausted::RateLimited { retry_after }, _) => {
                Some(retry_after.unwrap_or(RETRY_DELAY))
            }
            _ => None,
        }
    }

    /// True for failures worth retrying unchanged (the store was briefly unreachable).
    pub fn is_retryable(&self) -> bool {
        matches!(self.code(), Code::Unavailable | Code::DeadlineExceeded)
    }

    /// INVALID_ARGUMENT for the request field `field`, with the message
    /// "`field` `why`": the field is written once and named both in the message and
    /// in the BadRequest field violation.
    pub fn invalid(field: impl Into<String>, why: impl std::fmt::Display) -> Self {
        let field = field.into();
        let message = format!("{field} {why}");
        AdkError::InvalidArgument { field, message }
    }

    /// INVALID_ARGUMENT for `field` with a message phrased otherwise (it must still
    /// name the field, or say which part of the request is wrong).
    pub fn invalid_with(field: impl Into<String>, message: impl Into<String>) -> Self {
        AdkError::InvalidArgument {
            field: field.into(),
            message: message.into(),
        }
    }

    /// RESOURCE_EXHAUSTED for a size or count limit `name` of `value`.
    pub fn limit(name: impl Into<Cow<'static, str>>, value: impl TryInto<u64>, message: impl Into<String>) -> Self {
        let value = value.try_into().unwrap_or(u64::MAX);
        AdkError::ResourceExhausted(
            Exhausted::Limit {
                name: name.into(),
                value,
            },
            message.into(),
        )
    }

    /// RESOURCE_EXHAUSTED for a concurrency quota `name` of `value` (retry later).
    pub fn quota(name: impl Into<Cow<'static, str>>, value: impl TryInto<u64>, message: impl Into<String>) -> Self {
        let value = value.try_into().unwrap_or(u64::MAX);
        AdkError::ResourceExhausted(
            Exhausted::Quota {
                name: name.into(),
                value,
            },
            message.into(),
        )
    }

    /// The same error with `prefix` put before the field it names (and its message),
    /// for a check run on a part of the request (`events[3]` + `event.content`).
    pub fn within(self, prefix: &str) -> Self {
        match self {
            AdkError::InvalidArgument { field, message } => AdkError::InvalidArgument {
                message: format!("{prefix}: {message}"),
                field: format!("{prefix}.{field}"),
            },
            other => other,
        }
    }
}

/// The one mapping to a gRPC status, details included. An INTERNAL error is the
/// server's failure and its text is a backend's (a Redis reply, a decode error of
/// stored data): the detail is logged under a short random id, and the client gets
/// only that id to quote.
impl From<AdkError> for Status {
    fn from(err: AdkError) -> Self {
        let code = err.code();
        let reason = err.reason();
        let mut meta = HashMap::new();
        let message = if code == Code::Internal {
            let id = error_id();
            tracing::error!(error_id = %id, error = %err, "internal error");
            meta.insert(metadata::ERROR_ID.to_string(), id.clone());
            format!("internal error (id {id}); see the server log")
        } else {
            err.to_string()
        };
        let mut details = ErrorDetails::new();
        match &err {
            AdkError::ResourceExhausted(Exhausted::Limit { name, value } | Exhausted::Quota { name, value }, _) => {
                meta.insert(metadata::LIMIT.to_string(), name.to_string());
                meta.insert(metadata::VALUE.to_string(), value.to_string());
            }
            AdkError::InvalidArgument { field, message } => {
                details.add_bad_request_violation(field.clone(), message.clone());
            }
            _ => {}
        }
        details.set_error_info(reason.as_str_name(), ERROR_DOMAIN, meta);
        if let Some(delay) = err.retry_delay() {
            details.set_retry_info(Some(delay));
        }
        Status::with_error_details(code, message, details)
    }
}

/// 12 hex digits of a random UUID: unique enough to find one line in a server's log.
fn error_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(12);
    id
}

/// A peer's status back into the error it was made from: by the `ErrorInfo` reason
/// when the peer is this suite (so a remote store's SESSION_NOT_FOUND is the same
/// error as a local one), else by code alone.
impl From<Status> for AdkError {
    fn from(status: Status) -> Self {
        let message = status.message().to_string();
        let details = status.get_error_details();
        let info = details.error_info().filter(|info| info.domain == ERROR_DOMAIN);
        let reason = info.and_then(|info| parse_reason(&info.reason));
        let meta = |key: &str| info.and_then(|info| info.metadata.get(key)).cloned();
        let retry_delay = details.retry_info().and_then(|retry| retry.retry_delay);
        let field = || {
            details
                .bad_request()
                .and_then(|bad| bad.field_violations.first())
                .map(|violation| violation.field.clone())
                .unwrap_or_default()
        };
        let exhausted = |reason: Option<Reason>| match reason {
            Some(Reason::LimitExceeded) => {
                let name = Cow::Owned(meta(metadata::LIMIT).unwrap_or_default());
                let value = meta(metadata::VALUE).and_then(|v| v.parse().ok()).unwrap_or(0);
                match retry_delay {
                    Some(_) => Exhausted::Quota { name, value },
                    None => Exhausted::Limit { name, value },
                }
            }
            Some(Reason::RateLimited) => Exhausted::RateLimited {
                retry_after: retry_delay,
            },
            Some(Reason::StoreFull) => Exhausted::StoreFull,
            _ => Exhausted::Other,
        };
        match status.code() {
            Code::NotFound => AdkError::NotFound(
                match reason {
                    Some(Reason::SessionNotFound) => Missing::Session,
                    Some(Reason::AppNotFound) => Missing::App,
                    Some(Reason::ArtifactNotFound) => Missing::Artifact,
                    Some(Reason::EventNotFound) => Missing::Event,
                    Some(Reason::InvocationNotFound) => Missing::Invocation,
                    _ => Missing::Other,
                },
                message,
            ),
            Code::AlreadyExists => AdkError::AlreadyExists(
                match reason {
                    Some(Reason::SessionAlreadyExists) => Existing::Session,
                    Some(Reason::ArtifactVersionExists) => Existing::ArtifactVersion,
                    _ => Existing::Other,
                },
                message,
            ),
            Code::InvalidArgument | Code::OutOfRange => AdkError::InvalidArgument {
                field: field(),
                message,
            },
            Code::Aborted => AdkError::Aborted(
                match reason {
                    Some(Reason::PreconditionFailed) => Conflict::Precondition,
                    Some(Reason::SessionBusy) => Conflict::SessionBusy,
                    Some(Reason::LeaseLost) => Conflict::LeaseLost,
                    Some(Reason::RequestIncomplete) => Conflict::RequestIncomplete,
                    _ => Conflict::Other,
                },
                message,
            ),
            Code::Unavailable => AdkError::Unavailable(message),
            Code::DeadlineExceeded => AdkError::DeadlineExceeded(message),
            Code::ResourceExhausted => AdkError::ResourceExhausted(exhausted(reason), message),
            Code::FailedPrecondition if reason == Some(Reason::Misconfigured) => AdkError::Config(
                message
                    .strip_prefix("configuration error: ")
                    .unwrap_or(&message)
                    .to_string(),
            ),
            Code::FailedPrecondition => AdkError::FailedPrecondition(message),
            Code::Cancelled => AdkError::Cancelled(message),
            Code::PermissionDenied => AdkError::PermissionDenied(message),
            Code::Unauthenticated => AdkError::Unauthenticated(message),
            Code::Unimplemented => AdkError::Unimplemented(message),
            _ => AdkError::Internal(format!("{:?}: {message}", status.code())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of every reason, with the code it must travel under.
    fn one_of_each() -> Vec<(AdkError, Code, &'static str)> {
        vec![
            (
                AdkError::NotFound(Missing::Session, "s".into()),
                Code::NotFound,
                "SESSION_NOT_FOUND",
            ),
            (
                AdkError::NotFound(Missing::App, "a".into()),
                Code::NotFound,
                "APP_NOT_FOUND",
            ),
            (
                AdkError::NotFound(Missing::Artifact, "f".into()),
                Code::NotFound,
                "ARTIFACT_NOT_FOUND",
            ),
            (
                AdkError::NotFound(Missing::Event, "e".into()),
                Code::NotFound,
                "EVENT_NOT_FOUND",
            ),
            (
                AdkError::NotFound(Missing::Invocation, "i".into()),
                Code::NotFound,
                "INVOCATION_NOT_FOUND",
            ),
            (
                AdkError::NotFound(Missing::Other, "x".into()),
                Code::NotFound,
                "NOT_FOUND",
            ),
            (
                AdkError::AlreadyExists(Existing::Session, "s".into()),
                Code::AlreadyExists,
                "SESSION_ALREADY_EXISTS",
            ),
            (
                AdkError::AlreadyExists(Existing::ArtifactVersion, "v".into()),
                Code::AlreadyExists,
                "ARTIFACT_VERSION_EXISTS",
            ),
            (
                AdkError::AlreadyExists(Existing::Other, "x".into()),
                Code::AlreadyExists,
                "ALREADY_EXISTS",
            ),
            (
                AdkError::invalid("app_name", "is required"),
                Code::InvalidArgument,
                "INVALID_ARGUMENT",
            ),
            (
                AdkError::Aborted(Conflict::Precondition, "p".into()),
                Code::Aborted,
                "PRECONDITION_FAILED",
            ),
            (
                AdkError::Aborted(Conflict::SessionBusy, "b".into()),
                Code::Aborted,
                "SESSION_BUSY",
            ),
            (
                AdkError::Aborted(Conflict::LeaseLost, "l".into()),
                Code::Aborted,
                "LEASE_LOST",
            ),
            (
                AdkError::Aborted(Conflict::RequestIncomplete, "r".into()),
                Code::Aborted,
                "REQUEST_INCOMPLETE",
            ),
            (AdkError::Aborted(Conflict::Other, "x".into()), Code::Aborted, "ABORTED"),
            (
                AdkError::limit("max_event_bytes", 1024, "big"),
                Code::ResourceExhausted,
                "LIMIT_EXCEEDED",
            ),
            (
                AdkError::quota("max_runs_per_user", 4, "busy"),
                Code::ResourceExhausted,
                "LIMIT_EXCEEDED",
            ),
            (
                AdkError::ResourceExhausted(Exhausted::RateLimited { retry_after: None }, "429".into()),
                Code::ResourceExhausted,
                "RATE_LIMITED",
            ),
            (
                AdkError::ResourceExhausted(Exhausted::StoreFull, "oom".into()),
                Code::ResourceExhausted,
                "STORE_FULL",
            ),
            (
                AdkError::ResourceExhausted(Exhausted::Other, "x".into()),
                Code::ResourceExhausted,
                "RESOURCE_EXHAUSTED",
            ),
            (AdkError::Unavailable("down".into()), Code::Unavailable, "UNAVAILABLE"),
            (
                AdkError::Io(std::io::Error::other("reset")),
                Code::Unavailable,
                "UNAVAILABLE",
            ),
            (
                AdkError::DeadlineExceeded("late".into()),
                Code::DeadlineExceeded,
                "DEADLINE_EXCEEDED",
            ),
            (
                AdkError::FailedPrecondition("no".into()),
                Code::FailedPrecondition,
                "FAILED_PRECONDITION",
            ),
            (
                AdkError::Config("bad flag".into()),
                Code::FailedPrecondition,
                "MISCONFIGURED",
            ),
            (AdkError::Cancelled("stop".into()), Code::Cancelled, "CANCELLED"),
            (
                AdkError::PermissionDenied("no".into()),
                Code::PermissionDenied,
                "PERMISSION_DENIED",
            ),
            (
                AdkError::Unauthenticated("who".into()),
                Code::Unauthenticated,
                "UNAUTHENTICATED",
            ),
            (
                AdkError::Unimplemented("later".into()),
                Code::Unimplemented,
                "UNIMPLEMENTED",
            ),
            (AdkError::Agent("a".into()), Code::Internal, "AGENT_ERROR"),
            (AdkError::Tool("t".into()), Code::Internal, "TOOL_ERROR"),
            (AdkError::Model("m".into()), Code::Internal, "MODEL_ERROR"),
            (AdkError::Session("s".into()), Code::Internal, "INTERNAL"),
            (AdkError::Artifact("a".into()), Code::Internal, "INTERNAL"),
            (
                AdkError::Json(serde_json::from_str::<u8>("x").unwrap_err()),
                Code::Internal,
                "INTERNAL",
            ),
            (AdkError::Internal("i".into()), Code::Internal, "INTERNAL"),
        ]
    }

    #[test]
    fn every_error_carries_its_stable_reason_and_the_domain() {
        for (err, code, reason) in one_of_each() {
            assert_eq!(err.reason().as_str_name(), reason, "{err:?}");
            let status = Status::from(err);
            assert_eq!(status.code(), code, "{reason}");
            assert!(!status.details().is_empty(), "{reason}: no grpc-status-details-bin");
            let info = status
                .get_details_error_info()
                .unwrap_or_else(|| panic!("{reason}: no ErrorInfo"));
            assert_eq!(info.reason, reason);
            assert_eq!(info.domain, ERROR_DOMAIN);
        }
    }

    /// Each value of `adk.v1.ErrorReason` with its comment in errors.proto.
    fn documented() -> Vec<(String, String)> {
        adk_grpc_proto::enum_value_comments("adk.v1.ErrorReason")
    }

    #[test]
    fn every_reason_of_the_proto_is_produced_and_parsed_back() {
        let documented = documented();
        assert_eq!(
            documented.first().map(|(name, _)| name.as_str()),
            Some("ERROR_REASON_UNSPECIFIED")
        );
        let listed: Vec<&str> = reasons().map(|reason| reason.as_str_name()).collect();
        let declared: Vec<&str> = documented[1..].iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            listed, declared,
            "errors.proto numbers its reasons from 1 without a gap"
        );
        let produced: Vec<&str> = one_of_each().iter().map(|(_, _, reason)| *reason).collect();
        for reason in reasons() {
            let name = reason.as_str_name();
            assert!(produced.contains(&name), "no error produces {name}");
            assert!(name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'), "{name}");
            assert_eq!(parse_reason(name), Some(reason));
        }
        assert_eq!(
            parse_reason("ERROR_REASON_UNSPECIFIED"),
            None,
            "the zero value is never a reason"
        );
        assert_eq!(parse_reason("A_REASON_FROM_A_NEWER_PEER"), None);
    }

    /// `NotFound` as the proto and the docs spell a gRPC code: `NOT_FOUND`.
    fn code_name(code: Code) -> String {
        let mut name = String::new();
        for (i, c) in format!("{code:?}").chars().enumerate() {
            if i > 0 && c.is_ascii_uppercase() {
                name.push('_');
            }
            name.push(c.to_ascii_uppercase());
        }
        name
    }

    #[test]
    fn every_reason_travels_with_the_code_and_retry_info_its_proto_comment_gives() {
        let documented = documented();
        for (err, code, reason) in one_of_each() {
            let comment = &documented
                .iter()
                .find(|(name, _)| name == reason)
                .unwrap_or_else(|| panic!("errors.proto lacks {reason}"))
                .1;
            // "NOT_FOUND. No session of that id for that app and user. Retry: no."
            let (documented_code, _) = comment.split_once(". ").unwrap_or_default();
            assert_eq!(documented_code, code_name(code), "{reason}: {comment}");
            let retry = comment
                .split_once("Retry: ")
                .unwrap_or_else(|| panic!("{reason}'s comment says nothing of a retry: {comment}"))
                .1;
            let sent = Status::from(err).get_details_retry_info().is_some();
            if retry.starts_with("yes") {
                assert!(sent, "{reason} comes with a RetryInfo: {comment}");
            } else if retry.starts_with("no") {
                assert!(!sent, "{reason} comes without a RetryInfo: {comment}");
            }
        }
    }

    #[test]
    fn a_status_maps_back_to_the_same_reason_code_and_message() {
        for (err, code, reason) in one_of_each() {
            let text = err.to_string();
            let back = AdkError::from(Status::from(err));
            assert_eq!(back.code(), code, "{reason}");
            if code != Code::Internal {
                assert_eq!(back.reason().as_str_name(), reason);
                assert_eq!(back.to_string(), text, "{reason}");
            }
        }
    }

    #[test]
    fn a_status_without_details_maps_back_by_code() {
        let back = AdkError::from(Status::not_found("gone"));
        assert!(
            matches!(back, AdkError::NotFound(Missing::Other, ref m) if m == "gone"),
            "{back:?}"
        );
        let back = AdkError::from(Status::aborted("busy"));
        assert_eq!(back.reason(), Reason::Aborted);
    }

    #[test]
    fn invalid_argument_names_the_request_field_in_a_bad_request_violation() {
        let err = AdkError::invalid("event.state_delta", "has an empty key");
        assert_eq!(err.to_string(), "event.state_delta has an empty key");
        let status = Status::from(err);
        let bad = status.get_details_bad_request().expect("BadRequest");
        assert_eq!(bad.field_violations.len(), 1);
        assert_eq!(bad.field_violations[0].field, "event.state_delta");
        assert_eq!(
            bad.field_violations[0].description,
            "event.state_delta has an empty key"
        );
        let within = AdkError::invalid("content", "has no parts").within("events[3]");
        assert!(
            matches!(&within, AdkError::InvalidArgument { field, .. } if field == "events[3].content"),
            "{within:?}"
        );
        assert_eq!(within.to_string(), "events[3]: content has no parts");
        match AdkError::from(Status::from(within)) {
            AdkError::InvalidArgument { field, .. } => assert_eq!(field, "events[3].content"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn limit_exceeded_names_the_limit_and_its_value() {
        let status = Status::from(AdkError::limit("max_message_bytes", 4_194_304usize, "too big"));
        let info = status.get_details_error_info().expect("ErrorInfo");
        assert_eq!(
            info.metadata.get(metadata::LIMIT).map(String::as_str),
            Some("max_message_bytes")
        );
        assert_eq!(info.metadata.get(metadata::VALUE).map(String::as_str), Some("4194304"));
        assert!(
            status.get_details_retry_info().is_none(),
            "a size limit is hit again on retry"
        );
        let status = Status::from(AdkError::quota("max_runs_per_user", 4, "too many runs"));
        let info = status.get_details_error_info().expect("ErrorInfo");
        assert_eq!(
            info.metadata.get(metadata::LIMIT).map(String::as_str),
            Some("max_runs_per_user")
        );
        assert_eq!(info.metadata.get(metadata::VALUE).map(String::as_str), Some("4"));
        assert!(
            status.get_details_retry_info().is_some(),
            "a concurrency quota frees up"
        );
    }

    #[test]
    fn retry_info_only_where_a_retry_may_succeed() {
        for (err, _, reason) in one_of_each() {
            let expected = matches!(reason, "UNAVAILABLE" | "SESSION_BUSY" | "RATE_LIMITED")
                || matches!(&err, AdkError::ResourceExhausted(Exhausted::Quota { .. }, _));
            let retry = Status::from(err).get_details_retry_info();
            assert_eq!(retry.is_some(), expected, "{reason}");
            if let Some(retry) = retry {
                assert_eq!(retry.retry_delay, Some(RETRY_DELAY), "{reason}");
            }
        }
        let asked = Duration::from_secs(7);
        let err = AdkError::ResourceExhausted(
            Exhausted::RateLimited {
                retry_after: Some(asked),
            },
            "429".into(),
        );
        assert_eq!(
            Status::from(err).get_details_retry_info().and_then(|r| r.retry_delay),
            Some(asked)
        );
    }

    #[test]
    fn internal_errors_reach_the_client_as_an_id_only() {
        let status = Status::from(AdkError::Internal("redis error: WRONGTYPE Operation".into()));
        assert_eq!(status.code(), Code::Internal);
        assert!(!status.message().contains("WRONGTYPE"), "{}", status.message());
        let id = status
            .message()
            .strip_prefix("internal error (id ")
            .and_then(|rest| rest.strip_suffix("); see the server log"))
            .unwrap_or_else(|| panic!("{}", status.message()));
        assert!(id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        let info = status.get_details_error_info().expect("ErrorInfo");
        assert_eq!(info.metadata.get(metadata::ERROR_ID).map(String::as_str), Some(id));
        assert!(!format!("{:?}", status.details()).contains("WRONGTYPE"));
        let other = Status::from(AdkError::Model("x".into()));
        assert_ne!(other.message(), status.message(), "every error gets its own id");
    }

    #[test]
    fn store_outages_are_retryable_and_bad_input_is_not() {
        assert!(AdkError::Unavailable("x".into()).is_retryable());
        assert!(!AdkError::invalid("x", "is bad").is_retryable());
        assert_eq!(AdkError::Io(std::io::Error::other("reset")).code(), Code::Unavailable);
    }
}
