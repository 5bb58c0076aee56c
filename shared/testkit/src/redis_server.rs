use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use tokio::time::{Instant, sleep, timeout};

use crate::net::free_port;
use crate::process::{ChildGuard, tail_file};

/// Readiness deadline for one redis-server process.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// `free_port` is racy; a few fresh ports are tried before giving up.
const PORT_ATTEMPTS: usize = 3;
const CLUSTER_READY_TIMEOUT: Duration = Duration::from_secs(30);
const REDIS_CLI_TIMEOUT: Duration = Duration::from_secs(60);
const LOG_TAIL_LINES: usize = 30;
const LOG_FILE: &str = "redis.log";

/// A real standalone `redis-server` on a free loopback port, with AOF
/// persistence (`appendfsync always`) in its own temp dir, so a SIGKILL loses
/// no acknowledged write. Killed on drop.
pub struct RedisServer {
    child: ChildGuard,
    port: u16,
    dir: TempDir,
    /// The caller's arguments from [`RedisServer::start_with_args`], passed
    /// again by [`RedisServer::restart`].
    extra_args: Vec<String>,
}

impl RedisServer {
    /// Starts the server and waits until it answers PING. Panics (never skips)
    /// if `redis-server` is missing or does not come up.
    pub async fn start() -> RedisServer {
        RedisServer::start_with_args(&[]).await
    }

    /// [`RedisServer::start`] with `extra_args` appended to the `redis-server`
    /// command line, after the testkit's own arguments so they win (e.g.
    /// `["--appendonly", "no"]`). [`RedisServer::restart`] passes them again.
    ///
    /// Readiness is a PING on [`RedisServer::port`], unless `extra_args` turn
    /// the plain port off with `--port 0`: then they must set `--tls-port`, and
    /// readiness is `redis-cli --tls … PING` on it, trusting `--tls-ca-cert-file`
    /// (or `--insecure` without one) and, unless `--tls-auth-clients no` or
    /// `optional`, presenting `--tls-client-cert-file`/`--tls-client-key-file`
    /// (falling back to `--tls-cert-file`/`--tls-key-file`) as client certificate.
    /// Only the testkit's plain port is retried when taken; ports named in
    /// `extra_args` are the caller's to choose.
    pub async fn start_with_args(extra_args: &[&str]) -> RedisServer {
        let binary = require_binary("redis-server");
        let extra_args: Vec<String> = extra_args.iter().map(|arg| arg.to_string()).collect();
        let mut args = standalone_args();
        args.extend(extra_args.iter().cloned());
        let mut last_error = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let dir = new_temp_dir("adk-redis-");
            let port = free_port();
            match start_node(&binary, dir.path(), port, &args).await {
                Ok(child) => {
                    return RedisServer {
                        child,
                        port,
                        dir,
                        extra_args,
                    };
                }
                Err(StartError::PortInUse(log)) => last_error = log,
                Err(StartError::Failed(message)) => panic!("{message}"),
            }
        }
        panic!("redis-server could not get a free port after {PORT_ATTEMPTS} attempts:\n{last_error}")
    }

    /// The plain (non-TLS) port. Panics if the server was started with
    /// `--port 0`, which leaves it no plain port.
    pub fn port(&self) -> u16 {
        assert!(
            last_arg_value(&self.extra_args, "--port") != Some("0"),
            "this redis-server was started with `--port 0` and has no plain port; connect to its --tls-port"
        );
        self.port
    }

    /// `redis://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port())
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// The data directory (AOF files live here).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log_path(&self) -> &Path {
        self.child.log_path()
    }

    pub fn tail_log(&self, n_lines: usize) -> String {
        self.child.tail_log(n_lines)
    }

    pub fn is_running(&mut self) -> bool {
        self.child.is_running()
    }

    /// Fault injection: `"STOP"` freezes the server (connections hang rather
    /// than fail), `"CONT"` resumes it.
    pub fn send_signal(&mut self, signal: &str) {
        self.child.send_signal(signal);
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("redis URL built by testkit must parse")
    }

    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        patient_connection(&self.client())
            .await
            .unwrap_or_else(|err| panic!("cannot connect to test redis at {}: {err}", self.url()))
    }

    pub async fn flushall(&self) {
        let mut connection = self.connection().await;
        redis::cmd("FLUSHALL")
            .query_async::<()>(&mut connection)
            .await
            .unwrap_or_else(|err| panic!("FLUSHALL on {} failed: {err}", self.url()));
    }

    /// Crashes the server with SIGKILL.
    pub async fn kill9(&mut self) {
        self.child.kill9().await;
    }

    /// Graceful shutdown (SIGTERM; redis flushes the AOF and exits).
    pub async fn stop(&mut self) {
        self.child.terminate().await;
    }

    /// Starts the server again on the same port and data dir, so the AOF is
    /// replayed. If it is still running it is stopped gracefully first; call
    /// [`RedisServer::kill9`] before this to simulate a crash instead.
    pub async fn restart(&mut self) {
        if self.child.is_running() {
            self.stop().await;
        }
        let binary = require_binary("redis-server");
        let mut args = standalone_args();
        args.extend(self.extra_args.iter().cloned());
        self.child = restart_node(&binary, self.dir.path(), self.port, &args).await;
    }
}

