//! [`SessionLease`] backends: in memory (one process) and Redis (every replica
//! that shares the Redis sees the same leases).
//!
//! Redis keeps, per busy session, under the same hash tag as the session's own
//! keys (so on a cluster they live beside the session they guard):
//! - `adk:lease:{<app>:<user>}:<session>`: the owner token, expiring after the TTL;
//!   the append script reads it to fence a runner that lost its lease;
//! - `…:holder`: the owner too, without the short TTL, deleted on release: a
//!   holder record that outlives the lease means its runner died mid-invocation;
//! - `…:cancel`: the owner whose cancellation was requested, read by its renewal.
//!
//! Every change is one script, so a holder whose lease expired and was taken by
//! another can neither extend nor delete the new holder's lease. Cancel requests
//! are also published on [`CANCEL_CHANNEL`]; each process listens on one
//! connection (a classic `PUBLISH` reaches every node of a cluster).

use crate::ReplicaAcks;
use crate::redis::conn::RedisStore;
use crate::redis::pubsub::spawn_channel_listener;
use crate::redis::script_args::ScriptArgs;
use crate::redis::{subscriber_clients, user_tag};
use adk_grpc_core::sync;
use adk_grpc_core::validate::id_key;
use adk_grpc_core::{Acquire, Clock, LeaseKey, Renewal, Result, SessionLease};
use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use redis::{FromRedisValue, Script, ScriptInvocation};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;

/// The channel cancel requests are published on (payload: the owner token).
pub const CANCEL_CHANNEL: &str = "adk:cancel";
/// How many cancel requests a slow listener may fall behind by before it misses
/// some (it then learns them from its next renewal).
const CANCEL_BACKLOG: usize = 1024;
/// How long a crashed holder's record is kept for the next holder to find.
const HOLDER_RECORD_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a cancel request waits for its holder's renewal.
const CANCEL_MARK_TTL: Duration = Duration::from_secs(60);

fn cancel_stream(sender: &broadcast::Sender<String>) -> BoxStream<'static, String> {
    // A listener that fell behind skips what it missed: renewals catch it up.
    BroadcastStream::new(sender.subscribe())
        .filter_map(|owner| async move { owner.ok() })
        .boxed()
}

/// Leases in this process only: enough for one runner replica (and for tests).
/// Clones share the leases. An [`InMemorySessionBackend`](crate::InMemorySessionBackend)
/// fences appends with the leases it was given (`with_leases`).
#[derive(Debug, Clone)]
pub struct InMemorySessionLease {
    holders: Arc<Mutex<HashMap<LeaseKey, Holder>>>,
    /// Per session, the owners waiting in turn (`acquire_in_turn`), first first, each
    /// with the time its place lapses unless it asks again.
    lines: Arc<Mutex<HashMap<LeaseKey, Line>>>,
    cancels: broadcast::Sender<String>,
    /// When leases expire (tests advance a manual one instead of waiting).
    clock: Clock,
}

/// The owners waiting in turn for one session's lease, first first, each with the time
/// its place lapses.
type Line = VecDeque<(String, Instant)>;

impl Default for InMemorySessionLease {
    fn default() -> Self {
        InMemorySessionLease {
            holders: Arc::default(),
            lines: Arc::default(),
            cancels: broadcast::channel(CANCEL_BACKLOG).0,
            clock: Clock::system(),
        }
    }
}

/// A lease, kept after it expires (until released or taken): an expired entry
/// whose owner never released it is a crashed holder.
#[derive(Debug)]
struct Holder {
    owner: String,
    expires: Instant,
    cancel_requested: bool,
}

impl InMemorySessionLease {
    pub fn new() -> Self {
        Self::default()
    }

