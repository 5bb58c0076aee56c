//! An agent's hooks as one chain at every point, and the agent points around its run.

use super::hook::{BeforeModel, BeforeTool, Decision, Hook, HookContext, HookPoint};
use adk_grpc_core::{
    AdkError, Content, Event, EventActions, EventStream, InvocationContext, LlmRequest, LlmResponse, Result,
};
use async_stream::try_stream;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;

/// An agent's hooks, in the order they are called (an app's first, as ADK's plugins,
/// then the agent's own). Cheap to clone.
#[derive(Clone, Default)]
pub struct Hooks {
    hooks: Arc<Vec<Arc<dyn Hook>>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let points: Vec<Vec<&str>> = self
            .hooks
            .iter()
            .map(|hook| hook.points().iter().map(|point| point.as_str()).collect())
            .collect();
        f.debug_struct("Hooks").field("points", &points).finish()
    }
}

impl Hooks {
    pub fn new(hooks: impl IntoIterator<Item = Arc<dyn Hook>>) -> Self {
        Hooks {
            hooks: Arc::new(hooks.into_iter().collect()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks in the order they are called.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Hook>> {
        self.hooks.iter()
    }

    /// Some hook is called at `point`.
    pub fn has(&self, point: HookPoint) -> bool {
        self.hooks.iter().any(|hook| hook.points().contains(&point))
    }

    /// The one chain of every point: each hook called at `point`, in order, gets the
    /// value the one before it passed on; the first that answers ends it. At the points
    /// before something runs a hook that ends the invocation ends it too (what it would
    /// have run is skipped).
    async fn chain<'a, T: Send, A: Send>(
        &'a self,
        point: HookPoint,
        ctx: &'a HookContext,
        mut value: T,
        step: impl Fn(&'a dyn Hook, T) -> BoxFuture<'a, Result<Decision<T, A>>> + Send + Sync,
    ) -> Result<Decision<T, A>> {
        for hook in self.hooks.iter().filter(|hook| hook.points().contains(&point)) {
            match step(hook.as_ref(), value).await? {
                Decision::Continue(next) => value = next,
                respond => return Ok(respond),
            }
            if point.stops_once_ended() && ctx.invocation().ended() {
                break;
            }
        }
        Ok(Decision::Continue(value))
    }

    pub(crate) async fn before_agent(&self, ctx: &HookContext) -> Result<Option<Content>> {
        let answer = self.chain(HookPoint::BeforeAgent, ctx, (), |hook, ()| {
            Box::pin(async move {
                Ok(hook
                    .before_agent(ctx)
                    .await?
                    .map_or(Decision::Continue(()), Decision::Respond))
            })
        });
        Ok(answer.await?.answer())
    }

    /// The last reply a hook adds is the one added.
    pub(crate) async fn after_agent(&self, ctx: &HookContext) -> Result<Option<Content>> {
        let added = self.chain::<_, Infallible>(HookPoint::AfterAgent, ctx, None, |hook, added| {
            Box::pin(async move { Ok(Decision::Continue(hook.after_agent(ctx).await?.or(added))) })
        });
        Ok(added.await?.value())
    }

    pub(crate) async fn before_model(&self, ctx: &HookContext, request: LlmRequest) -> Result<BeforeModel> {
        self.chain(HookPoint::BeforeModel, ctx, request, |hook, request| {
            hook.before_model(ctx, request)
        })
        .await
    }

    pub(crate) async fn after_model(&self, ctx: &HookContext, response: LlmResponse) -> Result<LlmResponse> {
        let response = self.chain::<_, Infallible>(HookPoint::AfterModel, ctx, response, |hook, response| {
            Box::pin(async move { Ok(Decision::Continue(hook.after_model(ctx, response).await?)) })
        });
        Ok(response.await?.value())
    }

    pub(crate) async fn on_model_error(
        &self,
        ctx: &HookContext,
        request: &LlmRequest,
        error: &AdkError,
    ) -> Result<Option<LlmResponse>> {
        let answer = self.chain(HookPoint::OnModelError, ctx, (), |hook, ()| {
            Box::pin(async move {
                let answer = hook.on_model_error(ctx, request, error).await?;
                Ok(answer.map_or(Decision::Continue(()), Decision::Respond))
            })
        });
        Ok(answer.await?.answer())
    }

    pub(crate) async fn before_tool(&self, ctx: &HookContext, tool: &str, args: Value) -> Result<BeforeTool> {
        self.chain(HookPoint::BeforeTool, ctx, args, |hook, args| {
            hook.before_tool(ctx, tool, args)
        })
        .await
    }

    pub(crate) async fn after_tool(
        &self,
        ctx: &HookContext,
        tool: &str,
        args: &Value,
        response: Value,
    ) -> Result<Value> {
        let response = self.chain::<_, Infallible>(HookPoint::AfterTool, ctx, response, |hook, response| {
            Box::pin(async move { Ok(Decision::Continue(hook.after_tool(ctx, tool, args, response).await?)) })
        });
        Ok(response.await?.value())
    }

    pub(crate) async fn on_tool_error(
        &self,
        ctx: &HookContext,
        tool: &str,
        args: &Value,
        error: &AdkError,
    ) -> Result<Option<Value>> {
        let answer = self.chain(HookPoint::OnToolError, ctx, (), |hook, ()| {
            Box::pin(async move {
                let answer = hook.on_tool_error(ctx, tool, args, error).await?;
                Ok(answer.map_or(Decision::Continue(()), Decision::Respond))
            })
        });
        Ok(answer.await?.answer())
    }
}

/// Runs an agent inside its `before_agent` and `after_agent` hooks: a
/// `before_agent` answer (or `end_invocation`) skips the agent; hook actions are
/// stored as an event of the agent (with the answer or the added reply, if any),
/// once `check_writes` (the agent's rule for its state writes) has passed them.
/// As in ADK, `after_agent` is not called once the invocation has ended.
pub(crate) fn around_agent<C, F>(
    hooks: Hooks,
    ctx: HookContext,
    check_writes: C,
    run: F,
) -> BoxFuture<'static, Result<EventStream>>
where
    C: Fn(&EventActions) -> Result<()> + Send + 'static,
    F: FnOnce(Arc<dyn InvocationContext>) -> BoxFuture<'static, Result<EventStream>> + Send + 'static,
{
    if !hooks.has(HookPoint::BeforeAgent) && !hooks.has(HookPoint::AfterAgent) {
        return run(ctx.invocation().clone());
    }
    Box::pin(async move {
        let stream: EventStream = Box::pin(try_stream! {
            let answer = hooks.before_agent(&ctx).await?;
            let skipped = answer.is_some() || ctx.invocation().ended();
            let actions = ctx.take_actions();
            check_writes(&actions)?;
            if let Some(event) = hook_event(ctx.invocation().as_ref(), answer, actions) {
                yield event;
            }
            if !skipped {
                let mut events = run(ctx.invocation().clone()).await?;
                while let Some(event) = events.next().await {
                    yield event?;
                }
                if !ctx.invocation().ended() {
                    let added = hooks.after_agent(&ctx).await?;
                    let actions = ctx.take_actions();
                    check_writes(&actions)?;
                    if let Some(event) = hook_event(ctx.invocation().as_ref(), added, actions) {
                        yield event;
                    }
                }
            }
        });
        Ok(stream)
    })
}

/// An event of the agent carrying a hook's reply and actions; None when there is neither.
fn hook_event(ctx: &dyn InvocationContext, content: Option<Content>, actions: EventActions) -> Option<Event> {
    if content.is_none() && actions == EventActions::default() {
        return None;
    }
    let mut event = Event::new(ctx.invocation_id()).with_author(ctx.agent_name());
    event.branch = ctx.branch().to_string();
    event.llm_response.content = content;
    event.actions = actions;
    Some(event)
}
