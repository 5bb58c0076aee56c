//! [`CoreMemoryService`]: every long-term memory rule, once, over any [`MemoryBackend`].

use super::backend::{
    GenerationCommit, IndexVersion, IndexedEntry, MemoryBackend, MemoryId, MemoryScope, Postings, QueryTerms,
};
use super::generate::{
    self, Consolidation, ExtractedFact, GenerationConfig, Generators, MemoryTopic, RELATED_PER_FACT, generator_for,
    is_expired,
};
use super::ingest::{INGEST_CLAIM_LEASE, INGEST_USERS_PER_TICK, IngestEventsRequest, IngestOutcome};
use super::vectors::{VectorCache, VectorIndex};
use super::{
    AddEventsRequest, AddMemoryRequest, DeleteMemoryRequest, Embedder, Embedders, GenerateMemoriesRequest,
    GeneratedMemory, ListRevisionsRequest, MAX_ENTRIES_PER_ADD, MemoryAction, MemoryEntry, MemoryFact, MemoryRevision,
    MemoryService, NewMemory, SearchMemoryRequest, SearchMemoryResponse, embedder_for, fuse, memories_from_events,
    query_terms, rank,
};
use crate::clock::Clock;
use crate::content::Content;
use crate::error::{AdkError, Conflict, Missing, Result};
use crate::event::Event;
use crate::validate;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// How many times a generation reads, asks and commits again when concurrent ones for
/// the same user keep committing first.
const MAX_GENERATION_ATTEMPTS: usize = 8;

/// The memory service every store serves: validation, limits, the (app, user) scope,
/// ids, merging the request's metadata, which events become memories, one entry per id,
/// tokenization, embedding with the app's model, and the BM25 / cosine ranking and its
/// fusion, over a backend that only stores and reads.
pub struct CoreMemoryService<B> {
    backend: B,
    embedders: Embedders,
    generators: Generators,
    clock: Clock,
    vector_cache: VectorCache,
}

impl<B: std::fmt::Debug> std::fmt::Debug for CoreMemoryService<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut embedded: Vec<&String> = self.embedders.keys().collect();
        embedded.sort();
        f.debug_struct("CoreMemoryService")
            .field("backend", &self.backend)
            .field("embedded_apps", &embedded)
            .field("generating_apps", &self.generators.keys().collect::<BTreeSet<_>>())
            .finish()
    }
}

impl<B: MemoryBackend> CoreMemoryService<B> {
    pub fn new(backend: B) -> Self {
        CoreMemoryService {
            backend,
            embedders: Embedders::new(),
            generators: Generators::new(),
            clock: Clock::system(),
            vector_cache: VectorCache::default(),
        }
    }

    /// Generates memories for the apps these settings are for (app name -> settings,
    /// `*` for every other app).
    pub fn with_generators(mut self, generators: Generators) -> Self {
        self.generators = generators;
        self
    }

