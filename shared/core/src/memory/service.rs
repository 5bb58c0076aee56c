//! [`CoreMemoryService`]: every long-term memory rule, once, over any [`MemoryBackend`].

use super::backend::{IndexedEntry, MemoryBackend, MemoryId, MemoryScope, QueryTerms};
use super::{
    AddEventsRequest, AddMemoryRequest, DeleteMemoryRequest, Embedder, Embedders, MemoryEntry, MemoryService,
    SearchMemoryRequest, SearchMemoryResponse, embedder_for, entries_from_events, fuse, query_terms, rank,
    rank_by_similarity,
};
use crate::error::{AdkError, Result};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Arc;

/// The memory service every store serves: validation, limits, the (app, user) scope,
/// ids, merging the request's metadata, which events become memories, one entry per id,
/// tokenization, embedding with the app's model, and the BM25 / cosine ranking and its
/// fusion, over a backend that only stores and reads.
pub struct CoreMemoryService<B> {
    backend: B,
    embedders: Embedders,
}

impl<B: std::fmt::Debug> std::fmt::Debug for CoreMemoryService<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut embedded: Vec<&String> = self.embedders.keys().collect();
        embedded.sort();
        f.debug_struct("CoreMemoryService")
            .field("backend", &self.backend)
            .field("embedded_apps", &embedded)
            .finish()
    }
}

impl<B: MemoryBackend> CoreMemoryService<B> {
    pub fn new(backend: B) -> Self {
        CoreMemoryService {
            backend,
            embedders: Embedders::new(),
        }
    }

    /// Embeds the memories of the apps these models are for, and searches them by
    /// meaning too (app name -> model, `*` for every other app).
    pub fn with_embedders(mut self, embedders: Embedders) -> Self {
        self.embedders = embedders;
        self
    }

    /// The backend, for what is its own (a test's peek).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Indexes, embeds and stores entries the core has validated and given ids; returns
    /// their ids in order. An id given twice is stored once, as its last entry: what
    /// adding the entries one after the other would leave.
    async fn store(&self, scope: &MemoryScope, entries: Vec<MemoryEntry>) -> Result<Vec<String>> {
        let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
        let last: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
        let distinct = entries
            .into_iter()
            .enumerate()
            .filter(|(i, entry)| last[entry.id.as_str()] == *i)
            .map(|(_, entry)| IndexedEntry::new(entry))
            .collect();
        let indexed = embed_entries(embedder_for(&self.embedders, scope.app_name()), distinct).await?;
        if !indexed.is_empty() {
            self.backend.upsert(scope, indexed).await?;
        }
        Ok(ids)
    }
}

#[async_trait]
impl<B: MemoryBackend> MemoryService for CoreMemoryService<B> {
    async fn add_memory(&self, req: AddMemoryRequest) -> Result<Vec<String>> {
        req.validate()?;
        let scope = MemoryScope::new(&req.app_name, &req.user_id);
        let entries = req
            .memories
            .into_iter()
            .map(|mut entry| {
                if entry.id.is_empty() {
                    entry.id = uuid::Uuid::new_v4().to_string();
                }
                // The entry's own keys win.
                for (key, value) in &req.custom_metadata {
                    entry
                        .custom_metadata
                        .entry(key.clone())
                        .or_insert_with(|| value.clone());
                }
                entry
            })
            .collect();
        self.store(&scope, entries).await
    }

    async fn add_events(&self, req: AddEventsRequest) -> Result<Vec<String>> {
        req.validate()?;
        let scope = MemoryScope::new(&req.app_name, &req.user_id);
        self.store(&scope, entries_from_events(&req)).await
    }

    /// By BM25, and with an embedding model by BM25 and cosine similarity fused ([`fuse`]).
    async fn search(&self, req: SearchMemoryRequest) -> Result<SearchMemoryResponse> {
        req.validate()?;
        let scope = MemoryScope::new(&req.app_name, &req.user_id);
        let limit = req.effective_limit();
        let terms = query_terms(&req.query);
        let keyword = if terms.is_empty() {
            Vec::new()
        } else {
            let postings = self.backend.postings(&scope, &QueryTerms::new(terms)).await?;
            rank(&postings, limit)
        };
        let embedder = embedder_for(&self.embedders, &req.app_name).filter(|_| !req.query.trim().is_empty());
        let ids: Vec<String> = match embedder {
            None => keyword.into_iter().map(|(id, _)| id).collect(),
            Some(embedder) => {
                let query = embed_one(embedder.as_ref(), &req.query).await?;
                let vectors = self.backend.vectors(&scope).await?;
                fuse(&keyword, &rank_by_similarity(&query, &vectors, limit), limit)
            }
        };
        if ids.is_empty() {
            return Ok(SearchMemoryResponse::default());
        }
        let ids: Vec<MemoryId> = ids.into_iter().map(MemoryId::new).collect();
        let memories = self.backend.fetch(&scope, &ids).await?;
        Ok(SearchMemoryResponse { memories })
    }

    async fn delete(&self, req: DeleteMemoryRequest) -> Result<bool> {
        req.validate()?;
        let scope = MemoryScope::new(&req.app_name, &req.user_id);
        self.backend.remove(&scope, &MemoryId::new(req.memory_id)).await
    }

    async fn ping(&self) -> Result<()> {
        self.backend.ping().await
    }
}

/// The entries with their texts' embeddings, when there is a model (one request for all).
async fn embed_entries(
    embedder: Option<Arc<dyn Embedder>>,
    mut entries: Vec<IndexedEntry>,
) -> Result<Vec<IndexedEntry>> {
    let Some(embedder) = embedder else {
        return Ok(entries);
    };
    let texted: Vec<usize> = (0..entries.len())
        .filter(|i| !entries[*i].entry.text().trim().is_empty())
        .collect();
    if texted.is_empty() {
        return Ok(entries);
    }
    let texts: Vec<String> = texted.iter().map(|i| entries[*i].entry.text()).collect();
    let vectors = embedder.embed(&texts).await?;
    if vectors.len() != texts.len() {
        return Err(AdkError::Model(format!(
            "the embedding model returned {} vectors for {} texts",
            vectors.len(),
            texts.len()
        )));
    }
    for (i, vector) in texted.into_iter().zip(vectors) {
        entries[i].embedding = Some(vector);
    }
    Ok(entries)
}

async fn embed_one(embedder: &dyn Embedder, text: &str) -> Result<Vec<f32>> {
    let mut vectors = embedder.embed(&[text.to_string()]).await?;
    match (vectors.pop(), vectors.is_empty()) {
        (Some(vector), true) => Ok(vector),
        _ => Err(AdkError::Model(
            "the embedding model did not return one vector for the query".into(),
        )),
    }
}
