//! Connections to standalone Redis and Redis Cluster behind one type, the store
//! URL parser, and the one mapping from Redis failures to `AdkError`. Every
//! Redis-backed service (sessions, artifacts) talks to Redis through [`RedisStore`].

use super::cluster::{ClusterConn, ClusterLink, ClusterUrl};
use super::durability::{Durability, ReplicaAcks};
use adk_grpc_core::{AdkError, Result};
use adk_grpc_telemetry::RedisOp;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::io::tcp::TcpSettings;
use redis::{
    Arg, Client, Cmd, ErrorKind, FromRedisValue, IntoConnectionInfo, Pipeline, RedisError, RedisFuture,
    ScriptInvocation, ServerErrorKind, Value,
};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// How long opening a TCP (or TLS) connection to one node may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an ordinary command may wait for its reply.
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection the business code is written against once, whatever the deployment.
#[derive(Clone)]
pub(crate) enum Conn {
    /// Standalone Redis, shared by every request; reconnects by itself after a restart.
    Managed(ConnectionManager),
    /// Redis Cluster; follows slot moves and reconnects to nodes by itself, and is
    /// replaced when the cluster changes under it (see `cluster.rs`).
    Cluster(ClusterConn),
}

impl Conn {
    /// On a cluster, keys with different hash tags live on different nodes, so no
    /// script or pipeline may span the app tag and a user tag.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Which connection of its store this is: on a cluster, one more each time the
    /// cluster changed under the last one (what was learned through it may be stale).
    pub(crate) fn generation(&self) -> u64 {
        match self {
            Conn::Managed(_) => 0,
            Conn::Cluster(conn) => conn.generation(),
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Managed(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Managed(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Managed(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// One Redis deployment as a service uses it: the shared connection, and calls whose
/// failures all go through [`store_error`]. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub(crate) struct RedisStore {
    link: Link,
    /// When a write counts as acknowledged; see `durability.rs`.
    durability: Arc<Durability>,
}

/// Where [`RedisStore::conn`] takes each request's connection from.
#[derive(Clone)]
enum Link {
    Managed(ConnectionManager),
    Cluster(Arc<ClusterLink>),
}

impl RedisStore {
    /// Connects to `url` (see [`open`]); writes are acknowledged as `acks` says.
    pub(crate) async fn connect(url: &str, acks: ReplicaAcks) -> Result<RedisStore> {
        let link = open(url).await?;
        let durability = Arc::new(Durability::new(acks));
        Ok(RedisStore { link, durability })
    }

    pub(crate) fn durability(&self) -> &Durability {
        &self.durability
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(_))
    }

    /// A handle on the shared connection, for pipelines and calls the helpers below do
    /// not cover. On a cluster it is the connection of the moment: take one per request.
    pub(crate) fn conn(&self) -> Conn {
        match &self.link {
            Link::Managed(manager) => Conn::Managed(manager.clone()),
            Link::Cluster(link) => Conn::Cluster(link.current()),
        }
    }

    // Every round trip of the services goes through `query`, `eval` or `pipeline`,
    // so this is where each gets its span and its latency/error metrics (see
    // `observe`). Spans and metrics name the operation only, never keys or values.

    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        let op = RedisOp::command(&command_name(cmd));
        let value = observe(op, cmd.query_async(&mut self.conn())).await?;
        decode_reply(value)
    }

    /// Runs a Lua script; `script` names it in spans and metrics (`script:<name>`).
    pub(crate) async fn eval<T: FromRedisValue>(&self, script: &str, invocation: &ScriptInvocation<'_>) -> Result<T> {
        let op = RedisOp::script(script);
        let value = observe(op, invocation.invoke_async(&mut self.conn())).await?;
        decode_reply(value)
    }

    /// Runs a pipeline; on a cluster all of its keys must share one hash tag.
    pub(crate) async fn pipeline<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T> {
        let names: Vec<String> = pipe.cmd_iter().map(command_name).collect();
        let op = RedisOp::pipeline(names.iter().map(String::as_str));
        let value = observe(op, pipe.query_async(&mut self.conn())).await?;
        decode_reply(value)
    }

    /// Ok while Redis answers; any failure is `Unavailable` (a health check asks "can I serve?").
    /// Not observed like the calls above: a health probe every second would start a
    /// trace of its own each time and drown the real ones.
    pub(crate) async fn ping(&self) -> Result<()> {
        let reply = redis::cmd("PING")
            .query_async::<Value>(&mut self.conn())
            .await
            .map_err(store_error);
        reply.map(drop).map_err(|e| match e {
            AdkError::Unavailable(message) => AdkError::Unavailable(message),
            other => {
                tracing::warn!(error = %other, "redis health check failed");
                AdkError::Unavailable(REDIS_UNAVAILABLE.to_string())
            }
        })
    }
}

/// Runs one round trip inside `op`'s span and records its outcome.
async fn observe(op: RedisOp, request: impl Future<Output = redis::RedisResult<Value>>) -> Result<Value> {
    let reply = request.instrument(op.span().clone()).await.map_err(store_error);
    op.finish(reply.as_ref().err().map(AdkError::code));
    reply
}

/// A command's name (its first argument), for spans and metric labels.
fn command_name(cmd: &Cmd) -> String {
    match cmd.args_iter().next() {
        Some(Arg::Simple(name)) => String::from_utf8_lossy(name).into_owned(),
        _ => "UNKNOWN".to_string(),
    }
}

/// Decodes a reply into the type a caller expects; a mismatch is our bug or a foreign value, so `Internal`.
pub(crate) fn decode_reply<T: FromRedisValue>(value: Value) -> Result<T> {
    redis::from_redis_value(value).map_err(|e| AdkError::Internal(format!("unexpected reply from redis: {e}")))
}

/// Opens the shared connection for `url` (`redis://`, `rediss://`, `redis+cluster://`
/// or `rediss+cluster://`). A malformed URL is a `Config` error; an unreachable server is `Unavailable`.
async fn open(url: &str) -> Result<Link> {
    if url.starts_with("rediss") {
        install_tls_crypto_provider();
    }
    if let Some(cluster_url) = ClusterUrl::parse(url) {
        let invalid = |why: String| AdkError::Config(format!("invalid redis cluster URL {}: {why}", redacted(url)));
        let cluster_url = cluster_url.map_err(|why| invalid(why.to_string()))?;
        cluster_url.validate().map_err(|e| invalid(e.to_string()))?;
        let link = ClusterLink::connect(cluster_url).await.map_err(startup_error)?;
        return Ok(Link::Cluster(link));
    }
    let client = client(url)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        // While Redis is down a call fails within about a second instead of
        // queueing behind a long backoff; the next call starts a new attempt.
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500));
    let manager = ConnectionManager::new_with_config(client, config)
        .await
        .map_err(startup_error)?;
    Ok(Link::Managed(manager))
}

/// The first pause before redis-rs retries a cluster request that a node refused for the
/// moment (`CLUSTERDOWN` while a failover is under way, `TRYAGAIN`, `LOADING`) or that
/// found no connection to its node; later pauses grow from it. Its default, 1.28 s, let a
/// request refused just before a promotion wait out most of its 2 s and often time out,
/// so watchers and writes on healthy masters too stalled for a second or two after each
/// failover; 100 ms brings them back soon after the promotion.
const CLUSTER_RETRY_MIN_WAIT: Duration = Duration::from_millis(100);

/// A client for a Redis Cluster through `node_urls`: every cluster connection of the
/// stores is built here (`cluster.rs` builds new ones as the cluster changes).
pub(super) fn cluster_client(node_urls: Vec<String>) -> redis::RedisResult<ClusterClient> {
    ClusterClientBuilder::new(node_urls)
        .tcp_settings(tcp_settings())
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .min_retry_wait(CLUSTER_RETRY_MIN_WAIT.as_millis() as u64)
        .build()
}

/// A client for one Redis URL (not a cluster one) whose connections have [`tcp_settings`].
/// A malformed URL is a `Config` error.
pub(crate) fn client(url: &str) -> Result<Client> {
    let info = url
        .into_connection_info()
        .map_err(|e| AdkError::Config(format!("invalid redis URL {}: {e}", redacted(url))))?
        .set_tcp_settings(tcp_settings());
    Client::open(info).map_err(|e| AdkError::Config(format!("invalid redis URL {}: {e}", redacted(url))))
}

/// `TCP_NODELAY` on every connection to Redis. Requests from concurrent calls share one
/// connection, so a request is often written while an earlier one is unanswered; Nagle's
/// algorithm would hold it back until that earlier write is acknowledged.
pub(crate) fn tcp_settings() -> TcpSettings {
    TcpSettings::default().set_nodelay(true)
}

/// Makes `ring` rustls's process-wide crypto provider unless one is installed
/// already. rustls would also pick it from its crate features, but only while
/// `ring` is the sole provider feature in the build: if another crate ever turns
/// on `aws-lc-rs` too, that automatic choice panics at the first TLS handshake.
fn install_tls_crypto_provider() {
    // Err means a provider is installed already (ours or the application's); keep it.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `redis+cluster://[user:pass@]h1:p1,h2:p2[/db][?query][#insecure]` -> `redis://[user:pass@]h1:p1[/db][?query]`, ...
/// (`rediss+cluster://` gives `rediss://` node URLs for TLS; `#insecure` skips their
/// certificate verification). None for a non-cluster URL.
pub(super) fn cluster_node_urls(url: &str) -> Result<Option<Vec<String>>> {
    let Some(cluster_url) = ClusterUrl::parse(url) else {
        return Ok(None);
    };
    let cluster_url =
        cluster_url.map_err(|why| AdkError::Config(format!("invalid redis cluster URL {}: {why}", redacted(url))))?;
    Ok(Some(
        cluster_url
            .hosts
            .iter()
            .map(|host| cluster_url.node_url(host))
            .collect(),
    ))
}

/// The URL without its password, for error messages.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => format!("{}://***@{}", &url[..scheme_end], &url[at + 1..]),
        _ => url.to_string(),
    }
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
fn startup_error(e: RedisError) -> AdkError {
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
    fn cluster_urls_become_node_urls() {
        assert_eq!(cluster_node_urls("redis://localhost:6379").unwrap(), None);
        assert_eq!(
            cluster_node_urls("redis+cluster://h1:1,h2:2").unwrap().unwrap(),
            ["redis://h1:1", "redis://h2:2"]
        );
        assert_eq!(
            cluster_node_urls("rediss+cluster://u:p@h1:1,h2:2/0?protocol=resp3")
                .unwrap()
                .unwrap(),
            [
                "rediss://u:p@h1:1/0?protocol=resp3",
                "rediss://u:p@h2:2/0?protocol=resp3"
            ]
        );
        assert_eq!(
            cluster_node_urls("rediss+cluster://h1:1,h2:2#insecure")
                .unwrap()
                .unwrap(),
            ["rediss://h1:1#insecure", "rediss://h2:2#insecure"]
        );
        for bad in [
            "redis+cluster://",
            "redis+cluster://h1:1,,h2:2",
            "redis+cluster://h1:1,",
        ] {
            let err = cluster_node_urls(bad).unwrap_err();
            assert!(matches!(err, AdkError::Config(_)), "{bad}: {err}");
        }
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            redacted("redis+cluster://u:secret@h1:1,h2:2"),
            "redis+cluster://***@h1:1,h2:2"
        );
        assert_eq!(redacted("redis://h:1"), "redis://h:1");
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
