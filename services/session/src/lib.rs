//! The `adk.v1.SessionService` gRPC handlers: convert the request with core's
//! conversions, call the [`SessionService`] trait, convert the reply. Every rule
//! about sessions lives in core and the store; what is here is transport only
//! (message size limits, streaming, shutdown).

mod memory;

pub use memory::{MemoryGrpcService, generate_due_ingests, memory_service};

use adk_grpc_core::convert::map_to_struct;
use adk_grpc_core::{
    AppStateRequest, AppendEventRequest, CreateRequest, DeleteRequest, ForkRequest, GetRequest, ListEventsRequest,
    ListRequest, SessionService, UpdateAppStateRequest, UserStateRequest, WatchRequest,
};
use adk_grpc_proto::{EventReply, ListEventsReply, SessionReply};
// The server whose replies carry stored events as they are (see `get_session`).
use adk_grpc_proto::session_reply::session_service_server::{
    SessionService as SessionServiceRpc, SessionServiceServer,
};
use adk_grpc_proto::v1 as pb;
use adk_grpc_server_kit::{GrpcArgs, Shutdown, check_fits, fit_in_message};
use futures::StreamExt;
use futures::stream::BoxStream;
use prost::Message;
use std::fmt::Display;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The server for `adk.v1.SessionService`, with the message size limits of `grpc`
/// and watch streams that end when `shutdown` fires. The all-in-one binary adds it
/// next to the other services.
pub fn session_service(
    store: Arc<dyn SessionService>,
    grpc: &GrpcArgs,
    shutdown: Shutdown,
) -> SessionServiceServer<SessionGrpcService> {
    SessionServiceServer::new(SessionGrpcService::new(store, grpc.max_message_bytes, shutdown))
        .max_decoding_message_size(grpc.max_message_bytes)
        .max_encoding_message_size(grpc.max_message_bytes)
}

/// The handlers, over any session store.
pub struct SessionGrpcService {
    store: Arc<dyn SessionService>,
    /// Replies larger than this are refused with a hint instead of failing in the client's decoder.
    max_message_bytes: usize,
    shutdown: Shutdown,
}

impl SessionGrpcService {
    pub fn new(store: Arc<dyn SessionService>, max_message_bytes: usize, shutdown: Shutdown) -> Self {
        SessionGrpcService {
            store,
            max_message_bytes,
            shutdown,
        }
    }

    /// RESOURCE_EXHAUSTED, saying what to do instead, when `reply` would exceed the
    /// message size limit (see [`adk_grpc_server_kit::fit_in_message`]).
    fn fit_in_message<M: Message>(&self, reply: M, what: impl Display, instead: &str) -> Result<Response<M>, Status> {
        fit_in_message(reply, self.max_message_bytes, what, instead)
    }
}

type EventStream = BoxStream<'static, Result<EventReply, Status>>;

