//! The Redis key schema of every store, in one place: the key of each thing the
//! session, artifact, memory and lease backends keep, built from ids only through
//! [`id_key`] (see `crate::session::redis` for why). The backends' module docs say what
//! each key holds.
//!
//! Every key of one user's data carries the user's hash tag ([`user_tag`]), so on a
//! cluster a user's sessions, artifacts, memories and session leases live on one node
//! and one script can change them together (DeleteSession deletes the session's
//! artifacts; AppendEvent reads the session's lease). App-wide keys carry the app's
//! tag; the cluster's shards of the app index are keyed by slot (`session/redis/app_index.rs`).

use adk_grpc_core::LeaseKey;
use adk_grpc_core::artifact::{ArtifactScope, StoredName};
use adk_grpc_core::memory::MemoryScope;
use adk_grpc_core::session::backend::SessionKey;
use adk_grpc_core::validate::id_key;
use redis::ScriptInvocation;

// ---------- hash tags ----------

/// The hash tag of every key of one user in one app: sessions, artifacts, memories, leases.
pub(crate) fn user_tag(app: &str, user: &str) -> String {
    tag_of(&id_key(app), &id_key(user))
}

/// [`user_tag`] of the encoded ids.
fn tag_of(app_key: &str, user_key: &str) -> String {
    concat(&["{", app_key, ":", user_key, "}"])
}

/// `parts` joined, in one allocation of the exact size.
fn concat(parts: &[&str]) -> String {
    parts.concat()
}

// ---------- sessions ----------

/// The Redis keys of one session and of its user's and app's shared data.
pub(crate) struct SessionKeys {
    pub(crate) app_name: String,
    pub(crate) user_id: String,
    pub(crate) session_id: String,
    pub(crate) meta: String,
    pub(crate) state: String,
    pub(crate) events: String,
    pub(crate) event_ids: String,
    pub(crate) event_times: String,
    /// The runner's positions kept beside the log (`SessionBackend::append_run_mark`): a
    /// list of `<sequence of the log's last event>:<protobuf-encoded event>`.
    pub(crate) run_marks: String,
    pub(crate) user_state: String,
    pub(crate) user_index: String,
    pub(crate) app_state: String,
    /// The session's member in the user's index: `<sid>` (encoded, as every member).
    pub(crate) user_member: String,
    /// The session's member in the app index: `<user>:<sid>`.
    pub(crate) app_member: String,
}

impl SessionKeys {
    /// Every id enters a key through [`id_key`] (see the module docs), so no id can forge
    /// or collide with another session's keys.
    pub(crate) fn new(key: &SessionKey) -> SessionKeys {
        SessionKeys::of(&key.app_name, &key.user_id, &key.session_id)
    }

    // Every request of a session builds these, so they are concatenated into strings
    // of the exact size, each id encoded once: with `format!` they cost three times as
    // many instructions (BENCHMARKS.md, "What a call costs the server").
    pub(crate) fn of(app: &str, user: &str, session: &str) -> SessionKeys {
        let (app_key, user_key, sid) = (id_key(app), id_key(user), id_key(session));
        let tag = tag_of(&app_key, &user_key);
        let session_key = |kind: &str| concat(&["adk:", kind, ":", &tag, ":", &sid]);
        SessionKeys {
            app_name: app.to_string(),
            user_id: user.to_string(),
            session_id: session.to_string(),
            meta: session_key("sess"),
            state: session_key("state"),
            events: session_key("events"),
            event_ids: session_key("eids"),
            event_times: session_key("ets"),
            run_marks: session_key("marks"),
            user_state: user_state_key(&tag),
            user_index: user_index_key(&tag),
            app_state: concat(&["adk:app:{", &app_key, "}"]),
            user_member: sid.to_string(),
            app_member: concat(&[&user_key, ":", &sid]),
        }
    }
}

/// The user's state hash; `tag` is [`user_tag`]'s (a session's keys reuse theirs).
pub(crate) fn user_state_key(tag: &str) -> String {
    concat(&["adk:user:", tag])
}

/// The user's session index; `tag` is [`user_tag`]'s.
pub(crate) fn user_index_key(tag: &str) -> String {
    concat(&["adk:idx:", tag])
}

pub(crate) fn app_state_key(app: &str) -> String {
    concat(&["adk:app:{", &id_key(app), "}"])
}

/// The app index on standalone Redis (a cluster shards it: see `app_index.rs`).
pub(crate) fn app_index_key(app: &str) -> String {
    format!("adk:appidx:{{{}}}", id_key(app))
}

// ---------- artifacts ----------

/// The scope segment of `user:` names; never an encoded session id (`~` is always encoded).
const USER_SCOPE: &str = "~user";

