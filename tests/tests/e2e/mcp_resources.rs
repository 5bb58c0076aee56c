//! ADK's `use_mcp_resources` (LoadMcpResourceTool) end to end: the real `adk-server`
//! (on a real redis-server) runs an agent whose `kind: mcp` toolset (tests/mcp/server.py
//! on the `mcp` package from PyPI, over stdio) sets `use_mcp_resources`; the fake
//! OpenAI server plays the model and records what the runner sends it, and a gRPC
//! client reads the stored session.

use crate::mcp::{fastmcp, fastmcp_stdio, response, responses};
use crate::tool_context::adk_server;
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use serde_json::{Value, json};
use std::io::Write;

const USER: &str = "alice";

async fn run(server: &ServiceProcess, app: &str, session: &str, message: &str) -> Vec<pb::Event> {
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let request = runs::run_request(app, USER, session, user_text(message));
    let (events, failure) = runs::run_to_end(&mut client, request).await;
    assert!(failure.is_none(), "{failure:?}\n{}", server.tail_log(40));
    events
}

/// The system message and the messages after the last tool message of a request.
fn system_and_after_tools(request: &Value) -> (String, Vec<Value>) {
    let messages = request["messages"].as_array().expect("messages").clone();
    let system = messages[0]["content"].as_str().unwrap_or_default().to_string();
    let after = match messages.iter().rposition(|m| m["role"] == "tool") {
        Some(at) => messages[at + 1..].to_vec(),
        None => Vec::new(),
    };
    (system, after)
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn loaded_resources_reach_the_next_model_request_but_not_the_session() {
    let redis = RedisServer::start().await;
    let provider = FakeServer::start().await;
    let state = tempfile::tempdir().expect("state dir");
    let bare_state = tempfile::tempdir().expect("state dir");
    let (python, server_py) = fastmcp();
    let agents = format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider}', api_key_env: E2E_OPENAI_KEY }}
tools:
{docs}  bare:
    kind: mcp
    transport: stdio
    command: '{python}'
    args: ['{server_py}', --state-dir, '{bare_state}', --no-resources]
    connect_timeout_secs: 60
    use_mcp_resources: true
    tool_filter: [weather]
apps:
  demo:
    root_agent: {{ name: helper, model: gpt, instruction: Be brief., tools: [docs] }}
  bare:
    root_agent: {{ name: helper, model: gpt, instruction: Be brief., tools: [bare] }}
",
        provider = provider.url(),
        docs = fastmcp_stdio(
            "docs",
            state.path(),
            "    use_mcp_resources: true\n    tool_filter: [weather]\n"
        ),
        bare_state = bare_state.path().display(),
    );
    let mut file = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("agents file");
    file.write_all(agents.as_bytes()).expect("write the agents file");
    let server = adk_server(&redis.url(), &file).await;

    provider.push(openai::tool_calls(&[(
        "call_1",
        "load_mcp_resource",
        json!({"resource_names": ["guide", "pixel"]}),
    )]));
    provider.push(openai::text("Haiku it is."));
    let events = run(&server, "demo", "s1", "What is the house style?").await;
    let all = responses(&events);
    assert_eq!(
        response(&all, "load_mcp_resource")["resource_names"],
        json!(["guide", "pixel"])
    );

    // Every request lists the resources; the one after the call carries their contents.
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].json();
    assert_eq!(offered(&first), ["weather", "load_mcp_resource"]);
    let (system, _) = system_and_after_tools(&first);
    assert!(system.starts_with("Be brief."), "{system}");
    assert!(
        system.contains("You have a list of MCP resources:\n[\"guide\", \"pixel\"]\n"),
        "{system}"
    );
    let (system, after) = system_and_after_tools(&requests[1].json());
    assert!(system.contains(r#"["guide", "pixel"]"#), "{system}");
    assert_eq!(after.len(), 2, "{after:#?}");
    assert_eq!(after[0]["role"], "user");
    assert_eq!(
        after[0]["content"],
        json!([
            {"type": "text", "text": "Resource guide is:"},
            {"type": "text", "text": "House style: answer in haiku."}
        ])
    );
    assert_eq!(
        after[1]["content"][0],
        json!({"type": "text", "text": "Resource pixel is:"})
    );
    let url = after[1]["content"][1]["image_url"]["url"].as_str().unwrap_or_default();
    assert!(url.starts_with("data:image/png;base64,iVBORw0KGgo"), "{after:#?}");

    // The session keeps the call and its response, never the contents.
    let session = runs::get_session(server.endpoint(), "demo", USER, "s1").await;
    let stored = format!("{session:?}");
    assert!(stored.contains("load_mcp_resource"), "{stored}");
    assert!(
        !stored.contains("House style"),
        "the resource's text was stored: {stored}"
    );
    assert!(!stored.contains("Resource guide is"), "{stored}");
    assert!(
        !session
            .events
            .iter()
            .flat_map(|e| e.content.iter().flat_map(|c| &c.parts))
            .any(|p| matches!(p.kind, Some(pb::part::Kind::InlineData(_)))),
        "the resource's blob was stored"
    );

    // The next turn lists the resources again but shows no contents: they were for one request.
    provider.push(openai::text("Still haiku."));
    run(&server, "demo", "s1", "And again?").await;
    let third = provider.requests()[2].json();
    assert!(!third.to_string().contains("House style"), "{third}");
    assert!(third.to_string().contains(r#"[\"guide\", \"pixel\"]"#), "{third}");

    // A server without the resources capability: no load_mcp_resource, no listing.
    provider.push(openai::text("Sunny."));
    run(&server, "bare", "s2", "Weather?").await;
    let bare = provider.requests()[3].json();
    assert_eq!(offered(&bare), ["weather"]);
    let (system, _) = system_and_after_tools(&bare);
    assert_eq!(
        system,
        "Be brief.\n\nYou are an agent. Your internal name is \"helper\"."
    );
}
