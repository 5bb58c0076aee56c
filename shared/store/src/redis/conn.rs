//! Connections to standalone Redis and Redis Cluster behind one type: [`Link`], the
//! connection a store shares, and [`Conn`], the handle one request takes of it.

use super::client::{CONNECT_TIMEOUT, ClusterUrl, RESPONSE_TIMEOUT, client, install_tls_crypto_provider, redacted};
use super::cluster::{ClusterConn, ClusterLink};
use super::error::startup_error;
use adk_grpc_core::{AdkError, Result};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::Arc;
use std::time::Duration;

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

/// The connection a store shares; each request takes its [`Conn`] from it ([`Link::conn`]).
#[derive(Clone)]
pub(crate) enum Link {
    Managed(ConnectionManager),
    Cluster(Arc<ClusterLink>),
}

impl Link {
    /// Opens the shared connection for `url` (`redis://`, `rediss://`, `redis+cluster://`
    /// or `rediss+cluster://`). A malformed URL is a `Config` error; an unreachable server is `Unavailable`.
    pub(crate) async fn open(url: &str) -> Result<Link> {
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

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Link::Cluster(_))
    }

    /// A handle on the shared connection. On a cluster it is the connection of the
    /// moment: take one per request.
    pub(crate) fn conn(&self) -> Conn {
        match self {
            Link::Managed(manager) => Conn::Managed(manager.clone()),
            Link::Cluster(link) => Conn::Cluster(link.current()),
        }
    }
}
