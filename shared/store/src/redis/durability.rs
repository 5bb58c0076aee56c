//! Durable acknowledgements: a write is acknowledged only once enough replicas of
//! the primary that ran it have it, so a failover cannot take it back.
//!
//! Redis replicates asynchronously: a script's reply only says the primary ran it.
//! Every write of the stores (session create, append, delete, artifact commit and
//! delete, lease acquire/renew/release) is therefore sent as one pipeline
//! `[write…, WAIT n timeout]`. Both commands go in one request on one connection
//! to the node that owns the write's keys (on a cluster, redis-rs routes the whole
//! pipeline by its first keyed command; `WAIT` has no key), so `WAIT` always counts
//! the acknowledgements of this very write, never those of an earlier connection's
//! (a reconnect between two round trips would make `WAIT` return at once).
//!
//! `WAIT` counts replicas that reached the primary's replication offset after the
//! write, and a replica that has that offset has everything written before it too.
//! A script that changes nothing (an idempotent retry that finds its event id, a
//! create that finds the session) propagates nothing, so its `WAIT` alone would say
//! nothing about the earlier write it reports: every write script is therefore sent
//! as `[script, SET marker PX 1, WAIT]`, the marker (beside the script's keys, so on
//! the same node) moving the offset past everything the script saw. Read, marker and
//! `WAIT` share one request, so they cannot land on two nodes across a failover.
//!
//! When fewer replicas than required confirm within the timeout the call fails
//! with `UNAVAILABLE`: the write may have been applied (and may be lost on a
//! failover), and retrying it with the same event id (or session id, version) is
//! safe. A write that was lost was never acknowledged, so a sequence number that
//! was acknowledged is never reused.
//!
//! How many replicas: [`MinReplicas::Auto`] (the default) waits for every replica
//! the primary has connected, up to [`AUTO_MAX_REPLICAS`], learned from `ROLE`
//! (standalone) or `CLUSTER NODES` (cluster, per slot range) at most
//! [`REPLICA_COUNT_MAX_AGE`] ago (while one call reads them again, the others use the
//! last ones), and at least one once it has seen a replica in the
//! deployment (so a primary left without replicas by a failover refuses writes with
//! `UNAVAILABLE` until one is back, instead of acknowledging them alone). On a Redis
//! that never had a replica, no `WAIT` is sent at all.

use super::cluster::parse_cluster_nodes;
use super::conn::Conn;
use super::error::store_error;
use adk_grpc_core::sync;
use adk_grpc_core::{AdkError, Result};
use redis::Value;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// `auto` waits for at most this many replicas: an automatic failover (Redis
/// Cluster, Sentinel) promotes the most up-to-date replica, which has every write
/// one replica acknowledged; two also cover a manual promotion of either of two
/// replicas. Each further replica only adds latency (`WAIT` returns with the slowest).
pub const AUTO_MAX_REPLICAS: u32 = 2;
/// Default of [`ReplicaAcks::timeout`].
pub const DEFAULT_REPLICA_ACK_TIMEOUT: Duration = Duration::from_millis(500);
/// The longest [`ReplicaAcks::timeout`]: the write and its `WAIT` must answer
/// within the store's 2 s command timeout.
pub const MAX_REPLICA_ACK_TIMEOUT: Duration = Duration::from_millis(1500);
/// How old the replica count `auto` uses may be.
pub const REPLICA_COUNT_MAX_AGE: Duration = Duration::from_secs(1);

/// How many replicas must have a write before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MinReplicas {
    /// Every replica the primary reports connected, up to [`AUTO_MAX_REPLICAS`];
    /// 0 (no `WAIT`, no cost) on a Redis without replicas.
    #[default]
    Auto,
    /// Exactly this many; 0 turns the wait off. A primary with fewer connected
    /// replicas fails every write with `UNAVAILABLE`.
    Exactly(u32),
}

