//! `AgentTool`: another agent called like a tool (ADK's `AgentTool`).

use crate::context::{AgentContext, Invocation};
use crate::{LlmAgent, USER_AUTHOR};
use adk_grpc_core::{
    Agent, Content, Event, Events, InvocationContext, Result, RunConfig, Session, StateMap, Tool, ToolContext,
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
/// The arguments are the agent's `input_schema` when it is an [`LlmAgent`] with one
/// (sent to it as JSON text), else `{"request": "<text>"}`. The answer is the reply's
/// text, or the reply as JSON when the agent has an `output_schema`.
pub struct AgentTool {
    agent: Arc<dyn Agent>,
}

impl AgentTool {
    pub fn new(agent: Arc<dyn Agent>) -> Self {
        AgentTool { agent }
    }

    fn llm_agent(&self) -> Option<&LlmAgent> {
        self.agent.as_any()?.downcast_ref::<LlmAgent>()
    }

    /// The user's message the agent gets for `args`.
    fn message(&self, args: &Value) -> Content {
        let text = match (self.llm_agent().and_then(LlmAgent::input_schema), args) {
            (None, Value::Object(map)) => match map.get("request") {
                Some(Value::String(text)) => text.clone(),
                _ => args.to_string(),
            },
            _ => args.to_string(),
        };
        Content::new("user").with_text(text)
    }
}

#[async_trait]
impl Tool for AgentTool {
    fn name(&self) -> &str {
        self.agent.name()
    }

    fn description(&self) -> &str {
        self.agent.description()
    }

    fn parameters_schema(&self) -> Option<Value> {
        match self.llm_agent().and_then(LlmAgent::input_schema) {
            Some(schema) => Some(schema.clone()),
            None => Some(json!({
                "type": "object",
                "properties": { "request": { "type": "string" } },
                "required": ["request"]
            })),
        }
    }

    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
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
        let user_event = Event::new(&invocation_id)
            .with_author(USER_AUTHOR)
            .with_content(self.message(&args));
        let invocation = Arc::new(
            Invocation::new(
                invocation_id,
                self.agent.clone(),
                session,
                user_event,
                HashMap::new(),
                RunConfig::default(),
                ctx.artifacts(),
                None,
            )
            .with_memory(ctx.memory()),
        );
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
        let reply = reply.unwrap_or_default();
        if self.llm_agent().and_then(LlmAgent::output_schema).is_some()
            && let Ok(value) = serde_json::from_str::<Value>(&reply)
        {
            return Ok(value);
        }
        Ok(Value::String(reply))
    }
}
