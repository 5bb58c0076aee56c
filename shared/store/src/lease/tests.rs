//! The contracts every lease backend keeps, run against each.

use super::memory::InMemorySessionLease;
use super::redis::RedisSessionLease;
use crate::redis::durability::ReplicaAcks;
use crate::redis::keys::RUNS_INDEX;
use adk_grpc_core::{Acquire, LeaseKey, Renewal, RunRecord, SessionLease, owner_invocation};
use adk_grpc_testkit::RedisServer;
use futures::StreamExt;
use std::time::Duration;

fn key(session: &str) -> LeaseKey {
    LeaseKey {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: session.into(),
    }
}

fn acquired() -> Acquire {
    Acquire::Acquired { interrupted: None }
}

/// The contract every backend keeps.
async fn lease_contract(lease: &dyn SessionLease) {
    let ttl = Duration::from_secs(30);
    let k = key("s1");
    assert_eq!(lease.acquire(&k, "a", ttl).await.unwrap(), acquired());
    assert_eq!(lease.acquire(&k, "b", ttl).await.unwrap(), Acquire::Held("a".into()));
    // Re-acquiring one's own lease extends it.
    assert_eq!(lease.acquire(&k, "a", ttl).await.unwrap(), acquired());
    // Other sessions are independent.
    assert_eq!(lease.acquire(&key("s2"), "b", ttl).await.unwrap(), acquired());
    // Only the holder renews or releases.
    assert_eq!(lease.renew(&k, "a", ttl).await.unwrap(), Renewal::Held);
    assert_eq!(lease.renew(&k, "b", ttl).await.unwrap(), Renewal::Lost);
    lease.release(&k, "b").await.unwrap();
    assert_eq!(lease.acquire(&k, "b", ttl).await.unwrap(), Acquire::Held("a".into()));
    lease.release(&k, "a").await.unwrap();
    assert_eq!(lease.renew(&k, "a", ttl).await.unwrap(), Renewal::Lost);
    // Released: the next holder finds nothing interrupted.
    assert_eq!(lease.acquire(&k, "b", ttl).await.unwrap(), acquired());

    // A cancel request reaches only the named holder: on its next renewal and
    // on every process's cancel_requests.
    let mut requests = lease.cancel_requests();
    assert!(!lease.request_cancel(&k, "a").await.unwrap(), "a holds nothing");
    assert!(lease.request_cancel(&k, "b").await.unwrap());
    assert_eq!(lease.renew(&k, "b", ttl).await.unwrap(), Renewal::CancelRequested);
    let heard = tokio::time::timeout(Duration::from_secs(10), requests.next()).await;
    assert_eq!(heard.expect("the request is heard").as_deref(), Some("b"));
    assert_eq!(
        lease.renew(&key("s2"), "b", ttl).await.unwrap(),
        Renewal::Held,
        "per session"
    );

    // A holder that stops renewing loses the lease after its TTL, and then
    // cannot take back or delete the new holder's lease; the new holder learns
    // that the dead one never released it (it was interrupted).
    let k = key("s3");
    let short = Duration::from_millis(100);
    assert_eq!(lease.acquire(&k, "dead", short).await.unwrap(), acquired());
    // Held until the TTL lapses; then "next" takes it (asking changes nothing meanwhile).
    let next = adk_grpc_testkit::eventually(Duration::from_secs(5), || async {
        match lease.acquire(&k, "next", ttl).await.unwrap() {
            Acquire::Held(holder) => Err(format!("still held by {holder}")),
            acquired => Ok(acquired),
        }
    })
    .await;
    assert_eq!(
        next,
        Acquire::Acquired {
            interrupted: Some("dead".into())
        }
    );
    assert_eq!(lease.renew(&k, "dead", ttl).await.unwrap(), Renewal::Lost);
    assert!(!lease.request_cancel(&k, "dead").await.unwrap());
    lease.release(&k, "dead").await.unwrap();
    assert_eq!(
        lease.acquire(&k, "other", ttl).await.unwrap(),
        Acquire::Held("next".into())
    );
    // In turn: waiting owners take the lease in the order they first asked; one that
    // stops asking loses its place.
    let k4 = key("s4");
    let patience = Duration::from_millis(300);
    assert_eq!(lease.acquire(&k4, "running", ttl).await.unwrap(), acquired());
    for waiting in ["first", "gone", "second"] {
        let turn = lease.acquire_in_turn(&k4, waiting, ttl, patience).await.unwrap();
        assert_eq!(turn, Acquire::Held("running".into()), "{waiting} waits");
    }
    lease.release(&k4, "running").await.unwrap();
    let early = lease.acquire_in_turn(&k4, "second", ttl, patience).await.unwrap();
    assert_eq!(early, Acquire::Held("first".into()), "not second's turn yet");
    assert_eq!(
        lease.acquire_in_turn(&k4, "first", ttl, patience).await.unwrap(),
        acquired()
    );
    lease.release(&k4, "first").await.unwrap();
    // "gone" stopped asking: once its patience lapses, "second" (still asking) is next.
    let second = adk_grpc_testkit::eventually(Duration::from_secs(5), || async {
        match lease.acquire_in_turn(&k4, "second", ttl, patience).await.unwrap() {
            Acquire::Held(ahead) => Err(format!("still behind {ahead}")),
            acquired => Ok(acquired),
        }
    })
    .await;
    assert_eq!(second, acquired());

    // Reported once: after a release the next holder finds nothing interrupted.
    lease.release(&k, "next").await.unwrap();
    assert_eq!(lease.acquire(&k, "other", ttl).await.unwrap(), acquired());
}

