//! [`CoreArtifactService`]: every artifact rule, once, over any [`ArtifactBackend`].

use super::backend::{ArtifactBackend, ArtifactScope, MAX_VERSION, NewVersion, StoredName, WriteOutcome};
use super::upload::{UploadBody, UploadLimits, piece_size, too_large};
use super::{
    ArtifactMetadata, ArtifactService, ArtifactUri, ByteStream, DeleteRequest, ListRequest, ListResponse, LoadRequest,
    MAX_REFERENCE_DEPTH, SaveResponse, UploadRequest, VersionsRequest, VersionsResponse, single_chunk,
};
use crate::error::{AdkError, Existing, Missing, Result};
use crate::validate;
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};

/// The artifact service every store serves: validation, scopes (`user:` names, listings
/// without a session), version numbering, the size limit, chunking, `artifact://`
/// references and every error's wording, over a backend that only stores and reads.
#[derive(Debug, Clone)]
pub struct CoreArtifactService<B> {
    backend: B,
    limits: UploadLimits,
}

impl<B: ArtifactBackend> CoreArtifactService<B> {
    pub fn new(backend: B, limits: UploadLimits) -> Self {
        CoreArtifactService { backend, limits }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The raw version (a reference as itself), for `download` and the reference walk.
    async fn read(&self, req: &LoadRequest, chunk_bytes: usize) -> Result<(ArtifactMetadata, ByteStream)> {
        let name = StoredName::new(&req.app_name, &req.user_id, &req.session_id, &req.file_name);
        let (metadata, pieces) = self
            .backend
            .read(&name, req.version, piece_size(chunk_bytes))
            .await?
            .ok_or_else(|| not_found(&req.file_name, req.version))?;
        let (file_name, version) = (metadata.file_name.clone(), metadata.version);
        let chunks = pieces
            .map(move |piece| piece?.ok_or_else(|| not_found(&file_name, Some(version))))
            // Nothing sensible follows a vanished version.
            .scan(false, |ended, item| {
                let stop = *ended;
                *ended = item.is_err();
                futures::future::ready((!stop).then_some(item))
            });
        Ok((metadata, chunks.boxed()))
    }
}

#[async_trait]
impl<B: ArtifactBackend> ArtifactService for CoreArtifactService<B> {
    async fn upload(&self, req: UploadRequest, chunks: ByteStream) -> Result<SaveResponse> {
        req.validate()?;
        if let Some(v) = req.version.filter(|v| *v > MAX_VERSION) {
            return Err(AdkError::invalid(
                "version",
                format!("must be at most {MAX_VERSION}, got {v}"),
            ));
        }
        // An oversized upload is refused from its declared size, before any byte is read.
        if req.size_hint.is_some_and(|size| size > self.limits.max_bytes) {
            return Err(too_large(self.limits.max_bytes));
        }
        let name = StoredName::new(&req.app_name, &req.user_id, &req.session_id, &req.file_name);
        // Refuse a taken version before reading the body; the backend's write checks again.
        if let Some(v) = req.version
            && self.backend.metadata(&name, Some(v)).await?.is_some()
        {
            return Err(version_exists(&req.file_name, v));
        }
        let body = UploadBody::new(chunks, self.limits, req.is_text, req.size_hint);
        let new = NewVersion {
            requested: req.version,
            mime_type: req.mime_type,
            custom_metadata: req.custom_metadata,
            is_text: req.is_text,
            is_file_uri: req.is_file_uri,
            display_name: req.display_name,
        };
        match self.backend.write(&name, new, body).await? {
            WriteOutcome::Stored(version) => Ok(SaveResponse { version }),
            WriteOutcome::VersionTaken(v) => Err(version_exists(&req.file_name, v)),
            WriteOutcome::NoVersionLeft => Err(no_version_left(&req.file_name)),
        }
    }

    async fn download(&self, req: LoadRequest, chunk_bytes: usize) -> Result<(ArtifactMetadata, ByteStream)> {
        req.validate()?;
        self.read(&req, chunk_bytes).await
    }

