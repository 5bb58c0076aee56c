//! Flag groups every binary flattens into its own parser (`#[command(flatten)]`).
//! Each flag has an `ADK_*` environment fallback so containers are configured
//! without a command line.

use adk_grpc_core::artifact::{DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES};
use adk_grpc_store::durability::{DEFAULT_REPLICA_ACK_TIMEOUT, MAX_REPLICA_ACK_TIMEOUT};
use adk_grpc_store::{DEFAULT_MAX_ARTIFACT_BYTES, MinReplicas, ReplicaAcks, StoreConfig};
use clap::builder::RangedU64ValueParser;
use std::marker::PhantomData;
use std::time::Duration;

/// 4 MiB: the default receive limit of the common gRPC clients (grpc-go, grpc-java,
/// grpc-python, tonic), so a server that sends no more than this never fails in a
/// default client's decoder.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The store a binary opens when neither `--store-url` nor `ADK_STORE_URL` is given.
/// A type parameter (rather than a runtime value) keeps the default visible in `--help`.
pub trait DefaultStoreUrl: Clone + Send + Sync + 'static {
    const URL: &'static str;
}

/// For the per-service binaries, which share one Redis.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedisByDefault;

impl DefaultStoreUrl for RedisByDefault {
    const URL: &'static str = "redis://127.0.0.1:6379";
}

/// For the all-in-one binary: an embedded store, nothing to set up.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryByDefault;

impl DefaultStoreUrl for MemoryByDefault {
    const URL: &'static str = "memory://";
}

/// Where sessions and artifacts are stored.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs<D: DefaultStoreUrl> {
    /// Store: memory:// (this process only, lost on exit), redis://[user:password@]host:port[/db],
    /// rediss://… (TLS) or redis+cluster://host1:port1,host2:port2
    // Env values are hidden from --help: the URL may carry a password.
    #[arg(long, env = "ADK_STORE_URL", value_name = "URL", default_value = D::URL, hide_env_values = true)]
    pub store_url: String,

    /// Redis: replicas that must have a write before it is acknowledged: `auto` (every replica the
    /// primary has connected, up to 2, and at least 1 once a replica was seen; no wait on a Redis that
    /// never had replicas) or a number (0: never wait).
    /// Fewer in time: the write fails with UNAVAILABLE and is safe to retry
    #[arg(long, env = "ADK_REDIS_MIN_REPLICAS_ACK", value_name = "auto|N", default_value_t = MinReplicas::Auto)]
    pub redis_min_replicas_ack: MinReplicas,

    /// Redis: how long a write waits for its replicas' acknowledgements, in milliseconds
    #[arg(
        long,
        env = "ADK_REDIS_REPLICA_ACK_TIMEOUT_MS",
        value_name = "MS",
        default_value_t = DEFAULT_REPLICA_ACK_TIMEOUT.as_millis() as u64,
        value_parser = clap::value_parser!(u64).range(1..=MAX_REPLICA_ACK_TIMEOUT.as_millis() as u64)
    )]
    pub redis_replica_ack_timeout_ms: u64,

    #[arg(skip)]
    default_url: PhantomData<D>,
}

impl<D: DefaultStoreUrl> StoreArgs<D> {
    /// For building the flags in code (tests, embedding) rather than from a command line.
    pub fn new(store_url: impl Into<String>) -> Self {
        StoreArgs {
            store_url: store_url.into(),
            redis_min_replicas_ack: MinReplicas::Auto,
            redis_replica_ack_timeout_ms: DEFAULT_REPLICA_ACK_TIMEOUT.as_millis() as u64,
            default_url: PhantomData,
        }
    }

    /// The settings the `adk_grpc_store::open_*` functions take, at their defaults; the
    /// service flag groups ([`SessionArgs::apply`], [`ArtifactArgs::apply`]) set theirs.
    pub fn store_config(&self) -> StoreConfig {
        StoreConfig {
            replica_acks: ReplicaAcks {
                min_replicas: self.redis_min_replicas_ack,
                timeout: Duration::from_millis(self.redis_replica_ack_timeout_ms),
            },
            ..StoreConfig::default()
        }
    }

    /// The store URL with any password replaced, safe to log.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.store_url)
    }
}

