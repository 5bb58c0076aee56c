//! One invocation per session at a time, across replicas: a lease on the session,
//! taken by the runner before it reads the session and held (renewed) while the
//! invocation runs. Backends live in `adk-store`.

use crate::error::Result;
use async_trait::async_trait;
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
    /// The caller holds the lease now.
    Acquired,
    /// Someone else holds it; their owner token.
    Held(String),
}

/// A mutual-exclusion lease with an owner token and a time to live, so a holder
/// that dies without releasing it blocks the session for at most one TTL.
#[async_trait]
pub trait SessionLease: Send + Sync {
    /// Takes the lease for `owner` unless another owner holds it. Taking a lease
    /// one already holds extends it.
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire>;

    /// Extends `owner`'s lease to `ttl` from now. False when `owner` no longer
    /// holds it (it expired and someone else may have taken it).
    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<bool>;

    /// Gives the lease up if `owner` holds it; a lease held by someone else is left alone.
    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()>;
}
