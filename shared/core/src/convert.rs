//! Conversions between the core types and the `adk.v1` protobuf messages.
//!
//! Core -> proto never fails. Proto -> core fails with `InvalidArgument` naming
//! the field when the message cannot mean anything valid (a part with no kind,
//! an out-of-range timestamp, a negative count).
//!
//! Field paths (`event.content.parts[0].part_metadata`) are taken as `impl Display`
//! and built with `format_args!`, so a path is only written out when it names an
//! error: every event a GetSession returns passes through here, and formatting the
//! paths of its parts and maps up front cost an allocation each, for nothing.

use crate::error::{AdkError, Result};
use crate::validate::{self, quoted};
use adk_grpc_proto::ordered::{self, value::Kind};
use chrono::{DateTime, Utc};
use serde_json::{Number, Value};
use std::collections::HashMap;
use std::fmt::Display;

/// `adk.v1.ArtifactService` messages.
mod artifact;
mod event;
/// `adk.v1.MemoryService` messages.
pub mod memory;
mod runner;
mod session;

// ---------- JSON values ----------

/// Numbers beyond this lose integer precision in a protobuf double anyway.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

pub fn json_to_proto(value: &Value) -> ordered::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(prost_types::NullValue::NullValue as i32),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(ordered::ListValue {
            values: items.iter().map(json_to_proto).collect(),
        }),
        Value::Object(map) => Kind::StructValue(map_to_struct(map.iter())),
    };
    ordered::Value { kind: Some(kind) }
}

/// A `google.protobuf.Value` as JSON. Whole numbers come back as JSON integers (`42`, not
/// `42.0`), as clients wrote them. A value with no kind set, anywhere inside, is
/// `INVALID_ARGUMENT` naming where (`path` and the keys and indexes below it): it is what
/// a misspelled field produces in common client libraries, and storing it as `null`
/// would lose the client's data silently. An explicit `null_value` is `null`.
pub fn json_from_proto(path: impl Display, value: &ordered::Value) -> Result<Value> {
    json_at(value).map_err(|below| no_kind(format_args!("{path}{below}")))
}

/// INVALID_ARGUMENT for the `google.protobuf.Value` at `path` that has no kind set.
fn no_kind(path: impl Display) -> AdkError {
    AdkError::invalid(
        path.to_string(),
        "is a google.protobuf.Value with no kind set \
         (null_value, number_value, string_value, bool_value, struct_value or list_value); \
         send null_value for null",
    )
}

/// The JSON of `value`, or the place below it (`["key"][2]`…) of a value with no kind.
fn json_at(value: &ordered::Value) -> std::result::Result<Value, String> {
    Ok(match &value.kind {
        None => return Err(String::new()),
        Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => {
            if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER {
                Value::Number(Number::from(*n as i64))
            } else {
                Number::from_f64(*n).map_or(Value::Null, Value::Number)
            }
        }
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(list)) => Value::Array(
            list.values
                .iter()
                .enumerate()
                .map(|(i, v)| json_at(v).map_err(|below| format!("[{i}]{below}")))
                .collect::<std::result::Result<_, _>>()?,
        ),
        Some(Kind::StructValue(s)) => Value::Object(
            s.iter()
                .map(|(k, v)| {
                    Ok((
                        k.to_string(),
                        json_at(v).map_err(|below| format!("[{}]{below}", quoted(k)))?,
                    ))
                })
                .collect::<std::result::Result<_, String>>()?,
        ),
    })
}

pub fn map_to_struct<'a>(map: impl Iterator<Item = (&'a String, &'a Value)>) -> ordered::Struct {
    map.map(|(k, v)| (k.clone(), json_to_proto(v))).collect()
}

/// A `Struct` field (`state`, `custom_metadata`) as a JSON map; see [`json_from_proto`].
pub fn map_from_struct(field: impl Display, s: Option<&ordered::Struct>) -> Result<HashMap<String, Value>> {
    s.map_or_else(|| Ok(HashMap::new()), |s| values_from_proto(field, s.iter()))
}

