//! `InMemoryMemoryBackend`: memories and their keyword index in this process, under
//! the core memory service (`adk_grpc_core::CoreMemoryService`), which owns every rule; this
//! file only stores and reads, under one lock (so each write is atomic); the index of
//! users with ingested events due has a lock of its own.

use adk_grpc_core::Event;
use adk_grpc_core::Result;
use adk_grpc_core::memory::{
    GenerationCommit, GenerationState, IndexedEntry, MemoryBackend, MemoryEntry, MemoryId, MemoryRevision, MemoryScope,
    Postings, QueryTerms,
};
use adk_grpc_core::sync;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// One process's memories. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct InMemoryMemoryBackend {
    users: Arc<Mutex<HashMap<MemoryScope, UserMemories>>>,
    due: Arc<Mutex<DueIndex>>,
}

/// The index of users with ingested events: app -> user -> when due (or claimed until).
type DueIndex = BTreeMap<String, BTreeMap<String, DateTime<Utc>>>;

/// One user's entries and inverted index.
#[derive(Debug, Default)]
struct UserMemories {
    entries: HashMap<String, IndexedEntry>,
    /// Term -> entry id -> (count of the term in the entry, the entry's length).
    postings: HashMap<String, HashMap<String, (u32, u32)>>,
    total_length: u64,
    /// Entries stored and removed, ever (see `Postings::writes`).
    writes: u64,
    /// Raised by every committed generation.
    generation_version: u64,
    /// The events generations read.
    generated_events: HashSet<String>,
    /// Memory id -> its revisions, oldest first.
    revisions: HashMap<String, Vec<MemoryRevision>>,
    /// Ingested events not generated from yet, in the order they came.
    buffer: Vec<Event>,
}

impl UserMemories {
    fn remove(&mut self, id: &str) -> bool {
        let Some(old) = self.entries.remove(id) else {
            return false;
        };
        for term in old.term_counts.keys() {
            if let Some(ids) = self.postings.get_mut(term) {
                ids.remove(id);
                if ids.is_empty() {
                    self.postings.remove(term);
                }
            }
        }
        self.total_length -= u64::from(old.length);
        self.writes += 1;
        true
    }

    fn insert(&mut self, entry: IndexedEntry) {
        self.remove(&entry.entry.id);
        for (term, count) in &entry.term_counts {
            let ids = self.postings.entry(term.clone()).or_default();
            ids.insert(entry.entry.id.clone(), (*count, entry.length));
        }
        self.total_length += u64::from(entry.length);
        self.writes += 1;
        self.entries.insert(entry.entry.id.clone(), entry);
    }
}

impl InMemoryMemoryBackend {
    pub fn new() -> Self {
        Self::default()
    }

    fn users(&self) -> MutexGuard<'_, HashMap<MemoryScope, UserMemories>> {
        sync::lock(&self.users)
    }
}

#[async_trait]
impl MemoryBackend for InMemoryMemoryBackend {
    async fn upsert(&self, scope: &MemoryScope, entries: Vec<IndexedEntry>) -> Result<()> {
        let mut users = self.users();
        let user = users.entry(scope.clone()).or_default();
        entries.into_iter().for_each(|entry| user.insert(entry));
        Ok(())
    }

    async fn postings(&self, scope: &MemoryScope, terms: &QueryTerms) -> Result<Postings> {
        let users = self.users();
        let Some(user) = users.get(scope) else {
            return Ok(Postings::default());
        };
        let terms = terms
            .iter()
            .map(|term| {
                user.postings.get(term).map_or_else(Vec::new, |ids| {
                    ids.iter()
                        .map(|(id, (count, length))| (id.clone(), *count, *length))
                        .collect()
                })
            })
            .collect();
        Ok(Postings {
            entries: user.entries.len() as u64,
            total_length: user.total_length,
            writes: user.writes,
            terms,
        })
    }

    async fn vectors(&self, scope: &MemoryScope) -> Result<Vec<(String, Vec<f32>)>> {
        let users = self.users();
        let Some(user) = users.get(scope) else {
            return Ok(Vec::new());
        };
        Ok(user
            .entries
            .iter()
            .filter_map(|(id, e)| e.embedding.clone().map(|v| (id.clone(), v)))
            .collect())
    }

