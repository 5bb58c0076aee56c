//! The memory scripts' inputs, one builder per script: see `crate::redis::script_args`.

use super::lua::{COMMIT, DELETE, UPSERT};
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
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            upsert: Script::new(UpsertArgs::SOURCE),
            delete: Script::new(RemoveArgs::SOURCE),
            commit: Script::new(CommitArgs::SOURCE),
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
            .arg(&keys.entry_prefix)
            .arg(&keys.term_prefix)
            .arg(&keys.revision_prefix)
            .arg(self.expected_version)
            .arg(self.entries.len())
            .arg(self.removals.len())
            .arg(self.revisions.len())
            .arg(self.event_ids.len());
        push_entries(to, &self.entries);
        for id in &self.removals {
            to.arg(id_key(id).as_ref());
        }
        for (id, revision) in &self.revisions {
            to.arg(id_key(id).as_ref()).arg(revision);
        }
        for id in self.event_ids {
            to.arg(id_key(id).as_ref());
        }
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
