//! The tool context of tools outside the runner, end to end: a Python HTTP tool
//! (tests/tools/context_tools.py, the envelope) and a Python MCP server
//! (tests/mcp/server.py, `_meta`) read the state they declare, write `user:` state,
//! save artifacts and escalate out of a loop, on the real `adk-server` over the
//! memory store and over Redis; a gRPC client sees it all with Run, GetSession and
//! LoadArtifact, and the next turn's instruction template shows it to the model.
//! The convention: docs/tools.md, "The tool context of HTTP and MCP tools".

use super::mcp::{fastmcp_stdio, last_text, response, responses};
use adk_grpc_core::convert::json_from_proto;
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_e2e::script_server::ScriptServer;
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use serde_json::{Value, json};
use std::path::Path;

const USER: &str = "alice";

fn agents(provider: &FakeServer, tools: &ScriptServer, mcp_state: &Path) -> String {
    let mcp = fastmcp_stdio(
        "notes",
        mcp_state,
        "    context: { state: ['user:theme'] }\n    tool_filter: [save_note]\n",
    );
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider}', api_key_env: E2E_OPENAI_KEY }}
tools:
  set_theme:
    kind: http
    url: {url}/set_theme
    description: Sets the user's theme.
    context: {{ state: ['user:*'] }}
  misspelt:
    kind: http
    url: {url}/misspelt
    description: Asks for an action that does not exist.
    context: {{}}
  plain:
    kind: http
    url: {url}/plain
    description: Echoes its arguments.
  finish:
    kind: http
    url: {url}/finish
    description: Ends the loop.
    context: {{}}
{mcp}
apps:
  demo:
    root_agent:
      name: helper
      model: gpt
      instruction: 'Theme: {{user:theme?}}. Note: {{artifact.note.txt?}}. Saved: {{artifact.theme.txt?}}.'
      tools: [set_theme, notes, misspelt, plain]
  retry:
    root_agent:
      kind: loop
      name: retry
      max_iterations: 5
      sub_agents:
        - {{ name: worker, model: gpt, tools: [finish] }}
",
        provider = provider.url(),
        url = tools.url,
    )
}

pub(crate) async fn adk_server(store_url: &str, agents: &tempfile::NamedTempFile) -> ServiceProcess {
    let args = [
        "--store-url".to_string(),
        store_url.to_string(),
        "--agents".to_string(),
        agents.path().display().to_string(),
    ];
    ServiceProcess::spawn("adk-server", &args, &[("E2E_OPENAI_KEY".into(), "sk-e2e".into())]).await
}

async fn run(
    server: &ServiceProcess,
    app: &str,
    session: &str,
    message: &str,
    delta: &[(&str, Value)],
) -> Vec<pb::Event> {
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let mut request = runs::run_request(app, USER, session, user_text(message));
    for (key, value) in delta {
        request
            .state_delta
            .insert(key.to_string(), adk_grpc_core::convert::json_to_proto(value));
    }
    let (events, failure) = runs::run_to_end(&mut client, request).await;
    assert!(failure.is_none(), "{failure:?}\n{}", server.tail_log(40));
    events
}

pub(crate) fn state_of(session: &pb::Session) -> Value {
    Value::Object(
        session
            .state
            .iter()
            .flat_map(|s| s.iter())
            .map(|(k, v)| (k.to_string(), json_from_proto(k, v).expect("a JSON value")))
            .collect(),
    )
}

async fn load_text(server: &ServiceProcess, session: &str, file: &str) -> (String, i64) {
    load_artifact_text(server.endpoint(), "demo", session, file).await
}

/// An artifact of `USER` holding text, and its version, read with LoadArtifact.
pub(crate) async fn load_artifact_text(endpoint: String, app: &str, session: &str, file: &str) -> (String, i64) {
    let mut client = ArtifactServiceClient::connect(endpoint).await.expect("connect");
    let reply = client
        .load_artifact(pb::LoadArtifactRequest {
            r#ref: Some(pb::ArtifactRef {
                app_name: app.into(),
                user_id: USER.into(),
                session_id: session.into(),
                file_name: file.into(),
            }),
            version: None,
        })
        .await
        .unwrap_or_else(|e| panic!("LoadArtifact {file}: {e}"))
        .into_inner();
    let bytes = match reply.part.and_then(|part| part.kind) {
        Some(pb::part::Kind::Text(text)) => text.into_bytes(),
        Some(pb::part::Kind::InlineData(blob)) => blob.data,
        other => panic!("{file} holds {other:?}"),
    };
    (String::from_utf8(bytes).expect("text"), reply.version)
}

