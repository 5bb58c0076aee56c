//! Clients for a store URL: the URL parsers (standalone and cluster), every client the
//! stores connect with (timeouts, `TCP_NODELAY`, TLS), and the URL as error messages
//! show it (without its password).

use adk_grpc_core::{AdkError, Result};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::io::tcp::TcpSettings;
use redis::{Client, IntoConnectionInfo};
use std::time::Duration;

/// How long opening a TCP (or TLS) connection to one node may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an ordinary command may wait for its reply.
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The first pause before redis-rs retries a cluster request that a node refused for the
/// moment (`CLUSTERDOWN` while a failover is under way, `TRYAGAIN`, `LOADING`) or that
/// found no connection to its node; later pauses grow from it. Its default, 1.28 s, let a
/// request refused just before a promotion wait out most of its 2 s and often time out,
/// so watchers and writes on healthy masters too stalled for a second or two after each
/// failover; 100 ms brings them back soon after the promotion.
const CLUSTER_RETRY_MIN_WAIT: Duration = Duration::from_millis(100);

/// A client for a Redis Cluster through `node_urls`: every cluster connection of the
/// stores is built here (`cluster.rs` builds new ones as the cluster changes, through
/// [`ClusterUrl`]).
fn cluster_client(node_urls: Vec<String>) -> redis::RedisResult<ClusterClient> {
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
pub(super) fn install_tls_crypto_provider() {
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
pub(super) fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => format!("{}://***@{}", &url[..scheme_end], &url[at + 1..]),
        _ => url.to_string(),
    }
}

/// A `redis+cluster://` (or `rediss+cluster://`) URL: its nodes, and what every node
/// URL shares (scheme, credentials, database, query, fragment).
#[derive(Clone)]
pub(crate) struct ClusterUrl {
    scheme: &'static str,
    userinfo: String,
    /// `host:port` of each node the URL names.
    pub(crate) hosts: Vec<String>,
    suffix: String,
}

impl ClusterUrl {
    /// `scheme+cluster://[user:pass@]h1:p1,h2:p2[/db][?query][#insecure]`; None for a
    /// URL of another scheme, `Err(why)` for a malformed one.
    pub(crate) fn parse(url: &str) -> Option<std::result::Result<ClusterUrl, &'static str>> {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis+cluster://") {
            ("redis", rest)
        } else if let Some(rest) = url.strip_prefix("rediss+cluster://") {
            ("rediss", rest)
        } else {
            return None;
        };
        let (userinfo, rest) = match rest.rsplit_once('@') {
            Some((userinfo, rest)) => (format!("{userinfo}@"), rest),
            None => (String::new(), rest),
        };
        let (hosts, suffix) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        let hosts: Vec<String> = hosts.split(',').map(String::from).collect();
        if hosts.iter().any(String::is_empty) {
            return Some(Err("empty node address; expected h1:p1,h2:p2"));
        }
        Some(Ok(ClusterUrl {
            scheme,
            userinfo,
            hosts,
            suffix: suffix.to_string(),
        }))
    }

    /// The URL of the node at `host` (`host:port`), with everything the cluster URL sets.
    pub(crate) fn node_url(&self, host: &str) -> String {
        format!("{}://{}{host}{}", self.scheme, self.userinfo, self.suffix)
    }

    /// A client for the cluster through `hosts` (see [`cluster_client`]).
    pub(super) fn client(&self, hosts: &[String]) -> redis::RedisResult<redis::cluster::ClusterClient> {
        cluster_client(hosts.iter().map(|host| self.node_url(host)).collect())
    }

    /// Whether a client can be built for the URL's nodes (a bad setting cannot).
    pub(crate) fn validate(&self) -> std::result::Result<(), redis::RedisError> {
        self.client(&self.hosts).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