fn value_map_to_proto(map: &HashMap<String, Value>) -> HashMap<String, ordered::Value> {
    map.iter().map(|(k, v)| (k.clone(), json_to_proto(v))).collect()
}

/// A map of `Value`s (`state_delta`) as a JSON map; see [`json_from_proto`].
pub fn value_map_from_proto(
    field: impl Display,
    map: &HashMap<String, ordered::Value>,
) -> Result<HashMap<String, Value>> {
    values_from_proto(field, map.iter().map(|(k, v)| (k.as_str(), v)))
}

/// `(key, Value)` pairs as a JSON map (a `HashMap` or, keeping their order, an object),
/// naming `field[key]` for a value with no kind. A key that comes twice keeps its last value.
fn values_from_proto<'a, M: FromIterator<(String, Value)>>(
    field: impl Display,
    pairs: impl IntoIterator<Item = (&'a str, &'a ordered::Value)>,
) -> Result<M> {
    pairs
        .into_iter()
        .map(|(k, v)| {
            let value = json_at(v).map_err(|below| no_kind(format_args!("{field}[{}]{below}", quoted(k))))?;
            Ok((k.to_string(), value))
        })
        .collect()
}

/// A JSON object as a `Struct`.
fn object_to_struct(object: &serde_json::Map<String, Value>) -> ordered::Struct {
    map_to_struct(object.iter())
}

/// A `Struct` as a JSON object, its keys in their order, naming `path[key]` for a value
/// with no kind.
fn object_from_struct(path: impl Display, s: &ordered::Struct) -> Result<serde_json::Map<String, Value>> {
    values_from_proto(path, s.iter())
}

/// An optional `Value` field: absent is `null`.
fn opt_json_from_proto(path: impl Display, value: Option<&ordered::Value>) -> Result<Value> {
    value.map_or(Ok(Value::Null), |v| json_from_proto(path, v))
}

// ---------- times ----------

pub fn timestamp_to_proto(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: t.timestamp_subsec_nanos() as i32,
    }
}

/// A valid `google.protobuf.Timestamp`: nanos in 0..1e9 and seconds within years 1 to 9999.
pub fn timestamp_from_proto(field: impl Display, t: &prost_types::Timestamp) -> Result<DateTime<Utc>> {
    let time = u32::try_from(t.nanos)
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .and_then(|nanos| DateTime::from_timestamp(t.seconds, nanos))
        // Only whether it is in range counts here: the error below names the field.
        .filter(|time| validate::timestamp("", time).is_ok());
    time.ok_or_else(|| {
        AdkError::invalid(
            field.to_string(),
            format!(
                "is not a valid timestamp ({}s {}ns): seconds must be within \
             0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, nanos within 0 to 999999999",
                t.seconds, t.nanos
            ),
        )
    })
}

pub fn duration_from_proto(field: &str, d: &prost_types::Duration) -> Result<std::time::Duration> {
    if d.seconds < 0 || d.nanos < 0 || d.nanos >= 1_000_000_000 || (d.seconds == 0 && d.nanos == 0) {
        return Err(AdkError::invalid(field, "must be a positive duration"));
    }
    Ok(std::time::Duration::new(d.seconds as u64, d.nanos as u32))
}

