//! The `adk.v1.AgentRunner` handlers: find the app, convert the request with
//! the core's and the runner library's conversions, call the [`Runner`](adk_grpc_agents::Runner), stream its
//! events. Errors go through the one `AdkError` → `Status` mapping.

use crate::app::App;
use adk_grpc_agents::RunRequest;
use adk_grpc_core::{AdkError, validate};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_server::{AgentRunner, AgentRunnerServer};
use adk_grpc_server_kit::{GrpcArgs, Shutdown, message_too_large};
use futures::StreamExt;
use futures::stream::BoxStream;
use prost::Message;
use std::collections::BTreeMap;
use tonic::{Request, Response, Status};

/// The server for `adk.v1.AgentRunner` serving `apps`, with the message size
/// limits of `grpc`; running invocations stop when `shutdown` fires. Fails when
/// two apps share a name.
pub fn runner_service(
    apps: Vec<App>,
    grpc: &GrpcArgs,
    shutdown: Shutdown,
) -> adk_grpc_core::Result<AgentRunnerServer<RunnerGrpcService>> {
    Ok(
        AgentRunnerServer::new(RunnerGrpcService::new(apps, grpc.max_message_bytes, shutdown)?)
            .max_decoding_message_size(grpc.max_message_bytes)
            .max_encoding_message_size(grpc.max_message_bytes),
    )
}

/// The handlers, over any set of apps.
pub struct RunnerGrpcService {
    /// By name, so ListApps is sorted.
    apps: BTreeMap<String, App>,
    /// An event larger than this ends its stream with a status that says so,
    /// rather than with the encoder's opaque error.
    max_message_bytes: usize,
    shutdown: Shutdown,
}

impl RunnerGrpcService {
    pub fn new(apps: Vec<App>, max_message_bytes: usize, shutdown: Shutdown) -> adk_grpc_core::Result<Self> {
        let mut by_name = BTreeMap::new();
        for app in apps {
            let name = app.name().to_string();
            if by_name.insert(name.clone(), app).is_some() {
                return Err(AdkError::Config(format!("two apps are named {name}")));
            }
        }
        Ok(RunnerGrpcService {
            apps: by_name,
            max_message_bytes,
            shutdown,
        })
    }

    fn app(&self, app_name: &str) -> Result<&App, AdkError> {
        validate::id("app_name", app_name)?;
        self.apps.get(app_name).ok_or_else(|| {
            let served: Vec<&str> = self.apps.keys().map(String::as_str).collect();
            AdkError::NotFound(
                adk_grpc_core::Missing::App,
                format!("app {app_name} is not served here (served: {})", served.join(", ")),
            )
        })
    }
}

type EventStream = BoxStream<'static, Result<pb::Event, Status>>;

#[tonic::async_trait]
impl AgentRunner for RunnerGrpcService {
    type RunStream = EventStream;

