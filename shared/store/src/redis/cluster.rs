//! A Redis Cluster connection that follows failovers by itself, also when the old
//! master goes silent.
//!
//! redis-rs 1.8's `ClusterConnection` re-reads the slot map only when a node answers
//! with a redirect (`MOVED`, `READONLY`) or a connection to it fails or is refused. A
//! node that stops answering (a frozen process, a host gone from the network, a
//! partition) gives neither: every request to it times out (a timeout is retried on the
//! same node and never triggers a slot refresh), and once a replica has taken over, the
//! connection keeps sending that master's slots to the silent node, for good. That is
//! how watchers stalled for minutes after a failover while another connection of the
//! same process, which happened to see a redirect, served appends
//! (`redis_failover.rs::cluster_master_gone_silent_for_good_pins_no_connection`).
//!
//! So a task asks a node for the cluster's view (`CLUSTER NODES`) every
//! [`TOPOLOGY_CHECK`], on a connection of its own (the cluster connection may be the
//! stuck one), keeping to a node while it answers and moving to another when it does
//! not. When that view is newer than the one the connection was built from (a slot
//! owned by another master with a higher config epoch, or a master at a new address),
//! it opens a new connection seeded by the node that reported it (its slot map is then
//! that node's view, and it connects to no node that left the cluster) and swaps it in.
//! Requests still waiting on the old one fail at once as `UNAVAILABLE` (they may have
//! run, and are safe to retry, as after a timeout) rather than wait out their timeout
//! on a node that may be gone. A stale view (a node that has not heard of the failover
//! yet, an old master that wakes up) has lower epochs and is ignored.

use super::client::{ClusterUrl, client};
use adk_grpc_core::sync;
use adk_grpc_core::{AdkError, Result};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// How often the cluster's view is compared with the connection's: a failover is
/// followed within this (plus one connection set-up) of the node asked learning of it.
const TOPOLOGY_CHECK: Duration = Duration::from_millis(500);
/// How long one check may wait for a node's view; a node that does not answer in time
/// is left for another.
const CHECK_TIMEOUT: Duration = TOPOLOGY_CHECK;
/// How long building a new connection may take: connecting to its seeds, then
/// reading the slot map and connecting to every node in it.
const REBUILD_TIMEOUT: Duration = Duration::from_secs(5);

/// The store's connection to a cluster: the current `ClusterConnection`, replaced as
/// the module docs say. Callers take a snapshot per request ([`ClusterLink::current`]).
pub(crate) struct ClusterLink {
    url: ClusterUrl,
    routed: RwLock<Routed>,
    /// Told each time `routed` is replaced.
    replaced: watch::Sender<()>,
}

struct Routed {
    conn: ClusterConnection,
    /// The view the connection was built from (None until a node first answered).
    view: Option<Topology>,
    /// How many times the connection was replaced.
    generation: u64,
}

impl ClusterLink {
    /// Connects through the URL's nodes and starts following the cluster's view.
    pub(crate) async fn connect(url: ClusterUrl) -> std::result::Result<Arc<ClusterLink>, redis::RedisError> {
        let conn = url.client(&url.hosts)?.get_async_connection().await?;
        let mut checker = Checker::new(&url);
        let view = checker.view().await;
        let link = Arc::new(ClusterLink {
            url,
            routed: RwLock::new(Routed {
                conn,
                view,
                generation: 0,
            }),
            replaced: watch::Sender::new(()),
        });
        tokio::spawn(follow_topology(Arc::downgrade(&link), checker));
        Ok(link)
    }

    /// The connection to send a request on now.
    pub(crate) fn current(&self) -> ClusterConn {
        let routed = self.routed();
        ClusterConn {
            conn: routed.conn.clone(),
            generation: routed.generation,
            // Subscribed while `routed` cannot change: only a later replacement counts.
            replaced: self.replaced.subscribe(),
        }
    }

