//! The conformance suite recorded from ADK Python (`tests/conformance/`, described in
//! docs/adk-conformance.md): each case is an ADK agent-config directory, a script of the
//! conversation and ADK's `recording.json` (the model requests ADK sent, the replies it got,
//! the session it stored). Each test serves the directory with `adk-server --agents <case>`,
//! its Gemini model pointed at a fake endpoint answering ADK's recorded replies, sends the
//! same user turns over gRPC, and compares every model request, then the stored session
//! (GetSession), field by field with ADK's. Only the normalisations named below are applied.

use adk_grpc_core::Content;
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_e2e::venv_python;
use adk_grpc_models::testing::FakeServer;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::ServiceProcess;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Differences of the stored session that are still open, each a field of the stored
/// events (a path below an event, as `compare` names it) and why. Every other difference
/// fails the test. The same table is in docs/adk-conformance.md.
const KNOWN_SESSION_DIFFERENCES: &[(&str, &str)] = &[(
    "actions.artifactDelta",
    "artifact versions count from 1 in the suite, from 0 in ADK Python (docs/behaviour.md, by design)",
)];

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance").join(case)
}

/// Replays `case` on `adk-server` and compares its requests and session with ADK's.
async fn replay(case: &str) {
    let dir = case_dir(case);
    let recording: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("recording.json")).expect("read"))
        .expect("recording.json is JSON");
    let provider = FakeServer::start().await;
    let env = [
        ("GOOGLE_GEMINI_BASE_URL".to_string(), provider.url().to_string()),
        ("GOOGLE_API_KEY".to_string(), "conformance-key".to_string()),
        // The Python worker serving the cases' Python tools and callbacks runs in the test venv.
        ("ADK_PYTHON".to_string(), venv_python().display().to_string()),
    ];
    let args = ["--agents".to_string(), dir.display().to_string()];
    let server = ServiceProcess::spawn("adk-server", &args, &env).await;
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let (app, user, session) = (
        recording["app_name"].as_str().expect("app_name"),
        recording["user_id"].as_str().expect("user_id"),
        recording["session_id"].as_str().expect("session_id"),
    );

    let mut problems = Vec::new();
    let mut adk_requests = Vec::new();
    for (t, turn) in recording["turns"].as_array().expect("turns").iter().enumerate() {
        let exchanges = turn["exchanges"].as_array().expect("exchanges");
        for exchange in exchanges {
            provider.push(exchange["reply"].clone());
        }
        let asked_before = provider.requests().len();
        let message = user_text(turn["user"].as_str().expect("user"));
        let (_, status) = runs::run_to_end(&mut client, runs::run_request(app, user, session, message)).await;
        assert!(status.is_none(), "turn {t}: {status:?}\n{}", server.tail_log(30));
        let asked = provider.requests().len() - asked_before;
        if asked != exchanges.len() {
            problems.push(format!(
                "turn {t}: {asked} model requests, ADK made {}",
                exchanges.len()
            ));
        }
        adk_requests.extend(exchanges.iter().map(|e| (t, e["path"].clone(), e["request"].clone())));
    }
    for (i, (got, (turn, path, expected))) in provider.requests().iter().zip(&adk_requests).enumerate() {
        if got.path != path.as_str().unwrap_or_default() {
            problems.push(format!("request {i} (turn {turn}): path {} (ADK: {path})", got.path));
        }
        let place = format!("request {i} (turn {turn})");
        compare(
            &place,
            &normalise_request(expected.clone()),
            &normalise_request(got.json()),
            &mut problems,
        );
    }

    let stored = runs::get_session(server.endpoint(), app, user, session).await;
    let known = compare_session(&recording["session"], &stored, &mut problems);
    for (field, reason) in KNOWN_SESSION_DIFFERENCES.iter().filter(|(f, _)| known.contains(f)) {
        eprintln!("{case}: known difference at {field}: {reason}");
    }
    assert!(
        problems.is_empty(),
        "{case}: {} differences from ADK Python's recording:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A model request with the normalisations the comparison allows:
/// - the ids the runner gave the model's function calls (`adk-…`: Gemini gives none) are
///   left out of the contents, as ADK leaves its own out before it sends a request;
/// - an empty `generationConfig` is left out (ADK's client sends `{}`, which asks for the
///   same defaults as none);
/// - a declaration's `parameters_json_schema` (the name google-genai gives a JSON Schema
///   made from a Python signature) and `parameters` are the same field: the schema is
///   compared, under `parameters`.
fn normalise_request(mut request: Value) -> Value {
    if let Some(body) = request.as_object_mut()
        && body.get("generationConfig").is_some_and(|c| c == &json!({}))
    {
        body.remove("generationConfig");
    }
    for part in request["contents"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .flat_map(|content| content["parts"].as_array_mut().into_iter().flatten())
    {
        for kind in ["functionCall", "functionResponse"] {
            let made_here = part
                .pointer(&format!("/{kind}/id"))
                .and_then(Value::as_str)
                .is_some_and(|id| id.starts_with("adk-"));
            if made_here {
                part[kind].as_object_mut().expect("an object").remove("id");
            }
        }
    }
    for tool in request["tools"].as_array_mut().into_iter().flatten() {
        for declaration in tool["functionDeclarations"].as_array_mut().into_iter().flatten() {
            let declaration = declaration.as_object_mut().expect("a declaration is an object");
            if let Some(schema) = declaration.remove("parameters_json_schema") {
                declaration.insert("parameters".into(), schema);
            }
        }
    }
    request
}

/// The differences between `expected` and `got`, each named by its path under `place`.
fn compare(place: &str, expected: &Value, got: &Value, problems: &mut Vec<String>) {
    let mut found = Vec::new();
    diff("", expected, got, &mut found);
    problems.extend(found.into_iter().map(|(path, what)| format!("{place}: {path}: {what}")));
}

/// Each path where `got` differs from `expected`, with both values.
fn diff(path: &str, expected: &Value, got: &Value, found: &mut Vec<(String, String)>) {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            let mut keys: Vec<&String> = e.keys().chain(g.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                diff(
                    &at,
                    e.get(key).unwrap_or(&Value::Null),
                    g.get(key).unwrap_or(&Value::Null),
                    found,
                );
            }
        }
        (Value::Array(e), Value::Array(g)) if e.len() == g.len() => {
            for (i, (e, g)) in e.iter().zip(g).enumerate() {
                diff(&format!("{path}[{i}]"), e, g, found);
            }
        }
        _ if expected == got => {}
        _ => found.push((path.to_string(), format!("ADK {expected}, runner {got}"))),
    }
}