/// Replaces the password of a `scheme://user:password@host…` URL with `***`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, hosts)) => {
            let user = user_info.split_once(':').map_or(user_info, |(user, _password)| user);
            let masked = if user_info.contains(':') {
                format!("{user}:***")
            } else {
                user.to_string()
            };
            format!("{scheme}://{masked}@{hosts}{path}")
        }
        None => url.to_string(),
    }
}

/// Session settings, for the binaries that serve `adk.v1.SessionService`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SessionArgs {
    /// Expire sessions created without their own TTL after this many seconds without an append,
    /// at most 3153600000 (100 years) [default: keep until deleted]
    #[arg(long, env = "ADK_SESSION_TTL", value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..=adk_grpc_core::validate::MAX_SESSION_TTL.as_secs()))]
    pub session_ttl: Option<u64>,
}

impl SessionArgs {
    /// `config` (from [`StoreArgs::store_config`]) with these session settings.
    pub fn apply(&self, config: StoreConfig) -> StoreConfig {
        StoreConfig {
            default_session_ttl: self.session_ttl.map(Duration::from_secs),
            ..config
        }
    }
}

/// Long-term memory settings, for the binaries that serve `adk.v1.MemoryService` or run agents.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MemoryArgs {
    /// YAML file mapping app names (or "*" for every other app) to an embedding model
    /// ({provider: openai|gemini, model, base_url, api_key_env, timeout_secs}): those apps' memories
    /// are also searched by meaning [default: keyword search only]
    #[arg(long, env = "ADK_MEMORY_EMBEDDINGS", value_name = "FILE")]
    pub memory_embeddings: Option<std::path::PathBuf>,
}

/// Memory generation settings, for the binaries that serve `adk.v1.MemoryService` (a group
/// of its own, so `adk-runner-server --help` lists no flag it would ignore).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MemoryGenerationArgs {
    /// YAML file mapping app names (or "*" for every other app) to how GenerateMemories extracts facts
    /// for them ({model: <provider config>, topics: [{label, description}], examples: [{conversation,
    /// facts}], ttl_secs}) [default: none; GenerateMemories is FAILED_PRECONDITION]
    #[arg(long, env = "ADK_MEMORY_GENERATION", value_name = "FILE")]
    pub memory_generation: Option<std::path::PathBuf>,
}

/// Artifact limits, for the binaries that serve `adk.v1.ArtifactService`. A group of
/// its own (rather than more [`StoreArgs`]) so `adk-session-server --help` lists no
/// flag it would ignore.
#[derive(Debug, Clone, clap::Args)]
pub struct ArtifactArgs {
    /// Largest artifact version stored, in bytes; a larger upload fails with RESOURCE_EXHAUSTED and leaves
    /// nothing behind
    #[arg(
        long,
        env = "ADK_MAX_ARTIFACT_BYTES",
        value_name = "BYTES",
        default_value_t = DEFAULT_MAX_ARTIFACT_BYTES,
        value_parser = clap::value_parser!(u64).range(1..),
    )]
    pub max_artifact_bytes: u64,

    /// Size of the pieces artifact bytes are stored in (one Redis key each) and streamed in
    #[arg(
        long,
        env = "ADK_ARTIFACT_CHUNK_BYTES",
        value_name = "BYTES",
        default_value_t = DEFAULT_CHUNK_BYTES,
        // The ceiling keeps a stored piece inside one default-sized gRPC message.
        value_parser = RangedU64ValueParser::<usize>::new().range(1024..=MAX_CHUNK_BYTES as u64),
    )]
    pub artifact_chunk_bytes: usize,
}

impl Default for ArtifactArgs {
    fn default() -> Self {
        ArtifactArgs {
            max_artifact_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
            artifact_chunk_bytes: DEFAULT_CHUNK_BYTES,
        }
    }
}

impl ArtifactArgs {
    /// `config` (from [`StoreArgs::store_config`]) with these artifact settings.
    pub fn apply(&self, config: StoreConfig) -> StoreConfig {
        StoreConfig {
            max_artifact_bytes: self.max_artifact_bytes,
            artifact_chunk_bytes: self.artifact_chunk_bytes,
            ..config
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Logging. The level comes from `RUST_LOG` (e.g. `debug`, `info,adk_grpc_store=trace`), default `info`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// Log line format (level: RUST_LOG, default info)
    #[arg(long, env = "ADK_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl Default for LogArgs {
    fn default() -> Self {
        LogArgs {
            log_format: LogFormat::Text,
        }
    }
}

/// What `--metrics-listen` turns the endpoint off with (besides an empty value).
const METRICS_OFF: &str = "off";

/// The Prometheus metrics endpoint.
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics at http://ADDR/metrics (host:port; port 0 picks one). `off` or an empty value
    /// turns the endpoint off
    #[arg(
        long,
        env = "ADK_METRICS_LISTEN",
        value_name = "ADDR",
        default_value = "0.0.0.0:9464"
    )]
    pub metrics_listen: String,
}

