//! The `adk.v1.ArtifactService` gRPC handlers: convert the request with core's
//! conversions, call the [`ArtifactService`] trait, convert the reply. Every rule
//! about artifacts (names, versions, size limits, what a failed upload leaves)
//! lives in core's `CoreArtifactService`; what is here is transport only: message
//! size limits and moving bytes between gRPC streams and the store's chunk streams
//! without holding a whole artifact.

use adk_grpc_core::artifact::{
    ArtifactService, ByteStream, DEFAULT_CHUNK_BYTES, DeleteRequest, DownloadRequest, LoadRequest, SaveWithMetadata,
    UploadRequest, VersionsRequest, part_from_bytes, single_chunk,
};
use adk_grpc_core::{AdkError, ArtifactMetadata};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::artifact_service_server::{ArtifactService as ArtifactServiceRpc, ArtifactServiceServer};
use adk_grpc_proto::v1::download_artifact_response::Message as DownloadMessage;
use adk_grpc_proto::v1::upload_artifact_request::Message as UploadMessage;
use adk_grpc_server_kit::{GrpcArgs, fit_in_message, message_too_large};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;
use tracing::field::Empty;

/// Room left in a download message for the chunk field's tag and length prefix, so
/// a chunk plus its framing never exceeds the message limit.
const CHUNK_FRAMING_BYTES: usize = 16;

/// What a client whose unary load is too large should do instead.
const USE_DOWNLOAD: &str = "download it in chunks with DownloadArtifact";

/// The server for `adk.v1.ArtifactService`, with the message size limits of `grpc`.
/// The all-in-one binary adds it next to the other services.
pub fn artifact_service(
    store: Arc<dyn ArtifactService>,
    grpc: &GrpcArgs,
) -> ArtifactServiceServer<ArtifactGrpcService> {
    ArtifactServiceServer::new(ArtifactGrpcService::new(store, grpc.max_message_bytes))
        .max_decoding_message_size(grpc.max_message_bytes)
        .max_encoding_message_size(grpc.max_message_bytes)
}

/// The handlers, over any artifact store.
pub struct ArtifactGrpcService {
    store: Arc<dyn ArtifactService>,
    /// Unary replies larger than this are refused with a hint instead of failing in the
    /// client's decoder; download chunks are cut to fit in it.
    max_message_bytes: usize,
}

impl ArtifactGrpcService {
    pub fn new(store: Arc<dyn ArtifactService>, max_message_bytes: usize) -> Self {
        ArtifactGrpcService {
            store,
            max_message_bytes,
        }
    }
}

/// Names the artifact on the current RPC span (fields declared by `#[instrument]`).
fn record_artifact(app: &str, user: &str, session: &str, file: &str) {
    let span = tracing::Span::current();
    span.record("app", app);
    span.record("user", user);
    span.record("session", session);
    span.record("file", file);
}

fn describe(metadata: &ArtifactMetadata) -> String {
    format!("version {} of artifact {:?}", metadata.version, metadata.file_name)
}

/// The chunks of an upload after its header, as the store consumes them: pulled one
/// message at a time (HTTP/2 flow control holds the client back meanwhile), never
/// collected. Anything but a chunk, and a client that goes away mid-upload, is an
/// error item, on which the store discards what it has stored so far.
fn upload_chunks(messages: Streaming<pb::UploadArtifactRequest>) -> ByteStream {
    messages
        .map(|received| match received {
            Ok(pb::UploadArtifactRequest {
                message: Some(UploadMessage::Chunk(bytes)),
            }) => Ok(bytes),
            Ok(pb::UploadArtifactRequest {
                message: Some(UploadMessage::Header(_)),
            }) => Err(AdkError::invalid_with(
                "header",
                "only the first message may be the header; every later message must be a chunk",
            )),
            Ok(pb::UploadArtifactRequest { message: None }) => Err(AdkError::invalid_with(
                "message",
                "an upload message must carry a header or a chunk",
            )),
            Err(status) => Err(AdkError::from(status)),
        })
        .boxed()
}

