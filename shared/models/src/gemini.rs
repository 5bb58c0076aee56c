//! Google's Gemini API (`generateContent` / `streamGenerateContent?alt=sse`).

use crate::http::{ApiKey, Decoded, HttpClient, SseDecoder, decimal, truncate};
use crate::inline_files::safe_for_gemini;
use crate::response;
use crate::sse::SseEvent;
use adk_grpc_core::{
    AdkError, BuiltinTool, FinishReason, ImageConfig, Llm, LlmRequest, LlmResponse, LlmResponseStream,
    ModalityTokenCount, Part, PartKind, Result, ToolConfig, UsageMetadata,
};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::header::HeaderName;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::time::Duration;

const PROVIDER: &str = "gemini";

/// The public Gemini API, the default base URL.
pub const GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// A Gemini model.
#[derive(Debug, Clone)]
pub struct Gemini {
    http: HttpClient,
    base_url: String,
    model: String,
}

impl Gemini {
    /// `model` as Google names it, e.g. `gemini-2.0-flash` (a `models/` prefix is accepted).
    pub fn new(model: impl Into<String>) -> Result<Self> {
        let model = model.into();
        Ok(Gemini {
            http: HttpClient::new(PROVIDER, &model)?,
            base_url: GEMINI_BASE_URL.to_string(),
            model,
        })
    }

    /// Another endpoint speaking the same API (a proxy, a test server).
    pub fn with_base_url(mut self, base_url: impl AsRef<str>) -> Self {
        self.base_url = base_url.as_ref().trim_end_matches('/').to_string();
        self
    }

    /// Sent in the `x-goog-api-key` header, never in the URL, so it cannot end
    /// up in an error message or a proxy log.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Result<Self> {
        self.http.set_auth(
            HeaderName::from_static("x-goog-api-key"),
            ApiKey::new(PROVIDER, key, "")?,
        );
        Ok(self)
    }

    /// How long the provider may take to answer, and for streams the longest
    /// silence between two chunks (default 60 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.http.timeout = timeout;
        self
    }

    fn url(&self, request: &LlmRequest, stream: bool) -> String {
        let model = if request.model.is_empty() {
            &self.model
        } else {
            &request.model
        };
        let model = model.strip_prefix("models/").unwrap_or(model);
        let method = if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        format!("{}/v1beta/models/{model}:{method}", self.base_url)
    }
}

