//! Durable acknowledgements (`WAIT`) and durable watches under real failovers: a
//! standalone primary with one replica, and a 3-master cluster with one replica
//! each. Concurrent appenders and watchers run while a primary is killed
//! (`kill -9`), frozen past the cluster node timeout (SIGSTOP, then SIGCONT), or
//! killed while its replica lags behind (frozen); afterwards every acknowledged
//! append must be in the store with its sequence, no sequence may have been
//! acknowledged twice, every event a watcher saw must be the stored one, every
//! watcher on a cluster (resuming with `after_sequence` whenever its stream ends, as
//! a client does) must have seen every acknowledged event within [`CATCH_UP`] after
//! the failover and caught up with the stored log, and the same store object serves
//! again without a restart. A fourth cluster fault leaves the old master silent for
//! good (a host gone from the network), which must pin no connection to it.

use adk_grpc_core::CoreSessionService;
use adk_grpc_core::{AdkError, AppendEventRequest, CreateRequest, Event, GetRequest, SessionService, WatchRequest};
use adk_grpc_store::{MinReplicas, RedisSessionBackend, ReplicaAcks, StoreConfig};
use adk_grpc_testkit::{
    FAILOVER_NODE_TIMEOUT_MS, RedisCluster, RedisPrimaryReplica, RedisServer, eventually, free_port, redis_cli,
    try_eventually, unique_prefix,
};
use futures::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio::time::sleep;

const USERS: usize = 9;
/// How long the failover may take before a test gives up.
const RECOVERY_DEADLINE: Duration = Duration::from_secs(30);
/// How late a watcher may see an acknowledged event on a cluster: the node timeout
/// plus 2 s (`docs/semantics.md`), counted from the event's acknowledgement or, for
/// an event acknowledged before the failover, from the moment appends to its session
/// were acknowledged again after the test saw the new master promoted (at once on the
/// other masters; on the failed one, once the new master has the replica writes wait
/// for, which `Fault::Vanish` also requires within this bound of the moment the new
/// master acknowledged a plain client's write with a replica's confirmation).
const CATCH_UP: Duration = Duration::from_millis(FAILOVER_NODE_TIMEOUT_MS + 2000);

async fn connect(url: &str, min_replicas: MinReplicas) -> CoreSessionService<RedisSessionBackend> {
    let config = StoreConfig {
        replica_acks: ReplicaAcks {
            min_replicas,
            ..ReplicaAcks::default()
        },
        ..StoreConfig::default()
    };
    RedisSessionBackend::connect_service(url, config)
        .await
        .expect("connect to test redis")
}

fn append_req(app: &str, user: &str, event_id: &str) -> AppendEventRequest {
    AppendEventRequest {
        timestamp_missing: false,
        app_name: app.into(),
        user_id: user.into(),
        session_id: "s".into(),
        event: Event {
            id: event_id.into(),
            ..Event::new("inv").with_author("user")
        },
        precondition: None,
    }
}

/// Creates the session as a client would: a create the replicas did not confirm in
/// time (a loaded machine) is retried, and finding the session then means the first
/// attempt stored it (the retry's reply is confirmed durable like any write).
async fn create(svc: &CoreSessionService<RedisSessionBackend>, app: &str, user: &str) {
    let attempt = || async {
        let created = svc
            .create(CreateRequest {
                app_name: app.into(),
                user_id: user.into(),
                session_id: Some("s".into()),
                ..Default::default()
            })
            .await;
        match created {
            Ok(_) | Err(AdkError::AlreadyExists(..)) => Ok(()),
            Err(err) if err.is_retryable() => Err(format!("create {user}'s session: {err}")),
            Err(err) => panic!("create {user}'s session: {err}"),
        }
    };
    eventually(RECOVERY_DEADLINE, attempt).await
}