    /// The same leases expiring by `clock`: tests pass a [`Clock::manual`] and advance
    /// it past a lease's TTL instead of sleeping.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    fn holders(&self) -> std::sync::MutexGuard<'_, HashMap<LeaseKey, Holder>> {
        // A panic while holding this lock cannot leave the map half-updated
        // (every change is one insert or remove), so a poisoned lock is still usable.
        sync::lock(&self.holders)
    }

    /// The append fence: false when someone else holds the lease on `key`, or
    /// `owner`'s lease ran out. A session these leases know nothing of passes: its
    /// runner took its lease elsewhere (a lease not linked to the store, which then
    /// cannot fence).
    pub(crate) fn fence_allows(&self, key: &LeaseKey, owner: &str) -> bool {
        self.holders()
            .get(key)
            .is_none_or(|holder| holder.owner == owner && holder.expires > self.clock.instant())
    }
}

#[async_trait]
impl SessionLease for InMemorySessionLease {
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire> {
        let mut holders = self.holders();
        let now = self.clock.instant();
        let interrupted = match holders.get(key) {
            Some(holder) if holder.owner != owner && holder.expires > now => {
                return Ok(Acquire::Held(holder.owner.clone()));
            }
            Some(holder) if holder.owner != owner => Some(holder.owner.clone()),
            _ => None,
        };
        let cancel_requested = holders.get(key).is_some_and(|h| h.owner == owner && h.cancel_requested);
        holders.insert(
            key.clone(),
            Holder {
                owner: owner.to_string(),
                expires: now + ttl,
                cancel_requested,
            },
        );
        Ok(Acquire::Acquired { interrupted })
    }

    async fn acquire_in_turn(&self, key: &LeaseKey, owner: &str, ttl: Duration, patience: Duration) -> Result<Acquire> {
        let first = {
            let mut lines = sync::lock(&self.lines);
            let line = lines.entry(key.clone()).or_default();
            let now = self.clock.instant();
            match line.iter_mut().find(|(waiting, _)| waiting == owner) {
                Some((_, lapses)) => *lapses = now + patience,
                None => line.push_back((owner.to_string(), now + patience)),
            }
            line.retain(|(waiting, lapses)| waiting == owner || *lapses >= now);
            line.front().map(|(first, _)| first.clone())
        };
        if first.as_deref() != Some(owner) {
            let running = self.holders().get(key).map(|holder| holder.owner.clone());
            return Ok(Acquire::Held(running.or(first).unwrap_or_default()));
        }
        let acquired = self.acquire(key, owner, ttl).await?;
        if matches!(acquired, Acquire::Acquired { .. }) {
            let mut lines = sync::lock(&self.lines);
            if let Some(line) = lines.get_mut(key) {
                line.retain(|(waiting, _)| waiting != owner);
                if line.is_empty() {
                    lines.remove(key);
                }
            }
        }
        Ok(acquired)
    }

    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Renewal> {
        let mut holders = self.holders();
        let now = self.clock.instant();
        match holders.get_mut(key) {
            Some(holder) if holder.owner == owner && holder.expires > now => {
                holder.expires = now + ttl;
                Ok(if holder.cancel_requested {
                    Renewal::CancelRequested
                } else {
                    Renewal::Held
                })
            }
            _ => Ok(Renewal::Lost),
        }
    }

    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let mut holders = self.holders();
        if holders.get(key).is_some_and(|holder| holder.owner == owner) {
            holders.remove(key);
        }
        Ok(())
    }

    async fn request_cancel(&self, key: &LeaseKey, owner: &str) -> Result<bool> {
        let mut holders = self.holders();
        match holders.get_mut(key) {
            Some(holder) if holder.owner == owner && holder.expires > self.clock.instant() => {
                holder.cancel_requested = true;
                // No listener is fine: the holder's renewal sees the mark.
                let _ = self.cancels.send(owner.to_string());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn cancel_requests(&self) -> BoxStream<'static, String> {
        cancel_stream(&self.cancels)
    }
}

/// Takes the lease, or extends it for the same owner; otherwise returns the holder.
/// A free lease whose holder record names another owner was never released: that
/// owner is returned as interrupted.
///
/// KEYS and ARGV: [`AcquireArgs`].
/// Returns `{1, interrupted owner or ''}` or `{0, holder}`.
const ACQUIRE: &str = r"
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return {0, holder} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if holder then return {1, ''} end
local previous = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
if previous and previous ~= ARGV[1] then return {1, previous} end
return {1, ''}
";

/// ACQUIRE in turn: the owner joins the session's line (a sorted set by arrival ticket)
/// unless it is in it, and its place lapses after its patience unless it asks again;
/// lapsed places at the head are dropped; the lease is taken only when free and the
/// owner is first in line (it then leaves the line).
///
/// KEYS and ARGV: [`AcquireInTurnArgs`].
/// Returns as ACQUIRE; `{0, holder or first in line}` when it is not this owner's turn.
const ACQUIRE_IN_TURN: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[1])
end
redis.call('HSET', KEYS[5], ARGV[1], now + tonumber(ARGV[4]))
for _, key in ipairs({KEYS[3], KEYS[4], KEYS[5]}) do redis.call('PEXPIRE', key, ARGV[3]) end
local first
while true do
  first = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not first or tonumber(redis.call('HGET', KEYS[5], first) or '0') >= now then break end
  redis.call('ZREM', KEYS[3], first)
  redis.call('HDEL', KEYS[5], first)
