//! One invocation per session at a time, across replicas: a lease on the session,
//! taken by the runner before it reads the session and held (renewed by a
//! heartbeat) while the invocation runs. Backends live in `adk-grpc-store`.
//!
//! The lease is also how replicas reach a running invocation: a cancel request
//! is addressed to the lease holder (whichever replica runs it), and an append
//! fenced with [`Precondition::LeaseHeldBy`](crate::Precondition::LeaseHeldBy)
//! is refused once its runner lost the lease.

use crate::error::Result;
use async_trait::async_trait;
use futures::stream::BoxStream;
use std::time::Duration;

/// The session a lease is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseKey {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
}

/// The outcome of [`SessionLease::acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// The caller holds the lease now. `interrupted` names the previous holder when
    /// its lease ran out without being released: its runner died mid-invocation,
    /// and the new holder closes that invocation in the log.
    Acquired { interrupted: Option<String> },
    /// Someone else holds it; their owner token.
    Held(String),
}

/// The outcome of [`SessionLease::renew`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Still held, for another TTL.
    Held,
    /// No longer held: it expired and someone else may have taken it.
    Lost,
    /// Held, and someone asked (from any replica) that the holder's invocation stop.
    CancelRequested,
}

/// A running invocation as the lease store keeps it, so that another replica can
/// resume it when its runner dies (or hands it over) before it finishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    pub key: LeaseKey,
    pub invocation_id: String,
    /// What the runner needs besides the log to go on (its run options), opaque to the store.
    pub options: String,
}

/// A run claimed by [`SessionLease::claim_lapsed`]: the claimant holds the session's
/// lease under `owner` (a new token, so the dead runner's appends stay fenced off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedRun {
    pub record: RunRecord,
    pub owner: String,
    /// How long ago its previous holder's lease ran out (zero for a run handed over).
    pub lapsed_for: Duration,
}

/// How long a run record outlives its lease: a run whose lease lapsed is resumed by
/// any replica within this time, else the session's next run closes it as interrupted.
pub const RUN_RECORD_GRACE: Duration = Duration::from_secs(60);

/// The invocation an owner token stands for: a resumed invocation holds its lease
/// under `<invocation id>@<claim>`, the first run under the invocation id itself.
pub fn owner_invocation(owner: &str) -> &str {
    owner.split_once('@').map_or(owner, |(invocation, _)| invocation)
}

/// The owner token of a claim of `invocation_id`.
pub fn claim_owner(invocation_id: &str, claim: &str) -> String {
    format!("{invocation_id}@{claim}")
}

/// A mutual-exclusion lease with an owner token and a time to live, so a holder
/// that dies without releasing it blocks the session for at most one TTL.
#[async_trait]
pub trait SessionLease: Send + Sync {
    /// Takes the lease for `owner` unless another owner holds it. Taking a lease
    /// one already holds extends it.
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire>;

    /// As [`acquire`](Self::acquire), but in turn: `owner` joins the session's line of
    /// waiting owners (once; later calls keep its place) and takes the lease only when it
    /// is free and `owner` is first in line. An owner that does not ask again within
    /// `patience` (its replica died, its client gave up) loses its place, so it never
    /// blocks the line. `Held` names the running holder (or the first in line).
    async fn acquire_in_turn(&self, key: &LeaseKey, owner: &str, ttl: Duration, patience: Duration) -> Result<Acquire>;

    /// Extends `owner`'s lease to `ttl` from now, and tells whether a cancel was requested.
    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Renewal>;

    /// Gives the lease up if `owner` holds it; a lease held by someone else is left alone.
    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()>;

    /// Asks the holder to stop, when `owner` holds the lease on `key`: the request is
    /// seen by the holder's next [`renew`](Self::renew) and, at once, on
    /// [`cancel_requests`](Self::cancel_requests) of every process. True when `owner`
    /// held the lease (its invocation was running somewhere).
    async fn request_cancel(&self, key: &LeaseKey, owner: &str) -> Result<bool>;

    /// The owners whose cancellation is requested from now on, as they are requested
    /// (best effort: a holder also learns it from its next renewal).
    fn cancel_requests(&self) -> BoxStream<'static, String>;

    /// Records `record` as running under `owner`'s lease on `record.key`, so that once
    /// the lease lapses another replica can claim and resume it; renewals keep the
    /// record, [`release`](Self::release) deletes it. False (nothing recorded) when
    /// `owner` does not hold the lease, or the backend cannot resume runs.
    async fn register_run(&self, _record: &RunRecord, _owner: &str, _ttl: Duration) -> Result<bool> {
        Ok(false)
    }

    /// Takes the lease on `record.key` as [`acquire`](Self::acquire) does (in turn, as
    /// [`acquire_in_turn`](Self::acquire_in_turn) does, given `patience`) and, once it
    /// is taken, records `record` as [`register_run`](Self::register_run) does. One call
    /// because a resumable run starts with both: a backend that does them in one step
    /// (Redis: one script) spares every turn a round trip.
    async fn acquire_run(
        &self,
        record: &RunRecord,
        owner: &str,
        ttl: Duration,
        patience: Option<Duration>,
    ) -> Result<Acquire> {
        let acquired = match patience {
            None => self.acquire(&record.key, owner, ttl).await?,
            Some(patience) => self.acquire_in_turn(&record.key, owner, ttl, patience).await?,
        };
        if matches!(acquired, Acquire::Acquired { .. }) {
            self.register_run(record, owner, ttl).await?;
        }
        Ok(acquired)
    }

    /// Claims up to `limit` recorded runs of `apps` whose lease lapsed or was handed
    /// over, each atomically with taking its session's lease for `ttl` under a new
    /// owner token (so two replicas never claim one run, and the dead holder stays
    /// fenced). A run whose cancel was requested before its holder died is dropped,
    /// not claimed.
    async fn claim_lapsed(&self, _apps: &[String], _ttl: Duration, _limit: usize) -> Result<Vec<ClaimedRun>> {
        Ok(Vec::new())
    }

    /// Gives `owner`'s lease up for another replica to resume its recorded run at once
    /// (a replica shutting down); a run not recorded is simply released.
    async fn hand_over(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        self.release(key, owner).await
    }
}