    async fn fetch(&self, scope: &MemoryScope, ids: &[MemoryId]) -> Result<Vec<MemoryEntry>> {
        let users = self.users();
        let Some(user) = users.get(scope) else {
            return Ok(Vec::new());
        };
        Ok(ids
            .iter()
            .filter_map(|id| user.entries.get(id.as_str()).map(|e| e.entry.clone()))
            .collect())
    }

    async fn remove(&self, scope: &MemoryScope, id: &MemoryId) -> Result<bool> {
        let mut users = self.users();
        Ok(users.get_mut(scope).is_some_and(|user| user.remove(id)))
    }

    async fn generation_state(&self, scope: &MemoryScope, event_ids: &[String]) -> Result<GenerationState> {
        let users = self.users();
        let Some(user) = users.get(scope) else {
            return Ok(GenerationState::default());
        };
        Ok(GenerationState {
            version: user.generation_version,
            generated: event_ids
                .iter()
                .filter(|id| user.generated_events.contains(*id))
                .cloned()
                .collect(),
        })
    }

    async fn commit_generation(&self, scope: &MemoryScope, commit: GenerationCommit) -> Result<bool> {
        let mut users = self.users();
        let user = users.entry(scope.clone()).or_default();
        if user.generation_version != commit.expected_version {
            return Ok(false);
        }
        commit.upserts.into_iter().for_each(|entry| user.insert(entry));
        for id in &commit.removals {
            user.remove(id);
        }
        for (id, revision) in commit.revisions {
            user.revisions.entry(id.to_string()).or_default().push(revision);
        }
        user.generated_events.extend(commit.event_ids);
        let unbuffered: HashSet<String> = commit.unbuffered.into_iter().collect();
        user.buffer.retain(|event| !unbuffered.contains(&event.id));
        user.generation_version += 1;
        Ok(true)
    }

    async fn schedule_ingest(&self, scope: &MemoryScope, due: DateTime<Utc>) -> Result<()> {
        let mut index = sync::lock(&self.due);
        let users = index.entry(scope.app_name().to_string()).or_default();
        users.insert(scope.user_id().to_string(), due);
        Ok(())
    }

    async fn buffer_events(&self, scope: &MemoryScope, events: &[Event]) -> Result<u64> {
        let mut users = self.users();
        let user = users.entry(scope.clone()).or_default();
        for event in events {
            let held = user.buffer.iter().any(|e| e.id == event.id);
            if !held && !user.generated_events.contains(&event.id) {
                user.buffer.push(event.clone());
            }
        }
        Ok(user.buffer.len() as u64)
    }

    async fn buffered_events(&self, scope: &MemoryScope, limit: usize) -> Result<Vec<Event>> {
        let users = self.users();
        Ok(users
            .get(scope)
            .map(|user| user.buffer.iter().take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn ingesting_apps(&self) -> Result<Vec<String>> {
        Ok(sync::lock(&self.due).keys().cloned().collect())
    }

    async fn claim_due(
        &self,
        app_name: &str,
        now: DateTime<Utc>,
        claimed_until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<String>> {
        let mut index = sync::lock(&self.due);
        let Some(users) = index.get_mut(app_name) else {
            return Ok(Vec::new());
        };
        let mut due: Vec<(DateTime<Utc>, String)> = users
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(user, at)| (*at, user.clone()))
            .collect();
        due.sort();
        due.truncate(limit);
        for (_, user) in &due {
            users.insert(user.clone(), claimed_until);
        }
        Ok(due.into_iter().map(|(_, user)| user).collect())
    }

    async fn release_claim(
        &self,
        scope: &MemoryScope,
        claimed_until: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<()> {
        let mut index = sync::lock(&self.due);
        let Some(users) = index.get_mut(scope.app_name()) else {
            return Ok(());
        };
        if users.get(scope.user_id()) == Some(&claimed_until) {
            match next {
                Some(next) => users.insert(scope.user_id().to_string(), next),
                None => users.remove(scope.user_id()),
            };
        }
        Ok(())
    }

    async fn revisions(&self, scope: &MemoryScope, id: &MemoryId) -> Result<Vec<MemoryRevision>> {
        let users = self.users();
        Ok(users
            .get(scope)
            .and_then(|user| user.revisions.get(id.as_str()))
            .cloned()
            .unwrap_or_default())
    }
}
