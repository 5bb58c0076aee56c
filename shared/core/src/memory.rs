//! Long-term memory (ADK's `BaseMemoryService`): what an agent may recall of a
//! user's earlier sessions, scoped to (app, user).
//!
//! [`MemoryService`] is what callers use (the runner, its tools, the gRPC handlers;
//! `adk-grpc-client` serves it over gRPC). Every rule lives once in [`CoreMemoryService`],
//! whatever the store: validation, which events become memories
//! ([`memories_from_events`]), tokenization ([`terms`]), BM25 ranking ([`rank`]),
//! cosine ranking ([`VectorIndex::rank`]) and their fusion ([`fuse`]). A store
//! implements the narrow [`MemoryBackend`] (upsert, postings, vectors, fetch,
//! remove), called only with values the core has checked.

mod backend;
pub mod generate;
pub mod ingest;
mod service;
mod vectors;

pub use backend::{
    GenerationCommit, GenerationState, IndexVersion, IndexedEntry, MemoryBackend, MemoryId, MemoryScope, Postings,
    QueryTerms,
};
pub use generate::{
    ExtractedFact, GenerationConfig, Generators, IngestConfig, MANAGED_TOPICS, MemoryExample, MemoryTopic,
    generator_for, is_expired,
};
pub use ingest::{IngestEventsRequest, IngestOutcome};
pub use service::CoreMemoryService;
pub use vectors::{DEFAULT_VECTOR_CACHE_BYTES, VectorCache, VectorIndex};

use crate::content::Content;
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::session::{GetRequest, Session, SessionService};
use crate::validate::{self, quoted};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// Most entries (or events) one add may carry.
pub const MAX_ENTRIES_PER_ADD: usize = 1000;
/// Longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;
/// Results of a search that asks for none in particular (ADK's `_MAX_SEARCH_RESULTS`).
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
pub const MAX_SEARCH_LIMIT: usize = 100;
/// Longest author name, in bytes.
pub const MAX_AUTHOR_BYTES: usize = 256;
/// Longest word indexed, in bytes: longer runs (base64, hashes) are no words.
pub const MAX_TERM_BYTES: usize = 64;
/// Most distinct words of a query that are looked up: bounds what a search costs.
pub const MAX_QUERY_TERMS: usize = 32;
/// The key of an entry's `custom_metadata` recording the session an event came from.
pub const SESSION_ID_METADATA_KEY: &str = "session_id";

/// One memory (ADK's `MemoryEntry`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryEntry {
    /// Unique within (app, user); empty in an add gets a new id.
    pub id: String,
    pub content: Content,
    /// Who said it (an event's author); may be empty.
    pub author: String,
    /// When the remembered content happened.
    pub timestamp: Option<DateTime<Utc>>,
    pub custom_metadata: HashMap<String, Value>,
    /// Set on memories [`MemoryService::generate`] made.
    pub fact: Option<MemoryFact>,
}

/// What a generated memory carries besides its text (the entry's content: the fact).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryFact {
    /// The labels of the memory topics the fact falls under.
    pub topics: Vec<String>,
    /// 1 when created, one more at each update.
    pub revision: i64,
    /// The events the current revision was generated from.
    pub source_event_ids: Vec<String>,
    pub create_time: Option<DateTime<Utc>>,
    pub update_time: Option<DateTime<Utc>>,
    /// After this time the memory is no longer found.
    pub expire_time: Option<DateTime<Utc>>,
}

/// What a generation did to one memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryAction {
    #[default]
    Created,
    Updated,
    Deleted,
}

/// One revision of a generated memory.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryRevision {
    pub revision: i64,
    /// The fact as it read at this revision (empty for a deletion).
    pub fact: String,
    pub topics: Vec<String>,
    pub source_event_ids: Vec<String>,
    pub create_time: Option<DateTime<Utc>>,
    pub action: MemoryAction,
}

