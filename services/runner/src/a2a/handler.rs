//! The `lf.a2a.v1.A2AService` handlers over the runner's apps: each finds the app the
//! request's `tenant` names (empty: the server's only app) and the user (the
//! credential's under `--auth required`, else the `x-adk-user-id` metadata, else
//! [`DEFAULT_USER`]), calls the app's [`A2aTaskService`], and maps its errors once.

use super::card::{CardArgs, agent_card};
use crate::app::App;
use adk_grpc_agents::a2a::{A2aTaskService, TaskUpdates};
use adk_grpc_core::{AdkError, ArtifactService, Missing, Result, validate};
use adk_grpc_proto::a2a;
use adk_grpc_proto::a2a::a2a_service_server::{A2aService, A2aServiceServer};
use adk_grpc_server_kit::{GrpcArgs, Principal, Shutdown, Subject};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::collections::BTreeMap;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The user of A2A calls that name none (auth off, or an admin credential without
/// the `x-adk-user-id` metadata).
pub const DEFAULT_USER: &str = "a2a";
/// The metadata naming the user when the credential does not.
pub const USER_HEADER: &str = "x-adk-user-id";

/// The server for `lf.a2a.v1.A2AService` serving `apps` (artifacts read from `artifacts`).
pub fn a2a_service(
    apps: Vec<App>,
    artifacts: Option<Arc<dyn ArtifactService>>,
    card: CardArgs,
    grpc: &GrpcArgs,
    shutdown: Shutdown,
) -> Result<A2aServiceServer<A2aGrpcService>> {
    Ok(
        A2aServiceServer::new(A2aGrpcService::new(apps, artifacts, card, shutdown)?)
            .max_decoding_message_size(grpc.max_message_bytes)
            .max_encoding_message_size(grpc.max_message_bytes),
    )
}

/// The A2A handlers, over any set of apps.
#[derive(Clone)]
pub struct A2aGrpcService {
    apps: Arc<BTreeMap<String, (App, A2aTaskService)>>,
    card: CardArgs,
}

/// Who asks, and which app's agent answers.
struct Caller<'a> {
    app: &'a App,
    agent: &'a A2aTaskService,
    user_id: String,
}

impl A2aGrpcService {
    pub fn new(
        apps: Vec<App>,
        artifacts: Option<Arc<dyn ArtifactService>>,
        card: CardArgs,
        shutdown: Shutdown,
    ) -> Result<Self> {
        let mut by_name = BTreeMap::new();
        for app in apps {
            let name = app.name().to_string();
            let agent = A2aTaskService::new(app.runner().clone(), artifacts.clone())
                .with_wait(card.wait)
                .with_stop(shutdown.token());
            if by_name.insert(name.clone(), (app, agent)).is_some() {
                return Err(AdkError::Config(format!("two apps are named {name}")));
            }
        }
        Ok(A2aGrpcService {
            apps: Arc::new(by_name),
            card,
        })
    }

    /// The app a request's `tenant` names; empty names the only app.
    fn app(&self, tenant: &str) -> Result<&(App, A2aTaskService)> {
        if tenant.is_empty() {
            return match self.apps.values().collect::<Vec<_>>().as_slice() {
                [only] => Ok(only),
                _ => Err(AdkError::invalid_with(
                    "tenant",
                    format!(
                        "tenant is required: this server serves several apps ({}); the agent card of each names its tenant",
                        self.served()
                    ),
                )),
            };
        }
        self.apps.get(tenant).ok_or_else(|| {
            AdkError::NotFound(
                Missing::App,
                format!(
                    "tenant {tenant:?} is not an app served here (served: {})",
                    self.served()
                ),
            )
        })
    }

    fn served(&self) -> String {
        self.apps.keys().cloned().collect::<Vec<_>>().join(", ")
    }

    fn caller<T>(&self, request: &Request<T>, tenant: &str) -> Result<Caller<'_>> {
        let (app, agent) = self.app(tenant)?;
        let header = request
            .metadata()
            .get(USER_HEADER)
            .and_then(|value| value.to_str().ok())
            .filter(|value| !value.is_empty());
        let user_id = match request.extensions().get::<Principal>() {
            // The layer checked the app against the credential when the tenant was named;
            // the only app, reached with an empty tenant, is checked here.
            Some(principal) if !principal.apps.allows(app.name()) => {
                return Err(AdkError::PermissionDenied(format!(
                    "the credential does not grant app {:?}",
                    app.name()
                )));
            }
            Some(Principal {
                subject: Subject::User(own),
                ..
            }) => own.clone(),
            _ => header.unwrap_or(DEFAULT_USER).to_string(),
        };
        validate::id(USER_HEADER, &user_id)?;
        Ok(Caller { app, agent, user_id })
    }
}

