//! ADK 2's delegation modes end to end: `adk-runner-server` with an agents file whose
//! root agent has a `mode: task` and a `mode: single_turn` sub-agent, the fake OpenAI
//! server (one per agent) on loopback HTTP, the real `adk-session-server` on one
//! redis-server. The task agent asks the user a question in one Run and finishes in the
//! next, on a runner process started anew in between (nothing is kept but the log); the
//! root goes on with its output and calls the single-turn agent, whose events GetSession
//! shows on their branch.

use adk_grpc_core::convert::json_from_proto;
use adk_grpc_e2e::runs::{self, agents_file, spawn_runner, user_text};
use adk_grpc_e2e::spawn_session_server;
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::RedisServer;
use serde_json::{Value, json};

const USER: &str = "alice";

/// The function responses of an event: (id, name, response).
fn responses(event: &pb::Event) -> Vec<(String, String, Value)> {
    let parts = event.content.as_ref().map(|c| c.parts.as_slice()).unwrap_or_default();
    parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::FunctionResponse(r)) => Some((
                r.id.clone().unwrap_or_default(),
                r.name.clone(),
                json_from_proto("response", r.response.as_ref().expect("response")).unwrap(),
            )),
            _ => None,
        })
        .collect()
}

fn calls(event: &pb::Event) -> Vec<String> {
    let parts = event.content.as_ref().map(|c| c.parts.as_slice()).unwrap_or_default();
    parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::FunctionCall(call)) => Some(call.name.clone()),
            _ => None,
        })
        .collect()
}

/// (author, branch, text or calls or responses) of each event, as a test reads them.
fn shape(events: &[pb::Event]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| {
            let what = if !calls(e).is_empty() {
                format!("call {}", calls(e).join(","))
            } else if !responses(e).is_empty() {
                let names: Vec<String> = responses(e).into_iter().map(|(_, name, _)| name).collect();
                format!("response {}", names.join(","))
            } else {
                runs::text_of(e)
            };
            (e.author.clone(), e.branch.clone(), what)
        })
        .collect()
}