/// A standalone primary with one replica (`replicaof`), as most managed Redis
/// offerings give; both with AOF (`appendfsync always`).
pub struct RedisPrimaryReplica {
    pub primary: RedisServer,
    pub replica: RedisServer,
}

impl RedisPrimaryReplica {
    /// Starts both and returns once the replica reports its link to the primary up and
    /// the primary counts it as an online replica (what `WAIT` and `ROLE` go by).
    pub async fn start() -> RedisPrimaryReplica {
        let primary = RedisServer::start().await;
        let port = primary.port().to_string();
        let replica = RedisServer::start_with_args(&["--replicaof", "127.0.0.1", &port]).await;
        let pair = RedisPrimaryReplica { primary, replica };
        crate::eventually(START_TIMEOUT, || async {
            if pair.replica_connected().await && pair.primary_sees_replica_online().await {
                Ok(())
            } else {
                Err("the replica did not connect".to_string())
            }
        })
        .await;
        pair
    }

    /// True while the replica reports its link to the primary up (`master_link_status:up`).
    pub async fn replica_connected(&self) -> bool {
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let info: Option<String> = query_node(self.replica.port(), info).await;
        info.is_some_and(|info| info.lines().any(|line| line.trim() == "master_link_status:up"))
    }

    /// True while the primary lists its replica as online (`INFO replication`).
    async fn primary_sees_replica_online(&self) -> bool {
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let info: Option<String> = query_node(self.primary.port(), info).await;
        info.is_some_and(|info| {
            info.lines()
                .any(|line| line.starts_with("slave0:") && line.contains("state=online"))
        })
    }

    /// Makes the replica a primary of its own (`REPLICAOF NO ONE`), as an operator
    /// or a managed service does when the primary is lost.
    pub async fn promote_replica(&self) {
        let mut connection = self.replica.connection().await;
        redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async::<()>(&mut connection)
            .await
            .expect("REPLICAOF NO ONE");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        keep_for_diagnosis_if_panicking(&mut self.dir, "redis-server", &self.child);
    }
}

/// A real Redis Cluster of `n` master nodes (no replicas), each a
/// `redis-server` in its own temp dir. Killed on drop.
pub struct RedisCluster {
    nodes: Vec<ClusterNode>,
}

struct ClusterNode {
    child: ChildGuard,
    port: u16,
    dir: TempDir,
    /// What it was started with (its bus port included), to restart it as it was.
    args: Vec<String>,
}

