//! Artifacts: versioned binary and text files scoped to a session, or to a user
//! with the `user:` name prefix. [`ArtifactService`] is what callers use; every rule
//! lives once in [`CoreArtifactService`], over an [`ArtifactBackend`] that only stores
//! and reads (memory, Redis). Uploads and downloads stream; `save` and `load` (the
//! seed's API) are built on them, so small and large artifacts follow the same rules.

use crate::content::{Part, PartKind};
use crate::error::{AdkError, Missing, Result};
use crate::validate;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt, TryStreamExt};
use serde_json::Value;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

mod backend;
mod service;
mod upload;

pub use backend::{
    ArtifactBackend, ArtifactScope, MAX_VERSION, NewVersion, StoredBytes, StoredName, WriteOutcome, choose_version,
};
pub use service::CoreArtifactService;
pub use upload::{UploadBody, UploadLimits, piece_size};

/// A stream of byte chunks: an upload's body or a download's.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>>> + Send>>;

/// File names starting with this are scoped to the user, visible from all of their sessions.
pub const USER_SCOPE_PREFIX: &str = "user:";
pub const MAX_FILE_NAME_BYTES: usize = 1024;
/// The longest display name a saved part may carry (bytes of UTF-8).
pub const MAX_DISPLAY_NAME_BYTES: usize = 1024;
/// MIME type recorded for text parts.
pub const TEXT_MIME_TYPE: &str = "text/plain";
/// Default size of streamed chunks (downloads, storage).
pub const DEFAULT_CHUNK_BYTES: usize = 1024 * 1024;
/// Largest chunk a download may ask for: well inside the 4 MiB default gRPC message limit.
pub const MAX_CHUNK_BYTES: usize = 3 * 1024 * 1024;

/// True when the name is user-scoped (`user:` prefix).
pub fn is_user_scoped(file_name: &str) -> bool {
    file_name.starts_with(USER_SCOPE_PREFIX)
}

/// File names: 1-1024 bytes of UTF-8, no NUL, not absolute, no `..` segment.
pub fn validate_file_name(file_name: &str) -> Result<()> {
    let bad = |why: &str| AdkError::invalid("file_name", format!("{} {why}", validate::quoted(file_name)));
    if file_name.is_empty() {
        return Err(AdkError::invalid("file_name", "is required"));
    }
    if file_name.len() > MAX_FILE_NAME_BYTES {
        return Err(bad(&format!("is longer than {MAX_FILE_NAME_BYTES} bytes")));
    }
    if file_name.contains('\0') {
        return Err(bad("contains NUL"));
    }
    let path = file_name.strip_prefix(USER_SCOPE_PREFIX).unwrap_or(file_name);
    if path.is_empty() {
        return Err(bad("has a scope prefix but no name"));
    }
    if path.starts_with('/') || path.starts_with('\\') {
        return Err(bad("is absolute"));
    }
    if path.split(['/', '\\']).any(|segment| segment == "..") {
        return Err(bad("has a '..' segment"));
    }
    Ok(())
}

fn validate_version(version: Option<i64>) -> Result<()> {
    match version {
        Some(v) if v < 1 => Err(AdkError::invalid("version", format!("must be 1 or more, got {v}"))),
        _ => Ok(()),
    }
}

/// Where an artifact lives: app, user, file name, and the session unless the name is
/// user-scoped. A `user:` name needs no session (empty `session_id`, as ADK's `None`);
/// a session-scoped name without one is `INVALID_ARGUMENT` naming `session_id`.
fn validate_location(app_name: &str, user_id: &str, session_id: &str, file_name: &str) -> Result<()> {
    validate::id("app_name", app_name)?;
    validate::id("user_id", user_id)?;
    validate_file_name(file_name)?;
    if session_id.is_empty() && !is_user_scoped(file_name) {
        return Err(AdkError::invalid(
            "session_id",
            format!(
                "is required for the session-scoped file_name {}; only \"{USER_SCOPE_PREFIX}\" names may omit it",
                validate::quoted(file_name)
            ),
        ));
    }
    optional_session_id(session_id)
}

/// A session id that may be empty (no session: the user's artifacts only).
fn optional_session_id(session_id: &str) -> Result<()> {
    if session_id.is_empty() {
        return Ok(());
    }
    validate::id("session_id", session_id)
}

