//! ADK's `ModelConsultTool`: the agent's model (the executor) asks another model (the
//! advisor) for guidance mid-task. The advisor is sent the invocation's conversation
//! as a transcript (calls and results included), the executor's question and an
//! instruction to answer with a plan, not the deliverable; its reply is the call's
//! result.
//!
//! Budgets, as ADK keeps them: `max_uses` consults per turn (counted in the `temp:`
//! key `temp:model_consult:<tool>:<invocation>:uses`, gone with the invocation) and
//! `session_max_uses` per session (the key `model_consult:<tool>:session_uses`). A
//! call over budget, or one whose advisor fails, is answered with a message telling
//! the executor to go on with its own judgment: the turn never fails for it.

use super::builtin::append_instruction;
use adk_grpc_core::{
    AdkError, CallbackContext, Content, Event, GenerateContentConfig, Llm, LlmRequest, Part, PartKind, Result, Tool,
    ToolContext, UsageMetadata,
};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The name ADK gives the tool.
pub const MODEL_CONSULT_TOOL_NAME: &str = "model_consult";

/// Text gets this many times a payload's allowance (prose is rarely what makes a
/// session large, and a reply cut mid-sentence costs the advisor more than it saves).
const TEXT_CHARS_MULTIPLIER: usize = 8;
/// The longest tool description put in the advisor's list of the executor's tools.
const TOOL_DESCRIPTION_LIMIT: usize = 300;
/// How many invocations' instructions and tools are remembered for their consults
/// (an invocation's entry is replaced at each model step; old ones fall off).
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
    /// The most characters of the whole transcript: the first line (the task) and
    /// the newest lines are kept, the ones in between left out. None: no budget.
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

/// What the executor's model was shown at its last step of an invocation: its
/// system instruction (before this tool's own text) and its other tools.
#[derive(Debug, Clone, Default)]
struct Seen {
    instruction: Option<String>,
    tools: Vec<(String, String)>,
}

const DESCRIPTION: &str = "Ask a stronger advisor model for guidance. The advisor reads this whole \
conversation (your instructions, the tools you called and what they returned), so ask about the one \
decision or blocker you want reviewed and do not restate the task. Call it before committing to an \
approach, when stuck or considering a change of approach, and before declaring the task done. It returns \
a plan or a correction, not the finished answer: you still do the work.";

const EXECUTOR_INSTRUCTION: &str = "You can consult a stronger advisor model with the `{tool}` tool; it \
sees this whole conversation, so give it only the decision you want reviewed. Consult it once you have \
oriented yourself and before substantive work, when stuck, and before declaring the task done. Weigh its \
advice seriously; when your own evidence contradicts it, say what you found and what it advised.";

const ADVISOR_INSTRUCTION: &str = "You advise an executor agent that paused its task to consult you. You \
are given its working session as a transcript: its messages, the tools it called and what they returned. \
Make its next steps right and efficient: reply with a plan or a correction, never the finished \
deliverable (the executor does the work).\n\nReply with: 1. Diagnosis: in a sentence or two, what is \
going on, including any wrong assumption. 2. Plan: numbered, concrete next steps naming the tools, \
values and identifiers to use. 3. Risks: what is most likely to go wrong and how the executor will \
notice.\n\nBe brief (under 300 words). If the executor is on the right track, say so and give the \
shortest way to done. If information is missing, say what to gather and how. Do not ask questions back: \
the executor cannot answer; decide, and say what you assumed.";

