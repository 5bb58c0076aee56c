//! `AgentTool`: another agent called like a tool (ADK's `AgentTool`).

use crate::context::{AgentContext, Invocation, InvocationParts, Positions, with_user_event};
use crate::json_schema::PydanticClass;
use crate::rules::USER_AUTHOR;
use adk_grpc_core::{
    AdkError, Agent, AgentMode, Content, Event, Events, InvocationContext, Result, RunConfig, RunLog, Session,
    StateMap, StreamingMode, Tool, ToolContext, python_json, with_sorted_keys,
};
use async_trait::async_trait;
use chrono::Utc;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// Runs an agent for one function call and answers with its final reply, as ADK's
/// `AgentTool` does: the agent works on a copy of the caller's state in a session of
/// its own that is not stored (its events never enter the caller's history), its
/// state changes come back as the call's `state_delta` and its artifact saves go to
/// the caller's session (recorded in the call's `artifact_delta`).
///
/// The arguments are the agent's `input_schema` when it is an `LlmAgent` with one
/// (sent to it as JSON text), else `{"request": "<text>"}`. The answer is the reply's
/// text, or the reply as JSON when the agent has an `output_schema`.
///
/// A sub-agent of `mode` task or single_turn is offered to its parent through the same
/// tool ([`AgentTool::delegate`]): same name, description and arguments, but its calls
/// are run by the parent's flow in the caller's session (`llm::task`), not here.
pub struct AgentTool {
    agent: Arc<dyn Agent>,
    /// Chat: ADK's `AgentTool` (a session of its own); else the parent's flow runs it.
    mode: AgentMode,
    description: String,
}

/// What a task agent's tool description adds: ADK's `_TaskAgentTool` warning, word for word.
const DELEGATION_NOTE: &str = "IMPORTANT: This tool delegates execution to a specialized agent. Do NOT call this tool in \
     parallel with any other tools.";

/// A task agent's arguments without an `input_schema`: ADK's `_DefaultTaskInput`, as
/// pydantic writes its JSON Schema.
fn default_task_input() -> Value {
    json!({
        "properties": {
            "request": {
                "description": "Detailed instructions or context for the task sub-agent.",
                "title": "Request",
                "type": "string"
            }
        },
        "required": ["request"],
        "title": "_DefaultTaskInput",
        "type": "object"
    })
}

impl AgentTool {
    pub fn new(agent: Arc<dyn Agent>) -> Self {
        let description = agent.description().to_string();
        AgentTool {
            agent,
            mode: AgentMode::Chat,
            description,
        }
    }

    /// The tool through which a parent calls its sub-agent of `agent.mode()` task or
    /// single_turn; the parent's flow answers its calls.
    pub(crate) fn delegate(agent: Arc<dyn Agent>) -> Self {
        let mode = agent.mode();
        let description = match mode {
            AgentMode::Task => format!("{}\n{DELEGATION_NOTE}", agent.description()).trim().to_string(),
            _ => agent.description().to_string(),
        };
        AgentTool {
            agent,
            mode,
            description,
        }
    }
}

/// The user's message `agent` gets for the arguments of a call of it, as ADK's
/// `AgentTool` writes it: with an `input_schema`, the arguments as the class validates and
/// dumps them ([`as_validated`]); else the `request` text, or any other arguments as
/// Python's `json.dumps(args, sort_keys=True)`.
pub(crate) fn input_message(agent: &Arc<dyn Agent>, args: &Value) -> Content {
    let text = match (agent.spec().input_schema, args) {
        (Some(schema), _) => as_validated(schema, agent.spec().input_schema_is_class, args).to_string(),
        (None, Value::Object(map)) => match map.get("request") {
            Some(Value::String(text)) => text.clone(),
            _ => python_json(&with_sorted_keys(args)),
        },
        (None, _) => python_json(&with_sorted_keys(args)),
    };
    Content::new("user").with_text(text)
}

/// The user's message a single-turn agent gets for the arguments of a call of it, as ADK
/// 2.13 runs one (a node whose input the class validates): with an `input_schema`, the
/// arguments as `model_validate(args).model_dump()` gives them (Nones kept), written by
/// Python's `json.dumps`; else as its `AgentTool` writes them ([`input_message`]).
pub(crate) fn single_turn_input_message(agent: &Arc<dyn Agent>, args: &Value) -> Content {
    match agent.spec().input_schema {
        Some(schema) => {
            let class = PydanticClass::of(schema, agent.spec().input_schema_is_class);
            Content::new("user").with_text(python_json(&class.validate(args)))
        }
        None => input_message(agent, args),
    }
}

/// An object's arguments as pydantic's `model_validate(args).model_dump_json(exclude_none=True)`
/// gives them (compact JSON, which `to_string` writes), by the one rule output_schema's
/// values follow ([`PydanticClass`]); arguments the schema does not name are dropped for a
/// Python class, as pydantic drops them, and follow in their order for an agents file's
/// JSON Schema (which may allow them).
fn as_validated(schema: &Value, is_class: bool, args: &Value) -> Value {
    PydanticClass::of(schema, is_class).validate_and_dump(args)
}