#[async_trait]
impl Llm for Gemini {
    fn name(&self) -> &str {
        &self.model
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn generate_content(&self, request: LlmRequest, stream: bool) -> Result<LlmResponseStream> {
        let url = self.url(&request, stream);
        let body = request_body(&request);
        if stream {
            return self.http.post_sse(&url, &body, StreamDecoder::default()).await;
        }
        let reply = self.http.post_json(&url, &body).await?;
        let reply: GenerateContentResponse = serde_json::from_value(reply)
            .map_err(|e| AdkError::Model(format!("{PROVIDER} sent a malformed response: {e}")))?;
        let mut decoder = StreamDecoder::default();
        decoder.absorb(reply)?;
        let response = decoder.complete()?;
        Ok(Box::pin(futures::stream::once(async { Ok(response) })))
    }
}

// ---- request ---------------------------------------------------------------

fn request_body(request: &LlmRequest) -> Value {
    let contents: Vec<Value> = request
        .contents
        .iter()
        .filter(|content| !content.parts.is_empty()) // Gemini rejects a turn without parts
        .map(|content| {
            // Gemini knows two roles; tool results travel in "user" turns.
            let role = if content.role == "model" { "model" } else { "user" };
            let parts: Vec<Value> = content.parts.iter().map(|p| part(&safe_for_gemini(p))).collect();
            json!({"role": role, "parts": parts})
        })
        .collect();
    let mut body = json!({ "contents": contents });
    if let Some(system) = request.system_instruction.as_deref().filter(|s| !s.is_empty()) {
        // With the role google-genai gives it, so the request is byte for byte ADK's.
        body["systemInstruction"] = json!({"role": "user", "parts": [{"text": system}]});
    }
    // Gemini's own tools first, then the function declarations, as ADK's requests list
    // them whatever the agent's order (the conformance case `model_consult_builtin`).
    let mut tools: Vec<Value> = request
        .config
        .builtin_tools
        .iter()
        .map(|builtin| match builtin {
            BuiltinTool::GoogleSearch => json!({"googleSearch": {}}),
            BuiltinTool::UrlContext => json!({"urlContext": {}}),
            BuiltinTool::CodeExecution => json!({"codeExecution": {}}),
            // As ADK's GoogleMapsGroundingTool adds it (types.Tool(google_maps=types.GoogleMaps())).
            BuiltinTool::GoogleMaps => json!({"googleMaps": {}}),
        })
        .collect();
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                let mut declaration = json!({"name": tool.name, "description": tool.description});
                if let Some(parameters) = &tool.parameters {
                    declaration["parameters"] = parameters.clone();
                }
                // A JSON Schema (not Gemini's OpenAPI `Schema`): the field that takes one as it is.
                if let Some(response) = &tool.response {
                    declaration["responseJsonSchema"] = response.clone();
                }
                declaration
            })
            .collect();
        tools.push(json!({ "functionDeclarations": declarations }));
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    let config = &request.config;
    let mut generation = Map::new();
    if let Some(t) = config.temperature {
        generation.insert("temperature".into(), decimal(t));
    }
    if let Some(p) = config.top_p {
        generation.insert("topP".into(), decimal(p));
    }
    if let Some(n) = config.max_output_tokens {
        generation.insert("maxOutputTokens".into(), json!(n));
    }
    if !config.stop_sequences.is_empty() {
        generation.insert("stopSequences".into(), json!(config.stop_sequences));
    }
    if let Some(k) = config.top_k {
        // A number as google-genai sends it (its `top_k` is a float): `20.0`, as ADK's request.
        generation.insert("topK".into(), json!(f64::from(k)));
    }
    if let Some(seed) = config.seed {
        generation.insert("seed".into(), json!(seed));
    }
    if let Some(p) = config.presence_penalty {
        generation.insert("presencePenalty".into(), decimal(p));
    }
    if let Some(p) = config.frequency_penalty {
        generation.insert("frequencyPenalty".into(), decimal(p));
    }
    // The schema is a JSON Schema, which `responseJsonSchema` takes as it is
    // (`responseSchema` wants Gemini's OpenAPI subset), unless it came from a Python
    // class, which google-genai sends in that subset.
    match (&config.response_schema_as_sent, &config.response_schema) {
        (Some(sent), _) => {
            generation.insert("responseSchema".into(), sent.gemini.clone());
        }
        (None, Some(schema)) => {
            generation.insert("responseJsonSchema".into(), schema.clone());
        }
        (None, None) => {}
    }
    match (&config.response_mime_type, &config.response_schema) {
        (Some(mime), _) => {
            generation.insert("responseMimeType".into(), json!(mime));
        }
        (None, Some(_)) => {
            generation.insert("responseMimeType".into(), json!("application/json"));
        }
        (None, None) => {}
    }
    if let Some(thinking) = &config.thinking {
        // The field names google-genai sends (it copies its ThinkingConfig as is, in
        // snake case, which Gemini's JSON accepts as well as camel case): ADK's request.
        let mut wire = Map::new();
        if let Some(budget) = thinking.budget_tokens {
            wire.insert("thinking_budget".into(), json!(budget));
        }
        if let Some(include) = thinking.include_thoughts {
            wire.insert("include_thoughts".into(), json!(include));
        }
        if let Some(effort) = thinking.effort {
            wire.insert("thinking_level".into(), json!(effort.as_str().to_ascii_uppercase()));
        }
        generation.insert("thinkingConfig".into(), Value::Object(wire));
    }
    if let Some(n) = config.candidate_count {
        generation.insert("candidateCount".into(), json!(n));
    }
    if let Some(on) = config.response_logprobs {
        generation.insert("responseLogprobs".into(), json!(on));
    }
    if let Some(n) = config.logprobs {
        generation.insert("logprobs".into(), json!(n));
    }
    if let Some(resolution) = &config.media_resolution {
        generation.insert("mediaResolution".into(), json!(resolution));
    }
    if !config.response_modalities.is_empty() {
        generation.insert("responseModalities".into(), json!(config.response_modalities));
    }
    if let Some(on) = config.enable_enhanced_civic_answers {
        generation.insert("enableEnhancedCivicAnswers".into(), json!(on));
    }
    if let Some(image) = &config.image_config {
        generation.insert("imageConfig".into(), image_config(image));
    }
    // Both as google-genai sends them: the config's own objects, its field names.
    if let Some(speech) = &config.speech_config {
        generation.insert("speechConfig".into(), speech.clone());
    }
    if let Some(transcription) = &config.audio_transcription_config {
        generation.insert("audioTranscriptionConfig".into(), transcription.clone());
    }
    if !config.safety_settings.is_empty() {
        body["safetySettings"] = json!(config.safety_settings);
    }
    if let Some(calling) = &config.tool_config {
        body["toolConfig"] = tool_config(calling);
    }
    if let Some(tier) = &config.service_tier {
        body["serviceTier"] = json!(tier);
    }
    if let Some(store) = config.store {
        body["store"] = json!(store);
    }
    if let Some(cache) = &config.cached_content {
        body["cachedContent"] = json!(cache);
    }
    if !generation.is_empty() {
        body["generationConfig"] = Value::Object(generation);
    }
    body
}