const TURN_LIMIT: &str = "The advisor consult budget for this turn is used up ({max} of {max}). Go on \
with your own best judgment, using the guidance you already received.";
const SESSION_LIMIT: &str = "The advisor consult budget for this session is used up ({max} of {max}). Go \
on with your own best judgment, using the guidance you already received.";
const ONE_AT_A_TIME: &str = "Another consult of the advisor is in progress in this step: ask one question \
at a time. Go on with your own judgment, or ask again after its answer.";
const ADVISOR_FAILED: &str = "The advisor could not be reached. Go on with your own best judgment; do \
not ask it the same question again.";

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
    /// By invocation, what its executor's model was last shown (see [`Seen`]): the
    /// tool context has no access to the agent, and what the model saw is what the
    /// advisor should respect.
    seen: Mutex<VecDeque<(String, Seen)>>,
    /// The invocations with a consult in flight. Consults in one model step run
    /// concurrently and none sees the others' counts (they are stored with the
    /// step's event), so a second one in a step is refused instead of over-spending.
    in_flight: Mutex<HashSet<String>>,
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

/// Takes an invocation out of `in_flight` when its consult ends, however it ends.
struct InFlight<'a> {
    set: &'a Mutex<HashSet<String>>,
    invocation: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        adk_grpc_core::sync::lock(self.set).remove(&self.invocation);
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
            executor_instruction: Some(EXECUTOR_INSTRUCTION.replace("{tool}", &name)),
            include_agent_instruction: true,
            include_tool_inventory: true,
            context: ConsultContext::default(),
            config: GenerateContentConfig::default(),
            seen: Mutex::default(),
            in_flight: Mutex::default(),
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

    fn seen(&self, invocation_id: &str) -> Seen {
        let seen = adk_grpc_core::sync::lock(&self.seen);
        seen.iter()
            .find(|(id, _)| id == invocation_id)
            .map(|(_, seen)| seen.clone())
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
        let read = |key: String| {
            ctx.state()
                .get(&key)
                .and_then(|value| value.as_u64())
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

    /// The advisor's request: the executor's instruction and tools, the transcript of
    /// the conversation (without this call) and the question, in one user message.
    fn request(&self, ctx: &dyn ToolContext, question: &str, context: Option<&str>) -> LlmRequest {
        let agent = ctx.agent_name();
        let seen = self.seen(ctx.invocation_id());
        let mut blocks = Vec::new();
        if let Some(instruction) = seen.instruction.filter(|_| self.include_agent_instruction) {
            blocks.push(format!(
                "--- THE EXECUTOR'S INSTRUCTION ({agent}) ---\nThe executor works under this instruction; your \
                 advice must respect it.\n\n{instruction}"
            ));
        }
        if self.include_tool_inventory && !seen.tools.is_empty() {
            let lines: Vec<String> = seen
                .tools
                .iter()
                .map(|(name, description)| match description.as_str() {
                    "" => format!("- {name}"),
                    description => format!("- {name}: {description}"),
                })
                .collect();
            blocks.push(format!(
                "--- THE EXECUTOR'S TOOLS ---\nThe executor can call these tools and no others: name them in your \
                 plan, with concrete arguments.\n\n{}",
                lines.join("\n")
            ));
        }
        let mut items = transcript(&ctx.events(), ctx.function_call_id(), &self.context);
        if !items.is_empty() {
            items.insert(0, Item::Line("--- THE EXECUTOR'S SESSION ---".into()));
        }
        let extra = context
            .map(|text| format!("\nWhat the executor adds that is not in the session:\n{text}\n"))
            .unwrap_or_default();
        let handoff = format!(
            "--- END OF THE EXECUTOR'S SESSION ---\n\nYou are the advisor now. The executor agent ({agent}) \
             paused its work and asks:\n\n{question}\n{extra}\nAnswer with diagnosis, plan and risks, advising \
             its next steps; do not produce the deliverable yourself.",
        );
        // Each block ends with a blank line, as the transcript does before the handoff.
        let items = blocks
            .into_iter()
            .map(|block| Item::Line(format!("{block}\n")))
            .chain(items)
            .chain([Item::Line(String::new()), Item::Line(handoff)]);
        let mut content = Content::new("user");
        let mut text: Vec<String> = Vec::new();
        for item in items {
            match item {
                Item::Line(line) => text.push(line),
                Item::Media(part) => {
                    if !text.is_empty() {
                        content = content.with_text(std::mem::take(&mut text).join("\n"));
                    }
                    content = content.with_part(*part);
                }
            }
        }
        content = content.with_text(text.join("\n"));
        LlmRequest {
            model: self.advisor.name().to_string(),
            contents: vec![content],
            system_instruction: Some(self.advisor_instruction.clone()),
            tools: Vec::new(),
            config: self.config.clone(),
        }
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
            (Err(error), Some(plain)) if refuses_thinking(&error) => {
                tracing::info!(tool = %self.name, advisor = %self.advisor.name(), %error, "the advisor refused thinking; asking without it");
                self.ask(plain).await
            }
            (asked, _) => asked,
        }
    }

    /// The advisor's answer, or why there is none.
    async fn ask(&self, request: LlmRequest) -> std::result::Result<Advice, String> {
        let mut replies = self
            .advisor
            .generate_content(request, false)
            .await
            .map_err(|e| e.to_string())?;
        while let Some(reply) = replies.next().await {
            let reply = reply.map_err(|e| e.to_string())?;
            if reply.partial == Some(true) {
                continue;
            }
            if let Some(error) = reply.error_message.filter(|e| !e.is_empty()) {
                return Err(error);
            }
            let text = reply.content.as_ref().and_then(Content::text).unwrap_or_default();
            return match text.trim() {
                "" => Err("the advisor's reply was empty".into()),
                text => Ok(Advice {
                    guidance: text.to_string(),
                    model: reply.model_version.unwrap_or_else(|| self.advisor.name().to_string()),
                    usage: advisor_usage(reply.usage_metadata.as_ref()),
                }),
            };
        }
        Err("the advisor ended its reply without a complete response".into())
    }
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

/// Whether an advisor's error says it refused the request's thinking settings.
fn refuses_thinking(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    ["thinking", "reasoning"].iter().any(|word| error.contains(word))
}

/// One piece of the advisor's transcript.
enum Item {
    Line(String),
    /// An image, audio or file part, passed as it is (`include_media`).
    Media(Box<Part>),
}

impl Item {
    /// What it costs of the character budget; media at a rough quarter of its bytes,
    /// as ADK counts it, so a turn of images cannot sail past the budget.
    fn chars(&self) -> usize {
        match self {
            Item::Line(line) => line.len() + 1,
            Item::Media(part) => match &part.kind {
                PartKind::InlineData { data, .. } => data.len() / 4,
                _ => 0,
            },
        }
    }
}

/// The conversation as transcript items (newest `max_events` events), without the
/// parts of call `skip` (the consult being made) and, unless asked for, thoughts;
/// long payloads cut, and, past the budget, the items after the first left out from
/// the oldest on (the newest cut to fit).
fn transcript(events: &[Event], skip: &str, config: &ConsultContext) -> Vec<Item> {
    if !config.include_session {
        return Vec::new();
    }
    let events = &events[events.len() - config.max_events.unwrap_or(usize::MAX).min(events.len())..];
    let payload = config.max_part_chars;
    let prose = payload.saturating_mul(TEXT_CHARS_MULTIPLIER);
    let mut items = Vec::new();
    for event in events {
        let Some(content) = event.content() else { continue };
        let author = &event.author;
        for part in &content.parts {
            let item = match &part.kind {
                PartKind::Text { text } if part.is_thought() => config
                    .include_thoughts
                    .then(|| Item::Line(cut(format!("{author} thought: {text}"), prose))),
                PartKind::Text { text } if text.trim().is_empty() => None,
                PartKind::Text { text } => Some(Item::Line(cut(format!("{author}: {text}"), prose))),
                PartKind::FunctionCall { id, .. } | PartKind::FunctionResponse { id, .. }
                    if id.as_deref() == Some(skip) =>
                {
                    None
                }
                PartKind::FunctionCall { name, args, .. } => {
                    Some(Item::Line(cut(format!("{author} called {name}({args})"), payload)))
                }
                PartKind::FunctionResponse { function_response, .. } => Some(Item::Line(cut(
                    format!("{} returned {}", function_response.name, function_response.response),
                    payload,
                ))),
                PartKind::InlineData { .. } | PartKind::FileData { .. } if config.include_media => {
                    Some(Item::Media(Box::new(part.clone())))
                }
                PartKind::InlineData { mime_type, .. } => {
                    Some(Item::Line(format!("{author}: [media omitted: {mime_type}]")))
                }
                PartKind::FileData { file_uri, .. } => {
                    Some(Item::Line(format!("{author}: [file omitted: {file_uri}]")))
                }
                PartKind::ExecutableCode { code, .. } => Some(Item::Line(cut(
                    format!("{author} ran code:\n{}", code.as_deref().unwrap_or_default()),
                    payload,
                ))),
                PartKind::CodeExecutionResult { output, .. } => Some(Item::Line(cut(
                    format!("{author}'s code printed: {}", output.as_deref().unwrap_or_default()),
                    payload,
                ))),
            };
            items.extend(item);
        }
    }
    let Some(max) = config.max_chars else {
        return items;
    };
    let mut total: usize = items.iter().map(Item::chars).sum();
    let mut left_out = 0;
    while total > max && items.len() > 2 {
        total -= items.remove(1).chars();
        left_out += 1;
    }
    if left_out > 0 {
        let marker = Item::Line(format!("[... {left_out} earlier item(s) left out to fit ...]"));
        total += marker.chars();
        items.insert(1, marker);
    }
    // The newest item is the state the advisor is asked about: cut rather than lost.
    if total > max
        && let Some(Item::Line(line)) = items.last_mut()
    {
        let over = total - max;
        let keep = line.chars().count().saturating_sub(over);
        *line = cut(std::mem::take(line), keep);
    }
    items
}

fn cut(line: String, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((end, _)) => format!("{}[... cut ...]", &line[..end]),
        None => line,
    }
}

