//! [`RedisSessionLease`]: session leases in Redis, standalone or cluster: every replica
//! that shares the Redis sees the same leases.
//!
//! Redis keeps, per busy session, under the same hash tag as the session's own
//! keys (so on a cluster they live beside the session they guard):
//! - `adk:lease:{<app>:<user>}:<session>`: the owner token, expiring after the TTL;
//!   the append script reads it to fence a runner that lost its lease;
//! - `…:holder`: the owner too, without the short TTL, deleted on release: a
//!   holder record that outlives the lease means its runner died mid-invocation;
//! - `…:cancel`: the owner whose cancellation was requested, read by its renewal;
//! - `…:run`: a resumable run's record (hash: `invocation`, `owner`, `options`,
//!   `expires` in ms), kept by the renewals for
//!   [`RUN_RECORD_GRACE`](adk_grpc_core::RUN_RECORD_GRACE) past the lease, so that once the
//!   lease lapses (or is handed over) another replica claims it.
//!
//! And one index of the running resumable runs, `RUNS_INDEX` (`adk:runs`): a sorted set of
//! `[app, user, session]` by lease expiry (ms, Redis's clock), which every replica
//! scans for lapsed runs. It is only an index: every claim is a script on the
//! session's own keys, fenced like an acquire, and a stale entry is dropped by the
//! first scan that finds no record behind it. On standalone Redis every script that
//! changes a record changes its entry in the same step (the index is on the same node):
//! a turn sends no command for it. On a cluster it is one key in one slot, written once
//! per renewal of a resumable run, and when one starts or ends: those two are queued and
//! sent in order beside the turn (a turn waits only for its lease scripts), so a
//! resumable turn costs the same round trips as any other.
//!
//! Every change is one script, so a holder whose lease expired and was taken by
//! another can neither extend nor delete the new holder's lease. Cancel requests
//! are also published on [`CANCEL_CHANNEL`]; each process listens on one
//! connection (a classic `PUBLISH` reaches every node of a cluster).

use super::{cancel_channel, cancel_stream, claim_id};
use crate::redis::durability::ReplicaAcks;
use crate::redis::error::decode_reply;
use crate::redis::keys::{RUNS_INDEX, lease_key, runs_index_member, runs_member_key};
use crate::redis::pubsub::{spawn_channel_listener, subscriber_clients};
use crate::redis::script_args::ScriptArgs;
use crate::redis::store::RedisStore;
use adk_grpc_core::{Acquire, ClaimedRun, LeaseKey, Renewal, Result, RunRecord, SessionLease};
use async_trait::async_trait;
use futures::stream::BoxStream;
use redis::FromRedisValue;
use script_args::{
    AcquireArgs, AcquireInTurnArgs, CancelArgs, ClaimArgs, HandOverArgs, RegisterArgs, ReleaseArgs, RenewArgs,
    RunToRecord, RunsIndex, Scripts,
};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};

mod lua;
mod script_args;

/// The channel cancel requests are published on (payload: the owner token).
pub const CANCEL_CHANNEL: &str = "adk:cancel";

/// Leases in Redis, shared by every runner replica that uses the same Redis
/// (standalone or cluster). Cheap to clone; clones share the connection and the
/// one subscriber connection that hears cancel requests.
#[derive(Clone)]
pub struct RedisSessionLease {
    store: RedisStore,
    scripts: Arc<Scripts>,
    cancels: Arc<broadcast::Sender<String>>,
    /// Every write of [`RUNS_INDEX`], sent by one task in the order they were made
    /// (see [`write_index`]).
    index_writes: mpsc::UnboundedSender<IndexWrite>,
}

impl std::fmt::Debug for RedisSessionLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSessionLease")
            .field("cluster", &self.store.is_cluster())
            .finish()
    }
}