/// The call's result for `agent`'s final reply: the text, or the JSON value when the
/// agent has an `output_schema`.
pub(crate) fn reply_value(agent: &Arc<dyn Agent>, reply: String) -> Value {
    if agent.spec().output_schema.is_some()
        && let Ok(value) = serde_json::from_str::<Value>(&reply)
    {
        return value;
    }
    Value::String(reply)
}

#[async_trait]
impl Tool for AgentTool {
    fn name(&self) -> &str {
        self.agent.name()
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters_schema(&self) -> Option<Value> {
        match self.agent.spec().input_schema {
            Some(schema) => Some(schema.clone()),
            None if self.mode == AgentMode::Task => Some(default_task_input()),
            None => Some(json!({
                "type": "object",
                "properties": { "request": { "type": "string" } },
                "required": ["request"]
            })),
        }
    }

    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        if self.mode != AgentMode::Chat {
            // Only reached when the agent is called outside its parent's flow.
            return Err(AdkError::Tool(format!(
                "agent {} ({} mode) is run by its parent's flow, not as a stand-alone tool",
                self.agent.name(),
                self.mode.as_str()
            )));
        }
        let invocation_id = format!("e-{}", uuid::Uuid::new_v4());
        let now = Utc::now();
        let session = Session {
            id: ctx.session_id().to_string(),
            app_name: ctx.app_name().to_string(),
            user_id: ctx.user_id().to_string(),
            state: StateMap::new(ctx.state().all()),
            events: Events::new(Vec::new()),
            create_time: now,
            last_update_time: now,
            event_count: 0,
            expire_time: None,
        };
        let user_content = input_message(&self.agent, &args);
        let user_event = Event::new(&invocation_id)
            .with_author(USER_AUTHOR)
            .with_content(user_content.clone());
        let invocation = Arc::new(Invocation::new(InvocationParts {
            invocation_id,
            root_agent: self.agent.clone(),
            log: RunLog::new(vec![user_event.clone()]),
            session: with_user_event(session, user_event),
            user_content,
            overlay: HashMap::new(),
            // The wrapped agent runs as part of the caller's invocation, under its settings
            // (its own count of model calls), as ADK runs it; never streamed, since only its
            // last reply is the tool's result.
            run_config: RunConfig {
                streaming_mode: StreamingMode::None,
                ..ctx.run_config()
            },
            artifacts: ctx.artifacts(),
            compaction: None,
            memory: ctx.memory(),
            positions: Positions::Nowhere,
        }));
        let agent_ctx: Arc<dyn InvocationContext> =
            Arc::new(AgentContext::new(invocation.clone(), self.agent.clone(), String::new()));
        let mut events = self.agent.run(agent_ctx).await?;
        let mut reply = None;
        while let Some(event) = events.next().await {
            let event = event?;
            if event.is_partial() {
                continue;
            }
            for (key, value) in &event.actions.state_delta {
                ctx.set_state(key, value.clone());
            }
            if let Some(text) = event.content().and_then(Content::text) {
                reply = Some(text);
            }
            let delta = event.actions.state_delta.clone();
            invocation.record(event, delta);
        }
        Ok(reply_value(&self.agent, reply.unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_schema_arguments_are_written_as_pydantic_dumps_the_validated_class() {
        // Trip(origin, destination, passengers=1, note=None), as pydantic's JSON Schema.
        let schema = json!({
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "destination": {"type": "string"},
                "passengers": {"type": "integer", "default": 1},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
            },
            "required": ["origin", "destination"],
        });
        let args = json!({"destination": "Rome", "note": null, "origin": "Paris"});
        assert_eq!(
            as_validated(&schema, true, &args).to_string(),
            r#"{"origin":"Paris","destination":"Rome","passengers":1}"#
        );
        let with_extra = json!({"extra": "é", "passengers": 2, "origin": "Oslo", "destination": "Bergen"});
        assert_eq!(
            as_validated(&schema, true, &with_extra).to_string(),
            r#"{"origin":"Oslo","destination":"Bergen","passengers":2}"#,
            "a class drops what it does not declare"
        );
        assert_eq!(
            as_validated(&schema, false, &with_extra).to_string(),
            r#"{"origin":"Oslo","destination":"Bergen","passengers":2,"extra":"é"}"#,
            "an agents file's JSON Schema keeps it after the declared ones"
        );
    }

    #[test]
    fn other_arguments_are_written_as_json_dumps_with_sorted_keys() {
        let args = json!({"zeta": {"b": 1, "a": [{"y": true, "x": null}]}, "alpha": "é"});
        assert_eq!(
            python_json(&with_sorted_keys(&args)),
            r#"{"alpha": "é", "zeta": {"a": [{"x": null, "y": true}], "b": 1}}"#
        );
    }
}