impl FromStr for MinReplicas {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(MinReplicas::Auto);
        }
        s.parse()
            .map(MinReplicas::Exactly)
            .map_err(|_| format!("expected `auto` or a number of replicas, got {s:?}"))
    }
}

impl std::fmt::Display for MinReplicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MinReplicas::Auto => f.write_str("auto"),
            MinReplicas::Exactly(n) => write!(f, "{n}"),
        }
    }
}

/// When a Redis write counts as acknowledged (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAcks {
    pub min_replicas: MinReplicas,
    /// How long a write waits for its replicas (1 ms to [`MAX_REPLICA_ACK_TIMEOUT`]).
    pub timeout: Duration,
}

impl Default for ReplicaAcks {
    fn default() -> Self {
        ReplicaAcks {
            min_replicas: MinReplicas::Auto,
            timeout: DEFAULT_REPLICA_ACK_TIMEOUT,
        }
    }
}

/// One store's acknowledgement policy and, for `auto`, what it last learned of the replicas.
pub(crate) struct Durability {
    acks: ReplicaAcks,
    replicas: std::sync::Mutex<Option<Arc<ReplicaCounts>>>,
    /// Held by the one call reading the counts again.
    fetching: Mutex<()>,
    /// Set once `auto` has seen a replica anywhere in the deployment: from then on a
    /// write needs at least one replica's confirmation, even on a primary that has
    /// none connected right now. Right after a failover the promoted replica has none,
    /// and a frozen old master that wakes up still believes it is master: counting
    /// their replicas (0) would acknowledge writes on a node alone, and lose them.
    replicated: AtomicBool,
}

/// Connected replicas per primary, as of `fetched`.
struct ReplicaCounts {
    fetched: Instant,
    /// The store's connection they were read through ([`Conn::generation`]): a newer
    /// one means the cluster changed (a failover), so they are read again at once.
    generation: u64,
    /// Standalone: one entry covering every slot. Cluster: (first slot, last slot, replicas).
    ranges: Vec<(u16, u16, u32)>,
}

impl ReplicaCounts {
    fn for_slot(&self, slot: u16) -> u32 {
        let range = self
            .ranges
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot));
        range.map_or(0, |(_, _, replicas)| *replicas)
    }
}

impl Durability {
    pub(crate) fn new(acks: ReplicaAcks) -> Durability {
        let timeout = acks.timeout.clamp(Duration::from_millis(1), MAX_REPLICA_ACK_TIMEOUT);
        Durability {
            acks: ReplicaAcks { timeout, ..acks },
            replicas: std::sync::Mutex::new(None),
            fetching: Mutex::new(()),
            replicated: AtomicBool::new(false),
        }
    }

    /// How many replicas a write of `key` must wait for now.
    pub(crate) async fn required(&self, conn: &mut Conn, key: &str) -> Result<u32> {
        match self.acks.min_replicas {
            MinReplicas::Exactly(n) => Ok(n),
            MinReplicas::Auto => {
                let counts = self.counts(conn).await?;
                if counts.ranges.iter().any(|(_, _, replicas)| *replicas > 0) {
                    self.replicated.store(true, Ordering::Relaxed);
                }
                let floor = u32::from(self.replicated.load(Ordering::Relaxed));
                let replicas = counts.for_slot(key_slot(key.as_bytes())).max(floor);
                Ok(replicas.min(AUTO_MAX_REPLICAS))
            }
        }
    }