/// Compares the stored events with ADK's; differences in [`KNOWN_SESSION_DIFFERENCES`]
/// are returned (their fields), every other one is a problem.
fn compare_session(adk: &Value, stored: &pb::Session, problems: &mut Vec<String>) -> Vec<&'static str> {
    let mut ids = Ids::default();
    let expected: Vec<Value> = adk["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| normalise_adk_event(e.clone(), &mut ids))
        .collect();
    let mut ids = Ids::default();
    let mut known = Vec::new();
    let mut got = Vec::new();
    for event in &stored.events {
        let event = normalise_adk_event(adk_json(event), &mut ids);
        // Whole events ADK does not store, named by the action that marks them.
        match ["actions.endOfAgent", "actions.agentState"]
            .into_iter()
            .find(|field| pointer(&event, field).is_some())
        {
            Some(field) => known.push(known_field(field)),
            None => got.push(event),
        }
    }
    if expected.len() != got.len() {
        let authors = |events: &[Value]| {
            events
                .iter()
                .map(|e| e["author"].to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        problems.push(format!(
            "session: {} events (authors {}), ADK stored {} (authors {})",
            got.len(),
            authors(&got),
            expected.len(),
            authors(&expected)
        ));
    }
    for (i, (expected, got)) in expected.iter().zip(&got).enumerate() {
        let mut found = Vec::new();
        diff("", expected, got, &mut found);
        for (path, what) in found {
            match KNOWN_SESSION_DIFFERENCES
                .iter()
                .find(|(field, _)| path.starts_with(field))
            {
                Some((field, _)) => known.push(*field),
                None => problems.push(format!("session event {i} ({}): {path}: {what}", expected["author"])),
            }
        }
    }
    known.sort();
    known.dedup();
    known
}

fn known_field(field: &str) -> &'static str {
    KNOWN_SESSION_DIFFERENCES
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(f, _)| *f)
        .expect("a known difference")
}

