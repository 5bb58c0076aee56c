//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`):
//! OpenAI itself, and the servers that speak its dialect — Ollama, vLLM,
//! LM Studio, llama.cpp's server — chosen by base URL.

use crate::http::{ApiKey, Decoded, HttpClient, SseDecoder, decimal, truncate};
use crate::inline_files::mime_essence;
use crate::response;
use crate::sse::SseEvent;
use adk_grpc_core::{
    AdkError, Content, FinishReason, FunctionCallingMode, Llm, LlmRequest, LlmResponse, LlmResponseStream, Part,
    PartKind, Result, UsageMetadata, python_json, with_sorted_keys,
};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::header::AUTHORIZATION;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

const PROVIDER: &str = "openai";

/// OpenAI's own endpoint, the default base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// A chat-completions model behind an OpenAI-compatible base URL.
#[derive(Debug, Clone)]
pub struct OpenAiCompatible {
    http: HttpClient,
    url: String,
    model: String,
}

impl OpenAiCompatible {
    /// `base_url` is the API root that `/chat/completions` is appended to, e.g.
    /// `https://api.openai.com/v1` or Ollama's `http://localhost:11434/v1`.
    pub fn new(base_url: impl AsRef<str>, model: impl Into<String>) -> Result<Self> {
        let model = model.into();
        Ok(OpenAiCompatible {
            http: HttpClient::new(PROVIDER, &model)?,
            url: format!("{}/chat/completions", base_url.as_ref().trim_end_matches('/')),
            model,
        })
    }

    /// Sends the key as `Authorization: Bearer …`. Local servers need none.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Result<Self> {
        self.http
            .set_auth(AUTHORIZATION, ApiKey::new(PROVIDER, key, "Bearer ")?);
        Ok(self)
    }

    /// How long the provider may take to answer, and for streams the longest
    /// silence between two chunks (default 60 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.http.timeout = timeout;
        self
    }

    /// The model a request asks for: its own, else this one's.
    fn model_for<'a>(&'a self, request: &'a LlmRequest) -> &'a str {
        if request.model.is_empty() {
            &self.model
        } else {
            &request.model
        }
    }

    fn body(&self, request: &LlmRequest, stream: bool) -> Result<Value> {
        let model = self.model_for(request);
        if let Some(builtin) = request.config.builtin_tools.first() {
            return Err(AdkError::Config(format!(
                "{} is a tool Gemini runs itself; OpenAI-compatible models have no such tool",
                builtin.name()
            )));
        }
        let mut body = json!({
            "model": model,
            "messages": messages(request)?,
        });
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": described_with_result(&tool.description, tool.response.as_ref()),
                            // Some compatible servers reject a function without a schema.
                            "parameters": tool.parameters.clone().map_or_else(
                                || json!({"type": "object", "properties": {}}),
                                lowercase_schema_types,
                            ),
                        }
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
        }
        let config = &request.config;
        if let Some(t) = config.temperature {
            body["temperature"] = decimal(t);
        }
        if let Some(p) = config.top_p {
            body["top_p"] = decimal(p);
        }
        // OpenAI's name, as ADK's LiteLlm hands it to LiteLLM, which sends it as it is for an
        // OpenAI-compatible model: OpenAI deprecates `max_tokens` (its reasoning models
        // refuse it); vLLM and llama.cpp's server take both (docs/adk-conformance.md).
        if let Some(n) = config.max_output_tokens {
            body["max_completion_tokens"] = json!(n);
        }
        if !config.stop_sequences.is_empty() {
            body["stop"] = json!(config.stop_sequences);
        }
        // Not in OpenAI's own API, which refuses it; vLLM and llama.cpp's server take it.
        if let Some(k) = config.top_k {
            body["top_k"] = json!(k);
        }
        if let Some(seed) = config.seed {
            body["seed"] = json!(seed);
        }
        if let Some(p) = config.presence_penalty {
            body["presence_penalty"] = decimal(p);
        }
        if let Some(p) = config.frequency_penalty {
            body["frequency_penalty"] = decimal(p);
        }
        if let Some(format) = response_format(config)? {
            body["response_format"] = format;
        }
        // Chat completions have no token budget nor a switch for thought summaries:
        // the effort is all there is (a server that reasons sends `reasoning_content`).
        if let Some(effort) = config.thinking.as_ref().and_then(|t| t.effort) {
            body["reasoning_effort"] = json!(effort.as_str());
        }
        // As ADK's LiteLlm maps the function-calling mode (AUTO is the provider's default;
        // the allowed names have no counterpart), and only with tools to choose from.
        let mode = config
            .tool_config
            .as_ref()
            .and_then(|t| t.function_calling_config.as_ref())
            .and_then(|c| c.mode);
        match mode.filter(|_| !request.tools.is_empty()) {
            Some(FunctionCallingMode::Any) => body["tool_choice"] = json!("required"),
            Some(FunctionCallingMode::None) => body["tool_choice"] = json!("none"),
            _ => {}
        }
        // Not sent, as ADK's LiteLlm sends none of them: the log probabilities
        // (`response_logprobs`, `logprobs`), the speech, image and transcription
        // settings, the service tier and `store`. Gemini's safety settings, media
        // resolution, context caches, image replies and civic answers have no
        // counterpart here; the agents file refuses them.
        if stream {
            body["stream"] = json!(true);
            // Without this the stream carries no token counts.
            body["stream_options"] = json!({"include_usage": true});
        }
        Ok(body)
    }
}