// ---------- artifact references ----------

/// The scheme of artifact references: a `file_data` part whose URI names another
/// artifact version, in ADK's format (see [`ArtifactUri`]).
pub const ARTIFACT_URI_SCHEME: &str = "artifact://";
/// The most references one load follows (ADK's limit): a longer chain, or a cycle,
/// fails with `FAILED_PRECONDITION` instead of looping.
pub const MAX_REFERENCE_DEPTH: usize = 5;
/// Path segments that end an id in an artifact URI (ADK's reserved segments).
const URI_RESERVED: [&str; 5] = ["apps", "users", "sessions", "artifacts", "versions"];

/// The target of an artifact reference: ADK's
/// `artifact://apps/<app>/users/<user>/sessions/<session>/artifacts/<file>/versions/<n>`,
/// or without `/sessions/<session>` for a user-scoped name. Ids appear raw, as ADK writes
/// them; an id holding `/apps/`, `/users/`, `/sessions/`, `/artifacts/` or `/versions/`
/// parses as ADK parses it (it ends at the first of them), so a reference can only ever
/// name another scope, which the scope check refuses. `version` is this service's
/// (1-based); ADK's adapter translates ADK's 0-based numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactUri {
    pub app_name: String,
    pub user_id: String,
    /// None for a user-scoped reference.
    pub session_id: Option<String>,
    pub file_name: String,
    pub version: i64,
}

impl ArtifactUri {
    /// The reference an `artifact://` URI names; None when it is not one in ADK's format.
    pub fn parse(uri: &str) -> Option<ArtifactUri> {
        let rest = uri.strip_prefix(ARTIFACT_URI_SCHEME)?.strip_prefix("apps/")?;
        let (app, "users", rest) = next_segment(rest)? else {
            return None;
        };
        let (user, after_user, rest) = next_segment(rest)?;
        let (session, rest) = match after_user {
            "sessions" => match next_segment(rest)? {
                (session, "artifacts", rest) => (Some(session), rest),
                _ => return None,
            },
            "artifacts" => (None, rest),
            _ => return None,
        };
        // The file name runs to the last `/versions/`, like ADK's greedy match.
        let (file_name, version) = rest.rsplit_once("/versions/")?;
        if file_name.is_empty() || version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(ArtifactUri {
            app_name: app.to_string(),
            user_id: user.to_string(),
            session_id: session.map(String::from),
            file_name: file_name.to_string(),
            version: version.parse().ok()?,
        })
    }

    /// The request that loads the referenced version.
    fn load_request(&self) -> LoadRequest {
        LoadRequest {
            app_name: self.app_name.clone(),
            user_id: self.user_id.clone(),
            session_id: self.session_id.clone().unwrap_or_default(),
            file_name: self.file_name.clone(),
            version: Some(self.version),
        }
    }

    /// A reference held in (app, user, session) may only name that app and user, and a
    /// session-scoped target only that session (ADK's rule); `INVALID_ARGUMENT` naming
    /// `field` otherwise, and for a target that is no valid artifact location.
    fn check_scope(&self, field: &str, app_name: &str, user_id: &str, session_id: &str) -> Result<()> {
        let refuse = |why: &str| AdkError::invalid(field, format!("{}: {why}", validate::quoted(&self.to_string())));
        if self.app_name != app_name || self.user_id != user_id {
            return Err(refuse("artifact references must stay within the same app and user"));
        }
        if self.session_id.as_deref().is_some_and(|s| s != session_id) {
            return Err(refuse(
                "a session-scoped artifact reference must stay within the same session",
            ));
        }
        let target = self.load_request();
        target
            .validate()
            .map_err(|e| refuse(&format!("it names no valid artifact version ({e})")))
    }
}

/// The segment at the start of `rest` up to the first reserved `/<segment>/`, that
/// segment, and what follows it. None when there is none or the first segment is empty.
fn next_segment(rest: &str) -> Option<(&str, &str, &str)> {
    let (at, reserved) = rest.match_indices('/').find_map(|(at, _)| {
        let after = &rest[at + 1..];
        URI_RESERVED
            .iter()
            .find(|r| after.strip_prefix(**r).is_some_and(|tail| tail.starts_with('/')))
            .map(|r| (at, *r))
    })?;
    (at > 0).then(|| (&rest[..at], reserved, &rest[at + reserved.len() + 2..]))
}

