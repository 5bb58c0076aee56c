//! Hooks around an agent of any kind: its `before_agent` and `after_agent` points,
//! their state writes held to its `state_schema` (here, above both, so that hooks
//! know nothing of schemas).

use crate::context::ToolCallContext;
use crate::hooks::{HookContext, HookPoint, Hooks, around_agent};
use crate::state_schema::{StateSchema, check_writes};
use adk_grpc_core::{Agent, EventStream, InvocationContext, Result};
use async_trait::async_trait;
use std::sync::Arc;

/// An agent of any kind with the agent points of `hooks` around its runs (llm agents
/// take their hooks through `LlmAgentBuilder::hooks` instead, which also
/// covers the model and tool points), the hooks' state writes held to the agent's
/// `state_schema`. The agent itself when no hook is called at `before_agent` or
/// `after_agent`.
pub fn with_agent_hooks(agent: Arc<dyn Agent>, hooks: Hooks, state_schema: Option<Arc<StateSchema>>) -> Arc<dyn Agent> {
    if !hooks.has(HookPoint::BeforeAgent) && !hooks.has(HookPoint::AfterAgent) {
        return agent;
    }
    Arc::new(HookedAgent {
        inner: agent,
        hooks,
        state_schema,
    })
}

struct HookedAgent {
    inner: Arc<dyn Agent>,
    hooks: Hooks,
    state_schema: Option<Arc<StateSchema>>,
}

#[async_trait]
impl Agent for HookedAgent {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn sub_agents(&self) -> &[Arc<dyn Agent>] {
        self.inner.sub_agents()
    }
    fn transfer_scope(&self) -> Option<adk_grpc_core::TransferScope> {
        self.inner.transfer_scope()
    }
    fn mode(&self) -> adk_grpc_core::AgentMode {
        self.inner.mode()
    }
    fn spec(&self) -> adk_grpc_core::AgentSpec<'_> {
        self.inner.spec()
    }
    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let inner = self.inner.clone();
        let schema = self.state_schema.clone();
        let agent = ctx.agent_name().to_string();
        let check =
            move |actions: &adk_grpc_core::EventActions| check_writes(schema.as_deref(), &agent, &actions.state_delta);
        let hook_ctx = HookContext::new(ctx.clone(), Arc::new(ToolCallContext::new(ctx, "")));
        around_agent(self.hooks.clone(), hook_ctx, check, move |ctx| {
            Box::pin(async move { inner.run(ctx).await })
        })
        .await
    }
}