pub(crate) struct ScopeKeys {
    pub(crate) names: String,
    /// `adk:artseq:{app:user}:<scope>:`; a name's counter adds `<name>`.
    seq_prefix: String,
    /// `adk:artvers:{app:user}:<scope>:`; a name's version set adds `<name>`.
    versions_prefix: String,
    /// `adk:artmeta:{app:user}:<scope>:`; a version's key adds `<version>:<name>`.
    meta_prefix: String,
    /// `adk:artchunk:{app:user}:<scope>:`; a chunk's key adds `<version>:<index>:<name>`.
    chunk_prefix: String,
}

impl ScopeKeys {
    /// `scope` is [`USER_SCOPE`] or an encoded session id.
    fn new(tag: &str, scope: &str) -> ScopeKeys {
        ScopeKeys {
            names: names_key(tag, scope),
            seq_prefix: format!("adk:artseq:{tag}:{scope}:"),
            versions_prefix: format!("adk:artvers:{tag}:{scope}:"),
            meta_prefix: format!("adk:artmeta:{tag}:{scope}:"),
            chunk_prefix: format!("adk:artchunk:{tag}:{scope}:"),
        }
    }

    /// A session's own artifacts. Only for validated ids (see [`NameKeys::new`]).
    pub(crate) fn of_session(app: &str, user: &str, session: &str) -> ScopeKeys {
        ScopeKeys::new(&user_tag(app, user), &id_key(session))
    }

    /// The keys of a scope the core service names.
    pub(crate) fn of(scope: &ArtifactScope) -> ScopeKeys {
        let tag = user_tag(scope.app_name(), scope.user_id());
        match scope.session_id() {
            Some(session) => ScopeKeys::new(&tag, &id_key(session)),
            None => ScopeKeys::new(&tag, USER_SCOPE),
        }
    }

    /// The arguments of `delete_scope` (see `crate::artifact::redis::lua::artifact_delete_fns`)
    /// for a script that calls it: the name set as its next key, the four prefixes as its
    /// next arguments.
    pub(crate) fn push_for_delete(&self, invocation: &mut ScriptInvocation<'_>) {
        invocation
            .key(&self.names)
            .arg(&self.seq_prefix)
            .arg(&self.versions_prefix)
            .arg(&self.meta_prefix)
            .arg(&self.chunk_prefix);
    }
}

/// The keys of one file name in its scope (see the module docs).
pub(crate) struct NameKeys {
    pub(crate) tag: String,
    pub(crate) name: String,
    pub(crate) names: String,
    pub(crate) seq: String,
    pub(crate) versions: String,
    /// `adk:artmeta:{app:user}:<scope>:`; a version's key adds `<version>:<name>`.
    pub(crate) meta_prefix: String,
    /// `adk:artchunk:{app:user}:<scope>:`; a chunk's key adds `<version>:<index>:<name>`.
    pub(crate) chunk_prefix: String,
}

impl NameKeys {
    /// The keys of a name the core service validated and placed in its scope.
    pub(crate) fn of(name: &StoredName) -> NameKeys {
        let scope = name.scope();
        NameKeys::new(scope.app_name(), scope.user_id(), scope.session_id(), name.file_name())
    }

    /// Only for validated ids: encoded (`id_key`), they cannot contain `:`, `{` or `}`,
    /// so they cannot forge a key. `session` is None for a `user:` name.
    pub(crate) fn new(app: &str, user: &str, session: Option<&str>, file_name: &str) -> NameKeys {
        let tag = user_tag(app, user);
        let scope = match session {
            Some(session) => ScopeKeys::new(&tag, &id_key(session)),
            None => ScopeKeys::new(&tag, USER_SCOPE),
        };
        NameKeys {
            name: file_name.to_string(),
            names: scope.names,
            seq: format!("{}{file_name}", scope.seq_prefix),
            versions: format!("{}{file_name}", scope.versions_prefix),
            meta_prefix: scope.meta_prefix,
            chunk_prefix: scope.chunk_prefix,
            tag,
        }
    }

    pub(crate) fn chunk(&self, version: i64, index: u64) -> String {
        format!("{}{version}:{index}:{}", self.chunk_prefix, self.name)
    }
}

fn names_key(tag: &str, scope: &str) -> String {
    format!("adk:artnames:{tag}:{scope}")
}

/// The prefix of one upload's pending chunks: `adk:artup:{app:user}:<upload id>:`; a
/// chunk's key adds its index. `tag` is [`user_tag`]'s.
pub(crate) fn upload_prefix(tag: &str, upload_id: &str) -> String {
    format!("adk:artup:{tag}:{upload_id}:")
}

// ---------- memories ----------