impl RedisSessionLease {
    /// Connects to the same URLs as the session store: `redis://…`, `rediss://…`,
    /// `redis+cluster://h1:p1,h2:p2`, `rediss+cluster://…`. A lease change is
    /// acknowledged once the replicas `acks` asks for have it.
    pub async fn connect(url: &str, acks: ReplicaAcks) -> Result<Self> {
        let cancels = Arc::new(cancel_channel());
        spawn_cancel_listener(&cancels, subscriber_clients(url)?);
        let store = RedisStore::connect(url, acks).await?;
        let (index_writes, queued) = mpsc::unbounded_channel();
        tokio::spawn(write_index(store.clone(), queued));
        Ok(RedisSessionLease {
            store,
            scripts: Arc::new(Scripts::new()),
            cancels,
            index_writes,
        })
    }

    /// Runs one of the lease scripts on `lease`, durably (each may change the lease);
    /// `name` names it in spans and metrics.
    async fn eval<T: FromRedisValue>(
        &self,
        name: &str,
        args: &impl ScriptArgs<Scripts = Scripts>,
        lease: &str,
    ) -> Result<T> {
        let invocation = args.invocation(&self.scripts)?;
        self.store.durable_eval(name, &invocation, lease).await
    }
}

/// A write of [`RUNS_INDEX`], and who waits for it to be sent (if anyone).
type IndexWrite = (redis::Cmd, Option<oneshot::Sender<()>>);

/// Sends the queued index writes in their order, those queued meanwhile as one
/// pipeline, until the lease is dropped. One ordered path, so that whether a write
/// is waited for or not, a finished run's removal never lands after the entry of the
/// session's next run, nor a new run's entry after its hand-over.
async fn write_index(store: RedisStore, mut queued: mpsc::UnboundedReceiver<IndexWrite>) {
    while let Some(first) = queued.recv().await {
        let mut batch = vec![first];
        while let Ok(next) = queued.try_recv() {
            batch.push(next);
        }
        let mut pipe = redis::pipe();
        for (command, _) in &batch {
            pipe.add_command(command.clone()).ignore();
        }
        if let Err(e) = store.pipeline::<()>(&pipe).await {
            // Only an index: renewals re-add running runs, scans drop finished ones.
            tracing::warn!(error = %e, "could not update the index of resumable runs");
        }
        for (_, sent) in batch {
            if let Some(sent) = sent {
                let _ = sent.send(());
            }
        }
    }
}

/// Hands cancel requests heard on [`CANCEL_CHANNEL`] to `cancels`, until the lease
/// (the sender) is dropped. A request published while the subscription is down is
/// not lost: the holder's renewal reads its mark.
fn spawn_cancel_listener(cancels: &Arc<broadcast::Sender<String>>, nodes: Vec<redis::Client>) {
    let cancels: Weak<broadcast::Sender<String>> = Arc::downgrade(cancels);
    spawn_channel_listener(
        CANCEL_CHANNEL,
        nodes,
        Box::new(move |message| {
            let Some(cancels) = cancels.upgrade() else { return false };
            if let Some(owner) = message.filter(|owner| !owner.is_empty()) {
                // No listener is fine: the holder's renewal sees the mark.
                let _ = cancels.send(owner);
            }
            true
        }),
    );
}

#[async_trait]
impl SessionLease for RedisSessionLease {
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire> {
        self.take(key, owner, ttl, None, None).await
    }

    async fn acquire_in_turn(&self, key: &LeaseKey, owner: &str, ttl: Duration, patience: Duration) -> Result<Acquire> {
        self.take(key, owner, ttl, Some(patience), None).await
    }

