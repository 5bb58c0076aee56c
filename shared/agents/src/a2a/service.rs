//! `lf.a2a.v1.A2AService`'s rules over one app: its [`Runner`] and the sessions it runs
//! on. A server's handlers pick the app (the request's tenant) and the user (the
//! credential), then call these methods; every rule of A2A lives here.
//!
//! Runs go on when the client goes away; what a client streams is read from the
//! session's log, so SubscribeToTask re-attaches without a rerun and any replica answers.
//! Reads cost what they return: a task is read from the log's end back to its first
//! message (a [`Region`]), never the whole log, and ListTasks pages with the core's
//! opaque page tokens, reading each page's tasks and no more.

use super::convert::{TaskId, answer_pending, content_from_a2a, message_of_event, part_to_a2a};
use super::task::{
    ERROR_KEY, Region, TaskLog, ends_run, is_message, is_terminal, outcome_event, recorded_outcome, text_message,
};
use crate::runner::{RunOptions, Runner};
use adk_grpc_core::artifact::LoadRequest;
use adk_grpc_core::session::{EventCursor, SessionCursor, decode_page_token, encode_page_token};
use adk_grpc_core::{
    AdkError, AppendEventRequest, ArtifactService, Conflict, Event, ListEventsRequest, ListRequest, Missing,
    Precondition, Result, SessionService, WatchRequest, validate,
};
use adk_grpc_proto::a2a;
use futures::StreamExt;
use futures::stream::BoxStream;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What SendStreamingMessage and SubscribeToTask stream.
pub type TaskUpdates = BoxStream<'static, Result<a2a::StreamResponse>>;

/// The A2A agent of one app. Cheap to clone.
#[derive(Clone)]
pub struct A2aTaskService {
    runner: Arc<Runner>,
    artifacts: Option<Arc<dyn ArtifactService>>,
    wait: Duration,
    stop: CancellationToken,
}

/// A message's run, started: the task it belongs to, its invocation, and the sequence
/// after which its events are stored.
struct Started {
    task: TaskId,
    invocation_id: String,
    after: u64,
}

/// A task found in its session's log, with the sequence of the last event read (the
/// log's end when it was read).
struct Found {
    task: TaskLog,
    last_sequence: u64,
}