/// Every session's log as (sequence -> event id).
async fn stored_logs(
    svc: &CoreSessionService<RedisSessionBackend>,
    app: &str,
) -> HashMap<String, BTreeMap<u64, String>> {
    let mut logs = HashMap::new();
    for user in users() {
        let session = svc
            .get(GetRequest {
                app_name: app.into(),
                user_id: user.clone(),
                session_id: "s".into(),
                ..Default::default()
            })
            .await
            .expect("read the session back");
        let log = session.events.iter().map(|e| (e.sequence, e.id.clone())).collect();
        logs.insert(user, log);
    }
    logs
}

fn users() -> Vec<String> {
    (0..USERS).map(|i| format!("u{i}")).collect()
}

/// What the appenders and watchers saw, per user: (user, sequence, event id, when).
#[derive(Default)]
struct Ledger {
    acked: Mutex<Vec<(String, u64, String, Instant)>>,
    watched: Mutex<Vec<(String, u64, String, Instant)>>,
    /// Streams that ended (or watches refused) and were resumed, per user.
    resumed: Mutex<HashMap<String, usize>>,
    stop_appenders: AtomicBool,
    stop_watchers: AtomicBool,
    /// When the test saw the new master promoted (cluster faults only).
    promoted: Mutex<Option<Instant>>,
}

impl Ledger {
    fn acked_count(&self, user: Option<&str>) -> usize {
        let acked = self.acked.lock().unwrap();
        acked.iter().filter(|(u, ..)| user.is_none_or(|user| u == user)).count()
    }
}

