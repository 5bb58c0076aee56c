//! The `lf.a2a.v1.A2AService` handlers over the runner's apps. Each app is one A2A
//! agent, named by the requests' `tenant` (empty: the server's only app). The user is
//! the credential's (`--auth required`), else the `x-adk-user-id` metadata, else
//! [`DEFAULT_USER`]. Runs go on when the client goes away; what a client streams is
//! read from the session's log, so SubscribeToTask re-attaches without a rerun.

use super::card::{CardArgs, agent_card};
use super::convert::{TaskId, answer_pending, content_from_a2a, message_of_event};
use super::task::{TaskLog, ends_run, outcome_event, recorded_outcome, tasks_of};
use crate::app::App;
use adk_core::artifact::LoadRequest;
use adk_core::{AdkError, ArtifactService, Event, GetRequest, ListRequest, Missing, Result, WatchRequest, validate};
use adk_proto::a2a;
use adk_proto::a2a::a2a_service_server::{A2aService, A2aServiceServer};
use adk_runner::RunOptions;
use adk_server_kit::{GrpcArgs, Principal, Shutdown, Subject};
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
    apps: Arc<BTreeMap<String, App>>,
    artifacts: Option<Arc<dyn ArtifactService>>,
    card: CardArgs,
    shutdown: Shutdown,
}

