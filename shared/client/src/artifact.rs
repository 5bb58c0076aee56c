//! [`ArtifactService`] over gRPC. Uploads and downloads stream (UploadArtifact,
//! DownloadArtifact), and the trait's `save` and `load` are built on them, so an
//! artifact of any size moves in bounded messages; the other calls are unary.

use crate::connect::AuthChannel;
use crate::{DEFAULT_MAX_MESSAGE_BYTES, check_health};
use adk_grpc_core::artifact::{
    ArtifactService, ByteStream, DeleteRequest, DownloadRequest, ListRequest, ListResponse, LoadRequest, SaveRequest,
    SaveResponse, UploadRequest, VersionsRequest, VersionsResponse, single_chunk,
};
use adk_grpc_core::{AdkError, ArtifactMetadata, Result};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_proto::v1::artifact_service_server::SERVICE_NAME as ARTIFACT_SERVICE_NAME;
use adk_grpc_proto::v1::download_artifact_response::Message as DownloadMessage;
use adk_grpc_proto::v1::upload_artifact_request::Message as UploadMessage;
use async_trait::async_trait;
use futures::channel::oneshot;
use futures::future::{self, Either};
use futures::{Stream, StreamExt};
use tonic::Streaming;
use tonic_health::pb::health_client::HealthClient;

/// Largest chunk sent in one UploadArtifact message, however large the caller's
/// chunks are: well inside the servers' default 4 MiB message limit, and large
/// enough that per-message overhead does not matter.
pub const UPLOAD_CHUNK_BYTES: usize = 1024 * 1024;

/// Room left in an upload message for the chunk field's tag and length prefix.
const CHUNK_FRAMING_BYTES: usize = 16;

/// [`ArtifactService`] over gRPC: every call goes to an `adk.v1.ArtifactService`
/// server, and its status comes back as the matching [`AdkError`]. Cheap to clone:
/// clones share one connection.
#[derive(Debug, Clone)]
pub struct RemoteArtifactService {
    artifacts: ArtifactServiceClient<AuthChannel>,
    health: HealthClient<AuthChannel>,
    /// Largest chunk per upload message: [`UPLOAD_CHUNK_BYTES`], or less under a smaller message limit.
    upload_chunk_bytes: usize,
}

impl RemoteArtifactService {
    crate::connect::remote_constructors!();

    fn from_auth_channel(channel: AuthChannel) -> Self {
        RemoteArtifactService {
            artifacts: ArtifactServiceClient::new(channel.clone()),
            health: HealthClient::new(channel),
            upload_chunk_bytes: UPLOAD_CHUNK_BYTES,
        }
        .with_max_message_bytes(DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// Largest message sent or accepted; match the server's `--max-message-bytes`.
    /// Upload chunks are cut to fit in it.
    pub fn with_max_message_bytes(mut self, max_message_bytes: usize) -> Self {
        self.upload_chunk_bytes = UPLOAD_CHUNK_BYTES.min(max_message_bytes.saturating_sub(CHUNK_FRAMING_BYTES).max(1));
        self.artifacts = self
            .artifacts
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes);
        self
    }
}

fn chunk_message(bytes: Vec<u8>) -> pb::UploadArtifactRequest {
    pb::UploadArtifactRequest {
        message: Some(UploadMessage::Chunk(bytes)),
    }
}

/// What [`upload_messages`] walks through: the caller's chunks, the one being cut
/// into messages, and where to report the caller's error.
struct UploadBody {
    chunks: ByteStream,
    max_chunk_bytes: usize,
    current: Vec<u8>,
    offset: usize,
    failed: Option<oneshot::Sender<AdkError>>,
}

/// The caller's chunks as UploadArtifact chunk messages of at most
/// `max_chunk_bytes`, produced only as fast as gRPC sends them. When the
/// caller's stream fails, the error goes to `failed` and the body never ends: an
/// ended body would commit the upload, while the caller dropping the call resets
/// the HTTP/2 stream, which the server sees as a cancelled upload and discards.
fn upload_messages(
    chunks: ByteStream,
    max_chunk_bytes: usize,
    failed: oneshot::Sender<AdkError>,
) -> impl Stream<Item = pb::UploadArtifactRequest> + Send + 'static {
    let body = UploadBody {
        chunks,
        max_chunk_bytes,
        current: Vec::new(),
        offset: 0,
        failed: Some(failed),
    };
    futures::stream::unfold(body, |mut body| async move {
        loop {
            let len = body.current.len();
            if body.offset < len {
                let piece = if body.offset == 0 && len <= body.max_chunk_bytes {
                    // Small enough already: sent as is, without a copy.
                    std::mem::take(&mut body.current)
                } else {
                    let end = len.min(body.offset + body.max_chunk_bytes);
                    let piece = body.current[body.offset..end].to_vec();
                    body.offset = end;
                    piece
                };
                return Some((chunk_message(piece), body));
            }
            match body.chunks.next().await {
                Some(Ok(bytes)) => {
                    body.current = bytes;
                    body.offset = 0;
                }
                Some(Err(err)) => {
                    if let Some(failed) = body.failed.take() {
                        // The receiver is gone only if the call already finished.
                        let _ = failed.send(err);
                    }
                    return future::pending().await;
                }
                None => return None,
            }
        }
    })
}