impl RedisCluster {
    /// Starts `n` (at least 3) nodes, joins them with `redis-cli --cluster
    /// create`, and waits until every node reports `cluster_state:ok` with all
    /// 16384 slots assigned.
    pub async fn start(n: usize) -> RedisCluster {
        assert!(n >= 3, "a Redis Cluster needs at least 3 masters, got {n}");
        let binary = require_binary("redis-server");
        require_binary("redis-cli");

        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            nodes.push(start_cluster_node(&binary, &cluster_node_args(5000, false)).await);
        }
        let cluster = RedisCluster { nodes };
        cluster.create(0).await;
        cluster
    }

    /// A cluster that can fail over: `masters` (at least 3) masters with one replica
    /// each, `cluster-node-timeout` [`FAILOVER_NODE_TIMEOUT_MS`], AOF with
    /// `appendfsync always` on every node. Returns once every master has its replica
    /// connected. Nodes are numbered as [`RedisCluster::node_index_of_port`] tells.
    pub async fn start_with_replicas(masters: usize) -> RedisCluster {
        assert!(masters >= 3, "a Redis Cluster needs at least 3 masters, got {masters}");
        let binary = require_binary("redis-server");
        require_binary("redis-cli");
        let args = cluster_node_args(FAILOVER_NODE_TIMEOUT_MS, true);
        let mut nodes = Vec::with_capacity(2 * masters);
        for _ in 0..2 * masters {
            nodes.push(start_cluster_node(&binary, &args).await);
        }
        let cluster = RedisCluster { nodes };
        cluster.create(1).await;
        cluster.wait_for_replicas(masters).await;
        cluster
    }

    /// `redis-cli --cluster create` over every node, then waits until they agree.
    async fn create(&self, replicas: usize) {
        let addresses: Vec<String> = self.ports().iter().map(|port| format!("127.0.0.1:{port}")).collect();
        let replicas = replicas.to_string();
        let mut create_args = vec!["--cluster", "create"];
        create_args.extend(addresses.iter().map(String::as_str));
        create_args.extend(["--cluster-replicas", replicas.as_str(), "--cluster-yes"]);
        redis_cli(&create_args).await;
        self.wait_until_ready().await;
    }

    /// Waits until `masters` replicas report their link to their master up and in sync.
    async fn wait_for_replicas(&self, masters: usize) {
        crate::eventually(CLUSTER_READY_TIMEOUT, || async {
            let mut connected = 0;
            for node in &self.nodes {
                let role: Option<Vec<redis::Value>> = query_node(node.port, redis::cmd("ROLE")).await;
                // A replica's ROLE: ["slave", host, port, "connected", offset].
                if let Some(role) = role
                    && role.len() >= 4
                    && redis::from_redis_value_ref::<String>(&role[3]).ok().as_deref() == Some("connected")
                {
                    connected += 1;
                }
            }
            if connected >= masters {
                Ok(())
            } else {
                Err(format!("only {connected} of {masters} cluster replicas connected"))
            }
        })
        .await
    }

    /// The index of the node that serves `key`'s slot as master now, as the
    /// running nodes other than `except` see it (None while they see no master for it).
    pub async fn master_of(&self, key: &str, except: Option<usize>) -> Option<usize> {
        let mut keyslot = redis::cmd("CLUSTER");
        keyslot.arg("KEYSLOT").arg(key);
        for (index, node) in self.nodes.iter().enumerate() {
            if Some(index) == except {
                continue;
            }
            let Some(slot) = query_node::<u16>(node.port, keyslot.clone()).await else {
                continue;
            };
            let mut slots_cmd = redis::cmd("CLUSTER");
            slots_cmd.arg("SLOTS");
            // [[first, last, [host, port, id, …] (the master), replicas…], …]
            let Some(ranges) = query_node::<Vec<Vec<redis::Value>>>(node.port, slots_cmd).await else {
                continue;
            };
            let number = |value: Option<&redis::Value>| value.and_then(|v| redis::from_redis_value_ref::<u16>(v).ok());
            let port = ranges.iter().find_map(|range| {
                let (first, last) = (number(range.first())?, number(range.get(1))?);
                if !(first..=last).contains(&slot) {
                    return None;
                }
                match range.get(2) {
                    Some(redis::Value::Array(master)) => number(master.get(1)),
                    _ => None,
                }
            })?;
            return self.node_index_of_port(port);
        }
        None
    }

    /// The index of a running node that is a replica of node `master` (by its `ROLE`).
    pub async fn replica_of(&self, master: usize) -> Option<usize> {
        let master_port = self.nodes[master].port;
        for (index, node) in self.nodes.iter().enumerate() {
            // ["slave", master host, master port, state, offset]
            let Some(role) = query_node::<Vec<redis::Value>>(node.port, redis::cmd("ROLE")).await else {
                continue;
            };
            let port = role.get(2).and_then(|v| redis::from_redis_value_ref::<u16>(v).ok());
            if port == Some(master_port) {
                return Some(index);
            }
        }
        None
    }

    /// The index (into [`RedisCluster::ports`]) of the node on `port`.
    pub fn node_index_of_port(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|node| node.port == port)
    }

    /// Waits until the other nodes have promoted a replica in place of master
    /// `failed` for `key`'s slot, and the cluster reports `cluster_state:ok` again.
    /// Returns the new master's index.
    pub async fn wait_for_failover(&self, key: &str, failed: usize) -> usize {
        crate::eventually(CLUSTER_READY_TIMEOUT, || async {
            match self.master_of(key, Some(failed)).await {
                Some(master)
                    if master != failed
                        && cluster_info(self.nodes[master].port)
                            .await
                            .is_some_and(|info| info.lines().any(|line| line.trim() == "cluster_state:ok")) =>
                {
                    Ok(master)
                }
                _ => Err(format!("no replica took over from node {failed}")),
            }
        })
        .await
    }

    /// Crashes node `index` with SIGKILL.
    pub async fn kill9(&mut self, index: usize) {
        self.nodes[index].child.kill9().await;
    }

    /// Starts node `index` again after a crash, on its port, data dir and `nodes.conf`:
    /// it rejoins the cluster (a failed-over master as a replica of its successor), as
    /// a restarted pod does.
    pub async fn restart(&mut self, index: usize) {
        let binary = require_binary("redis-server");
        let node = &mut self.nodes[index];
        node.child = restart_node(&binary, node.dir.path(), node.port, &node.args).await;
    }

    /// Fault injection on node `index`: `"STOP"` freezes it, `"CONT"` resumes it.
    pub fn send_signal(&mut self, index: usize, signal: &str) {
        self.nodes[index].child.send_signal(signal);
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|node| node.port).collect()
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`
    pub fn url(&self) -> String {
        let addresses: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect();
        format!("redis+cluster://{}", addresses.join(","))
    }

    /// One `redis://127.0.0.1:PORT` per node, as `redis::cluster::ClusterClient` wants.
    pub fn node_urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|node| format!("redis://127.0.0.1:{}", node.port))
            .collect()
    }

    /// Runs `redis-cli -c -p FIRST_PORT ARGS...` (following MOVED redirects)
    /// and returns its trimmed stdout.
    pub async fn cli(&self, args: &[&str]) -> String {
        let port = self.nodes[0].port.to_string();
        let mut full_args = vec!["-c", "-p", port.as_str()];
        full_args.extend_from_slice(args);
        redis_cli(&full_args).await
    }

    async fn wait_until_ready(&self) {
        let deadline = Instant::now() + CLUSTER_READY_TIMEOUT;
        let expected_lines = [
            "cluster_state:ok".to_owned(),
            "cluster_slots_assigned:16384".to_owned(),
            "cluster_slots_ok:16384".to_owned(),
            // Every node must know every other, or MOVED can point at a stranger.
            format!("cluster_known_nodes:{}", self.nodes.len()),
        ];
        loop {
            let mut not_ready = None;
            for node in &self.nodes {
                let info = cluster_info(node.port).await;
                let ready = info.as_deref().is_some_and(|info| {
                    expected_lines
                        .iter()
                        .all(|expected| info.lines().any(|line| line.trim() == expected))
                });
                if !ready {
                    not_ready = Some((node, info));
                    break;
                }
            }
            let Some((node, info)) = not_ready else {
                return;
            };
            if Instant::now() >= deadline {
                panic!(
                    "redis cluster not ready after {CLUSTER_READY_TIMEOUT:?}; node {} reports:\n{}\n\
                     --- log {} ---\n{}",
                    node.port,
                    info.unwrap_or_else(|| "<no answer>".to_owned()),
                    node.child.log_path().display(),
                    node.child.tail_log(LOG_TAIL_LINES),
                );
            }
            sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            keep_for_diagnosis_if_panicking(&mut node.dir, "redis cluster node", &node.child);
        }
    }
}

