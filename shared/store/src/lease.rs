//! [`SessionLease`] backends: in memory (one process) and Redis (every replica
//! that shares the Redis sees the same leases).
//!
//! Redis keeps one key per busy session, `adk:lease:{<app>:<user>}:<session>`,
//! under the same hash tag as the session's own keys, holding the owner token
//! and expiring after the TTL. Acquire is `SET key token NX PX ttl`; renew and
//! release are compare-and-set scripts, so a holder whose lease expired and was
//! taken by another can neither extend nor delete the new holder's lease.

use crate::ReplicaAcks;
use crate::redis::conn::RedisStore;
use crate::redis::user_tag;
use adk_core::validate::id_key;
use adk_core::{Acquire, LeaseKey, Result, SessionLease};
use async_trait::async_trait;
use redis::{FromRedisValue, Script};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Leases in this process only: enough for one runner replica (and for tests).
#[derive(Debug, Default, Clone)]
pub struct InMemorySessionLease {
    holders: Arc<Mutex<HashMap<LeaseKey, Holder>>>,
}

#[derive(Debug)]
struct Holder {
    owner: String,
    expires: Instant,
}

impl InMemorySessionLease {
    pub fn new() -> Self {
        Self::default()
    }

    fn holders(&self) -> std::sync::MutexGuard<'_, HashMap<LeaseKey, Holder>> {
        // A panic while holding this lock cannot leave the map half-updated
        // (every change is one insert or remove), so a poisoned lock is still usable.
        self.holders.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl SessionLease for InMemorySessionLease {
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire> {
        let mut holders = self.holders();
        let now = Instant::now();
        match holders.get(key) {
            Some(holder) if holder.expires > now && holder.owner != owner => Ok(Acquire::Held(holder.owner.clone())),
            _ => {
                let holder = Holder {
                    owner: owner.to_string(),
                    expires: now + ttl,
                };
                holders.insert(key.clone(), holder);
                Ok(Acquire::Acquired)
            }
        }
    }

    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<bool> {
        let mut holders = self.holders();
        let now = Instant::now();
        match holders.get_mut(key) {
            Some(holder) if holder.owner == owner && holder.expires > now => {
                holder.expires = now + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let mut holders = self.holders();
        if holders.get(key).is_some_and(|holder| holder.owner == owner) {
            holders.remove(key);
        }
        Ok(())
    }
}

/// Takes the lease, or extends it for the same owner; otherwise returns the holder.
const ACQUIRE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, ARGV[1]}
end
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, holder}
end
return {0, holder}
";

/// Extends the lease only while ARGV[1] holds it.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// Deletes the lease only while ARGV[1] holds it.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Leases in Redis, shared by every runner replica that uses the same Redis
/// (standalone or cluster). Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct RedisSessionLease {
    store: RedisStore,
    scripts: Arc<Scripts>,
}

struct Scripts {
    acquire: Script,
    renew: Script,
    release: Script,
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
        Ok(RedisSessionLease {
            store: RedisStore::connect(url, acks).await?,
            scripts: Arc::new(Scripts {
                acquire: Script::new(ACQUIRE),
                renew: Script::new(RENEW),
                release: Script::new(RELEASE),
            }),
        })
    }

    /// Runs one of the lease scripts, durably (each may change the lease); `name`
    /// names it in spans and metrics.
    async fn eval<T: FromRedisValue>(&self, name: &str, script: &Script, key: &LeaseKey, args: &[&str]) -> Result<T> {
        let lease_key = lease_key(key);
        let mut invocation = script.key(&lease_key);
        for arg in args {
            invocation.arg(*arg);
        }
        self.store.durable_eval(name, &invocation, &lease_key).await
    }
}

fn ttl_millis(ttl: Duration) -> String {
    ttl.as_millis().max(1).to_string()
}

/// `adk:lease:{app:user}:<session>`: the session's hash tag, so on a cluster the
/// lease lives beside the session it guards.
fn lease_key(key: &LeaseKey) -> String {
    format!(
        "adk:lease:{}:{}",
        user_tag(&key.app_name, &key.user_id),
        id_key(&key.session_id)
    )
}

#[async_trait]
impl SessionLease for RedisSessionLease {
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire> {
        let (acquired, holder): (i64, String) = self
            .eval("lease_acquire", &self.scripts.acquire, key, &[owner, &ttl_millis(ttl)])
            .await?;
        Ok(if acquired == 1 {
            Acquire::Acquired
        } else {
            Acquire::Held(holder)
        })
    }

    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<bool> {
        let renewed: i64 = self
            .eval("lease_renew", &self.scripts.renew, key, &[owner, &ttl_millis(ttl)])
            .await?;
        Ok(renewed == 1)
    }

    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let _deleted: i64 = self.eval("lease_release", &self.scripts.release, key, &[owner]).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_testkit::RedisServer;

    fn key(session: &str) -> LeaseKey {
        LeaseKey {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: session.into(),
        }
    }

    /// The contract every backend keeps.
    async fn lease_contract(lease: &dyn SessionLease) {
        let ttl = Duration::from_secs(30);
        let k = key("s1");
        assert_eq!(lease.acquire(&k, "a", ttl).await.unwrap(), Acquire::Acquired);
        assert_eq!(lease.acquire(&k, "b", ttl).await.unwrap(), Acquire::Held("a".into()));
        // Re-acquiring one's own lease extends it.
        assert_eq!(lease.acquire(&k, "a", ttl).await.unwrap(), Acquire::Acquired);
        // Other sessions are independent.
        assert_eq!(lease.acquire(&key("s2"), "b", ttl).await.unwrap(), Acquire::Acquired);
        // Only the holder renews or releases.
        assert!(lease.renew(&k, "a", ttl).await.unwrap());
        assert!(!lease.renew(&k, "b", ttl).await.unwrap());
        lease.release(&k, "b").await.unwrap();
        assert_eq!(lease.acquire(&k, "b", ttl).await.unwrap(), Acquire::Held("a".into()));
        lease.release(&k, "a").await.unwrap();
        assert!(!lease.renew(&k, "a", ttl).await.unwrap());
        assert_eq!(lease.acquire(&k, "b", ttl).await.unwrap(), Acquire::Acquired);

        // A holder that stops renewing loses the lease after its TTL, and then
        // cannot take back or delete the new holder's lease.
        let k = key("s3");
        let short = Duration::from_millis(100);
        assert_eq!(lease.acquire(&k, "dead", short).await.unwrap(), Acquire::Acquired);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(lease.acquire(&k, "next", ttl).await.unwrap(), Acquire::Acquired);
        assert!(!lease.renew(&k, "dead", ttl).await.unwrap());
        lease.release(&k, "dead").await.unwrap();
        assert_eq!(
            lease.acquire(&k, "other", ttl).await.unwrap(),
            Acquire::Held("next".into())
        );
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
}