/// Off: a server built in code (tests, embedding) serves no metrics unless asked to.
impl Default for MetricsArgs {
    fn default() -> Self {
        MetricsArgs {
            metrics_listen: METRICS_OFF.to_string(),
        }
    }
}

impl MetricsArgs {
    /// Serve metrics on `addr` (`host:port`).
    pub fn on(addr: impl Into<String>) -> Self {
        MetricsArgs {
            metrics_listen: addr.into(),
        }
    }

    /// The address to serve metrics on; None when the endpoint is off.
    pub fn listen_addr(&self) -> Option<&str> {
        let addr = self.metrics_listen.trim();
        (!addr.is_empty() && !addr.eq_ignore_ascii_case(METRICS_OFF)).then_some(addr)
    }
}

/// gRPC transport limits and lifecycle timings.
#[derive(Debug, Clone, clap::Args)]
pub struct GrpcArgs {
    /// Largest gRPC message received or sent, in bytes. The 4 MiB default matches common gRPC clients;
    /// raise it only together with your clients' limits
    #[arg(
        long,
        env = "ADK_MAX_MESSAGE_BYTES",
        value_name = "BYTES",
        default_value_t = DEFAULT_MAX_MESSAGE_BYTES,
        value_parser = RangedU64ValueParser::<usize>::new().range(1024..),
    )]
    pub max_message_bytes: usize,

    /// On SIGTERM/SIGINT: stop accepting, end watch streams, let in-flight calls finish for at most this many
    /// seconds, then exit anyway
    #[arg(long, env = "ADK_SHUTDOWN_GRACE_SECS", value_name = "SECONDS", default_value_t = 25)]
    pub shutdown_grace_secs: u64,

    /// How often the store is pinged for grpc.health.v1 (NOT_SERVING while it does not answer within this
    /// interval)
    #[arg(
        long,
        env = "ADK_HEALTH_INTERVAL_MS",
        value_name = "MILLISECONDS",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u64).range(10..),
    )]
    pub health_interval_ms: u64,

    /// Transport limits (limits.rs).
    #[command(flatten)]
    pub limits: crate::limits::LimitArgs,

    /// TLS on the gRPC port (tls.rs).
    #[command(flatten)]
    pub tls: crate::tls::TlsArgs,

    /// Authentication and authorization (auth/).
    #[command(flatten)]
    pub auth: crate::auth::AuthArgs,

    /// gRPC-Web and CORS for browsers (web.rs).
    #[command(flatten)]
    pub web: crate::web::GrpcWebArgs,

    /// Message compression (compression.rs).
    #[command(flatten)]
    pub compression: crate::compression::CompressionArgs,
}

impl Default for GrpcArgs {
    fn default() -> Self {
        GrpcArgs {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            shutdown_grace_secs: 25,
            health_interval_ms: 1000,
            limits: crate::limits::LimitArgs::default(),
            tls: crate::tls::TlsArgs::default(),
            auth: crate::auth::AuthArgs::default(),
            web: crate::web::GrpcWebArgs::default(),
            compression: crate::compression::CompressionArgs::default(),
        }
    }
}