/// One appender per user: appends until told to stop; after a failure it retries
/// the same event id (which the store promises is safe) before moving on.
fn spawn_appenders(
    svc: &CoreSessionService<RedisSessionBackend>,
    app: &str,
    ledger: &Arc<Ledger>,
) -> Vec<JoinHandle<()>> {
    users()
        .into_iter()
        .map(|user| {
            let (svc, app, ledger) = (svc.clone(), app.to_string(), ledger.clone());
            tokio::spawn(async move {
                let mut next = 0;
                while !ledger.stop_appenders.load(Ordering::SeqCst) {
                    let event_id = format!("{user}-{next}");
                    match svc.append_event(append_req(&app, &user, &event_id)).await {
                        Ok(event) => {
                            assert_eq!(event.id, event_id);
                            ledger
                                .acked
                                .lock()
                                .unwrap()
                                .push((user.clone(), event.sequence, event_id, Instant::now()));
                            next += 1;
                        }
                        Err(err) => {
                            assert!(err.is_retryable(), "{user}: not retryable: {err:?}");
                            // The client's retry pace while the node is down (not a
                            // synchronisation): failing fast must not spin.
                            sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            })
        })
        .collect()
}

/// One watcher per user, as a client: it keeps its stream open however long it is
/// silent, and whenever the stream ends (an error, a refused watch) resumes it with
/// `after_sequence` = the last sequence it saw.
fn spawn_watchers(
    svc: &CoreSessionService<RedisSessionBackend>,
    app: &str,
    ledger: &Arc<Ledger>,
) -> Vec<JoinHandle<()>> {
    users()
        .into_iter()
        .map(|user| {
            let (svc, app, ledger) = (svc.clone(), app.to_string(), ledger.clone());
            tokio::spawn(async move {
                let mut last = 0;
                let stopped = || ledger.stop_watchers.load(Ordering::SeqCst);
                while !stopped() {
                    let watch = svc
                        .watch(WatchRequest {
                            app_name: app.clone(),
                            user_id: user.clone(),
                            session_id: "s".into(),
                            after_sequence: Some(last),
                        })
                        .await;
                    if let Ok(mut stream) = watch {
                        loop {
                            // The timeout only lets the watcher notice the end of the test;
                            // the stream stays open across it.
                            match tokio::time::timeout(Duration::from_millis(100), stream.next()).await {
                                Ok(Some(Ok(event))) => {
                                    last = event.sequence;
                                    let seen = (user.clone(), event.sequence, event.id, Instant::now());
                                    ledger.watched.lock().unwrap().push(seen);
                                }
                                Ok(Some(Err(_)) | None) => break,
                                Err(_) if stopped() => return,
                                Err(_) => {}
                            }
                        }
                    }
                    *ledger.resumed.lock().unwrap().entry(user.clone()).or_default() += 1;
                    // The client's retry pace while the node is down, not a synchronisation.
                    sleep(Duration::from_millis(20)).await;
                }
            })
        })
        .collect()
}

/// When `user`'s first entry at or after `since` in `ledger` (acknowledged or watched) was made.
fn first_at_or_after(ledger: &[(String, u64, String, Instant)], user: &str, since: Instant) -> Option<Instant> {
    ledger
        .iter()
        .filter(|(u, .., at)| u == user && *at >= since)
        .map(|(.., at)| *at)
        .min()
}

/// Waits (with a deadline) until `user` has `more` acknowledged appends beyond `from`.
async fn wait_for_acks(ledger: &Ledger, user: Option<&str>, from: usize, more: usize, what: &str) {
    let acked = || async {
        if ledger.acked_count(user) >= from + more {
            Ok(())
        } else {
            Err(format!("{what}: no {more} more acknowledged appends"))
        }
    };
    eventually(RECOVERY_DEADLINE, acked).await
}

/// Stops the workers and checks the ledger against the store: 0 acknowledged
/// appends lost, 0 sequences acknowledged twice, and 0 watcher divergence: every
/// event a watcher saw is the stored event at its sequence (none was taken back by
/// the failover), and each user's watchers, resuming with `after_sequence`, saw the
/// log in order without a gap or a repeat. With `catch_up` (a cluster, where the
/// test saw the promotion), every watcher must also have seen the whole stored log,
/// and each acknowledged event within [`CATCH_UP`] (see there).
async fn verify(
    ledger: &Ledger,
    appenders: Vec<JoinHandle<()>>,
    watchers: Vec<JoinHandle<()>>,
    svc: &CoreSessionService<RedisSessionBackend>,
    app: &str,
    catch_up: bool,
) {
    ledger.stop_appenders.store(true, Ordering::SeqCst);
    for worker in appenders {
        worker.await.expect("an appender panicked");
    }
    let logs = stored_logs(svc, app).await;
    // The last acknowledged events have CATCH_UP to reach the watchers, like every other.
    let behind = || async {
        let watched = ledger.watched.lock().unwrap();
        let mut seen: HashMap<&str, u64> = HashMap::new();
        for (user, seq, ..) in watched.iter() {
            let max = seen.entry(user.as_str()).or_default();
            *max = (*max).max(*seq);
        }
        let behind: Vec<String> = logs
            .iter()
            .filter(|(user, log)| seen.get(user.as_str()).copied().unwrap_or(0) < log.len() as u64)
            .map(|(user, log)| {
                format!(
                    "{user} saw up to {} of {}",
                    seen.get(user.as_str()).unwrap_or(&0),
                    log.len()
                )
            })
            .collect();
        if behind.is_empty() {
            Ok(())
        } else {
            Err(behind.join(", "))
        }
    };
    let caught_up = if catch_up {
        try_eventually(CATCH_UP, behind).await
    } else {
        Ok(())
    };
    ledger.stop_watchers.store(true, Ordering::SeqCst);
    for worker in watchers {
        worker.await.expect("a watcher panicked");
    }
    let acked = ledger.acked.lock().unwrap();
    let mut acked_by_seq: HashMap<(String, u64), String> = HashMap::new();
    for (user, seq, id, _) in acked.iter() {
        if let Some(other) = acked_by_seq.insert((user.clone(), *seq), id.clone()) {
            assert_eq!(&other, id, "{user}: sequence {seq} was acknowledged for two events");
        }
        let stored = logs[user].get(seq);
        assert_eq!(
            stored,
            Some(id),
            "{user}: acknowledged event {id} (sequence {seq}) is lost"
        );
    }
    for (user, log) in &logs {
        let expected: Vec<u64> = (1..=log.len() as u64).collect();
        assert_eq!(
            log.keys().copied().collect::<Vec<_>>(),
            expected,
            "{user}: sequences have gaps"
        );
    }
    let watched = ledger.watched.lock().unwrap();
    let resumed = ledger.resumed.lock().unwrap();
    let promoted = *ledger.promoted.lock().unwrap();
    let mut late = Vec::new();
    for user in users() {
        let seen: Vec<(u64, &String, Instant)> = watched
            .iter()
            .filter(|(u, ..)| *u == user)
            .map(|(_, seq, id, at)| (*seq, id, *at))
            .collect();
        for (seq, id, _) in &seen {
            assert_eq!(
                logs[&user].get(seq),
                Some(*id),
                "{user}: a watcher was shown {id} at sequence {seq}, which the store does not hold"
            );
        }
        let order: Vec<u64> = seen.iter().map(|(seq, ..)| *seq).collect();
        let expected: Vec<u64> = (1..=order.len() as u64).collect();
        assert_eq!(order, expected, "{user}: watchers saw a gap or a repeat");
        if !catch_up {
            continue;
        }
        // How late each acknowledged event reached the watcher (see CATCH_UP).
        let seen_at: HashMap<u64, Instant> = seen.iter().map(|(seq, _, at)| (*seq, *at)).collect();
        let mut missed = 0;
        let mut latest = Duration::ZERO;
        let acked_by_user = || acked.iter().filter(|(u, ..)| *u == user);
        // Appends to the session recovered with its first acknowledgement after the promotion.
        let recovered = promoted.map(|promoted| first_at_or_after(&acked, &user, promoted).unwrap_or(promoted));
        for (_, seq, _, acked_at) in acked_by_user() {
            let due = recovered.map_or(*acked_at, |recovered| recovered.max(*acked_at));
            match seen_at.get(seq) {
                Some(at) => latest = latest.max(at.saturating_duration_since(due)),
                None => missed += 1,
            }
        }
        eprintln!(
            "{user}: {} acknowledged, {} watched, {missed} missed; appends recovered {:?} after the promotion; \
             an event seen at worst {latest:?} after it was due; the stream resumed {} times",
            acked_by_user().count(),
            seen.len(),
            recovered
                .zip(promoted)
                .map(|(recovered, promoted)| recovered - promoted),
            resumed.get(&user).unwrap_or(&0),
        );
        if missed > 0 || latest > CATCH_UP {
            late.push(format!(
                "{user}: {missed} acknowledged events never seen, the latest seen {latest:?} after it was due"
            ));
        }
    }
    assert!(
        late.is_empty(),
        "watchers did not catch up within {CATCH_UP:?} of the promotion: {}",
        late.join("; ")
    );
    if let Err(behind) = caught_up {
        panic!("watchers did not catch up with the stored log within {CATCH_UP:?}: {behind}");
    }
    assert!(!acked.is_empty());
    assert!(!watched.is_empty());
    eprintln!("acknowledged: {}; watched: {}", acked.len(), watched.len());
}

/// The regression test of durable acknowledgements: while the only replica is frozen,
/// a write cannot be confirmed, so it fails with UNAVAILABLE (before, it was
/// acknowledged by the primary alone); once the replica is back, retrying the
/// same event id succeeds with the sequence the first attempt took.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_is_acknowledged_only_once_the_replica_has_it() {
    let mut pair = RedisPrimaryReplica::start().await;
    // One replica required outright: `auto` counts the replicas the primary reports, and
    // just after the replica joined it may not report it yet (a window docs/redis.md states).
    let svc = connect(&pair.primary.url(), MinReplicas::Exactly(1)).await;
    let app = unique_prefix("durable");
    create(&svc, &app, "u0").await;

    pair.replica.send_signal("STOP");
    let err = svc.append_event(append_req(&app, "u0", "e1")).await.unwrap_err();
    assert!(matches!(err, AdkError::Unavailable(_)), "{err:?}");
    assert!(err.to_string().contains("replicas confirmed"), "{err}");
    assert!(err.to_string().contains("retrying"), "{err}");
    // The retry of an unconfirmed write is not confirmed either while the replica is frozen.
    let retry = svc.append_event(append_req(&app, "u0", "e1")).await.unwrap_err();
    assert!(matches!(retry, AdkError::Unavailable(_)), "{retry:?}");
    let created = svc
        .create(CreateRequest {
            app_name: app.clone(),
            user_id: "u1".into(),
            session_id: Some("s".into()),
            ..Default::default()
        })
        .await;
    assert!(matches!(created, Err(AdkError::Unavailable(_))), "{created:?}");
    // Opting out (0 replicas) acknowledges on the primary alone.
    let unsafe_svc = connect(&pair.primary.url(), MinReplicas::Exactly(0)).await;
    let e2 = unsafe_svc.append_event(append_req(&app, "u0", "e2")).await.unwrap();
    assert_eq!(e2.sequence, 2);

    pair.replica.send_signal("CONT");
    let e1 = svc.append_event(append_req(&app, "u0", "e1")).await.unwrap();
    assert_eq!(e1.sequence, 1, "the retry returns the stored event");
    let e3 = svc.append_event(append_req(&app, "u0", "e3")).await.unwrap();
    assert_eq!(e3.sequence, 3);
}

/// The regression test of durable watches: an event whose append no replica
/// confirmed is not shown to watchers (before, `XREAD` showed it at once); the
/// failover then takes it back and the next event gets its sequence, and a watcher
/// that resumes sees exactly the store's log: no sequence it saw changed its event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watcher_never_sees_an_event_a_failover_takes_back() {
    let mut pair = RedisPrimaryReplica::start().await;
    let svc = connect(&pair.primary.url(), MinReplicas::Exactly(1)).await;
    let app = unique_prefix("watchlost");
    create(&svc, &app, "u0").await;
    let watch = |svc: CoreSessionService<RedisSessionBackend>, after: u64| {
        let app = app.clone();
        async move {
            svc.watch(WatchRequest {
                app_name: app,
                user_id: "u0".into(),
                session_id: "s".into(),
                after_sequence: Some(after),
            })
            .await
            .expect("watch")
        }
    };
    let mut watcher = watch(svc.clone(), 0).await;
    svc.append_event(append_req(&app, "u0", "e0")).await.unwrap();
    let first = tokio::time::timeout(RECOVERY_DEADLINE, watcher.next()).await;
    let first = first.expect("the durable event arrives").unwrap().unwrap();
    assert_eq!((first.sequence, first.id.as_str()), (1, "e0"));

    // A failover the old primary does not know of yet (a partition): the replica takes
    // over, and the old primary still runs writes that nobody replicates.
    pair.promote_replica().await;
    let err = svc.append_event(append_req(&app, "u0", "e1")).await.unwrap_err();
    assert!(matches!(err, AdkError::Unavailable(_)), "{err:?}");
    // e1 is on the old primary only: for as long as no replica confirms it (several
    // confirmation timeouts here), the watcher shows nothing.
    let shown = tokio::time::timeout(Duration::from_secs(2), watcher.next()).await;
    assert!(shown.is_err(), "a watcher was shown an unconfirmed event: {shown:?}");

    // The old primary dies with e1; the new one never had it.
    pair.primary.kill9().await;
    let promoted = connect(&pair.replica.url(), MinReplicas::Exactly(0)).await;
    let e2 = promoted.append_event(append_req(&app, "u0", "e2")).await.unwrap();
    assert_eq!(e2.sequence, 2, "e1 was never acknowledged, so its sequence is free");

    let mut resumed = watch(promoted.clone(), first.sequence).await;
    let next = tokio::time::timeout(RECOVERY_DEADLINE, resumed.next()).await;
    let next = next.expect("the next event arrives").unwrap().unwrap();
    assert_eq!((next.sequence, next.id.as_str()), (2, "e2"));
}

/// `auto` never falls back to acknowledging on a primary alone once it has seen a
/// replica: when the only replica is gone (as after a failover, until the old primary
/// rejoins), writes fail with UNAVAILABLE instead of being acknowledged unreplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn auto_keeps_requiring_a_replica_once_it_has_seen_one() {
    let mut pair = RedisPrimaryReplica::start().await;
    let svc = connect(&pair.primary.url(), MinReplicas::Auto).await;
    let app = unique_prefix("floor");
    create(&svc, &app, "u0").await;
    svc.append_event(append_req(&app, "u0", "e0")).await.unwrap();

    pair.replica.kill9().await;
    // Once the primary reports no replica (and the store has re-read the count), every
    // write is refused; before, `auto` dropped to 0 replicas and acknowledged it alone.
    let next = std::sync::atomic::AtomicUsize::new(1);
    let refusal = eventually(RECOVERY_DEADLINE, || async {
        let id = format!("e{}", next.load(Ordering::SeqCst));
        match svc.append_event(append_req(&app, "u0", &id)).await {
            Ok(_) => {
                next.fetch_add(1, Ordering::SeqCst);
                Err("writes were still acknowledged without a replica".to_string())
            }
            Err(err) => Ok(err),
        }
    })
    .await;
    assert!(matches!(refusal, AdkError::Unavailable(_)), "{refusal:?}");
    assert!(refusal.to_string().contains("only 0 of 1 replicas"), "{refusal}");

    pair.replica.restart().await;
    let id = format!("e{}", next.load(Ordering::SeqCst));
    eventually(RECOVERY_DEADLINE, || async {
        let appended = svc.append_event(append_req(&app, "u0", &id)).await;
        appended
            .map(drop)
            .map_err(|err| format!("writes did not recover once the replica was back: {err}"))
    })
    .await;
}

