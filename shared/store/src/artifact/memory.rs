//! `InMemoryArtifactBackend`: artifact versions in this process's memory, with nothing
//! to set up; the reference the Redis backend is held to by the conformance suite. It
//! holds every stored version in memory, of course; uploads and downloads still stream.

use adk_grpc_core::Result;
use adk_grpc_core::artifact::{
    ArtifactBackend, ArtifactMetadata, ArtifactScope, NewVersion, StoredBytes, StoredName, UploadBody, WriteOutcome,
    choose_version,
};
use adk_grpc_core::sync;
use async_trait::async_trait;
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

type Scopes = HashMap<ScopeKey, BTreeMap<String, Versions>>;

/// Artifacts held in this process's memory; gone when it exits. Clones share them.
#[derive(Clone, Default)]
pub struct InMemoryArtifactBackend {
    scopes: Arc<Mutex<Scopes>>,
}

impl std::fmt::Debug for InMemoryArtifactBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryArtifactBackend").finish_non_exhaustive()
    }
}

impl InMemoryArtifactBackend {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Scopes> {
        // Every mutation completes before anything can panic, so a poisoned lock holds consistent data.
        sync::lock(&self.scopes)
    }

    /// Deletes one session's own artifacts, every version (DeleteSession; see
    /// `InMemorySessionBackend::with_artifacts`). The user's `user:` names stay.
    pub(crate) fn delete_session_artifacts(&self, app: &str, user: &str, session: &str) {
        self.lock().remove(&(app.into(), user.into(), Some(session.into())));
    }

    /// The stored version asked for (the latest when it names none).
    fn stored(&self, name: &StoredName, version: Option<i64>) -> Option<Arc<Stored>> {
        let scopes = self.lock();
        let versions = scopes.get(&scope_key(name.scope()))?.get(name.file_name())?;
        let stored = match version {
            Some(v) => versions.stored.get(&v),
            None => versions.stored.values().next_back(),
        };
        stored.cloned()
    }
}

fn scope_key(scope: &ArtifactScope) -> ScopeKey {
    (
        scope.app_name().to_string(),
        scope.user_id().to_string(),
        scope.session_id().map(String::from),
    )
}

#[async_trait]
impl ArtifactBackend for InMemoryArtifactBackend {
    async fn write(&self, name: &StoredName, new: NewVersion, mut body: UploadBody) -> Result<WriteOutcome> {
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next_chunk().await? {
            bytes.extend_from_slice(&chunk);
        }
        let mut scopes = self.lock();
        let names = scopes.entry(scope_key(name.scope())).or_default();
        let versions = names.entry(name.file_name().to_string()).or_default();
        let outcome = choose_version(new.requested, versions.last, |v| versions.stored.contains_key(&v));
        if let WriteOutcome::Stored(version) = outcome {
            let metadata = new.metadata(name.file_name(), version, body.size());
            versions.last = versions.last.max(version);
            versions.stored.insert(version, Arc::new(Stored { metadata, bytes }));
        } else if versions.stored.is_empty() {
            // Nothing stored under a name that had nothing: leave no empty entry.
            names.remove(name.file_name());
        }
        Ok(outcome)
    }

    async fn metadata(&self, name: &StoredName, version: Option<i64>) -> Result<Option<ArtifactMetadata>> {
        Ok(self.stored(name, version).map(|stored| stored.metadata.clone()))
    }

    async fn read(
        &self,
        name: &StoredName,
        version: Option<i64>,
        piece_bytes: usize,
    ) -> Result<Option<(ArtifactMetadata, StoredBytes)>> {
        let Some(stored) = self.stored(name, version) else {
            return Ok(None);
        };
        let metadata = stored.metadata.clone();
        let starts = (0..stored.bytes.len()).step_by(piece_bytes);
        // The stream keeps the version alive: a delete meanwhile does not cut it short.
        let pieces = futures::stream::iter(starts).map(move |start| {
            let end = (start + piece_bytes).min(stored.bytes.len());
            Ok(Some(stored.bytes[start..end].to_vec()))
        });
        Ok(Some((metadata, pieces.boxed())))
    }

    async fn delete(&self, name: &StoredName, version: Option<i64>) -> Result<()> {
        let key = scope_key(name.scope());
        let mut scopes = self.lock();
        let Some(names) = scopes.get_mut(&key) else {
            return Ok(());
        };
        if let (Some(v), Some(versions)) = (version, names.get_mut(name.file_name())) {
            versions.stored.remove(&v);
            if !versions.stored.is_empty() {
                return Ok(());
            }
        }
        // No version left: the name goes, and with it its version counter.
        names.remove(name.file_name());
        if names.is_empty() {
            scopes.remove(&key);
        }
        Ok(())
    }

    async fn names(&self, scopes: &[ArtifactScope]) -> Result<Vec<String>> {
        let stored = self.lock();
        let names = scopes.iter().filter_map(|scope| stored.get(&scope_key(scope)));
        Ok(names.flat_map(|names| names.keys().cloned()).collect())
    }

    async fn versions(&self, name: &StoredName) -> Result<Vec<i64>> {
        let scopes = self.lock();
        let versions = scopes
            .get(&scope_key(name.scope()))
            .and_then(|names| names.get(name.file_name()));
        Ok(versions
            .map(|vs| vs.stored.keys().copied().collect())
            .unwrap_or_default())
    }
}