impl A2aTaskService {
    /// How long SendMessage and CancelTask wait for a run's outcome unless told otherwise.
    pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);
    /// How many times CancelTask records a cancel against a log that keeps moving.
    const CANCEL_ATTEMPTS: usize = 8;

    /// The A2A agent of `runner`'s app; a task's artifacts are read from `artifacts`.
    pub fn new(runner: Arc<Runner>, artifacts: Option<Arc<dyn ArtifactService>>) -> Self {
        A2aTaskService {
            runner,
            artifacts,
            wait: Self::DEFAULT_WAIT,
            stop: CancellationToken::new(),
        }
    }

    /// How long SendMessage (unless `return_immediately`) and CancelTask wait for a run's
    /// outcome before they answer DEADLINE_EXCEEDED (the run goes on).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Ends runs (recorded failed: the runner shut down) and streams when `stop` fires.
    pub fn with_stop(mut self, stop: CancellationToken) -> Self {
        self.stop = stop;
        self
    }

    pub fn runner(&self) -> &Arc<Runner> {
        &self.runner
    }

    pub fn app_name(&self) -> &str {
        self.runner.app_name()
    }

    fn sessions(&self) -> Arc<dyn SessionService> {
        self.runner.session_service()
    }

    /// SendMessage: starts the run the message asks for (a new task, or the answer to an
    /// input-required one) and, unless `return_immediately`, waits for its outcome.
    pub async fn send_message(&self, user_id: &str, request: &a2a::SendMessageRequest) -> Result<a2a::Task> {
        let configuration = request.configuration.as_ref();
        let history = history_length(
            "configuration.history_length",
            configuration.and_then(|c| c.history_length),
        )?;
        let started = self.start(user_id, request).await?;
        if !configuration.is_some_and(|c| c.return_immediately) {
            self.wait_for_outcome(user_id, &started.task, &started.invocation_id, started.after)
                .await?;
        }
        let found = self.find(user_id, &started.task).await?;
        self.view(user_id, &found.task, history).await
    }

    /// SendStreamingMessage: the task first (submitted, or working again when an answer
    /// resumes it), then what its run does, read from the log.
    pub async fn send_streaming_message(
        &self,
        user_id: &str,
        request: &a2a::SendMessageRequest,
    ) -> Result<TaskUpdates> {
        let started = self.start(user_id, request).await?;
        let found = self.find(user_id, &started.task).await?;
        let mut task = self.view(user_id, &found.task, None).await?;
        if let Some(status) = task.status.as_mut()
            && !ends_run(status.state())
        {
            status.state = if started.task.invocation_id == started.invocation_id {
                a2a::TaskState::Submitted
            } else {
                a2a::TaskState::Working
            } as i32;
        }
        let updates = self.run_updates(user_id, started.task, started.invocation_id, started.after);
        Ok(first_then(task, updates))
    }

    /// GetTask: the task as stored now, with its artifacts.
    pub async fn get_task(&self, user_id: &str, request: &a2a::GetTaskRequest) -> Result<a2a::Task> {
        let id = TaskId::parse("id", &request.id)?;
        let history = history_length("history_length", request.history_length)?;
        let found = self.find(user_id, &id).await?;
        self.view(user_id, &found.task, history).await
    }

    /// CancelTask: a running task's invocation is canceled wherever it runs (the run
    /// records `canceled` as it stops); a task waiting for input (or auth) has no run to
    /// stop and is recorded canceled at once. A task in a terminal state is
    /// FAILED_PRECONDITION.
    pub async fn cancel_task(&self, user_id: &str, request: &a2a::CancelTaskRequest) -> Result<a2a::Task> {
        let id = TaskId::parse("id", &request.id)?;
        for _ in 0..Self::CANCEL_ATTEMPTS {
            let found = self.find(user_id, &id).await?;
            let state = found.task.state();
            if is_terminal(state) {
                return Err(AdkError::FailedPrecondition(format!(
                    "task {id} is {} and cannot be canceled: it has ended",
                    state.as_str_name()
                )));
            }
            let last = found.task.last_invocation().to_string();
            if ends_run(state) {
                // Recorded only if nothing was appended since the read: an answer that
                // resumed the task meanwhile has a run to cancel instead.
                let author = self.runner.root_agent().name().to_string();
                let canceled = outcome_event(&last, &author, a2a::TaskState::Canceled, None);
                match self
                    .append(user_id, &id.session_id, canceled, Some(found.last_sequence))
                    .await
                {
                    Ok(_) => {}
                    Err(AdkError::Aborted(Conflict::Precondition, _)) => continue,
                    Err(e) => return Err(e),
                }
            } else if self.runner.cancel(user_id, &id.session_id, &last).await? {
                // The run records `canceled` as it stops, on whichever replica runs it.
                self.wait_for_outcome(user_id, &id, &last, found.task.before_last_run())
                    .await?;
            }
            let found = self.find(user_id, &id).await?;
            return self.view(user_id, &found.task, None).await;
        }
        Err(AdkError::Aborted(
            Conflict::Other,
            format!("the context of task {id} kept changing while it was being canceled; try again"),
        ))
    }

    /// SubscribeToTask: the task, then (while it runs) its updates from the log.
    pub async fn subscribe_to_task(&self, user_id: &str, request: &a2a::SubscribeToTaskRequest) -> Result<TaskUpdates> {
        let id = TaskId::parse("id", &request.id)?;
        let found = self.find(user_id, &id).await?;
        let task = self.view(user_id, &found.task, None).await?;
        if ends_run(found.task.state()) {
            // Finished (or waiting for input): the task as stored says it all.
            return Ok(futures::stream::once(async move { Ok(task_update(task)) }).boxed());
        }
        // Running: what it does next, from the last event read on (no rerun).
        let invocation = found.task.last_invocation().to_string();
        let updates = self.run_updates(user_id, id, invocation, found.last_sequence);
        Ok(first_then(task, updates))
    }

    /// Appends `event` to the user's session, after `last_sequence` when given.
    async fn append(&self, user_id: &str, session_id: &str, event: Event, last_sequence: Option<u64>) -> Result<Event> {
        self.sessions()
            .append_event(AppendEventRequest {
                app_name: self.app_name().to_string(),
                user_id: user_id.to_string(),
                session_id: session_id.to_string(),
                event,
                timestamp_missing: false,
                precondition: last_sequence.map(Precondition::LastSequence),
            })
            .await
    }

    /// The task `id` names, read from its session's end back to its first message.
    async fn find(&self, user_id: &str, id: &TaskId) -> Result<Found> {
        let not_found = || AdkError::NotFound(Missing::Other, format!("task {id} does not exist"));
        let mut tail = Tail::new(self.sessions(), self.app_name(), user_id, &id.session_id, None);
        loop {
            tail.read_more().await.map_err(|e| match e {
                AdkError::NotFound(..) => not_found(),
                other => other,
            })?;
            let region = &tail.region;
            let message = region
                .events
                .iter()
                .find(|e| e.invocation_id == id.invocation_id && is_message(e))
                .map(|e| e.sequence);
            if message.is_none() && !region.at_start {
                continue;
            }
            let tasks = region.tasks(&id.session_id);
            let unplaced = message.is_some_and(|sequence| tasks.unplaced.contains(&sequence));
            if let Some(task) = tasks.tasks.into_iter().find(|task| task.id == *id) {
                return Ok(Found {
                    task,
                    last_sequence: region.top(),
                });
            }
            // Its message answers calls made further back: only a longer read tells whose.
            if !unplaced || region.at_start {
                return Err(not_found());
            }
        }
    }

    /// The task as A2A shows it, with its artifacts.
    async fn view(&self, user_id: &str, task: &TaskLog, history: Option<usize>) -> Result<a2a::Task> {
        let mut artifacts = Vec::new();
        for (name, version) in task.artifact_versions() {
            artifacts.push(self.artifact(user_id, &task.id, &name, version).await?);
        }
        Ok(task.to_a2a(history, artifacts))
    }

    async fn artifact(&self, user_id: &str, task: &TaskId, name: &str, version: i64) -> Result<a2a::Artifact> {
        let Some(artifacts) = &self.artifacts else {
            return Err(AdkError::FailedPrecondition(
                "the task saved artifacts but this server has no artifact store".into(),
            ));
        };
        let loaded = artifacts
            .load(LoadRequest {
                app_name: self.app_name().to_string(),
                user_id: user_id.to_string(),
                session_id: task.session_id.clone(),
                file_name: name.to_string(),
                version: Some(version),
            })
            .await?;
        let mut part = part_to_a2a(&loaded.part).unwrap_or_default();
        part.filename = name.to_string();
        Ok(a2a::Artifact {
            artifact_id: format!("{name}@v{version}"),
            name: name.to_string(),
            parts: vec![part],
            ..Default::default()
        })
    }

    /// Starts the run a message asks for and records its outcome when it ends.
    async fn start(&self, user_id: &str, request: &a2a::SendMessageRequest) -> Result<Started> {
        let message = request
            .message
            .as_ref()
            .ok_or_else(|| AdkError::invalid("message", "is required"))?;
        let mut content = content_from_a2a(message)?;
        let (task, session_id) = if message.task_id.is_empty() {
            let session_id = match message.context_id.as_str() {
                "" => uuid::Uuid::new_v4().to_string(),
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
            let found = self.find(user_id, &id).await?;
            let state = found.task.state();
            if state != a2a::TaskState::InputRequired {
                return Err(AdkError::FailedPrecondition(format!(
                    "task {id} is {}, not input-required: only an input-required task takes another message",
                    state.as_str_name()
                )));
            }
            content = answer_pending(content, &found.task.pending_calls());
            let session_id = id.session_id.clone();
            (Some(id), session_id)
        };
        let options = RunOptions {
            create_session_if_missing: true,
            ..Default::default()
        };
        let started = self.runner.start_run(user_id, &session_id, content, options).await?;
        let invocation_id = started.user_event.invocation_id.clone();
        let after = started.user_event.sequence.saturating_sub(1);
        let task = task.unwrap_or_else(|| TaskId::new(&session_id, &invocation_id));
        self.record_outcome(user_id, &session_id, &invocation_id, started.events);
        Ok(Started {
            task,
            invocation_id,
            after,
        })
    }

    /// Drives a run to its end and appends its outcome, for whoever reads the task on any
    /// replica: the run goes on when the client goes away (A2A tasks outlive calls).
    fn record_outcome(
        &self,
        user_id: &str,
        session_id: &str,
        invocation_id: &str,
        mut events: adk_grpc_core::EventStream,
    ) {
        let service = self.clone();
        let (user_id, session_id, invocation_id) =
            (user_id.to_string(), session_id.to_string(), invocation_id.to_string());
        tokio::spawn(async move {
            let mut last_long_running = false;
            let failure = loop {
                let next = tokio::select! {
                    biased;
                    () = service.stop.cancelled() => break Some(AdkError::Unavailable("the runner shut down".into())),
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
            let author = service.runner.root_agent().name().to_string();
            let outcome = outcome_event(&invocation_id, &author, state, error.as_deref());
            if let Err(e) = service.append(&user_id, &session_id, outcome, None).await {
                tracing::warn!(%invocation_id, error = %e, "cannot record the A2A task's outcome");
            }
        });
    }

    /// The stored events of the user's session after `after_sequence`, then live ones.
    async fn watch(&self, user_id: &str, session_id: &str, after_sequence: u64) -> Result<adk_grpc_core::EventStream> {
        self.sessions()
            .watch(WatchRequest {
                app_name: self.app_name().to_string(),
                user_id: user_id.to_string(),
                session_id: session_id.to_string(),
                after_sequence: Some(after_sequence),
            })
            .await
    }

    /// What invocation `invocation_id` of `task` does, read from the session's log after
    /// `after_sequence`: a working status per agent message, an artifact update per
    /// artifact version saved, and the final status when its outcome is recorded.
    fn run_updates(&self, user_id: &str, task: TaskId, invocation_id: String, after_sequence: u64) -> TaskUpdates {
        let service = self.clone();
        let user_id = user_id.to_string();
        async_stream::try_stream! {
            let mut log = service.watch(&user_id, &task.session_id, after_sequence).await?;
            let mut last_message: Option<a2a::Message> = None;
            loop {
                let next = tokio::select! {
                    biased;
                    () = service.stop.cancelled() => None,
                    next = log.next() => next,
                };
                let Some(event) = next else { break };
                let event = event?;
                if event.invocation_id != invocation_id {
                    continue;
                }
                if let Some(state) = recorded_outcome(&event) {
                    let error = event.llm_response.custom_metadata.as_ref().and_then(|m| m.get(ERROR_KEY)).and_then(|v| v.as_str());
                    let message = match error {
                        Some(error) => Some(text_message(&task, error)),
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
                    let artifact = service.artifact(&user_id, &task, name, *version).await?;
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
                if event.author != crate::rules::USER_AUTHOR && let Some(message) = message_of_event(&event, &task) {
                    last_message = Some(message.clone());
                    yield status_update(&task, a2a::TaskState::Working, Some(message));
                }
            }
        }
        .boxed()
    }

    /// Waits (reading the log after `after_sequence`) until the run of `invocation_id`
    /// records its outcome or is closed as interrupted, at most the configured wait.
    async fn wait_for_outcome(
        &self,
        user_id: &str,
        task: &TaskId,
        invocation_id: &str,
        after_sequence: u64,
    ) -> Result<()> {
        let outcome = async {
            let mut log = self.watch(user_id, &task.session_id, after_sequence).await?;
            while let Some(event) = log.next().await {
                let event = event?;
                if event.invocation_id == invocation_id
                    && (recorded_outcome(&event).is_some()
                        || event.llm_response.error_code.as_deref() == Some(Event::INTERRUPTED))
                {
                    return Ok(());
                }
            }
            Ok(())
        };
        tokio::time::timeout(self.wait, outcome).await.unwrap_or_else(|_| {
            Err(AdkError::DeadlineExceeded(format!(
                "task {task} has not finished within {} s (--a2a-wait-secs); its run goes on: \
                 follow it with GetTask or SubscribeToTask",
                self.wait.as_secs()
            )))
        })
    }
}

/// `field` as a number of history messages: None for all, INVALID_ARGUMENT when negative.
fn history_length(field: &str, requested: Option<i32>) -> Result<Option<usize>> {
    match requested {
        Some(n) if n < 0 => Err(AdkError::invalid_with(
            field,
            format!("{field} must not be negative, got {n}"),
        )),
        Some(n) => Ok(Some(n as usize)),
        None => Ok(None),
    }
}

fn task_update(task: a2a::Task) -> a2a::StreamResponse {
    a2a::StreamResponse {
        payload: Some(a2a::stream_response::Payload::Task(task)),
    }
}

fn first_then(task: a2a::Task, updates: TaskUpdates) -> TaskUpdates {
    futures::stream::once(async move { Ok(task_update(task)) })
        .chain(updates)
        .boxed()
}

fn status_update(task: &TaskId, state: a2a::TaskState, message: Option<a2a::Message>) -> a2a::StreamResponse {
    a2a::StreamResponse {
        payload: Some(a2a::stream_response::Payload::StatusUpdate(
            a2a::TaskStatusUpdateEvent {
                task_id: task.to_string(),
                context_id: task.session_id.clone(),
                status: Some(a2a::TaskStatus {
                    state: state as i32,
                    message,
                    timestamp: Some(adk_grpc_core::convert::timestamp_to_proto(chrono::Utc::now())),
                }),
                metadata: None,
            },
        )),
    }
}

// ---------- reading logs back from their end ----------

/// A session's log read newest first into a [`Region`], a page at a time, each page
/// twice the last: a reader that stops at an event `k` back has read fewer than `2k + 8`.
struct Tail {
    sessions: Arc<dyn SessionService>,
    request: ListEventsRequest,
    region: Region,
    page: usize,
    /// Events read so far (ListTasks' budget).
    read: usize,
}

impl Tail {
    const FIRST_PAGE: usize = 8;

    /// The session's log from its last event down, or with `from` = (top, above) from
    /// event `top` down, events above it being known to exist when `above`.
    fn new(
        sessions: Arc<dyn SessionService>,
        app_name: &str,
        user_id: &str,
        session_id: &str,
        from: Option<(u64, bool)>,
    ) -> Tail {
        let mut request = ListEventsRequest {
            app_name: app_name.to_string(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            page_size: Self::FIRST_PAGE,
            page_token: None,
            newest_first: true,
        };
        let mut region = Region::default();
        if let Some((top, above)) = from {
            // The core's own cursor: the events before `top + 1`, newest first.
            let cursor = EventCursor {
                sequence: top + 1,
                newest_first: true,
            };
            request.page_token = Some(cursor.encode(&request));
            region.above = above;
        }
        Tail {
            sessions,
            request,
            region,
            page: Self::FIRST_PAGE,
            read: 0,
        }
    }

    /// Reads the next page back, unless the region reached the log's first event.
    async fn read_more(&mut self) -> Result<()> {
        if self.region.at_start {
            return Ok(());
        }
        self.request.page_size = self.page;
        let page = self.sessions.list_events(self.request.clone()).await?;
        self.page = (self.page * 2).min(validate::MAX_PAGE_SIZE);
        self.read += page.events.len();
        let mut events = page.events;
        events.reverse();
        events.append(&mut self.region.events);
        self.region.events = events;
        match page.next_page_token {
            Some(token) => self.request.page_token = Some(token),
            None => self.region.at_start = true,
        }
        Ok(())
    }
}

// ---------- ListTasks ----------

/// Where a context's listing goes on: the tasks that start before event `below`; the
/// reader reads from event `top` down (events of older tasks may lie above `below`),
/// and events exist above `top` when `above`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Within {
    below: u64,
    top: u64,
    above: bool,
}

/// A ListTasks page token's position: the tasks returned before; in a listing of all the
/// user's contexts, the context being read (its place in the session listing); and where
/// in that context to go on (None: after it).
#[derive(Debug, Clone, PartialEq)]
struct ListCursor {
    returned: u64,
    within: Option<Within>,
    context: Option<SessionCursor>,
}

/// One context's part of a page.
struct ContextPage {
    tasks: Vec<TaskLog>,
    /// Where the context goes on; None when every task of it was listed.
    next: Option<Within>,
}

impl A2aTaskService {
    /// ListTasks pages hold 50 tasks unless asked otherwise, at most 100.
    const DEFAULT_LIST_PAGE: usize = 50;
    const MAX_LIST_PAGE: usize = 100;
    /// Events one ListTasks call reads before it answers with what it found so far (a
    /// short page and a token): a status filter matching little reads no whole log.
    const LIST_READ_BUDGET: usize = 2_000;
    const TOKEN_KIND: &'static str = "a2a-tasks";

    /// ListTasks: a context's tasks newest first (by their first message); without a
    /// context, the user's contexts in ListSessions order (least recently updated first),
    /// each context's tasks newest first. A page reads its own tasks (and the events
    /// after the oldest of them) and no more; `total_size` counts the tasks listed so far
    /// through this page, the total on the last page.
    pub async fn list_tasks(&self, user_id: &str, request: &a2a::ListTasksRequest) -> Result<a2a::ListTasksResponse> {
        let page_size = match request.page_size {
            None | Some(0) => Self::DEFAULT_LIST_PAGE,
            Some(n) if (1..=Self::MAX_LIST_PAGE as i32).contains(&n) => n as usize,
            Some(n) => {
                return Err(AdkError::invalid_with(
                    "page_size",
                    format!("page_size must be 1-{}, got {n}", Self::MAX_LIST_PAGE),
                ));
            }
        };
        let filter = a2a::TaskState::try_from(request.status).map_err(|_| {
            AdkError::invalid_with("status", format!("status {} is not a known TaskState", request.status))
        })?;
        let history = request.history_length.map(|n| n.max(0) as usize);
        if !request.context_id.is_empty() {
            validate::id("context_id", &request.context_id)?;
        }
        let status = request.status.to_string();
        let listing = [self.app_name(), user_id, request.context_id.as_str(), status.as_str()];
        let cursor = match request.page_token.as_str() {
            "" => None,
            token => Some(self.decode_cursor(token, &listing, user_id, &request.context_id)?),
        };
        let returned = cursor.as_ref().map_or(0, |c| c.returned);
        let mut budget = 0;
        let (tasks, next) = match request.context_id.as_str() {
            "" => {
                self.list_contexts(user_id, filter, page_size, cursor, &mut budget)
                    .await?
            }
            context => {
                let within = cursor.and_then(|c| c.within);
                let page = self
                    .list_context(user_id, context, within, page_size, filter, &mut budget)
                    .await?;
                let next = page.next.map(|within| ListCursor {
                    returned: 0,
                    within: Some(within),
                    context: None,
                });
                (page.tasks, next)
            }
        };
        let include_artifacts = request.include_artifacts.unwrap_or(false);
        let mut page = Vec::with_capacity(tasks.len());
        for task in &tasks {
            page.push(match include_artifacts {
                true => self.view(user_id, task, history).await?,
                false => task.to_a2a(history, Vec::new()),
            });
        }
        let total = returned.saturating_add(page.len() as u64);
        let next_page_token = next
            .map(|cursor| {
                let cursor = ListCursor {
                    returned: total,
                    ..cursor
                };
                self.encode_cursor(&cursor, &listing, user_id)
            })
            .unwrap_or_default();
        Ok(a2a::ListTasksResponse {
            tasks: page,
            next_page_token,
            page_size: page_size as i32,
            total_size: i32::try_from(total).unwrap_or(i32::MAX),
        })
    }

    /// The tasks of one context that start before `from.below` (all when None), newest
    /// first: up to `need` of those in state `filter` (any when unspecified), read back
    /// from the log's end (or `from.top`) until one more is found, the log's start, or
    /// the read budget. A context that does not exist has none.
    async fn list_context(
        &self,
        user_id: &str,
        session_id: &str,
        from: Option<Within>,
        need: usize,
        filter: a2a::TaskState,
        budget: &mut usize,
    ) -> Result<ContextPage> {
        let below = from.map_or(u64::MAX, |within| within.below);
        let matches = |task: &TaskLog| filter == a2a::TaskState::Unspecified || task.state() == filter;
        let mut tail = Tail::new(
            self.sessions(),
            self.app_name(),
            user_id,
            session_id,
            from.map(|within| (within.top, within.above)),
        );
        loop {
            let before = tail.read;
            match tail.read_more().await {
                // No such context (or it expired since it was listed): no tasks.
                Err(AdkError::NotFound(..)) => {
                    return Ok(ContextPage {
                        tasks: Vec::new(),
                        next: None,
                    });
                }
                read => read?,
            }
            *budget += tail.read - before + 1;
            let found = tail.region.tasks(session_id);
            let mut candidates: Vec<&TaskLog> = found.tasks.iter().filter(|task| task.start() < below).collect();
            candidates.sort_by_key(|task| std::cmp::Reverse(task.start()));
            let matching: Vec<&TaskLog> = candidates.iter().copied().filter(|task| matches(task)).collect();
            let spent = *budget >= Self::LIST_READ_BUDGET && !candidates.is_empty();
            if matching.len() <= need && !tail.region.at_start && !spent {
                continue;
            }
            let tasks: Vec<TaskLog> = matching.iter().take(need).map(|task| (*task).clone()).collect();
            if matching.len() <= need && tail.region.at_start {
                return Ok(ContextPage { tasks, next: None });
            }
            // Go on below the last task listed, or (a short page) below every task examined.
            let below = match (matching.len() > need, tasks.last(), candidates.last().copied()) {
                (true, Some(last), _) | (false, _, Some(last)) => last.start(),
                _ => below,
            };
            let top = found.reach_below(below);
            let above = top < tail.region.top() || tail.region.above;
            return Ok(ContextPage {
                tasks,
                next: Some(Within { below, top, above }),
            });
        }
    }

    /// The tasks of the user's contexts, context after context in ListSessions order,
    /// from where `cursor` says.
    async fn list_contexts(
        &self,
        user_id: &str,
        filter: a2a::TaskState,
        need: usize,
        cursor: Option<ListCursor>,
        budget: &mut usize,
    ) -> Result<(Vec<TaskLog>, Option<ListCursor>)> {
        let listing = self.session_listing(user_id);
        let mut tasks = Vec::new();
        let mut after = None;
        if let Some(ListCursor {
            context: Some(context),
            within,
            ..
        }) = cursor
        {
            if let Some(within) = within {
                // Finish the context the last page stopped in.
                let (_, session_id) = SessionCursor::ids_of_member(&listing, &context.member)
                    .ok_or_else(|| AdkError::Internal("a decoded page token names no session".into()))?;
                let page = self
                    .list_context(user_id, &session_id, Some(within), need, filter, budget)
                    .await?;
                tasks.extend(page.tasks);
                if let Some(next) = page.next {
                    return Ok((tasks, Some(context_cursor(context, Some(next)))));
                }
            }
            after = Some(context);
        }
        loop {
            let listed = self
                .sessions()
                .list(ListRequest {
                    page_token: after.as_ref().map(|position| position.encode(&listing)),
                    ..listing.clone()
                })
                .await?;
            for session in listed.sessions {
                if tasks.len() == need || *budget >= Self::LIST_READ_BUDGET {
                    return Ok((tasks, after.map(|position| context_cursor(position, None))));
                }
                let position = SessionCursor {
                    update_micros: session.last_update_time.timestamp_micros(),
                    member: SessionCursor::member(&listing, user_id, &session.id),
                };
                let page = self
                    .list_context(user_id, &session.id, None, need - tasks.len(), filter, budget)
                    .await?;
                tasks.extend(page.tasks);
                if let Some(next) = page.next {
                    return Ok((tasks, Some(context_cursor(position, Some(next)))));
                }
                after = Some(position);
            }
            if listed.next_page_token.is_none() {
                return Ok((tasks, None));
            }
        }
    }

    fn session_listing(&self, user_id: &str) -> ListRequest {
        ListRequest {
            app_name: self.app_name().to_string(),
            user_id: Some(user_id.to_string()),
            page_size: 20,
            page_token: None,
        }
    }

    /// `<returned>.<below>.<top>.<above>`, then `.<the context's session listing token>`
    /// in a listing of all contexts; `below` 0 when the context is done.
    fn encode_cursor(&self, cursor: &ListCursor, listing: &[&str], user_id: &str) -> String {
        let within = cursor.within.unwrap_or(Within {
            below: 0,
            top: 0,
            above: false,
        });
        let mut position = format!(
            "{}.{}.{}.{}",
            cursor.returned,
            within.below,
            within.top,
            u8::from(within.above)
        );
        if let Some(context) = &cursor.context {
            position.push('.');
            position.push_str(&context.encode(&self.session_listing(user_id)));
        }
        encode_page_token(Self::TOKEN_KIND, listing, &position)
    }

    /// The position of a token this listing issued; INVALID_ARGUMENT naming `page_token`
    /// for any other.
    fn decode_cursor(&self, token: &str, listing: &[&str], user_id: &str, context_id: &str) -> Result<ListCursor> {
        let position = decode_page_token(token, Self::TOKEN_KIND, listing)?;
        let bad = |why: &str| {
            AdkError::invalid(
                "page_token",
                format!("is malformed ({why}); pass the next_page_token of a previous response"),
            )
        };
        let fields: Vec<&str> = position.splitn(5, '.').collect();
        let number = |i: usize| -> Result<u64> {
            fields
                .get(i)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| bad("bad position"))
        };
        let (returned, below, top, above) = (number(0)?, number(1)?, number(2)?, number(3)?);
        if above > 1 || top < below || top >= validate::MAX_SEQUENCE {
            return Err(bad("bad position"));
        }
        let within = (below > 0).then_some(Within {
            below,
            top,
            above: above == 1,
        });
        let context = match (context_id, fields.get(4)) {
            ("", Some(sessions)) => Some(SessionCursor::decode(sessions, &self.session_listing(user_id))?),
            ("", None) => return Err(bad("no context")),
            (_, None) if within.is_some() => None,
            _ => return Err(bad("bad position")),
        };
        Ok(ListCursor {
            returned,
            within,
            context,
        })
    }
}

fn context_cursor(context: SessionCursor, within: Option<Within>) -> ListCursor {
    ListCursor {
        returned: 0,
        within,
        context: Some(context),
    }
}