/// Generates memories from events (GenerateMemories).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerateMemoriesRequest {
    pub app_name: String,
    pub user_id: String,
    /// The source: a stored session (read by [`generate_memories`]) or `events`, not both.
    pub source_session_id: String,
    pub events: Vec<Event>,
    /// Replaces the app's topics for this call; empty: the app's.
    pub topics: Vec<MemoryTopic>,
    /// Replaces the app's ttl for this call, in seconds; 0: the app's.
    pub ttl_seconds: i64,
}

/// One memory a generation created, updated or deleted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GeneratedMemory {
    /// After the change (a deleted memory as it was, with its deletion's revision).
    pub memory: MemoryEntry,
    pub action: MemoryAction,
}

/// The revisions of one generated memory (ListMemoryRevisions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListRevisionsRequest {
    pub app_name: String,
    pub user_id: String,
    pub memory_id: String,
}

impl MemoryEntry {
    /// The text search matches: the entry's text parts, joined by spaces.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self.content.parts.iter().filter_map(|p| p.text()).collect();
        texts.join(" ")
    }
}

/// Adds explicit entries to a user's memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AddMemoryRequest {
    pub app_name: String,
    pub user_id: String,
    pub memories: Vec<MemoryEntry>,
    /// Merged into every entry's metadata; an entry's own keys win.
    pub custom_metadata: HashMap<String, Value>,
}

