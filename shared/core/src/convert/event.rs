//! Events and their content: `Event`, `EventActions`, `Content`, `Part` and what they
//! carry, to and from `adk.v1`. Every field ADK's models have maps to a typed field or
//! to an `extensions` object (docs/adk-fields.md), so nothing a client sends is lost.

use super::{
    json_from_proto, json_to_proto, object_from_struct, object_to_struct, opt_json_from_proto, timestamp_from_proto,
    timestamp_to_proto, value_map_from_proto, value_map_to_proto,
};
use crate::content::{Content, FunctionResponseData, Part, PartKind, VideoMetadata};
use crate::error::{AdkError, Result};
use crate::event::{
    Event, EventActions, EventCompaction, FinishReason, JsonObject, LlmResponse, ModalityTokenCount, ToolConfirmation,
    Transcription, UsageMetadata,
};
use adk_grpc_proto::ordered;
use adk_grpc_proto::v1 as pb;
use chrono::{DateTime, Utc};
use std::fmt::Display;

/// An optional `Struct` field as an optional JSON object.
fn opt_object(path: impl Display, s: Option<&ordered::Struct>) -> Result<Option<JsonObject>> {
    s.map(|s| object_from_struct(path, s)).transpose()
}

/// An `extensions` field: absent is empty.
fn extensions(path: impl Display, s: Option<&ordered::Struct>) -> Result<JsonObject> {
    Ok(opt_object(path, s)?.unwrap_or_default())
}

/// An empty `extensions` object is not sent.
fn extensions_to_proto(object: &JsonObject) -> Option<ordered::Struct> {
    (!object.is_empty()).then(|| object_to_struct(object))
}

// ---------- content ----------

impl From<&Part> for pb::Part {
    fn from(part: &Part) -> Self {
        use pb::part::Kind as K;
        let kind = match &part.kind {
            PartKind::Text { text } => K::Text(text.clone()),
            PartKind::InlineData { mime_type, data } => K::InlineData(pb::Blob {
                mime_type: mime_type.clone(),
                data: data.clone(),
                display_name: part.display_name.clone(),
            }),
            PartKind::FileData { mime_type, file_uri } => K::FileData(pb::FileData {
                mime_type: mime_type.clone(),
                file_uri: file_uri.clone(),
                display_name: part.display_name.clone(),
            }),
            PartKind::FunctionCall { name, args, id } => K::FunctionCall(pb::FunctionCall {
                name: name.clone(),
                args: Some(json_to_proto(args)),
                id: id.clone(),
                will_continue: part.will_continue,
            }),
            PartKind::FunctionResponse { function_response, id } => K::FunctionResponse(pb::FunctionResponse {
                name: function_response.name.clone(),
                response: Some(json_to_proto(&function_response.response)),
                id: id.clone(),
                will_continue: part.will_continue,
                // Applied when a Run message is stored; never part of a stored event.
                actions: None,
            }),
            PartKind::ExecutableCode { code, language, id } => K::ExecutableCode(pb::ExecutableCode {
                code: code.clone(),
                language: language.clone(),
                id: id.clone(),
            }),
            PartKind::CodeExecutionResult { outcome, output, id } => K::CodeExecutionResult(pb::CodeExecutionResult {
                outcome: outcome.clone(),
                output: output.clone(),
                id: id.clone(),
            }),
        };
        pb::Part {
            kind: Some(kind),
            thought: part.thought,
            thought_signature: part.thought_signature.clone(),
            video_metadata: part.video_metadata.as_ref().map(|v| pb::VideoMetadata {
                start_offset: v.start_offset.clone(),
                end_offset: v.end_offset.clone(),
                fps: v.fps,
            }),
            part_metadata: part.part_metadata.as_ref().map(object_to_struct),
            extensions: extensions_to_proto(&part.extensions),
        }
    }
}