fn pointer<'a>(value: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted
        .split('.')
        .try_fold(value, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

/// Ids and timestamps numbered in order of appearance, so a comparison still sees which
/// events share an invocation and which response answers which call.
#[derive(Default)]
struct Ids(HashMap<String, String>);

impl Ids {
    fn number(&mut self, kind: &str, id: &str) -> String {
        let next = self.0.len() + 1;
        self.0
            .entry(id.to_string())
            .or_insert_with(|| format!("{kind}-{next}"))
            .clone()
    }
}

/// An event in ADK's JSON (by alias, without None) with the normalisations the comparison
/// allows:
/// - `id` and `timestamp` are left out; `invocationId` and function call ids (in the
///   parts and in `longRunningToolIds`) are numbered in order of appearance ([`Ids`]);
/// - `nodeInfo` (ADK 2's workflow node path) is left out: the suite's Event has no such
///   field, so the wire cannot carry it;
/// - empty maps and lists are left out: protobuf cannot tell an empty map or repeated
///   field from an absent one.
fn normalise_adk_event(mut event: Value, ids: &mut Ids) -> Value {
    let object = event.as_object_mut().expect("an event is an object");
    for field in ["id", "timestamp", "nodeInfo"] {
        object.remove(field);
    }
    if let Some(Value::String(id)) = object.get("invocationId") {
        let numbered = ids.number("invocation", id);
        object.insert("invocationId".into(), numbered.into());
    }
    for part in event
        .pointer_mut("/content/parts")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for kind in ["functionCall", "functionResponse"] {
            if let Some(Value::String(id)) = part.pointer(&format!("/{kind}/id")).cloned() {
                part[kind]["id"] = ids.number("call", &id).into();
            }
        }
    }
    // The long-running calls are named by their (numbered) call ids too.
    if let Some(Value::Array(ids_of_calls)) = event.get_mut("longRunningToolIds") {
        for id in ids_of_calls.iter_mut() {
            if let Value::String(call) = id {
                *id = ids.number("call", call).into();
            }
        }
    }
    drop_empty(&mut event);
    event
}

fn drop_empty(value: &mut Value) {
    if let Value::Object(map) = value {
        map.values_mut().for_each(drop_empty);
        map.retain(|key, v| {
            // A function's arguments and response are values: `{}` there is what was sent.
            let payload = matches!(key.as_str(), "args" | "response");
            payload || !matches!(v, Value::Object(m) if m.is_empty()) && !matches!(v, Value::Array(a) if a.is_empty())
        });
    }
}

