//! [`MemoryService`] over gRPC: every call goes to an `adk.v1.MemoryService` server
//! (`adk-session-server`, `adk-server`), whose core service applies the rules.

use crate::connect::AuthChannel;
use crate::{DEFAULT_MAX_MESSAGE_BYTES, check_health};
use adk_grpc_core::memory::{
    AddEventsRequest, AddMemoryRequest, DeleteMemoryRequest, GenerateMemoriesRequest, GeneratedMemory,
    IngestEventsRequest, IngestOutcome, ListRevisionsRequest, MemoryRevision, SearchMemoryRequest,
};
use adk_grpc_core::{MemoryService, Result, SearchMemoryResponse};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::memory_service_client::MemoryServiceClient;
use adk_grpc_proto::v1::memory_service_server::SERVICE_NAME as MEMORY_SERVICE_NAME;
use async_trait::async_trait;
use tonic_health::pb::health_client::HealthClient;

/// [`MemoryService`] over gRPC; its status comes back as the matching
/// [`AdkError`](adk_grpc_core::AdkError). Cheap to clone: clones share one connection.
#[derive(Debug, Clone)]
pub struct RemoteMemoryService {
    memory: MemoryServiceClient<AuthChannel>,
    health: HealthClient<AuthChannel>,
}

impl RemoteMemoryService {
    crate::connect::remote_constructors!();

    fn from_auth_channel(channel: AuthChannel) -> Self {
        RemoteMemoryService {
            memory: MemoryServiceClient::new(channel.clone()),
            health: HealthClient::new(channel),
        }
        .with_max_message_bytes(DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// Largest message sent or accepted; match the server's `--max-message-bytes`.
    pub fn with_max_message_bytes(mut self, max_message_bytes: usize) -> Self {
        self.memory = self
            .memory
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes);
        self
    }

    /// Adds a stored session to the user's memory on the server (AddSessionToMemory:
    /// see `adk_grpc_core::memory::add_session_to_memory`); returns the memories' ids.
    pub async fn add_session_to_memory(&self, app_name: &str, user_id: &str, session_id: &str) -> Result<Vec<String>> {
        let request = pb::AddSessionToMemoryRequest {
            app_name: app_name.to_string(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
        };
        let reply = self.memory.clone().add_session_to_memory(request).await?;
        Ok(reply.into_inner().memory_ids)
    }
}

#[async_trait]
impl MemoryService for RemoteMemoryService {
    async fn add_memory(&self, req: AddMemoryRequest) -> Result<Vec<String>> {
        let reply = self.memory.clone().add_memory(pb::AddMemoryRequest::from(&req)).await?;
        Ok(reply.into_inner().memory_ids)
    }

    async fn add_events(&self, req: AddEventsRequest) -> Result<Vec<String>> {
        let reply = self
            .memory
            .clone()
            .add_events_to_memory(pb::AddEventsToMemoryRequest::from(&req))
            .await?;
        Ok(reply.into_inner().memory_ids)
    }

    async fn search(&self, req: SearchMemoryRequest) -> Result<SearchMemoryResponse> {
        let reply = self
            .memory
            .clone()
            .search_memory(pb::SearchMemoryRequest::from(&req))
            .await?;
        SearchMemoryResponse::try_from(reply.into_inner())
    }

    async fn delete(&self, req: DeleteMemoryRequest) -> Result<bool> {
        let reply = self
            .memory
            .clone()
            .delete_memory(pb::DeleteMemoryRequest::from(&req))
            .await?;
        Ok(reply.into_inner().deleted)
    }

    async fn generate(&self, req: GenerateMemoriesRequest) -> Result<Vec<GeneratedMemory>> {
        let reply = self
            .memory
            .clone()
            .generate_memories(pb::GenerateMemoriesRequest::from(&req))
            .await?;
        reply
            .into_inner()
            .memories
            .iter()
            .enumerate()
            .map(|(i, g)| GeneratedMemory::from_proto(format_args!("memories[{i}]"), g))
            .collect()
    }

    async fn revisions(&self, req: ListRevisionsRequest) -> Result<Vec<MemoryRevision>> {
        let reply = self
            .memory
            .clone()
            .list_memory_revisions(pb::ListMemoryRevisionsRequest::from(&req))
            .await?;
        reply
            .into_inner()
            .revisions
            .iter()
            .enumerate()
            .map(|(i, r)| MemoryRevision::from_proto(format_args!("revisions[{i}]"), r))
            .collect()
    }

    async fn ingest(&self, req: IngestEventsRequest) -> Result<IngestOutcome> {
        let reply = self
            .memory
            .clone()
            .ingest_events(pb::IngestEventsRequest::from(&req))
            .await?;
        IngestOutcome::try_from(reply.get_ref())
    }

    /// Ok while the server reports its memory service SERVING.
    async fn ping(&self) -> Result<()> {
        check_health(&self.health, MEMORY_SERVICE_NAME, "memory service").await
    }
}
