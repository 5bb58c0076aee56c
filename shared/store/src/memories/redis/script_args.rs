//! The memory scripts' inputs, one builder per script: see `crate::redis::script_args`.

use super::lua::{BUFFER, CLAIM, COMMIT, DELETE, READ_BUFFER, RELEASE, UPSERT};
use super::vector_bytes;
use crate::redis::keys::MemoryKeys;
use crate::redis::script_args::ScriptArgs;
use adk_grpc_core::Result;
use adk_grpc_core::memory::{GenerationCommit, IndexedEntry};
use adk_grpc_core::validate::id_key;
use adk_grpc_proto::v1 as pb;
use prost::Message;
use redis::{Script, ScriptInvocation};
use std::collections::BTreeMap;

/// The memory scripts, loaded once per backend.
pub(super) struct Scripts {
    upsert: Script,
    delete: Script,
    commit: Script,
    buffer: Script,
    read_buffer: Script,
    claim: Script,
    release: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            upsert: Script::new(UpsertArgs::SOURCE),
            delete: Script::new(RemoveArgs::SOURCE),
            commit: Script::new(CommitArgs::SOURCE),
            buffer: Script::new(BufferArgs::SOURCE),
            read_buffer: Script::new(ReadBufferArgs::SOURCE),
            claim: Script::new(ClaimArgs::SOURCE),
            release: Script::new(ReleaseArgs::SOURCE),
        }
    }
}

/// One entry as `UPSERT` stores it.
pub(super) struct StoredEntry<'a> {
    pub id: &'a str,
    /// The protobuf `adk.v1.MemoryEntry`.
    pub payload: Vec<u8>,
    pub embedding: Option<&'a [f32]>,
    /// Its length in terms.
    pub length: u32,
    pub term_counts: &'a BTreeMap<String, u32>,
}

impl StoredEntry<'_> {
    pub(super) fn of(indexed: &IndexedEntry) -> StoredEntry<'_> {
        StoredEntry {
            id: &indexed.entry.id,
            payload: pb::MemoryEntry::from(&indexed.entry).encode_to_vec(),
            embedding: indexed.embedding.as_deref(),
            length: indexed.length,
            term_counts: &indexed.term_counts,
        }
    }
}

/// `UPSERT`'s inputs.
pub(super) struct UpsertArgs<'a> {
    pub keys: &'a MemoryKeys,
    pub entries: Vec<StoredEntry<'a>>,
}

impl ScriptArgs for UpsertArgs<'_> {
    const SOURCE: &'static str = UPSERT;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.upsert
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let keys = self.keys;
        to.key(&keys.stats)
            .key(&keys.vectors)
            .arg(&keys.entry_prefix)
            .arg(&keys.term_prefix)
            .arg(self.entries.len());
        push_entries(to, &self.entries);
        Ok(())
    }
}

/// The entries as `store_entries` (`lua.rs`) reads them.
fn push_entries(to: &mut ScriptInvocation<'_>, entries: &[StoredEntry<'_>]) {
    for entry in entries {
        to.arg(id_key(entry.id).as_ref())
            .arg(&entry.payload)
            // Empty: none.
            .arg(entry.embedding.map(vector_bytes).unwrap_or_default())
            .arg(entry.length)
            .arg(entry.term_counts.len());
        for (term, count) in entry.term_counts {
            to.arg(id_key(term).as_ref()).arg(*count);
        }
    }
}

/// `COMMIT`'s inputs: one generation (see `adk_grpc_core::memory::GenerationCommit`).
pub(super) struct CommitArgs<'a> {
    pub keys: &'a MemoryKeys,
    pub expected_version: u64,
    pub entries: Vec<StoredEntry<'a>>,
    /// The ids of the memories it deletes.
    pub removals: Vec<&'a str>,
    /// Memory id -> a protobuf `adk.v1.MemoryRevision` to append to its history.
    pub revisions: Vec<(&'a str, Vec<u8>)>,
    pub event_ids: &'a [String],
    /// The ingested events it consumed, taken out of the buffer.
    pub unbuffered: &'a [String],
}

