//! The one mapping from Redis failures (and unexpected replies) to `AdkError`.

use adk_grpc_core::{AdkError, Result};
use redis::{ErrorKind, FromRedisValue, RedisError, ServerErrorKind, Value};

/// Decodes a reply into the type a caller expects; a mismatch is our bug or a foreign value, so `Internal`.
pub(crate) fn decode_reply<T: FromRedisValue>(value: Value) -> Result<T> {
    redis::from_redis_value(value).map_err(|e| AdkError::Internal(format!("unexpected reply from redis: {e}")))
}

/// The one mapping from Redis failures to the suite's error: anything that says
/// "Redis is not reachable or not ready right now" is retryable `Unavailable`
/// (connection refused or dropped, I/O errors and timeouts, cluster down or
/// resharding, LOADING, MASTERDOWN, BUSY, READONLY during failover); everything
/// else is `Internal`. A Redis failure is never the client's fault, so never
/// `InvalidArgument`.
pub(crate) fn store_error(e: RedisError) -> AdkError {
    let transient_kind = matches!(
        e.kind(),
        ErrorKind::Io
            | ErrorKind::ClusterConnectionNotFound
            | ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::ReadOnly
                    // Every call loads a script the node does not know and retries once;
                    // a second NOSCRIPT means the node changed in between (a failover, a
                    // restart), and the client's retry loads it on the new one.
                    | ServerErrorKind::NoScript
            )
    );
    // A pipeline's error carries one server error per failed command: a `WAIT` unblocked
    // by a failover (`UNBLOCKED`) fails the pipeline although the write before it ran.
    let pipeline_codes = e.clone().into_server_errors().unwrap_or_default();
    let transient_code = e
        .code()
        .into_iter()
        .chain(pipeline_codes.iter().map(|(_, error)| error.code()))
        .any(is_transient_code);
    if transient_kind
        || transient_code
        || e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_cluster_error()
    {
        // Redis's own text (addresses, node ids) is for the operator, not the client.
        tracing::warn!(error = %e, "redis unavailable");
        AdkError::Unavailable(REDIS_UNAVAILABLE.to_string())
    } else if e.code() == Some("OOM") {
        tracing::warn!(error = %e, "redis is out of memory");
        AdkError::ResourceExhausted(
            adk_grpc_core::Exhausted::StoreFull,
            "the store (redis) is out of memory".to_string(),
        )
    } else {
        // Mapped to a status, the detail is logged with an id and only the id is sent (adk-grpc-core's error.rs).
        AdkError::Internal(format!("redis error: {e}"))
    }
}

/// A failure to open the store, at startup: it reaches the operator (the server's exit
/// message), never a client, so it keeps Redis's own words (a refused certificate, a wrong
/// password), with the code a call would get.
pub(super) fn startup_error(e: RedisError) -> AdkError {
    let detail = e.to_string();
    match store_error(e) {
        AdkError::Unavailable(_) => AdkError::Unavailable(format!("cannot connect to redis: {detail}")),
        other => other,
    }
}

/// Server error codes that mean "this node cannot serve the write right now" (loading,
/// failing over, demoted mid-command): retry, the write is idempotent.
fn is_transient_code(code: &str) -> bool {
    matches!(
        code,
        "BUSY" | "LOADING" | "MASTERDOWN" | "TRYAGAIN" | "CLUSTERDOWN" | "READONLY" | "NOREPLICAS" | "UNBLOCKED"
    )
}

/// What a client is told while Redis cannot be reached; the cause is in the server log.
pub(crate) const REDIS_UNAVAILABLE: &str = "redis unavailable; try again later";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_unblocked_by_a_failover_is_retryable() {
        let unblocked = redis::make_extension_error(
            "UNBLOCKED".into(),
            Some("force unblock from blocking operation, instance state changed".into()),
        );
        assert!(matches!(store_error(unblocked), AdkError::Unavailable(_)));
        let wrong_type = redis::make_extension_error("WRONGTYPE".into(), None);
        assert!(matches!(store_error(wrong_type), AdkError::Internal(_)));
        let no_script = redis::RedisError::from((
            ErrorKind::Server(ServerErrorKind::NoScript),
            "No matching script. Please use EVAL.",
        ));
        assert!(matches!(store_error(no_script), AdkError::Unavailable(_)));
    }

    #[test]
    fn outages_are_unavailable_and_the_rest_internal() {
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(matches!(store_error(refused), AdkError::Unavailable(_)));
        let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert!(matches!(store_error(timeout), AdkError::Unavailable(_)));
        let loading = redis::make_extension_error("LOADING".into(), Some("loading the dataset".into()));
        assert!(store_error(loading).is_retryable());
        let busy = redis::make_extension_error("BUSY".into(), None);
        assert!(store_error(busy).is_retryable());
        let other = RedisError::from((ErrorKind::UnexpectedReturnType, "bad reply"));
        assert!(matches!(store_error(other), AdkError::Internal(_)));
    }
}
