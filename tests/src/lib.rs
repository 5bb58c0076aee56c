//! Helpers shared by the end-to-end tests and the bench binary: starting the
//! real binaries against a real Redis and connecting real gRPC clients.

pub mod cases;
pub mod raw;
pub mod runs;
pub mod script_server;

use adk_grpc_client::{RemoteArtifactService, RemoteSessionService};
use adk_grpc_core::ByteStream;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use futures::StreamExt;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// A real `adk-session-server` process in front of a real `redis-server`.
pub struct SessionStack {
    pub redis: RedisServer,
    pub server: ServiceProcess,
}

impl SessionStack {
    pub async fn start(extra_args: &[&str]) -> SessionStack {
        let redis = RedisServer::start().await;
        let server = spawn_session_server(&redis.url(), extra_args).await;
        SessionStack { redis, server }
    }

    pub async fn client(&self) -> RemoteSessionService {
        connect(&self.server).await
    }
}

pub async fn spawn_session_server(store_url: &str, extra_args: &[&str]) -> ServiceProcess {
    let mut args = vec!["--store-url".to_string(), store_url.to_string()];
    args.extend(extra_args.iter().map(|a| a.to_string()));
    ServiceProcess::spawn("adk-session-server", &args, &[]).await
}

pub async fn connect(server: &ServiceProcess) -> RemoteSessionService {
    RemoteSessionService::connect(server.endpoint())
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", server.endpoint(), server.tail_log(30)))
}

/// A real `adk-artifact-server` process in front of a real `redis-server`.
pub struct ArtifactStack {
    pub redis: RedisServer,
    pub server: ServiceProcess,
}

impl ArtifactStack {
    pub async fn start(extra_args: &[&str]) -> ArtifactStack {
        let redis = RedisServer::start().await;
        let server = spawn_artifact_server(&redis.url(), extra_args).await;
        ArtifactStack { redis, server }
    }

    pub async fn client(&self) -> RemoteArtifactService {
        connect_artifacts(&self.server).await
    }
}

pub async fn spawn_artifact_server(store_url: &str, extra_args: &[&str]) -> ServiceProcess {
    let mut args = vec!["--store-url".to_string(), store_url.to_string()];
    args.extend(extra_args.iter().map(|a| a.to_string()));
    ServiceProcess::spawn("adk-artifact-server", &args, &[]).await
}

pub async fn connect_artifacts(server: &ServiceProcess) -> RemoteArtifactService {
    RemoteArtifactService::connect(server.endpoint())
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", server.endpoint(), server.tail_log(30)))
}

/// A server in the test's own process on an ephemeral port, for tests that are about
/// what the server answers rather than about the process (its signals, exit codes,
/// flags, logs): nothing to build or spawn, so it can never be a stale binary. It stops
/// (health NOT_SERVING, streams end, listener closed) when dropped.
pub struct InProcessServer {
    addr: SocketAddr,
    shutdown: adk_grpc_server_kit::Shutdown,
    serving: JoinHandle<Result<(), adk_grpc_server_kit::ServeError>>,
}

impl InProcessServer {
    /// `adk-server` with `args`, parsed and assembled exactly as the binary does
    /// (`adk_grpc_all_in_one::server`); the listen address is an ephemeral port and the metrics
    /// endpoint is off, as for every spawned test server.
    pub async fn all_in_one(args: &[&str]) -> InProcessServer {
        use clap::Parser;
        let flags = ["adk-server", "--listen", "127.0.0.1:0", "--metrics-listen", "off"];
        let cli = adk_grpc_all_in_one::Cli::try_parse_from(flags.iter().chain(args))
            .unwrap_or_else(|e| panic!("adk-server {args:?}: {e}"));
        let shutdown = adk_grpc_server_kit::Shutdown::new();
        let server = adk_grpc_all_in_one::server(&cli, shutdown.clone())
            .await
            .unwrap_or_else(|e| panic!("adk-server {args:?}: {e:#}"));
        InProcessServer::serve(server, shutdown).await
    }

    /// Binds `server` (built with `shutdown`) to an ephemeral port and serves it in the background.
    pub async fn serve(
        server: adk_grpc_server_kit::GrpcServer,
        shutdown: adk_grpc_server_kit::Shutdown,
    ) -> InProcessServer {
        let bound = server.bind("127.0.0.1:0").await.expect("bind an ephemeral port");
        let addr = bound.local_addr();
        let serving = tokio::spawn(bound.serve());
        InProcessServer {
            addr,
            shutdown,
            serving,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Whether the serve loop still runs (a handler's panic must not end it).
    pub fn is_running(&self) -> bool {
        !self.serving.is_finished()
    }

    /// A connected channel (the port is bound before [`InProcessServer::serve`] returns,
    /// so the first connect succeeds).
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.endpoint())
            .unwrap()
            .connect()
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.endpoint()))
    }
}

impl Drop for InProcessServer {
    fn drop(&mut self) {
        self.shutdown.trigger();
        self.serving.abort();
    }
}

/// Deterministic bytes that do not compress (xorshift64*), generated as they are
/// read, so a test or the bench can move a large artifact without holding it.
pub struct Noise {
    state: u64,
}

impl Noise {
    pub fn new(seed: u64) -> Noise {
        // xorshift never leaves 0, so the seed is offset away from it.
        Noise {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    /// The next `len` bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            self.state ^= self.state >> 12;
            self.state ^= self.state << 25;
            self.state ^= self.state >> 27;
            out.extend_from_slice(&self.state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

/// `total` bytes of [`Noise`] from `seed`, in pieces of `chunk_bytes`, produced as the
/// stream is read.
pub fn noise_stream(total: u64, chunk_bytes: usize, seed: u64) -> ByteStream {
    let mut noise = Noise::new(seed);
    let step = chunk_bytes.max(1) as u64;
    futures::stream::iter((0..total).step_by(step as usize))
        .map(move |start| Ok(noise.bytes(step.min(total - start) as usize)))
        .boxed()
}

/// SHA-256 (hex) of what [`noise_stream`] produces for the same arguments.
pub fn noise_sha256(total: u64, chunk_bytes: usize, seed: u64) -> String {
    let mut noise = Noise::new(seed);
    let step = chunk_bytes.max(1) as u64;
    let mut hasher = Sha256::new();
    for start in (0..total).step_by(step as usize) {
        hasher.update(noise.bytes(step.min(total - start) as usize));
    }
    hex(&hasher.finalize())
}

/// Reads a stream of chunks to its end: (bytes read, SHA-256 hex), holding one chunk at a time.
pub async fn sha256_of(mut chunks: ByteStream) -> adk_grpc_core::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        len += chunk.len() as u64;
        hasher.update(&chunk);
    }
    Ok((len, hex(&hasher.finalize())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The events of a Run stream after the first, which must be the user's message as
/// stored (author `user`, a sequence, the invocation's id): Run sends it before
/// anything else. Empty input (the run failed before starting) stays empty.
#[track_caller]
pub fn after_user_event(mut events: Vec<adk_grpc_proto::v1::Event>) -> Vec<adk_grpc_proto::v1::Event> {
    if events.is_empty() {
        return events;
    }
    let user = events.remove(0);
    assert!(
        user.author == "user" && user.sequence > 0 && user.invocation_id.starts_with("e-"),
        "a Run stream starts with the stored user event: {user:?}"
    );
    assert!(
        events.iter().all(|event| event.invocation_id == user.invocation_id),
        "every event of the run belongs to the user event's invocation"
    );
    events
}

/// The Python of the venv scripts/setup-python.sh makes ($ADK_PYTHON overrides).
pub use adk_grpc_testkit::venv_python;