    async fn acquire_run(
        &self,
        record: &RunRecord,
        owner: &str,
        ttl: Duration,
        patience: Option<Duration>,
    ) -> Result<Acquire> {
        let run = RunToRecord {
            invocation_id: &record.invocation_id,
            options: &record.options,
        };
        self.take(&record.key, owner, ttl, patience, Some(run)).await
    }

    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Renewal> {
        let (lease, member) = (lease_key(key), runs_index_member(key));
        let args = RenewArgs {
            lease: &lease,
            owner,
            ttl,
            index: self.index_in_script(&member),
        };
        let (renewed, expires): (i64, i64) = self.eval("lease_renew", &args, &lease).await?;
        if expires > 0 {
            // Only an index: a failure here is repaired by the next renewal.
            self.index_beside(args.index, || index_command(key, expires)).await;
        }
        Ok(match renewed {
            0 => Renewal::Lost,
            2 => Renewal::CancelRequested,
            _ => Renewal::Held,
        })
    }

    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let (lease, member) = (lease_key(key), runs_index_member(key));
        let args = ReleaseArgs {
            lease: &lease,
            owner,
            index: self.index_in_script(&member),
        };
        let recorded: i64 = self.eval("lease_release", &args, &lease).await?;
        if recorded == 1 {
            // Not waited for: the turn is over.
            self.queue_index_beside(args.index, || unindex_command(&member));
        }
        Ok(())
    }

    async fn request_cancel(&self, key: &LeaseKey, owner: &str) -> Result<bool> {
        let (lease, member) = (lease_key(key), runs_index_member(key));
        let args = CancelArgs {
            lease: &lease,
            owner,
            index: self.index_in_script(&member),
        };
        let marked: i64 = self.eval("lease_cancel", &args, &lease).await?;
        if marked == 2 {
            self.index_beside(args.index, || unindex_command(&member)).await;
        }
        Ok(marked != 0)
    }

    fn cancel_requests(&self) -> BoxStream<'static, String> {
        cancel_stream(&self.cancels)
    }

    async fn register_run(&self, record: &RunRecord, owner: &str, ttl: Duration) -> Result<bool> {
        let (lease, member) = (lease_key(&record.key), runs_index_member(&record.key));
        let args = RegisterArgs {
            lease: &lease,
            owner,
            invocation_id: &record.invocation_id,
            options: &record.options,
            ttl,
            index: self.index_in_script(&member),
        };
        let expires: i64 = self.eval("lease_register_run", &args, &lease).await?;
        if expires > 0 {
            self.index_beside(args.index, || index_command(&record.key, expires))
                .await;
        }
        Ok(expires > 0)
    }

    async fn claim_lapsed(&self, apps: &[String], ttl: Duration, limit: usize) -> Result<Vec<ClaimedRun>> {
        let (secs, micros): (i64, i64) = self.store.query(&redis::cmd("TIME")).await?;
        let now = secs * 1000 + micros / 1000;
        // A few more than the limit: some belong to apps another replica serves.
        let due: Vec<String> = self
            .store
            .query(
                redis::cmd("ZRANGEBYSCORE")
                    .arg(RUNS_INDEX)
                    .arg("-inf")
                    .arg(now)
                    .arg("LIMIT")
                    .arg(0)
                    .arg(limit.saturating_mul(4).max(16)),
            )
            .await?;
        let mut claimed = Vec::new();
        for member in due {
            if claimed.len() >= limit {
                break;
            }
            let Some(key) = runs_member_key(&member) else {
                self.write_index(unindex_command(&member)).await;
                continue;
            };
            if !apps.contains(&key.app_name) {
                continue;
            }
            let lease = lease_key(&key);
            let claim = claim_id();
            let args = ClaimArgs {
                lease: &lease,
                claim: &claim,
                ttl,
                index: self.index_in_script(&member),
            };
            let reply: Vec<redis::Value> = self.eval("lease_claim_run", &args, &lease).await?;
            let outcome: i64 = reply.first().map_or(Ok(-1), |v| decode_reply(v.clone()))?;
            match outcome {
                1 => {
                    let (_, invocation_id, owner, options, lapsed_ms, expires): (
                        i64,
                        String,
                        String,
                        String,
                        u64,
                        i64,
                    ) = decode_reply(redis::Value::Array(reply))?;
                    self.index_beside(args.index, || index_command(&key, expires)).await;
                    claimed.push(ClaimedRun {
                        record: RunRecord {
                            key,
                            invocation_id,
                            options,
                        },
                        owner,
                        lapsed_for: Duration::from_millis(lapsed_ms),
                    });
                }
                // Nothing behind the entry any more (finished, cancelled, forgotten).
                -1 => self.index_beside(args.index, || unindex_command(&member)).await,
                // Held: by a live runner whose renewal will move the entry, or by a new run.
                _ => {}
            }
        }
        Ok(claimed)
    }

    async fn hand_over(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let (lease, member) = (lease_key(key), runs_index_member(key));
        let args = HandOverArgs {
            lease: &lease,
            owner,
            index: self.index_in_script(&member),
        };
        let handed: i64 = self.eval("lease_hand_over", &args, &lease).await?;
        if handed == 1 {
            // Due at once: the next scan of any replica claims it.
            self.index_beside(args.index, || index_command(key, 0)).await;
        }
        Ok(())
    }
}

