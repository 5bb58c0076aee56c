//! Transport limits of the server kit: concurrent streams per connection, the
//! client's deadline (`grpc-timeout`), and a clean status for messages that cannot
//! be decoded. Business limits (state value sizes, event size, ids) live in
//! adk-grpc-core's validation, so every backend and transport gets them.

use adk_grpc_core::AdkError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::{Code, Status};
use tower_layer::Layer;

/// Default of `--max-concurrent-streams`: calls one HTTP/2 connection may have open at once. A backend
/// calls through one channel (one connection) for all its users, so this matches the runs one
/// connection may have open.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 1024;

/// Default of `--max-streams-per-user`: WatchSession, UploadArtifact and DownloadArtifact calls one user may
/// have open at once.
pub const DEFAULT_MAX_STREAMS_PER_USER: u32 = 64;
/// Default of `--max-watches`: WatchSession calls the whole server may have open at once.
/// Watches share the process's Redis connections (one reader per process), so this bounds
/// the server's memory and fan-out work, not Redis connections.
pub const DEFAULT_MAX_WATCHES: u32 = 16384;
/// Default of `--max-runs-per-user`: AgentRunner/Run calls one user (the request's user_id: the end
/// user a backend names) may have open at once. Runs of one session wait for each other anyway;
/// this bounds one user's share of the replica.
pub const DEFAULT_MAX_RUNS_PER_USER: u32 = 64;
/// Default of `--max-runs-per-connection`: AgentRunner/Run calls one client connection may have open
/// at once. A backend serving many users shares one connection, so the default is the whole replica's.
pub const DEFAULT_MAX_RUNS_PER_CONNECTION: u32 = DEFAULT_MAX_RUNS;
/// Default of `--max-runs`: AgentRunner/Run calls this replica may have open at once, all users and
/// connections together. Derived from what a run costs (BENCHMARKS.md, "Concurrent runs per
/// replica"): about 100 KiB of its own against a slow model, plus, while a tool or model answers,
/// up to one reply under `--max-tool-reply-bytes` / `--max-model-reply-bytes`. 1024 runs take
/// ~100 MB over the idle server; the reply limits bound the rest.
pub const DEFAULT_MAX_RUNS: u32 = 1024;

/// Default of `--handshake-timeout-ms`: how long a new connection may take to send its
/// HTTP/2 preface (and, with TLS, to finish the TLS handshake first).
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// Default of `--keepalive-interval-ms`: a connection the client has sent nothing on for
/// this long gets an HTTP/2 PING.
pub const DEFAULT_KEEPALIVE_INTERVAL_MS: u64 = 30_000;
/// Default of `--keepalive-timeout-ms`: a PING not acknowledged within this closes the connection.
pub const DEFAULT_KEEPALIVE_TIMEOUT_MS: u64 = 20_000;

