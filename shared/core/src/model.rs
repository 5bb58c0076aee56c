//! The model interface every provider implements (ADK's `BaseLlm`).

use crate::content::Content;
use crate::error::Result;
use crate::event::LlmResponse;
use async_trait::async_trait;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::pin::Pin;

/// A tool as the model sees it: name, what it does, a JSON Schema of its arguments and,
/// when the tool declares one, of its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDeclaration {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema), if the tool takes any.
    pub parameters: Option<Value>,
    /// JSON Schema of the result (ADK's `response_json_schema`, e.g. an MCP tool's
    /// `outputSchema`), if the tool declares one. Each provider says it as its API can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
}

/// Generation settings (ADK's `GenerateContentConfig`, the fields a provider-neutral
/// server can send). Each provider sends what its API has; see its module.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerateContentConfig {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub max_output_tokens: Option<i32>,
    #[serde(default)]
    pub stop_sequences: Vec<String>,
    #[serde(default)]
    pub top_k: Option<i32>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    /// The MIME type of the reply, e.g. `application/json`.
    #[serde(default)]
    pub response_mime_type: Option<String>,
    /// A JSON Schema the reply must follow (set by an agent's `output_schema`); implies
    /// `application/json`.
    #[serde(default)]
    pub response_schema: Option<Value>,
    /// The same schema as ADK's model clients send it when it is a Python class (a
    /// pydantic model named by an ADK agent-config directory); a provider sends its form
    /// instead of one it makes from `response_schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema_as_sent: Option<ResponseSchemaAsSent>,
    /// Gemini's `safetySettings` as its API takes them (`{category, threshold}` objects).
    #[serde(default)]
    pub safety_settings: Vec<Value>,
    #[serde(default)]
    pub thinking: Option<ThinkingConfig>,
    /// Gemini's `candidateCount`, sent as written (only 1 is accepted: ADK reads the
    /// first candidate); chat completions' `n` defaults to it, and ADK's LiteLlm sends none.
    #[serde(default)]
    pub candidate_count: Option<i32>,
    /// The reply carries the log probability of each token it chose (Gemini's
    /// `responseLogprobs`, OpenAI's `logprobs`), kept as the event's `avg_logprobs`
    /// and `logprobs_result`.
    #[serde(default)]
    pub response_logprobs: Option<bool>,
    /// How many of the likeliest tokens each step also reports (Gemini's `logprobs`,
    /// OpenAI's `top_logprobs`); needs `response_logprobs`.
    #[serde(default)]
    pub logprobs: Option<i32>,
    /// Gemini's `mediaResolution` (`MEDIA_RESOLUTION_LOW`…): tokens spent per image or video frame.
    #[serde(default)]
    pub media_resolution: Option<String>,
    /// Gemini's `cachedContent`: the name of a context cache (`cachedContents/…`).
    #[serde(default)]
    pub cached_content: Option<String>,
    /// Gemini's `responseModalities` (`TEXT`, `IMAGE`); empty: the provider's default.
    #[serde(default)]
    pub response_modalities: Vec<String>,
    /// Gemini's `enableEnhancedCivicAnswers`.
    #[serde(default)]
    pub enable_enhanced_civic_answers: Option<bool>,
    /// Whether and which functions the model may call (Gemini's `toolConfig`; on the
    /// OpenAI-compatible wire its mode alone, as ADK's LiteLlm maps it to `tool_choice`).
    #[serde(default)]
    pub tool_config: Option<ToolConfig>,
    /// Gemini's `imageConfig`: the shape and size of IMAGE replies.
    #[serde(default)]
    pub image_config: Option<ImageConfig>,
    /// Gemini's `speechConfig`, as google-genai sends it (pydantic's snake_case field
    /// names, a voice name made into `voice_config`).
    #[serde(default)]
    pub speech_config: Option<Value>,
    /// Gemini's `audioTranscriptionConfig`, as google-genai sends it (snake_case).
    #[serde(default)]
    pub audio_transcription_config: Option<Value>,
    /// Gemini's `serviceTier` (`standard`, `flex`, `priority`…), sent as written.
    #[serde(default)]
    pub service_tier: Option<String>,
    /// Gemini's `store`: whether the provider may keep the request and its reply.
    #[serde(default)]
    pub store: Option<bool>,
    /// Tools the provider runs itself, named in the request (Gemini's `googleSearch`,
    /// `urlContext`, `codeExecution`); added by the tools that stand for them.
    #[serde(default)]
    pub builtin_tools: Vec<BuiltinTool>,
}

