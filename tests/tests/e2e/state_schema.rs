//! `state_schema` end to end: a Python HTTP tool (tests/tools/context_tools.py,
//! `remember`) writes state through its actions on the real `adk-server` over Redis;
//! a write the agent's schema refuses is an error the model reads and leaves the
//! session's state as it was (GetSession), one that fits is stored.

use super::tool_context::{adk_server, state_of};
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_e2e::script_server::ScriptServer;
use adk_grpc_models::testing::{FakeServer, RecordedRequest, openai};
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::RedisServer;
use serde_json::{Value, json};

const USER: &str = "alice";

fn agents(provider: &FakeServer, tools: &ScriptServer) -> String {
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider}', api_key_env: E2E_OPENAI_KEY }}
tools:
  remember:
    kind: http
    url: {url}/remember
    description: Writes to the state.
    context: {{}}
apps:
  guide:
    root_agent:
      name: guide
      model: gpt
      tools: [remember]
      state_schema:
        type: object
        properties:
          city: {{ type: string }}
          visits: {{ type: integer, minimum: 0 }}
",
        provider = provider.url(),
        url = tools.url,
    )
}

/// The JSON answer of call `id` (a tool message) in a request the model server received.
pub(crate) fn tool_answer(request: &RecordedRequest, id: &str) -> Value {
    let body = request.json();
    let message = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no answer of {id} in {body}"))
        .clone();
    serde_json::from_str(message["content"].as_str().unwrap_or_default()).expect("a JSON answer")
}

#[tokio::test]
async fn a_tool_write_the_state_schema_refuses_is_an_error_the_model_reads_and_is_not_stored() {
    let redis = RedisServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let provider = FakeServer::start().await;
    let tools = ScriptServer::start("tools/context_tools.py", dir.path()).await;
    let file = runs::agents_file(&agents(&provider, &tools));
    let server = adk_server(&redis.url(), &file).await;
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");

    // Turn 1: a value of the wrong type (and a user: key beside it, which alone would pass).
    provider.push(openai::tool_calls(&[(
        "call_1",
        "remember",
        json!({"state": {"visits": "many", "user:note": "x"}}),
    )]));
    provider.push(openai::text("I could not note that."));
    let request = runs::run_request("guide", USER, "s1", user_text("note my visits"));
    let (_, failure) = runs::run_to_end(&mut client, request).await;
    assert!(failure.is_none(), "{failure:?}\n{}", server.tail_log(40));
    let answer = tool_answer(&provider.last_request(), "call_1");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("state_schema") && error.contains("/visits") && error.contains("remember"),
        "{answer}"
    );
    let session = runs::get_session(server.endpoint(), "guide", USER, "s1").await;
    assert_eq!(state_of(&session), json!({}), "nothing was written");

    // Turn 2: writes that fit are stored; a key with a `:` is not checked.
    provider.push(openai::tool_calls(&[(
        "call_2",
        "remember",
        json!({"state": {"city": "Oslo", "visits": 2, "user:note": [1]}}),
    )]));
    provider.push(openai::text("Noted."));
    let request = runs::run_request("guide", USER, "s1", user_text("note Oslo"));
    let (_, failure) = runs::run_to_end(&mut client, request).await;
    assert!(failure.is_none(), "{failure:?}\n{}", server.tail_log(40));
    assert_eq!(
        tool_answer(&provider.last_request(), "call_2"),
        json!({"written": ["city", "user:note", "visits"]})
    );
    let session = runs::get_session(server.endpoint(), "guide", USER, "s1").await;
    assert_eq!(
        state_of(&session),
        json!({"city": "Oslo", "visits": 2, "user:note": [1]})
    );
}
