//! What a memory store must do and nothing more: store a user's entries with their
//! keyword index (and vectors), and read them back. Every rule (validation, limits,
//! scoping, ids, merging the request's metadata, which events become memories, one
//! entry per id, tokenization, embedding, BM25 and cosine ranking and their fusion) is
//! [`super::CoreMemoryService`]'s. A backend is called only with values the core
//! built (their types have a field only the core can set, so no backend can be handed
//! an unchecked id) and answers with data, never a rule's error.

use super::{MemoryEntry, MemoryRevision, terms};
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::session::backend::Checked;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashSet};

/// One user's memories: a validated (app, user). Built by the core only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryScope {
    app_name: String,
    user_id: String,
    _checked: Checked,
}

impl MemoryScope {
    pub(super) fn new(app_name: &str, user_id: &str) -> MemoryScope {
        MemoryScope {
            app_name: app_name.to_string(),
            user_id: user_id.to_string(),
            _checked: Checked::new(),
        }
    }

    pub fn app_name(&self) -> &str {
        &self.app_name
    }

    pub fn user_id(&self) -> &str {
        &self.user_id
    }
}

/// A memory's id, as the core hands it to a backend: validated (or made by the core)
/// when it names a memory to delete, or one the backend itself reported when it names
/// a memory to fetch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryId {
    id: String,
    _checked: Checked,
}

impl MemoryId {
    pub(super) fn new(id: impl Into<String>) -> MemoryId {
        MemoryId {
            id: id.into(),
            _checked: Checked::new(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.id
    }
}

impl std::ops::Deref for MemoryId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.id
    }
}

/// An entry to store: validated, its id assigned, the request's metadata merged in,
/// its index terms counted and, with an embedding model, its text's vector. Built by
/// the core only.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedEntry {
    pub entry: MemoryEntry,
    /// Term -> how often it occurs in the entry's text.
    pub term_counts: BTreeMap<String, u32>,
    /// Number of terms of the text (the BM25 document length).
    pub length: u32,
    /// The text's embedding, when the app has an embedding model and the entry has text.
    pub embedding: Option<Vec<f32>>,
    _checked: Checked,
}

impl IndexedEntry {
    /// The entry with its index terms counted ([`terms`] of its text), and, when it has
    /// text, the terms of `context` ([`super::NewMemory::context`]) that its text lacks,
    /// once each: a reply is found by what it answers, yet never outranks, on the words
    /// they share, the message that said them.
    pub(super) fn new(entry: MemoryEntry, context: Option<&str>) -> IndexedEntry {
        let mut term_counts = BTreeMap::new();
        let mut length = 0;
        for term in terms(&entry.text()) {
            *term_counts.entry(term).or_insert(0) += 1;
            length += 1;
        }
        if length > 0 {
            for term in terms(context.unwrap_or_default()) {
                if let std::collections::btree_map::Entry::Vacant(vacant) = term_counts.entry(term) {
                    vacant.insert(1);
                    length += 1;
                }
            }
        }
        IndexedEntry {
            entry,
            term_counts,
            length,
            embedding: None,
            _checked: Checked::new(),
        }
    }
}

/// The distinct index terms of a query, in order (see [`super::query_terms`]). Built by
/// the core only.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryTerms {
    terms: Vec<String>,
    _checked: Checked,
}

impl QueryTerms {
    pub(super) fn new(terms: Vec<String>) -> QueryTerms {
        QueryTerms {
            terms,
            _checked: Checked::new(),
        }
    }
}

impl std::ops::Deref for QueryTerms {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.terms
    }
}

/// The keyword index of one user, as a search needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Postings {
    /// How many entries the user has.
    pub entries: u64,
    /// Sum of their lengths (for the average length BM25 normalizes by).
    pub total_length: u64,
    /// Entries stored and removed, ever: with the two totals, the user's [`IndexVersion`].
    pub writes: u64,
    /// Per query term, in the query's order: (entry id, count of the term in the entry,
    /// the entry's length).
    pub terms: Vec<Vec<(String, u32, u32)>>,
}

/// Where a user's entries stand: it changes with every entry stored or removed, so a
/// copy of the user's vectors read at one version is still theirs while the store
/// reports the same one (see [`super::vectors::VectorCache`]). Read with the keyword
/// index ([`Postings::version`]), before the vectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexVersion {
    writes: u64,
    entries: u64,
    total_length: u64,
}

impl Postings {
    /// The user's index version when these postings were read.
    pub fn version(&self) -> IndexVersion {
        IndexVersion {
            writes: self.writes,
            entries: self.entries,
            total_length: self.total_length,
        }
    }
}

/// Where a user's memory generation stands, as a generation reads it before asking the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationState {
    /// Raised by every committed generation: a commit expecting an older one is refused.
    pub version: u64,
    /// Which of the asked event ids a committed generation already read.
    pub generated: HashSet<String>,
}

