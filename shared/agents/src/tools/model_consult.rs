//! ADK's `ModelConsultTool`: the agent's model (the executor) asks another model (the
//! advisor) for guidance mid-task. The advisor is sent, in one user message of parts,
//! the executor's own instruction, its other tools, the session's conversation as
//! transcript lines (calls and results included) and the executor's question, with
//! ADK's instruction to answer with a plan, not the deliverable; its reply is the call's
//! result. Every text the two models read is ADK 2.13's (`model_consult/_prompts.py`
//! and the tool's own), so an agent moved from ADK gets the same requests.
//!
//! Budgets, as ADK keeps them: `max_uses` consults per turn (counted in the `temp:`
//! key `temp:model_consult:<tool>:<invocation>:uses`, gone with the invocation) and
//! `session_max_uses` per session (the key `model_consult:<tool>:session_uses`). A
//! call over budget, or one whose advisor fails, is answered with a message telling
//! the executor to go on with its own judgment: the turn never fails for it.
//!
//! Several consults in one model step are answered one after another, in call order,
//! each counting after those before it (ADK has a consult wait for the others and read
//! their counts from the live session; the runner's steps store their counts with the
//! step's event, so the tool keeps them meanwhile, see [`StepConsults`]).

use super::builtin::append_instruction;
use super::memory::PreloadMemoryTool;
use crate::instruction;
use crate::rules::{SET_MODEL_RESPONSE_TOOL_NAME, TRANSFER_TOOL_NAME};
use adk_grpc_core::{
    AdkError, BuiltinTool, CallbackContext, Content, Event, FinishReason, GenerateContentConfig, Llm, LlmRequest, Part,
    PartKind, Result, Tool, ToolContext, ToolListing, UsageMetadata, python_json,
};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The name ADK gives the tool.
pub const MODEL_CONSULT_TOOL_NAME: &str = "model_consult";

/// Text gets this many times a payload's allowance (prose is rarely what makes a
/// session large, and a reply cut mid-sentence costs the advisor more than it saves).
const TEXT_CHARS_MULTIPLIER: usize = 8;
/// The longest tool description put in the advisor's list of the executor's tools.
const TOOL_DESCRIPTION_LIMIT: usize = 300;
/// How many invocations' tools are remembered for their consults (an invocation's
/// entry is replaced at each model step; old ones fall off).
const SEEN_INVOCATIONS: usize = 256;

/// How much of the executor's session the advisor is sent (ADK's
/// `ModelConsultContextConfig`; the defaults are ADK's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsultContext {
    /// Send the conversation at all; without it the advisor sees the instruction,
    /// the tools and the question only.
    pub include_session: bool,
    /// Only the newest this many events (counted before thoughts and the consult
    /// itself are left out).
    pub max_events: Option<usize>,
    /// The most characters of the whole transcript: past it, whole events are left
    /// out from the middle (the task at the start and the newest kept, the newest
    /// cut to fit). None: no budget.
    pub max_chars: Option<usize>,
    /// The most characters of one tool call, result or code block; text gets eight
    /// times as many.
    pub max_part_chars: usize,
    /// Pass images, audio and files to the advisor as they are (else named only).
    pub include_media: bool,
    /// Include the executor's thoughts, marked as such.
    pub include_thoughts: bool,
}

impl Default for ConsultContext {
    fn default() -> Self {
        ConsultContext {
            include_session: true,
            max_events: None,
            max_chars: Some(200_000),
            max_part_chars: 4_000,
            include_media: true,
            include_thoughts: false,
        }
    }
}

// ADK 2.13's texts, word for word (`model_consult/_prompts.py` and the tool's own): what
// the executor and the advisor read is the behaviour an agent moved from ADK keeps.

/// ADK's `TOOL_DESCRIPTION`: when the executor should consult.
const DESCRIPTION: &str = "Consult a stronger advisor model for strategic guidance. The advisor sees this \
entire conversation -- your instructions, your reasoning, every tool call you made and every result you saw -- \
so do not restate the task.

Call this tool BEFORE substantive work: before writing or editing, before committing to an interpretation, \
before building on an assumption. If the task needs orientation first (finding files, reading the issue, \
seeing what is there), do that first, then call. Orientation is not substantive work. Writing, editing and \
declaring an answer are.

Also call this tool:
- When you believe the task is complete, before you declare it done. Make any deliverable durable first \
(write the file, save the result).
- When stuck: errors recurring, an approach not converging, results that do not fit.
- When considering a change of approach.

On tasks longer than a few steps, call once before committing to an approach and once before declaring done. \
On short reactive tasks where the next action is dictated by output you just read, do not keep calling: most \
of the value is in the first well-timed call.

Returns a plan or course correction, not a finished answer. You still do the work.";

/// The declaration's description of `question`.
const QUESTION_DESCRIPTION: &str = "The specific decision or blocker you want reviewed. State the approach you \
are considering, or what you tried and how it failed. Be concrete; the advisor already sees the conversation, \
so do not restate it.";

/// The declaration's description of `context`.
const CONTEXT_DESCRIPTION: &str = "Optional. Anything material that is NOT visible in the conversation: \
constraints you inferred, observations from outside this session, or the options you are weighing.";

/// ADK's `EXECUTOR_INSTRUCTION`, added to the executor's system instruction; a tool of
/// another name has that name in place of `model_consult` between backticks.
const EXECUTOR_INSTRUCTION: &str = "You have access to a `model_consult` tool backed by a stronger advisor \
model. It sees your entire conversation, so pass only the specific decision you want reviewed.

Call `model_consult` BEFORE substantive work: before writing, before committing to an interpretation, before \
building on an assumption. If the task needs orientation first (finding files, reading the issue, seeing what \
is there), do that first, then call. Orientation is not substantive work. Writing, editing and declaring an \
answer are.

Also call `model_consult`:
- When you believe the task is complete, before declaring it done. Make your deliverable durable first.
- When stuck: errors recurring, an approach not converging, results that do not fit.
- When considering a change of approach.

On tasks longer than a few steps, call at least once before committing to an approach and once before \
declaring done.

Give the advice serious weight. Adapt only if a step fails empirically or you have primary-source evidence \
that contradicts a specific claim; a passing self-check is not evidence the advice is wrong. If your own \
evidence points one way and the advisor points another, do not silently switch: say what you found, say what \
it suggested, and ask which constraint breaks the tie.";

