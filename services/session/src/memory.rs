//! The `adk.v1.MemoryService` gRPC handlers. Served next to the SessionService (by
//! `adk-session-server` and `adk-server`) because AddSessionToMemory reads the
//! session from the session store of the same deployment. Each handler converts the
//! request, calls the [`MemoryService`] (every rule is `adk_grpc_core::CoreMemoryService`'s)
//! and converts the reply; what is here is transport only.

use adk_grpc_core::memory::ingest::INGEST_TICK;
use adk_grpc_core::memory::{
    AddEventsRequest, AddMemoryRequest, DeleteMemoryRequest, GenerateMemoriesRequest, IngestEventsRequest,
    ListRevisionsRequest, SearchMemoryRequest, add_session_to_memory, generate_memories,
};
use adk_grpc_core::{MemoryService, SessionService};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::memory_service_server::{MemoryService as MemoryServiceRpc, MemoryServiceServer};
use adk_grpc_server_kit::{GrpcArgs, fit_in_message};
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The server for `adk.v1.MemoryService`, with the message size limits of `grpc`.
pub fn memory_service(
    memory: Arc<dyn MemoryService>,
    sessions: Arc<dyn SessionService>,
    grpc: &GrpcArgs,
) -> MemoryServiceServer<MemoryGrpcService> {
    MemoryServiceServer::new(MemoryGrpcService {
        memory,
        sessions,
        max_message_bytes: grpc.max_message_bytes,
    })
    .max_decoding_message_size(grpc.max_message_bytes)
    .max_encoding_message_size(grpc.max_message_bytes)
}

/// The handlers, over any memory store and the session store sessions are added from.
pub struct MemoryGrpcService {
    memory: Arc<dyn MemoryService>,
    sessions: Arc<dyn SessionService>,
    /// Replies larger than this are refused with a hint instead of failing in the client's decoder.
    max_message_bytes: usize,
}

fn added(memory_ids: Vec<String>) -> Response<pb::AddMemoryResponse> {
    Response::new(pb::AddMemoryResponse { memory_ids })
}

#[tonic::async_trait]
impl MemoryServiceRpc for MemoryGrpcService {
    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
    ))]
    async fn add_session_to_memory(
        &self,
        request: Request<pb::AddSessionToMemoryRequest>,
    ) -> Result<Response<pb::AddMemoryResponse>, Status> {
        let r = request.into_inner();
        let ids = add_session_to_memory(
            self.memory.as_ref(),
            self.sessions.as_ref(),
            &r.app_name,
            &r.user_id,
            &r.session_id,
        )
        .await?;
        Ok(added(ids))
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name, user = %request.get_ref().user_id))]
    async fn add_events_to_memory(
        &self,
        request: Request<pb::AddEventsToMemoryRequest>,
    ) -> Result<Response<pb::AddMemoryResponse>, Status> {
        let req = AddEventsRequest::try_from(request.into_inner())?;
        Ok(added(self.memory.add_events(req).await?))
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name, user = %request.get_ref().user_id))]
    async fn add_memory(
        &self,
        request: Request<pb::AddMemoryRequest>,
    ) -> Result<Response<pb::AddMemoryResponse>, Status> {
        let req = AddMemoryRequest::try_from(request.into_inner())?;
        Ok(added(self.memory.add_memory(req).await?))
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name, user = %request.get_ref().user_id))]
    async fn search_memory(
        &self,
        request: Request<pb::SearchMemoryRequest>,
    ) -> Result<Response<pb::SearchMemoryResponse>, Status> {
        let found = self
            .memory
            .search(SearchMemoryRequest::try_from(request.into_inner())?)
            .await?;
        fit_in_message(
            pb::SearchMemoryResponse::from(&found),
            self.max_message_bytes,
            "the search result",
            "ask for fewer memories (limit)",
        )
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name, user = %request.get_ref().user_id))]
    async fn delete_memory(
        &self,
        request: Request<pb::DeleteMemoryRequest>,
    ) -> Result<Response<pb::DeleteMemoryResponse>, Status> {
        let deleted = self
            .memory
            .delete(DeleteMemoryRequest::from(request.into_inner()))
            .await?;
        Ok(Response::new(pb::DeleteMemoryResponse { deleted }))
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id,
        session = %request.get_ref().source_session_id,
    ))]
    async fn generate_memories(
        &self,
        request: Request<pb::GenerateMemoriesRequest>,
    ) -> Result<Response<pb::GenerateMemoriesResponse>, Status> {
        let req = GenerateMemoriesRequest::try_from(request.into_inner())?;
        let changes = generate_memories(self.memory.as_ref(), self.sessions.as_ref(), req).await?;
        Ok(Response::new(pb::GenerateMemoriesResponse {
            memories: changes.iter().map(pb::GeneratedMemory::from).collect(),
        }))
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name, user = %request.get_ref().user_id))]
    async fn list_memory_revisions(
        &self,
        request: Request<pb::ListMemoryRevisionsRequest>,
    ) -> Result<Response<pb::ListMemoryRevisionsResponse>, Status> {
        let revisions = self
            .memory
            .revisions(ListRevisionsRequest::from(request.into_inner()))
            .await?;
        Ok(Response::new(pb::ListMemoryRevisionsResponse {
            revisions: revisions.iter().map(pb::MemoryRevision::from).collect(),
        }))
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, stream = %request.get_ref().stream_id,
    ))]
    async fn ingest_events(
        &self,
        request: Request<pb::IngestEventsRequest>,
    ) -> Result<Response<pb::IngestEventsResponse>, Status> {
        let outcome = self
            .memory
            .ingest(IngestEventsRequest::try_from(request.into_inner())?)
            .await?;
        Ok(Response::new(pb::IngestEventsResponse::from(&outcome)))
    }
}

/// Generates the ingested events of due users (IngestEvents) every [`INGEST_TICK`] until
/// `stop` resolves: the background task of every server that serves memory, so a buffer
/// whose ingesting replica stopped is generated by another. A failed tick is logged and
/// the next one tries again.
pub async fn generate_due_ingests(memory: Arc<dyn MemoryService>, stop: impl Future<Output = ()>) {
    tokio::pin!(stop);
    let mut interval = tokio::time::interval(INGEST_TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = interval.tick() => {}
        }
        // A generation under way when `stop` comes is left unfinished: nothing of it is
        // committed, and its events stay buffered for another replica.
        tokio::select! {
            () = &mut stop => return,
            done = memory.generate_due_ingests() => {
                if let Err(error) = done {
                    tracing::warn!(%error, "generating due ingested memories failed");
                }
            }
        }
    }
}
