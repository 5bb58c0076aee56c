//! The artifact gRPC server in-process on 127.0.0.1:0: the conformance suite over
//! the memory store through `RemoteArtifactService`, and, over a probe store, what
//! the handlers themselves promise: chunks reach the store while the upload is
//! still arriving, a cancelled upload reaches it as an error, and a download is
//! produced only as fast as the client reads it.

use adk_grpc_artifact_service::artifact_service;
use adk_grpc_client::RemoteArtifactService;
use adk_grpc_core::artifact::{
    ArtifactMetadata, ArtifactService, ByteStream, DeleteRequest, ListRequest, ListResponse, LoadRequest, SaveResponse,
    UploadRequest, VersionsRequest, VersionsResponse,
};
use adk_grpc_core::{AdkError, Result};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_proto::v1::download_artifact_response::Message as DownloadMessage;
use adk_grpc_proto::v1::upload_artifact_request::Message as UploadMessage;
use adk_grpc_server_kit::{GrpcArgs, GrpcServer, Shutdown};
use adk_grpc_store::{InMemoryArtifactBackend, StoreConfig};
use adk_grpc_testkit::Fixture;
use adk_grpc_testkit::artifact_conformance::ArtifactLimits;
use async_trait::async_trait;
use futures::StreamExt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

const WAIT: Duration = Duration::from_secs(5);

async fn serve(store: Arc<dyn ArtifactService>) -> (SocketAddr, Shutdown) {
    let grpc = GrpcArgs::default();
    let shutdown = Shutdown::new();
    let bound = GrpcServer::new(&grpc, shutdown.clone())
        .add_service(artifact_service(store.clone(), &grpc))
        .health_check("artifact store", store)
        .bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = bound.local_addr();
    tokio::spawn(bound.serve());
    (addr, shutdown)
}

async fn raw_client(addr: SocketAddr) -> ArtifactServiceClient<tonic::transport::Channel> {
    ArtifactServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
}

/// The memory store behind the real handlers, over a real channel; the server runs on the
/// case's own runtime and ends with it.
async fn memory_store_through_grpc() -> Fixture {
    let limits = ArtifactLimits {
        max_artifact_bytes: 2 * 1024 * 1024,
        chunk_bytes: 64 * 1024,
    };
    let config = StoreConfig {
        max_artifact_bytes: limits.max_artifact_bytes,
        artifact_chunk_bytes: limits.chunk_bytes,
        ..StoreConfig::default()
    };
    let store = adk_grpc_store::memory_artifacts(InMemoryArtifactBackend::new(), &config);
    let (addr, shutdown) = serve(Arc::new(store)).await;
    let client = RemoteArtifactService::connect(format!("http://{addr}"))
        .await
        .expect("connect");
    client.ping().await.expect("SERVING");
    Fixture::artifacts(client, limits).keeping(shutdown)
}

mod the_memory_store_conforms_through_grpc {
    use super::*;
    adk_grpc_testkit::artifact_conformance_tests!(memory_store_through_grpc().await);
}

/// What the probe store saw of an upload.
#[derive(Debug)]
enum UploadSeen {
    /// The first chunk, while the client had not sent the second yet.
    FirstChunk(Vec<u8>),
    /// How the chunk stream ended: Ok(bytes received) or the error item.
    End(std::result::Result<usize, AdkError>),
}

/// A store that reports what its streams do instead of storing anything.
struct ProbeStore {
    uploads: mpsc::UnboundedSender<UploadSeen>,
    /// Download chunks produced so far.
    produced: Arc<AtomicUsize>,
}

#[async_trait]
impl ArtifactService for ProbeStore {
    async fn upload(&self, _req: UploadRequest, mut chunks: ByteStream) -> Result<SaveResponse> {
        let mut received = 0;
        let mut first = true;
        while let Some(chunk) = chunks.next().await {
            match chunk {
                Ok(bytes) => {
                    received += bytes.len();
                    if first {
                        let _ = self.uploads.send(UploadSeen::FirstChunk(bytes));
                        first = false;
                    }
                }
                Err(err) => {
                    let message = err.to_string();
                    let _ = self.uploads.send(UploadSeen::End(Err(err)));
                    return Err(AdkError::Aborted(adk_grpc_core::Conflict::Other, message));
                }
            }
        }
        let _ = self.uploads.send(UploadSeen::End(Ok(received)));
        Ok(SaveResponse { version: 1 })
    }

    async fn download(&self, req: LoadRequest, chunk_bytes: usize) -> Result<(ArtifactMetadata, ByteStream)> {
        const CHUNKS: usize = 1000;
        let metadata = ArtifactMetadata {
            file_name: req.file_name,
            version: 1,
            mime_type: "application/octet-stream".into(),
            size_bytes: (CHUNKS * chunk_bytes) as u64,
            create_time: chrono::Utc::now(),
            custom_metadata: Default::default(),
            is_text: false,
            is_file_uri: false,
            display_name: None,
        };
        let produced = self.produced.clone();
        let chunks = futures::stream::iter(0..CHUNKS).map(move |_| {
            produced.fetch_add(1, Ordering::SeqCst);
            Ok(vec![0u8; chunk_bytes])
        });
        Ok((metadata, chunks.boxed()))
    }

