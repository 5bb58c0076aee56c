//! Conversions between ADK's `Content`/`Part` and A2A's `Message`/`Part`, task
//! ids, and task states.

use adk_grpc_core::convert::{json_from_proto, json_to_proto};
use adk_grpc_core::{AdkError, Content, Event, FunctionResponseData, Part, PartKind, Result, validate};
use adk_grpc_proto::a2a;
use serde_json::{Value, json};

/// The `metadata` key that marks an A2A data part as an ADK function call or response.
pub const ADK_TYPE: &str = "adk_type";
const FUNCTION_CALL: &str = "function_call";
const FUNCTION_RESPONSE: &str = "function_response";

/// A task id names its session and its first invocation, `<session id>:<invocation id>`,
/// so GetTask finds it from the id alone (invocation ids hold no `:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskId {
    pub session_id: String,
    pub invocation_id: String,
}

impl TaskId {
    pub fn new(session_id: &str, invocation_id: &str) -> Self {
        TaskId {
            session_id: session_id.to_string(),
            invocation_id: invocation_id.to_string(),
        }
    }

    /// Parses `field` (a task id from a client): INVALID_ARGUMENT naming the field when
    /// it is not one this server made.
    pub fn parse(field: &str, id: &str) -> Result<TaskId> {
        validate::id(field, id)?;
        match id.rsplit_once(':') {
            Some((session_id, invocation_id)) if !session_id.is_empty() && !invocation_id.is_empty() => {
                Ok(TaskId::new(session_id, invocation_id))
            }
            _ => Err(AdkError::invalid_with(
                field.to_string(),
                format!("{field} {id:?} is not a task id of this server (<context id>:<invocation id>)"),
            )),
        }
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.session_id, self.invocation_id)
    }
}

/// An ADK part as an A2A part; None for parts A2A has no use for (thoughts, code execution).
pub fn part_to_a2a(part: &Part) -> Option<a2a::Part> {
    if part.is_thought() {
        return None;
    }
    let marked = |kind: &str| {
        Some(adk_grpc_core::convert::map_to_struct(
            [(ADK_TYPE.to_string(), Value::String(kind.to_string()))]
                .iter()
                .map(|(k, v)| (k, v)),
        ))
    };
    let (content, metadata, media_type) = match &part.kind {
        PartKind::Text { text } => (a2a::part::Content::Text(text.clone()), None, String::new()),
        PartKind::InlineData { mime_type, data } => (a2a::part::Content::Raw(data.clone()), None, mime_type.clone()),
        PartKind::FileData { mime_type, file_uri } => {
            (a2a::part::Content::Url(file_uri.clone()), None, mime_type.clone())
        }
        PartKind::FunctionCall { name, args, id } => (
            a2a::part::Content::Data(json_to_proto(&json!({ "id": id, "name": name, "args": args }))),
            marked(FUNCTION_CALL),
            "application/json".to_string(),
        ),
        PartKind::FunctionResponse { function_response, id } => (
            a2a::part::Content::Data(json_to_proto(&json!({
                "id": id, "name": function_response.name, "response": function_response.response,
            }))),
            marked(FUNCTION_RESPONSE),
            "application/json".to_string(),
        ),
        _ => return None,
    };
    Some(a2a::Part {
        content: Some(content),
        metadata,
        filename: part.display_name.clone().unwrap_or_default(),
        media_type,
    })
}

/// The A2A message of an event's content (role agent unless the user wrote it);
/// None when nothing of it maps to A2A.
pub fn message_of_event(event: &Event, task_id: &TaskId) -> Option<a2a::Message> {
    let content = event.content()?;
    let parts: Vec<a2a::Part> = content.parts.iter().filter_map(part_to_a2a).collect();
    if parts.is_empty() {
        return None;
    }
    let role = if event.author == crate::rules::USER_AUTHOR {
        a2a::Role::User
    } else {
        a2a::Role::Agent
    };
    Some(a2a::Message {
        message_id: event.id.clone(),
        context_id: task_id.session_id.clone(),
        task_id: task_id.to_string(),
        role: role as i32,
        parts,
        ..Default::default()
    })
}

/// A client's A2A message as the user's `Content`. Text becomes text, raw bytes inline
/// data, a URL file data, a data part marked as a function response that response, and
/// any other data part its JSON as text (what a model reads).
pub fn content_from_a2a(message: &a2a::Message) -> Result<Content> {
    let mut content = Content::new("user");
    for (i, part) in message.parts.iter().enumerate() {
        let field = format!("message.parts[{i}]");
        let Some(kind) = &part.content else {
            return Err(AdkError::invalid_with(
                field.to_string(),
                format!("{field} has no content (text, raw, url or data)"),
            ));
        };
        let mut converted = match kind {
            a2a::part::Content::Text(text) => Part::text_part(text.clone()),
            a2a::part::Content::Raw(bytes) => Part::inline_data(media_type_or_default(&part.media_type), bytes.clone()),
            a2a::part::Content::Url(url) => Part::file_data(media_type_or_default(&part.media_type), url.clone()),
            a2a::part::Content::Data(data) => {
                let data = json_from_proto(format_args!("{field}.data"), data)?;
                if is_marked(part, FUNCTION_RESPONSE) {
                    function_response_from_data(&field, &data)?
                } else {
                    Part::text_part(data.to_string())
                }
            }
        };
        if !part.filename.is_empty() && converted.is_media() {
            converted.display_name = Some(part.filename.clone());
        }
        content.parts.push(converted);
    }
    if content.parts.is_empty() {
        return Err(AdkError::invalid_with(
            "message.parts",
            "message.parts is empty: a message needs at least one part",
        ));
    }
    validate::content_limits("message", &content)?;
    Ok(content)
}

