//! Input rules shared by every backend, so a bad id can never forge a storage
//! key or a path, whichever store or transport it arrives through.

use crate::content::PartKind;
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::state::Scope;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

pub const MAX_ID_BYTES: usize = 128;
pub const MAX_STATE_KEY_BYTES: usize = 1024;
pub const DEFAULT_PAGE_SIZE: usize = 100;
pub const MAX_PAGE_SIZE: usize = 1000;

/// Largest state value (one JSON value of a create's `state` or an event's
/// `state_delta`), serialized as compact JSON.
pub const MAX_STATE_VALUE_BYTES: usize = 1024 * 1024;
/// Deepest JSON value accepted anywhere in state or an event (`[[1]]` has depth 2).
/// Deeper values could not be read back by every JSON decoder (serde_json stops at 128).
pub const MAX_JSON_DEPTH: usize = 64;
/// Most keys in one create's `state` or one event's `state_delta`.
pub const MAX_STATE_KEYS: usize = 1000;
/// Largest event, as its encoded `adk.v1.Event` protobuf message.
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// Longest session TTL: 100 years. Far beyond any retention a session needs (omit the TTL
/// to keep a session until deleted), and small enough for every store: the expiry
/// instant stays a valid `google.protobuf.Timestamp` (before year 9999), Redis's
/// `PEXPIREAT` milliseconds stay exact in its Lua numbers (below 2^53), and the memory
/// store's `now + ttl` cannot overflow.
pub const MAX_SESSION_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// The range of `google.protobuf.Timestamp`: 0001-01-01T00:00:00Z ..= 9999-12-31T23:59:59.999999999Z,
/// in seconds since the epoch. Anything outside fails in strict clients, so it is never stored.
pub const MIN_TIMESTAMP_SECONDS: i64 = -62_135_596_800;
pub const MAX_TIMESTAMP_SECONDS: i64 = 253_402_300_799;

/// The largest event sequence a page token may name: 2^53 - 1. No log can get there (the
/// Redis store counts events in Lua numbers, exact only below 2^53), so a token naming a
/// larger one was forged.
pub const MAX_SEQUENCE: u64 = (1 << 53) - 1;

/// `app_name`, `user_id`, `session_id` and event ids: 1-[`MAX_ID_BYTES`] bytes of UTF-8
/// without control characters, and not only whitespace. Anything else real deployments
/// use is accepted as is, untrimmed, like ADK does: Auth0 subjects (`auth0|5f7c…`),
/// `group/user123`, `tenant:42`, Vertex resource names. Stores never put an id into a key
/// as it is, only through [`id_key`], so no id can forge or collide with another's keys.
pub fn id(field: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(AdkError::invalid(field, "is required"));
    }
    let why = if value.len() > MAX_ID_BYTES {
        format!("is {} bytes, more than the maximum of {MAX_ID_BYTES}", value.len())
    } else if value.chars().any(char::is_control) {
        "contains a control character".to_string()
    } else if value.trim().is_empty() {
        "is only whitespace".to_string()
    } else {
        return Ok(());
    };
    Err(AdkError::invalid(
        field,
        format!(
            "{} {why}; ids are 1-{MAX_ID_BYTES} bytes of UTF-8 without control characters",
            quoted(value)
        ),
    ))
}

/// The bytes an id keeps as they are in a storage key: the alphabet ids were limited to
/// before any UTF-8 was allowed, so the keys of such ids did not change.
const KEY_SAFE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'_')
    .remove(b'@')
    .remove(b'-');

/// An id as a segment of a storage key (Redis keys and hash tags, index members, page
/// tokens): every byte outside `[A-Za-z0-9._@-]` percent-encoded, so the segment holds no
/// `:`, `{`, `}`, `/`, `~` or space. Two ids give two segments (`%` itself is encoded and
/// was never allowed before), so no id can end another's segment early, forge a hash tag,
/// or reach another user's keys; ids of the old alphabet are their own segment.
pub fn id_key(id: &str) -> std::borrow::Cow<'_, str> {
    percent_encoding::utf8_percent_encode(id, KEY_SAFE).into()
}

/// The id an [`id_key`] segment stands for; None when `segment` is not one.
pub fn id_from_key(segment: &str) -> Option<String> {
    let id = percent_encoding::percent_decode_str(segment).decode_utf8().ok()?;
    (id_key(&id) == segment).then(|| id.into_owned())
}

/// The (app, user, session) triple that names a session.
pub fn session_ids(app_name: &str, user_id: &str, session_id: &str) -> Result<()> {
    id("app_name", app_name)?;
    id("user_id", user_id)?;
    id("session_id", session_id)
}