/// An output schema that is a Python class, as ADK's model clients send it (made by the
/// Python worker with their own code, docs/adk-conformance.md): the class's own forms
/// differ from what a provider makes of a JSON Schema (titles, property order, strictness).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseSchemaAsSent {
    /// Gemini's `responseSchema` (its OpenAPI subset) as google-genai sends the class.
    pub gemini: Value,
    /// The chat-completions `response_format` ADK's LiteLlm sends for the class; None
    /// where it sends none (a schema that is neither a class, a dict nor a
    /// `types.Schema`, such as `list[Model]`: LiteLlm asks for no structured output then).
    pub openai: Option<Value>,
}

/// A tool the model's provider runs itself (ADK's `google_search`, `url_context`,
/// `BuiltInCodeExecutor`): the request names it and the reply carries what it did
/// (grounding metadata, executable code and its result), nothing runs here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuiltinTool {
    GoogleSearch,
    UrlContext,
    CodeExecution,
    /// ADK's `google_maps_grounding` (Gemini's `googleMaps` tool).
    GoogleMaps,
}

impl BuiltinTool {
    /// The name ADK (and the agents file) gives it.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinTool::GoogleSearch => "google_search",
            BuiltinTool::UrlContext => "url_context",
            BuiltinTool::CodeExecution => "code_execution",
            BuiltinTool::GoogleMaps => "google_maps_grounding",
        }
    }
}

/// ADK's `tool_config` (Gemini's `toolConfig`): its function-calling settings. Read as
/// an agents file writes it: snake_case, or camelCase as pydantic takes it; a field it
/// does not know is refused (a misspelt setting would otherwise be silently dropped).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    #[serde(default, alias = "functionCallingConfig")]
    pub function_calling_config: Option<FunctionCallingConfig>,
}

/// Gemini's `functionCallingConfig`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionCallingConfig {
    #[serde(default)]
    pub mode: Option<FunctionCallingMode>,
    /// With `ANY` (or `VALIDATED`): the only functions the model may call.
    #[serde(default, alias = "allowedFunctionNames")]
    pub allowed_function_names: Option<Vec<String>>,
}

/// Gemini's function-calling modes, as its API spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FunctionCallingMode {
    // Lower case too: google-genai's enums take either.
    #[serde(alias = "mode_unspecified")]
    ModeUnspecified,
    /// The model decides (the default).
    #[serde(alias = "auto")]
    Auto,
    /// The model must call a function.
    #[serde(alias = "any")]
    Any,
    /// The model must not call a function.
    #[serde(alias = "none")]
    None,
    /// The model decides, and a call it makes follows the declared schema.
    #[serde(alias = "validated")]
    Validated,
}

/// Gemini's `imageConfig` (the fields the Gemini API takes; the others are Vertex AI's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageConfig {
    /// `1:1`, `16:9`, …
    #[serde(default, alias = "aspectRatio")]
    pub aspect_ratio: Option<String>,
    /// `1K`, `2K`, `4K`.
    #[serde(default, alias = "imageSize")]
    pub image_size: Option<String>,
}

