//! Concurrency quotas of the long-lived calls: streams (WatchSession, UploadArtifact,
//! DownloadArtifact) per user, WatchSession streams per server (they share one reader per
//! process, so this bounds memory and fan-out work, not Redis connections), runs
//! (AgentRunner/Run) per user, per connection and per server.
//! Checked by the auth layer (auth/layer.rs) with the user it decodes from the first
//! request message, before the handler runs, so a refused call stores nothing; a
//! slot is held by a guard in the response body and freed when the response ends,
//! fails or the client goes away.

use adk_grpc_core::AdkError;
use adk_grpc_core::sync;
use adk_grpc_proto::v1::{
    agent_runner_server::SERVICE_NAME as RUNNER, artifact_service_server::SERVICE_NAME as ARTIFACTS,
    session_service_server::SERVICE_NAME as SESSIONS,
};
use std::collections::HashMap;
use std::hash::Hash;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{Bytes, http};
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

/// What a quota'd method counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Stream,
    /// A stream that also counts against the server-wide watch limit.
    Watch,
    Run,
}

/// The quota kind of the method at `path`; None for a method without one.
pub(crate) fn kind(path: &str) -> Option<Kind> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    match (service, method) {
        (s, "WatchSession") if s == SESSIONS => Some(Kind::Watch),
        (s, "UploadArtifact" | "DownloadArtifact") if s == ARTIFACTS => Some(Kind::Stream),
        (s, "Run") if s == RUNNER => Some(Kind::Run),
        _ => None,
    }
}

/// The limits, from [`crate::LimitArgs`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuotaLimits {
    pub(crate) streams_per_user: u32,
    pub(crate) watches: u32,
    pub(crate) runs_per_user: u32,
    pub(crate) runs_per_connection: u32,
    /// Runs of the whole server.
    pub(crate) runs: u32,
}

/// Open calls per key.
struct Counter<K> {
    open: Mutex<HashMap<K, u32>>,
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> Counter<K> {
    fn new() -> Arc<Counter<K>> {
        Arc::new(Counter {
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for `key` when fewer than `limit` are held.
    fn acquire(self: &Arc<Self>, key: K, limit: u32) -> Option<Slot> {
        let mut open = sync::lock(&self.open);
        let count = open.entry(key.clone()).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        let counter = self.clone();
        Some(Slot(Box::new(move || counter.release(&key))))
    }

    fn release(&self, key: &K) {
        let mut open = sync::lock(&self.open);
        if let Some(count) = open.get_mut(key) {
            *count -= 1;
            if *count == 0 {
                open.remove(key);
            }
        }
    }
}

/// One held slot; dropping it frees it.
struct Slot(Box<dyn FnOnce() + Send + Sync>);

impl Drop for Slot {
    fn drop(&mut self) {
        let release = std::mem::replace(&mut self.0, Box::new(|| {}));
        release();
    }
}

/// The slots one call holds.
pub(crate) struct Held {
    _slots: Vec<Slot>,
}

/// The counters of one server.
pub(crate) struct Quotas {
    limits: QuotaLimits,
    streams: Arc<Counter<String>>,
    /// Open watches of the whole server (one key).
    watches: Arc<Counter<()>>,
    runs: Arc<Counter<String>>,
    connection_runs: Arc<Counter<SocketAddr>>,
    /// Open runs of the whole server (one key).
    server_runs: Arc<Counter<()>>,
}

impl Quotas {
    pub(crate) fn new(limits: QuotaLimits) -> Quotas {
        Quotas {
            limits,
            streams: Counter::new(),
            watches: Counter::new(),
            runs: Counter::new(),
            connection_runs: Counter::new(),
            server_runs: Counter::new(),
        }
    }

    /// The slots a `kind` call of `user` on the connection `request` came in on needs;
    /// RESOURCE_EXHAUSTED naming the limit when one is full.
    pub(crate) fn acquire<B>(&self, kind: Kind, user: &str, request: &http::Request<B>) -> Result<Held, Status> {
        let limits = self.limits;
        let user_stream = || {
            self.streams
                .acquire(user.to_string(), limits.streams_per_user)
                .ok_or_else(|| {
                    Status::from(AdkError::quota(
                        "max_streams_per_user",
                        limits.streams_per_user,
                        format!(
                            "too many concurrent streams for user {user} (--max-streams-per-user {})",
                            limits.streams_per_user
                        ),
                    ))
                })
        };
        match kind {
            Kind::Stream => Ok(Held {
                _slots: vec![user_stream()?],
            }),
            Kind::Watch => {
                let user_slot = user_stream()?;
                let server_slot = self.watches.acquire((), limits.watches).ok_or_else(|| {
                    Status::from(AdkError::quota(
                        "max_watches",
                        limits.watches,
                        format!(
                            "this server has the most WatchSession streams it serves open ({}, --max-watches / \
                             ADK_MAX_WATCHES); try again later",
                            limits.watches
                        ),
                    ))
                })?;
                Ok(Held {
                    _slots: vec![user_slot, server_slot],
                })
            }
            Kind::Run => {
                let user_slot = self
                    .runs
                    .acquire(user.to_string(), limits.runs_per_user)
                    .ok_or_else(|| {
                        Status::from(AdkError::quota(
                            "max_runs_per_user",
                            limits.runs_per_user,
                            format!(
                                "too many concurrent runs for user {user} (--max-runs-per-user {})",
                                limits.runs_per_user
                            ),
                        ))
                    })?;
                let mut held = vec![user_slot];
                if let Some(remote) = remote_addr(request) {
                    let slot = self
                        .connection_runs
                        .acquire(remote, limits.runs_per_connection)
                        .ok_or_else(|| {
                            Status::from(AdkError::quota(
                                "max_runs_per_connection",
                                limits.runs_per_connection,
                                format!(
                                    "too many concurrent runs on this connection (--max-runs-per-connection {})",
                                    limits.runs_per_connection
                                ),
                            ))
                        })?;
                    held.push(slot);
                }
                let server_slot = self.server_runs.acquire((), limits.runs).ok_or_else(|| {
                    Status::from(AdkError::quota(
                        "max_runs",
                        limits.runs,
                        format!(
                            "this server runs the most concurrent runs it takes ({}, --max-runs / ADK_MAX_RUNS); \
                             try again later",
                            limits.runs
                        ),
                    ))
                })?;
                held.push(server_slot);
                Ok(Held { _slots: held })
            }
        }
    }
}

/// The client's address and port: one TCP connection while it is open.
fn remote_addr<B>(request: &http::Request<B>) -> Option<SocketAddr> {
    let extensions = request.extensions();
    extensions
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            extensions
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|info| info.get_ref().remote_addr())
        })
}

/// `response` with `held` released when its body ends or is dropped.
pub(crate) fn hold(response: http::Response<Body>, held: Held) -> http::Response<Body> {
    response.map(|body| Body::new(Guarded { body, held: Some(held) }))
}

struct Guarded {
    body: Body,
    held: Option<Held>,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            this.held = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