impl<'a> CommitArgs<'a> {
    pub(super) fn of(keys: &'a MemoryKeys, commit: &'a GenerationCommit) -> CommitArgs<'a> {
        CommitArgs {
            keys,
            expected_version: commit.expected_version,
            entries: commit.upserts.iter().map(StoredEntry::of).collect(),
            removals: commit.removals.iter().map(|id| id.as_str()).collect(),
            revisions: commit
                .revisions
                .iter()
                .map(|(id, revision)| (id.as_str(), pb::MemoryRevision::from(revision).encode_to_vec()))
                .collect(),
            event_ids: &commit.event_ids,
            unbuffered: &commit.unbuffered,
        }
    }
}

impl ScriptArgs for CommitArgs<'_> {
    const SOURCE: &'static str = COMMIT;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.commit
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let keys = self.keys;
        to.key(&keys.stats)
            .key(&keys.vectors)
            .key(&keys.generation)
            .key(&keys.buffer)
            .key(&keys.buffer_order)
            .arg(&keys.entry_prefix)
            .arg(&keys.term_prefix)
            .arg(&keys.revision_prefix)
            .arg(self.expected_version)
            .arg(self.entries.len())
            .arg(self.removals.len())
            .arg(self.revisions.len())
            .arg(self.event_ids.len())
            .arg(self.unbuffered.len());
        push_entries(to, &self.entries);
        for id in &self.removals {
            to.arg(id_key(id).as_ref());
        }
        for (id, revision) in &self.revisions {
            to.arg(id_key(id).as_ref()).arg(revision);
        }
        for id in self.event_ids.iter().chain(self.unbuffered) {
            to.arg(id_key(id).as_ref());
        }
        Ok(())
    }
}

/// `BUFFER`'s inputs: events to buffer, each (id, protobuf `adk.v1.Event`).
pub(super) struct BufferArgs<'a> {
    pub keys: &'a MemoryKeys,
    pub events: Vec<(&'a str, Vec<u8>)>,
}

impl ScriptArgs for BufferArgs<'_> {
    const SOURCE: &'static str = BUFFER;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.buffer
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let keys = self.keys;
        to.key(&keys.generation)
            .key(&keys.buffer)
            .key(&keys.buffer_order)
            .arg(self.events.len());
        for (id, payload) in &self.events {
            to.arg(id_key(id).as_ref()).arg(payload);
        }
        Ok(())
    }
}

/// `READ_BUFFER`'s inputs: how many of the first buffered events to read.
pub(super) struct ReadBufferArgs<'a> {
    pub keys: &'a MemoryKeys,
    pub limit: usize,
}

impl ScriptArgs for ReadBufferArgs<'_> {
    const SOURCE: &'static str = READ_BUFFER;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.read_buffer
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(&self.keys.buffer_order).key(&self.keys.buffer).arg(self.limit);
        Ok(())
    }
}

/// `CLAIM`'s inputs: one app's index, times in milliseconds since the epoch.
pub(super) struct ClaimArgs<'a> {
    pub due: &'a str,
    pub now: i64,
    pub claimed_until: i64,
    pub limit: usize,
}

impl ScriptArgs for ClaimArgs<'_> {
    const SOURCE: &'static str = CLAIM;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.claim
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.due).arg(self.now).arg(self.claimed_until).arg(self.limit);
        Ok(())
    }
}

/// `RELEASE`'s inputs: one user of one app's index (its encoded id), times in
/// milliseconds since the epoch.
pub(super) struct ReleaseArgs<'a> {
    pub due: &'a str,
    pub user: &'a str,
    pub claimed_until: i64,
    /// None: out of the index.
    pub next: Option<i64>,
}

impl ScriptArgs for ReleaseArgs<'_> {
    const SOURCE: &'static str = RELEASE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.release
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.due)
            .arg(self.user)
            .arg(self.claimed_until)
            .arg(self.next.map(|next| next.to_string()).unwrap_or_default());
        Ok(())
    }
}

/// `DELETE`'s inputs.
pub(super) struct RemoveArgs<'a> {
    pub keys: &'a MemoryKeys,
    /// The entry's id ([`adk_grpc_core::memory::MemoryId`]).
    pub id: &'a str,
}

impl ScriptArgs for RemoveArgs<'_> {
    const SOURCE: &'static str = DELETE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.delete
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let keys = self.keys;
        to.key(&keys.stats)
            .key(&keys.vectors)
            .arg(&keys.entry_prefix)
            .arg(&keys.term_prefix)
            .arg(id_key(self.id).as_ref());
        Ok(())
    }
}

#[cfg(test)]
mod tests;