end
local holder = redis.call('GET', KEYS[1])
if first ~= ARGV[1] then return {0, holder or first} end
if holder and holder ~= ARGV[1] then return {0, holder} end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if holder then return {1, ''} end
local previous = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
if previous and previous ~= ARGV[1] then return {1, previous} end
return {1, ''}
";

/// Extends the lease only while the owner holds it: 0 lost, 1 held, 2 held and cancel
/// requested.
///
/// KEYS and ARGV: [`RenewArgs`].
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('GET', KEYS[2]) == ARGV[1] then return 2 end
return 1
";

/// Deletes the lease, the holder record and the cancel mark, each only while the owner
/// is named in it.
///
/// KEYS and ARGV: [`ReleaseArgs`].
const RELEASE: &str = r"
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[3]}) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
return 1
";

/// Marks the owner's cancellation and publishes it, only while the owner holds the lease.
///
/// KEYS and ARGV: [`CancelArgs`]. Returns 1 or 0.
const CANCEL: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
";

/// Leases in Redis, shared by every runner replica that uses the same Redis
/// (standalone or cluster). Cheap to clone; clones share the connection and the
/// one subscriber connection that hears cancel requests.
#[derive(Clone)]
pub struct RedisSessionLease {
    store: RedisStore,
    scripts: Arc<Scripts>,
    cancels: Arc<broadcast::Sender<String>>,
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
        let cancels = Arc::new(broadcast::channel(CANCEL_BACKLOG).0);
        spawn_cancel_listener(&cancels, subscriber_clients(url)?);
        Ok(RedisSessionLease {
            store: RedisStore::connect(url, acks).await?,
            scripts: Arc::new(Scripts::new()),
            cancels,
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

fn millis(ttl: Duration) -> String {
    ttl.as_millis().max(1).to_string()
}

/// `adk:lease:{app:user}:<session>`: the session's hash tag, so on a cluster the
/// lease lives beside the session it guards (and the append script can read it).
pub(crate) fn lease_key(key: &LeaseKey) -> String {
    format!(
        "adk:lease:{}:{}",
        user_tag(&key.app_name, &key.user_id),
        id_key(&key.session_id)
    )
}

/// `lease`'s holder record (`lease` is [`lease_key`]'s).
fn holder_key(lease: &str) -> String {
    format!("{lease}:holder")
}

/// `lease`'s cancel mark.
fn cancel_key(lease: &str) -> String {
    format!("{lease}:cancel")
}

/// `lease`'s line of owners waiting in turn.
fn line_key(lease: &str) -> String {
    format!("{lease}:line")
}

// ---------- the scripts' inputs (see `crate::redis::script_args`) ----------

struct Scripts {
    acquire: Script,
    acquire_in_turn: Script,
    renew: Script,
    release: Script,
    cancel: Script,
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            acquire: Script::new(AcquireArgs::SOURCE),
            acquire_in_turn: Script::new(AcquireInTurnArgs::SOURCE),
            renew: Script::new(RenewArgs::SOURCE),
            release: Script::new(ReleaseArgs::SOURCE),
            cancel: Script::new(CancelArgs::SOURCE),
        }
    }
}

/// `ACQUIRE`'s inputs.
struct AcquireArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
    ttl: Duration,
}