/// The keys of one user's memories.
pub(crate) struct MemoryKeys {
    pub(crate) stats: String,
    pub(crate) vectors: String,
    pub(crate) entry_prefix: String,
    pub(crate) term_prefix: String,
    /// Generated memories: `v` the generation version, `e:<event id>` an event read.
    pub(crate) generation: String,
    /// `<prefix><id>`: a list of the memory's revisions (protobuf `adk.v1.MemoryRevision`).
    pub(crate) revision_prefix: String,
    /// Ingested events not generated from yet: event id -> protobuf `adk.v1.Event`.
    pub(crate) buffer: String,
    /// Their order: event id -> the sequence number it was buffered with.
    pub(crate) buffer_order: String,
}

impl MemoryKeys {
    pub(crate) fn new(scope: &MemoryScope) -> MemoryKeys {
        let tag = user_tag(scope.app_name(), scope.user_id());
        MemoryKeys {
            stats: format!("adk:memstats:{tag}"),
            vectors: format!("adk:memvec:{tag}"),
            entry_prefix: format!("adk:mem:{tag}:"),
            term_prefix: format!("adk:memterm:{tag}:"),
            generation: format!("adk:memgen:{tag}"),
            revision_prefix: format!("adk:memrev:{tag}:"),
            buffer: format!("adk:membuf:{tag}"),
            buffer_order: format!("adk:membufq:{tag}"),
        }
    }
}

/// One shard of an app's users with ingested events: a sorted set of encoded user ids,
/// each scored with when it is due (or claimed until), in milliseconds since the epoch.
/// An app has [`INGEST_DUE_SHARDS`] of them on a cluster (a user's is chosen by the slot
/// of the user's keys), each its own hash tag, so the ingests of an app's users spread
/// over the nodes instead of all writing one key; one on a standalone Redis.
pub(crate) fn ingest_due_key(app: &str, shard: u16) -> String {
    format!("adk:memdue:{{{}:{shard}}}", id_key(app))
}

/// How many shards an app's index of due users has on a cluster.
pub(crate) const INGEST_DUE_SHARDS: u16 = 16;

/// The set of apps (encoded) that ever ingested: where a server generating for every
/// app (`*`) finds their [`ingest_due_key`]s.
pub const INGEST_APPS: &str = "adk:memdue-apps";

// ---------- session leases ----------

/// The index of running resumable runs (see `crate::lease::redis`).
pub const RUNS_INDEX: &str = "adk:runs";

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
pub(crate) fn holder_key(lease: &str) -> String {
    format!("{lease}:holder")
}

/// `lease`'s cancel mark.
pub(crate) fn cancel_key(lease: &str) -> String {
    format!("{lease}:cancel")
}

/// `lease`'s line of owners waiting in turn.
pub(crate) fn line_key(lease: &str) -> String {
    format!("{lease}:line")
}

/// `lease`'s resumable run record.
pub(crate) fn run_key(lease: &str) -> String {
    format!("{lease}:run")
}

/// A session's member of [`RUNS_INDEX`]: `[app, user, session]` as JSON.
pub(crate) fn runs_index_member(key: &LeaseKey) -> String {
    serde_json::json!([key.app_name, key.user_id, key.session_id]).to_string()
}

/// The session a member of [`RUNS_INDEX`] names; None for a foreign member.
pub(crate) fn runs_member_key(member: &str) -> Option<LeaseKey> {
    let (app_name, user_id, session_id): (String, String, String) = serde_json::from_str(member).ok()?;
    Some(LeaseKey {
        app_name,
        user_id,
        session_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_keys_share_the_user_tag() {
        let keys = SessionKeys::of("app", "alice", "s1");
        for key in [
            &keys.meta,
            &keys.state,
            &keys.events,
            &keys.event_ids,
            &keys.event_times,
            &keys.user_state,
            &keys.user_index,
        ] {
            assert!(key.contains("{app:alice}"), "{key}");
        }
        assert_eq!(keys.meta, "adk:sess:{app:alice}:s1");
        assert_eq!(keys.app_state, "adk:app:{app}");
        assert_eq!(app_index_key("app"), "adk:appidx:{app}");
        assert_eq!(keys.app_member, "alice:s1");
    }

    #[test]
    fn artifact_keys_share_the_user_tag_and_end_with_the_name() {
        let keys = NameKeys::new("app", "alice", Some("s1"), "a:{b}.txt");
        for key in [
            &keys.names,
            &keys.seq,
            &keys.versions,
            &keys.meta_prefix,
            &keys.chunk_prefix,
        ] {
            assert!(key.starts_with("adk:art"), "{key}");
            assert!(key.contains(":{app:alice}:s1"), "{key}");
        }
        assert_eq!(keys.seq, "adk:artseq:{app:alice}:s1:a:{b}.txt");
        assert_eq!(keys.chunk(3, 7), "adk:artchunk:{app:alice}:s1:3:7:a:{b}.txt");
        let user = NameKeys::new("app", "alice", None, "user:x");
        assert_eq!(user.versions, "adk:artvers:{app:alice}:~user:user:x");
        assert_eq!(user.names, "adk:artnames:{app:alice}:~user");
    }
}