/// The text or the bytes of the part move (a reply built from a part the server is
/// done with); the rest converts as [`From<&Part>`] does.
impl From<Part> for pb::Part {
    fn from(mut part: Part) -> Self {
        use pb::part::Kind as K;
        let kind = match &mut part.kind {
            PartKind::Text { text } => K::Text(std::mem::take(text)),
            PartKind::InlineData { mime_type, data } => K::InlineData(pb::Blob {
                mime_type: std::mem::take(mime_type),
                data: std::mem::take(data),
                display_name: part.display_name.take(),
            }),
            _ => return pb::Part::from(&part),
        };
        pb::Part {
            kind: Some(kind),
            ..pb::Part::from(&part)
        }
    }
}

impl TryFrom<&pb::Part> for Part {
    type Error = AdkError;
    fn try_from(part: &pb::Part) -> Result<Self> {
        Part::from_proto("part", part)
    }
}

impl Part {
    /// The part at `path` (e.g. `event.content.parts[0]`), which names a bad value inside it.
    pub fn from_proto(path: impl Display, part: &pb::Part) -> Result<Self> {
        Part::from_owned_proto(path, part.clone())
    }

    /// [`Part::from_proto`] of a part the caller is done with: its strings and bytes
    /// move instead of being copied.
    pub fn from_owned_proto(path: impl Display, part: pb::Part) -> Result<Self> {
        use pb::part::Kind as K;
        let mut display_name = None;
        let mut will_continue = None;
        let kind = match part.kind {
            None => {
                return Err(AdkError::invalid(
                    path.to_string(),
                    "has no kind set (text, inline_data, file_data, function_call, function_response, \
                     executable_code or code_execution_result)",
                ));
            }
            Some(K::Text(text)) => PartKind::Text { text },
            Some(K::InlineData(b)) => {
                display_name = b.display_name;
                PartKind::InlineData {
                    mime_type: b.mime_type,
                    data: b.data,
                }
            }
            Some(K::FileData(f)) => {
                display_name = f.display_name;
                PartKind::FileData {
                    mime_type: f.mime_type,
                    file_uri: f.file_uri,
                }
            }
            Some(K::FunctionCall(c)) => {
                will_continue = c.will_continue;
                PartKind::FunctionCall {
                    args: opt_json_from_proto(format_args!("{path}.function_call.args"), c.args.as_ref())?,
                    name: c.name,
                    id: c.id,
                }
            }
            Some(K::FunctionResponse(r)) => {
                will_continue = r.will_continue;
                PartKind::FunctionResponse {
                    function_response: FunctionResponseData {
                        response: opt_json_from_proto(
                            format_args!("{path}.function_response.response"),
                            r.response.as_ref(),
                        )?,
                        name: r.name,
                    },
                    id: r.id,
                }
            }
            Some(K::ExecutableCode(c)) => PartKind::ExecutableCode {
                code: c.code,
                language: c.language,
                id: c.id,
            },
            Some(K::CodeExecutionResult(r)) => PartKind::CodeExecutionResult {
                outcome: r.outcome,
                output: r.output,
                id: r.id,
            },
        };
        Ok(Part {
            kind,
            thought: part.thought,
            thought_signature: part.thought_signature,
            display_name,
            will_continue,
            video_metadata: part.video_metadata.map(|v| VideoMetadata {
                start_offset: v.start_offset,
                end_offset: v.end_offset,
                fps: v.fps,
            }),
            part_metadata: opt_object(format_args!("{path}.part_metadata"), part.part_metadata.as_ref())?,
            extensions: extensions(format_args!("{path}.extensions"), part.extensions.as_ref())?,
        })
    }
}

impl From<&Content> for pb::Content {
    fn from(c: &Content) -> Self {
        pb::Content {
            role: c.role.clone(),
            parts: c.parts.iter().map(pb::Part::from).collect(),
        }
    }
}

impl From<Content> for pb::Content {
    fn from(c: Content) -> Self {
        pb::Content {
            role: c.role,
            parts: c.parts.into_iter().map(pb::Part::from).collect(),
        }
    }
}

impl TryFrom<&pb::Content> for Content {
    type Error = AdkError;
    fn try_from(c: &pb::Content) -> Result<Self> {
        Content::from_proto("content", c)
    }
}