fn owned(rows: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    rows.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

#[tokio::test]
async fn a_task_agent_asks_across_two_runs_and_a_single_turn_agent_runs_on_its_branch() {
    let host_model = FakeServer::start().await;
    let intake_model = FakeServer::start().await;
    let summary_model = FakeServer::start().await;
    let yaml = format!(
        "
models:
  host_model: {{ provider: openai, model: fake-model, base_url: '{}' }}
  intake_model: {{ provider: openai, model: fake-model, base_url: '{}' }}
  summary_model: {{ provider: openai, model: fake-model, base_url: '{}' }}
apps:
  desk:
    root_agent:
      name: host
      model: host_model
      instruction: Book tables.
      sub_agents:
        - name: intake
          description: Asks the user how many guests come.
          model: intake_model
          mode: task
          output_key: party
          output_schema:
            type: object
            properties: {{ guests: {{ type: integer }} }}
            required: [guests]
        - name: summarizer
          description: Writes the booking up in one line.
          model: summary_model
          mode: single_turn
",
        host_model.url(),
        intake_model.url(),
        summary_model.url()
    );
    let redis = RedisServer::start().await;
    let file = agents_file(&yaml);
    let sessions = spawn_session_server(&redis.url(), &[]).await;
    let mut first_runner = spawn_runner(&redis.url(), &file, &[]).await;
    let mut runner = AgentRunnerClient::connect(first_runner.endpoint())
        .await
        .expect("connect");

    // Run 1: the host hands the booking to intake, which asks and waits for the user.
    host_model.push(openai::tool_calls(&[(
        "t1",
        "intake",
        json!({"request": "Ask how many guests come."}),
    )]));
    intake_model.push(openai::text("For how many guests?"));
    let request = runs::run_request("desk", USER, "s1", user_text("Book me a table tonight"));
    let (events, error) = runs::run_to_end(&mut runner, request).await;
    assert!(error.is_none(), "{error:?}\n{}", first_runner.tail_log(30));
    assert_eq!(
        shape(&events),
        owned(&[
            ("host", "", "call intake"),
            ("intake", "intake@t1", "For how many guests?"),
        ])
    );
    let offered: Vec<Value> = host_model.last_request().json()["tools"].as_array().cloned().unwrap();
    let offered: Vec<&str> = offered
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["intake", "summarizer"], "tools, not transfer targets");
    let app = runner
        .get_app(pb::GetAppRequest {
            app_name: "desk".into(),
        })
        .await
        .expect("GetApp")
        .into_inner();
    let root = app.root_agent.expect("the root agent");
    let modes: Vec<(&str, &str)> = std::iter::once(&root)
        .chain(root.sub_agents.iter())
        .map(|agent| (agent.name.as_str(), agent.mode.as_str()))
        .collect();
    assert_eq!(
        modes,
        [("host", "chat"), ("intake", "task"), ("summarizer", "single_turn")],
        "GetApp shows each llm agent's mode"
    );

    let task_invocation = events[0].invocation_id.clone();
    assert_eq!(events[1].isolation_scope, "t1", "the task's events are in its scope");
    assert_eq!(events[0].isolation_scope, "", "its caller's in none");

    // The runner that ran it goes; another one takes the next Run from the log alone.
    first_runner.kill9().await;
    let second_runner = spawn_runner(&redis.url(), &file, &[]).await;
    let mut runner = AgentRunnerClient::connect(second_runner.endpoint())
        .await
        .expect("connect");

    // Run 2: the user's answer goes to intake, which finishes; the host goes on in the
    // same Run with the output, and calls the single-turn summarizer.
    intake_model.push(openai::tool_calls(&[("f1", "finish_task", json!({"guests": 4}))]));
    host_model.push(openai::tool_calls(&[(
        "s1",
        "summarizer",
        json!({"request": "A table for 4 tonight."}),
    )]));
    summary_model.push(openai::text("Table for four, tonight."));
    host_model.push(openai::text("Booked: table for four, tonight."));
    let request = runs::run_request("desk", USER, "s1", user_text("We are four"));
    let (events, error) = runs::run_to_end(&mut runner, request).await;
    assert!(error.is_none(), "{error:?}\n{}", second_runner.tail_log(30));
    assert_eq!(
        shape(&events),
        owned(&[
            ("intake", "intake@t1", "call finish_task"),
            ("intake", "intake@t1", "response finish_task"),
            // A task's answer is the user's function response, as ADK 2 stores it.
            ("user", "", "response intake"),
            ("host", "", "call summarizer"),
            ("summarizer", "summarizer@s1", "Table for four, tonight."),
            ("host", "", "response summarizer"),
            ("host", "", "Booked: table for four, tonight."),
        ])
    );
    assert_eq!(
        responses(&events[2]),
        [("t1".to_string(), "intake".to_string(), json!({"guests": 4}))]
    );
    // The user's answer joined the task: the whole turn goes on with the task's
    // invocation (ADK 2's), the task's events in its scope, the call's id.
    assert!(
        events.iter().all(|event| event.invocation_id == task_invocation),
        "{:#?}",
        events.iter().map(|event| &event.invocation_id).collect::<Vec<_>>()
    );
    let scopes: Vec<&str> = events.iter().map(|event| event.isolation_scope.as_str()).collect();
    assert_eq!(scopes, ["t1", "t1", "", "", "", "", ""]);
    // finish_task's response, the task's last event, carries its output; no other does.
    let output = events[1]
        .output
        .as_ref()
        .map(|value| json_from_proto("output", value).unwrap());
    assert_eq!(output, Some(json!({"guests": 4})));
    assert!(events.iter().skip(2).all(|event| event.output.is_none()));
    assert_eq!(
        responses(&events[5]),
        [(
            "s1".to_string(),
            "summarizer".to_string(),
            json!({"result": "Table for four, tonight."})
        )]
    );
    // intake's second request: the call's arguments (as ADK writes them, JSON), its
    // question, the user's answer.
    let intake_asked: Vec<Value> = intake_model.last_request().json()["messages"]
        .as_array()
        .cloned()
        .unwrap();
    let said: Vec<&str> = intake_asked.iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(
        said.ends_with(&[
            r#"{"request": "Ask how many guests come."}"#,
            "For how many guests?",
            "We are four"
        ]),
        "{said:?}"
    );
    // The host saw intake's output, never its conversation.
    let host_asked = host_model.last_request().json().to_string();
    assert!(
        !host_asked.contains("We are four") && !host_asked.contains("For how many"),
        "{host_asked}"
    );

    // GetSession: everything stored, each delegated agent's events on its branch, the
    // user's answer on none, in the task's scope and invocation (as ADK 2 stores it).
    let session = runs::get_session(sessions.endpoint(), "desk", USER, "s1").await;
    let stored = shape(&session.events);
    let answer = session
        .events
        .iter()
        .find(|event| event.author == "user" && shape(std::slice::from_ref(event))[0].2 == "We are four")
        .expect("the user's answer is stored");
    assert_eq!(
        (
            answer.branch.as_str(),
            answer.isolation_scope.as_str(),
            answer.invocation_id.as_str()
        ),
        ("", "t1", task_invocation.as_str())
    );
    assert!(
        stored.contains(&(
            "summarizer".into(),
            "summarizer@s1".into(),
            "Table for four, tonight.".into()
        )),
        "{stored:#?}"
    );
    assert_eq!(stored.len(), 3 + 1 + 7, "{stored:#?}");
    let party = session.state.as_ref().and_then(|s| s.get("party")).expect("output_key");
    assert_eq!(json_from_proto("party", party).unwrap(), json!({"guests": 4}));
}