    fn routed(&self) -> std::sync::RwLockReadGuard<'_, Routed> {
        // Every write replaces the whole value: a poisoned lock still holds a consistent one.
        sync::read(&self.routed)
    }

    /// Replaces the connection when `view` is newer than the one it was built from.
    async fn follow(&self, view: Topology) {
        let newer = match &self.routed().view {
            Some(built_from) => view.is_newer_than(built_from),
            // The first view any node gave: the connection was built from about the same.
            None => false,
        };
        if !newer {
            if self.routed().view.is_none() {
                sync::write(&self.routed).view = Some(view);
            }
            return;
        }
        match tokio::time::timeout(REBUILD_TIMEOUT, self.rebuild(&view)).await {
            Ok(Ok(conn)) => {
                tracing::info!("the redis cluster changed (a failover?); reconnected to its current nodes");
                let mut routed = sync::write(&self.routed);
                let generation = routed.generation + 1;
                *routed = Routed {
                    conn,
                    view: Some(view),
                    generation,
                };
                self.replaced.send_replace(());
            }
            // The next check tries again.
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot reconnect to the changed redis cluster"),
            Err(_) => tracing::warn!("cannot reconnect to the changed redis cluster: timed out"),
        }
    }

    /// A connection whose slot map is `view`: seeded by the node that reported it, else
    /// by every live node in it, else by the URL's nodes.
    async fn rebuild(&self, view: &Topology) -> std::result::Result<ClusterConnection, redis::RedisError> {
        let mut last_error = None;
        for seeds in [
            view.reporter().into_iter().collect(),
            view.live_addresses(),
            self.url.hosts.clone(),
        ] {
            if seeds.is_empty() {
                continue;
            }
            match self.url.client(&seeds)?.get_async_connection().await {
                Ok(conn) => return Ok(conn),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| (redis::ErrorKind::Io, "no node to connect to").into()))
    }
}

/// A [`ClusterLink`]'s connection as one request takes it: the request fails as soon as
/// the link replaces the connection (see the module docs).
#[derive(Clone)]
pub(crate) struct ClusterConn {
    conn: ClusterConnection,
    generation: u64,
    replaced: watch::Receiver<()>,
}

impl ClusterConn {
    /// Which connection of its link this is: 0 for the first, one more per replacement.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// `request`'s reply, or an I/O error once the link has replaced the connection.
    fn unless_replaced<'a, T: Send + 'a>(
        mut replaced: watch::Receiver<()>,
        request: RedisFuture<'a, T>,
    ) -> RedisFuture<'a, T> {
        Box::pin(async move {
            tokio::select! {
                reply = request => reply,
                // Err: the link is gone (the store with it); let the request finish.
                Ok(()) = replaced.changed() => Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "the redis cluster changed while the request waited; it may have run",
                )
                .into()),
            }
        })
    }
}

impl ConnectionLike for ClusterConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let replaced = self.replaced.clone();
        let request = self.conn.req_packed_command(cmd);
        ClusterConn::unless_replaced(replaced, request)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let replaced = self.replaced.clone();
        let request = self.conn.req_packed_commands(cmd, offset, count);
        ClusterConn::unless_replaced(replaced, request)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

/// Checks every [`TOPOLOGY_CHECK`] while the link is in use.
async fn follow_topology(link: Weak<ClusterLink>, mut checker: Checker) {
    let mut ticks = tokio::time::interval(TOPOLOGY_CHECK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let view = checker.view().await;
        let Some(link) = link.upgrade() else { return };
        if let Some(view) = view {
            link.follow(view).await;
        }
    }
}

/// Asks one node at a time for the cluster's view, on a connection of its own.
struct Checker {
    url: ClusterUrl,
    /// Nodes to ask, `host:port`: the URL's, then the live ones of the last view.
    nodes: Vec<String>,
    next: usize,
    asking: Option<MultiplexedConnection>,
}

impl Checker {
    fn new(url: &ClusterUrl) -> Checker {
        Checker {
            url: url.clone(),
            nodes: url.hosts.clone(),
            next: 0,
            asking: None,
        }
    }

    /// A node's view, or None when the node asked does not answer in time (the next
    /// call asks another).
    async fn view(&mut self) -> Option<Topology> {
        let view = tokio::time::timeout(CHECK_TIMEOUT, self.ask()).await;
        match view.ok().flatten() {
            Some(view) => {
                let live = view.live_addresses();
                if !live.is_empty() {
                    self.nodes = live;
                }
                Some(view)
            }
            None => {
                self.asking = None;
                None
            }
        }
    }

