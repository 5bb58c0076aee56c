//! `LlmAgent`: an agent that talks to a model, calls tools and hands over to sub-agents.

mod examples;
mod flow;
pub(crate) mod history;
mod output_schema;
mod retry;
mod static_instruction;
pub(crate) mod task;

pub use examples::{Example, check_examples};
pub use output_schema::{
    ClassValidator, HttpClassValidator, SET_MODEL_RESPONSE_TOOL_NAME, SchemaClass, Unvalidated, ValidateClass,
    check_object_schema, check_schema,
};
pub use retry::RetryConfig;
pub use static_instruction::{StaticInstruction, StaticPart};

use crate::context::ToolCallContext;
use crate::hooks::{BeforeModel, Callback, Hook, HookContext, Hooks};
use crate::state_schema::StateSchema;
use adk_grpc_core::{
    AdkError, Agent, AgentKind, AgentMode, AgentSpec, CallbackContext, EventStream, GenerateContentConfig,
    InvocationContext, Llm, LlmRequest, LlmResponse, Result, StateSchemaCheck, Tool, Toolset, TransferScope,
};
use async_trait::async_trait;
use output_schema::OutputSchema;
use serde_json::Value;
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
    output_schema: Option<Arc<OutputSchema>>,
    /// What its events may write to the state (ADK's `state_schema`).
    state_schema: Option<Arc<StateSchema>>,
    input_schema: Option<Value>,
    input_schema_is_class: bool,
    include_contents: IncludeContents,
    /// Its Rust hooks, then its `hooks`: one chain at every point.
    hooks: Hooks,
    config: GenerateContentConfig,
    transfer_scope: TransferScope,
    /// Failed model calls are tried again (ADK's `retry_config`); None: never.
    retry: Option<RetryConfig>,
    /// Of the root agent: put before every agent's instruction (ADK's `global_instruction`).
    global_instruction: Option<String>,
    /// Sent first and unchanged (ADK's `static_instruction`); the instruction then goes
    /// into the contents, so the start of every request stays the same (cacheable).
    static_instruction: Option<StaticInstruction>,
    /// Few-shot examples put after the system instruction (ADK's `ExampleTool`).
    examples: Vec<Example>,
    /// How its parent reaches it (ADK 2's `mode`; see `task`).
    mode: AgentMode,
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
    output_schema: Option<Value>,
    output_schema_class: Option<SchemaClass>,
    state_schema: Option<Arc<StateSchema>>,
    input_schema: Option<Value>,
    input_schema_is_class: bool,
    include_contents: IncludeContents,
    rust_hooks: Vec<Arc<dyn Hook>>,
    hooks: Hooks,
    config: GenerateContentConfig,
    transfer_scope: TransferScope,
    retry: Option<RetryConfig>,
    global_instruction: Option<String>,
    static_instruction: Option<StaticInstruction>,
    examples: Vec<Example>,
    mode: AgentMode,
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
            output_schema: None,
            output_schema_class: None,
            state_schema: None,
            input_schema: None,
            input_schema_is_class: false,
            include_contents: IncludeContents::Default,
            rust_hooks: Vec::new(),
            hooks: Hooks::default(),
            config: GenerateContentConfig::default(),
            transfer_scope: TransferScope::default(),
            retry: None,
            global_instruction: None,
            static_instruction: None,
            examples: Vec::new(),
            mode: AgentMode::Chat,
        }
    }

    /// ADK 2's `mode`, how its parent reaches it: a transfer target (`Chat`, the
    /// default), or a tool of its parent run in the parent's session: `SingleTurn` runs
    /// to its reply without the user, `Task` talks with the user across turns until it
    /// calls `finish_task` (see [`AgentMode`]). Its sub-agents may then only be of those
    /// modes too (it never hands the conversation over).
    pub fn mode(mut self, mode: AgentMode) -> Self {
        self.mode = mode;
        self
    }

    /// ADK's `retry_config`, for model calls: one that fails transiently before its
    /// reply begins is made again after a backoff (see [`RetryConfig`]).
    pub fn retry_config(mut self, retry: RetryConfig) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Few-shot examples (ADK's `ExampleTool`): each a user message and the reply
    /// expected, written into the system instruction of every request after the
    /// instructions (when the invocation has a user message, as ADK adds them).
    pub fn examples(mut self, examples: impl IntoIterator<Item = Example>) -> Self {
        self.examples.extend(examples);
        self
    }

    /// ADK's `disallow_transfer_to_parent`: by default an agent may hand the turn
    /// back to its parent (when the parent is an LLM agent), and then keeps the
    /// conversation after replying; disallowed, the next message goes to the root.
    pub fn disallow_transfer_to_parent(mut self, disallow: bool) -> Self {
        self.transfer_scope.to_parent = !disallow;
        self
    }

    /// ADK's `disallow_transfer_to_peers`: by default an agent may hand the turn to
    /// its parent's other sub-agents (when the parent is an LLM agent).
    pub fn disallow_transfer_to_peers(mut self, disallow: bool) -> Self {
        self.transfer_scope.to_peers = !disallow;
        self
    }

    /// ADK's `global_instruction`, read from the root agent: put before the
    /// instruction of every LLM agent of the tree, templated as an instruction.
    pub fn global_instruction(mut self, instruction: impl Into<String>) -> Self {
        self.global_instruction = Some(instruction.into());
        self
    }

    /// ADK's `static_instruction`: system text sent first and literally (no
    /// templating), so providers can cache the start of every request; the
    /// `instruction` then follows as the last user content instead of the system text.
    /// A text, or parts with files ([`StaticInstruction`]), as ADK takes it.
    pub fn static_instruction(mut self, instruction: impl Into<StaticInstruction>) -> Self {
        self.static_instruction = Some(instruction.into());
        self
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

    /// The JSON Schema of the agent's reply (ADK's `output_schema`): the model is asked
    /// for JSON through the provider's structured-output mode, or, when the agent has
    /// tools, through a `set_model_response` call; the reply must parse and fit the
    /// schema (otherwise the run fails with a model error), and `output_key` receives
    /// the JSON value rather than the text.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// The agent's `output_schema` as a Python class (see [`SchemaClass`]): as
    /// [`Self::output_schema`] with the class's JSON Schema, the model sent the class
    /// as ADK sends it.
    pub fn output_schema_class(mut self, class: SchemaClass) -> Self {
        self.output_schema = Some(class.json_schema.clone());
        self.output_schema_class = Some(class);
        self
    }

    /// What the agent's events may write to the state (ADK's `state_schema`, see
    /// [`StateSchema`]): a tool call writing what does not fit gets an error back, an
    /// event of the agent that does fails the run.
    pub fn state_schema(mut self, schema: Arc<StateSchema>) -> Self {
        self.state_schema = Some(schema);
        self
    }

    /// The JSON Schema (an object schema) of the arguments when the agent is called as
    /// a tool (ADK's `input_schema`); see [`LlmAgent::input_schema`].
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }

    /// The input_schema of a Python class (a pydantic model's JSON Schema): the agent's
    /// message drops arguments the class does not declare, as pydantic's validation does.
    pub fn input_schema_class(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self.input_schema_is_class = true;
        self
    }

    /// How much of the session's history the model sees (default: all of it).
    pub fn include_contents(mut self, include: IncludeContents) -> Self {
        self.include_contents = include;
        self
    }

    /// Hooks called at their points (`before_agent` … `on_tool_error`), in order,
    /// after the Rust hooks given with [`Self::hook`]; see [`crate::hooks`]. An agent
    /// with an `after_model` hook calls its model without streaming, so nothing of a
    /// reply reaches a client before the hook has seen it whole.
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// A Rust hook (a [`Callback`] closure at one point, or any [`Hook`]), called
    /// in the order added, before the [`Self::hooks`].
    pub fn hook(mut self, hook: impl Hook + 'static) -> Self {
        self.rust_hooks.push(Arc::new(hook));
        self
    }

    pub fn generate_content_config(mut self, config: GenerateContentConfig) -> Self {
        self.config = config;
        self
    }

    /// Runs before every model call, in the order added: it may change the
    /// request, or answer in the model's place (then later callbacks and the
    /// model are skipped). Shorthand for `hook(Callback::before_model(callback))`.
    pub fn before_model_callback<F, Fut>(self, callback: F) -> Self
    where
        F: Fn(Arc<dyn CallbackContext>, LlmRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<BeforeModel>> + Send + 'static,
    {
        self.hook(Callback::before_model(callback))
    }

    /// Runs on every complete model response, in the order added; returns the
    /// response to use (the same or a replacement). Shorthand for
    /// `hook(Callback::after_model(callback))`.
    pub fn after_model_callback<F, Fut>(self, callback: F) -> Self
    where
        F: Fn(Arc<dyn CallbackContext>, LlmResponse) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<LlmResponse>> + Send + 'static,
    {
        self.hook(Callback::after_model(callback))
    }

    /// Checks the definition with the library's [rules](crate::rules::validate_agent_name): a
    /// valid name, a model, tools with unique valid names, unique sub-agent names, a
    /// state key for `output_key`.
    pub fn build(self) -> Result<LlmAgent> {
        crate::rules::validate_agent_name(&self.name)?;
        let model = self
            .model
            .clone()
            .ok_or_else(|| AdkError::Config(format!("agent {} has no model", self.name)))?;
        self.check_tools_and_sub_agents()?;
        let output_schema = self.checked_schemas()?;
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
                output_schema,
                state_schema: self.state_schema,
                input_schema: self.input_schema,
                input_schema_is_class: self.input_schema_is_class,
                include_contents: self.include_contents,
                hooks: Hooks::new(self.rust_hooks.into_iter().chain(self.hooks.iter().cloned())),
                config: self.config,
                transfer_scope: self.transfer_scope,
                retry: self.retry,
                global_instruction: self.global_instruction,
                static_instruction: self.static_instruction,
                examples: self.examples,
                mode: self.mode,
            }),
        })
    }

    /// A definition error of this agent, named so.
    fn in_agent(&self, e: AdkError) -> AdkError {
        match e {
            AdkError::Config(message) => AdkError::Config(format!("agent {}: {message}", self.name)),
            other => other,
        }
    }

    /// Tools with unique valid names (delegated sub-agents are tools too), and
    /// sub-agents of a mode this one may have, with unique names.
    fn check_tools_and_sub_agents(&self) -> Result<()> {
        for tool in &self.tools {
            crate::rules::validate_tool_name(tool.name()).map_err(|e| self.in_agent(e))?;
        }
        let delegates = task::delegates(&self.sub_agents).map(|a| a.name());
        crate::rules::validate_tool_list(self.tools.iter().map(|t| t.name()).chain(delegates))
            .map_err(|e| self.in_agent(e))?;
        if self.mode != AgentMode::Chat
            && let Some(chat) = self.sub_agents.iter().find(|a| a.mode() == AgentMode::Chat)
        {
            return Err(self.in_agent(AdkError::Config(format!(
                "a {} agent answers its parent's call and never hands the conversation over: its sub-agent {} \
                 must be of mode task or single_turn",
                self.mode.as_str(),
                chat.name()
            ))));
        }
        if self.mode == AgentMode::Task && self.tools.iter().any(|t| t.name() == task::FINISH_TASK_TOOL_NAME) {
            return Err(self.in_agent(AdkError::Config(format!(
                "{} is offered by itself to task agents: name the tool otherwise",
                task::FINISH_TASK_TOOL_NAME
            ))));
        }
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
        Ok(())
    }

    /// Checks `output_key`, the schemas and the examples; the `output_schema` compiled.
    fn checked_schemas(&self) -> Result<Option<Arc<OutputSchema>>> {
        if let Some(key) = &self.output_key {
            crate::rules::validate_output_key(key).map_err(|e| self.in_agent(e))?;
        }
        let output_schema = match &self.output_schema {
            Some(schema) => {
                if self.tools.iter().any(|t| t.name() == SET_MODEL_RESPONSE_TOOL_NAME) {
                    return Err(self.in_agent(AdkError::Config(format!(
                        "{SET_MODEL_RESPONSE_TOOL_NAME} is offered by itself to agents with an output_schema \
                         and tools: name the tool otherwise"
                    ))));
                }
                let compiled = match &self.output_schema_class {
                    Some(class) => OutputSchema::of_class(class.clone()),
                    None => OutputSchema::new(schema.clone()),
                };
                Some(Arc::new(compiled.map_err(|e| self.in_agent(e))?))
            }
            None => None,
        };
        if let Some(schema) = &self.input_schema {
            check_object_schema("input_schema", schema).map_err(|e| self.in_agent(e))?;
        }
        check_examples(&self.examples).map_err(|e| self.in_agent(e))?;
        if self.config.response_schema.is_some() {
            return Err(self.in_agent(AdkError::Config(
                "the reply's schema is set with output_schema, not in the generate_content_config".into(),
            )));
        }
        Ok(output_schema)
    }
}