/// Gemini's `toolConfig`, camelCase as google-genai writes it.
fn tool_config(config: &ToolConfig) -> Value {
    let mut wire = Map::new();
    if let Some(calling) = &config.function_calling_config {
        let mut calling_wire = Map::new();
        if let Some(mode) = calling.mode {
            calling_wire.insert("mode".into(), json!(mode));
        }
        if let Some(names) = &calling.allowed_function_names {
            calling_wire.insert("allowedFunctionNames".into(), json!(names));
        }
        wire.insert("functionCallingConfig".into(), Value::Object(calling_wire));
    }
    Value::Object(wire)
}

/// Gemini's `imageConfig`, camelCase as google-genai writes it.
fn image_config(config: &ImageConfig) -> Value {
    let mut wire = Map::new();
    if let Some(ratio) = &config.aspect_ratio {
        wire.insert("aspectRatio".into(), json!(ratio));
    }
    if let Some(size) = &config.image_size {
        wire.insert("imageSize".into(), json!(size));
    }
    Value::Object(wire)
}

fn part(part: &Part) -> Value {
    let mut json = part_kind(&part.kind);
    if let Some(thought) = part.thought {
        json["thought"] = json!(thought);
    }
    if let Some(signature) = &part.thought_signature {
        json["thoughtSignature"] = json!(BASE64.encode(signature));
    }
    json
}

fn part_kind(kind: &PartKind) -> Value {
    match kind {
        PartKind::Text { text } => json!({"text": text}),
        // The blob's and the file's fields in snake_case, as google-genai sends them (it
        // copies the pydantic objects as they are; Gemini's JSON reads either case).
        PartKind::InlineData { mime_type, data } => {
            json!({"inlineData": {"data": BASE64.encode(data), "mime_type": mime_type}})
        }
        PartKind::FileData { mime_type, file_uri } => {
            json!({"fileData": {"file_uri": file_uri, "mime_type": mime_type}})
        }
        PartKind::FunctionCall { name, args, id } => {
            let mut call = json!({"name": name, "args": args});
            if let Some(id) = id {
                call["id"] = json!(id);
            }
            json!({ "functionCall": call })
        }
        PartKind::FunctionResponse { function_response, id } => {
            // The API wants an object here; a tool that returned a bare value
            // gets it wrapped the way ADK does.
            let response = match &function_response.response {
                Value::Object(_) => function_response.response.clone(),
                other => json!({ "result": other }),
            };
            let mut reply = json!({"name": function_response.name, "response": response});
            if let Some(id) = id {
                reply["id"] = json!(id);
            }
            json!({ "functionResponse": reply })
        }
        PartKind::ExecutableCode { code, language, .. } => {
            json!({"executableCode": {"code": code, "language": language}})
        }
        PartKind::CodeExecutionResult { outcome, output, .. } => {
            json!({"codeExecutionResult": {"outcome": outcome, "output": output}})
        }
    }
}

