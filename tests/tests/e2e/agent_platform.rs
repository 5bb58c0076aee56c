//! An ADK user's multi-agent app on the suite, end to end over gRPC: an agent used as a
//! tool with structured output, a Python HTTP tool and a Python MCP server that write
//! `user:` state and save artifacts through the tool context, and a guardrail hook in
//! Python; on the memory store (`adk-server`) and on Redis (`adk-runner-server`, read
//! back through `adk-session-server` and `adk-artifact-server`).

use super::mcp::{fastmcp_stdio, last_text, response, responses};
use super::tool_context::{adk_server, load_artifact_text, state_of};
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_e2e::script_server::ScriptServer;
use adk_grpc_e2e::{spawn_artifact_server, spawn_session_server};
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use serde_json::{Value, json};
use std::path::Path;

const USER: &str = "alice";

fn agents(provider: &FakeServer, tools: &ScriptServer, hooks: &ScriptServer, mcp_state: &Path) -> String {
    let notes = fastmcp_stdio(
        "notes",
        mcp_state,
        "    context: { state: ['user:last_transfer'] }\n    tool_filter: [save_note]\n",
    );
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider}', api_key_env: E2E_OPENAI_KEY }}
tools:
  transfer:
    kind: http
    url: {tools}/transfer
    description: Moves money to an account.
    parameters: {{ type: object, properties: {{ account: {{ type: string }}, amount: {{ type: number }} }}, required: [account, amount] }}
    context: {{ state: ['user:*'] }}
{notes}
hooks:
  guard: {{ url: '{hooks}/guard', points: [before_tool], on_failure: fail_closed }}
apps:
  bank:
    hooks: [guard]
    root_agent:
      name: teller
      model: gpt
      global_instruction: 'You work for Example Bank.'
      instruction: 'Last transfer: {{user:last_transfer?}}. Risk: {{user:risk?}}.'
      tools: [transfer, notes]
      sub_agents:
        - name: analyst
          model: gpt
          as_tool: true
          description: Rates the risk of an account.
          input_schema: {{ type: object, properties: {{ account: {{ type: string }} }}, required: [account] }}
          output_schema: {{ type: object, properties: {{ risk: {{ type: string, enum: [low, high] }} }}, required: [risk] }}
          output_key: 'user:risk'
",
        provider = provider.url(),
        tools = tools.url,
        hooks = hooks.url,
    )
}

/// Where the app runs and where a client reads sessions and artifacts.
struct Deployment {
    runner: ServiceProcess,
    sessions: String,
    artifacts: String,
    _others: Vec<ServiceProcess>,
    _redis: Option<RedisServer>,
}

async fn memory(agents: &tempfile::NamedTempFile) -> Deployment {
    let server = adk_server("memory://", agents).await;
    Deployment {
        sessions: server.endpoint(),
        artifacts: server.endpoint(),
        runner: server,
        _others: Vec::new(),
        _redis: None,
    }
}

async fn redis(agents: &tempfile::NamedTempFile) -> Deployment {
    let redis = RedisServer::start().await;
    let args = [
        "--store-url".to_string(),
        redis.url(),
        "--agents".to_string(),
        agents.path().display().to_string(),
    ];
    let runner = ServiceProcess::spawn(
        "adk-runner-server",
        &args,
        &[("E2E_OPENAI_KEY".into(), "sk-e2e".into())],
    )
    .await;
    let sessions = spawn_session_server(&redis.url(), &[]).await;
    let artifacts = spawn_artifact_server(&redis.url(), &[]).await;
    Deployment {
        runner,
        sessions: sessions.endpoint(),
        artifacts: artifacts.endpoint(),
        _others: vec![sessions, artifacts],
        _redis: Some(redis),
    }
}

async fn run(deployment: &Deployment, session: &str, message: &str) -> Vec<pb::Event> {
    let mut client = AgentRunnerClient::connect(deployment.runner.endpoint())
        .await
        .expect("connect");
    let request = runs::run_request("bank", USER, session, user_text(message));
    let (events, failure) = runs::run_to_end(&mut client, request).await;
    assert!(failure.is_none(), "{failure:?}\n{}", deployment.runner.tail_log(40));
    events
}