async fn tools_see_and_change_the_session(store: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let provider = FakeServer::start().await;
    let tools = ScriptServer::start("tools/context_tools.py", dir.path()).await;
    let file = runs::agents_file(&agents(&provider, &tools, &dir.path().join("mcp")));
    let server = adk_server(store, &file).await;

    // Turn 1: the HTTP tool sets the theme (reading the old one), the MCP tool saves a
    // note; a misspelt action is an error the model reads and changes nothing.
    provider.push(openai::tool_calls(&[
        ("call_1", "set_theme", json!({"theme": "dark"})),
        ("call_2", "misspelt", json!({})),
        ("call_3", "plain", json!({"x": 1})),
    ]));
    provider.push(openai::tool_calls(&[(
        "call_4",
        "save_note",
        json!({"text": "buy milk"}),
    )]));
    provider.push(openai::text("Done."));
    let secret = ("not_for_tools", json!("session secret"));
    let events = run(
        &server,
        "demo",
        "s1",
        "Set it up",
        &[("user:theme", json!("light")), secret],
    )
    .await;
    assert_eq!(last_text(&events), "Done.");
    let all = responses(&events);

    // What the HTTP tool was sent: the ids, and only the state it declared (user:*).
    let set_theme = response(&all, "set_theme");
    assert_eq!(set_theme["previous"], "light", "{set_theme}");
    let seen = &set_theme["seen"];
    assert_eq!(seen["app_name"], "demo");
    assert_eq!(seen["user_id"], USER);
    assert_eq!(seen["session_id"], "s1");
    assert_eq!(seen["agent_name"], "helper");
    assert_eq!(seen["function_call_id"], "call_1");
    assert!(
        seen["invocation_id"].as_str().is_some_and(|id| id.starts_with("e-")),
        "{seen}"
    );
    assert_eq!(seen["state"], json!({"user:theme": "light"}));
    // The tool's event carries its actions, as a Rust tool's would.
    let tool_event = events
        .iter()
        .find(|e| {
            responses(std::slice::from_ref(e))
                .iter()
                .any(|(name, _)| name == "set_theme")
        })
        .expect("the tool event");
    let actions = tool_event.actions.as_ref().expect("actions");
    assert_eq!(actions.artifact_delta.get("theme.txt"), Some(&1));
    assert!(actions.state_delta.contains_key("user:theme"));

    let misspelt = response(&all, "misspelt")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(misspelt.contains("escalated"), "{misspelt}");
    // Without `context:` the body is the bare arguments, as before.
    assert_eq!(response(&all, "plain"), &json!({"echo": {"x": 1}}));
    assert_eq!(tools.calls("/plain"), [json!({"x": 1})]);

    // The MCP tool got the context in _meta: the declared key only, after turn 1's write.
    let note: Value = serde_json::from_str(response(&all, "save_note")["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(note["context"]["state"], json!({"user:theme": "dark"}), "{note}");
    assert_eq!(note["context"]["function_call_id"], "call_4");

    // Stored: state (user: scope, temp: dropped, the misspelt write absent), artifacts.
    let session = runs::get_session(server.endpoint(), "demo", USER, "s1").await;
    let state = state_of(&session);
    assert_eq!(state["user:theme"], "dark", "{state}");
    assert_eq!(state["user:note_by"], "helper");
    assert_eq!(state["notes_seen_theme"], "dark");
    assert_eq!(state.get("temp:scratch"), None);
    assert_eq!(state.get("user:misspelt"), None);
    assert_eq!(
        load_text(&server, "s1", "theme.txt").await,
        ("the theme is dark".to_string(), 1)
    );
    assert_eq!(load_text(&server, "s1", "note.txt").await, ("buy milk".to_string(), 1));

    // Turn 2: the instruction template reads what the tools wrote.
    provider.push(openai::text("Hello again."));
    run(&server, "demo", "s1", "Hi", &[]).await;
    let requests = provider.requests();
    let last = requests.last().expect("a request").json();
    let system = last["messages"][0]["content"].as_str().unwrap_or_default().to_string();
    assert!(
        system.contains("Theme: dark. Note: buy milk. Saved: the theme is dark."),
        "{system}"
    );
    // A tool escalates out of a loop: one iteration of five. As in ADK, the agent's turn
    // goes on to its reply first (the escalation does not skip summarization), then the
    // loop stops: two model calls.
    let before = provider.requests().len();
    provider.push(openai::tool_calls(&[("call_9", "finish", json!({}))]));
    provider.push(openai::text("Finished."));
    let events = run(&server, "retry", "s2", "Go", &[]).await;
    assert_eq!(
        provider.requests().len() - before,
        2,
        "the loop stopped at the escalation, once the agent had replied"
    );
    assert_eq!(response(&responses(&events), "finish"), &json!({"finished": true}));
    assert!(
        events
            .iter()
            .any(|e| e.actions.as_ref().is_some_and(|a| a.escalate == Some(true))),
        "the escalation is recorded"
    );
    assert_eq!(tools.calls("/finish").len(), 1);
}

#[tokio::test]
async fn http_and_mcp_tools_see_and_change_the_session_on_the_memory_store() {
    tools_see_and_change_the_session("memory://").await;
}

#[tokio::test]
async fn http_and_mcp_tools_see_and_change_the_session_on_redis() {
    let redis = RedisServer::start().await;
    tools_see_and_change_the_session(&redis.url()).await;
}

// ---------- client tools ----------

fn answer(call_id: &str, response: Value, actions: pb::ToolActions) -> pb::Content {
    pb::Content {
        role: "user".into(),
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::FunctionResponse(pb::FunctionResponse {
                name: "confirm".into(),
                response: Some(adk_grpc_core::convert::json_to_proto(&response)),
                id: Some(call_id.into()),
                will_continue: None,
                actions: Some(actions),
            })),
            ..Default::default()
        }],
    }
}