    async fn metadata(&self, _req: LoadRequest) -> Result<ArtifactMetadata> {
        Err(AdkError::NotFound(adk_grpc_core::Missing::Artifact, "probe".into()))
    }
    async fn delete(&self, _req: DeleteRequest) -> Result<()> {
        Ok(())
    }
    async fn list(&self, _req: ListRequest) -> Result<ListResponse> {
        Ok(ListResponse::default())
    }
    async fn versions(&self, _req: VersionsRequest) -> Result<VersionsResponse> {
        Ok(VersionsResponse::default())
    }
}

fn probe() -> (Arc<ProbeStore>, mpsc::UnboundedReceiver<UploadSeen>, Arc<AtomicUsize>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let produced = Arc::new(AtomicUsize::new(0));
    let store = ProbeStore {
        uploads: tx,
        produced: produced.clone(),
    };
    (Arc::new(store), rx, produced)
}

fn header() -> pb::UploadArtifactRequest {
    pb::UploadArtifactRequest {
        message: Some(UploadMessage::Header(pb::UploadHeader {
            r#ref: Some(pb::ArtifactRef {
                app_name: "a".into(),
                user_id: "u".into(),
                session_id: "s".into(),
                file_name: "f.bin".into(),
            }),
            mime_type: "application/octet-stream".into(),
            ..Default::default()
        })),
    }
}

fn chunk(bytes: &[u8]) -> pb::UploadArtifactRequest {
    pb::UploadArtifactRequest {
        message: Some(UploadMessage::Chunk(bytes.to_vec())),
    }
}

async fn next_seen(seen: &mut mpsc::UnboundedReceiver<UploadSeen>) -> UploadSeen {
    tokio::time::timeout(WAIT, seen.recv())
        .await
        .expect("the store saw something in time")
        .expect("store alive")
}

#[tokio::test]
async fn upload_chunks_reach_the_store_while_the_upload_is_still_arriving() {
    let (store, mut seen, _) = probe();
    let (addr, _shutdown) = serve(store).await;
    let (tx, rx) = mpsc::channel(4);
    let mut client = raw_client(addr).await;
    let call = tokio::spawn(async move { client.upload_artifact(ReceiverStream::new(rx)).await });
    tx.send(header()).await.expect("send");
    tx.send(chunk(b"first")).await.expect("send");
    // Only once the store has the first chunk does the client send the rest.
    assert!(matches!(next_seen(&mut seen).await, UploadSeen::FirstChunk(bytes) if bytes == b"first"));
    tx.send(chunk(b"second")).await.expect("send");
    drop(tx);
    assert!(matches!(next_seen(&mut seen).await, UploadSeen::End(Ok(11))));
    let reply = call.await.expect("task").expect("upload");
    assert_eq!(reply.into_inner().version, 1);
}

#[tokio::test]
async fn a_cancelled_upload_reaches_the_store_as_an_error_not_as_an_end() {
    let (store, mut seen, _) = probe();
    let (addr, _shutdown) = serve(store).await;
    let (tx, rx) = mpsc::channel(4);
    let mut client = raw_client(addr).await;
    let call = tokio::spawn(async move { client.upload_artifact(ReceiverStream::new(rx)).await });
    tx.send(header()).await.expect("send");
    tx.send(chunk(b"partial")).await.expect("send");
    assert!(matches!(next_seen(&mut seen).await, UploadSeen::FirstChunk(_)));
    // The client goes away mid-upload; its request stream is still open.
    call.abort();
    match next_seen(&mut seen).await {
        UploadSeen::End(Err(err)) => assert_eq!(err.code(), Code::Aborted, "{err}"),
        other => panic!("a cancelled upload must end in an error, the store saw {other:?}"),
    }
    drop(tx);
}

#[tokio::test]
async fn a_download_is_produced_only_as_fast_as_the_client_reads() {
    let (store, _, produced) = probe();
    let (addr, _shutdown) = serve(store).await;
    let mut stream = raw_client(addr)
        .await
        .download_artifact(pb::DownloadArtifactRequest {
            r#ref: Some(pb::ArtifactRef {
                app_name: "a".into(),
                user_id: "u".into(),
                session_id: "s".into(),
                file_name: "f.bin".into(),
            }),
            version: None,
            chunk_size: 1024 * 1024,
        })
        .await
        .expect("download")
        .into_inner();
    let first = stream.message().await.expect("metadata").expect("a message");
    assert!(matches!(first.message, Some(DownloadMessage::Metadata(m)) if m.size_bytes == 1000 * 1024 * 1024));
    let second = stream.message().await.expect("chunk").expect("a message");
    assert!(matches!(second.message, Some(DownloadMessage::Chunk(c)) if c.len() == 1024 * 1024));
    // The client stops reading: the server stops once the HTTP/2 windows are full.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let while_paused = produced.load(Ordering::SeqCst);
    assert!(
        while_paused < 32,
        "{while_paused} MiB of a 1000 MiB download were produced for a client that read 1 MiB"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        produced.load(Ordering::SeqCst),
        while_paused,
        "and no more while it waits"
    );
    drop(stream);
}