/// The chunks of a download after its metadata, checked against the size the
/// metadata announced, so a stream cut short never passes for a whole artifact.
fn download_chunks(replies: Streaming<pb::DownloadArtifactResponse>, metadata: &ArtifactMetadata) -> ByteStream {
    struct Download {
        replies: Streaming<pb::DownloadArtifactResponse>,
        received: u64,
        expected: u64,
        what: String,
        done: bool,
    }
    let download = Download {
        replies,
        received: 0,
        expected: metadata.size_bytes,
        what: format!("version {} of {:?}", metadata.version, metadata.file_name),
        done: false,
    };
    futures::stream::unfold(download, |mut d| async move {
        if d.done {
            return None;
        }
        let item = match d.replies.message().await {
            Ok(Some(pb::DownloadArtifactResponse {
                message: Some(DownloadMessage::Chunk(bytes)),
            })) => {
                d.received += bytes.len() as u64;
                if d.received > d.expected {
                    Err(AdkError::Internal(format!(
                        "the server sent more than the {} bytes of {}",
                        d.expected, d.what
                    )))
                } else {
                    Ok(bytes)
                }
            }
            Ok(Some(_)) => Err(AdkError::Internal(format!(
                "the server sent a message that is not a chunk in the middle of {}",
                d.what
            ))),
            Ok(None) if d.received == d.expected => return None,
            Ok(None) => Err(AdkError::Unavailable(format!(
                "the download of {} ended after {} of its {} bytes",
                d.what, d.received, d.expected
            ))),
            Err(status) => Err(AdkError::from(status)),
        };
        // After an error the stream ends: there is nothing sensible to read past it.
        d.done = item.is_err();
        Some((item, d))
    })
    .boxed()
}

#[async_trait]
impl ArtifactService for RemoteArtifactService {
    /// UploadArtifact: the header, then the chunks re-cut to at most
    /// [`UPLOAD_CHUNK_BYTES`] per message (less under a smaller message limit). A failing
    /// `chunks` stream cancels the call, so the server stores nothing, and its error is returned.
    async fn upload(&self, req: UploadRequest, chunks: ByteStream) -> Result<SaveResponse> {
        let header = pb::UploadArtifactRequest {
            message: Some(UploadMessage::Header(pb::UploadHeader::from(&req))),
        };
        let (failed_tx, failed_rx) = oneshot::channel();
        let body = futures::stream::once(future::ready(header)).chain(upload_messages(
            chunks,
            self.upload_chunk_bytes,
            failed_tx,
        ));
        let mut client = self.artifacts.clone();
        let call = Box::pin(client.upload_artifact(body));
        let reply = match future::select(call, failed_rx).await {
            Either::Left((reply, _)) => reply?,
            // Dropping the pending call resets its stream: the server discards the upload.
            Either::Right((Ok(err), _call)) => return Err(err),
            // The body ended normally (its sender dropped unused): the server's reply decides.
            Either::Right((Err(oneshot::Canceled), call)) => call.await?,
        };
        Ok(SaveResponse {
            version: reply.get_ref().version,
        })
    }

    /// Text and inline data as an upload (see [`ArtifactService::save`]); a `file_data` part
    /// through SaveArtifact, as UploadArtifact carries content bytes only.
    async fn save(&self, req: SaveRequest) -> Result<SaveResponse> {
        let (upload, bytes) = UploadRequest::for_part(&req, Default::default())?;
        if !upload.is_file_uri {
            return self.upload(upload, single_chunk(bytes)).await;
        }
        let reply = self
            .artifacts
            .clone()
            .save_artifact(pb::SaveArtifactRequest::from(&req))
            .await?;
        Ok(SaveResponse {
            version: reply.get_ref().version,
        })
    }