impl RedisSessionLease {
    /// Takes the lease (in turn, given `patience`), recording `run` once it is taken:
    /// one script, with its index entry on standalone Redis. On a cluster the entry is
    /// written beside the turn, not before it goes on: should this replica die before
    /// the entry lands, the record still makes the session busy with the run until it
    /// expires, and the next run then closes it as interrupted (docs/semantics.md,
    /// Runner 27), as for a run nobody resumed.
    async fn take(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
        patience: Option<Duration>,
        run: Option<RunToRecord<'_>>,
    ) -> Result<Acquire> {
        let (lease, member) = (lease_key(key), runs_index_member(key));
        let index = self.index_in_script(&member);
        let (acquired, other, expires): (i64, String, i64) = match patience {
            None => {
                let args = AcquireArgs {
                    lease: &lease,
                    owner,
                    ttl,
                    run,
                    index,
                };
                self.eval("lease_acquire", &args, &lease).await?
            }
            Some(patience) => {
                let args = AcquireInTurnArgs {
                    lease: &lease,
                    owner,
                    ttl,
                    patience,
                    run,
                    index,
                };
                self.eval("lease_acquire_in_turn", &args, &lease).await?
            }
        };
        if acquired != 1 {
            return Ok(Acquire::Held(other));
        }
        if expires > 0 {
            // Not waited for: the turn goes on while it is sent.
            self.queue_index_beside(index, || index_command(key, expires));
        }
        Ok(Acquire::Acquired {
            interrupted: Some(other).filter(|owner| !owner.is_empty()),
        })
    }

    /// The runs index for a lease script to write itself, in the same atomic step as the
    /// record it indexes: on standalone Redis, where it is on the session's node. On a
    /// cluster it is in a slot of its own, and written beside the script (`write_index`).
    fn index_in_script<'a>(&self, member: &'a str) -> Option<RunsIndex<'a>> {
        (!self.store.is_cluster()).then_some(RunsIndex {
            key: RUNS_INDEX,
            member,
        })
    }

    /// Sends the index write a lease script left to its caller: on a cluster (`index` is
    /// None, see [`Self::index_in_script`]), in order beside the script, waiting until
    /// it was sent; on standalone Redis the script wrote it, and there is nothing to do.
    async fn index_beside(&self, index: Option<RunsIndex<'_>>, command: impl FnOnce() -> redis::Cmd) {
        if index.is_none() {
            self.write_index(command()).await;
        }
    }

    /// [`Self::index_beside`], queued: the caller goes on at once.
    fn queue_index_beside(&self, index: Option<RunsIndex<'_>>, command: impl FnOnce() -> redis::Cmd) {
        if index.is_none() {
            self.queue_index_write(command());
        }
    }

    /// Queues an index write; the caller goes on at once.
    fn queue_index_write(&self, command: redis::Cmd) {
        // The writer lives as long as any clone of this lease.
        let _ = self.index_writes.send((command, None));
    }

    /// Queues an index write and waits until it was sent (a failure is the writer's to
    /// log: the index is repaired by renewals and scans).
    async fn write_index(&self, command: redis::Cmd) {
        let (sent, written) = oneshot::channel();
        if self.index_writes.send((command, Some(sent))).is_ok() {
            let _ = written.await;
        }
    }
}

/// The index write that makes the session's run due at `expires` (ms).
fn index_command(key: &LeaseKey, expires: i64) -> redis::Cmd {
    redis::cmd("ZADD")
        .arg(RUNS_INDEX)
        .arg(expires)
        .arg(runs_index_member(key))
        .clone()
}

/// The index write that drops `member` (`runs_index_member`).
fn unindex_command(member: &str) -> redis::Cmd {
    redis::cmd("ZREM").arg(RUNS_INDEX).arg(member).clone()
}
