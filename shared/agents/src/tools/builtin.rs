//! ADK's built-in tools: `exit_loop`, `transfer_to_agent`, `load_artifacts`, and the
//! tools Gemini runs itself (`google_search`, `url_context`, `code_execution`).

use adk_grpc_core::{AdkError, BuiltinTool, CallbackContext, Content, LlmRequest, Result, Tool, ToolContext};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

/// Appends a paragraph to the request's system instruction.
pub(super) fn append_instruction(request: &mut LlmRequest, text: &str) {
    match &mut request.system_instruction {
        Some(existing) if !existing.is_empty() => {
            existing.push_str("\n\n");
            existing.push_str(text);
        }
        _ => request.system_instruction = Some(text.to_string()),
    }
}

/// Ends the enclosing `LoopAgent`: sets `escalate` (the loop stops) and
/// `skip_summarization` (the agent's turn ends without another model call).
#[derive(Debug, Clone, Copy, Default)]
pub struct ExitLoopTool;

impl ExitLoopTool {
    pub const NAME: &'static str = "exit_loop";
}

#[async_trait]
impl Tool for ExitLoopTool {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn description(&self) -> &str {
        // ADK's docstring, as its FunctionTool declares it (blank line included).
        "Exits the loop.\n\nCall this function only when you are instructed to do so."
    }
    fn safe_to_repeat(&self) -> bool {
        true
    }
    async fn execute(&self, ctx: Arc<dyn ToolContext>, _args: Value) -> Result<Value> {
        let mut actions = ctx.actions();
        actions.escalate = Some(true);
        actions.skip_summarization = Some(true);
        ctx.set_actions(actions);
        Ok(Value::Null)
    }
}

/// Hands the conversation to one of the agent's sub-agents. LLM agents with
/// sub-agents offer it by themselves. Its declaration and the instruction it adds are
/// ADK's, word for word (`TransferToAgentTool` and the agent transfer request processor):
/// an agent moved from ADK Python sees the same request.
#[derive(Debug, Clone)]
pub(crate) struct TransferToAgentTool {
    /// (name, description) of each agent one may transfer to.
    targets: Vec<(String, String)>,
    /// The parent the agent may hand the question back to (told in its own line).
    parent: Option<String>,
    /// Whether the instruction is added: ADK leaves it out for a task or single-turn
    /// agent (ADK 2's `mode`), which is offered the tool alone.
    instructed: bool,
}

impl TransferToAgentTool {
    pub(crate) const NAME: &'static str = crate::rules::TRANSFER_TOOL_NAME;

    pub(crate) fn new(targets: Vec<(String, String)>, parent: Option<String>) -> Self {
        TransferToAgentTool {
            targets,
            parent,
            instructed: true,
        }
    }

    /// The tool without its instruction, as ADK offers it to a task or single-turn agent.
    pub(crate) fn without_instruction(targets: Vec<(String, String)>) -> Self {
        TransferToAgentTool {
            targets,
            parent: None,
            instructed: false,
        }
    }

    /// ADK's transfer instruction (`_build_transfer_instructions`), its line breaks included.
    fn instruction(&self) -> String {
        let agents: Vec<String> = self
            .targets
            .iter()
            .map(|(name, description)| format!("\nAgent name: {name}\nAgent description: {description}\n"))
            .collect();
        let mut names: Vec<String> = self.targets.iter().map(|(name, _)| format!("`{name}`")).collect();
        names.sort();
        let mut text = format!(
            "\nYou have a list of other agents to transfer to:\n\n{}\n\n\
             If you are the best to answer the question according to your description,\nyou can answer it.\n\n\
             If another agent is better for answering the question according to its\ndescription, call \
             `{tool}` function to transfer the question to that\nagent. When transferring, do not generate any \
             text other than the function\ncall.\n\n\
             **NOTE**: the only available agents for `{tool}` function are\n{}.\n",
            agents.join("\n"),
            names.join(", "),
            tool = Self::NAME,
        );
        if let Some(parent) = &self.parent {
            text.push_str(&format!(
                "\nIf neither you nor the other agents are best for the question, transfer to your parent agent \
                 {parent}.\n"
            ));
        }
        text
    }
}

#[async_trait]
impl Tool for TransferToAgentTool {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn description(&self) -> &str {
        "Transfer the query to another agent.\n\nUse this tool to hand off control to another agent that is more \
         suitable to\nanswer the user's query according to the agent's description.\n\nArgs:\n  agent_name: the \
         agent name to transfer to."
    }
    /// It only records the transfer: a resumed invocation repeats it.
    fn safe_to_repeat(&self) -> bool {
        true
    }
    /// ADK's schema, the titles pydantic gives a Python signature included.
    fn parameters_schema(&self) -> Option<Value> {
        let names: Vec<&str> = self.targets.iter().map(|(name, _)| name.as_str()).collect();
        Some(json!({
            "type": "object",
            "title": "transfer_to_agentParams",
            "properties": { "agent_name": { "type": "string", "title": "Agent Name", "enum": names } },
            "required": ["agent_name"]
        }))
    }
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        let target = args["agent_name"]
            .as_str()
            .ok_or_else(|| AdkError::Tool("transfer_to_agent needs a string argument `agent_name`".into()))?;
        if !self.targets.iter().any(|(name, _)| name == target) {
            let known: Vec<&str> = self.targets.iter().map(|(name, _)| name.as_str()).collect();
            return Err(AdkError::Tool(format!(
                "there is no agent `{target}` to transfer to; choose one of: {}",
                known.join(", ")
            )));
        }
        let mut actions = ctx.actions();
        actions.transfer_to_agent = Some(target.to_string());
        ctx.set_actions(actions);
        // ADK's tool returns None: stored, and retold to other agents, as {"result": null}.
        Ok(Value::Null)
    }
    async fn process_llm_request(&self, _ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        if self.instructed {
            append_instruction(request, &self.instruction());
        }
        Ok(())
    }
}