/// More replicas than the primary has: every write fails with UNAVAILABLE, nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn too_few_replicas_fail_writes_as_unavailable() {
    let pair = RedisPrimaryReplica::start().await;
    let app = unique_prefix("two");
    create(&connect(&pair.primary.url(), MinReplicas::Auto).await, &app, "u0").await;
    let svc = connect(&pair.primary.url(), MinReplicas::Exactly(2)).await;
    let err = svc.append_event(append_req(&app, "u0", "e1")).await.unwrap_err();
    assert!(err.to_string().contains("only 1 of 2 replicas"), "{err}");
}

/// Standalone primary + replica: kill -9 the primary under concurrent appends and
/// watches, promote the replica: every acknowledged append is on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_appends_survive_losing_the_primary() {
    let mut pair = RedisPrimaryReplica::start().await;
    let svc = connect(&pair.primary.url(), MinReplicas::Auto).await;
    let app = unique_prefix("promote");
    for user in users() {
        create(&svc, &app, &user).await;
    }
    let ledger = Arc::new(Ledger::default());
    let appenders = spawn_appenders(&svc, &app, &ledger);
    let watchers = spawn_watchers(&svc, &app, &ledger);
    wait_for_acks(&ledger, None, 0, 300, "before the crash").await;

    pair.primary.kill9().await;
    pair.promote_replica().await;
    let promoted = connect(&pair.replica.url(), MinReplicas::Auto).await;
    // The old service object's connection stays on the dead primary's address (a
    // standalone URL names one server), so its watchers cannot catch up: not checked.
    verify(&ledger, appenders, watchers, &promoted, &app, false).await;

    // The promoted primary takes appends, after the last acknowledged sequence.
    let last = stored_logs(&promoted, &app).await["u0"].len() as u64;
    let next = promoted.append_event(append_req(&app, "u0", "after")).await.unwrap();
    assert_eq!(next.sequence, last + 1);
}