#[async_trait]
impl Tool for ModelConsultTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {
                "question": {
                    "type": "string",
                    "description": "The decision or blocker to review: the approach you consider, or what you \
                                    tried and how it failed. The advisor sees the conversation already."
                },
                "context": {
                    "type": "string",
                    "description": "Optional: what matters and is not in the conversation (constraints you \
                                    inferred, options you weigh)."
                }
            },
            "required": ["question"]
        }))
    }

    async fn process_llm_request(&self, ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        if self.include_agent_instruction || self.include_tool_inventory {
            let tools = request
                .tools
                .iter()
                .filter(|tool| tool.name != self.name)
                .map(|tool| {
                    let description = tool.description.split_whitespace().collect::<Vec<_>>().join(" ");
                    let description = match description.char_indices().nth(TOOL_DESCRIPTION_LIMIT) {
                        Some((end, _)) => format!("{}...", &description[..end]),
                        None => description,
                    };
                    (tool.name.clone(), description)
                })
                .chain(
                    request
                        .config
                        .builtin_tools
                        .iter()
                        .map(|tool| (tool.name().to_string(), String::new())),
                )
                .collect();
            let instruction = request
                .system_instruction
                .as_deref()
                .map(str::trim)
                .filter(|text| !text.is_empty())
                .map(str::to_string);
            let mut seen = adk_grpc_core::sync::lock(&self.seen);
            seen.retain(|(id, _)| id != ctx.invocation_id());
            if seen.len() >= SEEN_INVOCATIONS {
                seen.pop_front();
            }
            seen.push_back((ctx.invocation_id().to_string(), Seen { instruction, tools }));
        }
        if let Some(instruction) = &self.executor_instruction {
            append_instruction(request, instruction);
        }
        Ok(())
    }

    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        let question = args["question"].as_str().map(str::trim).unwrap_or_default();
        if question.is_empty() {
            return Ok(json!({
                "status": "invalid_request",
                "message": "`question` is required: say which decision or blocker you want reviewed.",
            }));
        }
        let context = args["context"].as_str().map(str::trim).filter(|text| !text.is_empty());
        let (turn, session) = self.counts(ctx.as_ref());
        let limit = match (self.session_max_uses, self.max_uses) {
            (Some(max), _) if session >= max => Some(SESSION_LIMIT.replace("{max}", &max.to_string())),
            (_, Some(max)) if turn >= max => Some(TURN_LIMIT.replace("{max}", &max.to_string())),
            _ => None,
        };
        if let Some(message) = limit {
            return Ok(json!({"status": "limit_reached", "message": message, "consults": self.stats(turn, session)}));
        }
        let invocation = ctx.invocation_id().to_string();
        if !adk_grpc_core::sync::lock(&self.in_flight).insert(invocation.clone()) {
            return Ok(
                json!({"status": "limit_reached", "message": ONE_AT_A_TIME, "consults": self.stats(turn, session)}),
            );
        }
        let _in_flight = InFlight {
            set: &self.in_flight,
            invocation,
        };
        let request = self.request(ctx.as_ref(), question, context);
        let started = std::time::Instant::now();
        let asked = match self.timeout {
            Some(timeout) => tokio::time::timeout(timeout, self.ask_allowing_no_thinking(request))
                .await
                .unwrap_or_else(|_| Err(format!("the advisor did not answer within {}s", timeout.as_secs_f64()))),
            None => self.ask_allowing_no_thinking(request).await,
        };
        match asked {
            Ok(advice) => {
                let (turn, session) = (turn + 1, session + 1);
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

    fn lines(items: &[Item]) -> String {
        let lines: Vec<&str> = items
            .iter()
            .filter_map(|item| match item {
                Item::Line(line) => Some(line.as_str()),
                Item::Media(_) => None,
            })
            .collect();
        lines.join("\n")
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
                    response: json!({"hits": 3}),
                },
                Some("c1".into()),
            )));
        let text = lines(&transcript(&[user, calls, result], "c2", &ConsultContext::default()));
        assert!(text.starts_with("user: find the bug\ncoder called grep("), "{text}");
        assert!(text.contains("[... cut ...]") && text.len() < 5_000, "{}", text.len());
        assert!(text.ends_with("grep returned {\"hits\":3}"), "{text}");
        assert!(!text.contains("model_consult"), "{text}");
    }

    #[test]
    fn a_long_transcript_keeps_the_task_and_the_newest_lines() {
        let events: Vec<Event> = (0..100)
            .map(|i| {
                Event::new("e-1")
                    .with_author("user")
                    .with_content(Content::new("user").with_text(format!("{i} {}", "y".repeat(5_000))))
            })
            .collect();
        let text = lines(&transcript(&events, "", &ConsultContext::default()));
        assert!(text.len() <= 200_000 + 100, "{}", text.len());
        assert!(text.starts_with("user: 0 "));
        assert!(text.contains("earlier item(s) left out"));
        assert!(text.contains("user: 99 "));
    }

    #[test]
    fn media_is_passed_or_named_and_the_budget_cuts_the_newest_line() {
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
        let passed = transcript(&events, "", &ConsultContext::default());
        assert!(matches!(passed[1], Item::Media(_)));
        let named = ConsultContext {
            include_media: false,
            max_chars: Some(100),
            ..Default::default()
        };
        let text = lines(&transcript(&events, "", &named));
        assert!(
            text.starts_with("user: look\n[... 1 earlier item(s) left out"),
            "{text}"
        );
        assert!(text.ends_with("[... cut ...]") && text.len() < 150, "{text}");
        let named = ConsultContext {
            include_media: false,
            ..Default::default()
        };
        let text = lines(&transcript(&events, "", &named));
        assert!(text.contains("user: [media omitted: image/png]"), "{text}");
    }
}