/// Runs `redis-cli ARGS...` and returns its trimmed stdout; panics with its
/// output if it fails or takes longer than a minute.
pub async fn redis_cli(args: &[&str]) -> String {
    let binary = require_binary("redis-cli");
    let run = tokio::process::Command::new(&binary)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = timeout(REDIS_CLI_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("`redis-cli {}` timed out", args.join(" ")))
        .unwrap_or_else(|err| panic!("failed to run `redis-cli {}`: {err}", args.join(" ")));
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        panic!(
            "`redis-cli {}` failed with {}\nstdout:\n{stdout}\nstderr:\n{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr),
        );
    }
    stdout.trim().to_owned()
}

fn standalone_args() -> Vec<String> {
    ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
        .map(String::from)
        .to_vec()
}

/// `cluster-node-timeout` of [`RedisCluster::start_with_replicas`]: short, so a
/// failed master is replaced within a few seconds.
pub const FAILOVER_NODE_TIMEOUT_MS: u64 = 1000;

fn cluster_node_args(node_timeout_ms: u64, aof: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        &node_timeout_ms.to_string(),
        "--save",
        "",
    ]
    .map(String::from)
    .to_vec();
    if aof {
        args.extend(["--appendonly", "yes", "--appendfsync", "always"].map(String::from));
    } else {
        args.extend(["--appendonly", "no"].map(String::from));
    }
    args
}