#[tonic::async_trait]
impl SessionServiceRpc for SessionGrpcService {
    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = tracing::field::Empty,
    ))]
    async fn create_session(
        &self,
        request: Request<pb::CreateSessionRequest>,
    ) -> Result<Response<SessionReply>, Status> {
        let session = self
            .store
            .create(CreateRequest::try_from(request.into_inner())?)
            .await?;
        tracing::Span::current().record("session", session.id.as_str());
        Ok(Response::new(pb::Session::from(&session).into()))
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
    ))]
    async fn get_session(&self, request: Request<pb::GetSessionRequest>) -> Result<Response<SessionReply>, Status> {
        // The events come as the store keeps them, encoded and checked, and go into the
        // reply as they are: no decoding, converting and encoding of each (BENCHMARKS.md).
        // ListEvents and WatchSession do the same.
        let session = self
            .store
            .get_encoded(GetRequest::try_from(request.into_inner())?)
            .await?;
        let reply = SessionReply::from(session);
        check_fits(
            &reply,
            self.max_message_bytes,
            format_args!(
                "session {} with {} events",
                reply.message.id,
                reply.encoded_events.len()
            ),
            "page through its events with ListEvents, or get fewer with num_recent_events or after",
        )?;
        Ok(Response::new(reply))
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
    ))]
    async fn fork_session(&self, request: Request<pb::ForkSessionRequest>) -> Result<Response<SessionReply>, Status> {
        let fork = self.store.fork(ForkRequest::from(request.into_inner())).await?;
        self.fit_in_message(
            SessionReply::from(pb::Session::from(&fork)),
            format_args!("forked session {} with {} events", fork.id, fork.events.len()),
            "the fork was made: read it with ListEvents",
        )
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name, user = %request.get_ref().user_id))]
    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let page = self.store.list(ListRequest::try_from(request.into_inner())?).await?;
        self.fit_in_message(
            pb::ListSessionsResponse::from(&page),
            format_args!("a page of {} sessions", page.sessions.len()),
            "ask for a smaller page_size",
        )
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
    ))]
    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteSessionResponse>, Status> {
        self.store.delete(DeleteRequest::from(request.into_inner())).await?;
        Ok(Response::new(pb::DeleteSessionResponse {}))
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
    ))]
    async fn append_event(&self, request: Request<pb::AppendEventRequest>) -> Result<Response<EventReply>, Status> {
        let event = self
            .store
            .append_event(AppendEventRequest::try_from(request.into_inner())?)
            .await?;
        Ok(Response::new(pb::Event::from(event).into()))
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name, user = %request.get_ref().user_id))]
    async fn get_user_state(
        &self,
        request: Request<pb::GetUserStateRequest>,
    ) -> Result<Response<pb::GetUserStateResponse>, Status> {
        let state = self
            .store
            .user_state(UserStateRequest::from(request.into_inner()))
            .await?;
        let reply = pb::GetUserStateResponse {
            state: Some(map_to_struct(state.iter())),
        };
        self.fit_in_message(reply, "the user's state", "keep less in user: state")
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name))]
    async fn get_app_state(
        &self,
        request: Request<pb::GetAppStateRequest>,
    ) -> Result<Response<pb::GetAppStateResponse>, Status> {
        let state = self
            .store
            .app_state(AppStateRequest::from(request.into_inner()))
            .await?;
        let reply = pb::GetAppStateResponse {
            state: Some(map_to_struct(state.iter())),
        };
        self.fit_in_message(reply, "the app's state", "keep less in app: state")
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name))]
    async fn update_app_state(
        &self,
        request: Request<pb::UpdateAppStateRequest>,
    ) -> Result<Response<pb::UpdateAppStateResponse>, Status> {
        let update = UpdateAppStateRequest::try_from(request.into_inner())?;
        let state = self.store.update_app_state(update).await?;
        let reply = pb::UpdateAppStateResponse {
            state: Some(map_to_struct(state.iter())),
        };
        self.fit_in_message(reply, "the app's state", "keep less in app: state")
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
    ))]
    async fn list_events(&self, request: Request<pb::ListEventsRequest>) -> Result<Response<ListEventsReply>, Status> {
        let page = self
            .store
            .list_events_encoded(ListEventsRequest::try_from(request.into_inner())?)
            .await?;
        let page_len = page.events.len();
        self.fit_in_message(
            ListEventsReply::from(page),
            format_args!("a page of {page_len} events"),
            "ask for a smaller page_size",
        )
    }

    type WatchSessionStream = EventStream;

    /// The stream ends (OK) when the client goes away (tonic drops it, which drops the
    /// store's watch) or when the server shuts down; a client resumes from the last
    /// sequence it saw. No task is spawned, so nothing outlives the call.
    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
    ))]
    async fn watch_session(
        &self,
        request: Request<pb::WatchSessionRequest>,
    ) -> Result<Response<Self::WatchSessionStream>, Status> {
        let events = self
            .store
            .watch_encoded(WatchRequest::from(request.into_inner()))
            .await?;
        let stream = events
            .map(|event| event.map(EventReply::from).map_err(Status::from))
            .take_until(self.shutdown.triggered());
        Ok(Response::new(stream.boxed()))
    }
}