/// Adds events (those with content) to a user's memory, one entry per event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AddEventsRequest {
    pub app_name: String,
    pub user_id: String,
    /// Optional: the session the events come from.
    pub session_id: String,
    pub events: Vec<Event>,
    pub custom_metadata: HashMap<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchMemoryRequest {
    pub app_name: String,
    pub user_id: String,
    pub query: String,
    /// 0 means [`DEFAULT_SEARCH_LIMIT`].
    pub limit: usize,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchMemoryResponse {
    /// Best first.
    pub memories: Vec<MemoryEntry>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteMemoryRequest {
    pub app_name: String,
    pub user_id: String,
    pub memory_id: String,
}

fn user_ids(app_name: &str, user_id: &str) -> Result<()> {
    validate::id("app_name", app_name)?;
    validate::id("user_id", user_id)
}

impl AddMemoryRequest {
    pub fn validate(&self) -> Result<()> {
        user_ids(&self.app_name, &self.user_id)?;
        entry_count("memories", self.memories.len())?;
        metadata("custom_metadata", &self.custom_metadata)?;
        for (i, entry) in self.memories.iter().enumerate() {
            validate_entry(&format!("memories[{i}]"), entry)?;
        }
        Ok(())
    }
}

impl AddEventsRequest {
    pub fn validate(&self) -> Result<()> {
        user_ids(&self.app_name, &self.user_id)?;
        if !self.session_id.is_empty() {
            validate::id("session_id", &self.session_id)?;
        }
        entry_count("events", self.events.len())?;
        metadata("custom_metadata", &self.custom_metadata)?;
        for (i, event) in self.events.iter().enumerate() {
            // An event's id becomes its memory's id.
            if event.content().is_some_and(|c| !c.parts.is_empty()) {
                validate::id(&format!("events[{i}].id"), &event.id)?;
            }
            validate::event_limits(event)?;
        }
        Ok(())
    }
}

impl GenerateMemoriesRequest {
    pub fn validate(&self) -> Result<()> {
        user_ids(&self.app_name, &self.user_id)?;
        if !self.source_session_id.is_empty() {
            validate::id("source_session_id", &self.source_session_id)?;
            if !self.events.is_empty() {
                return Err(AdkError::invalid(
                    "events",
                    "must be empty when source_session_id is given",
                ));
            }
        }
        entry_count("events", self.events.len())?;
        for (i, event) in self.events.iter().enumerate() {
            // An event's id is what a retry is recognized by.
            if generate::has_text(event) {
                validate::id(&format!("events[{i}].id"), &event.id)?;
            }
            validate::event_limits(event)?;
        }
        generate::validate_topics("topics", &self.topics)?;
        generate::ttl_seconds("ttl_seconds", self.ttl_seconds)
    }
}

impl ListRevisionsRequest {
    pub fn validate(&self) -> Result<()> {
        user_ids(&self.app_name, &self.user_id)?;
        validate::id("memory_id", &self.memory_id)
    }
}

impl SearchMemoryRequest {
    pub fn validate(&self) -> Result<()> {
        user_ids(&self.app_name, &self.user_id)?;
        if self.query.len() > MAX_QUERY_BYTES {
            return Err(AdkError::invalid(
                "query",
                format!(
                    "is {} bytes, more than the maximum of {MAX_QUERY_BYTES}",
                    self.query.len()
                ),
            ));
        }
        if self.limit > MAX_SEARCH_LIMIT {
            return Err(AdkError::invalid(
                "limit",
                format!(
                    "must be 0 (the default, {DEFAULT_SEARCH_LIMIT}) to {MAX_SEARCH_LIMIT}, got {}",
                    self.limit
                ),
            ));
        }
        Ok(())
    }

    fn effective_limit(&self) -> usize {
        match self.limit {
            0 => DEFAULT_SEARCH_LIMIT,
            n => n,
        }
    }
}

impl DeleteMemoryRequest {
    pub fn validate(&self) -> Result<()> {
        user_ids(&self.app_name, &self.user_id)?;
        validate::id("memory_id", &self.memory_id)
    }
}

fn entry_count(field: &str, count: usize) -> Result<()> {
    if count > MAX_ENTRIES_PER_ADD {
        return Err(AdkError::invalid(
            field,
            format!("has {count} items, more than the limit of {MAX_ENTRIES_PER_ADD} per request"),
        ));
    }
    Ok(())
}

fn metadata(field: &str, map: &HashMap<String, Value>) -> Result<()> {
    validate::state_keys(field, map)?;
    validate::state_limits(field, map)
}

fn validate_entry(field: &str, entry: &MemoryEntry) -> Result<()> {
    if !entry.id.is_empty() {
        validate::id(&format!("{field}.id"), &entry.id)?;
    }
    if entry.content.parts.is_empty() {
        return Err(AdkError::invalid(format!("{field}.content"), "has no parts"));
    }
    validate::content_limits(&format!("{field}.content"), &entry.content)?;
    if entry.author.len() > MAX_AUTHOR_BYTES {
        return Err(AdkError::invalid(
            format!("{field}.author"),
            format!("{} is longer than {MAX_AUTHOR_BYTES} bytes", quoted(&entry.author)),
        ));
    }
    metadata(&format!("{field}.custom_metadata"), &entry.custom_metadata)?;
    let size = adk_grpc_proto::v1::MemoryEntry::from(entry);
    let size = prost::Message::encoded_len(&size);
    if size > validate::MAX_EVENT_BYTES {
        return Err(AdkError::limit(
            "max_memory_bytes",
            validate::MAX_EVENT_BYTES,
            format!(
                "{field} is {size} bytes encoded, more than the limit of {} bytes per memory",
                validate::MAX_EVENT_BYTES
            ),
        ));
    }
    Ok(())
}

/// A memory to store, and what it is found by besides its own text.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    pub entry: MemoryEntry,
    /// What else the memory is found by, not stored: for a memory made from an event,
    /// the text of the event before it, so a reply is found by what it answers ("Yes,
    /// last week!" by the question that names the subject). Its words the entry lacks
    /// are indexed for keyword search, once each; the embedding is the entry's own.
    pub context: Option<String>,
}

impl From<MemoryEntry> for NewMemory {
    fn from(entry: MemoryEntry) -> Self {
        NewMemory { entry, context: None }
    }
}

/// The memories the events with content make: one per event, its id the event's id
/// (so adding the same events again replaces them), author and timestamp the event's,
/// the session id (when given) and `custom_metadata` in its metadata; each with the
/// text of the nearest earlier event of the request that has text as its context, when
/// that event is of the same invocation (a turn's reply is found by the message it
/// answers; the message that starts a turn is not found by the turn before it).
pub fn memories_from_events(req: &AddEventsRequest) -> Vec<NewMemory> {
    // The latest text, with its invocation.
    let mut context: Option<(String, String)> = None;
    let mut memories = Vec::new();
    for event in &req.events {
        let Some(content) = event.content().filter(|c| !c.parts.is_empty()) else {
            continue;
        };
        let mut custom_metadata = req.custom_metadata.clone();
        if !req.session_id.is_empty() {
            custom_metadata.insert(SESSION_ID_METADATA_KEY.into(), Value::String(req.session_id.clone()));
        }
        let entry = MemoryEntry {
            id: event.id.clone(),
            content: content.clone(),
            author: event.author.clone(),
            timestamp: Some(event.timestamp),
            custom_metadata,
            fact: None,
        };
        let before = context
            .as_ref()
            .filter(|(invocation, _)| *invocation == event.invocation_id)
            .map(|(_, text)| text.clone());
        let text = entry.text();
        if !text.trim().is_empty() {
            context = Some((event.invocation_id.clone(), text));
        }
        memories.push(NewMemory { entry, context: before });
    }
    memories
}

// ---------- keyword search ----------

/// English words too common to tell memories apart; left out of the index and of queries.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "do", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "so", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "what", "will", "with",
];