/// ADK's `ADVISOR_SYSTEM_INSTRUCTION`.
const ADVISOR_INSTRUCTION: &str = "You are a senior technical advisor consulted mid-task by a faster, smaller \
executor agent. You are reading the executor's full working session: its instructions, its reasoning so far, \
the tools it called and what those tools returned.

Your job is to make the executor's NEXT steps correct and efficient. Produce a plan or a course correction -- \
not the finished deliverable. The executor does the work; you decide what the work should be.

Answer with:
1. Diagnosis -- in one or two sentences, what is actually going on, including any mistaken assumption the \
executor is operating under.
2. Plan -- concrete numbered next steps the executor can act on directly. Name specific tools, files, \
commands, identifiers and values wherever the session gives you enough to be specific. Vague advice is worse \
than none.
3. Watch out for -- the failure modes, edge cases or verification steps most likely to bite, and how the \
executor will know it is on the wrong track.

Rules:
- Be concrete and brief. Aim for under 300 words; never pad.
- If the executor is already on the right track, say so plainly and give the shortest path to done rather \
than inventing a new approach.
- If the session lacks information you need, say exactly what the executor should gather and how, instead of \
guessing.
- Short code or command snippets are fine when they are the clearest way to specify a step. Do not write out \
the whole solution.
- Never ask the executor a question back; it cannot reply. Decide, and state the assumption you decided \
under.";

/// The advisor's last part (ADK's `ADVISOR_HANDOFF_TEMPLATE`): `{agent_clause}` is
/// ` (<agent>)`, `{context_block}` [`CONTEXT_BLOCK`] or nothing.
const HANDOFF: &str = "--- END OF EXECUTOR SESSION ---

You are now being consulted as the advisor. The executor agent{agent_clause} paused its work and asked you:

{question}
{context_block}
Respond with the diagnosis / plan / watch-out-for structure. Advise the executor on its next steps; do not \
produce the final deliverable yourself.";

/// ADK's `CONTEXT_BLOCK_TEMPLATE`: the call's `context`.
const CONTEXT_BLOCK: &str = "\nAdditional context the executor supplied:\n\n{context}\n";

/// The headers of the executor's instruction and its tools in the advisor's request.
const INSTRUCTION_HEADER: &str = "--- EXECUTOR AGENT INSTRUCTION ({agent}) ---\nThe executor operates under the \
following instruction. Your guidance must respect it.\n\n";
const TOOLS_HEADER: &str = "--- TOOLS AVAILABLE TO THE EXECUTOR ---\nThese are the only tools the executor can \
call. Name them explicitly in your plan, with concrete arguments. Do not propose steps that require tools not \
listed here.\n\n";

/// What stands for the events left out of a transcript over its budget.
const OMISSION_MARKER: &str = "[... {n} earlier turn(s) omitted to fit the context budget ...]";

const TURN_LIMIT: &str = "The advisor consult budget for this turn is exhausted ({max} of {max} used). \
Continue with your own best judgment, reusing the guidance you already received.";
const SESSION_LIMIT: &str = "The advisor consult budget for this session is exhausted ({max} of {max} used). \
Continue with your own best judgment, reusing the guidance you already received.";
const ADVISOR_FAILED: &str = "The advisor could not be reached. Continue with your own best judgment; do not \
retry this tool for the same question.";
const NO_QUESTION: &str = "`question` is required: state the decision or blocker you want reviewed.";

/// See the module documentation.
pub struct ModelConsultTool {
    name: String,
    description: String,
    advisor: Arc<dyn Llm>,
    max_uses: Option<u32>,
    session_max_uses: Option<u32>,
    /// How long the advisor may take (ADK's `timeout_seconds`); past it, the executor
    /// is told to go on alone.
    timeout: Option<Duration>,
    /// The advisor's system instruction (ADK's `advisor_instruction`).
    advisor_instruction: String,
    /// What the executor's system instruction gets; None: nothing (ADK's `""`).
    executor_instruction: Option<String>,
    include_agent_instruction: bool,
    include_tool_inventory: bool,
    context: ConsultContext,
    /// The advisor request's generation settings (thinking and output cap included).
    config: GenerateContentConfig,
    /// By invocation, the agent's tools as its model was last shown them (see
    /// [`Self::tool_inventory`]).
    tools_seen: Mutex<VecDeque<(String, Arc<[ToolListing]>)>>,
    /// By invocation, its consults in progress (ADK's per-session consult state): an
    /// entry lives while one of the invocation's consults runs, so nothing of a step
    /// that dies outlives it (a re-run step counts from the stored state alone).
    in_progress: Mutex<HashMap<String, Arc<StepConsults>>>,
}

/// The consults of one invocation in progress together (a model step's calls run
/// concurrently). The lock is held for a whole consult, so they run one after another
/// in call order (tokio's mutex is first come, first served, and a step starts its
/// calls in order); it holds the counts the finished ones wrote, which their step's
/// event stores only once every call is answered: the next consult counts after them.
#[derive(Default)]
struct StepConsults {
    /// The (turn, session) counts the last finished consult wrote, if any.
    counted: tokio::sync::Mutex<Option<(u32, u32)>>,
    /// How many of the invocation's consults hold this entry.
    holders: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for ModelConsultTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConsultTool")
            .field("name", &self.name)
            .field("advisor", &self.advisor.name())
            .field("max_uses", &self.max_uses)
            .field("session_max_uses", &self.session_max_uses)
            .field("context", &self.context)
            .field("config", &self.config)
            .finish()
    }
}

/// One consult's hold on its invocation's [`StepConsults`]: the last to end, however it
/// ends, drops the entry (as ADK clears its per-invocation deltas when no call is active).
struct StepHold<'a> {
    map: &'a Mutex<HashMap<String, Arc<StepConsults>>>,
    invocation: String,
    step: Arc<StepConsults>,
}

impl<'a> StepHold<'a> {
    fn take(map: &'a Mutex<HashMap<String, Arc<StepConsults>>>, invocation: &str) -> Self {
        let mut entries = adk_grpc_core::sync::lock(map);
        let step = entries.entry(invocation.to_string()).or_default().clone();
        step.holders.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        StepHold {
            map,
            invocation: invocation.to_string(),
            step,
        }
    }
}