    /// The clock memories' create, update and expire times are read from (tests move it).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
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
    async fn store(&self, scope: &MemoryScope, memories: Vec<NewMemory>) -> Result<Vec<String>> {
        let ids: Vec<String> = memories.iter().map(|m| m.entry.id.clone()).collect();
        let last: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
        let distinct: Vec<NewMemory> = memories
            .into_iter()
            .enumerate()
            .filter(|(i, memory)| last[memory.entry.id.as_str()] == *i)
            .map(|(_, memory)| memory)
            .collect();
        let entries = distinct
            .into_iter()
            .map(|memory| IndexedEntry::new(memory.entry, memory.context.as_deref()))
            .collect();
        let indexed = embed_entries(embedder_for(&self.embedders, scope.app_name()), entries).await?;
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
                NewMemory::from(entry)
            })
            .collect();
        self.store(&scope, entries).await
    }

    async fn add_events(&self, req: AddEventsRequest) -> Result<Vec<String>> {
        req.validate()?;
        let scope = MemoryScope::new(&req.app_name, &req.user_id);
        self.store(&scope, memories_from_events(&req)).await
    }

    /// By BM25, and with an embedding model by BM25 and cosine similarity fused ([`fuse`]).
    /// Memories whose ttl has passed are not returned.
    async fn search(&self, req: SearchMemoryRequest) -> Result<SearchMemoryResponse> {
        req.validate()?;
        let scope = MemoryScope::new(&req.app_name, &req.user_id);
        let memories = self.find(&scope, &req.query, req.effective_limit()).await?;
        Ok(SearchMemoryResponse { memories })
    }

    async fn delete(&self, req: DeleteMemoryRequest) -> Result<bool> {
        req.validate()?;
        let scope = MemoryScope::new(&req.app_name, &req.user_id);
        self.backend.remove(&scope, &MemoryId::new(req.memory_id)).await
    }

    /// Reads the user's generation state, asks the model to extract facts from the events
    /// not generated from yet and to consolidate them with the related memories, then
    /// commits the changes only if no other generation for the user committed meanwhile;
    /// otherwise reads and decides again (see [`MAX_GENERATION_ATTEMPTS`]).
    async fn generate(&self, req: GenerateMemoriesRequest) -> Result<Vec<GeneratedMemory>> {
        req.validate()?;
        if !req.source_session_id.is_empty() {
            return Err(AdkError::invalid(
                "source_session_id",
                "is read by the gRPC handler (generate_memories), not by the memory store",
            ));
        }
        let config = generator_for(&self.generators, &req.app_name)?;
        let ttl = match req.ttl_seconds {
            0 => config.ttl,
            seconds => Some(std::time::Duration::from_secs(seconds.unsigned_abs())),
        };
        let generation = Generation {
            scope: MemoryScope::new(&req.app_name, &req.user_id),
            topics: config.topics_for(&req.topics),
            ttl,
            config,
        };
        self.generate_from(&generation, &req.events, Vec::new()).await
    }

    /// Buffers the events with text; generates from the whole buffer with `force_flush`.
    /// The user is due for generation (see [`super::ingest`]) at once when the buffer
    /// holds the app's `max_events`, else after its idle time.
    async fn ingest(&self, req: IngestEventsRequest) -> Result<IngestOutcome> {
        req.validate()?;
        let config = generator_for(&self.generators, &req.app_name)?;
        let scope = MemoryScope::new(&req.app_name, &req.user_id);
        let events: Vec<Event> = req.events.into_iter().filter(generate::has_text).collect();
        let mut buffered_events = 0;
        if !events.is_empty() {
            // The index first: a crash before the events are stored leaves an entry with
            // nothing to generate, never buffered events no replica will look for.
            let due = later(self.clock.now(), config.ingest.idle());
            self.backend.schedule_ingest(&scope, due).await?;
            buffered_events = self.backend.buffer_events(&scope, &events).await?;
            if buffered_events >= u64::from(config.ingest.max_events) {
                self.backend.schedule_ingest(&scope, self.clock.now()).await?;
            }
        }
        let mut memories = Vec::new();
        if req.force_flush {
            memories = self.generate_buffered(&scope, config, usize::MAX).await?;
            buffered_events = 0;
        }
        Ok(IngestOutcome {
            buffered_events,
            memories,
        })
    }

    /// Claims due users of the apps this server generates for (every app that ingested,
    /// with a `*` generator), at most [`INGEST_USERS_PER_TICK`], and generates one
    /// request's worth of each one's buffer. A user with more left is due again at once; a
    /// failed generation (logged) is retried after the app's idle time.
    async fn generate_due_ingests(&self) -> Result<usize> {
        let apps: Vec<String> = if self.generators.contains_key("*") {
            self.backend.ingesting_apps().await?
        } else {
            self.generators.keys().cloned().collect()
        };
        let mut generated = 0;
        for app in apps {
            if generated == INGEST_USERS_PER_TICK {
                break;
            }
            // `*` is no app; an app name the store holds is checked as any request's.
            let Ok(config) = generator_for(&self.generators, &app) else {
                continue;
            };
            if app == "*" || validate::id("app_name", &app).is_err() {
                continue;
            }
            let now = self.clock.now();
            let claimed_until = later(now, INGEST_CLAIM_LEASE);
            let users = self
                .backend
                .claim_due(&app, now, claimed_until, INGEST_USERS_PER_TICK - generated)
                .await?;
            for user in users {
                generated += 1;
                if validate::id("user_id", &user).is_err() {
                    continue;
                }
                let scope = MemoryScope::new(&app, &user);
                let generated_part = self
                    .generate_buffered(&scope, config.clone(), MAX_ENTRIES_PER_ADD)
                    .await;
                let next = match generated_part {
                    // More than one request's worth: due again at once.
                    Ok(_) => {
                        let more = !self.backend.buffered_events(&scope, 1).await?.is_empty();
                        more.then(|| self.clock.now())
                    }
                    Err(error) => {
                        tracing::warn!(app = %app, user = %user, %error, "generating ingested events failed; retried later");
                        Some(later(self.clock.now(), config.ingest.idle()))
                    }
                };
                self.backend.release_claim(&scope, claimed_until, next).await?;
            }
        }
        Ok(generated)
    }

    async fn revisions(&self, req: ListRevisionsRequest) -> Result<Vec<MemoryRevision>> {
        req.validate()?;
        let scope = MemoryScope::new(&req.app_name, &req.user_id);
        let revisions = self
            .backend
            .revisions(&scope, &MemoryId::new(req.memory_id.clone()))
            .await?;
        if revisions.is_empty() {
            return Err(AdkError::NotFound(
                Missing::Other,
                format!("memory {} has no revisions", crate::validate::quoted(&req.memory_id)),
            ));
        }
        Ok(revisions)
    }

    async fn ping(&self) -> Result<()> {
        self.backend.ping().await
    }
}