/// Lets the model load the session's artifacts into the conversation (ADK's
/// `load_artifacts`): the model is told which artifacts exist; when it calls
/// the tool with some names, the next request carries their contents.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadArtifactsTool;

impl LoadArtifactsTool {
    pub const NAME: &'static str = "load_artifacts";
}

#[async_trait]
impl Tool for LoadArtifactsTool {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn description(&self) -> &str {
        // ADK's, word for word: an agent moved from ADK Python sees the same declaration.
        "Loads artifacts into the session for this request.\n\nNOTE: Call when you need access to artifacts (for \
         example, uploads saved by the\nweb UI)."
    }
    fn parameters_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": { "artifact_names": { "type": "array", "items": { "type": "string" } } }
        }))
    }
    async fn execute(&self, _ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        let names = args.get("artifact_names").cloned().unwrap_or_else(|| json!([]));
        // ADK's answer: the contents go into the next request only, never into the session.
        Ok(json!({
            "artifact_names": names,
            "status": "artifact contents temporarily inserted and removed. to access these artifacts, call \
                       load_artifacts tool again.",
        }))
    }
    async fn process_llm_request(&self, ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        let Some(artifacts) = ctx.artifacts() else {
            return Ok(());
        };
        let names = artifacts.list().await?;
        if names.is_empty() {
            return Ok(());
        }
        // ADK's text, its indentation included, added after every tool's own (ADK's
        // dynamic instruction).
        request.dynamic_instructions.push(format!(
            "You have a list of artifacts:\n  {}\n\n  When the user asks questions about any of the artifacts, \
                 you should call the\n  `load_artifacts` function to load the artifact. Always call load_artifacts\n  \
                 before answering questions related to the artifacts, regardless of whether the\n  artifacts have \
                 been loaded before. Do not depend on prior answers about the\n  artifacts.\n  ",
            python_json_list(&names)
        ));
        // Right after the model asked for artifacts, hand them over.
        let requested = request
            .contents
            .last()
            .into_iter()
            .flat_map(Content::function_responses)
            .filter(|response| response.name == Self::NAME)
            .filter_map(|response| response.response["artifact_names"].as_array().cloned());
        let requested: Vec<String> = requested
            .flatten()
            .filter_map(|name| name.as_str().map(str::to_string))
            .collect();
        for name in requested {
            let content = match artifacts.load(&name).await {
                Ok(part) => Content::new("user")
                    .with_text(format!("Artifact {name} is:"))
                    .with_part(part),
                Err(e) => Content::new("user").with_text(format!("Artifact {name} could not be loaded: {e}")),
            };
            request.contents.push(content);
        }
        Ok(())
    }
}

/// A list of names as Python's `json.dumps` writes it (`["a", "b"]`: a space after each comma).
fn python_json_list(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| json!(name).to_string()).collect();
    format!("[{}]", quoted.join(", "))
}

/// A tool the model's provider runs itself (ADK's `google_search`, `url_context`, and
/// `BuiltInCodeExecutor` as `code_execution`): it names itself in the request and is
/// never executed here; the reply carries what the provider did (grounding metadata,
/// executable code and its result). Only Gemini models have these tools.
#[derive(Debug, Clone, Copy)]
pub struct ProviderBuiltinTool(BuiltinTool);

impl ProviderBuiltinTool {
    pub const GOOGLE_SEARCH: &'static str = "google_search";
    pub const URL_CONTEXT: &'static str = "url_context";
    pub const CODE_EXECUTION: &'static str = "code_execution";
    pub const GOOGLE_MAPS: &'static str = "google_maps_grounding";

    pub fn new(tool: BuiltinTool) -> Self {
        ProviderBuiltinTool(tool)
    }

    /// The tool called `name`, if it is one of these.
    pub fn named(name: &str) -> Option<Self> {
        [
            BuiltinTool::GoogleSearch,
            BuiltinTool::UrlContext,
            BuiltinTool::CodeExecution,
            BuiltinTool::GoogleMaps,
        ]
        .into_iter()
        .find(|tool| tool.name() == name)
        .map(ProviderBuiltinTool)
    }
}

#[async_trait]
impl Tool for ProviderBuiltinTool {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn description(&self) -> &str {
        match self.0 {
            BuiltinTool::GoogleSearch => "Searches the web (run by the model's provider).",
            BuiltinTool::UrlContext => "Reads the pages of URLs in the conversation (run by the model's provider).",
            BuiltinTool::CodeExecution => "Runs Python code the model writes (run by the model's provider).",
            BuiltinTool::GoogleMaps => "Grounds the reply in Google Maps (run by the model's provider).",
        }
    }
    fn is_provider_builtin(&self) -> bool {
        true
    }
    async fn execute(&self, _ctx: Arc<dyn ToolContext>, _args: Value) -> Result<Value> {
        Err(AdkError::Tool(format!(
            "{} runs on the model's provider, not here",
            self.0.name()
        )))
    }
    async fn process_llm_request(&self, _ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        if !request.config.builtin_tools.contains(&self.0) {
            request.config.builtin_tools.push(self.0);
        }
        Ok(())
    }
}