    async fn ask(&mut self) -> Option<Topology> {
        let mut asking = match self.asking.take() {
            Some(asking) => asking,
            None => {
                let node = &self.nodes[self.next % self.nodes.len()];
                self.next += 1;
                let node = client(&self.url.node_url(node)).ok()?;
                node.get_multiplexed_async_connection().await.ok()?
            }
        };
        let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(&mut asking).await.ok()?;
        self.asking = Some(asking);
        Topology::parse(&nodes).ok()
    }
}

/// One line of `CLUSTER NODES`:
/// `<id> <ip:port@cport[,hostname]> <flags> <master id|-> <ping> <pong> <config epoch> <link> <slot>…`
pub(crate) struct NodeLine {
    pub(crate) id: String,
    /// `ip:port`; empty when the node does not know it.
    address: String,
    pub(crate) flags: Vec<String>,
    /// The master a replica replicates.
    pub(crate) master: Option<String>,
    config_epoch: u64,
    /// Slot ranges it serves (first, last); migrations in progress (`[…]`) left out.
    pub(crate) slots: Vec<(u16, u16)>,
}

impl NodeLine {
    pub(crate) fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Failed or suspected so by the node asked, or not a usable member (yet).
    fn unreachable(&self) -> bool {
        ["fail", "fail?", "handshake", "noaddr"]
            .iter()
            .any(|flag| self.has_flag(flag))
    }
}

/// Parses a `CLUSTER NODES` reply.
pub(crate) fn parse_cluster_nodes(nodes: &str) -> Result<Vec<NodeLine>> {
    let bad = |line: &str| AdkError::Internal(format!("unexpected CLUSTER NODES line from redis: {line:?}"));
    nodes
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 8 {
                return Err(bad(line));
            }
            let address = fields[1].split(['@', ',']).next().unwrap_or_default();
            let slot = |s: &str| s.parse::<u16>().map_err(|_| bad(line));
            let slots = fields[8..]
                .iter()
                .filter(|slots| !slots.starts_with('['))
                .map(|slots| {
                    let (first, last) = slots.split_once('-').unwrap_or((slots, slots));
                    Ok((slot(first)?, slot(last)?))
                })
                .collect::<Result<_>>()?;
            Ok(NodeLine {
                id: fields[0].to_string(),
                // ":0" (or ":port") when the node knows no address for it.
                address: if address.starts_with(':') {
                    String::new()
                } else {
                    address.to_string()
                },
                flags: fields[2].split(',').map(String::from).collect(),
                master: Some(fields[3]).filter(|id| *id != "-").map(String::from),
                config_epoch: fields[6].parse().map_err(|_| bad(line))?,
                slots,
            })
        })
        .collect()
}

/// The cluster as one node sees it.
struct Topology {
    nodes: Vec<NodeLine>,
}

impl Topology {
    fn parse(nodes: &str) -> Result<Topology> {
        Ok(Topology {
            nodes: parse_cluster_nodes(nodes)?,
        })
    }

    /// Each served slot range with the master serving it.
    fn owners(&self) -> impl Iterator<Item = (u16, u16, &NodeLine)> {
        self.nodes
            .iter()
            .flat_map(|node| node.slots.iter().map(move |(first, last)| (*first, *last, node)))
    }

    /// True when this view knows of a change `old` does not: a slot served by another
    /// master with a higher config epoch (a failover), a slot `old` had no master for,
    /// or a master serving the same slots from another address.
    fn is_newer_than(&self, old: &Topology) -> bool {
        self.owners().any(|(first, last, owner)| {
            let mut covered = 0u32;
            let changed = old.owners().any(|(old_first, old_last, old_owner)| {
                let (from, to) = (first.max(old_first), last.min(old_last));
                if from > to {
                    return false;
                }
                covered += u32::from(to - from) + 1;
                if old_owner.id == owner.id {
                    old_owner.address != owner.address
                } else {
                    owner.config_epoch > old_owner.config_epoch
                }
            });
            changed || covered < u32::from(last - first) + 1
        })
    }

    /// The address of the node that reported this view, when it knows it.
    fn reporter(&self) -> Option<String> {
        self.nodes
            .iter()
            .find(|node| node.has_flag("myself"))
            .filter(|node| !node.address.is_empty())
            .map(|node| url_host(&node.address))
    }