/// Who asks, and in which app.
struct Caller {
    app: App,
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
            if by_name.insert(name.clone(), app).is_some() {
                return Err(AdkError::Config(format!("two apps are named {name}")));
            }
        }
        Ok(A2aGrpcService {
            apps: Arc::new(by_name),
            artifacts,
            card,
            shutdown,
        })
    }

    /// The app a request's `tenant` names; empty names the only app.
    fn app(&self, tenant: &str) -> Result<App> {
        if tenant.is_empty() {
            return match self.apps.values().collect::<Vec<_>>().as_slice() {
                [only] => Ok((*only).clone()),
                _ => Err(AdkError::invalid_with(
                    "tenant",
                    format!(
                        "tenant is required: this server serves several apps ({}); the agent card of each names its tenant",
                        self.served()
                    ),
                )),
            };
        }
        self.apps.get(tenant).cloned().ok_or_else(|| {
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

    fn caller<T>(&self, request: &Request<T>, tenant: &str) -> Result<Caller> {
        let app = self.app(tenant)?;
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
        Ok(Caller { app, user_id })
    }

    /// The session's log and its tasks.
    async fn read_tasks(&self, caller: &Caller, session_id: &str) -> Result<(Vec<Event>, Vec<TaskLog>)> {
        let session = caller
            .app
            .runner()
            .session_service()
            .get(GetRequest {
                app_name: caller.app.name().to_string(),
                user_id: caller.user_id.clone(),
                session_id: session_id.to_string(),
                ..Default::default()
            })
            .await?;
        let events = session.events.as_slice().to_vec();
        let tasks = tasks_of(session_id, &events);
        Ok((events, tasks))
    }

    async fn find_task(&self, caller: &Caller, id: &TaskId) -> Result<(Vec<Event>, TaskLog)> {
        let not_found = || AdkError::NotFound(Missing::Other, format!("task {id} does not exist"));
        let (events, tasks) = self.read_tasks(caller, &id.session_id).await.map_err(|e| match e {
            AdkError::NotFound(..) => not_found(),
            other => other,
        })?;
        let task = tasks.into_iter().find(|t| t.id == *id).ok_or_else(not_found)?;
        Ok((events, task))
    }

    /// The task's artifacts, each version its runs saved loaded from the artifact store.
    async fn artifacts_of(&self, caller: &Caller, task: &TaskLog) -> Result<Vec<a2a::Artifact>> {
        let mut artifacts = Vec::new();
        for (name, version) in task.artifact_versions() {
            artifacts.push(self.artifact(caller, &task.id, &name, version).await?);
        }
        Ok(artifacts)
    }

    async fn artifact(&self, caller: &Caller, task: &TaskId, name: &str, version: i64) -> Result<a2a::Artifact> {
        let Some(artifacts) = &self.artifacts else {
            return Err(AdkError::FailedPrecondition(
                "the task saved artifacts but this server has no artifact store".into(),
            ));
        };
        let loaded = artifacts
            .load(LoadRequest {
                app_name: caller.app.name().to_string(),
                user_id: caller.user_id.clone(),
                session_id: task.session_id.clone(),
                file_name: name.to_string(),
                version: Some(version),
            })
            .await?;
        let mut part = super::convert::part_to_a2a(&loaded.part).unwrap_or_default();
        part.filename = name.to_string();
        Ok(a2a::Artifact {
            artifact_id: format!("{name}@v{version}"),
            name: name.to_string(),
            parts: vec![part],
            ..Default::default()
        })
    }

    /// Starts the run a message asks for (a new task, or the answer to an
    /// input-required one) and returns its task id and first invocation.
    async fn start(&self, caller: &Caller, request: &a2a::SendMessageRequest) -> Result<(TaskId, String)> {
        let message = request
            .message
            .as_ref()
            .ok_or_else(|| AdkError::invalid("message", "is required"))?;
        let mut content = content_from_a2a(message)?;
        let (task_id, session_id) = if message.task_id.is_empty() {
            let session_id = match message.context_id.as_str() {
                "" => uuid_session_id(),
                given => {
                    validate::id("message.context_id", given)?;
                    given.to_string()
                }
            };
            (None, session_id)
        } else {
            let id = TaskId::parse("message.task_id", &message.task_id)?;
            if !message.context_id.is_empty() && message.context_id != id.session_id {
                return Err(AdkError::invalid_with(
                    "message.context_id",
                    format!(
                        "message.context_id {:?} is not the context of task {id}",
                        message.context_id
                    ),
                ));
            }
            let (_, task) = self.find_task(caller, &id).await?;
            let state = task.state();
            if state != a2a::TaskState::InputRequired {
                return Err(AdkError::FailedPrecondition(format!(
                    "task {id} is {}, not input-required: only an input-required task takes another message",
                    state.as_str_name()
                )));
            }
            content = answer_pending(content, &task.pending_calls());
            let session_id = id.session_id.clone();
            (Some(id), session_id)
        };
        let options = RunOptions {
            create_session_if_missing: true,
            ..Default::default()
        };
        let runner = caller.app.runner().clone();
        let started = runner.start_run(&caller.user_id, &session_id, content, options).await?;
        let invocation_id = started.user_event.invocation_id.clone();
        let task_id = task_id.unwrap_or_else(|| TaskId::new(&session_id, &invocation_id));
        // The run goes on when the client goes away (A2A tasks outlive calls), and records
        // its outcome for whoever reads the task, on any replica.
        let author = runner.root_agent().name().to_string();
        let shutdown = self.shutdown.triggered();
        let sessions = runner.session_service();
        let (app_name, user_id) = (caller.app.name().to_string(), caller.user_id.clone());
        let mut events = started.events;
        let run_invocation = invocation_id.clone();
        let run_session = session_id.clone();
        tokio::spawn(async move {
            tokio::pin!(shutdown);
            let mut last_long_running = false;
            let failure = loop {
                let next = tokio::select! {
                    biased;
                    () = &mut shutdown => break Some(AdkError::Unavailable("the runner shut down".into())),
                    next = events.next() => next,
                };
                match next {
                    None => break None,
                    Some(Ok(event)) => {
                        if !event.is_partial() {
                            last_long_running = !event.long_running_tool_ids.is_empty();
                        }
                    }
                    Some(Err(e)) => break Some(e),
                }
            };
            drop(events);
            let (state, error) = match &failure {
                None if last_long_running => (a2a::TaskState::InputRequired, None),
                None => (a2a::TaskState::Completed, None),
                Some(AdkError::Cancelled(_)) => (a2a::TaskState::Canceled, None),
                Some(e) => (a2a::TaskState::Failed, Some(e.to_string())),
            };
            let outcome = outcome_event(&run_invocation, &author, state, error.as_deref());
            let recorded = sessions
                .append_event(adk_core::AppendEventRequest {
                    timestamp_missing: false,
                    app_name,
                    user_id,
                    session_id: run_session,
                    event: outcome,
                    precondition: None,
                })
                .await;
            if let Err(e) = recorded {
                tracing::warn!(invocation_id = %run_invocation, error = %e, "cannot record the A2A task's outcome");
            }
        });
        Ok((task_id, invocation_id))
    }
}

fn uuid_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

type UpdateStream = BoxStream<'static, std::result::Result<a2a::StreamResponse, Status>>;

fn status_update(task: &TaskId, state: a2a::TaskState, message: Option<a2a::Message>) -> a2a::StreamResponse {
    a2a::StreamResponse {
        payload: Some(a2a::stream_response::Payload::StatusUpdate(
            a2a::TaskStatusUpdateEvent {
                task_id: task.to_string(),
                context_id: task.session_id.clone(),
                status: Some(a2a::TaskStatus {
                    state: state as i32,
                    message,
                    timestamp: Some(adk_core::convert::timestamp_to_proto(chrono_now())),
                }),
                metadata: None,
            },
        )),
    }
}

fn chrono_now() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}

impl A2aGrpcService {
    /// What invocation `invocation_id` of `task` does, read from the session's log
    /// after `after_sequence`: a working status per agent message, an artifact update
    /// per artifact version saved, and the final status when its outcome is recorded.
    fn run_updates(&self, caller: Caller, task: TaskId, invocation_id: String, after_sequence: u64) -> UpdateStream {
        let service = self.clone();
        let shutdown = self.shutdown.triggered();
        async_stream::try_stream! {
            tokio::pin!(shutdown);
            let mut log = caller
                .app
                .runner()
                .session_service()
                .watch(WatchRequest {
                    app_name: caller.app.name().to_string(),
                    user_id: caller.user_id.clone(),
                    session_id: task.session_id.clone(),
                    after_sequence: Some(after_sequence),
                })
                .await
                .map_err(Status::from)?;
            let mut last_message = None;
            loop {
                let next = tokio::select! {
                    biased;
                    () = &mut shutdown => None,
                    next = log.next() => Some(next),
                };
                let Some(next) = next else {
                    Err(Status::from(AdkError::Unavailable(
                        "the server is shutting down; the task goes on: SubscribeToTask again".into(),
                    )))?;
                    break;
                };
                let Some(event) = next else { break };
                let event = event.map_err(Status::from)?;
                if event.invocation_id != invocation_id {
                    continue;
                }
                if let Some(state) = recorded_outcome(&event) {
                    let message = match event.llm_response.custom_metadata.as_ref().and_then(|m| m.get("a2a_error")).and_then(|v| v.as_str()) {
                        Some(error) => Some(super::task::text_message(&task, error)),
                        None => last_message.take(),
                    };
                    yield status_update(&task, state, message);
                    break;
                }
                if event.llm_response.error_code.as_deref() == Some(Event::INTERRUPTED) {
                    yield status_update(&task, a2a::TaskState::Failed, message_of_event(&event, &task));
                    break;
                }
                let mut versions: Vec<(&String, &i64)> = event.actions.artifact_delta.iter().collect();
                versions.sort();
                for (name, version) in versions {
                    let artifact = service.artifact(&caller, &task, name, *version).await.map_err(Status::from)?;
                    yield a2a::StreamResponse {
                        payload: Some(a2a::stream_response::Payload::ArtifactUpdate(a2a::TaskArtifactUpdateEvent {
                            task_id: task.to_string(),
                            context_id: task.session_id.clone(),
                            artifact: Some(artifact),
                            append: false,
                            last_chunk: true,
                            metadata: None,
                        })),
                    };
                }
                if event.author != "user" && let Some(message) = message_of_event(&event, &task) {
                    last_message = Some(message.clone());
                    yield status_update(&task, a2a::TaskState::Working, Some(message));
                }
            }
        }
        .boxed()
    }

    /// The task as stored now, with its artifacts.
    async fn task(&self, caller: &Caller, id: &TaskId, history_length: Option<i32>) -> Result<a2a::Task> {
        let history_length = match history_length {
            Some(n) if n < 0 => {
                return Err(AdkError::invalid_with(
                    "history_length",
                    format!("history_length must not be negative, got {n}"),
                ));
            }
            Some(n) => Some(n as usize),
            None => None,
        };
        let (_, task) = self.find_task(caller, id).await?;
        let artifacts = self.artifacts_of(caller, &task).await?;
        Ok(task.to_a2a(history_length, artifacts))
    }

    /// Waits (reading the log) until the run of `invocation_id` records its outcome.
    async fn wait_for_outcome(
        &self,
        caller: &Caller,
        task: &TaskId,
        invocation_id: &str,
        after_sequence: u64,
    ) -> Result<()> {
        let caller = Caller {
            app: caller.app.clone(),
            user_id: caller.user_id.clone(),
        };
        let mut updates = self.run_updates(caller, task.clone(), invocation_id.to_string(), after_sequence);
        let outcome = async {
            while let Some(update) = updates.next().await {
                update.map_err(|status| AdkError::Internal(status.message().to_string()))?;
            }
            Ok(())
        };
        tokio::time::timeout(self.card.wait, outcome).await.unwrap_or_else(|_| {
            Err(AdkError::DeadlineExceeded(format!(
                "task {task} has not finished within {} s (--a2a-wait-secs); its run goes on: \
                 follow it with GetTask or SubscribeToTask",
                self.card.wait.as_secs()
            )))
        })
    }
}

fn first_sequence_of(events: &[Event], invocation_id: &str) -> u64 {
    events
        .iter()
        .find(|e| e.invocation_id == invocation_id)
        .map_or(0, |e| e.sequence.saturating_sub(1))
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
        let request = request.into_inner();
        let (task_id, invocation_id) = self.start(&caller, &request).await?;
        let return_immediately = request.configuration.as_ref().is_some_and(|c| c.return_immediately);
        let history_length = request.configuration.as_ref().and_then(|c| c.history_length);
        if !return_immediately {
            let (events, _) = self.read_tasks(&caller, &task_id.session_id).await?;
            let after = first_sequence_of(&events, &invocation_id);
            self.wait_for_outcome(&caller, &task_id, &invocation_id, after).await?;
        }
        let task = self.task(&caller, &task_id, history_length).await?;
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
        let request = request.into_inner();
        let (task_id, invocation_id) = self.start(&caller, &request).await?;
        let (events, _) = self.read_tasks(&caller, &task_id.session_id).await?;
        let after = first_sequence_of(&events, &invocation_id);
        // The task first (submitted, or working again when an answer resumes it), then its run.
        let mut task = self.task(&caller, &task_id, None).await?;
        if let Some(status) = task.status.as_mut()
            && !ends_run(a2a::TaskState::try_from(status.state).unwrap_or_default())
        {
            status.state = if task_id.invocation_id == invocation_id {
                a2a::TaskState::Submitted
            } else {
                a2a::TaskState::Working
            } as i32;
        }
        let first = futures::stream::once(async move {
            Ok(a2a::StreamResponse {
                payload: Some(a2a::stream_response::Payload::Task(task)),
            })
        });
        let updates = self.run_updates(caller, task_id, invocation_id, after);
        Ok(Response::new(first.chain(updates).boxed()))
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant, id = %request.get_ref().id))]
    async fn get_task(
        &self,
        request: Request<a2a::GetTaskRequest>,
    ) -> std::result::Result<Response<a2a::Task>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        let id = TaskId::parse("id", &request.get_ref().id)?;
        Ok(Response::new(
            self.task(&caller, &id, request.get_ref().history_length).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant))]
    async fn list_tasks(
        &self,
        request: Request<a2a::ListTasksRequest>,
    ) -> std::result::Result<Response<a2a::ListTasksResponse>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        let request = request.into_inner();
        let page_size = match request.page_size {
            None | Some(0) => 50,
            Some(n) if (1..=100).contains(&n) => n as usize,
            Some(n) => {
                return Err(AdkError::invalid_with("page_size", format!("page_size must be 1-100, got {n}")).into());
            }
        };
        let offset = match request.page_token.as_str() {
            "" => 0,
            token => token.parse::<usize>().map_err(|_| {
                AdkError::invalid_with(
                    "page_token",
                    format!("page_token {token:?} is not one this server returned"),
                )
            })?,
        };
        let filter = a2a::TaskState::try_from(request.status).map_err(|_| {
            AdkError::invalid_with("status", format!("status {} is not a known TaskState", request.status))
        })?;
        let sessions = match request.context_id.as_str() {
            "" => {
                let mut ids = Vec::new();
                let mut token = None;
                loop {
                    let page = caller
                        .app
                        .runner()
                        .session_service()
                        .list(ListRequest {
                            app_name: caller.app.name().to_string(),
                            user_id: Some(caller.user_id.clone()),
                            page_size: 0,
                            page_token: token,
                        })
                        .await?;
                    ids.extend(page.sessions.into_iter().map(|s| s.id));
                    token = page.next_page_token;
                    if token.is_none() {
                        break;
                    }
                }
                ids
            }
            context => {
                validate::id("context_id", context)?;
                vec![context.to_string()]
            }
        };
        let mut tasks = Vec::new();
        for session_id in sessions {
            let (_, found) = match self.read_tasks(&caller, &session_id).await {
                Ok(read) => read,
                Err(AdkError::NotFound(..)) => continue,
                Err(e) => return Err(e.into()),
            };
            tasks.extend(
                found
                    .into_iter()
                    .filter(|task| filter == a2a::TaskState::Unspecified || task.state() == filter),
            );
        }
        // Newest first, as the A2A specification orders ListTasks.
        tasks.sort_by_key(|task| std::cmp::Reverse(task.events.last().map(|e| e.timestamp)));
        let total = tasks.len();
        let include_artifacts = request.include_artifacts.unwrap_or(false);
        let history_length = request.history_length.map(|n| n.max(0) as usize);
        let mut page = Vec::new();
        for task in tasks.iter().skip(offset).take(page_size) {
            let artifacts = if include_artifacts {
                self.artifacts_of(&caller, task).await?
            } else {
                Vec::new()
            };
            page.push(task.to_a2a(history_length, artifacts));
        }
        let next = offset + page.len();
        Ok(Response::new(a2a::ListTasksResponse {
            tasks: page,
            next_page_token: if next < total { next.to_string() } else { String::new() },
            page_size: page_size as i32,
            total_size: total as i32,
        }))
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant, id = %request.get_ref().id))]
    async fn cancel_task(
        &self,
        request: Request<a2a::CancelTaskRequest>,
    ) -> std::result::Result<Response<a2a::Task>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        let id = TaskId::parse("id", &request.get_ref().id)?;
        let (events, task) = self.find_task(&caller, &id).await?;
        let state = task.state();
        let last = task.invocations.last().cloned().unwrap_or_default();
        if ends_run(state) {
            return Err(AdkError::FailedPrecondition(format!(
                "task {id} is {} and cannot be canceled",
                state.as_str_name()
            ))
            .into());
        }
        let cancelled = caller
            .app
            .runner()
            .cancel(&caller.user_id, &id.session_id, &last)
            .await?;
        if cancelled {
            // The run records `canceled` as it stops, on whichever replica runs it.
            self.wait_for_outcome(&caller, &id, &last, first_sequence_of(&events, &last))
                .await?;
        }
        Ok(Response::new(self.task(&caller, &id, None).await?))
    }

    #[tracing::instrument(skip_all, fields(tenant = %request.get_ref().tenant, id = %request.get_ref().id))]
    async fn subscribe_to_task(
        &self,
        request: Request<a2a::SubscribeToTaskRequest>,
    ) -> std::result::Result<Response<Self::SubscribeToTaskStream>, Status> {
        let caller = self.caller(&request, &request.get_ref().tenant)?;
        let id = TaskId::parse("id", &request.get_ref().id)?;
        let (_, log) = self.find_task(&caller, &id).await?;
        let task = self.task(&caller, &id, None).await?;
        let first = futures::stream::once(async move {
            Ok(a2a::StreamResponse {
                payload: Some(a2a::stream_response::Payload::Task(task)),
            })
        });
        if ends_run(log.state()) {
            // Finished (or waiting for input): the task as stored says it all.
            return Ok(Response::new(first.boxed()));
        }
        // Running: what it does next, from the last event read on (no rerun).
        let last_seen = log.events.last().map_or(0, |e| e.sequence);
        let invocation = log.invocations.last().cloned().unwrap_or_default();
        let updates = self.run_updates(caller, id, invocation, last_seen);
        Ok(Response::new(first.chain(updates).boxed()))
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
        Ok(Response::new(agent_card(&caller.app, &self.card)))
    }
}