fn text_part(text: &str) -> pb::Part {
    pb::Part {
        kind: Some(pb::part::Kind::Text(text.into())),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_client_tool_answer_writes_state_saves_artifacts_and_transfers() {
    let provider = FakeServer::start().await;
    let file = runs::agents_file(&format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}', api_key_env: E2E_OPENAI_KEY }}
tools:
  confirm: {{ kind: client, description: Asks the user to confirm. }}
apps:
  demo:
    root_agent:
      name: desk
      model: gpt
      tools: [confirm]
      sub_agents:
        - {{ name: billing, model: gpt, description: Takes payments., instruction: 'Confirmed: {{user:confirmed}}. Receipt: {{artifact.receipt.txt}}' }}
",
        provider.url()
    ));
    let server = adk_server("memory://", &file).await;
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");

    // Each turn pauses at the client tool.
    for (session, call) in [("s1", "c1"), ("s2", "c2"), ("s3", "c3")] {
        provider.push(openai::tool_calls(&[(call, "confirm", json!({"what": "pay"}))]));
        run(&server, "demo", session, "Pay my bill", &[]).await;
    }

    // s1: the answer writes user: state, saves a receipt and hands the turn to billing,
    // whose instruction reads both.
    provider.push(openai::text("Payment taken."));
    let actions = pb::ToolActions {
        state_delta: [(
            "user:confirmed".to_string(),
            adk_grpc_core::convert::json_to_proto(&json!(true)),
        )]
        .into(),
        artifacts: [("receipt.txt".to_string(), text_part("paid 10 EUR"))].into(),
        transfer_to_agent: Some("billing".into()),
        ..Default::default()
    };
    let request = runs::run_request("demo", USER, "s1", answer("c1", json!({"confirmed": true}), actions));
    let (events, failure) = runs::run_to_end(&mut client, request).await;
    assert!(failure.is_none(), "{failure:?}");
    assert_eq!(last_text(&events), "Payment taken.");
    assert_eq!(events.last().map(|e| e.author.as_str()), Some("billing"));
    let system = provider.requests().last().expect("billing's request").json()["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // A bool as ADK's `str()` writes it.
    assert!(system.contains("Confirmed: True. Receipt: paid 10 EUR"), "{system}");
    let session = runs::get_session(server.endpoint(), "demo", USER, "s1").await;
    assert_eq!(state_of(&session)["user:confirmed"], true);
    let answer_event = session
        .events
        .iter()
        .rev()
        .find(|e| e.author == "user")
        .expect("the answer is stored");
    let recorded = answer_event.actions.as_ref().expect("actions");
    assert_eq!(recorded.artifact_delta.get("receipt.txt"), Some(&1));
    assert_eq!(recorded.transfer_to_agent.as_deref(), Some("billing"));
    assert_eq!(
        load_text(&server, "s1", "receipt.txt").await,
        ("paid 10 EUR".to_string(), 1)
    );

    // s2: skip_summarization ends the turn with the answer: the model is not called.
    let before = provider.requests().len();
    let skip = pb::ToolActions {
        skip_summarization: Some(true),
        ..Default::default()
    };
    let request = runs::run_request("demo", USER, "s2", answer("c2", json!({"confirmed": false}), skip));
    let (events, failure) = runs::run_to_end(&mut client, request).await;
    assert!(failure.is_none(), "{failure:?}");
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(provider.requests().len(), before);

    // s3: a transfer to an agent that is not the caller's sub-agent is refused, naming
    // the field, and nothing is stored.
    let stored = runs::get_session(server.endpoint(), "demo", USER, "s3")
        .await
        .events
        .len();
    let bad = pb::ToolActions {
        transfer_to_agent: Some("desk".into()),
        state_delta: [(
            "user:confirmed".to_string(),
            adk_grpc_core::convert::json_to_proto(&json!("no")),
        )]
        .into(),
        ..Default::default()
    };
    let request = runs::run_request("demo", USER, "s3", answer("c3", json!({"confirmed": true}), bad));
    let (_, failure) = runs::run_to_end(&mut client, request).await;
    let status = failure.expect("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("actions.transfer_to_agent"), "{status:?}");
    let session = runs::get_session(server.endpoint(), "demo", USER, "s3").await;
    assert_eq!(session.events.len(), stored);
    assert_eq!(
        state_of(&session)["user:confirmed"],
        true,
        "s1's write stands, s3's is refused"
    );
}
