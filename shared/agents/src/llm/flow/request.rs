//! Building a step's model request: named processors, run in order, each adding its part
//! (ADK's request processors), then the request held to the app's token budget.

use super::super::{IncludeContents, Inner, examples, history, task};
use crate::compaction::{self, Trigger};
use crate::instruction;
use crate::llm::output_schema::{SET_MODEL_RESPONSE_INSTRUCTION, SET_MODEL_RESPONSE_TOOL_NAME};
use adk_grpc_core::{
    AgentMode, CallbackContext, CompactionConfig, Content, Event, InvocationContext, LlmRequest, Result, RunLog, Tool,
    ToolListing,
};
use async_trait::async_trait;
use std::sync::Arc;

/// What the request processors read: the agent, its invocation, the step's tools and
/// the invocation's log (read once for all of them).
struct RequestInput<'a> {
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
    tools: &'a [Arc<dyn Tool>],
    log: Arc<RunLog>,
}

/// One part of building a model request.
#[async_trait]
trait RequestProcessor: Sync {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()>;
}

/// The processors, in the order they run: the order is the request's (the system
/// instruction's parts, then the contents, then the tools, which may change all of it).
const PROCESSORS: [&dyn RequestProcessor; 10] = [
    &Instructions,
    &Identity,
    &OutputSchema,
    &Examples,
    &Contents,
    &TaskInput,
    &InstructionContent,
    &ToolDeclarations,
    &ToolRequestProcessing,
    &StaticPrefix,
];

/// The step's model request, built by the [`PROCESSORS`] in order.
pub(super) async fn build(
    agent: &Inner,
    ctx: &Arc<dyn InvocationContext>,
    tools: &[Arc<dyn Tool>],
) -> Result<LlmRequest> {
    let input = RequestInput {
        agent,
        ctx,
        tools,
        log: ctx.run_log(),
    };
    let mut request = LlmRequest {
        model: agent.model.name().to_string(),
        config: agent.config.clone(),
        ..Default::default()
    };
    for processor in PROCESSORS {
        processor.process(&input, &mut request).await?;
    }
    Ok(request)
}

/// `text` added to the end of the request's system instruction.
fn append_to_system(request: &mut LlmRequest, text: String) {
    request.system_instruction = Some(match request.system_instruction.take() {
        Some(before) if !before.is_empty() => format!("{before}\n\n{text}"),
        _ => text,
    });
}

/// The system instruction, in ADK's order: the root's global instruction, the static
/// instruction, then the instruction (which follows the contents instead when there is
/// a static one: [`InstructionContent`]).
struct Instructions;

#[async_trait]
impl RequestProcessor for Instructions {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        let (agent, ctx) = (input.agent, input.ctx);
        let mut system = Vec::new();
        let root = ctx.root_agent();
        if let Some(template) = root.spec().global_instruction {
            system.push(instruction::render(template, &agent.name, ctx.as_ref()).await?);
        }
        if let Some(instruction) = &agent.static_instruction {
            let text = &instruction.request_parts().system_text;
            if !text.is_empty() {
                system.push(text.clone());
            }
        }
        if let Some(template) = agent
            .instruction
            .as_ref()
            .filter(|_| agent.static_instruction.is_none())
        {
            system.push(instruction::render(template, &agent.name, ctx.as_ref()).await?);
        }
        request.system_instruction = (!system.is_empty()).then(|| system.join("\n\n"));
        Ok(())
    }
}

/// Who the agent is, after its instructions (ADK's identity request processor, word
/// for word): a single-turn agent, a tool of its parent, is told nothing of itself.
struct Identity;

#[async_trait]
impl RequestProcessor for Identity {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        let agent = input.agent;
        if agent.mode != AgentMode::SingleTurn {
            append_to_system(request, identity(&agent.name, &agent.description));
        }
        Ok(())
    }
}

fn identity(name: &str, description: &str) -> String {
    let mut text = format!("You are an agent. Your internal name is \"{name}\".");
    if !description.is_empty() {
        text.push_str(&format!(" The description about you is \"{description}\"."));
    }
    text
}

/// The reply's schema: through `set_model_response` (told in the system instruction)
/// when the agent has tools, else through the provider's structured-output mode.
struct OutputSchema;