    /// The replica counts, read again once older than [`REPLICA_COUNT_MAX_AGE`] or read
    /// through a connection the cluster's changes have replaced since.
    async fn counts(&self, conn: &mut Conn) -> Result<Arc<ReplicaCounts>> {
        let generation = conn.generation();
        let fresh = |counts: &Option<Arc<ReplicaCounts>>| {
            counts
                .as_ref()
                .filter(|counts| counts.fetched.elapsed() < REPLICA_COUNT_MAX_AGE && counts.generation == generation)
                .cloned()
        };
        let cached = self.cached();
        if let Some(counts) = fresh(&cached) {
            return Ok(counts);
        }
        // Counts read through a connection the cluster's changes have replaced describe
        // the cluster before a failover: a write would wait for a replica count the new
        // master does not have (and fail after the ack timeout), so they serve no one.
        let current = cached.filter(|counts| counts.generation == generation);
        let _fetching = match (self.fetching.try_lock(), current) {
            (Ok(fetching), _) => fetching,
            // Another call is reading them: the last counts serve meanwhile, so a node
            // slow to answer (or silent, until the cluster fails it over) holds up
            // that one call, not every write and watcher of the process.
            (Err(_), Some(counts)) => return Ok(counts),
            (Err(_), None) => self.fetching.lock().await,
        };
        let cached = self.cached();
        if let Some(counts) = fresh(&cached) {
            return Ok(counts);
        }
        match fetch_replica_counts(conn).await {
            Ok(counts) => {
                let counts = Arc::new(counts);
                *sync::lock(&self.replicas) = Some(counts.clone());
                Ok(counts)
            }
            Err(e) => match cached {
                // Keep the last counts while Redis is unreachable; the write itself
                // will report the outage.
                Some(counts) => Ok(counts),
                None => Err(e),
            },
        }
    }