impl<B: MemoryBackend> CoreMemoryService<B> {
    /// Generates from the user's buffered events, a request's worth at a time, until the
    /// buffer is empty or `limit` events were read; each part's commit takes its events
    /// out of the buffer.
    async fn generate_buffered(
        &self,
        scope: &MemoryScope,
        config: Arc<GenerationConfig>,
        limit: usize,
    ) -> Result<Vec<GeneratedMemory>> {
        let generation = Generation {
            scope: scope.clone(),
            topics: config.topics_for(&[]),
            ttl: config.ttl,
            config,
        };
        let mut changes = Vec::new();
        let mut read = 0;
        while read < limit {
            let events = self
                .backend
                .buffered_events(scope, MAX_ENTRIES_PER_ADD.min(limit - read))
                .await?;
            if events.is_empty() {
                break;
            }
            read += events.len();
            let ids = events.iter().map(|e| e.id.clone()).collect();
            changes.extend(self.generate_from(&generation, &events, ids).await?);
        }
        Ok(changes)
    }

    /// Reads the user's generation state, asks the model to extract facts from the events
    /// not generated from yet and to consolidate them with the related memories, then
    /// commits the changes (and takes `unbuffered` out of the user's buffer) only if no
    /// other generation for the user committed meanwhile; otherwise reads and decides
    /// again (see [`MAX_GENERATION_ATTEMPTS`]).
    async fn generate_from(
        &self,
        generation: &Generation,
        events: &[Event],
        unbuffered: Vec<String>,
    ) -> Result<Vec<GeneratedMemory>> {
        let Generation {
            scope,
            config,
            topics,
            ttl,
        } = generation;
        let events: Vec<&Event> = events.iter().filter(|e| generate::has_text(e)).collect();
        let ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
        // What the model extracted from which events: asked again only if a concurrent
        // generation took some of them meanwhile.
        let mut extracted: Option<(Vec<String>, Vec<ExtractedFact>)> = None;
        for _ in 0..MAX_GENERATION_ATTEMPTS {
            let state = self.backend.generation_state(scope, &ids).await?;
            let fresh: Vec<&Event> = events
                .iter()
                .copied()
                .filter(|e| !state.generated.contains(&e.id))
                .collect();
            if fresh.is_empty() && unbuffered.is_empty() {
                return Ok(Vec::new());
            }
            let fresh_ids: Vec<String> = fresh.iter().map(|e| e.id.clone()).collect();
            let facts = match &extracted {
                _ if fresh.is_empty() => Vec::new(),
                Some((from, facts)) if *from == fresh_ids => facts.clone(),
                _ => {
                    let facts = generate::extract(config.model.as_ref(), topics, &config.examples, &fresh).await?;
                    extracted = Some((fresh_ids.clone(), facts.clone()));
                    facts
                }
            };
            let related = self.related(scope, &facts).await?;
            let changes = if facts.is_empty() {
                Vec::new()
            } else {
                generate::consolidate(config.model.as_ref(), topics, &related, facts).await?
            };
            let now = self.clock.now();
            let expire_time = ttl
                .and_then(|ttl| chrono::Duration::from_std(ttl).ok())
                .map(|ttl| now + ttl);
            let mut commit = GenerationCommit::new(state.version);
            commit.event_ids = fresh_ids;
            commit.unbuffered = unbuffered.clone();
            let generated = plan(&mut commit, changes, &related, now, expire_time);
            let upserts = std::mem::take(&mut commit.upserts);
            commit.upserts = embed_entries(embedder_for(&self.embedders, scope.app_name()), upserts).await?;
            if self.backend.commit_generation(scope, commit).await? {
                return Ok(generated);
            }
        }
        Err(AdkError::Aborted(
            Conflict::Other,
            format!(
                "other memory generations for user {} kept committing first; retry",
                crate::validate::quoted(scope.user_id())
            ),
        ))
    }