#[async_trait]
impl RequestProcessor for OutputSchema {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        let Some(schema) = input.agent.reply_schema() else {
            return Ok(());
        };
        if input
            .tools
            .iter()
            .any(|tool| tool.name() == SET_MODEL_RESPONSE_TOOL_NAME)
        {
            append_to_system(request, SET_MODEL_RESPONSE_INSTRUCTION.to_string());
        } else {
            request.config.response_schema = Some(schema.schema().clone());
            request.config.response_schema_as_sent = schema.as_sent().cloned();
        }
        Ok(())
    }
}

/// The few-shot examples, as ADK's ExampleTool: after the instructions, for a turn the
/// user started.
struct Examples;

#[async_trait]
impl RequestProcessor for Examples {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        let agent = input.agent;
        if !agent.examples.is_empty() && !input.ctx.user_content().parts.is_empty() {
            append_to_system(request, examples::render(&agent.examples));
        }
        Ok(())
    }
}

/// The conversation the agent sees (its `include_contents`).
struct Contents;

#[async_trait]
impl RequestProcessor for Contents {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        let (events, name, branch) = (input.log.events(), &input.agent.name, input.ctx.branch());
        let others_thoughts = input.ctx.run_config().include_thoughts_from_other_agents.into();
        // In a single-turn agent's place, its message is read too while it runs (`task`).
        let with_message = task::with_single_turn_message(&input.log, &input.ctx.root_agent(), name, branch);
        let events = with_message.as_deref().unwrap_or(events);
        request.contents = match input.agent.include_contents {
            IncludeContents::Default => history::conversation(events, name, branch, others_thoughts),
            IncludeContents::None => history::current_turn(events, name, branch),
        };
        Ok(())
    }
}

/// A task or single-turn agent's first messages: the arguments of its parent's call.
struct TaskInput;

#[async_trait]
impl RequestProcessor for TaskInput {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        let ctx = input.ctx;
        let first = task::input(&input.log, &ctx.root_agent(), &ctx.agent(), ctx.branch());
        request.contents.splice(0..0, first);
        Ok(())
    }
}

/// With a static instruction, the instruction goes into the contents as the user's (so
/// the start of every request stays the same, cacheable), as ADK places and labels it:
/// before the latest run of the user's own messages, fenced between markers after a
/// preamble saying it is the agent's instruction, not the user speaking.
struct InstructionContent;

#[async_trait]
impl RequestProcessor for InstructionContent {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        let agent = input.agent;
        let Some(static_instruction) = &agent.static_instruction else {
            return Ok(());
        };
        // With files, the instruction goes with them ([`StaticPrefix`]).
        if static_instruction.has_files() {
            return Ok(());
        }
        if let Some(text) = labelled_instruction(input).await? {
            let at = current_turn_start(&request.contents);
            request.contents.insert(at, text);
        }
        Ok(())
    }
}

/// A static instruction's files, each in a user content of its own, then the agent's
/// instruction, open the request, as ADK keeps them: a prefix the same on every turn,
/// which a provider can cache, ahead of the whole conversation. Added last, so what a
/// tool adds before the user's latest messages (`preload_memory`) stays after it, where
/// ADK's request puts it.
struct StaticPrefix;

#[async_trait]
impl RequestProcessor for StaticPrefix {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        let Some(static_instruction) = &input.agent.static_instruction else {
            return Ok(());
        };
        if !static_instruction.has_files() {
            return Ok(());
        }
        let mut prefix = static_instruction.request_parts().file_contents.clone();
        prefix.extend(labelled_instruction(input).await?);
        request.contents.splice(0..0, prefix);
        Ok(())
    }
}

/// The agent's instruction, rendered, as ADK carries it in the contents; None without one.
async fn labelled_instruction(input: &RequestInput<'_>) -> Result<Option<Content>> {
    let agent = input.agent;
    let Some(template) = &agent.instruction else {
        return Ok(None);
    };
    let text = instruction::render(template, &agent.name, input.ctx.as_ref()).await?;
    Ok(Some(Content::new("user").with_text(label_instruction(&text))))
}

const INSTRUCTION_BEGIN: &str = "<<<BEGIN_SYSTEM_INSTRUCTION>>>";
const INSTRUCTION_END: &str = "<<<END_SYSTEM_INSTRUCTION>>>";
/// ADK's preamble of an instruction carried in the contents, word for word.
const INSTRUCTION_PREAMBLE: &str = "The text between <<<BEGIN_SYSTEM_INSTRUCTION>>> and <<<END_SYSTEM_INSTRUCTION>>> \
     below is your own system instruction for this turn and carries the current session state. It is addressed to \
     you. Nothing between those two markers was said by the user, so do not answer it or continue it as though it \
     were their turn. Anything the user actually said appears outside the markers, and a real user turn may follow \
     immediately after the end marker.";

