//! `kind: model_consult` end to end: the real `adk-server` over Redis with an agents
//! file whose agent's model (one fake OpenAI server) consults an advisor (another);
//! a gRPC client runs the turns and reads the session.

use super::state_schema::tool_answer;
use super::tool_context::{adk_server, state_of};
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::RedisServer;
use serde_json::json;

const USER: &str = "alice";

#[tokio::test]
async fn the_declared_advisor_answers_the_agents_consults_within_max_uses() {
    let redis = RedisServer::start().await;
    let executor = FakeServer::start().await;
    let advisor = FakeServer::start().await;
    let file = runs::agents_file(&format!(
        "
models:
  fast: {{ provider: openai, model: fast-model, base_url: '{executor}', api_key_env: E2E_OPENAI_KEY }}
  smart: {{ provider: openai, model: smart-model, base_url: '{advisor}', api_key_env: E2E_OPENAI_KEY }}
tools:
  ask_senior: {{ kind: model_consult, advisor: smart, max_uses: 1, session_max_uses: 5 }}
apps:
  coder:
    root_agent: {{ name: coder, model: fast, tools: [ask_senior] }}
",
        executor = executor.url(),
        advisor = advisor.url(),
    ));
    let server = adk_server(&redis.url(), &file).await;
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");

    executor.push(openai::tool_calls(&[(
        "call_1",
        "ask_senior",
        json!({"question": "Which file first?", "context": "the tests are in tests/"}),
    )]));
    advisor.push(openai::text("Read src/parse.rs, then run its tests."));
    executor.push(openai::tool_calls(&[(
        "call_2",
        "ask_senior",
        json!({"question": "And then?"}),
    )]));
    executor.push(openai::text("On it."));
    let request = runs::run_request("coder", USER, "s1", user_text("the parser drops commas"));
    let (_, failure) = runs::run_to_end(&mut client, request).await;
    assert!(failure.is_none(), "{failure:?}\n{}", server.tail_log(40));

    let asked = advisor.requests();
    assert_eq!(asked.len(), 1, "the consult over max_uses did not reach the advisor");
    let body = asked[0].json();
    assert_eq!(body["model"], "smart-model");
    let text = body["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    for expected in [
        "the parser drops commas",
        "Which file first?",
        "the tests are in tests/",
    ] {
        assert!(text.contains(expected), "{expected:?} not in {text}");
    }
    let advice = tool_answer(&executor.requests()[1], "call_1");
    assert_eq!(advice["guidance"], "Read src/parse.rs, then run its tests.");
    let over = tool_answer(&executor.last_request(), "call_2");
    assert_eq!(over["status"], "limit_reached", "{over}");
    assert!(over["message"].as_str().unwrap().contains("(1 of 1 used)"), "{over}");

    let session = runs::get_session(server.endpoint(), "coder", USER, "s1").await;
    assert_eq!(state_of(&session), json!({"model_consult:ask_senior:session_uses": 1}));
}