impl Content {
    /// The content at `path` (e.g. `new_message`), which names a bad value inside it.
    pub fn from_proto(path: impl Display, c: &pb::Content) -> Result<Self> {
        Content::from_owned_proto(path, c.clone())
    }

    /// [`Content::from_proto`] of content the caller is done with (its parts move).
    pub fn from_owned_proto(path: impl Display, c: pb::Content) -> Result<Self> {
        let parts = c
            .parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| Part::from_owned_proto(format_args!("{path}.parts[{i}]"), part))
            .collect::<Result<_>>()?;
        Ok(Content { role: c.role, parts })
    }
}

// ---------- events ----------

/// Core and proto finish reasons, one pair per value.
const FINISH_REASONS: [(FinishReason, pb::FinishReason); 18] = [
    (FinishReason::Stop, pb::FinishReason::Stop),
    (FinishReason::MaxTokens, pb::FinishReason::MaxTokens),
    (FinishReason::Safety, pb::FinishReason::Safety),
    (FinishReason::Recitation, pb::FinishReason::Recitation),
    (FinishReason::Other, pb::FinishReason::Other),
    (FinishReason::Language, pb::FinishReason::Language),
    (FinishReason::Blocklist, pb::FinishReason::Blocklist),
    (FinishReason::ProhibitedContent, pb::FinishReason::ProhibitedContent),
    (FinishReason::Spii, pb::FinishReason::Spii),
    (
        FinishReason::MalformedFunctionCall,
        pb::FinishReason::MalformedFunctionCall,
    ),
    (FinishReason::ImageSafety, pb::FinishReason::ImageSafety),
    (FinishReason::UnexpectedToolCall, pb::FinishReason::UnexpectedToolCall),
    (FinishReason::TooManyToolCalls, pb::FinishReason::TooManyToolCalls),
    (
        FinishReason::ImageProhibitedContent,
        pb::FinishReason::ImageProhibitedContent,
    ),
    (FinishReason::NoImage, pb::FinishReason::NoImage),
    (FinishReason::ImageRecitation, pb::FinishReason::ImageRecitation),
    (FinishReason::ImageOther, pb::FinishReason::ImageOther),
    (FinishReason::Continuation, pb::FinishReason::Continuation),
];

fn finish_reason_to_proto(r: Option<FinishReason>) -> pb::FinishReason {
    r.and_then(|r| FINISH_REASONS.iter().find(|(core, _)| *core == r))
        .map_or(pb::FinishReason::Unspecified, |(_, proto)| *proto)
}

fn finish_reason_from_proto(r: i32) -> Result<Option<FinishReason>> {
    match pb::FinishReason::try_from(r) {
        Ok(pb::FinishReason::Unspecified) => Ok(None),
        Ok(proto) => Ok(FINISH_REASONS.iter().find(|(_, p)| *p == proto).map(|(core, _)| *core)),
        Err(_) => Err(AdkError::invalid(
            "event.finish_reason",
            format!("{r} is not a known FinishReason"),
        )),
    }
}

impl From<&ModalityTokenCount> for pb::ModalityTokenCount {
    fn from(m: &ModalityTokenCount) -> Self {
        pb::ModalityTokenCount {
            modality: m.modality.clone(),
            token_count: m.token_count,
        }
    }
}

impl From<&pb::ModalityTokenCount> for ModalityTokenCount {
    fn from(m: &pb::ModalityTokenCount) -> Self {
        ModalityTokenCount {
            modality: m.modality.clone(),
            token_count: m.token_count,
        }
    }
}

impl From<&UsageMetadata> for pb::UsageMetadata {
    fn from(u: &UsageMetadata) -> Self {
        let details = |d: &[ModalityTokenCount]| d.iter().map(pb::ModalityTokenCount::from).collect();
        pb::UsageMetadata {
            prompt_token_count: u.prompt_token_count,
            candidates_token_count: u.candidates_token_count,
            total_token_count: u.total_token_count,
            cached_content_token_count: u.cached_content_token_count,
            thoughts_token_count: u.thoughts_token_count,
            tool_use_prompt_token_count: u.tool_use_prompt_token_count,
            prompt_tokens_details: details(&u.prompt_tokens_details),
            cache_tokens_details: details(&u.cache_tokens_details),
            candidates_tokens_details: details(&u.candidates_tokens_details),
            tool_use_prompt_tokens_details: details(&u.tool_use_prompt_tokens_details),
            traffic_type: u.traffic_type.clone(),
        }
    }
}

