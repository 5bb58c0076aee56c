//! What an artifact store must do and nothing more: store and read versions. Every
//! rule (validation, scopes, version numbering, limits, chunking, references, error
//! wording) is [`super::CoreArtifactService`]'s; a backend receives names and bodies
//! the core has prepared and checked, and reports what it found or did.

use super::{ArtifactMetadata, UploadBody, is_user_scoped};
use crate::error::Result;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::Stream;
use serde_json::Value;
use std::collections::HashMap;
use std::pin::Pin;

/// The highest version a backend stores: 2^53 - 1, so that versions stay exact
/// in Redis's Lua, whose numbers are doubles. Applies to every backend alike.
pub const MAX_VERSION: i64 = (1 << 53) - 1;

/// One scope's artifacts: a session's own, or (no session) the user's `user:` names.
/// Built by the core from validated ids only.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArtifactScope {
    app_name: String,
    user_id: String,
    session_id: Option<String>,
}

impl ArtifactScope {
    pub(super) fn new(app_name: &str, user_id: &str, session_id: Option<&str>) -> ArtifactScope {
        ArtifactScope {
            app_name: app_name.to_string(),
            user_id: user_id.to_string(),
            session_id: session_id.map(String::from),
        }
    }

    pub fn app_name(&self) -> &str {
        &self.app_name
    }

    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// None for the user's scope (`user:` names).
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
}

/// A validated file name in the scope it lives in: its session's, or the user's for
/// a `user:` name, whatever session the request named. Built by the core only.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoredName {
    scope: ArtifactScope,
    file_name: String,
}

impl StoredName {
    /// The name `file_name` has when requested from (app, user, session).
    pub(super) fn new(app_name: &str, user_id: &str, session_id: &str, file_name: &str) -> StoredName {
        let session = (!is_user_scoped(file_name)).then_some(session_id);
        StoredName {
            scope: ArtifactScope::new(app_name, user_id, session),
            file_name: file_name.to_string(),
        }
    }

    pub fn scope(&self) -> &ArtifactScope {
        &self.scope
    }

    pub fn file_name(&self) -> &str {
        &self.file_name
    }
}

/// What a new version records beside its bytes, as the core checked it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewVersion {
    /// None: the next version (see [`choose_version`]).
    pub requested: Option<i64>,
    pub mime_type: String,
    pub custom_metadata: HashMap<String, Value>,
    pub is_text: bool,
    pub is_file_uri: bool,
    pub display_name: Option<String>,
}

impl NewVersion {
    /// The create time of a version committed now.
    pub fn create_time(&self) -> DateTime<Utc> {
        Utc::now()
    }

    /// The metadata of this version stored as `version` with `size_bytes` bytes, created now.
    pub fn metadata(&self, file_name: &str, version: i64, size_bytes: u64) -> ArtifactMetadata {
        ArtifactMetadata {
            file_name: file_name.to_string(),
            version,
            mime_type: self.mime_type.clone(),
            size_bytes,
            create_time: self.create_time(),
            custom_metadata: self.custom_metadata.clone(),
            is_text: self.is_text,
            is_file_uri: self.is_file_uri,
            display_name: self.display_name.clone(),
        }
    }
}

/// What a write did; the core turns the refusals into its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Stored as this version (from [`choose_version`]: store it as this version).
    Stored(i64),
    /// The requested version exists: nothing was stored.
    VersionTaken(i64),
    /// The name's versions reached [`MAX_VERSION`]: nothing was stored.
    NoVersionLeft,
}

/// The version a write gets, chosen atomically with it: the requested one unless it is
/// stored (`VersionTaken`), else one more than `last`, the highest version the name ever
/// had (0 for a new name, or once all its versions were deleted), unless that passes
/// [`MAX_VERSION`] (`NoVersionLeft`). A deleted latest version's number is thus not handed
/// out again while the name has other versions. Backends call this inside their write;
/// Redis's commit script repeats it in Lua, held to the same conformance suite.
pub fn choose_version(requested: Option<i64>, last: i64, is_stored: impl FnOnce(i64) -> bool) -> WriteOutcome {
    match requested {
        Some(v) if is_stored(v) => WriteOutcome::VersionTaken(v),
        Some(v) => WriteOutcome::Stored(v),
        None if last >= MAX_VERSION => WriteOutcome::NoVersionLeft,
        None => WriteOutcome::Stored(last + 1),
    }
}

/// A stored version's bytes in pieces of the requested size. A `None` item means the
/// version disappeared (was deleted) while it was being read; the stream ends there.
pub type StoredBytes = Pin<Box<dyn Stream<Item = Result<Option<Vec<u8>>>> + Send>>;

/// Stores and reads artifact versions. Implementations: in memory and Redis (standalone
/// and cluster) in `adk-grpc-store`. Errors are the store's own failures (unreachable, corrupt
/// data); what a request may not do is decided by the core before or after the call.
#[async_trait]
pub trait ArtifactBackend: Send + Sync + 'static {
    /// Reads `body` to its end (its errors end the write and are returned as they are) and
    /// stores it as a version of `name` numbered by [`choose_version`], atomically: the
    /// version appears whole or not at all, and concurrent writes of one name get distinct
    /// versions. A failed or dropped write leaves nothing behind.
    async fn write(&self, name: &StoredName, version: NewVersion, body: UploadBody) -> Result<WriteOutcome>;

    /// A version's metadata (the latest when `version` is None); None when there is none.
    async fn metadata(&self, name: &StoredName, version: Option<i64>) -> Result<Option<ArtifactMetadata>>;

    /// A version's metadata and its bytes in pieces of `piece_bytes` (at least 1, at most
    /// `MAX_CHUNK_BYTES`); None when there is no such version.
    async fn read(
        &self,
        name: &StoredName,
        version: Option<i64>,
        piece_bytes: usize,
    ) -> Result<Option<(ArtifactMetadata, StoredBytes)>>;

    /// Deletes one version, or all of them; a missing one is no error. Once a name has no
    /// version left, it is forgotten with its highest version (numbering starts again).
    async fn delete(&self, name: &StoredName, version: Option<i64>) -> Result<()>;

    /// The names stored in each of `scopes`, in any order.
    async fn names(&self, scopes: &[ArtifactScope]) -> Result<Vec<String>>;

    /// The stored versions of a name, in any order; empty when there are none.
    async fn versions(&self, name: &StoredName) -> Result<Vec<i64>>;

    /// Ok while the backing store answers.
    async fn ping(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_chosen_once_for_every_backend() {
        assert_eq!(choose_version(None, 0, |_| false), WriteOutcome::Stored(1));
        assert_eq!(choose_version(None, 41, |_| false), WriteOutcome::Stored(42));
        assert_eq!(
            choose_version(None, MAX_VERSION, |_| false),
            WriteOutcome::NoVersionLeft
        );
        assert_eq!(choose_version(Some(7), 3, |_| false), WriteOutcome::Stored(7));
        assert_eq!(choose_version(Some(2), 3, |v| v == 2), WriteOutcome::VersionTaken(2));
    }

    #[test]
    fn user_names_live_in_the_users_scope() {
        let session = StoredName::new("a", "u", "s", "f");
        assert_eq!(session.scope().session_id(), Some("s"));
        let user = StoredName::new("a", "u", "s", "user:f");
        assert_eq!(user.scope().session_id(), None);
        assert_eq!(user.scope(), StoredName::new("a", "u", "", "user:f").scope());
    }
}
