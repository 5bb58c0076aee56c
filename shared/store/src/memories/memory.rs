//! `InMemoryMemoryBackend`: memories and their keyword index in this process, under
//! the core memory service (`adk_grpc_core::CoreMemoryService`), which owns every rule; this
//! file only stores and reads, under one lock (so each write is atomic).

use adk_grpc_core::Result;
use adk_grpc_core::memory::{IndexedEntry, MemoryBackend, MemoryEntry, MemoryId, MemoryScope, Postings, QueryTerms};
use adk_grpc_core::sync;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// One process's memories. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct InMemoryMemoryBackend {
    users: Arc<Mutex<HashMap<MemoryScope, UserMemories>>>,
}

/// One user's entries and inverted index.
#[derive(Debug, Default)]
struct UserMemories {
    entries: HashMap<String, IndexedEntry>,
    /// Term -> entry id -> (count of the term in the entry, the entry's length).
    postings: HashMap<String, HashMap<String, (u32, u32)>>,
    total_length: u64,
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
        true
    }

    fn insert(&mut self, entry: IndexedEntry) {
        self.remove(&entry.entry.id);
        for (term, count) in &entry.term_counts {
            let ids = self.postings.entry(term.clone()).or_default();
            ids.insert(entry.entry.id.clone(), (*count, entry.length));
        }
        self.total_length += u64::from(entry.length);
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
}