impl From<&pb::UsageMetadata> for UsageMetadata {
    fn from(u: &pb::UsageMetadata) -> Self {
        let details = |d: &[pb::ModalityTokenCount]| d.iter().map(ModalityTokenCount::from).collect();
        UsageMetadata {
            prompt_token_count: u.prompt_token_count,
            candidates_token_count: u.candidates_token_count,
            total_token_count: u.total_token_count,
            cached_content_token_count: u.cached_content_token_count,
            thoughts_token_count: u.thoughts_token_count,
            tool_use_prompt_token_count: u.tool_use_prompt_token_count,
            prompt_tokens_details: details(&u.prompt_tokens_details),
            cache_tokens_details: details(&u.cache_tokens_details),
            candidates_tokens_details: details(&u.candidates_tokens_details),
            tool_use_prompt_tokens_details: details(&u.tool_use_prompt_tokens_details),
            traffic_type: u.traffic_type.clone(),
        }
    }
}

impl From<&Transcription> for pb::Transcription {
    fn from(t: &Transcription) -> Self {
        pb::Transcription {
            text: t.text.clone(),
            finished: t.finished,
            extensions: extensions_to_proto(&t.extensions),
        }
    }
}

impl Transcription {
    fn from_proto(path: impl Display, t: pb::Transcription) -> Result<Self> {
        Ok(Transcription {
            text: t.text,
            finished: t.finished,
            extensions: extensions(format_args!("{path}.extensions"), t.extensions.as_ref())?,
        })
    }
}

impl From<&EventActions> for pb::EventActions {
    fn from(a: &EventActions) -> Self {
        pb::EventActions {
            state_delta: value_map_to_proto(&a.state_delta),
            artifact_delta: a.artifact_delta.clone(),
            skip_summarization: a.skip_summarization,
            transfer_to_agent: a.transfer_to_agent.clone(),
            escalate: a.escalate,
            transfer_reason: a.transfer_reason.clone(),
            requested_auth_configs: extensions_to_proto(&a.requested_auth_configs),
            requested_tool_confirmations: a
                .requested_tool_confirmations
                .iter()
                .map(|(id, c)| {
                    let confirmation = pb::ToolConfirmation {
                        hint: c.hint.clone(),
                        confirmed: c.confirmed,
                        payload: (!c.payload.is_null()).then(|| json_to_proto(&c.payload)),
                    };
                    (id.clone(), confirmation)
                })
                .collect(),
            compaction: a.compaction.as_ref().map(|c| pb::EventCompaction {
                start_timestamp: Some(timestamp_to_proto(c.start_timestamp)),
                end_timestamp: Some(timestamp_to_proto(c.end_timestamp)),
                compacted_content: Some(pb::Content::from(&c.compacted_content)),
            }),
            end_of_agent: a.end_of_agent,
            agent_state: a.agent_state.as_ref().map(object_to_struct),
            rewind_before_invocation_id: a.rewind_before_invocation_id.clone(),
            set_model_response: a.set_model_response.as_ref().map(json_to_proto),
            extensions: extensions_to_proto(&a.extensions),
        }
    }
}