impl ScriptArgs for AcquireArgs<'_> {
    const SOURCE: &'static str = ACQUIRE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.acquire
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .arg(self.owner)
            .arg(millis(self.ttl))
            .arg(millis(HOLDER_RECORD_TTL));
        Ok(())
    }
}

/// `ACQUIRE_IN_TURN`'s inputs.
struct AcquireInTurnArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
    ttl: Duration,
    /// How long the owner's place in line lasts unless it asks again.
    patience: Duration,
}

impl ScriptArgs for AcquireInTurnArgs<'_> {
    const SOURCE: &'static str = ACQUIRE_IN_TURN;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.acquire_in_turn
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let line = line_key(self.lease);
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(&line)
            // The ticket counter, and each place's lapse time (ms).
            .key(format!("{line}:ticket"))
            .key(format!("{line}:lapses"))
            .arg(self.owner)
            .arg(millis(self.ttl))
            .arg(millis(HOLDER_RECORD_TTL))
            .arg(millis(self.patience));
        Ok(())
    }
}

/// `RENEW`'s inputs.
struct RenewArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
    ttl: Duration,
}

impl ScriptArgs for RenewArgs<'_> {
    const SOURCE: &'static str = RENEW;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.renew
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(cancel_key(self.lease))
            .arg(self.owner)
            .arg(millis(self.ttl));
        Ok(())
    }
}

/// `RELEASE`'s inputs.
struct ReleaseArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
}

impl ScriptArgs for ReleaseArgs<'_> {
    const SOURCE: &'static str = RELEASE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.release
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(cancel_key(self.lease))
            .arg(self.owner);
        Ok(())
    }
}

/// `CANCEL`'s inputs.
struct CancelArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
}

impl ScriptArgs for CancelArgs<'_> {
    const SOURCE: &'static str = CANCEL;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.cancel
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(cancel_key(self.lease))
            .arg(self.owner)
            .arg(millis(CANCEL_MARK_TTL))
            .arg(CANCEL_CHANNEL);
        Ok(())
    }
}

#[async_trait]
impl SessionLease for RedisSessionLease {
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire> {
        let lease = lease_key(key);
        let args = AcquireArgs {
            lease: &lease,
            owner,
            ttl,
        };
        let (acquired, other): (i64, String) = self.eval("lease_acquire", &args, &lease).await?;
        Ok(if acquired == 1 {
            Acquire::Acquired {
                interrupted: Some(other).filter(|owner| !owner.is_empty()),
            }
        } else {
            Acquire::Held(other)
        })
    }