/// A stored event in ADK's JSON form (by alias, without None), from the gRPC event.
fn adk_json(event: &pb::Event) -> Value {
    let core = adk_grpc_core::Event::try_from(event).expect("a valid event");
    let mut json = Map::new();
    let mut put = |key: &str, value: Value| {
        if !value.is_null() {
            json.insert(key.to_string(), value);
        }
    };
    put("modelVersion", json!(event.model_version));
    put("content", core.content().map(content_json).unwrap_or(Value::Null));
    if let Some(usage) = &event.usage_metadata {
        put(
            "usageMetadata",
            json!({
                "promptTokenCount": usage.prompt_token_count,
                "candidatesTokenCount": usage.candidates_token_count,
                "totalTokenCount": usage.total_token_count,
            }),
        );
    }
    let finish = pb::FinishReason::try_from(event.finish_reason).unwrap_or_default();
    if finish != pb::FinishReason::Unspecified {
        put(
            "finishReason",
            json!(finish.as_str_name().trim_start_matches("FINISH_REASON_")),
        );
    }
    put("partial", json!(event.partial));
    put("turnComplete", json!(event.turn_complete));
    put("invocationId", json!(event.invocation_id));
    put("author", json!(event.author));
    if !event.branch.is_empty() {
        put("branch", json!(event.branch));
    }
    let actions = &core.actions;
    put(
        "actions",
        json!({
            "stateDelta": actions.state_delta,
            "artifactDelta": actions.artifact_delta,
            "transferToAgent": actions.transfer_to_agent,
            "escalate": actions.escalate,
            "skipSummarization": actions.skip_summarization,
            "endOfAgent": actions.end_of_agent,
            "agentState": actions.agent_state,
        }),
    );
    put("longRunningToolIds", json!(event.long_running_tool_ids));
    let mut value = Value::Object(json);
    drop_nulls(&mut value);
    value
}

fn drop_nulls(value: &mut Value) {
    if let Value::Object(map) = value {
        map.retain(|_, v| !v.is_null());
        map.values_mut().for_each(drop_nulls);
    }
}

/// A content as google-genai dumps it by alias: camelCase part fields.
fn content_json(content: &Content) -> Value {
    let parts: Vec<Value> = content
        .parts
        .iter()
        .map(|part| {
            let mut json = Map::new();
            if let Some(text) = part.text() {
                json.insert("text".into(), text.into());
            } else if let Some(call) = part.function_call_view() {
                json.insert(
                    "functionCall".into(),
                    json!({"id": call.id, "args": call.args, "name": call.name}),
                );
            } else if let Some(response) = part.function_response_view() {
                json.insert(
                    "functionResponse".into(),
                    json!({"id": response.id, "name": response.name, "response": response.response}),
                );
            } else {
                let mut generic = serde_json::to_value(part).expect("a part is JSON");
                camel_case_keys(&mut generic);
                return generic;
            }
            if let Some(thought) = part.thought {
                json.insert("thought".into(), thought.into());
            }
            Value::Object(json)
        })
        .collect();
    json!({"parts": parts, "role": content.role})
}

fn camel_case_keys(value: &mut Value) {
    if let Value::Object(map) = value {
        let old = std::mem::take(map);
        for (key, mut v) in old {
            camel_case_keys(&mut v);
            let mut camel = String::new();
            let mut upper = false;
            for c in key.chars() {
                match (c, upper) {
                    ('_', _) => upper = true,
                    (c, true) => {
                        camel.push(c.to_ascii_uppercase());
                        upper = false
                    }
                    (c, false) => camel.push(c),
                }
            }
            map.insert(camel, v);
        }
    }
}

#[tokio::test]
async fn single_agent() {
    replay("single_agent").await;
}

#[tokio::test]
async fn coordinator() {
    replay("coordinator").await;
}

#[tokio::test]
async fn sequential() {
    replay("sequential").await;
}

#[tokio::test]
async fn loop_exit() {
    replay("loop_exit").await;
}

#[tokio::test]
async fn examples() {
    replay("examples").await;
}

#[tokio::test]
async fn static_instruction() {
    replay("static_instruction").await;
}

#[tokio::test]
async fn python_tools() {
    replay("python_tools").await;
}

#[tokio::test]
async fn python_callbacks() {
    replay("python_callbacks").await;
}

#[tokio::test]
async fn long_running() {
    replay("long_running").await;
}
