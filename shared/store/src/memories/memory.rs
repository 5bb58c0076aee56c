//! `InMemoryMemoryService`: memories and their keyword index in this process.

use adk_core::Result;
use adk_core::memory::{Embedder, Embedders, IndexedEntry, MemoryEntry, MemoryService, Postings, embedder_for};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// One process's memories. Cloning shares them.
#[derive(Clone, Default)]
pub struct InMemoryMemoryService {
    users: Arc<Mutex<HashMap<(String, String), UserMemories>>>,
    embedders: Embedders,
}

/// One user's entries and inverted index.
#[derive(Default)]
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

impl InMemoryMemoryService {
    pub fn new() -> Self {
        Self::default()
    }

    /// Embeds the memories of the apps these models are for, and searches them by meaning too.
    pub fn with_embedders(mut self, embedders: Embedders) -> Self {
        self.embedders = embedders;
        self
    }

    fn users(&self) -> MutexGuard<'_, HashMap<(String, String), UserMemories>> {
        self.users.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn user_key(app_name: &str, user_id: &str) -> (String, String) {
    (app_name.to_string(), user_id.to_string())
}

#[async_trait]
impl MemoryService for InMemoryMemoryService {
    async fn upsert(&self, app_name: &str, user_id: &str, entries: Vec<IndexedEntry>) -> Result<()> {
        let mut users = self.users();
        let user = users.entry(user_key(app_name, user_id)).or_default();
        entries.into_iter().for_each(|entry| user.insert(entry));
        Ok(())
    }

    async fn postings(&self, app_name: &str, user_id: &str, terms: &[String]) -> Result<Postings> {
        let users = self.users();
        let Some(user) = users.get(&user_key(app_name, user_id)) else {
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

    async fn vectors(&self, app_name: &str, user_id: &str) -> Result<Vec<(String, Vec<f32>)>> {
        let users = self.users();
        let Some(user) = users.get(&user_key(app_name, user_id)) else {
            return Ok(Vec::new());
        };
        Ok(user
            .entries
            .iter()
            .filter_map(|(id, e)| e.embedding.clone().map(|v| (id.clone(), v)))
            .collect())
    }

    fn embedder(&self, app_name: &str) -> Option<Arc<dyn Embedder>> {
        embedder_for(&self.embedders, app_name)
    }

    async fn fetch(&self, app_name: &str, user_id: &str, ids: &[String]) -> Result<Vec<MemoryEntry>> {
        let users = self.users();
        let Some(user) = users.get(&user_key(app_name, user_id)) else {
            return Ok(Vec::new());
        };
        Ok(ids
            .iter()
            .filter_map(|id| user.entries.get(id).map(|e| e.entry.clone()))
            .collect())
    }

    async fn remove(&self, app_name: &str, user_id: &str, memory_id: &str) -> Result<bool> {
        let mut users = self.users();
        let user = users.get_mut(&user_key(app_name, user_id));
        Ok(user.is_some_and(|user| user.remove(memory_id)))
    }
}