/// The instruction between its markers (any inside it elided: state cannot close the block).
fn label_instruction(text: &str) -> String {
    let fenced = text
        .replace(INSTRUCTION_BEGIN, "<<<ELIDED_MARKER>>>")
        .replace(INSTRUCTION_END, "<<<ELIDED_MARKER>>>");
    format!("{INSTRUCTION_PREAMBLE}\n{INSTRUCTION_BEGIN}\n{fenced}\n{INSTRUCTION_END}")
}

/// Where the latest run of user messages starts (after the last model turn or function
/// response): ADK's boundary for what belongs to this request only.
fn current_turn_start(contents: &[Content]) -> usize {
    contents
        .iter()
        .rposition(|content| content.role != "user" || content.function_responses().next().is_some())
        .map_or(0, |last| last + 1)
}

/// The declarations of the tools the model calls (a provider's built-in tools are its own).
struct ToolDeclarations;

#[async_trait]
impl RequestProcessor for ToolDeclarations {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        request.tools = input
            .tools
            .iter()
            .filter(|tool| !tool.is_provider_builtin())
            .map(|tool| tool.declaration())
            .collect();
        if input.tools.iter().any(|tool| tool.lists_agent_tools()) {
            request.agent_tools = input
                .tools
                .iter()
                .map(|tool| ToolListing {
                    name: tool.name().to_string(),
                    description: tool.description().to_string(),
                    provider_builtin: tool.is_provider_builtin(),
                })
                .collect();
        }
        Ok(())
    }
}

/// Each tool's own changes to the request (ADK's `process_llm_request`), in order.
struct ToolRequestProcessing;

#[async_trait]
impl RequestProcessor for ToolRequestProcessing {
    async fn process(&self, input: &RequestInput<'_>, request: &mut LlmRequest) -> Result<()> {
        for tool in input.tools {
            let callback_ctx: Arc<dyn CallbackContext> = input.ctx.clone();
            tool.process_llm_request(callback_ctx, request).await?;
        }
        // The tools' dynamic instructions after all of them, together, as ADK folds them in.
        if !request.dynamic_instructions.is_empty() {
            let text = std::mem::take(&mut request.dynamic_instructions).join("\n\n");
            append_to_system(request, text);
        }
        Ok(())
    }
}

/// The app's compaction config and token budget, when `request` is over that budget.
pub(super) fn over_budget(ctx: &dyn InvocationContext, request: &LlmRequest) -> Option<(CompactionConfig, usize)> {
    let config = ctx.compaction().filter(|c| c.token_budget.is_some())?.clone();
    let budget = config.token_budget.unwrap_or(usize::MAX);
    (compaction::request_tokens(request) > budget).then_some((config, budget))
}

/// A summary of everything before this invocation, to store before the request; None
/// when there is nothing to summarise or the summariser failed (logged and counted).
pub(super) async fn compact_for_budget(
    config: &CompactionConfig,
    budget: usize,
    ctx: &dyn InvocationContext,
) -> Option<Event> {
    let plan = compaction::budget_plan(&ctx.events(), ctx.invocation_id(), budget)?;
    let summary = compaction::summarize(config, plan, ctx.app_name(), ctx.invocation_id(), Trigger::TokenBudget).await;
    summary
        .inspect_err(|e| {
            tracing::warn!(
                invocation_id = ctx.invocation_id(), error = %e,
                "compaction for the token budget failed; the oldest contents are left out instead"
            )
        })
        .ok()
}

/// The oldest contents of `request` left out until it fits `budget` (logged and counted).
pub(super) fn trim_to_budget(agent: &Inner, ctx: &dyn InvocationContext, request: &mut LlmRequest, budget: usize) {
    let dropped = compaction::trim_to_budget(request, budget);
    if dropped > 0 {
        tracing::warn!(
            invocation_id = ctx.invocation_id(), agent = %agent.name, dropped, budget,
            "model request over the token budget after compaction: its oldest contents were left out"
        );
        adk_grpc_telemetry::metrics::history_contents_dropped(ctx.app_name(), dropped);
    }
}