impl EventActions {
    fn from_proto(path: impl Display, a: pb::EventActions) -> Result<Self> {
        let compaction = a
            .compaction
            .map(|c| {
                let at = |field: &str, t: Option<&prost_types::Timestamp>| {
                    let field = format!("{path}.compaction.{field}");
                    let t = t.ok_or_else(|| AdkError::invalid(&field, "is required"))?;
                    timestamp_from_proto(&field, t)
                };
                let content = c
                    .compacted_content
                    .ok_or_else(|| AdkError::invalid(format!("{path}.compaction.compacted_content"), "is required"))?;
                Ok::<_, AdkError>(EventCompaction {
                    start_timestamp: at("start_timestamp", c.start_timestamp.as_ref())?,
                    end_timestamp: at("end_timestamp", c.end_timestamp.as_ref())?,
                    compacted_content: Content::from_owned_proto(
                        format_args!("{path}.compaction.compacted_content"),
                        content,
                    )?,
                })
            })
            .transpose()?;
        let requested_tool_confirmations = a
            .requested_tool_confirmations
            .into_iter()
            .map(|(id, c)| {
                let payload = opt_json_from_proto(
                    format_args!("{path}.requested_tool_confirmations[{id:?}].payload"),
                    c.payload.as_ref(),
                )?;
                let confirmation = ToolConfirmation {
                    hint: c.hint,
                    confirmed: c.confirmed,
                    payload,
                };
                Ok((id, confirmation))
            })
            .collect::<Result<_>>()?;
        Ok(EventActions {
            state_delta: value_map_from_proto(format_args!("{path}.state_delta"), &a.state_delta)?,
            artifact_delta: a.artifact_delta,
            skip_summarization: a.skip_summarization,
            transfer_to_agent: a.transfer_to_agent,
            escalate: a.escalate,
            transfer_reason: a.transfer_reason,
            requested_auth_configs: extensions(
                format_args!("{path}.requested_auth_configs"),
                a.requested_auth_configs.as_ref(),
            )?,
            requested_tool_confirmations,
            compaction,
            end_of_agent: a.end_of_agent,
            agent_state: opt_object(format_args!("{path}.agent_state"), a.agent_state.as_ref())?,
            rewind_before_invocation_id: a.rewind_before_invocation_id,
            set_model_response: a
                .set_model_response
                .as_ref()
                .map(|value| json_from_proto(format_args!("{path}.set_model_response"), value))
                .transpose()?,
            extensions: extensions(format_args!("{path}.extensions"), a.extensions.as_ref())?,
        })
    }
}

impl From<&Event> for pb::Event {
    fn from(e: &Event) -> Self {
        let r = &e.llm_response;
        pb::Event {
            id: e.id.clone(),
            timestamp: Some(timestamp_to_proto(e.timestamp)),
            invocation_id: e.invocation_id.clone(),
            branch: e.branch.clone(),
            author: e.author.clone(),
            content: r.content.as_ref().map(pb::Content::from),
            usage_metadata: r.usage_metadata.as_ref().map(pb::UsageMetadata::from),
            finish_reason: finish_reason_to_proto(r.finish_reason) as i32,
            partial: r.partial,
            turn_complete: r.turn_complete,
            interrupted: r.interrupted,
            error_code: r.error_code.clone(),
            error_message: r.error_message.clone(),
            actions: Some(pb::EventActions::from(&e.actions)),
            long_running_tool_ids: e.long_running_tool_ids.clone(),
            sequence: e.sequence,
            model_version: r.model_version.clone(),
            grounding_metadata: r.grounding_metadata.as_ref().map(object_to_struct),
            citation_metadata: r.citation_metadata.as_ref().map(object_to_struct),
            custom_metadata: r.custom_metadata.as_ref().map(object_to_struct),
            input_transcription: r.input_transcription.as_ref().map(pb::Transcription::from),
            output_transcription: r.output_transcription.as_ref().map(pb::Transcription::from),
            avg_logprobs: r.avg_logprobs,
            logprobs_result: r.logprobs_result.as_ref().map(object_to_struct),
            turn_complete_reason: r.turn_complete_reason.clone(),
            isolation_scope: e.isolation_scope.clone(),
            output: e.output.as_ref().map(json_to_proto),
            extensions: extensions_to_proto(&e.extensions),
        }
    }
}