/// The words of a text (maximal runs of Unicode letters and digits), lowercased, without
/// stop words and without runs longer than [`MAX_TERM_BYTES`].
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty() && word.len() <= MAX_TERM_BYTES)
        .map(str::to_lowercase)
        .filter(|word| !STOP_WORDS.contains(&word.as_str()))
}

/// Snowball's English stemmer: "adopted", "adopting" and "adoption" are one term, so a
/// question finds the turn that words it otherwise (on LoCoMo, an evidence turn among the
/// first 10 for 64.7 % of the questions instead of 60.1 %: BENCHMARKS.md).
static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

fn stem(word: &str) -> String {
    STEMMER.stem(word).into_owned()
}

/// The index terms of a text: the stems of its [`words`].
pub fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    words(text).map(|word| stem(&word))
}

/// The distinct terms of a query, at most [`MAX_QUERY_TERMS`] of them, in order: each
/// word's stem, then the word itself when it differs, which finds the memories indexed by
/// their words before the index kept stems (where neither is indexed, a term costs a
/// lookup and scores nothing).
pub fn query_terms(query: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for word in words(query) {
        let stem = stem(&word);
        let unstemmed = (stem != word).then_some(word);
        for term in std::iter::once(stem).chain(unstemmed) {
            if seen.len() == MAX_QUERY_TERMS {
                return seen;
            }
            if !seen.contains(&term) {
                seen.push(term);
            }
        }
    }
    seen
}

/// BM25's usual parameters: term-frequency saturation and length normalization.
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// The ids of the best `limit` entries by BM25 score, best first; equal scores by id.
/// Only entries holding at least one query term score.
pub fn rank(postings: &Postings, limit: usize) -> Vec<(String, f64)> {
    let n = postings.entries.max(1) as f64;
    let average_length = (postings.total_length as f64 / n).max(1.0);
    let mut scores: HashMap<&str, f64> = HashMap::new();
    for term in &postings.terms {
        let df = term.len() as f64;
        if df == 0.0 {
            continue;
        }
        // The "+1" form of IDF: never negative, even for a term in most entries.
        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
        for (id, count, length) in term {
            let tf = f64::from(*count);
            let norm = 1.0 - BM25_B + BM25_B * f64::from(*length) / average_length;
            *scores.entry(id).or_default() += idf * tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * norm);
        }
    }
    let mut ranked: Vec<(String, f64)> = scores.into_iter().map(|(id, s)| (id.to_string(), s)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(limit);
    ranked
}

// ---------- semantic search ----------

/// An embedding model (OpenAI-compatible `/v1/embeddings`, Gemini `embedContent`; see
/// `adk_grpc_models::build_embedder`).
#[async_trait]
pub trait Embedder: Send + Sync {
    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;
}

