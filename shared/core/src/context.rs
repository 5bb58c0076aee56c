//! What agents, callbacks and tools see of the invocation they run in, as in ADK:
//! `ReadonlyContext` ⊂ `CallbackContext` ⊂ `ToolContext` / `InvocationContext`.
//! The runner implements them; agents and tools only use them.

use crate::agent::{Agent, RunConfig};
use crate::artifact::Artifacts;
use crate::content::Content;
use crate::error::AdkError;
use crate::error::Result;
use crate::event::{Event, EventActions};
use crate::memory::{Memory, SearchMemoryResponse};
use crate::run_log::RunLog;
use crate::session::Session;
use crate::state::ReadonlyState;
use futures::future::BoxFuture;
use serde_json::Value;
use std::sync::Arc;

/// Who is running, for whom, on which input; and the state as this invocation sees it.
pub trait ReadonlyContext: Send + Sync {
    fn invocation_id(&self) -> &str;
    /// The agent currently running.
    fn agent_name(&self) -> &str;
    fn user_id(&self) -> &str;
    fn app_name(&self) -> &str;
    fn session_id(&self) -> &str;
    /// The user's message that started (or resumed) this invocation.
    fn user_content(&self) -> &Content;
    /// The session's merged state (`app:`, `user:`, session keys) with every delta
    /// this invocation has stored so far applied, `temp:` keys included: they live
    /// only here, for the rest of the invocation.
    fn state(&self) -> &dyn ReadonlyState;
}

/// What callbacks get: the read-only view plus the session's artifacts.
pub trait CallbackContext: ReadonlyContext {
    /// The artifacts of this session (and the user's `user:` ones); None when the
    /// runner has no artifact service.
    fn artifacts(&self) -> Option<Arc<dyn Artifacts>>;

    /// The user's long-term memory (ADK's `memory_service`, bound to this app and
    /// user); None when the runner has no memory service.
    fn memory(&self) -> Option<Arc<dyn Memory>> {
        None
    }
}

/// What a tool gets while it executes one function call.
///
/// A tool changes state and signals control flow only through the actions of
/// the event that carries its response: `set_state` (or `set_actions`) puts a
/// key in that event's `state_delta`, visible to later steps once the event is
/// stored; artifacts saved through `artifacts()` are recorded in its
/// `artifact_delta`.
pub trait ToolContext: CallbackContext {
    /// The id of the function call being executed.
    fn function_call_id(&self) -> &str;
    /// The actions recorded so far for this call's response event.
    fn actions(&self) -> EventActions;
    /// Replaces the actions of this call's response event (e.g. to transfer or escalate).
    fn set_actions(&self, actions: EventActions);
    /// The invocation's live events, the call being made last among them (ADK's
    /// `tool_context.session.events`): what a tool reads the conversation from.
    fn events(&self) -> Arc<Vec<crate::Event>>;

    /// The agent making the call (ADK's `tool_context._invocation_context.agent`), for a
    /// tool that reads its settings (a model consult sends the advisor its instruction);
    /// None where the context has no agent.
    fn calling_agent(&self) -> Option<Arc<dyn Agent>> {
        None
    }

    /// The run settings of the invocation making the call (ADK's
    /// `tool_context._invocation_context.run_config`), for a tool that runs an agent of its
    /// own under them; the defaults where the context has no invocation.
    fn run_config(&self) -> crate::RunConfig {
        crate::RunConfig::default()
    }

    /// Searches the user's long-term memory (ADK's `ToolContext.search_memory`);
    /// `FAILED_PRECONDITION` when the runner has no memory service.
    fn search_memory<'a>(&'a self, query: &'a str) -> BoxFuture<'a, Result<SearchMemoryResponse>> {
        Box::pin(async move {
            let memory = self
                .memory()
                .ok_or_else(|| AdkError::FailedPrecondition("this runner has no memory service to search".into()))?;
            memory.search(query).await
        })
    }

    /// Records a state change in this call's `state_delta`.
    fn set_state(&self, key: &str, value: Value) {
        let mut actions = self.actions();
        actions.state_delta.insert(key.to_string(), value);
        self.set_actions(actions);
    }
}

/// Everything an agent needs to run one invocation.
pub trait InvocationContext: CallbackContext {
    /// The agent this context was made for.
    fn agent(&self) -> Arc<dyn Agent>;
    /// The session as it was loaded when the invocation started (the user's message
    /// included). `events()` and `state()` give the live view.
    fn session(&self) -> &Session;
    /// The session's events so far, oldest first, including those this invocation
    /// stored, with their index: a snapshot, shared, not copied.
    fn run_log(&self) -> Arc<RunLog>;
    /// The events of [`InvocationContext::run_log`].
    fn events(&self) -> Arc<Vec<Event>> {
        self.run_log().events().clone()
    }
    /// The branch this agent runs on: empty at the top, `parallel.child` below a
    /// parallel agent. Events of other branches are not part of this agent's conversation.
    fn branch(&self) -> &str;
    fn run_config(&self) -> &RunConfig;
    /// Asks every agent of the invocation to stop at its next step.
    fn end_invocation(&self);
    fn ended(&self) -> bool;
    /// Counts one model call; fails once `run_config().max_llm_calls` would be exceeded.
    fn increment_llm_call_count(&self) -> Result<()>;
    /// The same invocation, seen by `agent` on `branch` (for workflow agents and transfers).
    fn for_agent(&self, agent: Arc<dyn Agent>, branch: &str) -> Arc<dyn InvocationContext>;
    /// The root of the runner's agent tree (transfers to parents and peers,
    /// the root's `global_instruction`).
    fn root_agent(&self) -> Arc<dyn Agent>;
    /// The app's event compaction settings (the model's history is kept within
    /// `token_budget`); None without compaction.
    fn compaction(&self) -> Option<&crate::history::CompactionConfig> {
        None
    }
    /// Whether the invocation stores its agents' positions and ends in the log, as ADK's
    /// `InvocationContext.is_resumable` (an app marked resumable): an LLM agent then
    /// stores its end (`actions.end_of_agent`) as ADK's does.
    fn is_resumable(&self) -> bool {
        false
    }
}