/// Which fault a cluster test injects into the master of user u0's session.
enum Fault {
    Kill,
    /// SIGSTOP past the node timeout (until a replica took over), then SIGCONT.
    Freeze,
    /// The master's replica falls behind (frozen while the master takes appends),
    /// then the master is killed and the stale replica takes over.
    LaggingReplica,
    /// The master goes silent for good, as a host that vanished from the network
    /// (SIGSTOP until the test ends: connections to it neither answer nor fail).
    /// Its shard has a second replica, so the new master has one to confirm writes.
    Vanish,
}

/// Adds a node to the cluster as one more replica of the master on `master_port`, and
/// returns once it is in sync.
async fn add_replica(master_port: u16) -> RedisServer {
    let bus_port = free_port().to_string();
    let node_timeout = FAILOVER_NODE_TIMEOUT_MS.to_string();
    let node = RedisServer::start_with_args(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        &node_timeout,
        "--cluster-port",
        &bus_port,
    ])
    .await;
    let master_id = node_query::<String>(master_port, redis::cmd("CLUSTER").arg("MYID").clone())
        .await
        .expect("the master's node id");
    let (node_address, master_address) = (format!("127.0.0.1:{}", node.port()), format!("127.0.0.1:{master_port}"));
    redis_cli(&[
        "--cluster",
        "add-node",
        &node_address,
        &master_address,
        "--cluster-slave",
        "--cluster-master-id",
        &master_id,
    ])
    .await;
    eventually(RECOVERY_DEADLINE, || async {
        let info = node_query::<String>(master_port, redis::cmd("INFO").arg("replication").clone()).await;
        let online = info.map_or(0, |info| {
            info.lines().filter(|line| line.contains("state=online")).count()
        });
        if online == 2 {
            Ok(())
        } else {
            Err(format!("{online} of 2 replicas online"))
        }
    })
    .await;
    node
}