type DownloadStream = BoxStream<'static, Result<pb::DownloadArtifactResponse, Status>>;

#[tonic::async_trait]
impl ArtifactServiceRpc for ArtifactGrpcService {
    /// A unary save is an upload of one chunk, so custom metadata and the size limit
    /// follow the same path as streamed uploads.
    #[tracing::instrument(skip_all, fields(app = Empty, user = Empty, session = Empty, file = Empty, version = Empty))]
    async fn save_artifact(
        &self,
        request: Request<pb::SaveArtifactRequest>,
    ) -> Result<Response<pb::SaveArtifactResponse>, Status> {
        let SaveWithMetadata { save, custom_metadata } = request.into_inner().try_into()?;
        // The part becomes an upload's header and body (core's rule for parts); the
        // upload checks the rest.
        let (upload, bytes) = UploadRequest::for_part(&save, custom_metadata)?;
        record_artifact(&upload.app_name, &upload.user_id, &upload.session_id, &upload.file_name);
        let saved = self.store.upload(upload, single_chunk(bytes)).await?;
        tracing::Span::current().record("version", saved.version);
        Ok(Response::new(pb::SaveArtifactResponse { version: saved.version }))
    }

    /// Reads through `download` rather than `load` so that an artifact too large for
    /// one message is refused from its metadata, before any of its bytes are read.
    #[tracing::instrument(skip_all, fields(app = Empty, user = Empty, session = Empty, file = Empty))]
    async fn load_artifact(
        &self,
        request: Request<pb::LoadArtifactRequest>,
    ) -> Result<Response<pb::LoadArtifactResponse>, Status> {
        let load = LoadRequest::try_from(request.into_inner())?;
        record_artifact(&load.app_name, &load.user_id, &load.session_id, &load.file_name);
        let limit = self.max_message_bytes;
        let (metadata, chunks) = self.store.download_resolved(load, DEFAULT_CHUNK_BYTES).await?;
        if metadata.size_bytes > limit as u64 {
            return Err(message_too_large(
                describe(&metadata),
                metadata.size_bytes,
                limit,
                USE_DOWNLOAD,
            ));
        }
        let capacity = usize::try_from(metadata.size_bytes).unwrap_or(0);
        let bytes = chunks
            .try_fold(Vec::with_capacity(capacity), |mut bytes, chunk| async move {
                bytes.extend_from_slice(&chunk);
                Ok(bytes)
            })
            .await?;
        let part = part_from_bytes(&metadata, bytes)?;
        let reply = pb::LoadArtifactResponse {
            part: Some(pb::Part::from(&part)),
            version: metadata.version,
            metadata: Some(pb::ArtifactMetadata::from(&metadata)),
        };
        // The bytes fit; the metadata next to them may still tip the reply over.
        fit_in_message(reply, limit, describe(&metadata), USE_DOWNLOAD)
    }