async fn an_adk_multi_agent_app_runs_with_python_tools_and_hooks(store: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let provider = FakeServer::start().await;
    let tools = ScriptServer::start("tools/context_tools.py", dir.path()).await;
    let hooks = ScriptServer::start("hooks/hooks.py", dir.path()).await;
    let file = runs::agents_file(&agents(&provider, &tools, &hooks, &dir.path().join("mcp")));
    let deployment = match store {
        "memory" => memory(&file).await,
        _ => redis(&file).await,
    };

    // The teller asks the analyst (an agent as a tool, structured output), then moves
    // money twice (the guard refuses the frozen account), then notes it over MCP.
    provider.push(openai::tool_calls(&[("c1", "analyst", json!({"account": "frozen"}))]));
    provider.push(openai::json_reply(&json!({"risk": "high"})));
    provider.push(openai::tool_calls(&[
        ("c2", "transfer", json!({"account": "frozen", "amount": 5})),
        ("c3", "transfer", json!({"account": "main", "amount": 10})),
    ]));
    provider.push(openai::tool_calls(&[("c4", "save_note", json!({"text": "moved 10"}))]));
    provider.push(openai::text("Moved 10 to main; the frozen account is refused."));
    let events = run(&deployment, "s1", "Move my money").await;
    assert_eq!(last_text(&events), "Moved 10 to main; the frozen account is refused.");

    let all = responses(&events);
    // The analyst's structured reply is the tool's result, its output_key the call's state.
    assert_eq!(response(&all, "analyst"), &json!({"risk": "high"}));
    let requests = provider.requests();
    let analyst_request = requests[1].json();
    assert_eq!(analyst_request["response_format"]["type"], "json_schema");
    assert_eq!(
        analyst_request["messages"]
            .as_array()
            .expect("messages")
            .last()
            .expect("a message")["content"],
        r#"{"account":"frozen"}"#
    );
    // The guard refused the frozen account: only the main transfer reached the tool.
    let refused = all
        .iter()
        .filter(|(name, _)| name == "transfer")
        .map(|(_, response)| response.clone())
        .collect::<Vec<Value>>();
    assert!(
        refused
            .iter()
            .any(|r| r["error"].as_str().is_some_and(|e| e.contains("frozen"))),
        "{refused:?}"
    );
    let transfers = tools.calls("/transfer");
    assert_eq!(transfers.len(), 1, "{transfers:?}");
    assert_eq!(transfers[0]["args"], json!({"account": "main", "amount": 10}));
    assert_eq!(
        hooks.calls("/guard").len(),
        4,
        "before every tool call: analyst, 2 transfers, save_note"
    );
    // The MCP tool saw the state the HTTP tool wrote before it.
    let note: Value = serde_json::from_str(response(&all, "save_note")["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(note["context"]["state"], json!({"user:last_transfer": "10 to main"}));

    // A client reads it all back.
    let session = runs::get_session(deployment.sessions.clone(), "bank", USER, "s1").await;
    let state = state_of(&session);
    assert_eq!(state["user:risk"], json!({"risk": "high"}));
    assert_eq!(state["user:last_transfer"], "10 to main");
    assert_eq!(state["user:note_by"], "teller");
    assert!(
        session.events.iter().all(|e| e.author != "analyst"),
        "the analyst's own events stay out"
    );
    assert_eq!(
        load_artifact_text(deployment.artifacts.clone(), "bank", "s1", "receipt.txt").await,
        ("receipt: 10 to main".to_string(), 1)
    );
    assert_eq!(
        load_artifact_text(deployment.artifacts.clone(), "bank", "s1", "note.txt").await,
        ("moved 10".to_string(), 1)
    );

    // The next turn's instruction shows what the tools and the analyst wrote, after the
    // root's global instruction (a dict as ADK's `str()` writes it).
    provider.push(openai::text("Anything else?"));
    run(&deployment, "s1", "Thanks").await;
    let system = provider.requests().last().expect("a request").json()["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(system.starts_with("You work for Example Bank."), "{system}");
    assert!(
        system.contains(r#"Last transfer: 10 to main. Risk: {'risk': 'high'}."#),
        "{system}"
    );
}

#[tokio::test]
async fn an_adk_multi_agent_app_runs_with_python_tools_and_hooks_on_the_memory_store() {
    an_adk_multi_agent_app_runs_with_python_tools_and_hooks("memory").await;
}

#[tokio::test]
async fn an_adk_multi_agent_app_runs_with_python_tools_and_hooks_on_redis() {
    an_adk_multi_agent_app_runs_with_python_tools_and_hooks("redis").await;
}
