//! Durable acknowledgements (`WAIT`) and durable watches under real failovers: a
//! standalone primary with one replica, and a 3-master cluster with one replica
//! each. Concurrent appenders and watchers run while a primary is killed
//! (`kill -9`), frozen past the cluster node timeout (SIGSTOP, then SIGCONT), or
//! killed while its replica lags behind (frozen); afterwards every acknowledged
//! append must be in the store with its sequence, no sequence may have been
//! acknowledged twice, every event a watcher saw must be the stored one, and the
//! same store object serves again without a restart.

use adk_core::CoreSessionService;
use adk_core::{AdkError, AppendEventRequest, CreateRequest, Event, GetRequest, SessionService, WatchRequest};
use adk_store::{MinReplicas, RedisSessionBackend, ReplicaAcks, StoreConfig};
use adk_testkit::{RedisCluster, RedisPrimaryReplica, eventually, unique_prefix};
use futures::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::sleep;

const USERS: usize = 9;
/// How long the failover may take before a test gives up.
const RECOVERY_DEADLINE: Duration = Duration::from_secs(30);

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

/// What the appenders and watchers saw, per user: (sequence, event id).
#[derive(Default)]
struct Ledger {
    acked: Mutex<Vec<(String, u64, String)>>,
    watched: Mutex<Vec<(String, u64, String)>>,
    stop: AtomicBool,
}

impl Ledger {
    fn acked_count(&self, user: Option<&str>) -> usize {
        let acked = self.acked.lock().unwrap();
        acked
            .iter()
            .filter(|(u, _, _)| user.is_none_or(|user| u == user))
            .count()
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
                while !ledger.stop.load(Ordering::SeqCst) {
                    let event_id = format!("{user}-{next}");
                    match svc.append_event(append_req(&app, &user, &event_id)).await {
                        Ok(event) => {
                            assert_eq!(event.id, event_id);
                            ledger
                                .acked
                                .lock()
                                .unwrap()
                                .push((user.clone(), event.sequence, event_id));
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

/// One watcher per user, resuming with `after_sequence` whenever its stream breaks.
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
                while !ledger.stop.load(Ordering::SeqCst) {
                    let watch = svc
                        .watch(WatchRequest {
                            app_name: app.clone(),
                            user_id: user.clone(),
                            session_id: "s".into(),
                            after_sequence: Some(last),
                        })
                        .await;
                    let Ok(mut stream) = watch else {
                        // The client's retry pace while the node is down, not a synchronisation.
                        sleep(Duration::from_millis(20)).await;
                        continue;
                    };
                    while let Ok(Some(Ok(event))) =
                        tokio::time::timeout(Duration::from_millis(500), stream.next()).await
                    {
                        last = event.sequence;
                        ledger
                            .watched
                            .lock()
                            .unwrap()
                            .push((user.clone(), event.sequence, event.id));
                        if ledger.stop.load(Ordering::SeqCst) {
                            break;
                        }
                    }
                }
            })
        })
        .collect()
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
/// log in order without a gap or a repeat.
async fn verify(
    ledger: &Ledger,
    workers: Vec<JoinHandle<()>>,
    svc: &CoreSessionService<RedisSessionBackend>,
    app: &str,
) {
    ledger.stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.expect("a worker panicked");
    }
    let logs = stored_logs(svc, app).await;
    let acked = ledger.acked.lock().unwrap();
    let mut acked_by_seq: HashMap<(String, u64), String> = HashMap::new();
    for (user, seq, id) in acked.iter() {
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
    for user in users() {
        let seen: Vec<(u64, &String)> = watched
            .iter()
            .filter(|(u, _, _)| *u == user)
            .map(|(_, seq, id)| (*seq, id))
            .collect();
        for (seq, id) in &seen {
            assert_eq!(
                logs[&user].get(seq),
                Some(*id),
                "{user}: a watcher was shown {id} at sequence {seq}, which the store does not hold"
            );
        }
        let order: Vec<u64> = seen.iter().map(|(seq, _)| *seq).collect();
        let expected: Vec<u64> = (1..=order.len() as u64).collect();
        assert_eq!(order, expected, "{user}: watchers saw a gap or a repeat");
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
    // just after the replica joined it may not report it yet (a window the README states).
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
    let mut workers = spawn_appenders(&svc, &app, &ledger);
    workers.extend(spawn_watchers(&svc, &app, &ledger));
    wait_for_acks(&ledger, None, 0, 300, "before the crash").await;

    pair.primary.kill9().await;
    pair.promote_replica().await;
    let promoted = connect(&pair.replica.url(), MinReplicas::Auto).await;
    verify(&ledger, workers, &promoted, &app).await;

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

    let ledger = Arc::new(Ledger::default());
    let mut workers = spawn_appenders(&svc, &app, &ledger);
    workers.extend(spawn_watchers(&svc, &app, &ledger));
    wait_for_acks(&ledger, None, 0, 300, "before the fault").await;

    match fault {
        Fault::Kill => {
            cluster.kill9(victim).await;
            cluster.wait_for_failover(&victim_key, victim).await;
            // As Kubernetes restarts a crashed pod: it rejoins as the new master's
            // replica, and u0's writes can be confirmed by a replica again.
            cluster.restart(victim).await;
        }
        Fault::Freeze => {
            cluster.send_signal(victim, "STOP");
            cluster.wait_for_failover(&victim_key, victim).await;
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
            cluster.restart(victim).await;
        }
    }
    // The same store object recovers by itself: u0's appends succeed again.
    let u0_acked = ledger.acked_count(Some("u0"));
    wait_for_acks(&ledger, Some("u0"), u0_acked, 20, "after the failover").await;
    verify(&ledger, workers, &svc, &app).await;
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
