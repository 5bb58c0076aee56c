//! Artifacts: versioned binary and text files scoped to a session, or to a user
//! with the `user:` name prefix. Backends implement one streaming write path
//! (`upload`) and one streaming read path (`download`); `save` and `load` (the
//! seed's API) are built on them, so small and large artifacts follow the same rules.

use crate::content::{Part, PartKind};
use crate::error::{AdkError, Result};
use crate::validate;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt, TryStreamExt};
use serde_json::Value;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

/// A stream of byte chunks: an upload's body or a download's.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>>> + Send>>;

/// File names starting with this are scoped to the user, visible from all of their sessions.
pub const USER_SCOPE_PREFIX: &str = "user:";
pub const MAX_FILE_NAME_BYTES: usize = 1024;
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
    let bad = |why: &str| AdkError::invalid(format!("file_name {} {why}", validate::quoted(file_name)));
    if file_name.is_empty() {
        return Err(AdkError::invalid("file_name is required"));
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
        Some(v) if v < 1 => Err(AdkError::invalid(format!("version must be 1 or more, got {v}"))),
        _ => Ok(()),
    }
}

fn validate_location(app_name: &str, user_id: &str, session_id: &str, file_name: &str) -> Result<()> {
    validate::session_ids(app_name, user_id, session_id)?;
    validate_file_name(file_name)
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
    /// None saves the next version.
    pub version: Option<i64>,
    pub custom_metadata: HashMap<String, Value>,
    /// The total size, when the client declares it (`size_bytes` of the gRPC header): an
    /// oversized upload is refused before any byte is stored, and a body of another size
    /// fails (see [`body_of_declared_size`]). A promise, despite the name: not a hint.
    pub size_hint: Option<u64>,
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
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)
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
        if self.mime_type.is_empty() {
            return Err(AdkError::invalid("mime_type is required"));
        }
        validate::state_keys("custom_metadata", &self.custom_metadata)
    }

    /// The upload of a part's bytes: text parts as UTF-8 `text/plain`, inline data
    /// with its MIME type. Other part kinds cannot be artifacts.
    pub fn for_part(save: &SaveRequest, custom_metadata: HashMap<String, Value>) -> Result<(UploadRequest, Vec<u8>)> {
        let (mime_type, is_text, bytes) = match &save.part.kind {
            PartKind::Text { text } => (TEXT_MIME_TYPE.to_string(), true, text.clone().into_bytes()),
            PartKind::InlineData { mime_type, data } => {
                if mime_type.is_empty() {
                    return Err(AdkError::invalid("part.inline_data.mime_type is required"));
                }
                (mime_type.clone(), false, data.clone())
            }
            _ => {
                return Err(AdkError::invalid(
                    "part must be text or inline_data to be saved as an artifact",
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
            version: save.version,
            custom_metadata,
            size_hint: Some(bytes.len() as u64),
        };
        upload.validate()?;
        Ok((upload, bytes))
    }
}

/// Rebuilds the saved part from its metadata and bytes.
pub fn part_from_bytes(metadata: &ArtifactMetadata, bytes: Vec<u8>) -> Result<Part> {
    if metadata.is_text {
        let text = String::from_utf8(bytes)
            .map_err(|_| AdkError::Internal(format!("stored text artifact {} is not UTF-8", metadata.file_name)))?;
        Ok(Part::text_part(text))
    } else {
        Ok(Part::inline_data(metadata.mime_type.clone(), bytes))
    }
}

/// An upload's body held to the size its request declared: an error item as soon as
/// the bytes pass the declared size, or at the end when they fall short, so that a
/// truncated or overlong upload fails (INVALID_ARGUMENT, naming both sizes) instead of
/// storing other bytes than the client meant. Without a declared size, the body as is.
/// Every backend reads upload bodies through this.
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
    AdkError::invalid(format!("{what}; nothing was stored"))
}

/// A stream of one chunk, for saving bytes already in memory.
pub fn single_chunk(bytes: Vec<u8>) -> ByteStream {
    futures::stream::once(async move { Ok(bytes) }).boxed()
}

/// Stores versioned artifacts.
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

    /// Saves a part (text or inline data) with no custom metadata.
    async fn save(&self, req: SaveRequest) -> Result<SaveResponse> {
        let (upload, bytes) = UploadRequest::for_part(&req, HashMap::new())?;
        self.upload(upload, single_chunk(bytes)).await
    }

    /// Loads a whole version as the part it was saved from.
    async fn load(&self, req: LoadRequest) -> Result<LoadResponse> {
        let (metadata, chunks) = self.download(req, DEFAULT_CHUNK_BYTES).await?;
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
    async fn load(&self, name: &str) -> Result<Part>;
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

    async fn load(&self, name: &str) -> Result<Part> {
        let req = LoadRequest {
            app_name: self.app_name.clone(),
            user_id: self.user_id.clone(),
            session_id: self.session_id.clone(),
            file_name: name.to_string(),
            version: None,
        };
        Ok(self.service.load(req).await?.part)
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
        for (part, needle) in [
            (Part::inline_data("", vec![1]), "mime_type"),
            (Part::file_data("image/png", "gs://x"), "text or inline_data"),
        ] {
            let err = UploadRequest::for_part(&save(part), HashMap::new()).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
        let mut bad_version = save(Part::text_part("x"));
        bad_version.version = Some(0);
        assert!(
            UploadRequest::for_part(&bad_version, HashMap::new())
                .unwrap_err()
                .to_string()
                .contains("version")
        );
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
    fn text_metadata_rebuilds_a_text_part() {
        let mut metadata = ArtifactMetadata {
            file_name: "f".into(),
            version: 1,
            mime_type: TEXT_MIME_TYPE.into(),
            size_bytes: 2,
            create_time: Utc::now(),
            custom_metadata: HashMap::new(),
            is_text: true,
        };
        assert_eq!(
            part_from_bytes(&metadata, b"hi".to_vec()).unwrap(),
            Part::text_part("hi")
        );
        metadata.is_text = false;
        assert_eq!(
            part_from_bytes(&metadata, b"hi".to_vec()).unwrap(),
            Part::inline_data(TEXT_MIME_TYPE, b"hi".to_vec())
        );
    }
}