type UpdateStream = BoxStream<'static, std::result::Result<a2a::StreamResponse, Status>>;

fn to_status(updates: TaskUpdates) -> UpdateStream {
    updates.map(|update| update.map_err(Status::from)).boxed()
}

fn unsupported_push() -> Status {
    Status::from(AdkError::Unimplemented(
        "push notifications are not supported by this server (its agent cards say capabilities.push_notifications = false)".into(),
    ))
}

#[tonic::async_trait]
impl A2aService for A2aGrpcService {
    type SendStreamingMessageStream = UpdateStream;
    type SubscribeToTaskStream = UpdateStream;

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant))]
    async fn send_message(
        &self,
        request: Request<a2a::SendMessageRequest>,
    ) -> std::result::Result<Response<a2a::SendMessageResponse>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        let task = caller.agent.send_message(&caller.user_id, request.get_ref()).await?;
        Ok(Response::new(a2a::SendMessageResponse {
            payload: Some(a2a::send_message_response::Payload::Task(task)),
        }))
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant))]
    async fn send_streaming_message(
        &self,
        request: Request<a2a::SendMessageRequest>,
    ) -> std::result::Result<Response<Self::SendStreamingMessageStream>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        let updates = caller
            .agent
            .send_streaming_message(&caller.user_id, request.get_ref())
            .await?;
        Ok(Response::new(to_status(updates)))
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant, id = %request.get_ref().id))]
    async fn get_task(
        &self,
        request: Request<a2a::GetTaskRequest>,
    ) -> std::result::Result<Response<a2a::Task>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        Ok(Response::new(
            caller.agent.get_task(&caller.user_id, request.get_ref()).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant))]
    async fn list_tasks(
        &self,
        request: Request<a2a::ListTasksRequest>,
    ) -> std::result::Result<Response<a2a::ListTasksResponse>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        Ok(Response::new(
            caller.agent.list_tasks(&caller.user_id, request.get_ref()).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant, id = %request.get_ref().id))]
    async fn cancel_task(
        &self,
        request: Request<a2a::CancelTaskRequest>,
    ) -> std::result::Result<Response<a2a::Task>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        Ok(Response::new(
            caller.agent.cancel_task(&caller.user_id, request.get_ref()).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant, id = %request.get_ref().id))]
    async fn subscribe_to_task(
        &self,
        request: Request<a2a::SubscribeToTaskRequest>,
    ) -> std::result::Result<Response<Self::SubscribeToTaskStream>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        let updates = caller
            .agent
            .subscribe_to_task(&caller.user_id, request.get_ref())
            .await?;
        Ok(Response::new(to_status(updates)))
    }

    async fn create_task_push_notification_config(
        &self,
        _request: Request<a2a::TaskPushNotificationConfig>,
    ) -> std::result::Result<Response<a2a::TaskPushNotificationConfig>, Status> {
        Err(unsupported_push())
    }

    async fn get_task_push_notification_config(
        &self,
        _request: Request<a2a::GetTaskPushNotificationConfigRequest>,
    ) -> std::result::Result<Response<a2a::TaskPushNotificationConfig>, Status> {
        Err(unsupported_push())
    }

    async fn list_task_push_notification_configs(
        &self,
        _request: Request<a2a::ListTaskPushNotificationConfigsRequest>,
    ) -> std::result::Result<Response<a2a::ListTaskPushNotificationConfigsResponse>, Status> {
        Err(unsupported_push())
    }

    async fn delete_task_push_notification_config(
        &self,
        _request: Request<a2a::DeleteTaskPushNotificationConfigRequest>,
    ) -> std::result::Result<Response<()>, Status> {
        Err(unsupported_push())
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant))]
    async fn get_extended_agent_card(
        &self,
        request: Request<a2a::GetExtendedAgentCardRequest>,
    ) -> std::result::Result<Response<a2a::AgentCard>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        Ok(Response::new(agent_card(caller.app, &self.card)))
    }
}
