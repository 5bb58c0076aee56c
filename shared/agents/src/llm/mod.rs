//! `LlmAgent`: an agent that talks to a model, calls tools and hands over to sub-agents.

mod callbacks;
mod flow;
pub(crate) mod history;
mod instruction;

pub use callbacks::BeforeModel;

use adk_grpc_core::{
    AdkError, Agent, CallbackContext, EventStream, GenerateContentConfig, InvocationContext, Llm, LlmRequest,
    LlmResponse, Result, Tool, Toolset,
};
use async_trait::async_trait;
use callbacks::{AfterModelFn, BeforeModelFn};
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

/// An agent backed by a model. Cheap to clone.
///
/// One turn: the model gets the instruction (templated from state), the
/// session's conversation and the tools; each function call it makes is
/// executed and answered, and the model is called again, until it replies
/// with text, a long-running call pauses the turn, or it transfers to a
/// sub-agent, which then continues the invocation.
#[derive(Clone)]
pub struct LlmAgent {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    name: String,
    description: String,
    instruction: Option<String>,
    model: Arc<dyn Llm>,
    tools: Vec<Arc<dyn Tool>>,
    toolsets: Vec<Arc<dyn Toolset>>,
    sub_agents: Vec<Arc<dyn Agent>>,
    output_key: Option<String>,
    include_contents: IncludeContents,
    before_model: Vec<BeforeModelFn>,
    after_model: Vec<AfterModelFn>,
    config: GenerateContentConfig,
}

/// What of the session's history an agent's model request carries (ADK's
/// `include_contents`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IncludeContents {
    /// The whole conversation, as ADK builds it.
    #[default]
    Default,
    /// Only the current turn: from the latest message of the user or of another agent on,
    /// with this turn's tool calls and responses; no earlier history.
    None,
}

/// Builds an [`LlmAgent`].
///
/// ```
/// # use adk_grpc_agents::LlmAgentBuilder;
/// # use std::sync::Arc;
/// # fn main() -> adk_grpc_core::Result<()> {
/// let model = Arc::new(adk_grpc_models::MockModel::echo());
/// let agent = LlmAgentBuilder::new("assistant")
///     .description("Answers questions")
///     .instruction("You help {user:name?}. Be brief.")
///     .model(model)
///     .output_key("last_answer")
///     .build()?;
/// # Ok(()) }
/// ```
pub struct LlmAgentBuilder {
    name: String,
    description: String,
    instruction: Option<String>,
    model: Option<Arc<dyn Llm>>,
    tools: Vec<Arc<dyn Tool>>,
    toolsets: Vec<Arc<dyn Toolset>>,
    sub_agents: Vec<Arc<dyn Agent>>,
    output_key: Option<String>,
    include_contents: IncludeContents,
    before_model: Vec<BeforeModelFn>,
    after_model: Vec<AfterModelFn>,
    config: GenerateContentConfig,
}

impl LlmAgentBuilder {
    pub fn new(name: impl Into<String>) -> Self {
        LlmAgentBuilder {
            name: name.into(),
            description: String::new(),
            instruction: None,
            model: None,
            tools: Vec::new(),
            toolsets: Vec::new(),
            sub_agents: Vec::new(),
            output_key: None,
            include_contents: IncludeContents::Default,
            before_model: Vec::new(),
            after_model: Vec::new(),
            config: GenerateContentConfig::default(),
        }
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The system instruction; `{key}`, `{user:key}`, `{app:key}`, `{temp:key}`,
    /// `{key?}` and `{artifact.name}` are filled in before every model call.
    pub fn instruction(mut self, instruction: impl Into<String>) -> Self {
        self.instruction = Some(instruction.into());
        self
    }

    pub fn model(mut self, model: Arc<dyn Llm>) -> Self {
        self.model = Some(model);
        self
    }

    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    pub fn toolsets(mut self, toolsets: impl IntoIterator<Item = Arc<dyn Toolset>>) -> Self {
        self.toolsets.extend(toolsets);
        self
    }

    /// Agents this one may transfer to: the model is offered `transfer_to_agent`.
    pub fn sub_agents(mut self, agents: impl IntoIterator<Item = Arc<dyn Agent>>) -> Self {
        self.sub_agents.extend(agents);
        self
    }

    /// Stores the agent's final text reply in this state key (through the
    /// reply event's `state_delta`).
    pub fn output_key(mut self, key: impl Into<String>) -> Self {
        self.output_key = Some(key.into());
        self
    }

    /// How much of the session's history the model sees (default: all of it).
    pub fn include_contents(mut self, include: IncludeContents) -> Self {
        self.include_contents = include;
        self
    }

    pub fn generate_content_config(mut self, config: GenerateContentConfig) -> Self {
        self.config = config;
        self
    }

    /// Runs before every model call, in the order added: it may change the
    /// request, or answer in the model's place (then later callbacks and the
    /// model are skipped).
    pub fn before_model_callback<F, Fut>(mut self, callback: F) -> Self
    where
        F: Fn(Arc<dyn CallbackContext>, LlmRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<BeforeModel>> + Send + 'static,
    {
        self.before_model.push(callbacks::before_model(callback));
        self
    }

    /// Runs on every complete model response, in the order added; returns the
    /// response to use (the same or a replacement).
    pub fn after_model_callback<F, Fut>(mut self, callback: F) -> Self
    where
        F: Fn(Arc<dyn CallbackContext>, LlmResponse) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<LlmResponse>> + Send + 'static,
    {
        self.after_model.push(callbacks::after_model(callback));
        self
    }

    /// Checks the definition with the library's [rules](crate::validate_agent_name): a
    /// valid name, a model, tools with unique valid names, unique sub-agent names, a
    /// state key for `output_key`.
    pub fn build(self) -> Result<LlmAgent> {
        crate::validate_agent_name(&self.name)?;
        let in_agent = |e: AdkError| match e {
            AdkError::Config(message) => AdkError::Config(format!("agent {}: {message}", self.name)),
            other => other,
        };
        let model = self
            .model
            .ok_or_else(|| AdkError::Config(format!("agent {} has no model", self.name)))?;
        for tool in &self.tools {
            crate::validate_tool_name(tool.name()).map_err(in_agent)?;
        }
        crate::validate_tool_list(self.tools.iter().map(|t| t.name())).map_err(in_agent)?;
        let mut agents = HashSet::new();
        for agent in &self.sub_agents {
            if !agents.insert(agent.name()) {
                return Err(AdkError::Config(format!(
                    "agent {} has two sub-agents named {}",
                    self.name,
                    agent.name()
                )));
            }
        }
        if let Some(key) = &self.output_key {
            crate::validate_output_key(key).map_err(in_agent)?;
        }
        Ok(LlmAgent {
            inner: Arc::new(Inner {
                name: self.name,
                description: self.description,
                instruction: self.instruction,
                model,
                tools: self.tools,
                toolsets: self.toolsets,
                sub_agents: self.sub_agents,
                output_key: self.output_key,
                include_contents: self.include_contents,
                before_model: self.before_model,
                after_model: self.after_model,
                config: self.config,
            }),
        })
    }
}

#[async_trait]
impl Agent for LlmAgent {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    fn sub_agents(&self) -> &[Arc<dyn Agent>] {
        &self.inner.sub_agents
    }

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        Ok(flow::run(self.inner.clone(), ctx))
    }
}