    #[tracing::instrument(skip_all, fields(app = Empty, user = Empty, session = Empty, file = Empty))]
    async fn delete_artifact(
        &self,
        request: Request<pb::DeleteArtifactRequest>,
    ) -> Result<Response<pb::DeleteArtifactResponse>, Status> {
        let delete = DeleteRequest::try_from(request.into_inner())?;
        record_artifact(&delete.app_name, &delete.user_id, &delete.session_id, &delete.file_name);
        self.store.delete(delete).await?;
        Ok(Response::new(pb::DeleteArtifactResponse {}))
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
    ))]
    async fn list_artifacts(
        &self,
        request: Request<pb::ListArtifactsRequest>,
    ) -> Result<Response<pb::ListArtifactsResponse>, Status> {
        let listed = self.store.list(request.into_inner().into()).await?;
        let what = format!("a list of {} artifact names", listed.file_names.len());
        fit_in_message(
            pb::ListArtifactsResponse {
                file_names: listed.file_names,
            },
            self.max_message_bytes,
            what,
            "delete artifacts the session no longer needs, or raise the message limit of server and client",
        )
    }

    #[tracing::instrument(skip_all, fields(app = Empty, user = Empty, session = Empty, file = Empty))]
    async fn list_versions(
        &self,
        request: Request<pb::ListVersionsRequest>,
    ) -> Result<Response<pb::ListVersionsResponse>, Status> {
        let versions = VersionsRequest::try_from(request.into_inner())?;
        record_artifact(
            &versions.app_name,
            &versions.user_id,
            &versions.session_id,
            &versions.file_name,
        );
        let listed = self.store.versions(versions).await?;
        Ok(Response::new(pb::ListVersionsResponse {
            versions: listed.versions,
        }))
    }

    #[tracing::instrument(skip_all, fields(app = Empty, user = Empty, session = Empty, file = Empty))]
    async fn get_artifact_metadata(
        &self,
        request: Request<pb::GetArtifactMetadataRequest>,
    ) -> Result<Response<pb::ArtifactMetadata>, Status> {
        let load = LoadRequest::try_from(request.into_inner())?;
        record_artifact(&load.app_name, &load.user_id, &load.session_id, &load.file_name);
        let metadata = self.store.metadata(load).await?;
        Ok(Response::new(pb::ArtifactMetadata::from(&metadata)))
    }

    /// The header first, then the chunks, streamed into the store as they arrive.
    ///
    /// The store runs in a task of its own: when the client cancels, tonic drops this
    /// handler, but the task still sees the cancellation as an error item on the chunk
    /// stream and discards the pending bytes at once, rather than leaving them for the
    /// store's expiry to collect.
    #[tracing::instrument(skip_all, fields(app = Empty, user = Empty, session = Empty, file = Empty, version = Empty))]
    async fn upload_artifact(
        &self,
        request: Request<Streaming<pb::UploadArtifactRequest>>,
    ) -> Result<Response<pb::SaveArtifactResponse>, Status> {
        let mut messages = request.into_inner();
        let header = match messages.message().await? {
            Some(pb::UploadArtifactRequest {
                message: Some(UploadMessage::Header(header)),
            }) => header,
            _ => return Err(AdkError::invalid_with("header", "the first message must be the header").into()),
        };
        let upload = UploadRequest::try_from(header)?;
        record_artifact(&upload.app_name, &upload.user_id, &upload.session_id, &upload.file_name);
        let store = self.store.clone();
        let chunks = upload_chunks(messages);
        let saved = tokio::spawn(async move { store.upload(upload, chunks).await }.in_current_span())
            .await
            .map_err(|err| AdkError::Internal(format!("the upload task failed: {err}")))??;
        tracing::Span::current().record("version", saved.version);
        Ok(Response::new(pb::SaveArtifactResponse { version: saved.version }))
    }

    type DownloadArtifactStream = DownloadStream;

    /// The metadata first, then the chunks as the store reads them. tonic pulls the
    /// next chunk only when HTTP/2 flow control lets it send, so a slow client holds
    /// the server back instead of making it buffer the artifact.
    #[tracing::instrument(skip_all, fields(app = Empty, user = Empty, session = Empty, file = Empty))]
    async fn download_artifact(
        &self,
        request: Request<pb::DownloadArtifactRequest>,
    ) -> Result<Response<Self::DownloadArtifactStream>, Status> {
        let DownloadRequest { load, chunk_bytes } = request.into_inner().try_into()?;
        record_artifact(&load.app_name, &load.user_id, &load.session_id, &load.file_name);
        let chunk_bytes = chunk_bytes.min(self.max_message_bytes.saturating_sub(CHUNK_FRAMING_BYTES).max(1));
        let (metadata, chunks) = self.store.download_resolved(load, chunk_bytes).await?;
        let header = pb::DownloadArtifactResponse {
            message: Some(DownloadMessage::Metadata(pb::ArtifactMetadata::from(&metadata))),
        };
        let chunks = chunks.map(|chunk| {
            chunk
                .map(|bytes| pb::DownloadArtifactResponse {
                    message: Some(DownloadMessage::Chunk(bytes)),
                })
                .map_err(Status::from)
        });
        Ok(Response::new(
            futures::stream::once(async move { Ok(header) }).chain(chunks).boxed(),
        ))
    }
}