    fn cached(&self) -> Option<Arc<ReplicaCounts>> {
        // Every write replaces the whole value: a poisoned lock still holds a consistent one.
        self.replicas
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    pub(crate) fn wait_cmd(&self, replicas: u32) -> redis::Cmd {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(self.acks.timeout.as_millis() as u64);
        cmd
    }

    /// The error of a write that fewer than `required` replicas confirmed in time.
    pub(crate) fn not_durable(&self, required: u32, confirmed: i64) -> AdkError {
        AdkError::Unavailable(format!(
            "redis: only {confirmed} of {required} replicas confirmed the write within {} ms; it may have \
             been applied but could be lost on a failover, and retrying it (same event id) is safe",
            self.acks.timeout.as_millis()
        ))
    }
}

/// Replicas per slot range: `ROLE` on standalone (the replicas connected to the
/// primary), `CLUSTER NODES` on a cluster (see [`cluster_replica_ranges`]).
async fn fetch_replica_counts(conn: &mut Conn) -> Result<ReplicaCounts> {
    let ranges = if conn.is_cluster() {
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(conn)
            .await
            .map_err(store_error)?;
        cluster_replica_ranges(&nodes)?
    } else {
        let role: Vec<Value> = redis::cmd("ROLE").query_async(conn).await.map_err(store_error)?;
        // ["master", offset, [[ip, port, offset], …]]; a replica has none of its own.
        let replicas = match role.get(2) {
            Some(Value::Array(replicas)) => replicas.len() as u32,
            _ => 0,
        };
        vec![(0, u16::MAX, replicas)]
    };
    Ok(ReplicaCounts {
        fetched: Instant::now(),
        generation: conn.generation(),
        ranges,
    })
}

/// (first slot, last slot, replicas) for every slot range of a `CLUSTER NODES` reply,
/// counting each master's replicas that the cluster has not marked failed.
///
/// This is the deployment as configured, not `CLUSTER SLOTS`: that lists a replica only
/// once gossip has carried its replication offset to the node asked, a second or so
/// after it synced, and a write acknowledged alone in that window is lost if its master
/// fails over before the next write. A replica still syncing is counted too, so such a
/// write waits for it (or fails as `UNAVAILABLE`) instead.
fn cluster_replica_ranges(nodes: &str) -> Result<Vec<(u16, u16, u32)>> {
    let nodes = parse_cluster_nodes(nodes)?;
    let mut replicas: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for node in &nodes {
        let live = !["fail", "handshake", "noaddr"].iter().any(|flag| node.has_flag(flag));
        if live
            && node.has_flag("slave")
            && let Some(master) = &node.master
        {
            *replicas.entry(master).or_default() += 1;
        }
    }
    let ranges = nodes.iter().flat_map(|node| {
        let count = replicas.get(node.id.as_str()).copied().unwrap_or(0);
        node.slots.iter().map(move |(first, last)| (*first, *last, count))
    });
    Ok(ranges.collect())
}

/// The cluster slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key
/// without one, modulo 16384, as the Redis Cluster specification defines it.
/// (redis-rs computes it too but does not expose the number.)
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter().position(|&b| b == b'}').map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// `adk:durable:{tag}` for a key with the hash tag `{tag}` (the same node), else `adk:durable:{key}`.
pub(crate) fn marker_key(key: &str) -> String {
    let tag = key
        .find('{')
        .and_then(|open| key[open..].find('}').map(|close| &key[open..=open + close]))
        .filter(|tag| tag.len() > 2);
    match tag {
        Some(tag) => format!("adk:durable:{tag}"),
        None => format!("adk:durable:{{{key}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_replicas_parse() {
        assert_eq!("auto".parse(), Ok(MinReplicas::Auto));
        assert_eq!("AUTO".parse(), Ok(MinReplicas::Auto));
        assert_eq!("2".parse(), Ok(MinReplicas::Exactly(2)));
        assert_eq!("0".parse(), Ok(MinReplicas::Exactly(0)));
        assert!("-1".parse::<MinReplicas>().is_err());
        assert!("all".parse::<MinReplicas>().is_err());
    }

    use redis::cluster_routing::Slot;

    #[test]
    fn slots_match_redis_rs() {
        for key in [
            "adk:sess:{app:alice}:s1",
            "plain",
            "{}x",
            "a{b}c{d}",
            "{",
            "",
            "adk:app:{app}",
        ] {
            assert_eq!(Slot::new(key_slot(key.as_bytes())), Some(Slot::for_key(key)), "{key}");
        }
        // The specification's example: "123456789" hashes to 0x31C3.
        assert_eq!(key_slot(b"123456789"), 12739);
    }

    #[test]
    fn the_marker_shares_the_keys_node() {
        let key = "adk:sess:{app:alice}:s1";
        assert_eq!(marker_key(key), "adk:durable:{app:alice}");
        assert_eq!(Slot::for_key(marker_key(key)), Slot::for_key(key));
        assert_eq!(Slot::for_key(marker_key("plain")), Slot::for_key("plain"));
    }

    #[test]
    fn cluster_nodes_give_each_range_its_masters_live_replicas() {
        // Master a has a replica that is syncing (counted) and one the cluster marked
        // failed (not counted); master b has none; c is migrating a slot to b.
        let nodes = "\
a 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b 127.0.0.1:7001@17001 master - 0 1 2 connected 5461-10922 10923
c 127.0.0.1:7002@17002 master - 0 1 3 connected 10924-16383 [10924->-b]
r1 127.0.0.1:7003@17003 slave a 0 1 1 connected
r2 127.0.0.1:7004@17004 slave,fail a 0 1 1 disconnected
r3 127.0.0.1:7005@17005 slave c 0 1 3 connected
r4 127.0.0.1:7006@17006 slave,fail? c 0 1 3 connected
";
        let ranges = cluster_replica_ranges(nodes).unwrap();
        assert_eq!(
            ranges,
            vec![(0, 5460, 1), (5461, 10922, 0), (10923, 10923, 0), (10924, 16383, 2)]
        );
        assert!(cluster_replica_ranges("a 127.0.0.1:7000@17000 master - 0 0 1 connected x-y").is_err());
    }

    #[test]
    fn slot_ranges_give_their_replicas() {
        let counts = ReplicaCounts {
            fetched: Instant::now(),
            generation: 0,
            ranges: vec![(0, 5460, 1), (5461, 10922, 0), (10923, 16383, 2)],
        };
        assert_eq!(counts.for_slot(0), 1);
        assert_eq!(counts.for_slot(6000), 0);
        assert_eq!(counts.for_slot(16383), 2);
    }
}