    /// The addresses of the nodes this view does not see failing.
    fn live_addresses(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|node| !node.unreachable() && !node.address.is_empty())
            .map(|node| url_host(&node.address))
            .collect()
    }
}

/// `ip:port` as `CLUSTER NODES` gives it, as a URL's host: an IPv6 address in brackets.
fn url_host(address: &str) -> String {
    match address.rsplit_once(':') {
        Some((ip, port)) if ip.contains(':') => format!("[{ip}]:{port}"),
        _ => address.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "\
a 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b 127.0.0.1:7001@17001 master - 0 1 2 connected 5461-10922
c 127.0.0.1:7002@17002 master - 0 1 3 connected 10923-16383 [10923->-b]
r1 127.0.0.1:7003@17003 slave a 0 1 1 connected
r2 127.0.0.1:7004@17004 slave b 0 1 2 connected
r3 127.0.0.1:7005@17005 slave c 0 1 3 connected
";

    fn view(nodes: &str) -> Topology {
        Topology::parse(nodes).unwrap()
    }

    #[test]
    fn a_failover_is_newer_and_a_node_that_missed_it_is_not() {
        // b went silent; its replica r2 took over with a new config epoch.
        let after = "\
a 127.0.0.1:7000@17000 master - 0 0 1 connected 0-5460
b 127.0.0.1:7001@17001 master,fail - 0 1 2 disconnected
c 127.0.0.1:7002@17002 master - 0 1 3 connected 10923-16383
r1 127.0.0.1:7003@17003 slave a 0 1 1 connected
r2 127.0.0.1:7004@17004 myself,master - 0 1 7 connected 5461-10922
r3 127.0.0.1:7005@17005 slave c 0 1 3 connected
";
        assert!(view(after).is_newer_than(&view(BEFORE)));
        assert!(!view(BEFORE).is_newer_than(&view(after)), "a stale view is older");
        assert!(!view(after).is_newer_than(&view(after)));
        assert_eq!(view(after).reporter().as_deref(), Some("127.0.0.1:7004"));
        assert_eq!(
            view(after).live_addresses(),
            [
                "127.0.0.1:7000",
                "127.0.0.1:7002",
                "127.0.0.1:7003",
                "127.0.0.1:7004",
                "127.0.0.1:7005"
            ]
        );
    }

    #[test]
    fn a_master_at_a_new_address_or_a_newly_served_slot_is_newer() {
        let moved = BEFORE.replace("b 127.0.0.1:7001@17001", "b 10.0.0.9:7001@17001");
        assert!(view(&moved).is_newer_than(&view(BEFORE)));
        let uncovered = BEFORE.replace(" 5461-10922", " 5461-10000");
        assert!(view(BEFORE).is_newer_than(&view(&uncovered)));
        // Splitting a range the same master serves changes nothing.
        let split = BEFORE.replace(" 5461-10922", " 5461-6000 6001-10922");
        assert!(!view(&split).is_newer_than(&view(BEFORE)));
    }

    #[test]
    fn cluster_nodes_lines_parse() {
        let nodes = parse_cluster_nodes(
            "a 127.0.0.1:7000@17000,host-a myself,master - 0 0 4 connected 0-5 7 [8->-b]\n\
             b :0@0 slave,noaddr a 0 0 4 disconnected\n",
        )
        .unwrap();
        assert_eq!(nodes[0].address, "127.0.0.1:7000");
        assert_eq!(nodes[0].slots, [(0, 5), (7, 7)]);
        assert_eq!(nodes[0].config_epoch, 4);
        assert!(nodes[0].has_flag("myself") && !nodes[0].unreachable());
        assert_eq!((nodes[1].address.as_str(), nodes[1].master.as_deref()), ("", Some("a")));
        assert!(nodes[1].unreachable());
        assert!(parse_cluster_nodes("a 127.0.0.1:7000@17000 master - 0 0 1 connected x-y").is_err());
        assert!(parse_cluster_nodes("a 127.0.0.1:7000@17000 master").is_err());
        assert_eq!(url_host("::1:7000"), "[::1]:7000");
        assert_eq!(url_host("10.0.0.1:7000"), "10.0.0.1:7000");
    }
}