fn media_type_or_default(media_type: &str) -> String {
    match media_type {
        "" => "application/octet-stream".to_string(),
        other => other.to_string(),
    }
}

fn is_marked(part: &a2a::Part, kind: &str) -> bool {
    part.metadata
        .as_ref()
        .and_then(|metadata| metadata.get(ADK_TYPE))
        .and_then(|value| match &value.kind {
            Some(adk_grpc_proto::ordered::value::Kind::StringValue(s)) => Some(s == kind),
            _ => None,
        })
        .unwrap_or(false)
}

fn function_response_from_data(field: &str, data: &Value) -> Result<Part> {
    let name = data.get("name").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        return Err(AdkError::invalid_with(
            format!("{field}.data"),
            format!("{field}.data: a function_response needs a \"name\""),
        ));
    }
    let id = data.get("id").and_then(Value::as_str).map(str::to_string);
    let response = data.get("response").cloned().unwrap_or(Value::Null);
    Ok(Part::function_response(
        FunctionResponseData {
            name: name.to_string(),
            response: as_object(response),
        },
        id,
    ))
}

/// A function response must be an object (google.genai's rule): anything else goes under `result`.
fn as_object(value: Value) -> Value {
    match value {
        Value::Object(_) => value,
        other => json!({ "result": other }),
    }
}

/// The answer to pending calls made of a client's reply to an `input-required` task:
/// the function responses it carries, or else one response per pending call whose
/// `response` is the reply's data (an object) or `{"result": <its text>}`.
pub fn answer_pending(reply: Content, pending: &[(String, String)]) -> Content {
    let answers_already = reply.function_responses().next().is_some();
    if answers_already || pending.is_empty() {
        return reply;
    }
    let text = reply.text().unwrap_or_default();
    let response = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => json!({ "result": text }),
    };
    let mut content = Content::new("user");
    for (id, name) in pending {
        content.parts.push(Part::function_response(
            FunctionResponseData {
                name: name.clone(),
                response: response.clone(),
            },
            Some(id.clone()),
        ));
    }
    content
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_round_trip_and_bad_ones_name_the_field() {
        let id = TaskId::new("sess:with:colons", "e-1234");
        assert_eq!(TaskId::parse("id", &id.to_string()).unwrap(), id);
        for bad in ["", "nocolon", ":e-1", "s:"] {
            let err = TaskId::parse("id", bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}");
            assert!(err.to_string().contains("id"), "{err}");
        }
    }

    #[test]
    fn parts_round_trip_through_a2a() {
        let content = Content::new("user")
            .with_text("hi")
            .with_inline_data("image/png", vec![1, 2, 3])
            .with_file_uri("text/plain", "gs://b/f.txt");
        let message = a2a::Message {
            parts: content.parts.iter().filter_map(part_to_a2a).collect(),
            ..Default::default()
        };
        assert_eq!(content_from_a2a(&message).unwrap(), content);

        let response = Part::function_response(
            FunctionResponseData {
                name: "confirm".into(),
                response: json!({"ok": true}),
            },
            Some("call-1".into()),
        );
        let message = a2a::Message {
            parts: vec![part_to_a2a(&response).unwrap()],
            ..Default::default()
        };
        assert_eq!(content_from_a2a(&message).unwrap().parts, vec![response]);
    }

    #[test]
    fn bad_messages_name_their_field() {
        let empty = a2a::Message::default();
        assert!(
            content_from_a2a(&empty)
                .unwrap_err()
                .to_string()
                .contains("message.parts")
        );
        let no_content = a2a::Message {
            parts: vec![a2a::Part::default()],
            ..Default::default()
        };
        let err = content_from_a2a(&no_content).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.to_string().contains("message.parts[0]"), "{err}");
    }

    #[test]
    fn a_plain_reply_answers_every_pending_call() {
        let pending = vec![("call-1".to_string(), "confirm_booking".to_string())];
        let answered = answer_pending(Content::new("user").with_text("yes"), &pending);
        match &answered.parts[0].kind {
            PartKind::FunctionResponse { function_response, id } => {
                assert_eq!(id.as_deref(), Some("call-1"));
                assert_eq!(function_response.name, "confirm_booking");
                assert_eq!(function_response.response, json!({"result": "yes"}));
            }
            other => panic!("{other:?}"),
        }
        let data = answer_pending(Content::new("user").with_text(r#"{"confirmed": true}"#), &pending);
        match &data.parts[0].kind {
            PartKind::FunctionResponse { function_response, .. } => {
                assert_eq!(function_response.response, json!({"confirmed": true}))
            }
            other => panic!("{other:?}"),
        }
    }
}
