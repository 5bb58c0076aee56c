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
}
