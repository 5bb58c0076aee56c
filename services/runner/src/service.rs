//! The `adk.v1.AgentRunner` handlers: find the app, convert the request with
//! core's conversions, call the [`Runner`](adk_runner::Runner), stream its
//! events. Errors go through the one `AdkError` → `Status` mapping.

use crate::app::App;
use adk_core::convert::value_map_from_proto;
use adk_core::{AdkError, Content, RunConfig, StreamingMode, validate};
use adk_proto::v1 as pb;
use adk_proto::v1::agent_runner_server::{AgentRunner, AgentRunnerServer};
use adk_runner::{OnBusy, RunOptions};
use adk_server_kit::{GrpcArgs, Shutdown, message_too_large};
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
) -> adk_core::Result<AgentRunnerServer<RunnerGrpcService>> {
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
    pub fn new(apps: Vec<App>, max_message_bytes: usize, shutdown: Shutdown) -> adk_core::Result<Self> {
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
                adk_core::Missing::App,
                format!("app {app_name} is not served here (served: {})", served.join(", ")),
            )
        })
    }
}

/// The request's message and options, in the runner library's terms.
fn run_input(request: &pb::RunRequest) -> Result<(Content, RunOptions), AdkError> {
    let message = request
        .new_message
        .as_ref()
        .ok_or_else(|| AdkError::invalid("new_message", "is required"))?;
    // Checked here, before anything is stored, so every message names the RunRequest's
    // own fields (the runner stores them as an event, whose rules say `event.…`).
    let content = Content::from_proto("new_message", message)?;
    validate::content_limits("new_message", &content)?;
    let size = message.encoded_len();
    if size > validate::MAX_EVENT_BYTES {
        return Err(AdkError::limit(
            "max_event_bytes",
            validate::MAX_EVENT_BYTES,
            format!(
                "new_message is {size} bytes encoded, more than the limit of {} bytes per event; \
             store large data as an artifact and reference it",
                validate::MAX_EVENT_BYTES
            ),
        ));
    }
    let config = request.run_config.unwrap_or_default();
    let streaming_mode = match pb::StreamingMode::try_from(config.streaming_mode) {
        Ok(pb::StreamingMode::Unspecified | pb::StreamingMode::None) => StreamingMode::None,
        Ok(pb::StreamingMode::Sse) => StreamingMode::Sse,
        Err(_) => {
            return Err(AdkError::invalid(
                "run_config.streaming_mode",
                format!("{} is not a known StreamingMode", config.streaming_mode),
            ));
        }
    };
    let max_llm_calls = match u32::try_from(config.max_llm_calls) {
        Ok(0) => RunConfig::DEFAULT_MAX_LLM_CALLS,
        Ok(n) => n,
        Err(_) => {
            return Err(AdkError::invalid(
                "run_config.max_llm_calls",
                format!("must not be negative, got {}", config.max_llm_calls),
            ));
        }
    };
    let on_busy = match pb::OnBusy::try_from(request.on_busy) {
        Ok(pb::OnBusy::Unspecified) => None,
        Ok(pb::OnBusy::Reject) => Some(OnBusy::Reject),
        Ok(pb::OnBusy::Enqueue) => Some(OnBusy::Enqueue),
        Ok(pb::OnBusy::Interrupt) => Some(OnBusy::Interrupt),
        Ok(pb::OnBusy::Rollback) => Some(OnBusy::Rollback),
        Err(_) => {
            return Err(AdkError::invalid(
                "on_busy",
                format!("{} is not a known OnBusy", request.on_busy),
            ));
        }
    };
    let state_delta = value_map_from_proto("state_delta", &request.state_delta)?;
    validate::state_keys("state_delta", &state_delta)?;
    validate::state_limits("state_delta", &state_delta)?;
    let options = RunOptions {
        state_delta,
        run_config: RunConfig {
            streaming_mode,
            max_llm_calls,
        },
        create_session_if_missing: request.create_session,
        on_busy,
    };
    Ok((content, options))
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
        let (content, options) = run_input(&request)?;
        let started = app
            .runner()
            .start_run(&request.user_id, &request.session_id, content, options)
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
                                &what,
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
        if request.invocation_id.is_empty() {
            return Err(AdkError::invalid("invocation_id", "is required").into());
        }
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
/// stay and its lease is released.
fn keep_running(
    mut events: adk_core::EventStream,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> adk_core::EventStream {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(config: Option<pb::RunConfig>) -> pb::RunRequest {
        pb::RunRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            new_message: Some(pb::Content::from(&Content::new("user").with_text("hi"))),
            run_config: config,
            ..Default::default()
        }
    }

    #[test]
    fn run_config_defaults_and_bounds() {
        let (content, options) = run_input(&request(None)).unwrap();
        assert_eq!(content.text().as_deref(), Some("hi"));
        assert_eq!(options.run_config, RunConfig::default());

        let sse = pb::RunConfig {
            streaming_mode: pb::StreamingMode::Sse as i32,
            max_llm_calls: 3,
        };
        let (_, options) = run_input(&request(Some(sse))).unwrap();
        assert_eq!(options.run_config.streaming_mode, StreamingMode::Sse);
        assert_eq!(options.run_config.max_llm_calls, 3);

        for (bad, field) in [
            (
                pb::RunConfig {
                    streaming_mode: 9,
                    max_llm_calls: 0,
                },
                "streaming_mode",
            ),
            (
                pb::RunConfig {
                    streaming_mode: 0,
                    max_llm_calls: -1,
                },
                "max_llm_calls",
            ),
        ] {
            let err = run_input(&request(Some(bad))).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument);
            assert!(err.to_string().contains(field), "{err}");
        }
        let mut missing = request(None);
        missing.new_message = None;
        assert!(run_input(&missing).unwrap_err().to_string().contains("new_message"));
    }
}