impl std::fmt::Display for ArtifactUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{ARTIFACT_URI_SCHEME}apps/{}/users/{}", self.app_name, self.user_id)?;
        if let Some(session) = &self.session_id {
            write!(f, "/sessions/{session}")?;
        }
        write!(f, "/artifacts/{}/versions/{}", self.file_name, self.version)
    }
}

/// What is recorded about one version, readable without its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactMetadata {
    pub file_name: String,
    pub version: i64,
    pub mime_type: String,
    pub size_bytes: u64,
    pub create_time: DateTime<Utc>,
    pub custom_metadata: HashMap<String, Value>,
    /// Saved from a text part: loads back as `Part::Text`.
    pub is_text: bool,
    /// Saved from a `file_data` part: the bytes are its URI, and it loads back as that
    /// part (an `artifact://` reference loads as the version it names).
    pub is_file_uri: bool,
    /// The saved part's `display_name`, given back on load as ADK does.
    pub display_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SaveRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub file_name: String,
    /// A text part or inline data with a MIME type.
    pub part: Part,
    /// None saves the next version.
    pub version: Option<i64>,
}

/// SaveArtifact: a part to save, and the custom metadata recorded with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SaveWithMetadata {
    pub save: SaveRequest,
    pub custom_metadata: HashMap<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaveResponse {
    pub version: i64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub file_name: String,
    /// None loads the latest version.
    pub version: Option<i64>,
}

