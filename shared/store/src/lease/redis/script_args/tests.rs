//! Each lease script reads exactly what its builder sends and, against a real Redis,
//! writes each input where it belongs.

use super::*;
use crate::lease::redis::CANCEL_CHANNEL;
use adk_grpc_testkit::RedisServer;
use futures::StreamExt;
use redis::FromRedisValue;

#[test]
fn every_lease_script_reads_exactly_what_its_builder_sends() {
    use crate::redis::script_args::check::assert_reads_what_is_sent;
    let (lease, owner, ttl) = ("lease", "a", Duration::from_secs(1));
    let run = Some(RunToRecord {
        invocation_id: "e-1",
        options: "{}",
    });
    let index = Some(RunsIndex {
        key: "adk:runs",
        member: "m",
    });
    let acquire = AcquireArgs {
        lease,
        owner,
        ttl,
        run,
        index,
    };
    assert_reads_what_is_sent("acquire", &acquire, 0, &acquire);
    let patience = ttl;
    let in_turn = AcquireInTurnArgs {
        lease,
        owner,
        ttl,
        patience,
        run,
        index,
    };
    assert_reads_what_is_sent("acquire_in_turn", &in_turn, 0, &in_turn);
    let renew = RenewArgs {
        lease,
        owner,
        ttl,
        index,
    };
    assert_reads_what_is_sent("renew", &renew, 0, &renew);
    let release = ReleaseArgs { lease, owner, index };
    assert_reads_what_is_sent("release", &release, 0, &release);
    let cancel = CancelArgs { lease, owner, index };
    assert_reads_what_is_sent("cancel", &cancel, 0, &cancel);
    let register = RegisterArgs {
        lease,
        owner,
        invocation_id: "e-1",
        options: "{}",
        ttl,
        index,
    };
    assert_reads_what_is_sent("register", &register, 0, &register);
    let claim = ClaimArgs {
        lease,
        claim: "c1",
        ttl,
        index,
    };
    assert_reads_what_is_sent("claim", &claim, 0, &claim);
    let hand_over = HandOverArgs { lease, owner, index };
    assert_reads_what_is_sent("hand_over", &hand_over, 0, &hand_over);
}

struct Scripted {
    server: RedisServer,
    conn: redis::aio::MultiplexedConnection,
    scripts: Scripts,
}

impl Scripted {
    async fn start() -> Scripted {
        let server = RedisServer::start().await;
        let conn = server.connection().await;
        Scripted {
            server,
            conn,
            scripts: Scripts::new(),
        }
    }

    async fn run<T: FromRedisValue>(&mut self, args: &impl ScriptArgs<Scripts = Scripts>) -> T {
        let invocation = args.invocation(&self.scripts).unwrap();
        invocation.invoke_async(&mut self.conn).await.unwrap()
    }

    async fn get(&mut self, key: &str) -> Option<String> {
        redis::cmd("GET").arg(key).query_async(&mut self.conn).await.unwrap()
    }

    async fn set(&mut self, key: &str, value: &str) {
        let () = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query_async(&mut self.conn)
            .await
            .unwrap();
    }

    /// The key's remaining time to live, in whole seconds (rounded up).
    async fn ttl_secs(&mut self, key: &str) -> i64 {
        let ms: i64 = redis::cmd("PTTL").arg(key).query_async(&mut self.conn).await.unwrap();
        (ms + 999) / 1000
    }
}

const LEASE: &str = "adk:lease:{app:u}:s1";
/// The runs index as standalone Redis has the scripts write it.
const INDEX: Option<RunsIndex<'static>> = Some(RunsIndex {
    key: "adk:runs",
    member: "[\"app\",\"u\",\"s1\"]",
});