/// Transport limits (flattened into [`crate::GrpcArgs`]).
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// Most calls (HTTP/2 streams) one client connection may have open at once; the server advertises it and
    /// refuses streams beyond it
    #[arg(
        long,
        env = "ADK_MAX_CONCURRENT_STREAMS",
        value_name = "STREAMS",
        default_value_t = DEFAULT_MAX_CONCURRENT_STREAMS,
        value_parser = clap::value_parser!(u32).range(1..),
    )]
    pub max_concurrent_streams: u32,

    /// Most WatchSession, UploadArtifact and DownloadArtifact calls one user (the request's user_id) may have
    /// open at once; one more fails with RESOURCE_EXHAUSTED before anything is stored
    #[arg(
        long,
        env = "ADK_MAX_STREAMS_PER_USER",
        value_name = "STREAMS",
        default_value_t = DEFAULT_MAX_STREAMS_PER_USER,
        value_parser = clap::value_parser!(u32).range(1..),
    )]
    pub max_streams_per_user: u32,

    /// Most WatchSession calls this server may have open at once, all users together; one more fails with
    /// RESOURCE_EXHAUSTED. Watches open no Redis connection: one reader per process serves them all, so this
    /// bounds the server's memory and fan-out work
    #[arg(
        long,
        env = "ADK_MAX_WATCHES",
        value_name = "STREAMS",
        default_value_t = DEFAULT_MAX_WATCHES,
        value_parser = clap::value_parser!(u32).range(1..),
    )]
    pub max_watches: u32,

    /// Most Run calls one user (the request's user_id) may have open at once; one more fails with
    /// RESOURCE_EXHAUSTED before anything is stored
    #[arg(
        long,
        env = "ADK_MAX_RUNS_PER_USER",
        value_name = "RUNS",
        default_value_t = DEFAULT_MAX_RUNS_PER_USER,
        value_parser = clap::value_parser!(u32).range(1..),
    )]
    pub max_runs_per_user: u32,

    /// Most Run calls one client connection may have open at once; one more fails with RESOURCE_EXHAUSTED
    /// before anything is stored
    #[arg(
        long,
        env = "ADK_MAX_RUNS_PER_CONNECTION",
        value_name = "RUNS",
        default_value_t = DEFAULT_MAX_RUNS_PER_CONNECTION,
        value_parser = clap::value_parser!(u32).range(1..),
    )]
    pub max_runs_per_connection: u32,

    /// Most Run calls this server (replica) may have open at once, all users and connections together; one
    /// more fails with RESOURCE_EXHAUSTED and a RetryInfo before anything is stored (another replica, or this
    /// one a moment later, takes it)
    #[arg(
        long,
        env = "ADK_MAX_RUNS",
        value_name = "RUNS",
        default_value_t = DEFAULT_MAX_RUNS,
        value_parser = clap::value_parser!(u32).range(1..),
    )]
    pub max_runs: u32,

    /// A new connection that has not sent its HTTP/2 preface (with TLS: finished the TLS handshake and sent
    /// the preface) within this many milliseconds is closed
    #[arg(
        long,
        env = "ADK_HANDSHAKE_TIMEOUT_MS",
        value_name = "MILLISECONDS",
        default_value_t = DEFAULT_HANDSHAKE_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(10..),
    )]
    pub handshake_timeout_ms: u64,

    /// A connection the client has sent nothing on for this many milliseconds gets an HTTP/2 PING (idle
    /// clients included)
    #[arg(
        long,
        env = "ADK_KEEPALIVE_INTERVAL_MS",
        value_name = "MILLISECONDS",
        default_value_t = DEFAULT_KEEPALIVE_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(10..),
    )]
    pub keepalive_interval_ms: u64,

    /// A connection whose client does not acknowledge a PING within this many milliseconds is closed (a
    /// vanished or stuck client frees its connection and streams)
    #[arg(
        long,
        env = "ADK_KEEPALIVE_TIMEOUT_MS",
        value_name = "MILLISECONDS",
        default_value_t = DEFAULT_KEEPALIVE_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(10..),
    )]
    pub keepalive_timeout_ms: u64,
}

impl Default for LimitArgs {
    fn default() -> Self {
        LimitArgs {
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            max_streams_per_user: DEFAULT_MAX_STREAMS_PER_USER,
            max_watches: DEFAULT_MAX_WATCHES,
            max_runs_per_user: DEFAULT_MAX_RUNS_PER_USER,
            max_runs_per_connection: DEFAULT_MAX_RUNS_PER_CONNECTION,
            max_runs: DEFAULT_MAX_RUNS,
            handshake_timeout_ms: DEFAULT_HANDSHAKE_TIMEOUT_MS,
            keepalive_interval_ms: DEFAULT_KEEPALIVE_INTERVAL_MS,
            keepalive_timeout_ms: DEFAULT_KEEPALIVE_TIMEOUT_MS,
        }
    }
}

impl LimitArgs {
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    pub fn keepalive_interval(&self) -> Duration {
        Duration::from_millis(self.keepalive_interval_ms)
    }

    pub fn keepalive_timeout(&self) -> Duration {
        Duration::from_millis(self.keepalive_timeout_ms)
    }

    pub(crate) fn quotas(&self) -> crate::quota::Quotas {
        crate::quota::Quotas::new(crate::quota::QuotaLimits {
            streams_per_user: self.max_streams_per_user,
            watches: self.max_watches,
            runs_per_user: self.max_runs_per_user,
            runs_per_connection: self.max_runs_per_connection,
            runs: self.max_runs,
        })
    }
}

/// Ends a call whose client deadline (`grpc-timeout`) passes before its response
/// starts with `DEADLINE_EXCEEDED`, dropping the handler (and so its store calls);
/// turns tonic's `OUT_OF_RANGE` for a request over `--max-message-bytes` into
/// `RESOURCE_EXHAUSTED` naming the flag; and turns tonic's `INTERNAL` for an undecodable request message (garbage bytes,
/// JSON values nested past protobuf's recursion limit) into `INVALID_ARGUMENT`; and gives
/// every status tonic makes itself (an unknown method, a bad request) the `google.rpc`
/// details adk-grpc-core's error mapping gives the suite's own (ErrorInfo with a reason).
#[derive(Debug, Clone, Copy)]
pub struct LimitsLayer {
    /// `--max-message-bytes`, named with its value when a request is over it.
    pub max_message_bytes: usize,
}

impl<S> Layer<S> for LimitsLayer {
    type Service = LimitsService<S>;