/// DownloadArtifact: which version, and the size of the pieces it comes in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DownloadRequest {
    pub load: LoadRequest,
    /// As [`piece_size`] takes it: 0 is the default, too much is capped.
    pub chunk_bytes: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LoadResponse {
    pub part: Part,
    pub metadata: ArtifactMetadata,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub file_name: String,
    /// None deletes every version.
    pub version: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListResponse {
    /// Session and `user:` names, sorted.
    pub file_names: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct VersionsRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub file_name: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct VersionsResponse {
    /// Newest first.
    pub versions: Vec<i64>,
}

/// Where and how to store the bytes of an upload.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UploadRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub file_name: String,
    pub mime_type: String,
    /// The bytes are UTF-8 text and load back as a text part.
    pub is_text: bool,
    /// The bytes are a `file_data` part's URI (set by [`UploadRequest::for_part`] only).
    pub is_file_uri: bool,
    /// None saves the next version.
    pub version: Option<i64>,
    pub custom_metadata: HashMap<String, Value>,
    /// The total size, when the client declares it (`size_bytes` of the gRPC header): an
    /// oversized upload is refused before any byte is stored, and a body of another size
    /// fails (see [`body_of_declared_size`]). A promise, despite the name: not a hint.
    pub size_hint: Option<u64>,
    /// The part's `display_name` (inline or file data), at most [`MAX_DISPLAY_NAME_BYTES`].
    pub display_name: Option<String>,
}

impl LoadRequest {
    pub fn validate(&self) -> Result<()> {
        validate_location(&self.app_name, &self.user_id, &self.session_id, &self.file_name)?;
        validate_version(self.version)
    }
}

impl DeleteRequest {
    pub fn validate(&self) -> Result<()> {
        validate_location(&self.app_name, &self.user_id, &self.session_id, &self.file_name)?;
        validate_version(self.version)
    }
}

impl ListRequest {
    /// An empty `session_id` lists only the user's `user:` names.
    pub fn validate(&self) -> Result<()> {
        validate::id("app_name", &self.app_name)?;
        validate::id("user_id", &self.user_id)?;
        optional_session_id(&self.session_id)
    }
}

impl VersionsRequest {
    pub fn validate(&self) -> Result<()> {
        validate_location(&self.app_name, &self.user_id, &self.session_id, &self.file_name)
    }
}

impl UploadRequest {
    pub fn validate(&self) -> Result<()> {
        validate_location(&self.app_name, &self.user_id, &self.session_id, &self.file_name)?;
        validate_version(self.version)?;
        if self.mime_type.is_empty() && !self.is_file_uri {
            return Err(AdkError::invalid("mime_type", "is required"));
        }
        if let Some(name) = &self.display_name {
            validate_display_name(name)?;
        }
        validate::state_keys("custom_metadata", &self.custom_metadata)
    }

    /// The upload of a part's bytes: text parts as UTF-8 `text/plain`, inline data
    /// with its MIME type, `file_data` as its URI (with its MIME type, which may be
    /// empty). An `artifact://` URI must be a reference in ADK's format within the
    /// saver's scope (see [`ArtifactUri`]); any other URI is stored as it is, as ADK does.
    /// Other part kinds cannot be artifacts. Only the part is checked here: the upload
    /// checks the rest (ids, file name, version, custom metadata) when it runs.
    pub fn for_part(save: &SaveRequest, custom_metadata: HashMap<String, Value>) -> Result<(UploadRequest, Vec<u8>)> {
        let part = &save.part;
        let (mime_type, is_text, is_file_uri, bytes) = match &part.kind {
            PartKind::Text { text } => (TEXT_MIME_TYPE.to_string(), true, false, text.clone().into_bytes()),
            PartKind::InlineData { mime_type, data } => {
                if mime_type.is_empty() {
                    return Err(AdkError::invalid("part.inline_data.mime_type", "is required"));
                }
                (mime_type.clone(), false, false, data.clone())
            }
            PartKind::FileData { .. } => {
                let uri = part.file_uri().unwrap_or_default();
                check_file_uri(save, uri)?;
                let mime_type = part.mime_type().unwrap_or_default().to_string();
                (mime_type, false, true, uri.as_bytes().to_vec())
            }
            _ => {
                return Err(AdkError::invalid(
                    "part",
                    "must be text, inline_data or file_data to be saved as an artifact",
                ));
            }
        };
        let upload = UploadRequest {
            app_name: save.app_name.clone(),
            user_id: save.user_id.clone(),
            session_id: save.session_id.clone(),
            file_name: save.file_name.clone(),
            mime_type,
            is_text,
            is_file_uri,
            version: save.version,
            custom_metadata,
            size_hint: Some(bytes.len() as u64),
            // A text part has no display name on the wire (only Blob and FileData carry one).
            display_name: if is_text { None } else { part.display_name.clone() },
        };
        // The rest (ids, name, version, metadata keys) is checked once, by the upload.
        Ok((upload, bytes))
    }
}

/// The URI of a `file_data` part being saved: present, and for `artifact://` a reference
/// within the saver's scope. `INVALID_ARGUMENT` naming `part.file_data.file_uri` otherwise.
fn check_file_uri(save: &SaveRequest, uri: &str) -> Result<()> {
    const FIELD: &str = "part.file_data.file_uri";
    if uri.is_empty() {
        return Err(AdkError::invalid(FIELD, "is required"));
    }
    if !uri.starts_with(ARTIFACT_URI_SCHEME) {
        return Ok(());
    }
    let target = ArtifactUri::parse(uri).ok_or_else(|| {
        AdkError::invalid(
            FIELD,
            format!(
                "{} is not an artifact reference: expected \
             artifact://apps/<app>/users/<user>[/sessions/<session>]/artifacts/<file_name>/versions/<version>",
                validate::quoted(uri)
            ),
        )
    })?;
    target.check_scope(FIELD, &save.app_name, &save.user_id, &save.session_id)
}

/// Rebuilds the saved part from its metadata and bytes.
pub fn part_from_bytes(metadata: &ArtifactMetadata, bytes: Vec<u8>) -> Result<Part> {
    if metadata.is_text {
        let text = String::from_utf8(bytes)
            .map_err(|_| AdkError::Internal(format!("stored text artifact {} is not UTF-8", metadata.file_name)))?;
        return Ok(Part::text_part(text));
    }
    let mut part = if metadata.is_file_uri {
        let uri = String::from_utf8(bytes)
            .map_err(|_| AdkError::Internal(format!("stored file URI of {} is not UTF-8", metadata.file_name)))?;
        Part::file_data(metadata.mime_type.clone(), uri)
    } else {
        Part::inline_data(metadata.mime_type.clone(), bytes)
    };
    part.display_name = metadata.display_name.clone();
    Ok(part)
}

/// A display name: at most [`MAX_DISPLAY_NAME_BYTES`] bytes, no NUL.
fn validate_display_name(name: &str) -> Result<()> {
    const FIELD: &str = "display_name";
    if name.len() > MAX_DISPLAY_NAME_BYTES {
        return Err(AdkError::invalid(
            FIELD,
            format!("is longer than {MAX_DISPLAY_NAME_BYTES} bytes"),
        ));
    }
    if name.contains('\0') {
        return Err(AdkError::invalid(FIELD, "contains NUL"));
    }
    Ok(())
}

/// An upload's body held to the size its request declared: an error item as soon as
/// the bytes pass the declared size, or at the end when they fall short, so that a
/// truncated or overlong upload fails (INVALID_ARGUMENT, naming both sizes) instead of
/// storing other bytes than the client meant. Without a declared size, the body as is.
/// Every upload body is read through this (see [`UploadBody`]).
pub fn body_of_declared_size(chunks: ByteStream, declared: Option<u64>) -> ByteStream {
    let Some(declared) = declared else {
        return chunks;
    };
    // State: the body and the bytes received so far; None once an error item ended the stream.
    futures::stream::unfold(Some((chunks, 0u64)), move |state| async move {
        let (mut chunks, received) = state?;
        match chunks.next().await {
            Some(Ok(piece)) => {
                let received = received.saturating_add(piece.len() as u64);
                if received > declared {
                    let err = size_mismatch(format!(
                        "the upload sent at least {received} bytes but its header declares size_bytes {declared}"
                    ));
                    return Some((Err(err), None));
                }
                Some((Ok(piece), Some((chunks, received))))
            }
            Some(Err(err)) => Some((Err(err), None)),
            None if received < declared => {
                let err = size_mismatch(format!(
                    "the upload ended after {received} bytes but its header declares size_bytes {declared}"
                ));
                Some((Err(err), None))
            }
            None => None,
        }
    })
    .boxed()
}

fn size_mismatch(what: String) -> AdkError {
    AdkError::invalid_with("header.size_bytes", format!("{what}; nothing was stored"))
}

/// A stream of one chunk, for saving bytes already in memory.
pub fn single_chunk(bytes: Vec<u8>) -> ByteStream {
    futures::stream::once(async move { Ok(bytes) }).boxed()
}

/// Stores versioned artifacts. [`CoreArtifactService`] is the implementation over a store
/// (it owns every rule); the gRPC client implements it too, its server applying the rules.
#[async_trait]
pub trait ArtifactService: Send + Sync {
    /// Stores the bytes of `chunks` as a new version (the next one, or `req.version`:
    /// ALREADY_EXISTS when taken). Nothing is visible until the stream ends successfully;
    /// a failed or dropped upload leaves nothing behind.
    async fn upload(&self, req: UploadRequest, chunks: ByteStream) -> Result<SaveResponse>;

    /// The metadata of a version (latest when none is given) and a stream of its bytes.
    async fn download(&self, req: LoadRequest, chunk_bytes: usize) -> Result<(ArtifactMetadata, ByteStream)>;

    /// A version's metadata, without its bytes.
    async fn metadata(&self, req: LoadRequest) -> Result<ArtifactMetadata>;

    async fn delete(&self, req: DeleteRequest) -> Result<()>;
    async fn list(&self, req: ListRequest) -> Result<ListResponse>;
    async fn versions(&self, req: VersionsRequest) -> Result<VersionsResponse>;

    /// Saves a part (text, inline data or file data) with no custom metadata.
    async fn save(&self, req: SaveRequest) -> Result<SaveResponse> {
        let (upload, bytes) = UploadRequest::for_part(&req, HashMap::new())?;
        self.upload(upload, single_chunk(bytes)).await
    }

    /// [`ArtifactService::download`] of the version an `artifact://` reference names,
    /// following references as ADK's load does (see [`CoreArtifactService`], which owns
    /// that rule). By default the download as it is: right for a service whose `download`
    /// already resolves, as a remote one's server does.
    async fn download_resolved(&self, req: LoadRequest, chunk_bytes: usize) -> Result<(ArtifactMetadata, ByteStream)> {
        self.download(req, chunk_bytes).await
    }

    /// Loads a whole version as the part it was saved from (a reference: the part it names).
    async fn load(&self, req: LoadRequest) -> Result<LoadResponse> {
        let (metadata, chunks) = self.download_resolved(req, DEFAULT_CHUNK_BYTES).await?;
        let mut bytes = Vec::with_capacity(usize::try_from(metadata.size_bytes).unwrap_or(0));
        let mut chunks = chunks;
        while let Some(chunk) = chunks.try_next().await? {
            bytes.extend_from_slice(&chunk);
        }
        Ok(LoadResponse {
            part: part_from_bytes(&metadata, bytes)?,
            metadata,
        })
    }

    /// Ok while the backing store answers.
    async fn ping(&self) -> Result<()> {
        Ok(())
    }
}

/// The simple artifact API agents and tools use: an artifact service bound to one session.
#[async_trait]
pub trait Artifacts: Send + Sync {
    /// Saves the next version of `name`; returns its version.
    async fn save(&self, name: &str, part: &Part) -> Result<i64>;
    /// Loads the latest version of `name`.
    async fn load(&self, name: &str) -> Result<Part> {
        self.load_version(name, None).await
    }
    /// Loads one version of `name` (None: the latest).
    async fn load_version(&self, name: &str, version: Option<i64>) -> Result<Part>;
    /// The names visible from the session, sorted.
    async fn list(&self) -> Result<Vec<String>>;
}

/// An [`ArtifactService`] bound to (app, user, session).
#[derive(Clone)]
pub struct ScopedArtifacts {
    service: Arc<dyn ArtifactService>,
    app_name: String,
    user_id: String,
    session_id: String,
}

impl ScopedArtifacts {
    pub fn new(service: Arc<dyn ArtifactService>, app_name: String, user_id: String, session_id: String) -> Self {
        ScopedArtifacts {
            service,
            app_name,
            user_id,
            session_id,
        }
    }
}

#[async_trait]
impl Artifacts for ScopedArtifacts {
    async fn save(&self, name: &str, part: &Part) -> Result<i64> {
        let req = SaveRequest {
            app_name: self.app_name.clone(),
            user_id: self.user_id.clone(),
            session_id: self.session_id.clone(),
            file_name: name.to_string(),
            part: part.clone(),
            version: None,
        };
        Ok(self.service.save(req).await?.version)
    }

    async fn load_version(&self, name: &str, version: Option<i64>) -> Result<Part> {
        let req = LoadRequest {
            app_name: self.app_name.clone(),
            user_id: self.user_id.clone(),
            session_id: self.session_id.clone(),
            file_name: name.to_string(),
            version,
        };
        let part = self.service.load(req).await?.part;
        if crate::history::is_rewind_tombstone(&part) {
            return Err(AdkError::NotFound(
                Missing::Artifact,
                format!("artifact {name} was removed by a rewind of session {}", self.session_id),
            ));
        }
        Ok(part)
    }

    async fn list(&self) -> Result<Vec<String>> {
        let req = ListRequest {
            app_name: self.app_name.clone(),
            user_id: self.user_id.clone(),
            session_id: self.session_id.clone(),
        };
        Ok(self.service.list(req).await?.file_names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_name_rules() {
        for ok in [
            "report.pdf",
            "user:profile.jpg",
            "a/b/c.txt",
            "ünïcode ok.txt",
            "..x",
            "x..",
            &"n".repeat(1024),
        ] {
            assert!(validate_file_name(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "",
            "user:",
            "/etc/passwd",
            "user:/abs",
            "a/../b",
            "..",
            "user:..",
            "a\0b",
            "\\win",
            &"n".repeat(1025),
        ] {
            let err = validate_file_name(bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad:?}");
            assert!(err.to_string().contains("file_name"), "{err}");
        }
    }

    #[test]
    fn parts_become_uploads_or_are_refused() {
        let save = |part| SaveRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            file_name: "f".into(),
            part,
            version: None,
        };
        let (upload, bytes) = UploadRequest::for_part(&save(Part::text_part("hi")), HashMap::new()).unwrap();
        assert!(upload.is_text);
        assert_eq!(upload.mime_type, TEXT_MIME_TYPE);
        assert_eq!(bytes, b"hi");
        let (upload, _) =
            UploadRequest::for_part(&save(Part::inline_data("image/png", vec![1])), HashMap::new()).unwrap();
        assert_eq!((upload.mime_type.as_str(), upload.is_text), ("image/png", false));
        let (upload, bytes) =
            UploadRequest::for_part(&save(Part::file_data("image/png", "gs://b/x.png")), HashMap::new()).unwrap();
        assert!(upload.is_file_uri && !upload.is_text);
        assert_eq!(
            (upload.mime_type.as_str(), bytes.as_slice()),
            ("image/png", &b"gs://b/x.png"[..])
        );
        let reference = "artifact://apps/a/users/u/sessions/s/artifacts/f/versions/1";
        assert!(UploadRequest::for_part(&save(Part::file_data("", reference)), HashMap::new()).is_ok());
        let call = Part::function_call("f", serde_json::json!({}), None);
        for (part, needle) in [
            (Part::inline_data("", vec![1]), "mime_type"),
            (Part::file_data("image/png", ""), "part.file_data.file_uri is required"),
            (call, "text, inline_data or file_data"),
        ] {
            let err = UploadRequest::for_part(&save(part), HashMap::new()).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[tokio::test]
    async fn bodies_must_have_their_declared_size() {
        let body = |pieces: &[&[u8]]| -> ByteStream {
            let pieces: Vec<Result<Vec<u8>>> = pieces.iter().map(|p| Ok(p.to_vec())).collect();
            futures::stream::iter(pieces).boxed()
        };
        let read = |declared, pieces: &[&[u8]]| {
            let checked = body_of_declared_size(body(pieces), declared);
            async move { checked.try_concat().await }
        };
        assert_eq!(read(Some(5), &[b"ab", b"cde"]).await.unwrap(), b"abcde");
        assert_eq!(read(Some(0), &[]).await.unwrap(), b"");
        assert_eq!(read(None, &[b"any", b"size"]).await.unwrap(), b"anysize");
        for (declared, pieces, sent) in [
            (100, &[&b"12345678901234567890"[..]][..], "20"),
            (10, &[&b"123456"[..], &b"789012"[..]][..], "12"),
            (0, &[&b"x"[..]][..], "1"),
            (3, &[][..], "0"),
        ] {
            let err = read(Some(declared), pieces).await.unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
            let message = err.to_string();
            assert!(message.contains(&format!("size_bytes {declared}")), "{message}");
            assert!(message.contains(&format!(" {sent} bytes")), "{message}");
        }
        // An overlong body fails on the piece that passes the size: what follows is never read.
        let mut checked = body_of_declared_size(
            body(&[b"1234", b"5678"]).chain(futures::stream::pending()).boxed(),
            Some(6),
        );
        assert_eq!(checked.next().await.unwrap().unwrap(), b"1234");
        assert!(checked.next().await.unwrap().is_err());
        assert!(checked.next().await.is_none(), "the stream ends after its error");
    }

    #[test]
    fn artifact_uris_parse_as_adk_parses_them() {
        let session =
            ArtifactUri::parse("artifact://apps/my app/users/auth0|42/sessions/s:1/artifacts/a/b.txt/versions/3")
                .unwrap();
        assert_eq!(
            session,
            ArtifactUri {
                app_name: "my app".into(),
                user_id: "auth0|42".into(),
                session_id: Some("s:1".into()),
                file_name: "a/b.txt".into(),
                version: 3,
            }
        );
        assert_eq!(
            session.to_string(),
            "artifact://apps/my app/users/auth0|42/sessions/s:1/artifacts/a/b.txt/versions/3"
        );
        let user = ArtifactUri::parse("artifact://apps/p/l/x/users/u/artifacts/user:f/versions/x/versions/12").unwrap();
        assert_eq!(
            (
                user.app_name.as_str(),
                user.session_id,
                user.file_name.as_str(),
                user.version
            ),
            ("p/l/x", None, "user:f/versions/x", 12)
        );
        for bad in [
            "",
            "artifact://",
            "gs://apps/a/users/u/artifacts/f/versions/1",
            "artifact://apps/a/users/u/artifacts/f",
            "artifact://apps/a/users/u/artifacts/f/versions/",
            "artifact://apps/a/users/u/artifacts/f/versions/-1",
            "artifact://apps/a/users/u/artifacts//versions/1",
            "artifact://apps//users/u/artifacts/f/versions/1",
            "artifact://apps/a/users/u/sessions/s/versions/1",
            "artifact://apps/a/users/u/apps/s/artifacts/f/versions/1",
            "artifact://apps/a/users/u/artifacts/f/versions/99999999999999999999",
        ] {
            assert_eq!(ArtifactUri::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn references_stay_in_the_savers_scope() {
        let save = |session: &str, file_name: &str, uri: &str| SaveRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: session.into(),
            file_name: file_name.into(),
            part: Part::file_data("", uri),
            version: None,
        };
        let ok = [
            ("s", "f", "artifact://apps/a/users/u/sessions/s/artifacts/g/versions/1"),
            ("s", "f", "artifact://apps/a/users/u/artifacts/user:g/versions/2"),
            (
                "s",
                "user:f",
                "artifact://apps/a/users/u/sessions/s/artifacts/g/versions/1",
            ),
            ("", "user:f", "artifact://apps/a/users/u/artifacts/user:g/versions/1"),
        ];
        for (session, name, uri) in ok {
            assert!(
                UploadRequest::for_part(&save(session, name, uri), HashMap::new()).is_ok(),
                "{uri}"
            );
        }
        let refused = [
            (
                "s",
                "f",
                "artifact://apps/other/users/u/artifacts/user:g/versions/1",
                "same app and user",
            ),
            (
                "s",
                "f",
                "artifact://apps/a/users/other/artifacts/user:g/versions/1",
                "same app and user",
            ),
            (
                "s",
                "f",
                "artifact://apps/a/users/u/sessions/t/artifacts/g/versions/1",
                "same session",
            ),
            (
                "",
                "user:f",
                "artifact://apps/a/users/u/sessions/s/artifacts/g/versions/1",
                "same session",
            ),
            (
                "s",
                "f",
                "artifact://apps/a/users/u/artifacts/g/versions/1",
                "session_id is required",
            ),
            (
                "s",
                "f",
                "artifact://apps/a/users/u/sessions/s/artifacts/g/versions/0",
                "version must be 1",
            ),
            (
                "s",
                "f",
                "artifact://apps/a/users/u/sessions/s/artifacts/../x/versions/1",
                "'..' segment",
            ),
            ("s", "f", "artifact://nowhere", "not an artifact reference"),
        ];
        for (session, name, uri, needle) in refused {
            let err = UploadRequest::for_part(&save(session, name, uri), HashMap::new()).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{uri}");
            let message = err.to_string();
            assert!(message.starts_with("part.file_data.file_uri "), "{message}");
            assert!(message.contains(needle), "{uri}: {message}");
        }
    }

    #[test]
    fn a_session_is_optional_only_for_user_names() {
        let load = |session: &str, file_name: &str| LoadRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: session.into(),
            file_name: file_name.into(),
            version: None,
        };
        assert!(load("", "user:f").validate().is_ok());
        assert!(load("s", "user:f").validate().is_ok());
        let err = load("", "f").validate().unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.to_string().starts_with("session_id is required"), "{err}");
        let list = ListRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: String::new(),
        };
        assert!(list.validate().is_ok());
    }

    #[test]
    fn text_metadata_rebuilds_a_text_part() {
        let mut metadata = ArtifactMetadata {
            file_name: "f".into(),
            version: 1,
            mime_type: TEXT_MIME_TYPE.into(),
            size_bytes: 2,
            create_time: Utc::now(),
            custom_metadata: HashMap::new(),
            is_text: true,
            is_file_uri: false,
            display_name: None,
        };
        assert_eq!(
            part_from_bytes(&metadata, b"hi".to_vec()).unwrap(),
            Part::text_part("hi")
        );
        metadata.is_text = false;
        metadata.display_name = Some("greeting".into());
        let mut named = Part::inline_data(TEXT_MIME_TYPE, b"hi".to_vec());
        named.display_name = Some("greeting".into());
        assert_eq!(part_from_bytes(&metadata, b"hi".to_vec()).unwrap(), named);
    }
}
