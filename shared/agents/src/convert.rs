//! The `adk.v1.AgentRunner` Run request in the runner library's terms.

use crate::runner::{OnBusy, RunOptions};
use crate::tools::ToolActions;
use adk_grpc_core::convert::value_map_from_proto;
use adk_grpc_core::{AdkError, Content, Part, Result, RunConfig, validate};
use adk_grpc_proto::v1 as pb;
use prost::Message;

/// A Run request, checked: whose session, the user's message and how to run it.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub new_message: Content,
    pub options: RunOptions,
    /// The invocation goes on when the client goes away.
    pub keep_running: bool,
}

/// Every message names the RunRequest's own fields (`new_message`, `state_delta`,
/// `run_config.…`, `on_busy`): they are checked here, before anything is stored,
/// rather than by the rules of the event the runner stores them as (`event.…`).
impl TryFrom<pb::RunRequest> for RunRequest {
    type Error = AdkError;

    fn try_from(request: pb::RunRequest) -> Result<Self> {
        let message = request
            .new_message
            .as_ref()
            .ok_or_else(|| AdkError::invalid("new_message", "is required"))?;
        let new_message = Content::from_proto("new_message", message)?;
        validate::content_limits("new_message", &new_message)?;
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
        let run_config = match &request.run_config {
            Some(config) => RunConfig::try_from(config)?,
            None => RunConfig::default(),
        };
        let on_busy = on_busy(request.on_busy)?;
        let state_delta = value_map_from_proto("state_delta", &request.state_delta)?;
        validate::state_keys("state_delta", &state_delta)?;
        validate::state_limits("state_delta", &state_delta)?;
        let tool_actions = tool_actions(message)?;
        Ok(RunRequest {
            app_name: request.app_name,
            user_id: request.user_id,
            session_id: request.session_id,
            new_message,
            options: RunOptions {
                state_delta,
                run_config,
                create_session_if_missing: request.create_session,
                on_busy,
                tool_actions,
            },
            keep_running: request.keep_running,
        })
    }
}

/// The actions the message's function responses carry, merged; None when none does.
fn tool_actions(message: &pb::Content) -> Result<Option<ToolActions>> {
    let mut merged: Option<ToolActions> = None;
    for (i, part) in message.parts.iter().enumerate() {
        let Some(pb::part::Kind::FunctionResponse(response)) = &part.kind else {
            continue;
        };
        let Some(actions) = &response.actions else {
            continue;
        };
        let field = format!("new_message.parts[{i}].function_response.actions");
        let mut artifacts = std::collections::BTreeMap::new();
        for (name, part) in &actions.artifacts {
            artifacts.insert(
                name.clone(),
                Part::from_proto(format!("{field}.artifacts.{name}"), part)?,
            );
        }
        let actions = ToolActions {
            state_delta: value_map_from_proto(format!("{field}.state_delta"), &actions.state_delta)?,
            artifacts,
            transfer_to_agent: actions.transfer_to_agent.clone(),
            escalate: actions.escalate == Some(true),
            skip_summarization: actions.skip_summarization == Some(true),
        }
        .checked(&field)?;
        merged.get_or_insert_with(ToolActions::default).merge(actions);
    }
    Ok(merged)
}

/// `on_busy`: unspecified leaves it to the app's default.
fn on_busy(value: i32) -> Result<Option<OnBusy>> {
    match pb::OnBusy::try_from(value) {
        Ok(pb::OnBusy::Unspecified) => Ok(None),
        Ok(pb::OnBusy::Reject) => Ok(Some(OnBusy::Reject)),
        Ok(pb::OnBusy::Enqueue) => Ok(Some(OnBusy::Enqueue)),
        Ok(pb::OnBusy::Interrupt) => Ok(Some(OnBusy::Interrupt)),
        Ok(pb::OnBusy::Rollback) => Ok(Some(OnBusy::Rollback)),
        Err(_) => Err(AdkError::invalid("on_busy", format!("{value} is not a known OnBusy"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::StreamingMode;

    fn request() -> pb::RunRequest {
        pb::RunRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            new_message: Some(pb::Content::from(&Content::new("user").with_text("hi"))),
            ..Default::default()
        }
    }

    #[test]
    fn a_run_request_becomes_the_message_and_options() {
        let run = RunRequest::try_from(request()).unwrap();
        assert_eq!(run.new_message.text().as_deref(), Some("hi"));
        assert_eq!(run.options.run_config, RunConfig::default());
        assert_eq!(run.options.on_busy, None);

        let mut sse = request();
        sse.run_config = Some(pb::RunConfig {
            streaming_mode: pb::StreamingMode::Sse as i32,
            max_llm_calls: 3,
            include_thoughts_from_other_agents: true,
        });
        sse.on_busy = pb::OnBusy::Rollback as i32;
        sse.keep_running = true;
        let run = RunRequest::try_from(sse).unwrap();
        assert_eq!(run.options.run_config.streaming_mode, StreamingMode::Sse);
        assert_eq!(run.options.run_config.max_llm_calls, 3);
        assert!(run.options.run_config.include_thoughts_from_other_agents);
        assert_eq!(run.options.on_busy, Some(OnBusy::Rollback));
        assert!(run.keep_running);
    }

    #[test]
    fn client_tool_actions_are_checked_with_the_request() {
        let answer = |actions: pb::ToolActions| {
            let mut run = request();
            run.new_message = Some(pb::Content {
                role: "user".into(),
                parts: vec![pb::Part {
                    kind: Some(pb::part::Kind::FunctionResponse(pb::FunctionResponse {
                        name: "confirm".into(),
                        id: Some("c1".into()),
                        actions: Some(actions),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
            });
            RunRequest::try_from(run)
        };
        let run = answer(pb::ToolActions {
            escalate: Some(true),
            ..Default::default()
        })
        .unwrap();
        assert!(run.options.tool_actions.is_some_and(|a| a.escalate));
        assert!(RunRequest::try_from(request()).unwrap().options.tool_actions.is_none());
        for (bad, field) in [
            (
                pb::ToolActions {
                    state_delta: [("user:".to_string(), adk_grpc_proto::ordered::Value::default())].into(),
                    ..Default::default()
                },
                "new_message.parts[0].function_response.actions.state_delta",
            ),
            (
                pb::ToolActions {
                    transfer_to_agent: Some("not a name".into()),
                    ..Default::default()
                },
                "new_message.parts[0].function_response.actions.transfer_to_agent",
            ),
        ] {
            let err = answer(bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{field}: {err}");
            assert!(err.to_string().contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn bad_input_names_the_run_request_field() {
        let mut missing = request();
        missing.new_message = None;
        let mut bad_config = request();
        bad_config.run_config = Some(pb::RunConfig {
            streaming_mode: 9,
            max_llm_calls: 0,
            ..Default::default()
        });
        let mut bad_on_busy = request();
        bad_on_busy.on_busy = 42;
        let mut bad_state = request();
        bad_state
            .state_delta
            .insert("user:".into(), adk_grpc_proto::ordered::Value::default());
        for (bad, field) in [
            (missing, "new_message"),
            (bad_config, "run_config.streaming_mode"),
            (bad_on_busy, "on_busy"),
            (bad_state, "state_delta"),
        ] {
            let err = RunRequest::try_from(bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{field}: {err}");
            assert!(err.to_string().contains(field), "{field}: {err}");
        }
    }
}