#[async_trait]
impl Llm for OpenAiCompatible {
    /// As ADK's LiteLlm decides for an `openai/<model>`: OpenAI's API combines a
    /// `response_format` with tools, but a Gemini model (served through a compatible
    /// proxy) does not (`docs/adk-conformance.md`).
    fn output_schema_with_tools(&self) -> bool {
        let name = self.model.rsplit('/').next().unwrap_or_default();
        !name.starts_with("gemini-")
    }

    fn name(&self) -> &str {
        &self.model
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn generate_content(&self, request: LlmRequest, stream: bool) -> Result<LlmResponseStream> {
        let body = self.body(&request, stream)?;
        let requested = self.model_for(&request).to_string();
        if stream {
            let decoder = StreamDecoder {
                requested_model: requested,
                ..Default::default()
            };
            return self.http.post_sse(&self.url, &body, decoder).await;
        }
        let reply = self.http.post_json(&self.url, &body).await?;
        let completion: ChatCompletion = serde_json::from_value(reply).map_err(|e| malformed("response", &e))?;
        let response = completion_response(completion, requested)?;
        Ok(Box::pin(futures::stream::once(async { Ok(response) })))
    }
}

// ---- request ---------------------------------------------------------------

/// The longest tool description ADK's LiteLlm sends with the result's schema appended
/// (OpenAI's ceiling on a description), in characters.
const MAX_DESCRIPTION_WITH_RESULT: usize = 1024;

/// A tool's description with its result's JSON Schema appended, as ADK's LiteLlm writes
/// it (`_append_response_schema_to_description`): chat completions have no field for a
/// result's schema, so the model reads it in the description. Left as it is when the
/// schema says no more than a type, or when the whole would pass 1024 characters.
fn described_with_result(description: &str, result: Option<&Value>) -> String {
    let (Some(result), Some(schema)) = (result, result.and_then(Value::as_object)) else {
        return description.to_string();
    };
    if schema.keys().all(|key| key == "type") {
        return description.to_string();
    }
    let kind = match schema.get("type").and_then(Value::as_str) {
        Some(kind) => match kind.to_lowercase().as_str() {
            "object" => "a JSON object".to_string(),
            "array" => "a JSON array".to_string(),
            "string" => "a string".to_string(),
            "number" => "a number".to_string(),
            "integer" => "an integer".to_string(),
            "boolean" => "a boolean".to_string(),
            "null" => "a null value".to_string(),
            lower if lower.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {kind}"),
            _ => format!("a {kind}"),
        },
        None => "a value".to_string(),
    };
    let suffix = format!(
        "Returns {kind} conforming to this schema: {}",
        sorted_ascii_json(result)
    );
    let described = if description.is_empty() {
        suffix
    } else {
        format!("{description}\n{suffix}")
    };
    if described.chars().count() > MAX_DESCRIPTION_WITH_RESULT {
        return description.to_string();
    }
    described
}

/// JSON as Python's `json.dumps(value, sort_keys=True, separators=(",", ":"))` writes
/// it: keys sorted, no spaces, every character outside printable ASCII escaped as
/// `\uXXXX` (`ensure_ascii`, Python's default), whatever order the value keeps.
fn sorted_ascii_json(value: &Value) -> String {
    struct AsciiOnly;
    impl serde_json::ser::Formatter for AsciiOnly {
        fn write_string_fragment<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            fragment: &str,
        ) -> std::io::Result<()> {
            for c in fragment.chars() {
                if (' '..='~').contains(&c) {
                    write!(writer, "{c}")?;
                } else {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        write!(writer, "\\u{unit:04x}")?;
                    }
                }
            }
            Ok(())
        }
    }
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, AsciiOnly);
    serde::Serialize::serialize(&with_sorted_keys(value), &mut serializer).expect("a JSON value always serializes");
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// Structured output: a schema as `json_schema` (strict only when the schema already
/// meets OpenAI's strict rules, so it is never rewritten), JSON without a schema as
/// `json_object`.
fn response_format(config: &adk_grpc_core::GenerateContentConfig) -> Result<Option<Value>> {
    // A Python class's schema goes as ADK's LiteLlm sends it (made strict, named after the
    // class), and a Python schema it sends none for goes without one, as there.
    if let Some(sent) = &config.response_schema_as_sent {
        return Ok(sent.openai.clone());
    }
    if let Some(schema) = &config.response_schema {
        let name = schema["title"]
            .as_str()
            .filter(|t| {
                !t.is_empty() && t.len() <= 64 && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
            .unwrap_or("response");
        return Ok(Some(json!({
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": is_strict(schema)},
        })));
    }
    match config.response_mime_type.as_deref() {
        None | Some("text/plain") => Ok(None),
        Some("application/json") => Ok(Some(json!({"type": "json_object"}))),
        Some(other) => Err(AdkError::invalid_with(
            "generate_content_config.response_mime_type",
            format!("chat completions reply in text/plain or application/json, not {other}"),
        )),
    }
}

/// OpenAI's strict mode takes a schema only when every object in it lists all its
/// properties as required and forbids others.
fn is_strict(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return true;
    };
    if let Some(Value::Object(properties)) = map.get("properties") {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if map.get("additionalProperties") != Some(&Value::Bool(false))
            || properties.keys().any(|k| !required.contains(&k.as_str()))
        {
            return false;
        }
    }
    map.values().all(|v| match v {
        Value::Object(_) => is_strict(v),
        Value::Array(items) => items.iter().all(is_strict),
        _ => true,
    })
}

/// The conversation as chat messages.
fn messages(request: &LlmRequest) -> Result<Vec<Value>> {
    let mut messages = Vec::new();
    if let Some(system) = request.system_instruction.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    let mut ids = CallIds::default();
    for content in &request.contents {
        if content.role == "model" {
            messages.push(assistant_message(content, &mut ids)?);
            continue;
        }
        // Tool results are messages of their own and must directly follow the
        // assistant message that asked for them, so they go first.
        let mut rest = Vec::new();
        for part in &content.parts {
            match &part.kind {
                PartKind::FunctionResponse { function_response, id } => messages.push(json!({
                    "role": "tool",
                    "tool_call_id": ids.response_id(&function_response.name, id.as_deref()),
                    "content": python_json(&function_response.response),
                })),
                // ADK's LiteLlm sends no thought of a user turn.
                _ if part.is_thought() => {}
                _ => rest.push(part),
            }
        }
        if !rest.is_empty() {
            messages.push(json!({"role": "user", "content": message_content(&rest)?}));
        }
    }
    Ok(with_missing_results(messages))
}

/// What ADK's LiteLlm gives the model for a call left without a result (a long-running
/// tool still pending when the user wrote again, a run cut off).
const MISSING_TOOL_RESULT: &str =
    "Error: Missing tool result (tool execution may have been interrupted before a response was recorded).";

/// Chat completions refuse an assistant's tool call that no tool message answers before
/// the next message, so ADK's LiteLlm answers each such call with `MISSING_TOOL_RESULT`
/// right there (or at the end); the model reads the same.
fn with_missing_results(messages: Vec<Value>) -> Vec<Value> {
    let missing = |id: Value| json!({"role": "tool", "tool_call_id": id, "content": MISSING_TOOL_RESULT});
    let mut healed = Vec::with_capacity(messages.len());
    let mut pending: Vec<Value> = Vec::new();
    for message in messages {
        let role = message["role"].as_str().unwrap_or_default();
        if role != "tool" {
            healed.extend(pending.drain(..).map(missing));
        }
        match role {
            "assistant" => {
                let calls = message["tool_calls"].as_array().into_iter().flatten();
                pending = calls.map(|call| call["id"].clone()).collect();
            }
            "tool" => pending.retain(|id| *id != message["tool_call_id"]),
            _ => {}
        }
        healed.push(message);
    }
    healed.extend(pending.into_iter().map(missing));
    healed
}

/// A "model" turn: its text, its function calls as `tool_calls`, its thoughts as
/// `reasoning_content`.
fn assistant_message(content: &Content, ids: &mut CallIds) -> Result<Value> {
    let calls: Vec<Value> = content
        .parts
        .iter()
        .filter_map(|part| match &part.kind {
            PartKind::FunctionCall { name, args, id } => Some(json!({
                "id": ids.call_id(name, id.as_deref()),
                "type": "function",
                "function": {"name": name, "arguments": python_json(args)},
            })),
            _ => None,
        })
        .collect();
    // What the model showed: its texts and files (ADK's LiteLlm leaves code execution
    // parts out of chat messages).
    let shown: Vec<&Part> = content
        .parts
        .iter()
        .filter(|part| !part.is_thought())
        .filter(|part| {
            matches!(
                part.kind,
                PartKind::Text { .. } | PartKind::InlineData { .. } | PartKind::FileData { .. }
            )
        })
        .collect();
    let content_value = match message_content(&shown)? {
        // Assistant content is text: ADK's LiteLlm joins a turn's texts with line
        // breaks, and sends the items as they are only when none is a text.
        Value::Array(items) if items.iter().any(|item| item["type"] == "text") => Value::String(
            items
                .iter()
                .filter(|item| item["type"] == "text")
                .filter_map(|item| item["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Value::Array(items) if items.is_empty() && shown.is_empty() => Value::Null,
        other => other,
    };
    let mut message = json!({"role": "assistant", "content": content_value});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    // ADK's LiteLlm sends the turn's thoughts back as the reasoning, joined as they came
    // (a thought held as a `text/*` file by the text it holds).
    let reasoning: String = content
        .parts
        .iter()
        .filter(|part| part.is_thought())
        .filter_map(|part| match &part.kind {
            PartKind::Text { text } => Some(text.clone()),
            PartKind::InlineData { mime_type, data } => inline_text(mime_type, data),
            _ => None,
        })
        .collect();
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::String(reasoning);
    }
    Ok(message)
}

/// A turn's parts as chat content, as ADK's LiteLlm converts them: a plain string when
/// it is one text (or one `text/*` file), else the array form, one item a part (so
/// several texts stay apart, as the model saw them on Gemini). Empty texts and files
/// are no item, as ADK reads an empty value as none.
fn message_content(parts: &[&Part]) -> Result<Value> {
    if let [part] = parts {
        match &part.kind {
            PartKind::Text { text } if !text.is_empty() => return Ok(Value::String(text.clone())),
            PartKind::InlineData { mime_type, data } if !data.is_empty() => {
                if let Some(text) = inline_text(mime_type, data) {
                    return Ok(Value::String(text));
                }
            }
            _ => {}
        }
    }
    let mut items = Vec::new();
    for part in parts {
        items.push(match &part.kind {
            PartKind::Text { text } if text.is_empty() => continue,
            PartKind::Text { text } => json!({"type": "text", "text": text}),
            PartKind::InlineData { data, .. } if data.is_empty() => continue,
            PartKind::InlineData { mime_type, data } => match inline_text(mime_type, data) {
                Some(text) => json!({"type": "text", "text": text}),
                None => inline_item(mime_type, data),
            },
            PartKind::FileData { mime_type, file_uri } if mime_type.starts_with("image/") => {
                json!({"type": "image_url", "image_url": {"url": file_uri}})
            }
            PartKind::FileData { mime_type, file_uri } => {
                return Err(AdkError::invalid_with(
                    "content.parts",
                    format!("chat completions cannot reference a {mime_type} file by URI ({file_uri}); send it inline"),
                ));
            }
            // A call in a user turn is meaningless to the API; say so instead of dropping it.
            PartKind::FunctionCall { name, .. } => {
                return Err(AdkError::invalid_with(
                    "content.parts",
                    format!("function call `{name}` in a non-model turn cannot be sent to chat completions"),
                ));
            }
            PartKind::FunctionResponse { .. } => continue, // sent as tool messages by the caller
            PartKind::ExecutableCode { .. } | PartKind::CodeExecutionResult { .. } => {
                return Err(AdkError::invalid_with(
                    "content.parts",
                    "code execution parts (executable_code, code_execution_result) cannot be sent to chat \
                     completions",
                ));
            }
        });
    }
    Ok(Value::Array(items))
}

/// The text a `text/*` file holds (ADK's LiteLlm sends such a file as text): UTF-8, or
/// Latin-1 when it is not. None for any other type.
fn inline_text(mime_type: &str, data: &[u8]) -> Option<String> {
    mime_essence(mime_type)
        .starts_with("text/")
        .then(|| match std::str::from_utf8(data) {
            Ok(text) => text.to_string(),
            Err(_) => data.iter().map(|&byte| char::from(byte)).collect(),
        })
}

/// A file as a content item, by its major type as ADK's LiteLlm sends it: images and
/// videos as data URLs, audio as `input_audio` in the format its subtype names, any
/// other as a file.
fn inline_item(mime_type: &str, data: &[u8]) -> Value {
    let encoded = BASE64.encode(data);
    let mime_type = mime_essence(mime_type);
    let data_url = || format!("data:{mime_type};base64,{encoded}");
    match mime_type.split_once('/') {
        Some(("image", _)) => json!({"type": "image_url", "image_url": {"url": data_url()}}),
        Some(("video", _)) => json!({"type": "video_url", "video_url": {"url": data_url()}}),
        Some(("audio", subtype)) => {
            let subtype = subtype.strip_prefix("x-").unwrap_or(subtype);
            let format = match subtype {
                "mpeg" => "mp3",
                "wave" | "vnd.wave" => "wav",
                other => other,
            };
            json!({"type": "input_audio", "input_audio": {"data": encoded, "format": format}})
        }
        _ => json!({"type": "file", "file": {"file_data": data_url()}}),
    }
}

/// Chat completions pair results with calls by id. The runner assigns ids, but
/// a hand-built history may lack them: such a call gets `call_<n>`, and a
/// result without an id takes the oldest unanswered call of the same name.
#[derive(Default)]
struct CallIds {
    next: usize,
    unanswered: HashMap<String, VecDeque<String>>,
}

impl CallIds {
    fn call_id(&mut self, name: &str, id: Option<&str>) -> String {
        let id = match id {
            Some(id) => id.to_string(),
            None => {
                self.next += 1;
                format!("call_{}", self.next)
            }
        };
        self.unanswered
            .entry(name.to_string())
            .or_default()
            .push_back(id.clone());
        id
    }

    fn response_id(&mut self, name: &str, id: Option<&str>) -> String {
        let queue = self.unanswered.entry(name.to_string()).or_default();
        match id {
            Some(id) => {
                queue.retain(|pending| pending != id);
                id.to_string()
            }
            None => queue.pop_front().unwrap_or_else(|| format!("call_{name}")),
        }
    }
}

// ---- response --------------------------------------------------------------

#[derive(Deserialize)]
struct ChatCompletion {
    /// The model that answered, as the server names it.
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<Message>,
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<WireLogprobs>,
}

/// A choice's `logprobs`: one entry per token of the reply.
#[derive(Deserialize)]
struct WireLogprobs {
    #[serde(default)]
    content: Option<Vec<TokenLogprob>>,
}

#[derive(Deserialize)]
struct TokenLogprob {
    token: String,
    logprob: f64,
    #[serde(default)]
    top_logprobs: Vec<TopLogprob>,
}

#[derive(Deserialize)]
struct TopLogprob {
    token: String,
    logprob: f64,
}

/// Adds a choice's token log probabilities in google.genai's shape (ADK's
/// `LogprobsResult`): the chosen token of each step, and its likeliest tokens when asked.
fn add_logprobs(into: &mut response::Logprobs, wire: Option<WireLogprobs>) {
    for token in wire.and_then(|w| w.content).unwrap_or_default() {
        into.chosen
            .push(json!({"token": token.token, "log_probability": token.logprob}));
        if !token.top_logprobs.is_empty() {
            let candidates: Vec<Value> = token
                .top_logprobs
                .into_iter()
                .map(|top| json!({"token": top.token, "log_probability": top.logprob}))
                .collect();
            into.top.push(json!({ "candidates": candidates }));
        }
    }
}

#[derive(Deserialize)]
struct Message {
    /// A string from most servers; some send an array of `{type, text}` items.
    #[serde(default)]
    content: Value,
    /// The reasoning of servers that return it (DeepSeek, vLLM: `reasoning_content`;
    /// OpenRouter and newer vLLM: `reasoning`).
    #[serde(default, alias = "reasoning")]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
}

#[derive(Deserialize)]
struct ToolCall {
    id: Option<String>,
    function: FunctionWire,
}

#[derive(Deserialize)]
struct FunctionWire {
    #[serde(default)]
    name: String,
    /// A JSON-encoded string per the API; a few servers send the object itself.
    #[serde(default)]
    arguments: Value,
}

/// A reply's `usage`. The cached and reasoning counts are read where ADK's `LiteLlm`
/// reads them; they are kept as `Value`s because servers differ in their shape.
#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: u64,
    /// OpenAI's `{"cached_tokens": n}`; some servers send a list of such objects.
    prompt_tokens_details: Option<Value>,
    /// OpenAI's `{"reasoning_tokens": n}`.
    completion_tokens_details: Option<Value>,
    /// The flat names other servers use for the cached prompt tokens.
    cached_prompt_tokens: Option<Value>,
    cached_tokens: Option<Value>,
    cache_read_input_tokens: Option<Value>,
}

impl Usage {
    /// The prompt tokens served from a cache, 0 when the server says nothing (as
    /// `LiteLlm` stores it): `prompt_tokens_details.cached_tokens` (summed over a
    /// list), else the first flat name that holds a number.
    fn cached(&self) -> u64 {
        match &self.prompt_tokens_details {
            Some(details @ Value::Object(_)) => {
                if let Some(n) = details["cached_tokens"].as_u64() {
                    return n;
                }
            }
            Some(Value::Array(items)) => {
                let total: u64 = items.iter().filter_map(|item| item["cached_tokens"].as_u64()).sum();
                if total > 0 {
                    return total;
                }
            }
            _ => {}
        }
        [
            &self.cached_prompt_tokens,
            &self.cached_tokens,
            &self.cache_read_input_tokens,
        ]
        .into_iter()
        .find_map(|n| n.as_ref().and_then(Value::as_u64))
        .unwrap_or(0)
    }

    /// `completion_tokens_details.reasoning_tokens`, 0 when absent.
    fn reasoning(&self) -> u64 {
        self.completion_tokens_details
            .as_ref()
            .and_then(|details| details["reasoning_tokens"].as_u64())
            .unwrap_or(0)
    }
}

impl From<Usage> for UsageMetadata {
    /// As ADK's `LiteLlm` fills google.genai's usage: the cached count always, the
    /// thoughts count only when there were any.
    fn from(u: Usage) -> Self {
        let count = |n: u64| i32::try_from(n).unwrap_or(i32::MAX);
        let reasoning = u.reasoning();
        UsageMetadata {
            prompt_token_count: Some(count(u.prompt_tokens)),
            candidates_token_count: Some(count(u.completion_tokens)),
            total_token_count: Some(count(u.total_tokens)),
            cached_content_token_count: Some(count(u.cached())),
            thoughts_token_count: (reasoning != 0).then(|| count(reasoning)),
            ..Default::default()
        }
    }
}

/// The reply of a non-streamed call; `requested` names the model when the server does not.
fn completion_response(completion: ChatCompletion, requested: String) -> Result<LlmResponse> {
    let choice = completion
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| AdkError::Model(format!("{PROVIDER} response has no choices")))?;
    let mut text = String::new();
    let mut thought = String::new();
    let mut calls = Vec::new();
    let mut logprobs = response::Logprobs::default();
    add_logprobs(&mut logprobs, choice.logprobs);
    if let Some(message) = choice.message {
        text = content_text(&message.content);
        thought = message.reasoning_content.unwrap_or_default();
        for call in message.tool_calls {
            calls.push(function_call(call.function.name, call.id, call.function.arguments)?);
        }
    }
    let mut response = final_response(
        thought,
        text,
        calls,
        finish_reason(choice.finish_reason.as_deref()),
        completion.usage,
    );
    logprobs.apply(&mut response);
    response.model_version = Some(answering_model(completion.model, requested));
    Ok(response)
}

/// The model version ADK's `LiteLlm` stores: the model the server says answered,
/// else the one asked for.
fn answering_model(reported: Option<String>, requested: String) -> String {
    reported.filter(|model| !model.is_empty()).unwrap_or(requested)
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(items) => items.iter().filter_map(|item| item["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// A complete tool call: the arguments must be a JSON object.
fn function_call(name: String, id: Option<String>, arguments: Value) -> Result<Part> {
    let args = match arguments {
        Value::String(raw) if raw.trim().is_empty() => Value::Object(Map::new()),
        Value::String(raw) => serde_json::from_str(&raw).map_err(|e| {
            AdkError::Model(format!(
                "{PROVIDER} returned arguments for tool `{name}` that are not valid JSON ({e}): {}",
                truncate(&raw, 200)
            ))
        })?,
        Value::Null => Value::Object(Map::new()),
        object => object,
    };
    Ok(PartKind::FunctionCall {
        name,
        args,
        id: id.filter(|id| !id.is_empty()),
    }
    .into())
}

fn finish_reason(reason: Option<&str>) -> Option<FinishReason> {
    Some(match reason? {
        // A turn that ends in tool calls ended normally, as Gemini reports it.
        "stop" | "tool_calls" | "function_call" => FinishReason::Stop,
        "length" => FinishReason::MaxTokens,
        "content_filter" => FinishReason::Safety,
        _ => FinishReason::Other,
    })
}

/// The complete reply: the reasoning (a thought part), the text, then the calls.
fn final_response(
    thought: String,
    text: String,
    calls: Vec<Part>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
) -> LlmResponse {
    let mut parts = Vec::new();
    if !thought.is_empty() {
        parts.push(response::thought_part(thought));
    }
    if !text.is_empty() {
        parts.push(Part::text_part(text));
    }
    parts.extend(calls);
    response::complete(PROVIDER, parts, finish_reason, usage.map(Into::into))
}

fn malformed(what: &str, e: &serde_json::Error) -> AdkError {
    AdkError::Model(format!("{PROVIDER} sent a malformed {what}: {e}"))
}

// ---- streaming ---------------------------------------------------------------

#[derive(Deserialize)]
struct Chunk {
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<Usage>,
    /// Some servers report a failure inside the stream, after a 200.
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<WireLogprobs>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    #[serde(default, alias = "reasoning")]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// A tool call being assembled from its pieces.
#[derive(Default)]
struct PendingCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Text deltas go out as partials at once; tool calls arrive in pieces keyed by
/// `index` and only go out, whole, in the final response after `[DONE]`.
#[derive(Default)]
struct StreamDecoder {
    thought: String,
    text: String,
    calls: BTreeMap<usize, PendingCall>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    logprobs: response::Logprobs,
    /// The model asked for, and the latest one a chunk named.
    requested_model: String,
    reported_model: Option<String>,
}

impl StreamDecoder {
    fn add_tool_call_piece(&mut self, piece: ToolCallDelta) {
        // `index` says which call a piece belongs to. A server that omits it
        // sends each call whole: a piece with a new id starts a new call.
        let index = piece
            .index
            .unwrap_or_else(|| match (&piece.id, self.calls.last_key_value()) {
                (None, Some((&last, _))) => last,
                _ => self.calls.last_key_value().map_or(0, |(&last, _)| last + 1),
            });
        let call = self.calls.entry(index).or_default();
        if let Some(id) = piece.id.filter(|id| !id.is_empty()) {
            call.id = Some(id);
        }
        if let Some(function) = piece.function {
            // Names come whole in the first piece from OpenAI; appending also
            // serves servers that split them.
            if let Some(name) = function.name {
                call.name.push_str(&name);
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    fn complete(&mut self) -> Result<LlmResponse> {
        let mut calls = Vec::new();
        for call in std::mem::take(&mut self.calls).into_values() {
            calls.push(function_call(call.name, call.id, Value::String(call.arguments))?);
        }
        let mut response = final_response(
            std::mem::take(&mut self.thought),
            std::mem::take(&mut self.text),
            calls,
            self.finish_reason,
            self.usage.take(),
        );
        std::mem::take(&mut self.logprobs).apply(&mut response);
        response.model_version = Some(answering_model(
            self.reported_model.take(),
            std::mem::take(&mut self.requested_model),
        ));
        Ok(response)
    }
}

impl SseDecoder for StreamDecoder {
    fn event(&mut self, event: &SseEvent) -> Result<Decoded> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return self.complete().map(|last| Decoded::Final(Box::new(last)));
        }
        if data.is_empty() {
            return Ok(Decoded::Partials(Vec::new()));
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            AdkError::Model(format!(
                "{PROVIDER} sent a malformed stream chunk ({e}): {}",
                truncate(data, 200)
            ))
        })?;
        if let Some(error) = chunk.error {
            let message = error["message"]
                .as_str()
                .map_or_else(|| error.to_string(), str::to_string);
            return Err(AdkError::Model(format!(
                "{PROVIDER} reported an error mid-stream: {message}"
            )));
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        if let Some(model) = chunk.model.filter(|model| !model.is_empty()) {
            self.reported_model = Some(model);
        }
        let mut partials = Vec::new();
        for choice in chunk.choices {
            if let Some(reason) = choice.finish_reason.as_deref() {
                self.finish_reason = finish_reason(Some(reason));
            }
            add_logprobs(&mut self.logprobs, choice.logprobs);
            let Some(delta) = choice.delta else { continue };
            for piece in delta.tool_calls {
                self.add_tool_call_piece(piece);
            }
            if let Some(thought) = delta.reasoning_content.filter(|t| !t.is_empty()) {
                self.thought.push_str(&thought);
                partials.push(response::partial_thought(thought));
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.text.push_str(&text);
                partials.push(response::partial_text(text));
            }
        }
        Ok(Decoded::Partials(partials))
    }

    fn end_of_body(&mut self) -> Result<LlmResponse> {
        Err(AdkError::Unavailable(format!(
            "{PROVIDER} stream ended before [DONE]: the reply is incomplete"
        )))
    }
}

/// A JSON Schema with its `type` names in lower case, as ADK's LiteLlm sends it
/// (`lowercase_schema_types`): a schema written in Gemini's form (`OBJECT`, `STRING`,
/// as a Python tool's `types.Schema` declares it) is a JSON Schema for OpenAI. Only
/// subschemas are walked, so a `type` inside a `default` or `example` stays as written.
fn lowercase_schema_types(mut schema: Value) -> Value {
    fn walk(value: &mut Value) {
        if let Value::Array(items) = value {
            items.iter_mut().for_each(walk);
            return;
        }
        let Value::Object(map) = value else {
            return;
        };
        match map.get_mut("type") {
            Some(Value::String(name)) => *name = name.to_lowercase(),
            Some(Value::Array(names)) => {
                for name in names.iter_mut() {
                    if let Value::String(name) = name {
                        *name = name.to_lowercase();
                    }
                }
            }
            _ => {}
        }
        const SCHEMA_MAPS: [&str; 6] = [
            "$defs",
            "definitions",
            "defs",
            "dependentSchemas",
            "patternProperties",
            "properties",
        ];
        const SCHEMAS: [&str; 17] = [
            "additionalProperties",
            "additional_properties",
            "contains",
            "else",
            "if",
            "items",
            "not",
            "propertyNames",
            "then",
            "unevaluatedProperties",
            "allOf",
            "all_of",
            "anyOf",
            "any_of",
            "oneOf",
            "one_of",
            "prefixItems",
        ];
        for key in SCHEMA_MAPS {
            if let Some(Value::Object(children)) = map.get_mut(key) {
                children.values_mut().for_each(walk);
            }
        }
        for key in SCHEMAS {
            if let Some(child) = map.get_mut(key) {
                walk(child);
            }
        }
    }
    walk(&mut schema);
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::FunctionResponseData;

    #[test]
    fn ids_pair_results_with_calls_that_have_none() {
        let request = LlmRequest {
            contents: vec![
                Content::new("model").with_part(
                    PartKind::FunctionCall {
                        name: "f".into(),
                        args: json!({}),
                        id: None,
                    }
                    .into(),
                ),
                Content::new("tool").with_part(
                    PartKind::FunctionResponse {
                        function_response: FunctionResponseData {
                            name: "f".into(),
                            response: json!(1),
                        },
                        id: None,
                    }
                    .into(),
                ),
            ],
            ..Default::default()
        };
        let messages = messages(&request).unwrap();
        assert_eq!(messages[0]["tool_calls"][0]["id"], "call_1");
        assert_eq!(messages[1]["tool_call_id"], "call_1");
    }

    #[test]
    fn thoughts_go_as_the_assistants_reasoning_content_and_not_in_a_user_turn() {
        let thought = |text: &str| Part {
            thought: Some(true),
            ..Part::text_part(text)
        };
        let request = LlmRequest {
            contents: vec![
                Content::new("user").with_part(thought("unsent")).with_text("Hi"),
                Content::new("model")
                    .with_part(thought("Greet "))
                    .with_part(thought("back."))
                    .with_text("Hello."),
            ],
            ..Default::default()
        };
        assert_eq!(
            messages(&request).unwrap(),
            vec![
                json!({"role": "user", "content": "Hi"}),
                json!({"role": "assistant", "content": "Hello.", "reasoning_content": "Greet back."}),
            ]
        );
    }

    #[test]
    fn text_files_are_sent_as_the_text_they_hold_as_adks_litellm_sends_them() {
        let file = |mime_type: &str, data: &[u8]| Part::inline_data(mime_type, data);
        let thought_file = |text: &str| Part {
            thought: Some(true),
            ..file("text/plain", text.as_bytes())
        };
        let request = LlmRequest {
            contents: vec![
                Content::new("user").with_part(file("text/plain; charset=utf-8", "Pool: 7 to 22.".as_bytes())),
                Content::new("model")
                    .with_part(thought_file("The note "))
                    .with_part(thought_file("has the hours."))
                    .with_text("It opens at 7.")
                    .with_part(file("text/markdown", b"*Source: the note.*")),
                Content::new("user")
                    .with_text("And this?")
                    // Not UTF-8: read as Latin-1, as ADK's LiteLlm falls back to it.
                    .with_part(file("text/plain", b"caf\xe9")),
            ],
            ..Default::default()
        };
        assert_eq!(
            messages(&request).unwrap(),
            vec![
                json!({"role": "user", "content": "Pool: 7 to 22."}),
                json!({
                    "role": "assistant",
                    "content": "It opens at 7.\n*Source: the note.*",
                    "reasoning_content": "The note has the hours.",
                }),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "And this?"},
                    {"type": "text", "text": "caf\u{e9}"},
                ]}),
            ]
        );
    }

    #[test]
    fn media_go_by_their_major_type_and_a_model_turn_of_media_alone_keeps_them() {
        let file = |mime_type: &str| Part::inline_data(mime_type, *b"x");
        let request = LlmRequest {
            contents: vec![
                Content::new("user")
                    .with_part(file("audio/x-wav"))
                    .with_part(file("audio/mpeg"))
                    .with_part(file("audio/ogg"))
                    .with_part(file("video/mp4"))
                    .with_part(file("Image/PNG")),
                Content::new("model").with_part(file("image/png")),
            ],
            ..Default::default()
        };
        assert_eq!(
            messages(&request).unwrap(),
            vec![
                json!({"role": "user", "content": [
                    {"type": "input_audio", "input_audio": {"data": "eA==", "format": "wav"}},
                    {"type": "input_audio", "input_audio": {"data": "eA==", "format": "mp3"}},
                    {"type": "input_audio", "input_audio": {"data": "eA==", "format": "ogg"}},
                    {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,eA=="}},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,eA=="}},
                ]}),
                json!({"role": "assistant", "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,eA=="}},
                ]}),
            ]
        );
    }

    #[test]
    fn a_call_without_a_result_is_answered_as_missing_before_the_next_message() {
        let call = |name: &str, id: &str| {
            Content::new("model").with_part(
                PartKind::FunctionCall {
                    name: name.into(),
                    args: json!({}),
                    id: Some(id.into()),
                }
                .into(),
            )
        };
        let answer = Content::new("user").with_part(
            PartKind::FunctionResponse {
                function_response: FunctionResponseData {
                    name: "f".into(),
                    response: json!({"ok": true}),
                },
                id: Some("c1".into()),
            }
            .into(),
        );
        let request = LlmRequest {
            contents: vec![
                call("f", "c1"),
                answer,
                call("ask", "c2"),
                Content::new("user").with_part(Part::text_part("Coffee.")),
                call("ask", "c3"),
            ],
            ..Default::default()
        };
        let messages = messages(&request).unwrap();
        let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(
            roles,
            ["assistant", "tool", "assistant", "tool", "user", "assistant", "tool"]
        );
        assert_eq!(messages[1]["content"], r#"{"ok": true}"#);
        for (i, id) in [(3, "c2"), (6, "c3")] {
            assert_eq!(messages[i]["tool_call_id"], id);
            assert_eq!(messages[i]["content"], MISSING_TOOL_RESULT);
        }
    }

    #[test]
    fn strict_only_for_schemas_that_meet_openais_rules() {
        let strict = json!({"type": "object", "properties": {"a": {"type": "string"}},
            "required": ["a"], "additionalProperties": false});
        assert!(is_strict(&strict));
        let optional = json!({"type": "object", "properties": {"a": {"type": "string"}},
            "additionalProperties": false});
        assert!(!is_strict(&optional));
        let nested = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}},
            "required": ["a"], "additionalProperties": false});
        assert!(!is_strict(&nested));
    }

    #[test]
    fn schema_types_are_sent_in_lower_case_as_adks_litellm_sends_them() {
        let gemini_form = json!({"type": "OBJECT", "properties": {
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
            "size": {"anyOf": [{"type": "INTEGER"}, {"type": ["NUMBER", "NULL"]}], "default": {"type": "KEEP"}},
        }});
        assert_eq!(
            lowercase_schema_types(gemini_form),
            json!({"type": "object", "properties": {
                "tags": {"type": "array", "items": {"type": "string"}},
                "size": {"anyOf": [{"type": "integer"}, {"type": ["number", "null"]}], "default": {"type": "KEEP"}},
            }})
        );
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(finish_reason(Some("length")), Some(FinishReason::MaxTokens));
        assert_eq!(finish_reason(Some("content_filter")), Some(FinishReason::Safety));
        assert_eq!(finish_reason(Some("tool_calls")), Some(FinishReason::Stop));
        assert_eq!(finish_reason(Some("weird")), Some(FinishReason::Other));
        assert_eq!(finish_reason(None), None);
    }
}
