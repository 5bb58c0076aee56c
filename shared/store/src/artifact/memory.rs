//! `InMemoryArtifactService`: every artifact rule in one process, with nothing
//! to set up. The reference the Redis backend is tested against. It holds every
//! stored version in memory, of course; uploads and downloads still stream, and
//! the size limit and text checks apply as in Redis.

use super::{ChunkedUpload, Limits, chunk_size, next_version, not_found, session_scope, version_exists, visible_names};
use crate::StoreConfig;
use adk_core::Result;
use adk_core::artifact::{
    ArtifactMetadata, ArtifactService, ByteStream, DeleteRequest, ListRequest, ListResponse, LoadRequest, SaveResponse,
    UploadRequest, VersionsRequest, VersionsResponse,
};
use async_trait::async_trait;
use chrono::Utc;
use futures::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// One scope's names: (app, user, session), or (app, user, None) for `user:` names.
type ScopeKey = (String, String, Option<String>);

#[derive(Default)]
struct Versions {
    /// The highest version the name ever had; the next one is above it.
    last: i64,
    stored: BTreeMap<i64, Arc<Stored>>,
}

struct Stored {
    metadata: ArtifactMetadata,
    bytes: Vec<u8>,
}

/// Artifacts held in this process's memory; gone when it exits.
#[derive(Clone)]
pub struct InMemoryArtifactService {
    scopes: Arc<Mutex<HashMap<ScopeKey, BTreeMap<String, Versions>>>>,
    limits: Limits,
}

impl Default for InMemoryArtifactService {
    fn default() -> Self {
        Self::with_config(StoreConfig::default())
    }
}

impl InMemoryArtifactService {
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses `max_artifact_bytes` and `artifact_chunk_bytes` of the config.
    pub fn with_config(config: StoreConfig) -> Self {
        InMemoryArtifactService {
            scopes: Arc::default(),
            limits: Limits::of(&config),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ScopeKey, BTreeMap<String, Versions>>> {
        // Every mutation completes before anything can panic, so a poisoned lock holds consistent data.
        self.scopes.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Deletes one session's own artifacts, every version (DeleteSession; see
    /// `InMemorySessionService::with_artifacts`). The user's `user:` names stay.
    pub(crate) fn delete_session_artifacts(&self, app: &str, user: &str, session: &str) {
        self.lock().remove(&(app.into(), user.into(), Some(session.into())));
    }

    /// The stored version a load asks for (the latest when it names none).
    fn stored(&self, req: &LoadRequest) -> Result<Arc<Stored>> {
        let scopes = self.lock();
        let versions = scopes
            .get(&scope_key(&req.app_name, &req.user_id, &req.session_id, &req.file_name))
            .and_then(|names| names.get(&req.file_name));
        let stored = match req.version {
            Some(v) => versions.and_then(|vs| vs.stored.get(&v)),
            None => versions.and_then(|vs| vs.stored.values().next_back()),
        };
        stored.cloned().ok_or_else(|| not_found(&req.file_name, req.version))
    }
}

fn scope_key(app: &str, user: &str, session: &str, file_name: &str) -> ScopeKey {
    (
        app.into(),
        user.into(),
        session_scope(session, file_name).map(String::from),
    )
}

#[async_trait]
impl ArtifactService for InMemoryArtifactService {
    async fn upload(&self, req: UploadRequest, chunks: ByteStream) -> Result<SaveResponse> {
        let mut body = ChunkedUpload::new(&req, chunks, self.limits)?;
        let key = scope_key(&req.app_name, &req.user_id, &req.session_id, &req.file_name);
        let taken = |scopes: &HashMap<ScopeKey, BTreeMap<String, Versions>>, v: i64| {
            let versions = scopes.get(&key).and_then(|names| names.get(&req.file_name));
            versions.is_some_and(|vs| vs.stored.contains_key(&v))
        };
        // Refuse a taken version before reading the body; checked again on commit.
        if let Some(v) = req.version.filter(|v| taken(&self.lock(), *v)) {
            return Err(version_exists(&req.file_name, v));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next_chunk().await? {
            bytes.extend_from_slice(&chunk);
        }

        let mut scopes = self.lock();
        if let Some(v) = req.version.filter(|v| taken(&scopes, *v)) {
            return Err(version_exists(&req.file_name, v));
        }
        let versions = scopes.entry(key).or_default().entry(req.file_name.clone()).or_default();
        let version = match req.version {
            Some(v) => v,
            None => next_version(&req.file_name, versions.last)?,
        };
        let metadata = ArtifactMetadata {
            file_name: req.file_name,
            version,
            mime_type: req.mime_type,
            size_bytes: body.size(),
            create_time: Utc::now(),
            custom_metadata: req.custom_metadata,
            is_text: req.is_text,
            is_file_uri: req.is_file_uri,
        };
        versions.last = versions.last.max(version);
        versions.stored.insert(version, Arc::new(Stored { metadata, bytes }));
        Ok(SaveResponse { version })
    }

    async fn download(&self, req: LoadRequest, chunk_bytes: usize) -> Result<(ArtifactMetadata, ByteStream)> {
        req.validate()?;
        let stored = self.stored(&req)?;
        let piece = chunk_size(chunk_bytes);
        let starts = (0..stored.bytes.len()).step_by(piece);
        let metadata = stored.metadata.clone();
        // The stream keeps the version alive: a delete meanwhile does not cut it short.
        let chunks = futures::stream::iter(starts).map(move |start| {
            let end = (start + piece).min(stored.bytes.len());
            Ok(stored.bytes[start..end].to_vec())
        });
        Ok((metadata, chunks.boxed()))
    }

    async fn metadata(&self, req: LoadRequest) -> Result<ArtifactMetadata> {
        req.validate()?;
        Ok(self.stored(&req)?.metadata.clone())
    }

    async fn delete(&self, req: DeleteRequest) -> Result<()> {
        req.validate()?;
        let key = scope_key(&req.app_name, &req.user_id, &req.session_id, &req.file_name);
        let mut scopes = self.lock();
        let Some(names) = scopes.get_mut(&key) else {
            return Ok(());
        };
        if let (Some(v), Some(versions)) = (req.version, names.get_mut(&req.file_name)) {
            versions.stored.remove(&v);
            if !versions.stored.is_empty() {
                return Ok(());
            }
        }
        // No version left: the name goes, and with it its version counter.
        names.remove(&req.file_name);
        if names.is_empty() {
            scopes.remove(&key);
        }
        Ok(())
    }

    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        req.validate()?;
        let scopes = self.lock();
        let names_in = |session: Option<&str>| -> Vec<String> {
            let key = (req.app_name.clone(), req.user_id.clone(), session.map(String::from));
            scopes
                .get(&key)
                .map(|names| names.keys().cloned().collect())
                .unwrap_or_default()
        };
        // No session: the user's `user:` names only.
        let session_names = match req.session_id.as_str() {
            "" => Vec::new(),
            session => names_in(Some(session)),
        };
        Ok(ListResponse {
            file_names: visible_names(session_names, names_in(None)),
        })
    }

    async fn versions(&self, req: VersionsRequest) -> Result<VersionsResponse> {
        req.validate()?;
        let scopes = self.lock();
        let key = scope_key(&req.app_name, &req.user_id, &req.session_id, &req.file_name);
        let versions = scopes
            .get(&key)
            .and_then(|names| names.get(&req.file_name))
            .map(|vs| vs.stored.keys().rev().copied().collect())
            .unwrap_or_default();
        Ok(VersionsResponse { versions })
    }
}