impl Drop for StepHold<'_> {
    fn drop(&mut self) {
        // Under the map's lock, so no consult takes the entry while it is dropped.
        let mut entries = adk_grpc_core::sync::lock(self.map);
        if self.step.holders.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            entries.remove(&self.invocation);
        }
    }
}

impl ModelConsultTool {
    /// A consult tool called `name` (the model sees it by that name) asking `advisor`;
    /// no budget until [`Self::with_max_uses`] / [`Self::with_session_max_uses`].
    pub fn new(name: impl Into<String>, advisor: Arc<dyn Llm>) -> Result<Self> {
        let name = name.into();
        crate::rules::validate_tool_name(&name)?;
        Ok(ModelConsultTool {
            description: DESCRIPTION.to_string(),
            advisor,
            max_uses: None,
            session_max_uses: None,
            timeout: None,
            advisor_instruction: ADVISOR_INSTRUCTION.to_string(),
            executor_instruction: Some(
                EXECUTOR_INSTRUCTION.replace(&format!("`{MODEL_CONSULT_TOOL_NAME}`"), &format!("`{name}`")),
            ),
            include_agent_instruction: true,
            include_tool_inventory: true,
            context: ConsultContext::default(),
            config: GenerateContentConfig::default(),
            tools_seen: Mutex::default(),
            in_progress: Mutex::default(),
            name,
        })
    }

    /// At most `max` consults per turn (an invocation); at least 1.
    pub fn with_max_uses(mut self, max: u32) -> Result<Self> {
        self.max_uses = Some(positive("max_uses", max)?);
        Ok(self)
    }

    /// At most `max` consults per session; at least 1.
    pub fn with_session_max_uses(mut self, max: u32) -> Result<Self> {
        self.session_max_uses = Some(positive("session_max_uses", max)?);
        Ok(self)
    }