async fn start_cluster_node(binary: &Path, node_args: &[String]) -> ClusterNode {
    let mut last_error = String::new();
    for _ in 0..PORT_ATTEMPTS {
        // A fresh dir per attempt so a half-started node leaves no nodes.conf behind.
        let dir = new_temp_dir("adk-redis-cluster-");
        let port = free_port();
        // An explicit bus port: the default (port + 10000) overflows for
        // ephemeral ports above 55535.
        let bus_port = free_port().to_string();
        let mut args = node_args.to_vec();
        args.extend(["--cluster-port".to_owned(), bus_port]);
        match start_node(binary, dir.path(), port, &args).await {
            Ok(child) => return ClusterNode { child, port, dir, args },
            Err(StartError::PortInUse(log)) => last_error = log,
            Err(StartError::Failed(message)) => panic!("{message}"),
        }
    }
    panic!("redis cluster node could not get free ports after {PORT_ATTEMPTS} attempts:\n{last_error}")
}

enum StartError {
    /// Someone else took the port between `free_port` and the bind; retryable.
    PortInUse(String),
    Failed(String),
}

/// Starts a node again on its port after a crash. A `kill -9` spares the node's forked
/// children (an AOF rewrite, a replication RDB), which still hold its listening socket
/// until they finish: while the port is taken, try again until [`START_TIMEOUT`].
/// Panics with the node's log when it cannot start.
async fn restart_node(binary: &Path, dir: &Path, port: u16, args: &[String]) -> ChildGuard {
    crate::eventually(START_TIMEOUT, || async {
        match start_node(binary, dir, port, args).await {
            Ok(child) => Ok(child),
            Err(StartError::PortInUse(log)) => Err(format!("port {port} still in use:\n{log}")),
            Err(StartError::Failed(log)) => panic!("redis-server failed to restart on port {port}:\n{log}"),
        }
    })
    .await
}