/// The embedding models of the apps that configure one: app name -> model, `*` for
/// every app without its own.
pub type Embedders = HashMap<String, Arc<dyn Embedder>>;

/// The embedding model of `app_name` in `embedders`, if any.
pub fn embedder_for(embedders: &Embedders, app_name: &str) -> Option<Arc<dyn Embedder>> {
    embedders.get(app_name).or_else(|| embedders.get("*")).cloned()
}

/// Cosine similarity; 0 for vectors of different lengths (another model's) or zero vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

/// Below this cosine similarity a memory is not related enough to be returned.
pub const MIN_SIMILARITY: f32 = 0.3;

/// Reciprocal rank fusion's constant: how much the top ranks weigh over the rest. 10, not
/// the customary 60: with two rankings, a memory one of them puts first should outrank one
/// both find only halfway down; on LoCoMo's questions it found an evidence turn in the top
/// 10 for 69.5 % of them instead of 62.6 % (BENCHMARKS.md, "MemoryService on LoCoMo").
const RRF_K: f64 = 10.0;

/// Keyword and semantic rankings fused by reciprocal rank (each ranking adds
/// `1 / (10 + rank)` to a memory's score): a memory both find comes first, and one only
/// meaning-related (no shared word) still appears. Best `limit` first, ties by id.
pub fn fuse(keyword: &[(String, f64)], semantic: &[(String, f64)], limit: usize) -> Vec<String> {
    let mut scores: HashMap<&str, f64> = HashMap::new();
    for ranking in [keyword, semantic] {
        for (rank, (id, _)) in ranking.iter().enumerate() {
            *scores.entry(id).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
    }
    let mut fused: Vec<(&str, f64)> = scores.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    fused.into_iter().take(limit).map(|(id, _)| id.to_string()).collect()
}

// ---------- the service ----------

/// Long-term memory, as its callers use it: served by [`CoreMemoryService`] over any
/// [`MemoryBackend`], and over gRPC by `adk-grpc-client`.
#[async_trait]
pub trait MemoryService: Send + Sync {
    /// Adds explicit entries; returns their ids, in request order.
    async fn add_memory(&self, req: AddMemoryRequest) -> Result<Vec<String>>;

    /// Adds the events with content, one entry per event; returns their ids.
    async fn add_events(&self, req: AddEventsRequest) -> Result<Vec<String>>;

    /// The user's memories most relevant to the query, best first.
    async fn search(&self, req: SearchMemoryRequest) -> Result<SearchMemoryResponse>;

    /// Deletes one entry (DeleteMemory); false when there was none.
    async fn delete(&self, req: DeleteMemoryRequest) -> Result<bool>;

    /// Extracts facts from the request's events with the app's model and consolidates
    /// them with the user's memories (GenerateMemories); returns the changes made. A
    /// request naming a session instead of events goes through [`generate_memories`].
    async fn generate(&self, req: GenerateMemoriesRequest) -> Result<Vec<GeneratedMemory>>;

    /// Every revision of one generated memory, oldest first; NOT_FOUND when none.
    async fn revisions(&self, req: ListRevisionsRequest) -> Result<Vec<MemoryRevision>>;

    /// Buffers events for a later generation (IngestEvents, see [`ingest`]); with
    /// `force_flush` generates from the user's whole buffer before returning.
    async fn ingest(&self, req: IngestEventsRequest) -> Result<IngestOutcome>;

    /// One tick of a server's background task: generates the ingested events of users
    /// that are due (see [`ingest`]); returns how many users it took. A client of a
    /// remote server has nothing to do.
    async fn generate_due_ingests(&self) -> Result<usize> {
        Ok(0)
    }

    /// Ok while the store can serve (health checks).
    async fn ping(&self) -> Result<()> {
        Ok(())
    }
}

/// One user's memory, as agents and tools see it (`CallbackContext::memory`).
#[async_trait]
pub trait Memory: Send + Sync {
    /// The user's memories most relevant to `query`, best first (at most
    /// [`DEFAULT_SEARCH_LIMIT`]).
    async fn search(&self, query: &str) -> Result<SearchMemoryResponse>;
}

/// A [`MemoryService`] bound to one (app, user).
pub struct ScopedMemory {
    service: Arc<dyn MemoryService>,
    app_name: String,
    user_id: String,
}

impl ScopedMemory {
    pub fn new(service: Arc<dyn MemoryService>, app_name: impl Into<String>, user_id: impl Into<String>) -> Self {
        ScopedMemory {
            service,
            app_name: app_name.into(),
            user_id: user_id.into(),
        }
    }
}

#[async_trait]
impl Memory for ScopedMemory {
    async fn search(&self, query: &str) -> Result<SearchMemoryResponse> {
        self.service
            .search(SearchMemoryRequest {
                app_name: self.app_name.clone(),
                user_id: self.user_id.clone(),
                query: query.to_string(),
                limit: 0,
            })
            .await
    }
}

/// A stored session with every event (`NOT_FOUND` when there is none): what the calls
/// that put a session into memory read, then send in parts of [`MAX_ENTRIES_PER_ADD`].
async fn whole_session(
    sessions: &dyn SessionService,
    app_name: &str,
    user_id: &str,
    session_id: &str,
) -> Result<Session> {
    sessions
        .get(GetRequest {
            app_name: app_name.to_string(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            ..Default::default()
        })
        .await
}

/// Adds a stored session to the user's memory (ADK's `add_session_to_memory`): its
/// events with content, one memory each, ids the event ids, so adding a session again
/// replaces its memories. `NOT_FOUND` when the session does not exist.
pub async fn add_session_to_memory(
    memory: &dyn MemoryService,
    sessions: &dyn SessionService,
    app_name: &str,
    user_id: &str,
    session_id: &str,
) -> Result<Vec<String>> {
    let session = whole_session(sessions, app_name, user_id, session_id).await?;
    let mut ids = Vec::new();
    // A long session goes in requests of the largest size an add accepts.
    for events in session.events.as_slice().chunks(MAX_ENTRIES_PER_ADD) {
        let added = memory
            .add_events(AddEventsRequest {
                app_name: app_name.to_string(),
                user_id: user_id.to_string(),
                session_id: session_id.to_string(),
                events: events.to_vec(),
                custom_metadata: HashMap::new(),
            })
            .await?;
        ids.extend(added);
    }
    Ok(ids)
}

/// Generates memories from a request's events, or from the events of the stored session
/// it names (`NOT_FOUND` when there is none), a long session in parts of the largest
/// size a request takes.
pub async fn generate_memories(
    memory: &dyn MemoryService,
    sessions: &dyn SessionService,
    req: GenerateMemoriesRequest,
) -> Result<Vec<GeneratedMemory>> {
    if req.source_session_id.is_empty() {
        return memory.generate(req).await;
    }
    req.validate()?;
    let session = whole_session(sessions, &req.app_name, &req.user_id, &req.source_session_id).await?;
    let mut changes = Vec::new();
    for events in session.events.as_slice().chunks(MAX_ENTRIES_PER_ADD) {
        let part = GenerateMemoriesRequest {
            source_session_id: String::new(),
            events: events.to_vec(),
            ..req.clone()
        };
        changes.extend(memory.generate(part).await?);
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::Part;

    #[test]
    fn terms_are_the_stems_of_lowercase_unicode_words_without_stop_words() {
        let found: Vec<String> = terms("The Café's flat-white, and 2 CROISSANTS; naïve Ünïcode").collect();
        assert_eq!(
            found,
            ["café", "s", "flat", "white", "2", "croissant", "naïv", "ünïcode"]
        );
        let long = "x".repeat(MAX_TERM_BYTES + 1);
        assert_eq!(terms(&format!("{long} ok")).collect::<Vec<_>>(), ["ok"]);
        let forms: Vec<String> = terms("adopted adopting adoption").collect();
        assert_eq!(forms, ["adopt", "adopt", "adopt"]);
    }

    #[test]
    fn a_query_looks_up_each_words_stem_then_the_word_itself() {
        // The word finds memories indexed by words, before the index kept stems.
        assert_eq!(query_terms("Adopted dogs, dogs!"), ["adopt", "adopted", "dog", "dogs"]);
        assert_eq!(query_terms("live live"), ["live"]);
        let many: String = (0..40).map(|i| format!("w{i} ")).collect();
        assert_eq!(query_terms(&many).len(), MAX_QUERY_TERMS);
    }

    #[test]
    fn an_event_memory_is_found_by_the_text_before_it_too() {
        let event = |id: &str, text: Option<&str>| {
            let mut event = Event::new("inv").with_author("user");
            if let Some(text) = text {
                event = event.with_content(Content::new("user").with_text(text));
            } else {
                event = event.with_content(Content::new("model").with_part(Part::function_call(
                    "lookup",
                    serde_json::json!({}),
                    None,
                )));
            }
            event.id = id.into();
            event
        };
        let req = AddEventsRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: String::new(),
            events: vec![
                event("q", Some("Where does your sister live?")),
                event("call", None),
                event("a", Some("In Oslo.")),
                {
                    let mut next_turn = event("next", Some("And your brother?"));
                    next_turn.invocation_id = "inv-2".into();
                    next_turn
                },
            ],
            custom_metadata: HashMap::new(),
        };
        let contexts: Vec<(String, Option<String>)> = memories_from_events(&req)
            .into_iter()
            .map(|memory| (memory.entry.id, memory.context))
            .collect();
        let asked = Some("Where does your sister live?".to_string());
        assert_eq!(
            contexts,
            [
                ("q".to_string(), None),
                ("call".to_string(), asked.clone()),
                ("a".to_string(), asked),
                ("next".to_string(), None),
            ],
            "a call without text is no one's context, a turn's first message has none"
        );
    }

    #[test]
    fn bm25_prefers_rarer_terms_and_shorter_entries() {
        let postings = Postings {
            entries: 3,
            total_length: 30,
            writes: 3,
            terms: vec![
                // "common" is in every entry, "rare" in one.
                vec![("a".into(), 1, 10), ("b".into(), 1, 10), ("c".into(), 1, 10)],
                vec![("b".into(), 1, 10)],
            ],
        };
        let ranked = rank(&postings, 10);
        assert_eq!(ranked[0].0, "b");
        assert_eq!(ranked.len(), 3);
        let short = Postings {
            entries: 2,
            total_length: 22,
            writes: 2,
            terms: vec![vec![("long".into(), 1, 20), ("short".into(), 1, 2)]],
        };
        assert_eq!(rank(&short, 1)[0].0, "short");
    }

    #[test]
    fn hybrid_ranking_fuses_keyword_and_meaning() {
        let fused = fuse(
            &[("k1".into(), 9.0), ("both".into(), 5.0)],
            &[("both".into(), 0.9), ("s1".into(), 0.8)],
            10,
        );
        assert_eq!(fused[0], "both", "found by both rankings first: {fused:?}");
        assert_eq!(fused.len(), 3, "a memory found by meaning alone is kept");
        // The top of a ranking weighs: first by keywords (and 20th by meaning) beats 8th by both.
        let ranking = |top: &str, other: &str| -> Vec<(String, f64)> {
            // Filler the other ranking does not have.
            let mut ids: Vec<String> = (0..20).map(|i| format!("{top}-{i}")).collect();
            ids[0] = top.into();
            ids[7] = "middle".into();
            ids[19] = other.into();
            ids.into_iter().map(|id| (id, 1.0)).collect()
        };
        let fused = fuse(&ranking("first", "x"), &ranking("y", "first"), 3);
        assert_eq!(fused[0], "first", "{fused:?}");
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[1.0, 0.0, 0.0]), 0.0, "another model's vector");
    }
}