/// The event's strings and its content's text and bytes move (a reply built from an
/// event the server is done with); the rest converts as [`From<&Event>`] does.
impl From<Event> for pb::Event {
    fn from(mut e: Event) -> Self {
        let r = &mut e.llm_response;
        let content = r.content.take().map(pb::Content::from);
        let (error_code, error_message) = (r.error_code.take(), r.error_message.take());
        let (model_version, turn_complete_reason) = (r.model_version.take(), r.turn_complete_reason.take());
        pb::Event {
            id: std::mem::take(&mut e.id),
            invocation_id: std::mem::take(&mut e.invocation_id),
            branch: std::mem::take(&mut e.branch),
            author: std::mem::take(&mut e.author),
            isolation_scope: std::mem::take(&mut e.isolation_scope),
            long_running_tool_ids: std::mem::take(&mut e.long_running_tool_ids),
            content,
            error_code,
            error_message,
            model_version,
            turn_complete_reason,
            ..pb::Event::from(&e)
        }
    }
}

impl TryFrom<&pb::Event> for Event {
    type Error = AdkError;
    /// See the owned conversion below.
    fn try_from(e: &pb::Event) -> Result<Self> {
        Event::try_from(e.clone())
    }
}

impl TryFrom<pb::Event> for Event {
    type Error = AdkError;
    /// A missing timestamp becomes "now". Only events outside the session log meet
    /// one (a memory request's): stored and returned events always have theirs, and an
    /// appended event without one is stamped by the session service with its store's
    /// clock (see [`Event::from_proto_unstamped`]). The event's strings and bytes move.
    fn try_from(e: pb::Event) -> Result<Self> {
        let (mut event, timestamp_missing) = Event::from_proto_unstamped(e)?;
        if timestamp_missing {
            event.timestamp = Utc::now();
        }
        Ok(event)
    }
}

impl Event {
    /// The event, and whether it came without a timestamp: then its `timestamp` is a
    /// placeholder (the Unix epoch) for whoever owns the rule that fills it in.
    pub(crate) fn from_proto_unstamped(e: pb::Event) -> Result<(Event, bool)> {
        let timestamp_missing = e.timestamp.is_none();
        let timestamp = match &e.timestamp {
            Some(t) => timestamp_from_proto("event.timestamp", t)?,
            None => DateTime::<Utc>::UNIX_EPOCH,
        };
        let actions = match e.actions {
            None => EventActions::default(),
            Some(a) => EventActions::from_proto("event.actions", a)?,
        };
        let transcription = |field: &str, t: Option<pb::Transcription>| {
            t.map(|t| Transcription::from_proto(format_args!("event.{field}"), t))
                .transpose()
        };
        let event = Event {
            id: e.id,
            timestamp,
            invocation_id: e.invocation_id,
            branch: e.branch,
            author: e.author,
            llm_response: LlmResponse {
                content: e
                    .content
                    .map(|c| Content::from_owned_proto("event.content", c))
                    .transpose()?,
                usage_metadata: e.usage_metadata.as_ref().map(UsageMetadata::from),
                finish_reason: finish_reason_from_proto(e.finish_reason)?,
                partial: e.partial,
                turn_complete: e.turn_complete,
                interrupted: e.interrupted,
                error_code: e.error_code,
                error_message: e.error_message,
                model_version: e.model_version,
                grounding_metadata: opt_object("event.grounding_metadata", e.grounding_metadata.as_ref())?,
                citation_metadata: opt_object("event.citation_metadata", e.citation_metadata.as_ref())?,
                custom_metadata: opt_object("event.custom_metadata", e.custom_metadata.as_ref())?,
                input_transcription: transcription("input_transcription", e.input_transcription)?,
                output_transcription: transcription("output_transcription", e.output_transcription)?,
                avg_logprobs: e.avg_logprobs,
                logprobs_result: opt_object("event.logprobs_result", e.logprobs_result.as_ref())?,
                turn_complete_reason: e.turn_complete_reason,
            },
            actions,
            long_running_tool_ids: e.long_running_tool_ids,
            sequence: e.sequence,
            isolation_scope: e.isolation_scope,
            output: e
                .output
                .as_ref()
                .map(|value| json_from_proto("event.output", value))
                .transpose()?,
            extensions: extensions("event.extensions", e.extensions.as_ref())?,
        };
        Ok((event, timestamp_missing))
    }
}