async fn start_node(binary: &Path, dir: &Path, port: u16, extra_args: &[String]) -> Result<ChildGuard, StartError> {
    let readiness = Readiness::for_args(port, extra_args).map_err(StartError::Failed)?;
    let mut command = Command::new(binary);
    command
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir)
        .args(extra_args);
    let mut child = ChildGuard::spawn(command, dir.join(LOG_FILE))
        .map_err(|err| StartError::Failed(format!("failed to spawn {}: {err}", binary.display())))?;

    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = child.exit_status() {
            let log = child.tail_log(LOG_TAIL_LINES);
            let message = format!(
                "redis-server on port {port} exited during startup with {status}\n--- log {} ---\n{log}",
                child.log_path().display()
            );
            return Err(if log.contains("Address already in use") {
                StartError::PortInUse(message)
            } else {
                StartError::Failed(message)
            });
        }
        if readiness.is_ready().await {
            return Ok(child);
        }
        if Instant::now() >= deadline {
            return Err(StartError::Failed(format!(
                "redis-server on port {port} did not answer {readiness} within {START_TIMEOUT:?}\n--- log {} ---\n{}",
                child.log_path().display(),
                child.tail_log(LOG_TAIL_LINES)
            )));
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// How [`start_node`] tells that a server accepts commands.
enum Readiness {
    /// PING on the plain port.
    Ping(u16),
    /// `redis-cli ARGS PING` answers PONG (a TLS-only server).
    TlsCli { cli: PathBuf, args: Vec<String> },
}

impl Readiness {
    /// PING on `port` unless `args` (the server's arguments after `--port port`)
    /// disable the plain port with `--port 0`; then PING over TLS on `--tls-port`.
    fn for_args(port: u16, args: &[String]) -> Result<Readiness, String> {
        if last_arg_value(args, "--port") != Some("0") {
            return Ok(Readiness::Ping(port));
        }
        let value = |name: &str| last_arg_value(args, name);
        let tls_port = value("--tls-port")
            .filter(|tls_port| *tls_port != "0")
            .ok_or("redis-server started with `--port 0` but no `--tls-port`: no port to probe for readiness")?;
        let cli = require_binary("redis-cli");
        let mut cli_args: Vec<String> = ["--tls", "-h", "127.0.0.1", "-p", tls_port].map(String::from).to_vec();
        match value("--tls-ca-cert-file") {
            Some(ca) => cli_args.extend(["--cacert".to_owned(), ca.to_owned()]),
            None => cli_args.push("--insecure".to_owned()),
        }
        if !matches!(value("--tls-auth-clients"), Some("no" | "optional")) {
            let cert = value("--tls-client-cert-file").or(value("--tls-cert-file"));
            let key = value("--tls-client-key-file").or(value("--tls-key-file"));
            if let (Some(cert), Some(key)) = (cert, key) {
                cli_args.extend(["--cert", cert, "--key", key].map(String::from));
            }
        }
        Ok(Readiness::TlsCli { cli, args: cli_args })
    }

    async fn is_ready(&self) -> bool {
        match self {
            Readiness::Ping(port) => ping(*port).await,
            Readiness::TlsCli { cli, args } => {
                let run = tokio::process::Command::new(cli)
                    .args(args)
                    .arg("PING")
                    .stdin(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .output();
                // A server still loading answers with a LOADING error, not PONG.
                matches!(
                    timeout(Duration::from_secs(1), run).await,
                    Ok(Ok(output)) if String::from_utf8_lossy(&output.stdout).trim() == "PONG"
                )
            }
        }
    }
}

impl std::fmt::Display for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Readiness::Ping(_) => f.write_str("PING"),
            Readiness::TlsCli { args, .. } => write!(f, "`redis-cli {} PING`", args.join(" ")),
        }
    }
}

/// The value after the last `name` in a `redis-server` argument list (later
/// arguments override earlier ones).
fn last_arg_value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.windows(2)
        .rev()
        .find(|pair| pair[0].eq_ignore_ascii_case(name))
        .map(|pair| pair[1].as_str())
}