    /// The user's `limit` memories most relevant to `query`, best first, without those
    /// whose ttl has passed.
    async fn find(&self, scope: &MemoryScope, query: &str, limit: usize) -> Result<Vec<MemoryEntry>> {
        let terms = query_terms(query);
        let embedder = embedder_for(&self.embedders, scope.app_name()).filter(|_| !query.trim().is_empty());
        // A search by meaning reads the keyword index even for a query without words: it
        // carries the version the user's cached vectors are checked against.
        let read_postings = async {
            if terms.is_empty() && embedder.is_none() {
                Ok(Postings::default())
            } else {
                self.backend.postings(scope, &QueryTerms::new(terms)).await
            }
        };
        let embed_query = async {
            match &embedder {
                Some(embedder) => embed_one(embedder.as_ref(), query).await.map(Some),
                None => Ok(None),
            }
        };
        // A model inside the server takes milliseconds of CPU for the query: the store's
        // answer is awaited meanwhile, not after.
        let (postings, query_vector) = futures::future::try_join(read_postings, embed_query).await?;
        let keyword = rank(&postings, limit);
        let ids: Vec<String> = match query_vector {
            None => keyword.into_iter().map(|(id, _)| id).collect(),
            Some(query) => {
                let vectors = self.vector_index(scope, postings.version()).await?;
                fuse(&keyword, &vectors.rank(&query, limit), limit)
            }
        };
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<MemoryId> = ids.into_iter().map(MemoryId::new).collect();
        let now = self.clock.now();
        let mut memories = self.backend.fetch(scope, &ids).await?;
        memories.retain(|m| !is_expired(m, now));
        Ok(memories)
    }

    /// The user's vectors: the cached copy while the store's version of the user's index
    /// (`version`, read before this call) is the one it was read at, else read again. The
    /// version is read first, so a copy is never labelled with a version newer than its
    /// content.
    async fn vector_index(&self, scope: &MemoryScope, version: IndexVersion) -> Result<Arc<VectorIndex>> {
        if let Some(index) = self.vector_cache.get(scope, version) {
            return Ok(index);
        }
        let index = Arc::new(VectorIndex::new(self.backend.vectors(scope).await?));
        self.vector_cache.insert(scope, version, index.clone());
        Ok(index)
    }

