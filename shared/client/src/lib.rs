//! Rust clients that implement the ADK core traits over gRPC, so code written
//! against `Arc<dyn SessionService>`, `Arc<dyn ArtifactService>` or
//! `Arc<dyn MemoryService>` runs unchanged against a remote server.
//!
//! ```ignore
//! let sessions: Arc<dyn SessionService> = Arc::new(RemoteSessionService::connect("http://127.0.0.1:50051").await?);
//! let artifacts: Arc<dyn ArtifactService> = Arc::new(RemoteArtifactService::connect("http://127.0.0.1:50052").await?);
//! ```

mod artifact;
mod connect;
mod memory;

pub use artifact::{RemoteArtifactService, UPLOAD_CHUNK_BYTES};
pub use connect::ConnectOptions;
pub use memory::RemoteMemoryService;

use connect::AuthChannel;

use adk_grpc_core::{
    AdkError, AppStateRequest, AppendEventRequest, CreateRequest, DeleteRequest, Event, EventStream, GetRequest,
    ListEventsRequest, ListEventsResponse, ListRequest, ListResponse, Result, ScopeState, Session, SessionService,
    UpdateAppStateRequest, UserStateRequest, WatchRequest,
};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_proto::v1::session_service_server::SERVICE_NAME as SESSION_SERVICE_NAME;
use async_trait::async_trait;
use futures::StreamExt;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// 4 MiB, the servers' default limit (`--max-message-bytes`).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// [`SessionService`] over gRPC: every call goes to an `adk.v1.SessionService`
/// server, and its status comes back as the matching [`AdkError`]. Cheap to clone:
/// clones share one connection.
#[derive(Debug, Clone)]
pub struct RemoteSessionService {
    sessions: SessionServiceClient<AuthChannel>,
    health: HealthClient<AuthChannel>,
}

impl RemoteSessionService {
    crate::connect::remote_constructors!();

    fn from_auth_channel(channel: AuthChannel) -> Self {
        RemoteSessionService {
            sessions: SessionServiceClient::new(channel.clone()),
            health: HealthClient::new(channel),
        }
        .with_max_message_bytes(DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// Largest message sent or accepted; match the server's `--max-message-bytes`.
    pub fn with_max_message_bytes(mut self, max_message_bytes: usize) -> Self {
        self.sessions = self
            .sessions
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes);
        self
    }
}

/// Ok while the server's grpc.health.v1 reports `service` SERVING; UNAVAILABLE while
/// its store is unreachable (or it is shutting down).
pub(crate) async fn check_health(health: &HealthClient<AuthChannel>, service: &str, what: &str) -> Result<()> {
    let request = HealthCheckRequest {
        service: service.to_string(),
    };
    let reply = health.clone().check(request).await?;
    match reply.get_ref().status() {
        ServingStatus::Serving => Ok(()),
        status => Err(AdkError::Unavailable(format!(
            "the {what} reports {}",
            status.as_str_name()
        ))),
    }
}

#[async_trait]
impl SessionService for RemoteSessionService {
    async fn create(&self, req: CreateRequest) -> Result<Session> {
        let reply = self
            .sessions
            .clone()
            .create_session(pb::CreateSessionRequest::from(&req))
            .await?;
        Session::try_from(reply.into_inner())
    }

    async fn get(&self, req: GetRequest) -> Result<Session> {
        let reply = self
            .sessions
            .clone()
            .get_session(pb::GetSessionRequest::from(&req))
            .await?;
        Session::try_from(reply.into_inner())
    }

    async fn fork(&self, req: adk_grpc_core::ForkRequest) -> Result<Session> {
        let reply = self
            .sessions
            .clone()
            .fork_session(pb::ForkSessionRequest::from(&req))
            .await?;
        Session::try_from(reply.into_inner())
    }

    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        let reply = self
            .sessions
            .clone()
            .list_sessions(pb::ListSessionsRequest::from(&req))
            .await?;
        ListResponse::try_from(reply.get_ref())
    }

    async fn delete(&self, req: DeleteRequest) -> Result<()> {
        self.sessions
            .clone()
            .delete_session(pb::DeleteSessionRequest::from(&req))
            .await?;
        Ok(())
    }

    async fn append_event(&self, req: AppendEventRequest) -> Result<Event> {
        let reply = self
            .sessions
            .clone()
            .append_event(pb::AppendEventRequest::from(&req))
            .await?;
        Event::try_from(reply.into_inner())
    }

    async fn list_events(&self, req: ListEventsRequest) -> Result<ListEventsResponse> {
        let reply = self
            .sessions
            .clone()
            .list_events(pb::ListEventsRequest::from(&req))
            .await?;
        ListEventsResponse::try_from(reply.into_inner())
    }

    /// Dropping the stream cancels the call on the server.
    async fn watch(&self, req: WatchRequest) -> Result<EventStream> {
        let events = self
            .sessions
            .clone()
            .watch_session(pb::WatchSessionRequest::from(&req))
            .await?
            .into_inner();
        Ok(events.map(|received| Event::try_from(received?)).boxed())
    }

    async fn user_state(&self, req: UserStateRequest) -> Result<ScopeState> {
        let reply = self
            .sessions
            .clone()
            .get_user_state(pb::GetUserStateRequest::from(&req))
            .await?;
        adk_grpc_core::convert::map_from_struct("state", reply.get_ref().state.as_ref())
    }

    async fn app_state(&self, req: AppStateRequest) -> Result<ScopeState> {
        let reply = self
            .sessions
            .clone()
            .get_app_state(pb::GetAppStateRequest::from(&req))
            .await?;
        adk_grpc_core::convert::map_from_struct("state", reply.get_ref().state.as_ref())
    }

    async fn update_app_state(&self, req: UpdateAppStateRequest) -> Result<ScopeState> {
        let reply = self
            .sessions
            .clone()
            .update_app_state(pb::UpdateAppStateRequest::from(&req))
            .await?;
        adk_grpc_core::convert::map_from_struct("state", reply.get_ref().state.as_ref())
    }

    /// Asks the server's grpc.health.v1 for the session service: Ok while it is
    /// SERVING, UNAVAILABLE while its store is unreachable (or it is shutting down).
    async fn ping(&self) -> Result<()> {
        check_health(&self.health, SESSION_SERVICE_NAME, "session service").await
    }
}