// ---- response --------------------------------------------------------------

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GenerateContentResponse {
    #[serde(default)]
    candidates: Vec<Candidate>,
    usage_metadata: Option<Usage>,
    model_version: Option<String>,
    prompt_feedback: Option<PromptFeedback>,
    /// Set when the stream reports a failure after a 200.
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    content: Option<WireContent>,
    finish_reason: Option<String>,
    /// What google_search / url_context based the reply on.
    grounding_metadata: Option<Map<String, Value>>,
    /// With `responseLogprobs`: this chunk's average, and its tokens' log probabilities.
    avg_logprobs: Option<f64>,
    logprobs_result: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct WireContent {
    #[serde(default)]
    parts: Vec<WirePart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePart {
    text: Option<String>,
    /// Thought summaries are the model's scratch work, not its reply.
    #[serde(default)]
    thought: bool,
    /// Opaque; goes back to the model with the part it came on.
    thought_signature: Option<String>,
    function_call: Option<WireFunctionCall>,
    inline_data: Option<WireBlob>,
    /// Code the model ran with the codeExecution tool, and its result.
    executable_code: Option<WireExecutableCode>,
    code_execution_result: Option<WireCodeExecutionResult>,
}

#[derive(Deserialize)]
struct WireExecutableCode {
    code: Option<String>,
    language: Option<String>,
}

#[derive(Deserialize)]
struct WireCodeExecutionResult {
    outcome: Option<String>,
    output: Option<String>,
}

#[derive(Deserialize)]
struct WireFunctionCall {
    name: String,
    #[serde(default)]
    args: Value,
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlob {
    mime_type: String,
    data: String,
    /// What a generated file is called (ADK's code executor saves an image under it).
    display_name: Option<String>,
}

/// google.genai's GenerateContentResponseUsageMetadata, every field of which ADK stores.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    prompt_token_count: Option<i32>,
    candidates_token_count: Option<i32>,
    total_token_count: Option<i32>,
    cached_content_token_count: Option<i32>,
    thoughts_token_count: Option<i32>,
    tool_use_prompt_token_count: Option<i32>,
    #[serde(default)]
    prompt_tokens_details: Vec<WireModalityTokenCount>,
    #[serde(default)]
    cache_tokens_details: Vec<WireModalityTokenCount>,
    #[serde(default)]
    candidates_tokens_details: Vec<WireModalityTokenCount>,
    #[serde(default)]
    tool_use_prompt_tokens_details: Vec<WireModalityTokenCount>,
    traffic_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireModalityTokenCount {
    modality: Option<String>,
    token_count: Option<i32>,
}

impl From<WireModalityTokenCount> for ModalityTokenCount {
    fn from(wire: WireModalityTokenCount) -> Self {
        ModalityTokenCount {
            modality: wire.modality,
            token_count: wire.token_count,
        }
    }
}

impl From<Usage> for UsageMetadata {
    fn from(usage: Usage) -> Self {
        let details = |wire: Vec<WireModalityTokenCount>| wire.into_iter().map(Into::into).collect();
        UsageMetadata {
            prompt_token_count: usage.prompt_token_count,
            candidates_token_count: usage.candidates_token_count,
            total_token_count: usage.total_token_count,
            cached_content_token_count: usage.cached_content_token_count,
            thoughts_token_count: usage.thoughts_token_count,
            tool_use_prompt_token_count: usage.tool_use_prompt_token_count,
            prompt_tokens_details: details(usage.prompt_tokens_details),
            cache_tokens_details: details(usage.cache_tokens_details),
            candidates_tokens_details: details(usage.candidates_tokens_details),
            tool_use_prompt_tokens_details: details(usage.tool_use_prompt_tokens_details),
            traffic_type: usage.traffic_type,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

fn finish_reason(reason: &str) -> FinishReason {
    // Gemini names its reasons as google.genai's FinishReason, which ours mirrors.
    serde_json::from_value(Value::String(reason.to_string())).unwrap_or(FinishReason::Other)
}

/// Gathers a reply. A non-streamed reply is one chunk absorbed whole; a streamed
/// one is many, each of whose text also goes out at once as a partial.
#[derive(Default)]
struct StreamDecoder {
    parts: Vec<Part>,
    finish_reason: Option<FinishReason>,
    usage: Option<UsageMetadata>,
    model_version: Option<String>,
    /// Why the prompt was refused, when Gemini refused it outright.
    block_reason: Option<String>,
    grounding_metadata: Option<Map<String, Value>>,
    logprobs: response::Logprobs,
}

impl StreamDecoder {
    /// Takes in one response chunk; returns its partials: thought text, then reply text.
    fn absorb(&mut self, chunk: GenerateContentResponse) -> Result<Vec<LlmResponse>> {
        if let Some(error) = chunk.error {
            let message = error["message"]
                .as_str()
                .map_or_else(|| error.to_string(), str::to_string);
            return Err(AdkError::Model(format!(
                "{PROVIDER} reported an error mid-stream: {message}"
            )));
        }
        if let Some(usage) = chunk.usage_metadata {
            // Each chunk carries the running totals: the last one counts.
            self.usage = Some(usage.into());
        }
        // ADK keeps the model version of the last chunk, as google.genai reports it.
        self.model_version = chunk.model_version;
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            self.block_reason = Some(reason);
        }
        let mut text = String::new();
        let mut thought = String::new();
        let Some(candidate) = chunk.candidates.into_iter().next() else {
            return Ok(Vec::new());
        };
        if let Some(reason) = candidate.finish_reason.as_deref() {
            self.finish_reason = Some(finish_reason(reason));
        }
        if let Some(grounding) = candidate.grounding_metadata {
            self.grounding_metadata = Some(grounding);
        }
        if let Some(avg) = candidate.avg_logprobs {
            self.logprobs.average = Some(avg);
        }
        if let Some(result) = candidate.logprobs_result {
            // google.genai's field names (ADK stores its LogprobsResult so); a streamed
            // reply's chunks each bring their own tokens.
            let result = adk_grpc_core::with_snake_case_keys(Value::Object(result));
            let steps = |key: &str| result[key].as_array().cloned().unwrap_or_default();
            self.logprobs.chosen.extend(steps("chosen_candidates"));
            self.logprobs.top.extend(steps("top_candidates"));
        }
        for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
            let signature = match part.thought_signature.filter(|s| !s.is_empty()) {
                Some(encoded) => Some(BASE64.decode(encoded.as_bytes()).map_err(|e| {
                    AdkError::Model(format!("{PROVIDER} sent a thought signature that is not base64: {e}"))
                })?),
                None => None,
            };
            if let Some(t) = part.text.filter(|t| !t.is_empty()) {
                if part.thought {
                    response::push_thought(&mut self.parts, &t);
                    thought.push_str(&t);
                } else {
                    response::push_text(&mut self.parts, &t);
                    text.push_str(&t);
                }
            }
            if let Some(call) = part.function_call {
                // No id from Gemini: left empty, the runner assigns one.
                let args = if call.args.is_null() { json!({}) } else { call.args };
                self.parts.push(
                    PartKind::FunctionCall {
                        name: call.name,
                        args,
                        id: call.id.filter(|id| !id.is_empty()),
                    }
                    .into(),
                );
            }
            if let Some(blob) = part.inline_data {
                let data = BASE64
                    .decode(blob.data.as_bytes())
                    .map_err(|e| AdkError::Model(format!("{PROVIDER} sent inline data that is not base64: {e}")))?;
                let mut inline: Part = PartKind::InlineData {
                    mime_type: blob.mime_type,
                    data,
                }
                .into();
                inline.display_name = blob.display_name;
                self.parts.push(inline);
            }
            if let Some(code) = part.executable_code {
                self.parts.push(
                    PartKind::ExecutableCode {
                        code: code.code,
                        language: code.language,
                        id: None,
                    }
                    .into(),
                );
            }
            if let Some(result) = part.code_execution_result {
                self.parts.push(
                    PartKind::CodeExecutionResult {
                        outcome: result.outcome,
                        output: result.output,
                        id: None,
                    }
                    .into(),
                );
            }
            // A signature belongs to the part it came on: the one just added, or the
            // text it was merged into (Gemini may send it on an empty closing part).
            if let Some(signature) = signature
                && let Some(last) = self.parts.last_mut()
            {
                last.thought_signature = Some(signature);
            }
        }
        let mut partials = Vec::new();
        if !thought.is_empty() {
            partials.push(response::partial_thought(thought));
        }
        if !text.is_empty() {
            partials.push(response::partial_text(text));
        }
        Ok(partials)
    }

    fn complete(&mut self) -> Result<LlmResponse> {
        let parts = std::mem::take(&mut self.parts);
        if let Some(reason) = self.block_reason.take().filter(|_| parts.is_empty()) {
            return Ok(LlmResponse {
                finish_reason: Some(FinishReason::Safety),
                usage_metadata: self.usage.take(),
                model_version: self.model_version.take(),
                error_message: Some(format!("{PROVIDER} blocked the prompt ({reason})")),
                error_code: Some(reason),
                ..Default::default()
            });
        }
        let mut response = response::complete(PROVIDER, parts, self.finish_reason, self.usage.take());
        response.grounding_metadata = self.grounding_metadata.take();
        response.model_version = self.model_version.take();
        std::mem::take(&mut self.logprobs).apply(&mut response);
        Ok(response)
    }
}

impl SseDecoder for StreamDecoder {
    fn event(&mut self, event: &SseEvent) -> Result<Decoded> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Decoded::Partials(Vec::new()));
        }
        let chunk: GenerateContentResponse = serde_json::from_str(data).map_err(|e| {
            AdkError::Model(format!(
                "{PROVIDER} sent a malformed stream chunk ({e}): {}",
                truncate(data, 200)
            ))
        })?;
        Ok(Decoded::Partials(self.absorb(chunk)?))
    }

    /// Gemini has no end marker: the body simply ends after the chunk carrying
    /// `finishReason`. An end without one means the stream was cut short.
    fn end_of_body(&mut self) -> Result<LlmResponse> {
        if self.finish_reason.is_none() && self.block_reason.is_none() {
            return Err(AdkError::Unavailable(format!(
                "{PROVIDER} stream ended before its final chunk: the reply is incomplete"
            )));
        }
        self.complete()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reasons() {
        assert_eq!(finish_reason("STOP"), FinishReason::Stop);
        assert_eq!(finish_reason("MAX_TOKENS"), FinishReason::MaxTokens);
        assert_eq!(finish_reason("PROHIBITED_CONTENT"), FinishReason::ProhibitedContent);
        assert_eq!(finish_reason("RECITATION"), FinishReason::Recitation);
        assert_eq!(
            finish_reason("MALFORMED_FUNCTION_CALL"),
            FinishReason::MalformedFunctionCall
        );
        assert_eq!(finish_reason("A_REASON_FROM_THE_FUTURE"), FinishReason::Other);
    }

    #[test]
    fn blocked_prompt_is_reported() {
        let mut decoder = StreamDecoder::default();
        let reply = serde_json::from_value(json!({"promptFeedback": {"blockReason": "SAFETY"}})).unwrap();
        decoder.absorb(reply).unwrap();
        let response = decoder.complete().unwrap();
        assert_eq!(response.error_code.as_deref(), Some("SAFETY"));
        assert_eq!(response.finish_reason, Some(FinishReason::Safety));
        assert!(response.content.is_none());
    }

    #[test]
    fn bare_tool_results_are_wrapped_in_an_object() {
        let wire = part_kind(&PartKind::FunctionResponse {
            function_response: adk_grpc_core::FunctionResponseData {
                name: "f".into(),
                response: json!("done"),
            },
            id: None,
        });
        assert_eq!(
            wire,
            json!({"functionResponse": {"name": "f", "response": {"result": "done"}}})
        );
    }
}