    /// Streams the user's event as stored, then the invocation's events. Unless the
    /// request says `keep_running`, no task is spawned: the stream owns the
    /// invocation, so a client that goes away (tonic drops the stream) stops the
    /// agent and its model request, and frees the session.
    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
    ))]
    async fn run(&self, request: Request<pb::RunRequest>) -> Result<Response<Self::RunStream>, Status> {
        let request = request.into_inner();
        let app = self.app(&request.app_name)?;
        let request = RunRequest::try_from(request)?;
        let started = app
            .runner()
            .start_run(
                &request.user_id,
                &request.session_id,
                request.new_message,
                request.options,
            )
            .await?;
        let events = if request.keep_running {
            keep_running(started.events, self.shutdown.triggered())
        } else {
            started.events
        };
        // The stored user event first: the client has the invocation id (to cancel
        // it) and the sequence (to re-attach after it) before the model answers.
        let user_event = started.user_event;
        let mut events = futures::stream::once(async move { Ok(user_event) })
            .chain(events)
            .boxed();
        let limit = self.max_message_bytes;
        let shutdown = self.shutdown.triggered();
        let stream = async_stream::stream! {
            tokio::pin!(shutdown);
            let mut invocation_id = String::new();
            loop {
                let next = tokio::select! {
                    biased;
                    () = &mut shutdown => {
                        // Dropping `events` (when this stream ends) stops the invocation.
                        let which = match invocation_id.as_str() {
                            "" => "the invocation".to_string(),
                            id => format!("invocation {id}"),
                        };
                        yield Err(Status::from(AdkError::Unavailable(format!(
                            "the runner is shutting down: {which} was stopped; events stored so far stay in the \
                             session, run again to continue"
                        ))));
                        break;
                    }
                    next = events.next() => next,
                };
                match next {
                    None => break,
                    Some(Err(e)) => {
                        tracing::debug!(%invocation_id, error = %e, "invocation ended with an error");
                        yield Err(Status::from(e));
                        break;
                    }
                    Some(Ok(event)) => {
                        invocation_id.clone_from(&event.invocation_id);
                        let event = pb::Event::from(&event);
                        let size = event.encoded_len();
                        if size > limit {
                            let what = format!("event {} of invocation {invocation_id}", event.id);
                            let stored = if event.partial == Some(true) { "it was not stored" } else { "it is stored in the session" };
                            yield Err(message_too_large(
                                what,
                                size as u64,
                                limit,
                                &format!("{stored}; raise --max-message-bytes on the server and in the client"),
                            ));
                            break;
                        }
                        yield Ok(event);
                    }
                }
            }
        };
        Ok(Response::new(stream.boxed()))
    }

    #[tracing::instrument(skip_all)]
    async fn list_apps(
        &self,
        _request: Request<pb::ListAppsRequest>,
    ) -> Result<Response<pb::ListAppsResponse>, Status> {
        Ok(Response::new(pb::ListAppsResponse {
            apps: self.apps.values().map(pb::App::from).collect(),
        }))
    }

    #[tracing::instrument(skip_all, fields(app = %request.get_ref().app_name))]
    async fn get_app(&self, request: Request<pb::GetAppRequest>) -> Result<Response<pb::App>, Status> {
        let app = self.app(&request.get_ref().app_name)?;
        Ok(Response::new(pb::App::from(app)))
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
        invocation = %request.get_ref().invocation_id,
    ))]
    async fn cancel(&self, request: Request<pb::CancelRequest>) -> Result<Response<pb::CancelResponse>, Status> {
        let request = request.into_inner();
        validate::session_ids(&request.app_name, &request.user_id, &request.session_id)?;
        let app = self.app(&request.app_name)?;
        // Only an invocation running on the named session is cancelled, on whichever replica.
        let cancelled = app
            .runner()
            .cancel(&request.user_id, &request.session_id, &request.invocation_id)
            .await?;
        Ok(Response::new(pb::CancelResponse { cancelled }))
    }

    #[tracing::instrument(skip_all, fields(
        app = %request.get_ref().app_name, user = %request.get_ref().user_id, session = %request.get_ref().session_id,
        invocation = %request.get_ref().rewind_before_invocation_id,
    ))]
    async fn rewind(&self, request: Request<pb::RewindRequest>) -> Result<Response<pb::Event>, Status> {
        let request = request.into_inner();
        validate::session_ids(&request.app_name, &request.user_id, &request.session_id)?;
        let app = self.app(&request.app_name)?;
        let event = app
            .runner()
            .rewind(
                &request.user_id,
                &request.session_id,
                &request.rewind_before_invocation_id,
            )
            .await?;
        Ok(Response::new(pb::Event::from(&event)))
    }
}

/// Runs the invocation in a task of its own, so that it continues when the client
/// goes away: `events` are forwarded while the client listens and drained after.
/// The invocation stops when the runner shuts down (`shutdown`): its stored events
/// stay and its lease is released. `adk-runner-server` fires `shutdown` only after its
/// runs had the grace period and those still going were handed over (main.rs).
fn keep_running(
    mut events: adk_grpc_core::EventStream,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> adk_grpc_core::EventStream {
    // A few events of slack; beyond that a slow client slows the invocation, as
    // when the stream owns it.
    let (sender, receiver) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        tokio::pin!(shutdown);
        let mut attached = true;
        loop {
            let next = tokio::select! {
                biased;
                () = &mut shutdown => break,
                next = events.next() => next,
            };
            let Some(next) = next else { break };
            if attached && sender.send(next).await.is_err() {
                tracing::debug!("the client went away; the invocation keeps running");
                attached = false;
            }
        }
    });
    futures::stream::unfold(receiver, |mut receiver| async move {
        let next = receiver.recv().await?;
        Some((next, receiver))
    })
    .boxed()
}