    async fn acquire_in_turn(&self, key: &LeaseKey, owner: &str, ttl: Duration, patience: Duration) -> Result<Acquire> {
        let lease = lease_key(key);
        let args = AcquireInTurnArgs {
            lease: &lease,
            owner,
            ttl,
            patience,
        };
        let (acquired, other): (i64, String) = self.eval("lease_acquire_in_turn", &args, &lease).await?;
        Ok(if acquired == 1 {
            Acquire::Acquired {
                interrupted: Some(other).filter(|owner| !owner.is_empty()),
            }
        } else {
            Acquire::Held(other)
        })
    }

    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Renewal> {
        let lease = lease_key(key);
        let args = RenewArgs {
            lease: &lease,
            owner,
            ttl,
        };
        let renewed: i64 = self.eval("lease_renew", &args, &lease).await?;
        Ok(match renewed {
            0 => Renewal::Lost,
            2 => Renewal::CancelRequested,
            _ => Renewal::Held,
        })
    }

    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let lease = lease_key(key);
        let args = ReleaseArgs { lease: &lease, owner };
        let _: i64 = self.eval("lease_release", &args, &lease).await?;
        Ok(())
    }

    async fn request_cancel(&self, key: &LeaseKey, owner: &str) -> Result<bool> {
        let lease = lease_key(key);
        let args = CancelArgs { lease: &lease, owner };
        let marked: i64 = self.eval("lease_cancel", &args, &lease).await?;
        Ok(marked == 1)
    }

    fn cancel_requests(&self) -> BoxStream<'static, String> {
        cancel_stream(&self.cancels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_testkit::RedisServer;

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

    // ---------- each script reads what its builder sends, each input where it belongs ----------

    #[test]
    fn every_lease_script_reads_exactly_what_its_builder_sends() {
        use crate::redis::script_args::check::assert_reads_what_is_sent;
        let (lease, owner, ttl) = ("lease", "a", Duration::from_secs(1));
        let acquire = AcquireArgs { lease, owner, ttl };
        assert_reads_what_is_sent("acquire", &acquire, 0, &acquire);
        let patience = ttl;
        let in_turn = AcquireInTurnArgs {
            lease,
            owner,
            ttl,
            patience,
        };
        assert_reads_what_is_sent("acquire_in_turn", &in_turn, 0, &in_turn);
        let renew = RenewArgs { lease, owner, ttl };
        assert_reads_what_is_sent("renew", &renew, 0, &renew);
        let release = ReleaseArgs { lease, owner };
        assert_reads_what_is_sent("release", &release, 0, &release);
        let cancel = CancelArgs { lease, owner };
        assert_reads_what_is_sent("cancel", &cancel, 0, &cancel);
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

    #[tokio::test]
    async fn acquire_scripts_write_each_input_where_it_belongs() {
        let mut redis = Scripted::start().await;
        let (ttl, patience) = (Duration::from_secs(30), Duration::from_secs(600));
        let record_secs = HOLDER_RECORD_TTL.as_secs() as i64;
        let reply: (i64, String) = redis
            .run(&AcquireArgs {
                lease: LEASE,
                owner: "a",
                ttl,
            })
            .await;
        assert_eq!(reply, (1, String::new()));
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
        };
        let waiting: (i64, String) = redis.run(&in_turn("b")).await;
        assert_eq!(waiting, (0, "a".to_string()));
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
        let taken: (i64, String) = redis.run(&in_turn("b")).await;
        assert_eq!(taken, (1, "a".to_string()), "a's record names it interrupted");
        assert_eq!(redis.get(LEASE).await.as_deref(), Some("b"));
        assert_eq!(redis.ttl_secs(LEASE).await, 40);
        assert_eq!(redis.get(&holder).await.as_deref(), Some("b"));
        assert_eq!(redis.ttl_secs(&holder).await, record_secs);
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
        };
        assert_eq!(redis.run::<i64>(&renew("b")).await, 0);
        assert_eq!(redis.run::<i64>(&renew("a")).await, 1);
        assert_eq!(redis.ttl_secs(LEASE).await, 30);

        let mut cancels = redis.server.client().get_async_pubsub().await.unwrap();
        cancels.subscribe(CANCEL_CHANNEL).await.unwrap();
        let marked: i64 = redis
            .run(&CancelArgs {
                lease: LEASE,
                owner: "a",
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
        assert_eq!(redis.run::<i64>(&renew("a")).await, 2, "held, cancel requested");

        redis.set(&holder, "a").await;
        let _: i64 = redis
            .run(&ReleaseArgs {
                lease: LEASE,
                owner: "b",
            })
            .await;
        assert_eq!(redis.get(LEASE).await.as_deref(), Some("a"), "only the owner releases");
        let _: i64 = redis
            .run(&ReleaseArgs {
                lease: LEASE,
                owner: "a",
            })
            .await;
        for key in [LEASE, holder.as_str(), cancel.as_str()] {
            assert_eq!(redis.get(key).await, None, "{key} released");
        }
    }
}