    async fn metadata(&self, req: LoadRequest) -> Result<ArtifactMetadata> {
        req.validate()?;
        let name = StoredName::new(&req.app_name, &req.user_id, &req.session_id, &req.file_name);
        self.backend
            .metadata(&name, req.version)
            .await?
            .ok_or_else(|| not_found(&req.file_name, req.version))
    }

    async fn delete(&self, req: DeleteRequest) -> Result<()> {
        req.validate()?;
        let name = StoredName::new(&req.app_name, &req.user_id, &req.session_id, &req.file_name);
        self.backend.delete(&name, req.version).await
    }

    /// The session's names and its user's `user:` names, sorted, each once; without a
    /// session, the user's only.
    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        req.validate()?;
        let mut scopes = vec![ArtifactScope::new(&req.app_name, &req.user_id, None)];
        if !req.session_id.is_empty() {
            scopes.push(ArtifactScope::new(&req.app_name, &req.user_id, Some(&req.session_id)));
        }
        let mut file_names = self.backend.names(&scopes).await?;
        file_names.sort_unstable();
        file_names.dedup();
        Ok(ListResponse { file_names })
    }

    /// Newest first.
    async fn versions(&self, req: VersionsRequest) -> Result<VersionsResponse> {
        req.validate()?;
        let name = StoredName::new(&req.app_name, &req.user_id, &req.session_id, &req.file_name);
        let mut versions = self.backend.versions(&name).await?;
        versions.sort_unstable_by(|a, b| b.cmp(a));
        versions.dedup();
        Ok(VersionsResponse { versions })
    }

    /// Follows `artifact://` references to the version they name (at most
    /// [`MAX_REFERENCE_DEPTH`]), as ADK's load does: the metadata and bytes are those of
    /// the version finally reached. Each reference is checked against the scope it is
    /// loaded from (`INVALID_ARGUMENT`); a missing target is `NOT_FOUND`; a longer chain,
    /// or a cycle, is `FAILED_PRECONDITION`.
    async fn download_resolved(&self, req: LoadRequest, chunk_bytes: usize) -> Result<(ArtifactMetadata, ByteStream)> {
        req.validate()?;
        let mut req = req;
        for _ in 0..=MAX_REFERENCE_DEPTH {
            let (metadata, chunks) = self.read(&req, chunk_bytes).await?;
            if !metadata.is_file_uri {
                return Ok((metadata, chunks));
            }
            let bytes = chunks.try_concat().await?;
            let Some(target) = std::str::from_utf8(&bytes).ok().and_then(ArtifactUri::parse) else {
                // Any other file URI is the content itself.
                return Ok((metadata, single_chunk(bytes)));
            };
            let field = format!("the reference in artifact {}", validate::quoted(&metadata.file_name));
            target.check_scope(&field, &req.app_name, &req.user_id, &req.session_id)?;
            req = target.load_request();
        }
        Err(AdkError::FailedPrecondition(format!(
            "artifact {} is a chain of more than {MAX_REFERENCE_DEPTH} references (or a cycle)",
            validate::quoted(&req.file_name)
        )))
    }

    async fn ping(&self) -> Result<()> {
        self.backend.ping().await
    }
}

fn not_found(file_name: &str, version: Option<i64>) -> AdkError {
    match version {
        Some(v) => AdkError::NotFound(Missing::Artifact, format!("artifact {file_name:?} has no version {v}")),
        None => AdkError::NotFound(Missing::Artifact, format!("artifact {file_name:?} not found")),
    }
}

fn version_exists(file_name: &str, version: i64) -> AdkError {
    AdkError::AlreadyExists(
        Existing::ArtifactVersion,
        format!("artifact {file_name:?} version {version} already exists; versions are immutable"),
    )
}

fn no_version_left(file_name: &str) -> AdkError {
    AdkError::limit(
        "max_artifact_version",
        MAX_VERSION,
        format!("artifact {file_name:?} has no version number left after {MAX_VERSION}"),
    )
}