/// `pipe`'s replies from the node on `port`, or None when it does not answer within a second.
async fn node_pipeline<T: redis::FromRedisValue>(port: u16, pipe: redis::Pipeline) -> Option<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let query = async {
        pipe.query_async::<T>(&mut client.get_multiplexed_async_connection().await?)
            .await
    };
    tokio::time::timeout(Duration::from_secs(1), query).await.ok()?.ok()
}

/// A reply from the node on `port`, or None when it does not answer within a second.
async fn node_query<T: redis::FromRedisValue>(port: u16, cmd: redis::Cmd) -> Option<T> {
    let mut pipe = redis::pipe();
    pipe.add_command(cmd);
    node_pipeline::<(T,)>(port, pipe).await.map(|(reply,)| reply)
}

/// Waits until a node other than the one on `failed_port` serves `key`'s slot as
/// master, as `observer` sees it, with the cluster state ok; returns that node's port.
async fn wait_for_new_master(observer: u16, key: &str, failed_port: u16) -> u16 {
    try_eventually(RECOVERY_DEADLINE, || async {
        let slot: Option<u16> = node_query(observer, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).clone()).await;
        let ranges: Option<Vec<Vec<redis::Value>>> =
            node_query(observer, redis::cmd("CLUSTER").arg("SLOTS").clone()).await;
        let state_ok = node_query::<String>(observer, redis::cmd("CLUSTER").arg("INFO").clone())
            .await
            .is_some_and(|info| info.lines().any(|line| line.trim() == "cluster_state:ok"));
        let number = |value: Option<&redis::Value>| value.and_then(|v| redis::from_redis_value_ref::<u16>(v).ok());
        let master = slot.zip(ranges).and_then(|(slot, ranges)| {
            ranges.iter().find_map(|range| {
                let (first, last) = (number(range.first())?, number(range.get(1))?);
                match range.get(2) {
                    Some(redis::Value::Array(master)) if (first..=last).contains(&slot) => number(master.get(1)),
                    _ => None,
                }
            })
        });
        match master {
            Some(port) if port != failed_port && state_ok => Ok(port),
            _ => Err(format!("no replica took over from the node on port {failed_port}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Waits until the master on `port` acknowledges a write beside `key` (same slot) with
/// a replica confirming it, as a plain client sees it.
async fn wait_for_confirmed_write(port: u16, key: &str) {
    let probe = format!("{key}:probe");
    eventually(RECOVERY_DEADLINE, || async {
        let mut pipe = redis::pipe();
        pipe.cmd("SET").arg(&probe).arg("").ignore().cmd("WAIT").arg(1).arg(500);
        match node_pipeline::<(i64,)>(port, pipe).await {
            Some((confirmed,)) if confirmed >= 1 => Ok(()),
            other => Err(format!("the master on port {port} confirmed no write: {other:?}")),
        }
    })
    .await;
}

async fn cluster_failover(fault: Fault) {
    let mut cluster = RedisCluster::start_with_replicas(3).await;
    let svc = connect(&cluster.url(), MinReplicas::Auto).await;
    let app = unique_prefix("failover");
    for user in users() {
        create(&svc, &app, &user).await;
    }
    let victim_key = format!("adk:sess:{{{app}:u0}}:s");
    let victim = cluster.master_of(&victim_key, None).await.expect("u0's master");
    let _extra_replica = match fault {
        Fault::Vanish => Some(add_replica(cluster.ports()[victim]).await),
        _ => None,
    };

    let ledger = Arc::new(Ledger::default());
    let appenders = spawn_appenders(&svc, &app, &ledger);
    let watchers = spawn_watchers(&svc, &app, &ledger);
    wait_for_acks(&ledger, None, 0, 300, "before the fault").await;
    let promoted = || *ledger.promoted.lock().unwrap() = Some(Instant::now());

    match fault {
        Fault::Kill => {
            cluster.kill9(victim).await;
            cluster.wait_for_failover(&victim_key, victim).await;
            promoted();
            // As Kubernetes restarts a crashed pod: it rejoins as the new master's
            // replica, and u0's writes can be confirmed by a replica again.
            cluster.restart(victim).await;
        }
        Fault::Freeze => {
            cluster.send_signal(victim, "STOP");
            cluster.wait_for_failover(&victim_key, victim).await;
            promoted();
            cluster.send_signal(victim, "CONT");
        }
        Fault::LaggingReplica => {
            let replica = cluster.replica_of(victim).await.expect("u0's master has a replica");
            cluster.send_signal(replica, "STOP");
            // The other users keep appending meanwhile: u0's master runs u0's appends
            // too, which its frozen replica does not get.
            let acked = ledger.acked_count(None);
            wait_for_acks(&ledger, None, acked, 200, "while the replica lags").await;
            cluster.kill9(victim).await;
            cluster.send_signal(replica, "CONT");
            cluster.wait_for_failover(&victim_key, victim).await;
            promoted();
            cluster.restart(victim).await;
        }
        Fault::Vanish => {
            let ports = cluster.ports();
            let observer = ports[(0..ports.len()).find(|&node| node != victim).expect("another node")];
            cluster.send_signal(victim, "STOP");
            let new_master = wait_for_new_master(observer, &victim_key, ports[victim]).await;
            // The clock starts once the new master serves u0's slot as writes need it:
            // its other replica follows it by itself, and a freshly promoted master
            // may stall a while (AOF fsync on a busy disk) for every client alike.
            wait_for_confirmed_write(new_master, &victim_key).await;
            promoted();
            // It stays frozen: the store must recover without ever hearing from it.
        }
    }
    // The same store object recovers by itself: u0's appends succeed again.
    let u0_acked = ledger.acked_count(Some("u0"));
    wait_for_acks(&ledger, Some("u0"), u0_acked, 20, "after the failover").await;
    if matches!(fault, Fault::Vanish) {
        // Once the new master acknowledged a plain client's write with a replica's
        // confirmation, nothing but the store's connection stood between it and u0's
        // next acknowledged append.
        let promoted = ledger.promoted.lock().unwrap().expect("the promotion was seen");
        let recovered =
            first_at_or_after(&ledger.acked.lock().unwrap(), "u0", promoted).expect("u0's appends recovered");
        assert!(
            recovered - promoted <= CATCH_UP,
            "u0's appends recovered {:?} after the promotion, more than {CATCH_UP:?}",
            recovered - promoted
        );
    }
    verify(&ledger, appenders, watchers, &svc, &app, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_kill9_of_a_master_loses_no_acknowledged_append() {
    cluster_failover(Fault::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_frozen_master_loses_no_acknowledged_append() {
    cluster_failover(Fault::Freeze).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_master_lost_with_a_lagging_replica_loses_no_acknowledged_append() {
    cluster_failover(Fault::LaggingReplica).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_master_gone_silent_for_good_pins_no_connection() {
    cluster_failover(Fault::Vanish).await;
}