impl GrpcArgs {
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }

    pub fn health_interval(&self) -> Duration {
        Duration::from_millis(self.health_interval_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Parser)]
    struct Cli<D: DefaultStoreUrl> {
        #[command(flatten)]
        store: StoreArgs<D>,
        #[command(flatten)]
        sessions: SessionArgs,
        #[command(flatten)]
        artifacts: ArtifactArgs,
        #[command(flatten)]
        grpc: GrpcArgs,
        #[command(flatten)]
        log: LogArgs,
        #[command(flatten)]
        metrics: MetricsArgs,
    }

    #[test]
    fn metrics_are_served_by_default_and_can_be_turned_off() {
        let cli = Cli::<RedisByDefault>::try_parse_from(["bin"]).unwrap();
        assert_eq!(cli.metrics.listen_addr(), Some("0.0.0.0:9464"));
        for off in ["off", "OFF", "", " "] {
            let cli = Cli::<RedisByDefault>::try_parse_from(["bin", "--metrics-listen", off]).unwrap();
            assert_eq!(cli.metrics.listen_addr(), None, "{off:?}");
        }
        let cli = Cli::<RedisByDefault>::try_parse_from(["bin", "--metrics-listen", "127.0.0.1:9000"]).unwrap();
        assert_eq!(cli.metrics.listen_addr(), Some("127.0.0.1:9000"));
        assert_eq!(MetricsArgs::default().listen_addr(), None);
    }

    #[test]
    fn defaults_differ_per_binary_and_flags_parse() {
        Cli::<RedisByDefault>::command().debug_assert();
        let redis = Cli::<RedisByDefault>::try_parse_from(["bin"]).unwrap();
        assert_eq!(redis.store.store_url, "redis://127.0.0.1:6379");
        assert_eq!(
            redis.sessions.apply(redis.store.store_config()).default_session_ttl,
            None
        );
        assert_eq!(redis.grpc.max_message_bytes, DEFAULT_MAX_MESSAGE_BYTES);
        assert_eq!(redis.grpc.shutdown_grace(), Duration::from_secs(25));
        assert_eq!(redis.grpc.health_interval(), Duration::from_secs(1));
        assert_eq!(redis.log.log_format, LogFormat::Text);
        let config = redis.artifacts.apply(redis.store.store_config());
        assert_eq!(config.max_artifact_bytes, DEFAULT_MAX_ARTIFACT_BYTES);
        assert_eq!(config.artifact_chunk_bytes, DEFAULT_CHUNK_BYTES);

        let memory = Cli::<MemoryByDefault>::try_parse_from([
            "bin",
            "--session-ttl",
            "60",
            "--log-format",
            "json",
            "--max-message-bytes",
            "2048",
            "--max-artifact-bytes",
            "1048576",
            "--artifact-chunk-bytes",
            "65536",
        ])
        .unwrap();
        let config = memory
            .artifacts
            .apply(memory.sessions.apply(memory.store.store_config()));
        assert_eq!(config.max_artifact_bytes, 1_048_576);
        assert_eq!(config.artifact_chunk_bytes, 65_536);
        assert_eq!(config.default_session_ttl, Some(Duration::from_secs(60)));
        assert_eq!(memory.store.store_url, "memory://");
        assert_eq!(
            memory.sessions.apply(memory.store.store_config()).default_session_ttl,
            Some(Duration::from_secs(60))
        );
        assert_eq!(memory.log.log_format, LogFormat::Json);
        assert_eq!(memory.grpc.max_message_bytes, 2048);

        assert!(Cli::<MemoryByDefault>::try_parse_from(["bin", "--session-ttl", "0"]).is_err());
        let longest = adk_grpc_core::validate::MAX_SESSION_TTL.as_secs();
        assert_eq!(longest, 3_153_600_000, "the help text names this number");
        let cli = Cli::<MemoryByDefault>::try_parse_from(["bin", "--session-ttl", &longest.to_string()]).unwrap();
        assert_eq!(cli.sessions.session_ttl, Some(longest));
        let over = (longest + 1).to_string();
        assert!(Cli::<MemoryByDefault>::try_parse_from(["bin", "--session-ttl", &over]).is_err());
        assert!(Cli::<MemoryByDefault>::try_parse_from(["bin", "--max-artifact-bytes", "0"]).is_err());
        assert!(Cli::<MemoryByDefault>::try_parse_from(["bin", "--artifact-chunk-bytes", "4194304"]).is_err());
        assert!(Cli::<MemoryByDefault>::try_parse_from(["bin", "--max-message-bytes", "12"]).is_err());
    }

    #[test]
    fn passwords_never_reach_the_logs() {
        assert_eq!(redact_url("redis://:s3cret@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact_url("rediss://me:p@ss@h:6380"), "rediss://me:***@h:6380");
        assert_eq!(
            redact_url("redis+cluster://u:pw@a:1,b:2"),
            "redis+cluster://u:***@a:1,b:2"
        );
        assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
        assert_eq!(redact_url("memory://"), "memory://");
    }
}