#[tokio::test]
async fn in_memory_lease_keeps_the_contract() {
    lease_contract(&InMemorySessionLease::new()).await;
}

/// The resumable-run contract every backend keeps: a recorded run whose lease
/// lapses is claimed once, under a new owner token that fences the dead one off;
/// the session is busy with it until then; a cancel drops it; a hand-over makes it
/// due at once; a finished run leaves nothing to claim.
async fn resumable_run_contract(lease: &dyn SessionLease) {
    let apps = vec!["app".to_string()];
    let short = Duration::from_millis(200);
    let ttl = Duration::from_secs(30);
    let record = |session: &str| RunRecord {
        key: key(session),
        invocation_id: format!("e-{session}"),
        options: format!("{{\"session\":\"{session}\"}}"),
    };
    // Recorded only under one's own lease.
    assert!(!lease.register_run(&record("r1"), "e-r1", short).await.unwrap());
    assert_eq!(lease.acquire(&key("r1"), "e-r1", short).await.unwrap(), acquired());
    assert!(lease.register_run(&record("r1"), "e-r1", short).await.unwrap());
    assert_eq!(
        lease.claim_lapsed(&apps, ttl, 10).await.unwrap(),
        vec![],
        "held: not due"
    );
    // The holder dies: once its lease lapses the session is busy with the run, not free.
    let claimed = adk_grpc_testkit::eventually(Duration::from_secs(10), || async {
        let claimed = lease.claim_lapsed(&apps, ttl, 10).await.unwrap();
        if claimed.is_empty() {
            Err("not claimed yet".to_string())
        } else {
            Ok(claimed)
        }
    })
    .await;
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let run = &claimed[0];
    assert_eq!(run.record, record("r1"));
    assert!(run.owner.starts_with("e-r1@") && run.owner.len() > 5, "{}", run.owner);
    assert_eq!(owner_invocation(&run.owner), "e-r1");
    assert!(
        lease.claim_lapsed(&apps, ttl, 10).await.unwrap().is_empty(),
        "claimed once"
    );
    assert_eq!(
        lease.renew(&key("r1"), "e-r1", ttl).await.unwrap(),
        Renewal::Lost,
        "the dead owner is fenced off"
    );
    assert_eq!(lease.renew(&key("r1"), &run.owner, ttl).await.unwrap(), Renewal::Held);
    assert_eq!(
        lease.acquire(&key("r1"), "e-new", ttl).await.unwrap(),
        Acquire::Held(run.owner.clone())
    );
    // A cancel naming the invocation reaches its claim.
    assert!(lease.request_cancel(&key("r1"), "e-r1").await.unwrap());
    assert_eq!(
        lease.renew(&key("r1"), &run.owner, ttl).await.unwrap(),
        Renewal::CancelRequested
    );
    // Finished: released, nothing left to claim, the session free.
    lease.release(&key("r1"), &run.owner).await.unwrap();
    assert_eq!(lease.acquire(&key("r1"), "e-next", ttl).await.unwrap(), acquired());
    lease.release(&key("r1"), "e-next").await.unwrap();

    // Awaiting resumption (here handed over), the session is busy with the run; a
    // cancel drops it.
    assert_eq!(lease.acquire(&key("r2"), "e-r2", ttl).await.unwrap(), acquired());
    assert!(lease.register_run(&record("r2"), "e-r2", ttl).await.unwrap());
    lease.hand_over(&key("r2"), "e-r2").await.unwrap();
    let busy = match lease.acquire(&key("r2"), "e-new", ttl).await.unwrap() {
        Acquire::Held(holder) => holder,
        other => panic!("not busy: {other:?}"),
    };
    assert_eq!(busy, "e-r2", "busy with the run awaiting resumption");
    assert!(lease.request_cancel(&key("r2"), "e-r2").await.unwrap(), "dropped");
    assert!(
        lease.claim_lapsed(&apps, ttl, 10).await.unwrap().is_empty(),
        "nobody resumes it"
    );
    assert_eq!(
        lease.acquire(&key("r2"), "e-new", ttl).await.unwrap(),
        Acquire::Acquired {
            interrupted: Some("e-r2".into())
        },
        "the next run closes it"
    );

    // Handed over: due at once, for the apps of the claimant only.
    assert_eq!(lease.acquire(&key("r3"), "e-r3", ttl).await.unwrap(), acquired());
    assert!(lease.register_run(&record("r3"), "e-r3", ttl).await.unwrap());
    lease.hand_over(&key("r3"), "e-r3").await.unwrap();
    assert!(
        lease
            .claim_lapsed(&["other".to_string()], ttl, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let claimed = lease.claim_lapsed(&apps, ttl, 10).await.unwrap();
    assert_eq!(
        claimed.iter().map(|c| c.record.clone()).collect::<Vec<_>>(),
        vec![record("r3")]
    );
    assert!(
        claimed[0].lapsed_for < Duration::from_secs(5),
        "{:?}",
        claimed[0].lapsed_for
    );
    // Recorded as its lease is taken, in one step, and only if it is taken: refused
    // behind a holder it leaves no record (the freed session is not busy with it).
    assert_eq!(lease.acquire(&key("r5"), "e-other", ttl).await.unwrap(), acquired());
    assert_eq!(
        lease.acquire_run(&record("r5"), "e-r5", ttl, None).await.unwrap(),
        Acquire::Held("e-other".into())
    );
    lease.release(&key("r5"), "e-other").await.unwrap();
    assert_eq!(lease.acquire(&key("r5"), "e-x", ttl).await.unwrap(), acquired());
    lease.release(&key("r5"), "e-x").await.unwrap();
    // Taken (plainly, or in turn) it is recorded: a hand-over makes it claimable.
    let patience = Duration::from_secs(5);
    for (session, patience) in [("r5", None), ("r6", Some(patience))] {
        let owner = format!("e-{session}");
        let taken = lease
            .acquire_run(&record(session), &owner, ttl, patience)
            .await
            .unwrap();
        assert_eq!(taken, acquired(), "{session}");
        lease.hand_over(&key(session), &owner).await.unwrap();
        let claimed = lease.claim_lapsed(&apps, ttl, 10).await.unwrap();
        assert_eq!(
            claimed.iter().map(|c| c.record.clone()).collect::<Vec<_>>(),
            vec![record(session)]
        );
        lease.release(&key(session), &claimed[0].owner).await.unwrap();
    }
    // A run not recorded is simply released by a hand-over.
    assert_eq!(lease.acquire(&key("r4"), "e-r4", ttl).await.unwrap(), acquired());
    lease.hand_over(&key("r4"), "e-r4").await.unwrap();
    assert_eq!(lease.acquire(&key("r4"), "e-x", ttl).await.unwrap(), acquired());
}

#[tokio::test]
async fn in_memory_lease_keeps_the_resumable_run_contract() {
    resumable_run_contract(&InMemorySessionLease::new()).await;
}

#[tokio::test]
async fn redis_lease_keeps_the_resumable_run_contract() {
    let server = RedisServer::start().await;
    let lease = RedisSessionLease::connect(&server.url(), ReplicaAcks::default())
        .await
        .unwrap();
    resumable_run_contract(&lease).await;
    let conn = server.connection().await;
    // A finished run's removal is sent after its release returns.
    adk_grpc_testkit::eventually(Duration::from_secs(10), || {
        let mut conn = conn.clone();
        async move {
            let indexed: Vec<String> = redis::cmd("ZRANGE")
                .arg(RUNS_INDEX)
                .arg(0)
                .arg(-1)
                .query_async(&mut conn)
                .await
                .unwrap();
            if indexed == [r#"["app","u","r3"]"#] {
                Ok(())
            } else {
                Err(format!("finished and dropped runs leave the index: {indexed:?}"))
            }
        }
    })
    .await;
}

#[tokio::test]
async fn redis_cluster_lease_keeps_the_resumable_run_contract() {
    let cluster = adk_grpc_testkit::shared::cluster().await;
    let lease = RedisSessionLease::connect(&cluster.url(), ReplicaAcks::default())
        .await
        .unwrap();
    resumable_run_contract(&lease).await;
}

#[tokio::test]
async fn redis_lease_keeps_the_contract() {
    let server = RedisServer::start().await;
    let lease = RedisSessionLease::connect(&server.url(), ReplicaAcks::default())
        .await
        .unwrap();
    lease_contract(&lease).await;
    // The key carries the session's hash tag and the owner token.
    let mut conn = server.connection().await;
    let holder: String = redis::cmd("GET")
        .arg("adk:lease:{app:u}:s1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(holder, "b");
}