/// A test's own connection: it inspects a server that may be busy (an
/// `appendfsync always` Redis on a loaded CI machine stalls for seconds), so it
/// waits far longer than the redis crate's 500 ms default before calling an
/// answer lost. Checks that must not hang on a frozen node bound themselves.
pub async fn patient_connection(client: &redis::Client) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(Duration::from_secs(30)));
    client.get_multiplexed_async_connection_with_config(&config).await
}

async fn query_node<T: redis::FromRedisValue>(port: u16, command: redis::Cmd) -> Option<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let attempt = async {
        let mut connection = patient_connection(&client).await?;
        command.query_async::<T>(&mut connection).await
    };
    // A frozen or still-loading server must not stall a readiness loop.
    timeout(Duration::from_secs(1), attempt).await.ok()?.ok()
}

/// True once the server accepts commands (a server still loading its AOF
/// answers PING with a LOADING error).
async fn ping(port: u16) -> bool {
    query_node::<String>(port, redis::cmd("PING")).await.as_deref() == Some("PONG")
}

async fn cluster_info(port: u16) -> Option<String> {
    let mut command = redis::cmd("CLUSTER");
    command.arg("INFO");
    query_node(port, command).await
}

fn require_binary(name: &str) -> PathBuf {
    find_on_path(name).unwrap_or_else(|| {
        panic!(
            "{name} not found: run the README's test command (it installs redis-server), \
             or `apt-get install redis-server`"
        )
    })
}

pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

pub(crate) fn new_temp_dir(prefix: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("failed to create a temp dir for a test process")
}

/// When a test fails, its process logs and data are the evidence: keep the
/// dir instead of deleting it, and show where it is plus the log tail.
pub(crate) fn keep_for_diagnosis_if_panicking(dir: &mut TempDir, what: &str, child: &ChildGuard) {
    if !std::thread::panicking() {
        return;
    }
    dir.disable_cleanup(true);
    eprintln!(
        "[adk-grpc-testkit] test failed; kept {what} (pid {}) dir {}\n--- last lines of {} ---\n{}",
        child.pid(),
        dir.path().display(),
        child.log_path().display(),
        tail_file(child.log_path(), 20),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|arg| arg.to_string()).collect()
    }

    #[test]
    fn later_arguments_win() {
        let list = args(&["--port", "1", "--save", "", "--PORT", "0"]);
        assert_eq!(last_arg_value(&list, "--port"), Some("0"));
        assert_eq!(last_arg_value(&list, "--save"), Some(""));
        assert_eq!(last_arg_value(&list, "--tls-port"), None);
    }

    #[test]
    fn readiness_is_ping_unless_the_plain_port_is_off() {
        let plain = Readiness::for_args(7000, &args(&["--tls-port", "7001"])).unwrap();
        assert!(matches!(plain, Readiness::Ping(7000)));

        let no_port = Readiness::for_args(7000, &args(&["--port", "0"]));
        assert!(no_port.is_err());

        let verified = args(&[
            "--port",
            "0",
            "--tls-port",
            "7001",
            "--tls-cert-file",
            "s.crt",
            "--tls-key-file",
            "s.key",
            "--tls-ca-cert-file",
            "ca.crt",
        ]);
        let Readiness::TlsCli { args: cli, .. } = Readiness::for_args(7000, &verified).unwrap() else {
            panic!("expected a TLS probe");
        };
        assert_eq!(
            cli.join(" "),
            "--tls -h 127.0.0.1 -p 7001 --cacert ca.crt --cert s.crt --key s.key"
        );

        let anonymous = args(&["--port", "0", "--tls-port", "7001", "--tls-auth-clients", "no"]);
        let Readiness::TlsCli { args: cli, .. } = Readiness::for_args(7000, &anonymous).unwrap() else {
            panic!("expected a TLS probe");
        };
        assert_eq!(cli.join(" "), "--tls -h 127.0.0.1 -p 7001 --insecure");
    }
}