    /// The user's generated memories related to any of the facts (by search), each once.
    async fn related(&self, scope: &MemoryScope, facts: &[ExtractedFact]) -> Result<Vec<MemoryEntry>> {
        let mut related: Vec<MemoryEntry> = Vec::new();
        for fact in facts {
            for memory in self.find(scope, &fact.fact, RELATED_PER_FACT).await? {
                if memory.fact.is_some() && !related.iter().any(|m| m.id == memory.id) {
                    related.push(memory);
                }
            }
        }
        Ok(related)
    }
}

/// `by` after `now` (the durations added are bounded: an idle time or the claim lease).
fn later(now: DateTime<Utc>, by: std::time::Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(by)
        .ok()
        .and_then(|by| now.checked_add_signed(by))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// One generation's settings: whose memories, with which model, topics and ttl.
struct Generation {
    scope: MemoryScope,
    config: Arc<GenerationConfig>,
    topics: Vec<MemoryTopic>,
    ttl: Option<std::time::Duration>,
}

/// Fills the commit with what the consolidation decided (entries, removals, revisions)
/// and returns the changes as the caller sees them.
fn plan(
    commit: &mut GenerationCommit,
    changes: Vec<Consolidation>,
    related: &[MemoryEntry],
    now: DateTime<Utc>,
    expire_time: Option<DateTime<Utc>>,
) -> Vec<GeneratedMemory> {
    let existing = |id: &str| related.iter().find(|m| m.id == id).cloned().unwrap_or_default();
    let mut generated = Vec::new();
    for change in changes {
        let (memory, action) = match change {
            Consolidation::Create(fact) => {
                let memory = fact_entry(uuid::Uuid::new_v4().to_string(), fact, 1, now, now, expire_time);
                (memory, MemoryAction::Created)
            }
            Consolidation::Update { id, fact } => {
                let old = existing(&id).fact.unwrap_or_default();
                let created = old.create_time.unwrap_or(now);
                (
                    fact_entry(id, fact, old.revision + 1, created, now, expire_time),
                    MemoryAction::Updated,
                )
            }
            Consolidation::Delete { id, source_event_ids } => {
                let mut memory = existing(&id);
                let fact = memory.fact.get_or_insert_with(MemoryFact::default);
                fact.revision += 1;
                fact.source_event_ids = source_event_ids;
                fact.update_time = Some(now);
                (memory, MemoryAction::Deleted)
            }
        };
        let fact = memory.fact.clone().unwrap_or_default();
        let revision = MemoryRevision {
            revision: fact.revision,
            fact: match action {
                MemoryAction::Deleted => String::new(),
                _ => memory.text(),
            },
            topics: fact.topics,
            source_event_ids: fact.source_event_ids,
            create_time: Some(now),
            action,
        };
        let id = MemoryId::new(memory.id.clone());
        commit.revisions.push((id.clone(), revision));
        match action {
            MemoryAction::Deleted => commit.removals.push(id),
            _ => commit.upserts.push(IndexedEntry::new(memory.clone(), None)),
        }
        generated.push(GeneratedMemory { memory, action });
    }
    generated
}

/// A generated memory: the fact's text as its content, the rest in its [`MemoryFact`].
fn fact_entry(
    id: String,
    fact: ExtractedFact,
    revision: i64,
    created: DateTime<Utc>,
    now: DateTime<Utc>,
    expire_time: Option<DateTime<Utc>>,
) -> MemoryEntry {
    MemoryEntry {
        id,
        content: Content::new("user").with_text(fact.fact),
        // As ADK reads a Memory Bank memory: the user's, dated by its last update.
        author: "user".into(),
        timestamp: Some(now),
        custom_metadata: HashMap::new(),
        fact: Some(MemoryFact {
            topics: fact.topics,
            revision,
            source_event_ids: fact.source_event_ids,
            create_time: Some(created),
            update_time: Some(now),
            expire_time,
        }),
    }
}

/// The entries with their texts' embeddings, when there is a model (one request for all).
/// The entry's own text, without its context: on LoCoMo a turn's vector found the turns
/// a question needs less often with the turn before it in its text (BENCHMARKS.md).
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