    fn layer(&self, inner: S) -> LimitsService<S> {
        LimitsService {
            inner,
            max_message_bytes: self.max_message_bytes,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LimitsService<S> {
    inner: S,
    max_message_bytes: usize,
}

/// tonic's own timeout (outside the layers) answers CANCELLED, and a tonic client
/// gives up locally at its deadline with CANCELLED too; ending a moment earlier (5% of
/// the timeout, 2-50 ms) makes the client see the DEADLINE_EXCEEDED the gRPC spec asks for.
fn ahead_of_deadline(timeout: Duration) -> Duration {
    (timeout / 20).clamp(Duration::from_millis(2), Duration::from_millis(50))
}

impl<S> Service<http::Request<Body>> for LimitsService<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let path = request.uri().path().to_owned();
        let deadline = request
            .headers()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_grpc_timeout)
            .map(|t| tokio::time::Instant::now() + t.saturating_sub(ahead_of_deadline(t)));
        let response = self.inner.call(request);
        let max_message_bytes = self.max_message_bytes;
        Box::pin(async move {
            let response = match deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, response).await {
                    Ok(response) => response?,
                    Err(_) => {
                        return Ok(Status::from(AdkError::DeadlineExceeded(
                            "the call's deadline (grpc-timeout) passed before it completed; nothing more was done"
                                .into(),
                        ))
                        .into_http());
                    }
                },
                None => response.await?,
            };
            let mut response = decode_errors_are_invalid_arguments(response, &path, max_message_bytes);
            with_error_details(response.headers_mut());
            Ok(response)
        })
    }
}

/// tonic reports a request message it cannot decode as INTERNAL ("failed to decode
/// Protobuf message"); it is the client's input that is wrong.
fn decode_errors_are_invalid_arguments(
    mut response: http::Response<Body>,
    path: &str,
    max_message_bytes: usize,
) -> http::Response<Body> {
    let headers = response.headers_mut();
    let internal = headers.get("grpc-status").is_some_and(|s| s.as_bytes() == b"13");
    // Also a message flagged compressed in a call without grpc-encoding (compressed ones
    // arrive decompressed: compression.rs), as the auth layer says when it reads one first.
    let undecodable = headers.get("grpc-message").is_some_and(|m| {
        let m = m.as_bytes();
        m.starts_with(b"failed%20to%20decode")
            || m.starts_with(b"failed to decode")
            || m.windows(b"compressed-flag".len()).any(|w| w == b"compressed-flag")
    });
    if internal && undecodable {
        headers.insert("grpc-status", http::HeaderValue::from(Code::InvalidArgument as i32));
    }
    // tonic says OUT_OF_RANGE for a request over the receive limit (which a streaming
    // handler may pass on as INVALID_ARGUMENT); the gRPC spec says RESOURCE_EXHAUSTED,
    // and the client should learn which limit it hit.
    let out_of_range = headers
        .get("grpc-status")
        .is_some_and(|s| s.as_bytes() == b"11" || s.as_bytes() == b"3");
    let too_large = headers.get("grpc-message").is_some_and(|m| {
        m.to_str()
            .is_ok_and(|m| m.contains("message%20length%20too%20large") || m.contains("message length too large"))
    });
    if out_of_range && too_large {
        let status = request_too_large(path, None, max_message_bytes);
        // Only fails for a message a header cannot carry; ours are ASCII.
        let _ = status.add_header(headers);
    }
    response
}

/// A trailers-only error response without `grpc-status-details-bin` (one tonic made:
/// an unknown method, an undecodable request) gets the details of the error it maps
/// back to, so a client finds an ErrorInfo reason on every non-OK status.
fn with_error_details(headers: &mut http::HeaderMap) {
    if headers.contains_key("grpc-status-details-bin") {
        return;
    }
    let Some(status) = Status::from_header_map(headers) else {
        return;
    };
    if status.code() == Code::Ok {
        return;
    }
    let err = match AdkError::from(status) {
        // tonic's own INVALID_ARGUMENTs are about the request message as a whole.
        AdkError::InvalidArgument { field, message } if field.is_empty() => AdkError::invalid_with("request", message),
        err => err,
    };
    let _ = Status::from(err).add_header(headers);
}

/// RESOURCE_EXHAUSTED for a request message of `size` bytes (when known) over
/// `--max-message-bytes`, saying what to send instead for the method at `path`: a
/// CreateSession is not told about artifacts, a SaveArtifact is.
pub(crate) fn request_too_large(path: &str, size: Option<usize>, max_message_bytes: usize) -> Status {
    let method = method_of(path);
    let what = match size {
        Some(size) => format!("the {method} request message is {size} bytes,"),
        None => format!("the {method} request message is"),
    };
    let what = format!("{what} larger than the server's message limit (--max-message-bytes, ADK_MAX_MESSAGE_BYTES)");
    too_large(what, path, max_message_bytes)
}

