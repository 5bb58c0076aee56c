//! The one error type of the suite, and its single mapping to and from gRPC status codes.

use tonic::{Code, Status};

/// Every fallible ADK operation returns this. The first variants mirror the
/// seed's `AdkError`; the rest name the gRPC outcome a client should see.
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
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    Aborted(String),
    /// A retryable failure: the store or a peer is unreachable right now.
    #[error("{0}")]
    Unavailable(String),
    /// A retryable failure: the operation ran out of time.
    #[error("{0}")]
    DeadlineExceeded(String),
    #[error("{0}")]
    ResourceExhausted(String),
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
            AdkError::NotFound(_) => Code::NotFound,
            AdkError::AlreadyExists(_) => Code::AlreadyExists,
            AdkError::InvalidArgument(_) => Code::InvalidArgument,
            AdkError::Aborted(_) => Code::Aborted,
            AdkError::Unavailable(_) | AdkError::Io(_) => Code::Unavailable,
            AdkError::DeadlineExceeded(_) => Code::DeadlineExceeded,
            AdkError::ResourceExhausted(_) => Code::ResourceExhausted,
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

    /// True for failures worth retrying unchanged (the store was briefly unreachable).
    pub fn is_retryable(&self) -> bool {
        matches!(self.code(), Code::Unavailable | Code::DeadlineExceeded)
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        AdkError::InvalidArgument(message.into())
    }
}

/// The one mapping to a gRPC status. An INTERNAL error is the server's failure and its
/// text is a backend's (a Redis reply, a decode error of stored data): the detail is
/// logged under a short random id, and the client gets only that id to quote.
impl From<AdkError> for Status {
    fn from(err: AdkError) -> Self {
        let code = err.code();
        if code == Code::Internal {
            let id = error_id();
            tracing::error!(error_id = %id, error = %err, "internal error");
            return Status::new(code, format!("internal error (id {id}); see the server log"));
        }
        Status::new(code, err.to_string())
    }
}

/// 12 hex digits of a random UUID: unique enough to find one line in a server's log.
fn error_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(12);
    id
}

impl From<Status> for AdkError {
    fn from(status: Status) -> Self {
        let message = status.message().to_string();
        match status.code() {
            Code::NotFound => AdkError::NotFound(message),
            Code::AlreadyExists => AdkError::AlreadyExists(message),
            Code::InvalidArgument | Code::OutOfRange => AdkError::InvalidArgument(message),
            Code::Aborted => AdkError::Aborted(message),
            Code::Unavailable => AdkError::Unavailable(message),
            Code::DeadlineExceeded => AdkError::DeadlineExceeded(message),
            Code::ResourceExhausted => AdkError::ResourceExhausted(message),
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

    #[test]
    fn status_round_trip_keeps_code_and_message() {
        for err in [
            AdkError::NotFound("session s1 not found".into()),
            AdkError::Aborted("modified".into()),
            AdkError::Unavailable("redis down".into()),
            AdkError::InvalidArgument("bad app_name".into()),
        ] {
            let code = err.code();
            let text = err.to_string();
            let back = AdkError::from(Status::from(err));
            assert_eq!(back.code(), code);
            assert_eq!(back.to_string(), text);
        }
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
        let other = Status::from(AdkError::Model("x".into()));
        assert_ne!(other.message(), status.message(), "every error gets its own id");
    }

    #[test]
    fn store_outages_are_retryable_and_bad_input_is_not() {
        assert!(AdkError::Unavailable("x".into()).is_retryable());
        assert!(!AdkError::InvalidArgument("x".into()).is_retryable());
        assert_eq!(AdkError::Io(std::io::Error::other("reset")).code(), Code::Unavailable);
    }
}