/// State keys: non-empty, bounded, and a scope prefix must name something.
pub fn state_keys(field: &str, state: &HashMap<String, Value>) -> Result<()> {
    for key in state.keys() {
        if key.is_empty() {
            return Err(AdkError::invalid(field, "has an empty key"));
        }
        if key.len() > MAX_STATE_KEY_BYTES {
            return Err(AdkError::invalid(
                field,
                format!("key {} is longer than {MAX_STATE_KEY_BYTES} bytes", quoted(key)),
            ));
        }
        if Scope::of(key).1.is_empty() {
            return Err(AdkError::invalid(
                field,
                format!("key {} has a scope prefix but no name", quoted(key)),
            ));
        }
    }
    Ok(())
}

/// The limits on a state map (a create's `state`, an event's `state_delta`): at most
/// [`MAX_STATE_KEYS`] keys, each value at most [`MAX_STATE_VALUE_BYTES`] of JSON and
/// [`MAX_JSON_DEPTH`] deep. `RESOURCE_EXHAUSTED` naming the limit otherwise.
pub fn state_limits(field: &str, state: &HashMap<String, Value>) -> Result<()> {
    if state.len() > MAX_STATE_KEYS {
        return Err(AdkError::limit(
            "max_state_keys",
            MAX_STATE_KEYS,
            format!(
                "{field} has {} keys, more than the limit of {MAX_STATE_KEYS} keys per request",
                state.len()
            ),
        ));
    }
    for (key, value) in state {
        json_value(
            &format!("{field} value of key {}", quoted(key)),
            value,
            MAX_STATE_VALUE_BYTES,
        )?;
    }
    Ok(())
}

/// One JSON value: at most [`MAX_JSON_DEPTH`] deep and `max_bytes` of compact JSON.
pub fn json_value(what: &str, value: &Value, max_bytes: usize) -> Result<()> {
    let depth = json_depth(value);
    if depth > MAX_JSON_DEPTH {
        return Err(AdkError::limit(
            "max_json_depth",
            MAX_JSON_DEPTH,
            format!("{what} is nested {depth} levels deep, more than the limit of {MAX_JSON_DEPTH} levels"),
        ));
    }
    let size = json_size(value, max_bytes);
    if size > max_bytes {
        return Err(AdkError::limit(
            "max_json_bytes",
            max_bytes,
            format!("{what} is more than the limit of {max_bytes} bytes of JSON"),
        ));
    }
    Ok(())
}

