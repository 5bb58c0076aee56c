//! The app-wide listing index on a Redis Cluster, sharded by cluster slot, so that
//! no create, append or delete of one user sends a command to another user's node.
//!
//! A session's entry (member `<user>:<sid>`, score its last update in µs) lives in
//! `adk:appidx:{<slot tag>}:<app>`, where the slot tag is a short string whose
//! cluster slot is the slot of the user's tag `{app:user}` ([`slot_tag`]). So the
//! shard sits on the user's own slot, the user's create, append and delete scripts
//! write it atomically with the session, and it moves with the user's keys when
//! the cluster is resharded.
//!
//! An app-wide listing finds the shards in the registry `adk:appslots:{<app>}`: the
//! set of slots that hold a shard of the app. A process adds a slot to it (`SADD`,
//! idempotent) before its first create on that slot, and in the background after
//! its first append there (so sessions indexed under the old single key
//! `adk:appidx:{app}` are listed again after their next append), and remembers
//! which it has added: the registry costs at most one command per process, app and
//! slot. A registered slot whose create then failed is an empty shard: harmless.
//!
//! Standalone Redis keeps one index key per app, `adk:appidx:{app}`: there is only
//! one node anyway, and a listing treats it as the only shard.

use crate::redis::durability::key_slot;
use crate::redis::store::RedisStore;
use adk_grpc_core::Result;
use adk_grpc_core::sync;
use adk_grpc_core::validate::id_key;
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// Redis Cluster's number of hash slots.
const SLOTS: usize = 16384;
const TAG_ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The shard of `app`'s index on the slot of `user`'s keys (cluster layout).
pub(super) fn shard_key(app: &str, user_tag: &str) -> String {
    shard_key_of_slot(app, key_slot(user_tag.as_bytes()))
}

pub(super) fn shard_key_of_slot(app: &str, slot: u16) -> String {
    format!("adk:appidx:{{{}}}:{}", slot_tag(slot), id_key(app))
}

/// The registry of the slots that hold a shard of `app`'s index.
pub(super) fn registry_key(app: &str) -> String {
    format!("adk:appslots:{{{}}}", id_key(app))
}

/// The hash tag text whose cluster slot is `slot`: the first base-62 string, shortest
/// first, that hashes to it. Computed once per process (about 240,000 CRC16s), always
/// the same: every process and version must agree on it, as the keys are stored.
pub(super) fn slot_tag(slot: u16) -> &'static str {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![String::new(); SLOTS];
        let mut missing = SLOTS;
        let mut n: u64 = 0;
        while missing > 0 {
            n += 1;
            let tag = bijective_base62(n);
            let slot = usize::from(key_slot(tag.as_bytes()));
            if tags[slot].is_empty() {
                tags[slot] = tag;
                missing -= 1;
            }
        }
        tags
    });
    &tags[usize::from(slot) % SLOTS]
}

/// 1 -> "0", 62 -> "z", 63 -> "00", …: every string over the alphabet, shortest first.
fn bijective_base62(mut n: u64) -> String {
    let mut digits = Vec::new();
    while n > 0 {
        n -= 1;
        digits.push(TAG_ALPHABET[(n % 62) as usize]);
        n /= 62;
    }
    digits.reverse();
    String::from_utf8(digits).expect("the alphabet is ASCII")
}

/// The (app, slot) pairs this process has put in the registry.
#[derive(Default)]
pub(super) struct ShardRegistry {
    known: Mutex<HashSet<(String, u16)>>,
}

impl ShardRegistry {
    fn is_known(&self, app: &str, slot: u16) -> bool {
        let known = sync::lock(&self.known);
        known.contains(&(app.to_string(), slot))
    }

    /// Adds the slot of `user_tag` to `app`'s registry, unless this process did already.
    pub(super) async fn register(&self, store: &RedisStore, app: &str, user_tag: &str) -> Result<()> {
        let slot = key_slot(user_tag.as_bytes());
        if self.is_known(app, slot) {
            return Ok(());
        }
        let registry = registry_key(app);
        let mut pipe = redis::pipe();
        pipe.cmd("SADD").arg(&registry).arg(slot).ignore();
        store.durable_pipeline::<()>(&pipe, &registry).await?;
        self.known
            .lock()
            .expect("registry lock")
            .insert((app.to_string(), slot));
        Ok(())
    }

    /// The shard keys of `app`'s index, in slot order.
    pub(super) async fn shards(store: &RedisStore, app: &str) -> Result<Vec<String>> {
        let mut slots: Vec<u16> = store.query(redis::cmd("SMEMBERS").arg(registry_key(app))).await?;
        slots.sort_unstable();
        Ok(slots.into_iter().map(|slot| shard_key_of_slot(app, slot)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::Slot;

    #[test]
    fn every_slot_has_a_short_tag_of_its_own() {
        for slot in 0..SLOTS as u16 {
            let tag = slot_tag(slot);
            assert!(!tag.is_empty() && tag.len() <= 4, "{slot}: {tag:?}");
            assert_eq!(key_slot(tag.as_bytes()), slot, "{tag}");
        }
    }

    #[test]
    fn a_shard_shares_its_users_slot() {
        for user in ["alice", "bob", "u1", "u999"] {
            let tag = format!("{{app:{user}}}");
            let shard = shard_key("app", &tag);
            assert!(shard.starts_with("adk:appidx:{") && shard.ends_with("}:app"), "{shard}");
            assert_eq!(Slot::for_key(&shard), Slot::for_key(format!("adk:sess:{tag}:s1")));
        }
    }

    #[test]
    fn tags_are_stable() {
        // Stored keys depend on them: a change would orphan every shard.
        assert_eq!(bijective_base62(1), "0");
        assert_eq!(bijective_base62(62), "z");
        assert_eq!(bijective_base62(63), "00");
        assert_eq!(slot_tag(key_slot(b"0")), "0");
        assert_eq!(slot_tag(key_slot(b"z")), "z");
        assert_eq!(registry_key("app"), "adk:appslots:{app}");
        assert_eq!(shard_key_of_slot("app", key_slot(b"A")), "adk:appidx:{A}:app");
    }
}