impl Scripted {
    /// The session's due time in the runs index, if it has an entry.
    async fn indexed(&mut self) -> Option<i64> {
        let index = INDEX.unwrap();
        redis::cmd("ZSCORE")
            .arg(index.key)
            .arg(index.member)
            .query_async(&mut self.conn)
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn acquire_scripts_write_each_input_where_it_belongs() {
    let mut redis = Scripted::start().await;
    let (ttl, patience) = (Duration::from_secs(30), Duration::from_secs(600));
    let record_secs = HOLDER_RECORD_TTL.as_secs() as i64;
    let reply: (i64, String, i64) = redis
        .run(&AcquireArgs {
            lease: LEASE,
            owner: "a",
            ttl,
            run: None,
            index: INDEX,
        })
        .await;
    assert_eq!(reply, (1, String::new(), 0), "no run recorded");
    assert_eq!(redis.indexed().await, None, "nor indexed");
    assert_eq!(redis.get(&run_key(LEASE)).await, None);
    assert_eq!(redis.get(LEASE).await.as_deref(), Some("a"));
    assert_eq!(redis.ttl_secs(LEASE).await, 30);
    let holder = holder_key(LEASE);
    assert_eq!(redis.get(&holder).await.as_deref(), Some("a"));
    assert_eq!(redis.ttl_secs(&holder).await, record_secs);

    // In turn, behind the holder: "b" waits in line with its patience, then takes it.
    let in_turn = |owner| AcquireInTurnArgs {
        lease: LEASE,
        owner,
        ttl: Duration::from_secs(40),
        patience,
        run: Some(RunToRecord {
            invocation_id: "e-b",
            options: "{\"b\":1}",
        }),
        index: INDEX,
    };
    let waiting: (i64, String, i64) = redis.run(&in_turn("b")).await;
    assert_eq!(waiting, (0, "a".to_string(), 0));
    assert_eq!(redis.get(&run_key(LEASE)).await, None, "recorded only once taken");
    let line = line_key(LEASE);
    let ticket: Option<f64> = redis::cmd("ZSCORE")
        .arg(&line)
        .arg("b")
        .query_async(&mut redis.conn)
        .await
        .unwrap();
    assert_eq!(ticket, Some(1.0), "the first ticket");
    assert_eq!(redis.get(&format!("{line}:ticket")).await.as_deref(), Some("1"));
    let lapses: Option<i64> = redis::cmd("HGET")
        .arg(format!("{line}:lapses"))
        .arg("b")
        .query_async(&mut redis.conn)
        .await
        .unwrap();
    let time: Vec<i64> = redis::cmd("TIME").query_async(&mut redis.conn).await.unwrap();
    let now_ms = time[0] * 1000 + time[1] / 1000;
    let lapse_in = lapses.expect("b has a place") - now_ms;
    assert!(
        (595_000..=600_000).contains(&lapse_in),
        "the place lapses after the patience: {lapse_in} ms"
    );
    assert_eq!(redis.ttl_secs(&line).await, record_secs);
    let () = redis::cmd("DEL").arg(LEASE).query_async(&mut redis.conn).await.unwrap();
    let (acquired, interrupted, expires): (i64, String, i64) = redis.run(&in_turn("b")).await;
    assert_eq!(
        (acquired, interrupted.as_str()),
        (1, "a"),
        "a's record names it interrupted"
    );
    assert_eq!(redis.get(LEASE).await.as_deref(), Some("b"));
    assert_eq!(redis.ttl_secs(LEASE).await, 40);
    assert_eq!(redis.get(&holder).await.as_deref(), Some("b"));
    assert_eq!(redis.ttl_secs(&holder).await, record_secs);
    // The run, recorded with the lease's expiry, for the lease and the grace.
    let run: Vec<String> = redis::cmd("HMGET")
        .arg(run_key(LEASE))
        .arg(&["invocation", "owner", "options", "expires"][..])
        .query_async(&mut redis.conn)
        .await
        .unwrap();
    assert_eq!(run[..3], ["e-b", "b", "{\"b\":1}"]);
    assert_eq!(run[3], expires.to_string());
    assert_eq!(
        redis.indexed().await,
        Some(expires),
        "indexed by its expiry, in the same script"
    );
    let time: Vec<i64> = redis::cmd("TIME").query_async(&mut redis.conn).await.unwrap();
    let lease_left = expires - (time[0] * 1000 + time[1] / 1000);
    assert!(
        (39_000..=40_000).contains(&lease_left),
        "expires with the lease: {lease_left} ms"
    );
    let record_ms = (Duration::from_secs(40) + adk_grpc_core::RUN_RECORD_GRACE).as_millis() as i64;
    let pttl: i64 = redis::cmd("PTTL")
        .arg(run_key(LEASE))
        .query_async(&mut redis.conn)
        .await
        .unwrap();
    assert!(record_ms - pttl < 1_000, "kept for the lease and the grace: {pttl} ms");
}

#[tokio::test]
async fn renew_release_and_cancel_write_each_input_where_it_belongs() {
    let mut redis = Scripted::start().await;
    let (holder, cancel) = (holder_key(LEASE), cancel_key(LEASE));
    redis.set(LEASE, "a").await;
    let renew = |owner| RenewArgs {
        lease: LEASE,
        owner,
        ttl: Duration::from_secs(30),
        index: INDEX,
    };
    assert_eq!(redis.run::<(i64, i64)>(&renew("b")).await, (0, 0));
    assert_eq!(
        redis.run::<(i64, i64)>(&renew("a")).await,
        (1, 0),
        "held, no run recorded"
    );
    assert_eq!(redis.ttl_secs(LEASE).await, 30);

    let mut cancels = redis.server.client().get_async_pubsub().await.unwrap();
    cancels.subscribe(CANCEL_CHANNEL).await.unwrap();
    let marked: i64 = redis
        .run(&CancelArgs {
            lease: LEASE,
            owner: "a",
            index: INDEX,
        })
        .await;
    assert_eq!(marked, 1);
    assert_eq!(redis.get(&cancel).await.as_deref(), Some("a"));
    assert_eq!(redis.ttl_secs(&cancel).await, CANCEL_MARK_TTL.as_secs() as i64);
    let message = tokio::time::timeout(Duration::from_secs(10), cancels.on_message().next())
        .await
        .expect("no cancel message within 10 s")
        .expect("the subscription ended");
    assert_eq!(message.get_channel_name(), CANCEL_CHANNEL);
    assert_eq!(message.get_payload::<String>().unwrap(), "a");
    assert_eq!(
        redis.run::<(i64, i64)>(&renew("a")).await,
        (2, 0),
        "held, cancel requested"
    );

    redis.set(&holder, "a").await;
    let _: i64 = redis
        .run(&ReleaseArgs {
            lease: LEASE,
            owner: "b",
            index: INDEX,
        })
        .await;
    assert_eq!(redis.get(LEASE).await.as_deref(), Some("a"), "only the owner releases");
    let _: i64 = redis
        .run(&ReleaseArgs {
            lease: LEASE,
            owner: "a",
            index: INDEX,
        })
        .await;
    for key in [LEASE, holder.as_str(), cancel.as_str()] {
        assert_eq!(redis.get(key).await, None, "{key} released");
    }
}

#[tokio::test]
async fn a_recorded_runs_index_entry_follows_its_record_in_the_same_scripts() {
    let mut redis = Scripted::start().await;
    let ttl = Duration::from_secs(30);
    let run = Some(RunToRecord {
        invocation_id: "e-a",
        options: "{}",
    });
    let (_, _, expires): (i64, String, i64) = redis
        .run(&AcquireArgs {
            lease: LEASE,
            owner: "a",
            ttl,
            run,
            index: INDEX,
        })
        .await;
    assert_eq!(redis.indexed().await, Some(expires), "acquired with its record");

    let renew = RenewArgs {
        lease: LEASE,
        owner: "a",
        ttl: Duration::from_secs(90),
        index: INDEX,
    };
    let (_, renewed): (i64, i64) = redis.run(&renew).await;
    assert!(renewed > expires, "a renewal moves the record's expiry");
    assert_eq!(redis.indexed().await, Some(renewed), "and its entry with it");

    let handed: i64 = redis
        .run(&HandOverArgs {
            lease: LEASE,
            owner: "a",
            index: INDEX,
        })
        .await;
    assert_eq!(handed, 1);
    assert_eq!(redis.indexed().await, Some(0), "handed over: due at once");

    let claim = ClaimArgs {
        lease: LEASE,
        claim: "c1",
        ttl,
        index: INDEX,
    };
    let reply: Vec<redis::Value> = redis.run(&claim).await;
    let claimed: (i64, String, String, String, i64, i64) =
        FromRedisValue::from_redis_value(redis::Value::Array(reply)).unwrap();
    assert_eq!(claimed.2, "e-a@c1");
    assert_eq!(
        redis.indexed().await,
        Some(claimed.5),
        "claimed: due when the claim's lease lapses"
    );

    let released: i64 = redis
        .run(&ReleaseArgs {
            lease: LEASE,
            owner: "e-a@c1",
            index: INDEX,
        })
        .await;
    assert_eq!(released, 1, "the record was the claimant's");
    assert_eq!(redis.indexed().await, None, "released: no entry");

    // A stale entry (its record gone) is dropped by the claim that finds nothing behind it.
    let () = redis::cmd("ZADD")
        .arg(INDEX.unwrap().key)
        .arg(5)
        .arg(INDEX.unwrap().member)
        .query_async(&mut redis.conn)
        .await
        .unwrap();
    let reply: Vec<i64> = redis.run(&claim).await;
    assert_eq!(reply, [-1]);
    assert_eq!(redis.indexed().await, None, "a stale entry is dropped");

    // Without the index (a cluster), the scripts leave it alone.
    let _: (i64, String, i64) = redis
        .run(&AcquireArgs {
            lease: LEASE,
            owner: "b",
            ttl,
            run,
            index: None,
        })
        .await;
    assert_eq!(redis.indexed().await, None, "written beside the script on a cluster");
}