/// Nesting depth of a JSON value (a scalar is 1), without recursion, so any value
/// can be measured whatever its depth.
pub fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 1usize)];
    while let Some((value, depth)) = pending.pop() {
        deepest = deepest.max(depth);
        match value {
            Value::Array(items) => pending.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => pending.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Size of `value` as compact JSON, counting no further than just past `limit`.
fn json_size(value: &Value, limit: usize) -> usize {
    struct Counter {
        written: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.written += buf.len();
            if self.written > self.limit {
                // Stops the serializer early: the value is too large whatever follows.
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { written: 0, limit };
    let _ = serde_json::to_writer(&mut counter, value);
    counter.written
}

/// The limits on a whole event: every JSON value in its content (function call
/// arguments and responses) at most [`MAX_JSON_DEPTH`] deep, and the encoded event at
/// most [`MAX_EVENT_BYTES`]. `RESOURCE_EXHAUSTED` naming the limit otherwise.
pub fn event_limits(event: &Event) -> Result<()> {
    use prost::Message;
    if let Some(content) = &event.llm_response.content {
        content_limits("event.content", content)?;
    }
    let r = &event.llm_response;
    let a = &event.actions;
    let objects = [
        ("event.grounding_metadata", r.grounding_metadata.as_ref()),
        ("event.citation_metadata", r.citation_metadata.as_ref()),
        ("event.custom_metadata", r.custom_metadata.as_ref()),
        ("event.logprobs_result", r.logprobs_result.as_ref()),
        ("event.extensions", Some(&event.extensions)),
        ("event.actions.requested_auth_configs", Some(&a.requested_auth_configs)),
        ("event.actions.agent_state", a.agent_state.as_ref()),
        ("event.actions.extensions", Some(&a.extensions)),
    ];
    for (field, object) in objects {
        if let Some(object) = object {
            object_depth(field, object)?;
        }
    }
    if let Some(structured) = &a.set_model_response {
        value_depth("event.actions.set_model_response", structured)?;
    }
    for (id, confirmation) in &a.requested_tool_confirmations {
        value_depth(
            &format!("event.actions.requested_tool_confirmations[{}].payload", quoted(id)),
            &confirmation.payload,
        )?;
    }
    if let Some(compaction) = &a.compaction {
        content_limits(
            "event.actions.compaction.compacted_content",
            &compaction.compacted_content,
        )?;
    }
    let size = adk_grpc_proto::v1::Event::from(event).encoded_len();
    if size > MAX_EVENT_BYTES {
        return Err(AdkError::limit(
            "max_event_bytes",
            MAX_EVENT_BYTES,
            format!(
                "event is {size} bytes encoded, more than the limit of {MAX_EVENT_BYTES} bytes per event; \
             store large data as an artifact and reference it"
            ),
        ));
    }
    Ok(())
}

/// `value` (the request's `field`) at most [`MAX_JSON_DEPTH`] deep; `RESOURCE_EXHAUSTED` otherwise.
fn value_depth(field: &str, value: &Value) -> Result<()> {
    let depth = json_depth(value);
    if depth > MAX_JSON_DEPTH {
        return Err(AdkError::limit(
            "max_json_depth",
            MAX_JSON_DEPTH,
            format!("{field} is nested {depth} levels deep, more than the limit of {MAX_JSON_DEPTH} levels"),
        ));
    }
    Ok(())
}

/// A JSON object field: its values count one level below the object.
fn object_depth(field: &str, object: &serde_json::Map<String, Value>) -> Result<()> {
    let depth = 1 + object.values().map(json_depth).max().unwrap_or(0);
    if depth > MAX_JSON_DEPTH {
        return Err(AdkError::limit(
            "max_json_depth",
            MAX_JSON_DEPTH,
            format!("{field} is nested {depth} levels deep, more than the limit of {MAX_JSON_DEPTH} levels"),
        ));
    }
    Ok(())
}

/// The JSON values of a content (the request's `field`: `event.content`, a Run's
/// `new_message`): function call arguments and responses, part metadata and
/// extensions at most [`MAX_JSON_DEPTH`] deep.
pub fn content_limits(field: &str, content: &crate::content::Content) -> Result<()> {
    for (index, part) in content.parts.iter().enumerate() {
        let at = |what: &str| format!("{field}.parts[{index}].{what}");
        match &part.kind {
            PartKind::FunctionCall { args, .. } => value_depth(&at("function_call.args"), args)?,
            PartKind::FunctionResponse { function_response, .. } => {
                value_depth(&at("function_response.response"), &function_response.response)?
            }
            _ => {}
        }
        if let Some(metadata) = &part.part_metadata {
            object_depth(&at("part_metadata"), metadata)?;
        }
        object_depth(&at("extensions"), &part.extensions)?;
    }
    Ok(())
}

/// A session TTL: positive and at most [`MAX_SESSION_TTL`]. `INVALID_ARGUMENT` naming `field` otherwise.
pub fn session_ttl(field: &str, ttl: Duration) -> Result<()> {
    if ttl.is_zero() {
        return Err(AdkError::invalid(field, "must be positive"));
    }
    if ttl > MAX_SESSION_TTL {
        return Err(AdkError::invalid(
            field,
            format!(
                "is {} s, more than the maximum of {} s (100 years); omit the TTL to keep a session until deleted",
                ttl.as_secs(),
                MAX_SESSION_TTL.as_secs()
            ),
        ));
    }
    Ok(())
}

/// A time a client sent: within `google.protobuf.Timestamp`'s range (years 1 to 9999).
pub fn timestamp(field: &str, t: &DateTime<Utc>) -> Result<()> {
    if !(MIN_TIMESTAMP_SECONDS..=MAX_TIMESTAMP_SECONDS).contains(&t.timestamp()) {
        return Err(AdkError::invalid(
            field,
            format!(
                "{} is outside google.protobuf.Timestamp's range \
             (0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z)",
                t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
            ),
        ));
    }
    Ok(())
}

/// Requested page sizes: 0 means the default; above the maximum is capped (as AIP-158 suggests).
pub fn page_size(requested: usize) -> usize {
    match requested {
        0 => DEFAULT_PAGE_SIZE,
        n => n.min(MAX_PAGE_SIZE),
    }
}

/// A value for an error message: quoted, escaped and cut short.
pub fn quoted(value: &str) -> String {
    const SHOWN: usize = 64;
    if value.chars().count() <= SHOWN {
        format!("{value:?}")
    } else {
        let head: String = value.chars().take(SHOWN).collect();
        format!("{head:?}... ({} bytes)", value.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Content;
    use serde_json::json;

    #[test]
    fn ids_accept_any_utf8_without_control_characters() {
        for ok in [
            "a",
            "my_app",
            "user@example.com",
            "auth0|5f7c8ec7c33c6c004bbafe82",
            "group/user123",
            "tenant:42",
            "projects/p/locations/l/reasoningEngines/456",
            "{tag}",
            "a b",
            " padded ",
            "ünï😀",
            ".",
            "..",
            "100%",
            &"x".repeat(MAX_ID_BYTES),
            &"é".repeat(MAX_ID_BYTES / 2),
        ] {
            assert!(id("app_name", ok).is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn ids_reject_empty_overlong_control_and_blank_naming_the_field() {
        for bad in [
            "",
            "a\0b",
            "line\nbreak",
            "tab\t",
            "del\u{7f}",
            "c1\u{85}",
            "   ",
            &"x".repeat(MAX_ID_BYTES + 1),
            &"é".repeat(MAX_ID_BYTES / 2 + 1),
        ] {
            let err = id("user_id", bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument);
            assert!(err.to_string().starts_with("user_id "), "{err}");
        }
    }

    #[test]
    fn id_keys_keep_old_ids_and_encode_everything_else() {
        for old in ["a", "my_app", "user@example.com", "A-Z.0_9"] {
            assert_eq!(id_key(old), old);
        }
        assert_eq!(id_key("a:b"), "a%3Ab");
        assert_eq!(id_key("{t}/x y%~*"), "%7Bt%7D%2Fx%20y%25%7E%2A");
        assert_eq!(id_key("é"), "%C3%A9");
        for id in ["a:b", "{t}", "100%", "😀 x", "a"] {
            assert_eq!(id_from_key(&id_key(id)).as_deref(), Some(id));
        }
        // Only the one encoding of an id decodes: no second spelling of the same id.
        for not_a_key in ["a:b", "%3a", "%41", "%", "%ff", "a%2"] {
            assert_eq!(id_from_key(not_a_key), None, "{not_a_key}");
        }
        // Segments never hold a separator, so pairs that joined raw would collide stay apart.
        assert_ne!(
            format!("{}:{}", id_key("a:b"), id_key("c")),
            format!("{}:{}", id_key("a"), id_key("b:c"))
        );
    }

    #[test]
    fn state_key_rules() {
        let ok = HashMap::from([("app:x".to_string(), json!(1)), ("y".to_string(), json!(null))]);
        assert!(state_keys("state", &ok).is_ok());
        for bad in ["", "app:", "user:", "temp:", &"k".repeat(1025)] {
            let map = HashMap::from([(bad.to_string(), json!(1))]);
            assert!(state_keys("state", &map).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn state_limits_name_the_limit() {
        let ok = HashMap::from([("k".to_string(), json!({"a": [1, 2, {"b": "c"}]}))]);
        assert!(state_limits("state", &ok).is_ok());

        let big = HashMap::from([("k".to_string(), json!("x".repeat(MAX_STATE_VALUE_BYTES)))]);
        let err = state_limits("state", &big).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(err.to_string().contains("1048576 bytes"), "{err}");

        let mut deep = json!(1);
        for _ in 0..MAX_JSON_DEPTH {
            deep = json!([deep]);
        }
        let err = state_limits("state", &HashMap::from([("k".to_string(), deep)])).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(err.to_string().contains("64 levels"), "{err}");

        let many: HashMap<_, _> = (0..=MAX_STATE_KEYS).map(|i| (format!("k{i}"), json!(i))).collect();
        let err = state_limits("state", &many).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(err.to_string().contains("1000 keys"), "{err}");
    }

    #[test]
    fn event_limits_bound_size_and_depth() {
        use crate::content::Content;
        let small = Event::new("i").with_content(Content::new("user").with_text("hi"));
        assert!(event_limits(&small).is_ok());
        let big = Event::new("i").with_content(Content::new("user").with_text("x".repeat(MAX_EVENT_BYTES)));
        let err = event_limits(&big).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(err.to_string().contains("1048576 bytes per event"), "{err}");
        let mut deep = json!(1);
        for _ in 0..MAX_JSON_DEPTH {
            deep = json!({ "k": deep });
        }
        let call = crate::Part::function_call("f", deep, None);
        let err = event_limits(&Event::new("i").with_content(Content::new("model").with_part(call))).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(err.to_string().contains("function_call.args"), "{err}");
    }

    #[test]
    fn values_nested_past_protobufs_limit_fail_to_decode_without_panicking() {
        use adk_grpc_proto::ordered::value::Kind;
        use adk_grpc_proto::v1 as pb;
        use prost::Message;
        let mut value = adk_grpc_proto::ordered::Value {
            kind: Some(Kind::NumberValue(1.0)),
        };
        for _ in 0..200 {
            value = adk_grpc_proto::ordered::Value {
                kind: Some(Kind::ListValue(adk_grpc_proto::ordered::ListValue {
                    values: vec![value],
                })),
            };
        }
        let request = pb::CreateSessionRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            state: Some(adk_grpc_proto::ordered::Struct::from([("deep".to_string(), value)])),
            ..Default::default()
        };
        let bytes = request.encode_to_vec();
        assert!(pb::CreateSessionRequest::decode(bytes.as_slice()).is_err());
    }

    #[test]
    fn event_json_objects_obey_the_nesting_limit() {
        let mut deep = json!(1);
        for _ in 0..MAX_JSON_DEPTH {
            deep = json!({ "k": deep });
        }
        let object = |value: &Value| value.as_object().unwrap().clone();
        let mut extended = Event::new("i");
        extended.extensions = object(&deep);
        let err = event_limits(&extended).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(err.to_string().contains("event.extensions"), "{err}");

        let mut state = Event::new("i");
        state.actions.agent_state = Some(object(&deep));
        let err = event_limits(&state).unwrap_err();
        assert!(err.to_string().contains("event.actions.agent_state"), "{err}");

        let mut structured = Event::new("i");
        structured.actions.set_model_response = Some(deep.clone());
        let err = event_limits(&structured).unwrap_err();
        assert!(err.to_string().contains("event.actions.set_model_response"), "{err}");

        let mut part = crate::Part::text_part("x");
        part.part_metadata = Some(object(&deep));
        let err = event_limits(&Event::new("i").with_content(Content::new("model").with_part(part))).unwrap_err();
        assert!(
            err.to_string().contains("event.content.parts[0].part_metadata"),
            "{err}"
        );

        let mut shallow = Event::new("i");
        shallow.extensions = object(&json!({"a": {"b": [1, 2]}}));
        assert!(event_limits(&shallow).is_ok());
    }

    #[test]
    fn json_depth_counts_levels() {
        assert_eq!(json_depth(&json!(1)), 1);
        assert_eq!(json_depth(&json!([])), 1);
        assert_eq!(json_depth(&json!({"a": [1]})), 3);
        let mut deep = json!(null);
        for _ in 0..(MAX_JSON_DEPTH - 1) {
            deep = json!({ "k": deep });
        }
        assert_eq!(json_depth(&deep), MAX_JSON_DEPTH);
        assert!(json_value("v", &deep, MAX_STATE_VALUE_BYTES).is_ok());
    }

    #[test]
    fn ttls_are_positive_and_bounded() {
        assert!(session_ttl("ttl", Duration::from_millis(1)).is_ok());
        assert!(session_ttl("ttl", MAX_SESSION_TTL).is_ok());
        for bad in [
            Duration::ZERO,
            MAX_SESSION_TTL + Duration::from_nanos(1),
            Duration::from_secs(i64::MAX as u64),
        ] {
            let err = session_ttl("ttl", bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument);
            assert!(err.to_string().starts_with("ttl "), "{err}");
        }
        // The longest TTL from the latest instant a Timestamp holds minus 100 years still fits.
        let expiry = Utc::now() + MAX_SESSION_TTL;
        assert!(timestamp("expire_time", &expiry).is_ok());
    }

    #[test]
    fn timestamps_must_fit_protobufs_range() {
        use chrono::TimeZone;
        let first = Utc.timestamp_opt(MIN_TIMESTAMP_SECONDS, 0).unwrap();
        let last = Utc.timestamp_opt(MAX_TIMESTAMP_SECONDS, 999_999_999).unwrap();
        assert_eq!(first.to_rfc3339(), "0001-01-01T00:00:00+00:00");
        assert!(timestamp("event.timestamp", &first).is_ok());
        assert!(timestamp("event.timestamp", &last).is_ok());
        for bad in [MIN_TIMESTAMP_SECONDS - 1, MAX_TIMESTAMP_SECONDS + 1] {
            let t = Utc.timestamp_opt(bad, 0).unwrap();
            let err = timestamp("event.timestamp", &t).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument);
            assert!(err.to_string().contains("event.timestamp"), "{err}");
        }
    }

    #[test]
    fn page_sizes() {
        assert_eq!(page_size(0), DEFAULT_PAGE_SIZE);
        assert_eq!(page_size(7), 7);
        assert_eq!(page_size(1_000_000), MAX_PAGE_SIZE);
    }
}