    /// The most the advisor's answer may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Replaces the description the executor model reads (an empty one keeps ADK's).
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        let description = description.into();
        if !description.trim().is_empty() {
            self.description = description;
        }
        self
    }

    /// Replaces the advisor's system instruction (an empty one keeps ADK's).
    pub fn with_advisor_instruction(mut self, instruction: impl Into<String>) -> Self {
        let instruction = instruction.into();
        if !instruction.trim().is_empty() {
            self.advisor_instruction = instruction;
        }
        self
    }

    /// Replaces the text added to the executor's system instruction, as written (no
    /// placeholders, as ADK's); an empty one adds nothing.
    pub fn with_executor_instruction(mut self, instruction: &str) -> Self {
        let instruction = instruction.trim();
        self.executor_instruction = (!instruction.is_empty()).then(|| instruction.to_string());
        self
    }

    /// Whether the advisor is sent the executor's system instruction [default: yes].
    pub fn with_agent_instruction(mut self, include: bool) -> Self {
        self.include_agent_instruction = include;
        self
    }

    /// Whether the advisor is sent the executor's other tools, names and
    /// descriptions [default: yes].
    pub fn with_tool_inventory(mut self, include: bool) -> Self {
        self.include_tool_inventory = include;
        self
    }

    /// How much of the session the advisor is sent.
    pub fn with_context(mut self, context: ConsultContext) -> Result<Self> {
        for (field, value) in [
            ("max_events", context.max_events),
            ("max_chars", context.max_chars),
            ("max_part_chars", Some(context.max_part_chars)),
        ] {
            if value == Some(0) {
                return Err(AdkError::Config(format!("context_config.{field} must be at least 1")));
            }
        }
        self.context = context;
        Ok(self)
    }

    /// The advisor request's generation settings (its thinking and output cap
    /// included); its tools are always none.
    pub fn with_generate_content_config(mut self, config: GenerateContentConfig) -> Self {
        self.config = config;
        self
    }

    fn tools_seen(&self, invocation_id: &str) -> Arc<[ToolListing]> {
        let seen = adk_grpc_core::sync::lock(&self.tools_seen);
        seen.iter()
            .find(|(id, _)| id == invocation_id)
            .map(|(_, tools)| tools.clone())
            .unwrap_or_default()
    }

    /// The state key counting this turn's consults.
    pub fn turn_uses_key(&self, invocation_id: &str) -> String {
        format!("temp:model_consult:{}:{invocation_id}:uses", self.name)
    }

    /// The state key counting the session's consults.
    pub fn session_uses_key(&self) -> String {
        format!("model_consult:{}:session_uses", self.name)
    }

    fn counts(&self, ctx: &dyn ToolContext) -> (u32, u32) {
        // A count read back from the store may be a whole double (protobuf's Value).
        let read = |key: String| {
            ctx.state()
                .get(&key)
                .and_then(|value| value.as_u64().or_else(|| value.as_f64().map(|n| n.max(0.0) as u64)))
                .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
        };
        (
            read(self.turn_uses_key(ctx.invocation_id())),
            read(self.session_uses_key()),
        )
    }

    fn stats(&self, turn: u32, session: u32) -> Value {
        let left = [
            self.max_uses.map(|max| max.saturating_sub(turn)),
            self.session_max_uses.map(|max| max.saturating_sub(session)),
        ]
        .into_iter()
        .flatten()
        .min();
        json!({
            "used_this_turn": turn,
            "max_uses": self.max_uses,
            "used_this_session": session,
            "session_max_uses": self.session_max_uses,
            "remaining": left,
        })
    }

    /// `text` without this tool's text for the executor's system instruction (ADK's own
    /// and the configured one), trimmed: the advisor reads what the executor was told.
    fn without_executor_instruction(&self, text: &str) -> String {
        let mut text = text.to_string();
        for snippet in self
            .executor_instruction
            .as_deref()
            .into_iter()
            .chain([EXECUTOR_INSTRUCTION])
        {
            if !snippet.is_empty() && text.contains(snippet) {
                text = text.replace(snippet, "");
            }
        }
        text.trim().to_string()
    }

    /// The executor agent's own instructions as ADK forwards them: its static
    /// instruction, then its instruction with the state filled in, without this tool's
    /// text (the root's global instruction and the runner's other additions are not its
    /// own). None when it has none or it is not asked for.
    async fn executor_instruction_for_advisor(&self, ctx: &Arc<dyn ToolContext>) -> Option<String> {
        if !self.include_agent_instruction {
            return None;
        }
        let agent = ctx.calling_agent()?;
        let spec = agent.spec();
        let mut parts = Vec::new();
        // Each text without this tool's own, the empty ones left out, one per line.
        let static_lines: Vec<String> = spec
            .static_instruction
            .iter()
            .map(|text| self.without_executor_instruction(text))
            .filter(|text| !text.is_empty())
            .collect();
        if !static_lines.is_empty() {
            parts.push(static_lines.join("\n"));
        }
        if let Some(template) = spec.instruction {
            let callback_ctx: &dyn CallbackContext = ctx.as_ref();
            // A placeholder that cannot be filled (a required key missing) leaves the
            // template with the state's keys filled in, as ADK falls back.
            let rendered = match instruction::render(template, agent.name(), callback_ctx).await {
                Ok(rendered) => rendered,
                Err(_) => fill_known_keys(template, ctx.as_ref()),
            };
            let text = self.without_executor_instruction(&rendered);
            if !text.is_empty() {
                parts.push(text);
            }
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// The executor's other tools, one line each (`- name: description`, the
    /// description on one line, cut at 300 characters): the agent's own tools in its
    /// order, as ADK lists its `canonical_tools`, not the consult itself, nor the tools
    /// the runner adds for transfers and structured replies; each as ADK's tool of that
    /// kind names and describes it.
    fn tool_inventory(&self, ctx: &dyn ToolContext) -> Option<String> {
        if !self.include_tool_inventory {
            return None;
        }
        let lines: Vec<String> = self
            .tools_seen(ctx.invocation_id())
            .iter()
            .filter(|tool| {
                ![self.name.as_str(), TRANSFER_TOOL_NAME, SET_MODEL_RESPONSE_TOOL_NAME].contains(&tool.name.as_str())
            })
            .filter_map(|tool| {
                if tool.provider_builtin {
                    let name = builtin_tool_name(&tool.name)?;
                    return Some(format!("- {name}: {name}"));
                }
                if tool.name == PreloadMemoryTool::NAME {
                    // ADK's tool is described by its name.
                    return Some(format!("- {0}: {0}", tool.name));
                }
                let description = tool.description.split_whitespace().collect::<Vec<_>>().join(" ");
                Some(match description.char_indices().nth(TOOL_DESCRIPTION_LIMIT) {
                    Some((end, _)) => format!("- {}: {}...", tool.name, &description[..end]),
                    None if description.is_empty() => format!("- {}", tool.name),
                    None => format!("- {}: {description}", tool.name),
                })
            })
            .collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    /// The advisor's request: one user message of parts, the executor's instruction and
    /// tools, the session's transcript (without this call and other consults still
    /// unanswered), then the hand-off with the question, as ADK builds it.
    async fn request(&self, ctx: &Arc<dyn ToolContext>, question: &str, context: Option<&str>) -> LlmRequest {
        let agent = Some(ctx.agent_name().trim()).filter(|name| !name.is_empty() && *name != "unknown");
        let mut content = Content::new("user");
        if let Some(instruction) = self.executor_instruction_for_advisor(ctx).await {
            let header = INSTRUCTION_HEADER.replace("{agent}", agent.unwrap_or("the executor"));
            content = content.with_text(format!("{header}{instruction}"));
        }
        if let Some(tools) = self.tool_inventory(ctx.as_ref()) {
            content = content.with_text(format!("{TOOLS_HEADER}{tools}"));
        }
        let events = ctx.events();
        let mut skip = self.unanswered_consults(&events);
        skip.insert(ctx.function_call_id().to_string());
        for part in transcript(&events, &skip, &self.context) {
            content = content.with_part(part);
        }
        let context_block = context
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .map(|text| CONTEXT_BLOCK.replace("{context}", text))
            .unwrap_or_default();
        let agent_clause = agent.map(|name| format!(" ({name})")).unwrap_or_default();
        let handoff = fill(
            HANDOFF,
            &[
                ("{agent_clause}", &agent_clause),
                ("{question}", question.trim()),
                ("{context_block}", &context_block),
            ],
        );
        content = content.with_text(handoff);
        LlmRequest {
            model: self.advisor.name().to_string(),
            contents: vec![content],
            system_instruction: Some(self.advisor_instruction.clone()),
            tools: Vec::new(),
            config: self.config.clone(),
            ..Default::default()
        }
    }

    /// The ids of this tool's calls in `events` that have no response yet (consults in
    /// flight beside this one): the advisor is not shown them.
    fn unanswered_consults(&self, events: &[Event]) -> HashSet<String> {
        let mut answered = HashSet::new();
        let mut calls = Vec::new();
        for part in events
            .iter()
            .filter_map(Event::content)
            .flat_map(|content| &content.parts)
        {
            match &part.kind {
                PartKind::FunctionResponse { id: Some(id), .. } => {
                    answered.insert(id.clone());
                }
                PartKind::FunctionCall { name, id: Some(id), .. } if *name == self.name => calls.push(id.clone()),
                _ => {}
            }
        }
        calls.into_iter().filter(|id| !answered.contains(id)).collect()
    }

    /// The advisor's answer; a request with thinking the advisor refuses is sent
    /// again without it, once (as ADK does: not every model takes a thinking level).
    async fn ask_allowing_no_thinking(&self, request: LlmRequest) -> std::result::Result<Advice, String> {
        let retry = request.config.thinking.is_some().then(|| {
            let mut plain = request.clone();
            plain.config.thinking = None;
            plain
        });
        match (self.ask(request).await, retry) {
            (Err(AskError::Call(error)), Some(plain)) if refuses_thinking(&error) => {
                tracing::info!(tool = %self.name, advisor = %self.advisor.name(), %error, "the advisor refused thinking; asking without it");
                self.ask(plain).await.map_err(|error| self.error_text(error))
            }
            (asked, _) => asked.map_err(|error| self.error_text(error)),
        }
    }

    /// ADK's words for a failed consult.
    fn error_text(&self, error: AskError) -> String {
        let model = self.advisor.name();
        match error {
            AskError::Call(error) => format!("Advisor ({model}) call failed: {error}"),
            AskError::Reply(code, message) => format!("Advisor ({model}) returned error {code}: {message}"),
            AskError::CutBeforeText {
                max_output_tokens,
                thoughts,
            } => format!(
                "Advisor ({model}) produced no visible text before hitting max_output_tokens={} (thoughts consumed \
                 {thoughts} tokens). Increase max_output_tokens or lower thinking_level.",
                max_output_tokens.map_or_else(|| "None".to_string(), |n| n.to_string())
            ),
            AskError::Empty(finish_reason) => format!(
                "Advisor ({model}) returned an empty response (finish_reason={}).",
                finish_reason.map_or_else(|| "None".to_string(), |reason| format!("FinishReason.{reason:?}"))
            ),
        }
    }

    /// The advisor's answer (its text parts but thoughts, joined), or why there is none.
    async fn ask(&self, request: LlmRequest) -> std::result::Result<Advice, AskError> {
        let max_output_tokens = request.config.max_output_tokens;
        let mut replies = self
            .advisor
            .generate_content(request, false)
            .await
            .map_err(|e| AskError::Call(e.to_string()))?;
        let mut text = String::new();
        let (mut model, mut finish_reason, mut usage) = (None, None, None);
        while let Some(reply) = replies.next().await {
            let reply = reply.map_err(|e| AskError::Call(e.to_string()))?;
            if reply.model_version.is_some() {
                model = reply.model_version.clone();
            }
            if reply.finish_reason.is_some() {
                finish_reason = reply.finish_reason;
            }
            if reply.usage_metadata.is_some() {
                usage = reply.usage_metadata.clone();
            }
            if let Some(code) = reply.error_code.as_deref().filter(|code| !code.is_empty())
                && finish_reason != Some(FinishReason::MaxTokens)
                && !code.to_ascii_uppercase().ends_with("MAX_TOKENS")
            {
                let message = reply.error_message.clone().unwrap_or_else(|| "no message".into());
                return Err(AskError::Reply(code.to_string(), message));
            }
            if reply.partial == Some(true) {
                continue;
            }
            if let Some(content) = &reply.content {
                text.extend(content.parts.iter().filter_map(Part::text));
            }
        }
        let cut = finish_reason == Some(FinishReason::MaxTokens);
        let usage = advisor_usage(usage.as_ref());
        let text = text.trim();
        if text.is_empty() {
            return Err(if cut {
                AskError::CutBeforeText {
                    max_output_tokens,
                    thoughts: usage["thoughts_tokens"].as_i64().unwrap_or(0),
                }
            } else {
                AskError::Empty(finish_reason)
            });
        }
        let guidance = match cut {
            true => format!("{text}\n\n[advisor guidance truncated at max_output_tokens]"),
            false => text.to_string(),
        };
        Ok(Advice {
            guidance,
            model: model.unwrap_or_else(|| self.advisor.name().to_string()),
            usage,
        })
    }
}

/// Why the advisor gave no guidance.
enum AskError {
    /// The call failed (the provider's error).
    Call(String),
    /// The reply carried an error code and message.
    Reply(String, String),
    /// The output cap was reached before any text (thinking took it all).
    CutBeforeText {
        max_output_tokens: Option<i32>,
        thoughts: i64,
    },
    /// No text, for the reason given.
    Empty(Option<FinishReason>),
}

/// The advisor's answer as ADK's `AdvisorResult` has it.
struct Advice {
    guidance: String,
    /// The model that answered, as its reply names it (else the advisor's name).
    model: String,
    usage: Value,
}

/// The advisor reply's token counts as ADK's `AdvisorUsage.to_dict()` writes them: the
/// prompt's with the tool-use prompt's, the candidates' without thoughts, and the total
/// the provider reported (else their sum).
fn advisor_usage(usage: Option<&UsageMetadata>) -> Value {
    let count = |n: Option<i32>| i64::from(n.unwrap_or(0).max(0));
    let usage = usage.cloned().unwrap_or_default();
    let prompt = count(usage.prompt_token_count) + count(usage.tool_use_prompt_token_count);
    let output = count(usage.candidates_token_count);
    let thoughts = count(usage.thoughts_token_count);
    let total = match count(usage.total_token_count) {
        0 => prompt + output + thoughts,
        total => total,
    };
    json!({
        "prompt_tokens": prompt,
        "output_tokens": output,
        "thoughts_tokens": thoughts,
        "cached_tokens": count(usage.cached_content_token_count),
        "total_tokens": total,
    })
}

fn positive(field: &str, max: u32) -> Result<u32> {
    if max == 0 {
        return Err(AdkError::Config(format!(
            "{field} must be at least 1 (leave it out for no limit)"
        )));
    }
    Ok(max)
}

/// Whether an advisor's error says it refused the request's thinking settings: ADK's
/// test (a thinking field named, or thinking said to be unsupported), and the same of
/// `reasoning_effort`, the field an OpenAI-compatible server names.
fn refuses_thinking(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    let fields = [
        "thinking_config",
        "thinkingconfig",
        "thinking_level",
        "thinking level",
        "thinking_budget",
        "thinking budget",
        "reasoning_effort",
    ];
    let refusals = [
        "unsupported",
        "not support",
        "unknown",
        "unexpected",
        "only available",
        "not allowed",
        "cannot",
    ];
    fields.iter().any(|field| error.contains(field))
        || (["thinking", "reasoning"].iter().any(|word| error.contains(word))
            && refusals.iter().any(|word| error.contains(word)))
}

/// A provider's built-in tool as ADK's inventory names it: by ADK's tool name, which is
/// also the tool's description there (`- google_search: google_search`). None for code
/// execution, an agent's code executor in ADK, not one of its tools.
fn builtin_tool_name(tool: &str) -> Option<&'static str> {
    [
        (BuiltinTool::GoogleSearch, "google_search"),
        (BuiltinTool::UrlContext, "url_context"),
        // ADK's `google_maps_grounding` is a tool named `google_maps`.
        (BuiltinTool::GoogleMaps, "google_maps"),
    ]
    .into_iter()
    .find(|(builtin, _)| builtin.name() == tool)
    .map(|(_, adk_name)| adk_name)
}

/// `template` with each `{key}` of the state replaced by its value (ADK's fallback when
/// the instruction cannot be templated).
fn fill_known_keys(template: &str, ctx: &dyn ToolContext) -> String {
    let mut text = template.to_string();
    for (key, value) in ctx.state().all() {
        if crate::rules::is_identifier(&key) {
            let value = match value {
                Value::Null => String::new(),
                Value::String(text) => text,
                other => other.to_string(),
            };
            text = text.replace(&format!("{{{key}}}"), &value);
        }
    }
    text
}

/// `template` with each of its `{name}`s in `values` replaced in one pass (as Python's
/// `str.format`): a value holding another's name is left as written.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match values.iter().find(|(name, _)| rest.starts_with(name)) {
            Some((name, value)) => {
                out.push_str(value);
                rest = &rest[name.len()..];
            }
            None => {
                out.push('{');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `text` cut to at most `limit` characters, the cut noted within the limit (ADK's
/// `_truncate`).
fn truncate(text: &str, limit: usize) -> String {
    let length = text.chars().count();
    if length <= limit {
        return text.to_string();
    }
    let widest_note = format!("\n[... {length} characters truncated ...]").chars().count();
    let head = |n: usize| text.chars().take(n).collect::<String>();
    match limit.checked_sub(widest_note).filter(|keep| *keep > 0) {
        None => head(limit),
        Some(keep) => format!("{}\n[... {} characters truncated ...]", head(keep), length - keep),
    }
}

/// A part named in text (ADK's `_describe_media_part`), for media left out.
fn describe_media(part: &Part, reason: &str) -> String {
    match &part.kind {
        PartKind::FileData { file_uri, .. } => format!("[file {reason}: {file_uri}]"),
        kind => {
            let mime_type = match kind {
                PartKind::InlineData { mime_type, .. } if !mime_type.is_empty() => mime_type.as_str(),
                _ => "unknown",
            };
            format!("[media {reason}: {mime_type}]")
        }
    }
}

/// One part of an event as the advisor reads it (ADK's `_convert_part`): calls and
/// results as text lines, text labelled with its speaker, media passed or named; None
/// for what is left out (thoughts unless asked for, the calls of `skip`, blank text).
fn transcript_part(part: &Part, author: &str, skip: &HashSet<String>, config: &ConsultContext) -> Option<Part> {
    if part.is_thought() && !config.include_thoughts {
        return None;
    }
    let payload = config.max_part_chars;
    let line = match &part.kind {
        PartKind::FunctionCall { name, args, id } => {
            if id.as_ref().is_some_and(|id| skip.contains(id)) {
                return None;
            }
            let args = match args {
                Value::Null => String::new(),
                Value::Object(map) if map.is_empty() => String::new(),
                args => truncate(&python_json(args), payload),
            };
            format!("[tool_call] {name}({args})")
        }
        PartKind::FunctionResponse { function_response, id } => {
            if id.as_ref().is_some_and(|id| skip.contains(id)) {
                return None;
            }
            let body = match &function_response.response {
                Value::Null => String::new(),
                Value::String(text) => truncate(text, payload),
                response => truncate(&python_json(response), payload),
            };
            format!("[tool_result] {} -> {body}", function_response.name)
        }
        PartKind::Text { text } => {
            let text = truncate(text, payload.saturating_mul(TEXT_CHARS_MULTIPLIER));
            if text.trim().is_empty() {
                return None;
            }
            match (part.is_thought(), author) {
                (true, _) => format!("[thought] {text}"),
                (false, "user") => format!("[user] {text}"),
                (false, "") => format!("[agent] {text}"),
                (false, author) => format!("[agent:{author}] {text}"),
            }
        }
        PartKind::InlineData { .. } | PartKind::FileData { .. } if config.include_media => return Some(part.clone()),
        PartKind::InlineData { .. } | PartKind::FileData { .. } => describe_media(part, "omitted"),
        PartKind::ExecutableCode { code, .. } => {
            format!("[code]\n{}", truncate(code.as_deref().unwrap_or_default(), payload))
        }
        PartKind::CodeExecutionResult { output, .. } => {
            format!(
                "[code_result] {}",
                truncate(output.as_deref().unwrap_or_default(), payload)
            )
        }
    };
    Some(Part::text_part(line))
}

/// What a part costs of the character budget: its text's characters, media a rough
/// quarter of its bytes (so a turn of images cannot sail past the budget).
fn part_chars(part: &Part) -> usize {
    match &part.kind {
        PartKind::Text { text } => text.chars().count(),
        PartKind::InlineData { data, .. } => data.len() / 4,
        _ => 0,
    }
}

fn turn_chars(turn: &[Part]) -> usize {
    turn.iter().map(part_chars).sum()
}

/// A turn cut to `limit` characters (ADK's `_truncate_content`): texts cut, media kept
/// while it fits, else named.
fn truncate_turn(turn: Vec<Part>, limit: usize) -> Vec<Part> {
    let mut kept = Vec::new();
    let mut used = 0;
    for part in turn {
        if used >= limit {
            continue;
        }
        if let PartKind::Text { text } = &part.kind {
            kept.push(Part::text_part(truncate(text, limit - used)));
            used += text.chars().count();
            continue;
        }
        let cost = part_chars(&part);
        if cost <= limit - used {
            kept.push(part);
            used += cost;
            continue;
        }
        let placeholder = truncate(
            &describe_media(&part, "omitted to fit the context budget"),
            limit - used,
        );
        if !placeholder.is_empty() {
            used += placeholder.chars().count();
            kept.push(Part::text_part(placeholder));
        }
    }
    kept
}

/// The turns within `max_chars` (ADK's `_apply_char_budget`): the oldest kept up to a
/// quarter of the budget (the task), then the newest that fit, a marker for those left
/// out between; the newest is always kept, cut when it alone does not fit.
fn within_budget(turns: Vec<Vec<Part>>, max_chars: Option<usize>) -> Vec<Vec<Part>> {
    let Some(max) = max_chars else {
        return turns;
    };
    let sizes: Vec<usize> = turns.iter().map(|turn| turn_chars(turn)).collect();
    if turns.is_empty() || sizes.iter().sum::<usize>() <= max {
        return turns;
    }
    let marker_chars = OMISSION_MARKER.chars().count();
    let mut head_len = 0;
    let mut used = 0;
    for size in &sizes {
        if used + size > max / 4 {
            break;
        }
        head_len += 1;
        used += size;
    }
    let remaining = max.saturating_sub(used + marker_chars);
    let mut tail_len = 0;
    let mut tail_used = 0;
    for size in sizes[head_len..].iter().rev() {
        if tail_used + size > remaining && tail_len > 0 {
            break;
        }
        tail_len += 1;
        tail_used += size;
    }
    let dropped = turns.len() - head_len - tail_len;
    let newest_chars = sizes[sizes.len() - 1];
    let mut fixed = used + tail_used - newest_chars;
    let mut marker = (dropped > 0).then(|| vec![Part::text_part(OMISSION_MARKER.replace("{n}", &dropped.to_string()))]);
    if let Some(text) = &marker {
        let chars = turn_chars(text);
        if max.saturating_sub(fixed + chars) == 0 {
            // Too small a budget for both: the newest turn is what the advisor is asked about.
            marker = None;
        } else {
            fixed += chars;
        }
    }
    let mut turns = turns;
    let tail = turns.split_off(turns.len() - tail_len);
    turns.truncate(head_len);
    turns.extend(marker);
    turns.extend(tail);
    let allowance = max.saturating_sub(fixed);
    if allowance < newest_chars
        && let Some(newest) = turns.pop()
    {
        turns.push(truncate_turn(newest, allowance));
    }
    turns.retain(|turn| !turn.is_empty());
    turns
}

/// The session as the advisor reads it (ADK's `build_advisor_contents`): the events
/// that survive rewinds, complete ones only, the newest `max_events`; each event's parts
/// converted ([`transcript_part`]), then held to the character budget
/// ([`within_budget`]), in one run of parts.
fn transcript(events: &[Event], skip: &HashSet<String>, config: &ConsultContext) -> Vec<Part> {
    if !config.include_session {
        return Vec::new();
    }
    let live: Vec<&Event> = adk_grpc_core::history::surviving_rewinds(events)
        .filter(|event| event.llm_response.partial != Some(true))
        .collect();
    let from = live.len() - config.max_events.unwrap_or(usize::MAX).min(live.len());
    let turns: Vec<Vec<Part>> = live[from..]
        .iter()
        .filter_map(|event| {
            let content = event.content()?;
            let parts: Vec<Part> = content
                .parts
                .iter()
                .filter_map(|part| transcript_part(part, &event.author, skip, config))
                .collect();
            (!parts.is_empty()).then_some(parts)
        })
        .collect();
    within_budget(turns, config.max_chars).into_iter().flatten().collect()
}

#[async_trait]
impl Tool for ModelConsultTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    /// In Gemini's `Schema` form, upper-case types, as ADK declares it (an OpenAI
    /// model gets the types in lower case, as ADK's LiteLlm sends them).
    fn parameters_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "OBJECT",
            "properties": {
                "question": {"type": "STRING", "description": QUESTION_DESCRIPTION},
                "context": {"type": "STRING", "description": CONTEXT_DESCRIPTION}
            },
            "required": ["question"]
        }))
    }

    fn lists_agent_tools(&self) -> bool {
        self.include_tool_inventory
    }

    async fn process_llm_request(&self, ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        if self.include_tool_inventory {
            // Kept as listed (shared, not copied): only a consult reads and words it.
            let mut seen = adk_grpc_core::sync::lock(&self.tools_seen);
            seen.retain(|(id, _)| id != ctx.invocation_id());
            if seen.len() >= SEEN_INVOCATIONS {
                seen.pop_front();
            }
            seen.push_back((ctx.invocation_id().to_string(), request.agent_tools.clone()));
        }
        // Once: a system instruction that has it already (another consult tool's) is left.
        if let Some(instruction) = &self.executor_instruction
            && !request
                .system_instruction
                .as_deref()
                .is_some_and(|system| system.contains(instruction.as_str()))
        {
            append_instruction(request, instruction);
        }
        Ok(())
    }

    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        let question = match &args["question"] {
            Value::String(text) => text.trim().to_string(),
            Value::Null => String::new(),
            other => other.to_string().trim().to_string(),
        };
        if question.is_empty() {
            return Ok(json!({"status": "invalid_request", "message": NO_QUESTION}));
        }
        let context = match &args["context"] {
            Value::String(text) => Some(text.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        };
        let hold = StepHold::take(&self.in_progress, ctx.invocation_id());
        // Held to the end of the consult: the step's next consult waits for this one.
        let mut counted = hold.step.counted.lock().await;
        let (stored_turn, stored_session) = self.counts(ctx.as_ref());
        let (turn, session) = match *counted {
            Some((turn, session)) => (turn.max(stored_turn), session.max(stored_session)),
            None => (stored_turn, stored_session),
        };
        let limit = match (self.session_max_uses, self.max_uses) {
            (Some(max), _) if session >= max => Some(SESSION_LIMIT.replace("{max}", &max.to_string())),
            (_, Some(max)) if turn >= max => Some(TURN_LIMIT.replace("{max}", &max.to_string())),
            _ => None,
        };
        if let Some(message) = limit {
            return Ok(json!({"status": "limit_reached", "message": message, "consults": self.stats(turn, session)}));
        }
        let request = self.request(&ctx, &question, context.as_deref()).await;
        let started = std::time::Instant::now();
        let asked = match self.timeout {
            Some(timeout) => tokio::time::timeout(timeout, self.ask_allowing_no_thinking(request))
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "Advisor ({}) timed out after {}s.",
                        self.advisor.name(),
                        timeout.as_secs_f64()
                    ))
                }),
            None => self.ask_allowing_no_thinking(request).await,
        };
        match asked {
            Ok(advice) => {
                let (turn, session) = (turn + 1, session + 1);
                *counted = Some((turn, session));
                let mut actions = ctx.actions();
                actions
                    .state_delta
                    .insert(self.turn_uses_key(ctx.invocation_id()), json!(turn));
                actions.state_delta.insert(self.session_uses_key(), json!(session));
                ctx.set_actions(actions);
                // ADK's success payload, in its order.
                Ok(json!({
                    "status": "ok",
                    "guidance": advice.guidance,
                    "advisor_model": advice.model,
                    "thinking_level": self.config.thinking.as_ref().and_then(|thinking| thinking.effort),
                    "consults": self.stats(turn, session),
                    "usage": advice.usage,
                    "latency_ms": started.elapsed().as_secs_f64() * 1000.0,
                }))
            }
            Err(error) => {
                tracing::warn!(tool = %self.name, advisor = %self.advisor.name(), %error, "the advisor failed; the executor goes on alone");
                Ok(json!({
                    "status": "error",
                    "error": error,
                    "message": ADVISOR_FAILED,
                    "advisor_model": self.advisor.name(),
                    "consults": self.stats(turn, session),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::{FunctionResponseData, Part};

    fn texts(parts: &[Part]) -> Vec<String> {
        parts
            .iter()
            .map(|part| part.text().map_or_else(|| "<media>".to_string(), str::to_string))
            .collect()
    }

    fn skip(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|id| id.to_string()).collect()
    }

    #[test]
    fn the_advisors_usage_is_counted_as_adks_advisor_usage() {
        let usage = UsageMetadata {
            prompt_token_count: Some(9),
            tool_use_prompt_token_count: Some(2),
            candidates_token_count: Some(4),
            thoughts_token_count: Some(3),
            cached_content_token_count: Some(5),
            ..Default::default()
        };
        // No total reported: the sum of prompt, output and thoughts.
        assert_eq!(
            advisor_usage(Some(&usage)),
            json!({"prompt_tokens": 11, "output_tokens": 4, "thoughts_tokens": 3, "cached_tokens": 5, "total_tokens": 18})
        );
        let reported = UsageMetadata {
            total_token_count: Some(30),
            ..usage
        };
        assert_eq!(advisor_usage(Some(&reported))["total_tokens"], 30);
        assert_eq!(
            advisor_usage(None),
            json!({"prompt_tokens": 0, "output_tokens": 0, "thoughts_tokens": 0, "cached_tokens": 0, "total_tokens": 0})
        );
    }

    #[test]
    fn the_handoff_fills_each_field_once() {
        let filled = fill(
            HANDOFF,
            &[
                ("{agent_clause}", " (coder)"),
                ("{question}", "Is {context_block} a field?"),
                ("{context_block}", ""),
            ],
        );
        assert!(
            filled.contains(
                "The executor agent (coder) paused its work and asked you:\n\nIs {context_block} a field?\n\nRespond"
            ),
            "{filled}"
        );
    }

    #[test]
    fn a_cut_text_notes_what_was_cut_within_its_limit() {
        assert_eq!(truncate("short", 10), "short");
        // Room is kept for the widest note (the whole length's): this one is a digit shorter.
        let cut = truncate(&"é".repeat(100), 60);
        assert_eq!(cut.chars().count(), 59, "{cut}");
        assert!(cut.ends_with("\n[... 75 characters truncated ...]"), "{cut}");
        // Too small a limit for the note: the text's start only.
        assert_eq!(truncate(&"x".repeat(100), 5), "xxxxx");
    }

    #[test]
    fn the_transcript_leaves_out_the_consult_being_made_and_cuts_long_payloads() {
        let user = Event::new("e-1")
            .with_author("user")
            .with_content(Content::new("user").with_text("find the bug"));
        let calls = Event::new("e-1").with_author("coder").with_content(
            Content::new("model")
                .with_part(Part::function_call(
                    "grep",
                    json!({"q": "x".repeat(10_000)}),
                    Some("c1".into()),
                ))
                .with_part(Part::function_call(
                    "model_consult",
                    json!({"question": "?"}),
                    Some("c2".into()),
                )),
        );
        let result = Event::new("e-1")
            .with_author("coder")
            .with_content(Content::new("tool").with_part(Part::function_response(
                FunctionResponseData {
                    name: "grep".into(),
                    response: json!({"hits": 3, "files": ["a.rs"]}),
                },
                Some("c1".into()),
            )));
        let lines = texts(&transcript(
            &[user, calls, result],
            &skip(&["c2"]),
            &ConsultContext::default(),
        ));
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0], "[user] find the bug");
        assert!(lines[1].starts_with("[tool_call] grep({\"q\": \"xxx"), "{}", lines[1]);
        assert!(lines[1].ends_with(" characters truncated ...])"), "{}", lines[1]);
        assert_eq!(lines[1].chars().count(), "[tool_call] grep()".len() + 3_999);
        // Python's json.dumps spacing, as ADK renders a result.
        assert_eq!(lines[2], "[tool_result] grep -> {\"hits\": 3, \"files\": [\"a.rs\"]}");
    }

    #[test]
    fn a_long_transcript_keeps_the_task_and_the_newest_turns() {
        let events: Vec<Event> = (0..100)
            .map(|i| {
                Event::new("e-1")
                    .with_author("user")
                    .with_content(Content::new("user").with_text(format!("{i} {}", "y".repeat(5_000))))
            })
            .collect();
        let lines = texts(&transcript(&events, &skip(&[]), &ConsultContext::default()));
        let total: usize = lines.iter().map(|line| line.chars().count()).sum();
        assert!(total <= 200_000, "{total}");
        assert!(lines[0].starts_with("[user] 0 "));
        assert_eq!(lines.len(), 40);
        let marker = lines
            .iter()
            .position(|line| line.contains("earlier turn(s) omitted"))
            .unwrap();
        // The head is a quarter of the budget: 9 turns of 5,009 characters.
        assert_eq!(marker, 9, "{:?}", &lines[marker]);
        assert!(lines.last().unwrap().starts_with("[user] 99 "));
    }

    #[test]
    fn media_is_passed_or_named_and_the_budget_cuts_the_newest_turn() {
        let events = [
            Event::new("e-1").with_author("user").with_content(
                Content::new("user")
                    .with_text("look")
                    .with_part(Part::inline_data("image/png", vec![0; 40])),
            ),
            Event::new("e-1")
                .with_author("coder")
                .with_content(Content::new("model").with_text("z".repeat(500))),
        ];
        let passed = texts(&transcript(&events, &skip(&[]), &ConsultContext::default()));
        assert_eq!(passed[1], "<media>");
        let named = ConsultContext {
            include_media: false,
            max_chars: Some(100),
            ..Default::default()
        };
        // The first turn does not fit a quarter of the budget: only the newest is kept,
        // cut to the budget less the marker's room.
        let lines = texts(&transcript(&events, &skip(&[]), &named));
        assert!(lines[0].contains("1 earlier turn(s) omitted"), "{lines:?}");
        assert!(lines[1] == "[age\n[... 510 characters truncated ...]", "{lines:?}");
        let total: usize = lines.iter().map(|line| line.chars().count()).sum();
        assert!(total <= 100, "{lines:?}");
        let named = ConsultContext {
            include_media: false,
            ..Default::default()
        };
        let lines = texts(&transcript(&events, &skip(&[]), &named));
        assert_eq!(lines[1], "[media omitted: image/png]");
    }
}