    /// DownloadArtifact: the metadata arrives first, the bytes follow as the stream is read.
    /// Dropping the stream cancels the call on the server. The server follows `artifact://`
    /// references, so this is also the trait's `download_resolved`.
    async fn download(&self, req: LoadRequest, chunk_bytes: usize) -> Result<(ArtifactMetadata, ByteStream)> {
        let request = DownloadRequest { load: req, chunk_bytes };
        let mut replies = self
            .artifacts
            .clone()
            .download_artifact(pb::DownloadArtifactRequest::from(&request))
            .await?
            .into_inner();
        let metadata = match replies.message().await? {
            Some(pb::DownloadArtifactResponse {
                message: Some(DownloadMessage::Metadata(metadata)),
            }) => ArtifactMetadata::try_from(&metadata)?,
            _ => {
                return Err(AdkError::Internal(
                    "the server's download did not start with the artifact's metadata".into(),
                ));
            }
        };
        let chunks = download_chunks(replies, &metadata);
        Ok((metadata, chunks))
    }

    async fn metadata(&self, req: LoadRequest) -> Result<ArtifactMetadata> {
        let reply = self
            .artifacts
            .clone()
            .get_artifact_metadata(pb::GetArtifactMetadataRequest::from(&req))
            .await?;
        ArtifactMetadata::try_from(reply.get_ref())
    }

    async fn delete(&self, req: DeleteRequest) -> Result<()> {
        self.artifacts
            .clone()
            .delete_artifact(pb::DeleteArtifactRequest::from(&req))
            .await?;
        Ok(())
    }

    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        let reply = self
            .artifacts
            .clone()
            .list_artifacts(pb::ListArtifactsRequest::from(&req))
            .await?;
        Ok(ListResponse {
            file_names: reply.into_inner().file_names,
        })
    }

    async fn versions(&self, req: VersionsRequest) -> Result<VersionsResponse> {
        let reply = self
            .artifacts
            .clone()
            .list_versions(pb::ListVersionsRequest::from(&req))
            .await?;
        Ok(VersionsResponse {
            versions: reply.into_inner().versions,
        })
    }

    /// Asks the server's grpc.health.v1 for the artifact service: Ok while it is
    /// SERVING, UNAVAILABLE while its store is unreachable (or it is shutting down).
    async fn ping(&self) -> Result<()> {
        check_health(&self.health, ARTIFACT_SERVICE_NAME, "artifact service").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn collect_pieces(chunks: Vec<Vec<u8>>) -> (Vec<usize>, Vec<u8>) {
        let (tx, _rx) = oneshot::channel();
        let source: ByteStream = futures::stream::iter(chunks.into_iter().map(Ok)).boxed();
        let messages: Vec<_> = upload_messages(source, UPLOAD_CHUNK_BYTES, tx).collect().await;
        let mut sizes = Vec::new();
        let mut all = Vec::new();
        for message in messages {
            let Some(UploadMessage::Chunk(bytes)) = message.message else {
                panic!("only chunks after the header")
            };
            sizes.push(bytes.len());
            all.extend(bytes);
        }
        (sizes, all)
    }

    #[tokio::test]
    async fn large_chunks_are_cut_and_small_ones_pass_unchanged() {
        let big: Vec<u8> = (0..(2 * UPLOAD_CHUNK_BYTES + 10)).map(|i| i as u8).collect();
        let (sizes, all) = collect_pieces(vec![b"ab".to_vec(), Vec::new(), big.clone(), b"z".to_vec()]).await;
        assert_eq!(sizes, [2, UPLOAD_CHUNK_BYTES, UPLOAD_CHUNK_BYTES, 10, 1]);
        let mut want = b"ab".to_vec();
        want.extend(&big);
        want.push(b'z');
        assert_eq!(all, want);
    }

    #[tokio::test]
    async fn a_failing_source_reports_its_error_and_never_ends_the_body() {
        let (tx, mut rx) = oneshot::channel();
        let source: ByteStream =
            futures::stream::iter([Ok(b"x".to_vec()), Err(AdkError::Internal("disk gone".into()))]).boxed();
        let mut messages = upload_messages(source, 4, tx).boxed();
        assert!(messages.next().await.is_some(), "the chunk before the failure is sent");
        let next = future::select(messages.next(), future::ready(())).await;
        assert!(
            matches!(next, Either::Right(_)),
            "the body stays open after the failure"
        );
        let err = rx.try_recv().expect("not cancelled").expect("the error was reported");
        assert!(err.to_string().contains("disk gone"), "{err}");
    }
}