/// RESOURCE_EXHAUSTED for a compressed request message that decompresses to more than
/// `--max-message-bytes` (found out before more than that is decompressed: compression.rs).
pub(crate) fn request_decompresses_too_large(path: &str, encoding: &str, max_message_bytes: usize) -> Status {
    let what = format!(
        "the {} request message ({encoding}) decompresses to more than the server's message limit of \
         {max_message_bytes} bytes (--max-message-bytes, ADK_MAX_MESSAGE_BYTES)",
        method_of(path)
    );
    too_large(what, path, max_message_bytes)
}

fn method_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

/// `what` (which limit the message is over), then what to send instead for the method at `path`.
fn too_large(what: String, path: &str, max_message_bytes: usize) -> Status {
    let instead = match method_of(path) {
        "CreateSession" => "; create the session with less state and add the rest with AppendEvent",
        "AppendEvent" => "; append a smaller event (state_delta and content)",
        "Run" => "; send a smaller new_message and state_delta",
        "SaveArtifact" => "; stream large artifacts with UploadArtifact",
        "UploadArtifact" => "; send the bytes in smaller chunks",
        _ => "",
    };
    Status::from(AdkError::limit(
        "max_message_bytes",
        max_message_bytes,
        format!("{what}{instead}"),
    ))
}

/// A `grpc-timeout` header value: up to 8 digits and a unit (H, M, S, m, u, n).
fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_concurrent_streams_has_a_default_and_a_flag() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            limits: LimitArgs,
        }
        assert_eq!(
            Cli::parse_from(["bin"]).limits.max_concurrent_streams,
            DEFAULT_MAX_CONCURRENT_STREAMS
        );
        let cli = Cli::parse_from(["bin", "--max-concurrent-streams", "7"]);
        assert_eq!(cli.limits.max_concurrent_streams, 7);
        assert!(Cli::try_parse_from(["bin", "--max-concurrent-streams", "0"]).is_err());
        let defaults = Cli::parse_from(["bin"]).limits;
        assert_eq!(defaults.max_watches, DEFAULT_MAX_WATCHES);
        assert_eq!(defaults.handshake_timeout(), Duration::from_secs(10));
        assert_eq!(defaults.keepalive_interval(), Duration::from_secs(30));
        assert_eq!(defaults.keepalive_timeout(), Duration::from_secs(20));
        let cli = Cli::parse_from([
            "bin",
            "--max-watches",
            "5",
            "--handshake-timeout-ms",
            "500",
            "--keepalive-interval-ms",
            "1000",
            "--keepalive-timeout-ms",
            "2000",
        ]);
        assert_eq!(cli.limits.max_watches, 5);
        assert_eq!(cli.limits.handshake_timeout(), Duration::from_millis(500));
        assert_eq!(cli.limits.keepalive_interval(), Duration::from_secs(1));
        assert_eq!(cli.limits.keepalive_timeout(), Duration::from_secs(2));
        assert!(Cli::try_parse_from(["bin", "--max-watches", "0"]).is_err());
    }

    #[test]
    fn an_oversized_request_is_told_what_to_send_instead_for_its_method() {
        let create = request_too_large("/adk.v1.SessionService/CreateSession", None, 4);
        assert_eq!(create.code(), Code::ResourceExhausted);
        assert!(
            create.message().contains("CreateSession request"),
            "{}",
            create.message()
        );
        assert!(create.message().contains("--max-message-bytes"), "{}", create.message());
        assert!(!create.message().contains("artifact"), "{}", create.message());
        let save = request_too_large("/adk.v1.ArtifactService/SaveArtifact", Some(5), 4);
        assert!(save.message().contains("is 5 bytes"), "{}", save.message());
        assert!(save.message().contains("UploadArtifact"), "{}", save.message());
        let run = request_too_large("/adk.v1.AgentRunner/Run", None, 4);
        assert!(run.message().contains("state_delta") && !run.message().contains("artifact"));
    }

    #[test]
    fn deadlines_end_a_little_early() {
        assert_eq!(ahead_of_deadline(Duration::from_millis(10)), Duration::from_millis(2));
        assert_eq!(ahead_of_deadline(Duration::from_millis(300)), Duration::from_millis(15));
        assert_eq!(ahead_of_deadline(Duration::from_secs(30)), Duration::from_millis(50));
    }

    #[test]
    fn grpc_timeouts_parse() {
        assert_eq!(parse_grpc_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "m", "10", "10x", "123456789S", "-1S", "1.5S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }
}