/// What one generation writes, all at once and only if the user's generation version is
/// still `expected_version` (then raised by one). Built by the core only.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationCommit {
    pub expected_version: u64,
    /// Created and updated memories, each replacing the entry of its id.
    pub upserts: Vec<IndexedEntry>,
    /// Deleted memories.
    pub removals: Vec<MemoryId>,
    /// Appended to each memory's revision history.
    pub revisions: Vec<(MemoryId, MemoryRevision)>,
    /// The events this generation read, remembered so that no later one reads them again.
    pub event_ids: Vec<String>,
    /// Ingested events this generation consumed: taken out of the user's buffer.
    pub unbuffered: Vec<String>,
    _checked: Checked,
}

impl GenerationCommit {
    pub(super) fn new(expected_version: u64) -> GenerationCommit {
        GenerationCommit {
            expected_version,
            upserts: Vec::new(),
            removals: Vec::new(),
            revisions: Vec::new(),
            event_ids: Vec::new(),
            unbuffered: Vec::new(),
            _checked: Checked::new(),
        }
    }
}

fn cannot_generate() -> AdkError {
    AdkError::Unimplemented("this memory store does not keep generated memories".into())
}

/// Stores one user's memories, their keyword index and their vectors. Implementations:
/// in memory and Redis (standalone and cluster) in `adk-grpc-store`. Errors are the store's
/// own failures (unreachable, corrupt data); what a request may not do is decided by
/// the core before the call.
#[async_trait]
pub trait MemoryBackend: Send + Sync + 'static {
    /// Writes the entries (their ids distinct) with their index terms and vectors, each
    /// replacing the user's entry with the same id together with that entry's terms and
    /// vector, and keeps the user's totals ([`Postings::entries`],
    /// [`Postings::total_length`]); atomically per entry at least.
    async fn upsert(&self, scope: &MemoryScope, entries: Vec<IndexedEntry>) -> Result<()>;

    /// The user's index entries of `terms` (in that order) and the user's totals.
    async fn postings(&self, scope: &MemoryScope, terms: &QueryTerms) -> Result<Postings>;

    /// Every vector of the user's entries (those embedded), by entry id.
    async fn vectors(&self, scope: &MemoryScope) -> Result<Vec<(String, Vec<f32>)>>;

    /// The user's entries with these ids, in that order; missing ids are skipped.
    async fn fetch(&self, scope: &MemoryScope, ids: &[MemoryId]) -> Result<Vec<MemoryEntry>>;

    /// Deletes one entry of the user with its index terms and vector; false when there
    /// was none.
    async fn remove(&self, scope: &MemoryScope, id: &MemoryId) -> Result<bool>;

    /// The user's generation version and which of `event_ids` were generated from.
    /// Generated memories are optional for a store: the default refuses (UNIMPLEMENTED).
    async fn generation_state(&self, scope: &MemoryScope, event_ids: &[String]) -> Result<GenerationState> {
        let _ = (scope, event_ids);
        Err(cannot_generate())
    }

    /// Applies the commit atomically if the user's generation version is still its
    /// `expected_version`, raising it; false (nothing written) when it is not.
    async fn commit_generation(&self, scope: &MemoryScope, commit: GenerationCommit) -> Result<bool> {
        let _ = (scope, commit);
        Err(cannot_generate())
    }

    /// The revisions of one memory, oldest first (none: empty).
    async fn revisions(&self, scope: &MemoryScope, id: &MemoryId) -> Result<Vec<MemoryRevision>> {
        let _ = (scope, id);
        Err(cannot_generate())
    }

    /// Sets when the user's ingested events are due for generation, in the store's index
    /// of due users (replacing any time or claim there), and records that the app has
    /// ingested. Ingestion is optional for a store, like generation.
    async fn schedule_ingest(&self, scope: &MemoryScope, due: DateTime<Utc>) -> Result<()> {
        let _ = (scope, due);
        Err(cannot_generate())
    }

    /// Appends to the user's buffer, in order, the events it does not hold yet and no
    /// generation read (by id), atomically; returns how many events it holds then.
    async fn buffer_events(&self, scope: &MemoryScope, events: &[Event]) -> Result<u64> {
        let _ = (scope, events);
        Err(cannot_generate())
    }

    /// The user's first `limit` buffered events, in the order they were buffered.
    async fn buffered_events(&self, scope: &MemoryScope, limit: usize) -> Result<Vec<Event>> {
        let _ = (scope, limit);
        Err(cannot_generate())
    }

    /// The apps that ever ingested (whose users the index may hold).
    async fn ingesting_apps(&self) -> Result<Vec<String>> {
        Err(cannot_generate())
    }

    /// Claims up to `limit` of the app's users due at `now` (their time at or before it):
    /// each one's time becomes `claimed_until`, atomically per user, so no other claim
    /// takes it before then. Returns their user ids.
    async fn claim_due(
        &self,
        app_name: &str,
        now: DateTime<Utc>,
        claimed_until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<String>> {
        let _ = (app_name, now, claimed_until, limit);
        Err(cannot_generate())
    }

    /// Ends a claim, only if the user's time is still `claimed_until` (no ingest moved it
    /// meanwhile): due again at `next` when given, else out of the index.
    async fn release_claim(
        &self,
        scope: &MemoryScope,
        claimed_until: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<()> {
        let _ = (scope, claimed_until, next);
        Err(cannot_generate())
    }

    /// Ok while the backing store answers.
    async fn ping(&self) -> Result<()> {
        Ok(())
    }
}