/// How much the model reasons before it answers, and whether its thoughts come back
/// (Gemini's `thinkingConfig`, OpenAI's `reasoning_effort`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThinkingConfig {
    /// Gemini's `thinkingBudget`: tokens to think with (0 off, -1 the model decides).
    #[serde(default)]
    pub budget_tokens: Option<i32>,
    /// Gemini's `includeThoughts`: the reply carries thought summaries.
    #[serde(default)]
    pub include_thoughts: Option<bool>,
    /// OpenAI's `reasoning_effort`, Gemini's `thinkingLevel`.
    #[serde(default)]
    pub effort: Option<ThinkingEffort>,
}

/// A thinking effort level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingEffort {
    /// Gemini's `MINIMAL` thinking level, OpenAI's `minimal` reasoning effort.
    Minimal,
    Low,
    Medium,
    High,
}

impl ThinkingEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingEffort::Minimal => "minimal",
            ThinkingEffort::Low => "low",
            ThinkingEffort::Medium => "medium",
            ThinkingEffort::High => "high",
        }
    }
}

/// One model call: the conversation so far, the tools on offer, the system prompt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmRequest {
    /// The model to call (e.g. "gpt-4o-mini"); providers fall back to their own default when empty.
    pub model: String,
    /// The conversation, oldest first; roles "user" and "model" (and "tool" for the
    /// function responses of sessions stored before they were stored as "user").
    pub contents: Vec<Content>,
    pub tools: Vec<ToolDeclaration>,
    pub system_instruction: Option<String>,
    pub config: GenerateContentConfig,
    /// Text tools add to the system instruction once every tool has seen the request
    /// (ADK's dynamic instructions: `load_artifacts`' and an MCP toolset's listings),
    /// joined by blank lines after what the tools appended directly; empty once sent.
    pub dynamic_instructions: Vec<String>,
    /// The agent's own tools for this step, in its order, declared or not (a provider's
    /// built-in tool, `preload_memory`): what ADK's `canonical_tools` lists, for a tool
    /// that names the agent's other tools (the model consult's inventory); listed only
    /// when one of the step's tools does ([`Tool::lists_agent_tools`](crate::Tool::lists_agent_tools)),
    /// shared so that such a tool keeps it without a copy. Not sent.
    pub agent_tools: std::sync::Arc<[ToolListing]>,
}

/// A tool as the agent holds it: its name, its description, and whether the model's
/// provider runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolListing {
    pub name: String,
    pub description: String,
    pub provider_builtin: bool,
}

/// A model's reply: one response, or with `stream` a series of `partial` chunks
/// followed by one complete (non-partial) response carrying the whole reply.
pub type LlmResponseStream = Pin<Box<dyn Stream<Item = Result<LlmResponse>> + Send>>;

/// A model provider (Gemini, OpenAI-compatible servers, a mock...).
#[async_trait]
pub trait Llm: Send + Sync {
    /// The model identifier, e.g. "gemini-2.0-flash" or "gpt-4o".
    fn name(&self) -> &str;

    /// Who serves the model ("openai", "gemini", "mock"...): with [`Llm::name`], what
    /// metrics and traces say a model call went to.
    fn provider(&self) -> &str {
        "unknown"
    }

    /// Whether the model takes a reply schema and tools in one request (ADK's
    /// `capabilities.output_schema_and_tools`). When it cannot, an agent with an
    /// `output_schema` and tools is offered `set_model_response` instead, as ADK does.
    fn output_schema_with_tools(&self) -> bool {
        false
    }

    /// Generates a reply. With `stream`, text arrives as partial responses as the
    /// provider produces it, and the stream ends with one non-partial response
    /// holding the complete content (all text and every function call) and usage.
    /// Provider failures (HTTP errors, rate limits, timeouts) are errors, never a
    /// silent end.
    async fn generate_content(&self, request: LlmRequest, stream: bool) -> Result<LlmResponseStream>;
}