pub fn duration_to_proto(d: std::time::Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

fn non_negative(field: &str, n: i32) -> Result<usize> {
    usize::try_from(n).map_err(|_| AdkError::invalid(field, format!("must not be negative, got {n}")))
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::Event;
    use crate::session::CreateRequest;
    use crate::{Content, FunctionResponseData, Part};
    use adk_grpc_proto::v1 as pb;
    use serde_json::json;

    fn object(value: serde_json::Value) -> crate::JsonObject {
        match value {
            Value::Object(o) => o,
            other => panic!("not an object: {other}"),
        }
    }

    /// An event with every field set, optional flags set to false (not unset).
    pub(crate) fn rich_event() -> Event {
        use crate::{
            EventCompaction, FinishReason, ModalityTokenCount, PartKind, ToolConfirmation, Transcription,
            UsageMetadata, VideoMetadata,
        };
        let mut thought = Part::text_part("thinking");
        thought.thought = Some(true);
        thought.thought_signature = Some(vec![9, 8, 7]);
        thought.part_metadata = Some(object(json!({"source": "m"})));
        thought.extensions = object(json!({"media_resolution": {"level": "MEDIA_RESOLUTION_LOW"}}));
        let mut image = Part::inline_data("image/png", vec![0, 1, 2]);
        image.display_name = Some("chart.png".into());
        image.video_metadata = Some(VideoMetadata {
            start_offset: Some("1s".into()),
            end_offset: Some("2.5s".into()),
            fps: Some(0.5),
        });
        let mut call = Part::function_call("f", json!({"a": [1, 2.5, null, "x"]}), Some("c1".into()));
        call.will_continue = Some(false);
        let mut not_thought = Part::file_data("application/pdf", "gs://b/f.pdf");
        not_thought.thought = Some(false);
        let mut e = Event::new("e-1")
            .with_author("assistant")
            .with_content(
                Content::new("model")
                    .with_text("hi")
                    .with_part(thought)
                    .with_part(image)
                    .with_part(not_thought)
                    .with_part(call)
                    .with_part(Part::function_response(
                        FunctionResponseData {
                            name: "f".into(),
                            response: json!({"ok": true}),
                        },
                        None,
                    ))
                    .with_part(
                        PartKind::ExecutableCode {
                            code: Some("print(1)".into()),
                            language: Some("PYTHON".into()),
                            id: Some("x1".into()),
                        }
                        .into(),
                    )
                    .with_part(
                        PartKind::CodeExecutionResult {
                            outcome: Some("OUTCOME_OK".into()),
                            output: Some("1\n".into()),
                            id: Some("x1".into()),
                        }
                        .into(),
                    ),
            )
            .with_state_delta("app:n", json!(42))
            .with_state_delta("k", json!({"nested": {"deep": [true]}}));
        e.branch = "root.child".into();
        e.sequence = 7;
        e.actions.artifact_delta.insert("report.pdf".into(), 2);
        e.actions.transfer_to_agent = Some("helper".into());
        e.actions.transfer_reason = Some("it knows".into());
        e.actions.escalate = Some(false);
        e.actions.skip_summarization = Some(false);
        e.actions.end_of_agent = Some(true);
        e.actions.agent_state = Some(object(json!({"step": 2})));
        e.actions.rewind_before_invocation_id = Some("e-0".into());
        e.actions.set_model_response = Some(json!({"city": "Oslo", "temp": 3.5}));
        e.actions.requested_auth_configs = object(json!({"c1": {"auth_scheme": {"type": "oauth2"}}}));
        e.actions.requested_tool_confirmations.insert(
            "c1".into(),
            ToolConfirmation {
                hint: "sure?".into(),
                confirmed: false,
                payload: json!({"amount": 3}),
            },
        );
        e.actions.compaction = Some(EventCompaction {
            start_timestamp: e.timestamp - chrono::Duration::seconds(60),
            end_timestamp: e.timestamp,
            compacted_content: Content::new("model").with_text("summary"),
        });
        e.actions.extensions = object(json!({"route": ["a", 1, true]}));
        e.long_running_tool_ids = vec!["c1".into()];
        e.llm_response.usage_metadata = Some(UsageMetadata {
            prompt_token_count: Some(1),
            candidates_token_count: Some(0),
            total_token_count: Some(3),
            thoughts_token_count: Some(2),
            prompt_tokens_details: vec![ModalityTokenCount {
                modality: Some("TEXT".into()),
                token_count: Some(1),
            }],
            traffic_type: Some("ON_DEMAND".into()),
            ..Default::default()
        });
        e.llm_response.finish_reason = Some(FinishReason::MalformedFunctionCall);
        e.llm_response.partial = Some(false);
        e.llm_response.turn_complete = Some(true);
        e.llm_response.interrupted = Some(false);
        e.llm_response.error_code = Some("".into());
        e.llm_response.error_message = Some("oops".into());
        e.llm_response.model_version = Some("gemini-2.5-flash-001".into());
        e.llm_response.grounding_metadata = Some(object(json!({"web_search_queries": ["tokyo"]})));
        e.llm_response.citation_metadata = Some(object(json!({"citations": [{"uri": "https://x"}]})));
        e.llm_response.custom_metadata = Some(object(json!({"trace": "abc"})));
        e.llm_response.input_transcription = Some(Transcription {
            text: Some("hello".into()),
            finished: Some(false),
            extensions: object(json!({"language_code": "en"})),
        });
        e.llm_response.output_transcription = Some(Transcription::default());
        e.llm_response.avg_logprobs = Some(-0.25);
        e.llm_response.logprobs_result = Some(object(json!({"top_candidates": []})));
        e.llm_response.turn_complete_reason = Some("NEED_MORE_INPUT".into());
        e.isolation_scope = "c1".into();
        e.output = Some(json!({"name": "Ada", "guests": 4}));
        e.extensions = object(json!({"interaction_id": "i-1", "node_info": {"path": "root"}}));
        e
    }

    /// The owned conversions (a reply built from a value the server is done with, a
    /// stored event decoded) move strings instead of copying them, and must give exactly
    /// what the borrowed ones give, for every field and part kind.
    #[test]
    fn owned_conversions_match_the_borrowed_ones() {
        let event = rich_event();
        let proto = pb::Event::from(&event);
        assert_eq!(pb::Event::from(event.clone()), proto);
        assert_eq!(
            Event::try_from(proto.clone()).unwrap(),
            Event::try_from(&proto).unwrap()
        );
        assert_eq!(Event::try_from(proto).unwrap(), event);

        let session = crate::Session {
            id: "s".into(),
            app_name: "a".into(),
            user_id: "u".into(),
            state: crate::StateMap::new([("k".to_string(), json!([1, "x"]))].into()),
            events: crate::Events::new(vec![rich_event(), Event::new("i")]),
            create_time: Utc::now(),
            last_update_time: Utc::now(),
            event_count: 2,
            expire_time: Some(Utc::now()),
        };
        let proto = pb::Session::from(&session);
        assert_eq!(pb::Session::from(session.clone()), proto);
        assert_eq!(crate::Session::try_from(proto).unwrap(), session);
    }

    #[test]
    fn unset_and_false_flags_stay_apart() {
        let mut e = Event::new("i");
        let back = Event::try_from(&pb::Event::from(&e)).unwrap();
        assert_eq!(back.llm_response.partial, None);
        assert_eq!(back.actions.escalate, None);
        e.llm_response.partial = Some(false);
        e.actions.escalate = Some(false);
        let back = Event::try_from(&pb::Event::from(&e)).unwrap();
        assert_eq!(back.llm_response.partial, Some(false));
        assert_eq!(back.actions.escalate, Some(false));
    }

    #[test]
    fn the_encoding_of_an_event_decodes_to_the_same_event() {
        use prost::Message;
        let e = rich_event();
        let bytes = pb::Event::from(&e).encode_to_vec();
        let back = Event::try_from(&pb::Event::decode(bytes.as_slice()).unwrap()).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn events_round_trip_losslessly() {
        let e = rich_event();
        let back = Event::try_from(&pb::Event::from(&e)).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn json_numbers_keep_their_integer_form() {
        for v in [
            json!(42),
            json!(-7),
            json!(2.5),
            json!(null),
            json!([1, {"a": "b"}]),
            json!(9_007_199_254_740_991i64),
        ] {
            assert_eq!(json_from_proto("v", &json_to_proto(&v)).unwrap(), v);
        }
    }

    #[test]
    fn invalid_proto_input_names_the_field() {
        let bad_part = pb::Content {
            role: "user".into(),
            parts: vec![pb::Part {
                kind: None,
                ..Default::default()
            }],
        };
        assert!(
            Content::try_from(&bad_part)
                .unwrap_err()
                .to_string()
                .contains("content.parts[0] has no kind")
        );

        let bad_time = pb::Event {
            timestamp: Some(prost_types::Timestamp { seconds: 0, nanos: -1 }),
            ..Default::default()
        };
        assert!(
            Event::try_from(&bad_time)
                .unwrap_err()
                .to_string()
                .contains("event.timestamp")
        );

        let bad_reason = pb::Event {
            finish_reason: 99,
            ..Default::default()
        };
        assert!(
            Event::try_from(&bad_reason)
                .unwrap_err()
                .to_string()
                .contains("finish_reason")
        );
    }

    #[test]
    fn values_with_no_kind_are_refused_naming_where() {
        let none = ordered::Value { kind: None };
        let null = json_to_proto(&json!(null));
        let list = |values| ordered::Value {
            kind: Some(Kind::ListValue(ordered::ListValue { values })),
        };
        let object = |key: &str, value| ordered::Value {
            kind: Some(Kind::StructValue(ordered::Struct::from([(key.to_string(), value)]))),
        };
        let message = |result: Result<Value>| {
            let err = result.unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument);
            err.to_string()
        };
        assert_eq!(
            json_from_proto("v", &null).unwrap(),
            json!(null),
            "an explicit null stays valid"
        );
        assert!(message(json_from_proto("v", &none)).starts_with("v is a google.protobuf.Value with no kind"));
        let nested = object("a", list(vec![null.clone(), object("b", none.clone())]));
        assert!(message(json_from_proto("state[\"k\"]", &nested)).starts_with(r#"state["k"]["a"][1]["b"] is"#));

        let create = pb::CreateSessionRequest {
            state: Some(ordered::Struct::from([("color".to_string(), none.clone())])),
            ..Default::default()
        };
        assert!(message(CreateRequest::try_from(create).map(|_| json!(null))).starts_with(r#"state["color"]"#));

        let mut event = pb::Event::from(&rich_event());
        event
            .actions
            .as_mut()
            .unwrap()
            .state_delta
            .insert("k".into(), list(vec![none.clone()]));
        let err = Event::try_from(&event).unwrap_err().to_string();
        assert!(err.starts_with(r#"event.actions.state_delta["k"][0]"#), "{err}");

        for (index, kind) in [
            pb::part::Kind::FunctionCall(pb::FunctionCall {
                name: "f".into(),
                args: Some(object("x", none.clone())),
                id: None,
                ..Default::default()
            }),
            pb::part::Kind::FunctionResponse(pb::FunctionResponse {
                name: "f".into(),
                response: Some(none.clone()),
                id: None,
                ..Default::default()
            }),
        ]
        .into_iter()
        .enumerate()
        {
            let mut event = pb::Event::from(&Event::new("i"));
            event.content = Some(pb::Content {
                role: "model".into(),
                parts: vec![
                    pb::Part {
                        kind: Some(pb::part::Kind::Text("t".into())),
                        ..Default::default()
                    },
                    pb::Part {
                        kind: Some(kind),
                        ..Default::default()
                    },
                ],
            });
            let err = Event::try_from(&event).unwrap_err().to_string();
            let want = [
                r#"event.content.parts[1].function_call.args["x"] is"#,
                "event.content.parts[1].function_response.response is",
            ][index];
            assert!(err.starts_with(want), "{err}");
        }
    }

    #[test]
    fn timestamps_outside_protobufs_range_are_refused() {
        for seconds in [-62_135_596_801, 253_402_300_800] {
            let event = pb::Event {
                timestamp: Some(prost_types::Timestamp { seconds, nanos: 0 }),
                ..Default::default()
            };
            let err = Event::try_from(&event).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument);
            assert!(err.to_string().contains("event.timestamp"), "{err}");
        }
        for (seconds, nanos) in [(-62_135_596_800, 0), (253_402_300_799, 999_999_999)] {
            let t = prost_types::Timestamp { seconds, nanos };
            assert_eq!(timestamp_to_proto(timestamp_from_proto("t", &t).unwrap()), t);
        }
    }
}