impl LlmAgent {
    /// The arguments' JSON Schema when the agent is called as a tool (an agent-as-tool
    /// offers it as its parameters); None when not set.
    pub fn input_schema(&self) -> Option<&Value> {
        self.inner.input_schema.as_ref()
    }

    /// The JSON Schema the agent's reply follows, when it has one.
    pub fn output_schema(&self) -> Option<&Value> {
        self.inner.output_schema.as_deref().map(OutputSchema::schema)
    }
    /// The JSON Schema of what the agent's events may write to the state, when it has one.
    pub fn state_schema(&self) -> Option<&Value> {
        self.inner.state_schema.as_deref().map(StateSchema::schema)
    }

    /// The model the agent calls.
    pub fn model(&self) -> &Arc<dyn Llm> {
        &self.inner.model
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

    fn transfer_scope(&self) -> Option<TransferScope> {
        Some(self.inner.transfer_scope)
    }

    fn mode(&self) -> AgentMode {
        self.inner.mode
    }

    fn spec(&self) -> AgentSpec<'_> {
        let inner = &self.inner;
        AgentSpec {
            kind: AgentKind::Llm,
            global_instruction: inner.global_instruction.as_deref(),
            instruction: inner.instruction.as_deref(),
            static_instruction: inner.static_instruction.as_ref().map_or(&[], StaticInstruction::texts),
            model: Some(&inner.model),
            input_schema: inner.input_schema.as_ref(),
            input_schema_is_class: inner.input_schema_is_class,
            output_schema: inner.output_schema.as_deref().map(OutputSchema::schema),
            output_schema_is_python: inner.output_schema.as_deref().is_some_and(OutputSchema::is_python),
            state_schema: inner
                .state_schema
                .as_deref()
                .map(|schema| schema as &dyn StateSchemaCheck),
        }
    }

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        // Started by the runner on its call's branch (a run resumed after its runner
        // died): the agent that made the call goes on instead, and runs it again.
        if let Some((caller, branch)) = task::caller_to_resume(self.inner.mode, ctx.as_ref()) {
            return caller.run(ctx.for_agent(caller.clone(), &branch)).await;
        }
        let inner = self.inner.clone();
        let hooks = inner.hooks.clone();
        let hook_ctx = HookContext::new(ctx.clone(), Arc::new(ToolCallContext::new(ctx, "")));
        // Its events' writes, the hooks' included, are held to its schema where they are
        // stored (the runner's driver): nothing to check twice here.
        crate::hooks::around_agent(
            hooks,
            hook_ctx,
            |_| Ok(()),
            move |ctx| Box::pin(async move { Ok(flow::run(inner, ctx)) }),
        )
        .await
    }
}