/// Asks `model` once, at temperature 0, without tools and without streaming (for a JSON
/// reply when `json`); the text of its complete reply. The suite's own questions to a
/// model (memory generation, the LoCoMo benchmark's answers and judgements) are asked so.
pub async fn ask_once(model: &dyn Llm, instruction: String, question: String, json: bool) -> Result<String> {
    let request = LlmRequest {
        model: model.name().to_string(),
        contents: vec![Content::new("user").with_text(question)],
        system_instruction: Some(instruction),
        config: GenerateContentConfig {
            temperature: Some(0.0),
            response_mime_type: json.then(|| "application/json".to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut replies = model.generate_content(request, false).await?;
    let mut text = String::new();
    while let Some(reply) = replies.next().await {
        let reply = reply?;
        if reply.partial != Some(true) {
            text = reply.content.as_ref().and_then(Content::text).unwrap_or_default();
        }
    }
    Ok(text)
}

/// The text inside a Markdown code fence around the whole reply (```` ```json … ``` ````),
/// as models often wrap JSON: the language tag (any word) and a closing fence a reply cut
/// short lacks are both taken off.
pub fn strip_code_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(inner) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let inner = inner.strip_suffix("```").unwrap_or(inner);
    // The language tag runs to the end of the first line.
    let body = match inner.split_once('\n') {
        Some((tag, body)) if tag.trim().chars().all(|c| c.is_ascii_alphanumeric()) => body,
        Some(_) => inner,
        None => inner.strip_prefix("json").unwrap_or(inner),
    };
    body.trim()
}

/// `value` with every object's keys in snake_case (`voiceConfig` as `voice_config`), at
/// every depth: how google-genai's pydantic classes write a field whatever case it was
/// given in.
pub fn with_snake_case_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let mut snake = String::with_capacity(key.len() + 4);
                    for c in key.chars() {
                        if c.is_ascii_uppercase() {
                            snake.push('_');
                            snake.push(c.to_ascii_lowercase());
                        } else {
                            snake.push(c);
                        }
                    }
                    (snake, with_snake_case_keys(value))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(with_snake_case_keys).collect()),
        other => other,
    }
}

/// `value` with every object's keys sorted, at every depth: what Python's
/// `json.dumps(sort_keys=True)` writes, whatever order the value keeps.
pub fn with_sorted_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), with_sorted_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(with_sorted_keys).collect()),
        scalar => scalar.clone(),
    }
}

/// JSON as Python's `json.dumps` writes it (`{"a": 1, "b": [1, 2]}`, keys in their order): ADK
/// writes so what a model reads as text (LiteLlm's call arguments and tool results, a
/// structured reply made of a `set_model_response` call).
pub fn python_json(value: &Value) -> String {
    struct PythonStyle;
    impl serde_json::ser::Formatter for PythonStyle {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { writer.write_all(b", ") }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
            if first { Ok(()) } else { writer.write_all(b", ") }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
            writer.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, PythonStyle);
    serde::Serialize::serialize(value, &mut serializer).expect("a JSON value always serializes");
    String::from_utf8(out).expect("JSON is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::strip_code_fence;

    #[test]
    fn a_code_fence_around_the_reply_is_taken_off_whatever_its_tag() {
        assert_eq!(strip_code_fence("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(strip_code_fence("```JSON5\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(strip_code_fence("```\n[1, 2]\n```"), "[1, 2]");
        assert_eq!(strip_code_fence("```json{\"a\":1}```"), "{\"a\":1}");
        assert_eq!(strip_code_fence(" {\"a\":1} "), "{\"a\":1}");
    }

    #[test]
    fn a_reply_cut_short_before_its_closing_fence_is_still_unwrapped() {
        assert_eq!(strip_code_fence("```json\n{\"a\":1}"), "{\"a\":1}");
    }

    #[test]
    fn a_fence_inside_the_text_is_left_alone() {
        let text = "Here it is:\n```json\n{}\n```";
        assert_eq!(strip_code_fence(text), text);
    }
}
