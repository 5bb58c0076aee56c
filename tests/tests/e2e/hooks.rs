//! Hooks (ADK's callbacks and plugins for any language), end to end: hooks written in
//! Python (tests/hooks/hooks.py) called by the real `adk-server` at their points, with
//! the fake OpenAI provider as the model: a guardrail that refuses a tool call, an
//! app-wide redaction of e-mail addresses before replies are stored or streamed, a
//! cache that answers in the model's place, timeouts failing open and closed, and a
//! hook that writes `user:` state. The wire format: docs/hooks.md, "Hooks".

use super::mcp::responses;
use adk_grpc_core::convert::json_from_proto;
use adk_grpc_e2e::runs::{self, text_of, user_text};
use adk_grpc_e2e::script_server::ScriptServer;
use adk_grpc_models::testing::{FakeReply, FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::ServiceProcess;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tonic::Code;

const USER: &str = "alice";

/// The fake provider, the Python hooks and `adk-server` over the memory store with
/// every app of [`agents`], its metrics on a port of its own.
struct Stack {
    provider: FakeServer,
    hooks: ScriptServer,
    server: ServiceProcess,
    metrics_port: u16,
    _dir: tempfile::TempDir,
    _file: tempfile::NamedTempFile,
}

fn agents(provider: &str, hooks: &str) -> String {
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider}' }}
tools:
  transfer:
    kind: http
    url: {hooks}/tool/transfer
    description: Moves money from an account.
  lookup:
    kind: http
    url: {hooks}/tool/broken
    description: Looks a price up (its service is down).
hooks:
  guard: {{ url: '{hooks}/guard', points: [before_tool], on_failure: fail_closed }}
  redact: {{ url: '{hooks}/redact', points: [after_model] }}
  cache: {{ url: '{hooks}/cache', points: [before_model, after_model] }}
  slow_open: {{ url: '{hooks}/slow', points: [before_model], timeout_secs: 1 }}
  slow_closed: {{ url: '{hooks}/slow', points: [before_model], timeout_secs: 1, on_failure: fail_closed }}
  visits: {{ url: '{hooks}/visits', points: [before_agent], context: {{ state: ['user:visits'] }} }}
  fallback: {{ url: '{hooks}/fallback', points: [on_model_error] }}
  tool_fallback: {{ url: '{hooks}/tool_fallback', points: [on_tool_error] }}
  scope: {{ url: '{hooks}/scope', points: [before_tool, after_tool] }}
  tally: {{ url: '{hooks}/tally', points: [before_agent] }}
apps:
  bank:
    root_agent: {{ name: teller, model: gpt, tools: [transfer], hooks: [guard] }}
  support:
    hooks: [redact]
    root_agent:
      name: desk
      model: gpt
      sub_agents:
        - {{ name: billing, model: gpt, description: Answers billing questions. }}
  faq:
    root_agent: {{ name: faq, model: gpt, hooks: [cache] }}
  patient:
    root_agent: {{ name: patient, model: gpt, hooks: [slow_open] }}
  strict:
    root_agent: {{ name: strict, model: gpt, hooks: [slow_closed] }}
  club:
    root_agent: {{ name: host, model: gpt, instruction: 'Visits: {{user:visits?}}.', hooks: [visits] }}
  steady:
    root_agent: {{ name: steady, model: gpt, tools: [lookup], hooks: [fallback, tool_fallback] }}
  fragile:
    root_agent: {{ name: fragile, model: gpt, tools: [lookup] }}
  counted:
    root_agent:
      name: rounds
      kind: sequential
      state_schema: {{ type: object, properties: {{ tally: {{ type: integer }} }} }}
      hooks: [tally]
      sub_agents:
        - {{ name: counter, model: gpt }}
  research:
    root_agent:
      name: lead
      model: gpt
      hooks: [scope]
      sub_agents:
        - {{ name: researcher, model: gpt, mode: single_turn, description: Researches one question. }}
"
    )
}

impl Stack {
    async fn start() -> Stack {
        let dir = tempfile::tempdir().expect("temp dir");
        let provider = FakeServer::start().await;
        let hooks = ScriptServer::start("hooks/hooks.py", dir.path()).await;
        let file = runs::agents_file(&agents(provider.url(), &hooks.url));
        let args = [
            "--store-url".to_string(),
            "memory://".to_string(),
            "--agents".to_string(),
            file.path().display().to_string(),
        ];
        let (server, metrics_port) = runs::spawn_with_metrics("adk-server", &args).await;
        Stack {
            provider,
            hooks,
            server,
            metrics_port,
            _dir: dir,
            _file: file,
        }
    }

    /// A Run of `message`: its events after the user's, and how it ended.
    async fn run(&self, app: &str, session: &str, message: &str, sse: bool) -> (Vec<pb::Event>, Option<tonic::Status>) {
        let mut client = AgentRunnerClient::connect(self.server.endpoint())
            .await
            .expect("connect");
        let mut request = runs::run_request(app, USER, session, user_text(message));
        if sse {
            request.run_config = Some(pb::RunConfig {
                streaming_mode: pb::StreamingMode::Sse as i32,
                max_llm_calls: 0,
                ..Default::default()
            });
        }
        runs::run_to_end(&mut client, request).await
    }

    async fn run_ok(&self, app: &str, session: &str, message: &str, sse: bool) -> Vec<pb::Event> {
        let (events, failure) = self.run(app, session, message, sse).await;
        assert!(failure.is_none(), "{failure:?}\n{}", self.server.tail_log(40));
        events
    }

    async fn session(&self, app: &str, session: &str) -> pb::Session {
        runs::get_session(self.server.endpoint(), app, USER, session).await
    }

    async fn metric(&self, sample: &str) -> bool {
        runs::metrics_reply(self.metrics_port).await.contains(sample)
    }
}

/// Every text of `events`, joined by newlines.
fn texts(events: &[pb::Event]) -> String {
    events.iter().map(text_of).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn a_guardrail_refuses_a_tool_call_and_the_tool_never_runs() {
    let stack = Stack::start().await;
    stack.provider.push(openai::tool_calls(&[
        ("c1", "transfer", json!({"account": "frozen", "amount": 100})),
        ("c2", "transfer", json!({"account": "main", "amount": 5})),
    ]));
    stack.provider.push(openai::text("One transfer was refused."));
    let events = stack.run_ok("bank", "b1", "Move my money", false).await;

    // The refused call's response is the guard's; the other ran.
    let all = responses(&events);
    let refused: Vec<&Value> = all
        .iter()
        .filter(|(name, _)| name == "transfer")
        .map(|(_, r)| r)
        .collect();
    assert_eq!(refused.len(), 2, "{all:#?}");
    assert!(
        refused
            .iter()
            .any(|r| r["error"] == "refused by the guard: account frozen is frozen"),
        "{all:#?}"
    );
    assert!(
        refused.iter().any(|r| r == &&json!({"moved": 5, "from": "main"})),
        "{all:#?}"
    );
    let tool_calls = stack.hooks.calls("/tool/transfer");
    assert_eq!(
        tool_calls,
        vec![json!({"account": "main", "amount": 5})],
        "the frozen account's transfer never ran"
    );

    // The model read the refusal.
    let last = stack.provider.last_request().json();
    let tool_messages: Vec<String> = last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        tool_messages.iter().any(|m| m.contains("refused by the guard")),
        "{tool_messages:?}"
    );

    // What the guard was sent: the point, the tool and its arguments, the call's context.
    let guard = stack.hooks.calls("/guard");
    assert_eq!(guard.len(), 2);
    let frozen = guard
        .iter()
        .find(|call| call["args"]["account"] == "frozen")
        .expect("the frozen call");
    assert_eq!(frozen["point"], "before_tool");
    assert_eq!(frozen["hook"], "guard");
    assert_eq!(frozen["tool"], "transfer");
    assert_eq!(frozen["agent_name"], "teller");
    assert_eq!(frozen["context"]["function_call_id"], "c1");
    assert_eq!(frozen["context"]["session_id"], "b1");
    assert_eq!(frozen["context"]["state"], json!({}), "no state was granted");
    assert!(
        stack
            .metric(r#"adk_hook_calls_total{hook="guard",outcome="OK",point="before_tool"} 2"#)
            .await
    );
}

/// The app-wide `redact` hook, at every agent of the app: what the client is streamed
/// and what GetSession shows carry no e-mail address.
async fn e_mail_addresses_are_redacted(sse: bool) {
    let stack = Stack::start().await;
    // The root agent answers itself, then hands over to billing, which answers too.
    stack.provider.push(openai::text("Write to help@example.com, please."));
    let first = stack.run_ok("support", "s1", "Who do I write to?", sse).await;
    stack.provider.push(openai::tool_calls(&[(
        "t1",
        "transfer_to_agent",
        json!({"agent_name": "billing"}),
    )]));
    stack.provider.push(openai::text(
        "Invoices come from billing@example.com or bills@corp.example.org.",
    ));
    let second = stack.run_ok("support", "s1", "And about my invoice?", sse).await;

    let streamed = texts(&first) + "\n" + &texts(&second);
    assert!(!streamed.contains('@'), "streamed: {streamed}");
    assert!(streamed.contains("Write to [e-mail redacted], please."), "{streamed}");
    assert!(
        streamed.contains("Invoices come from [e-mail redacted] or [e-mail redacted]."),
        "{streamed}"
    );
    assert!(
        first.iter().chain(&second).all(|e| e.partial != Some(true)),
        "an agent with an after_model hook streams no partial replies"
    );
    let billing = second
        .iter()
        .find(|e| text_of(e).contains("Invoices"))
        .expect("billing's reply");
    assert_eq!(
        billing.author, "billing",
        "the app-wide hook saw the sub-agent's reply too"
    );

    let stored = stack.session("support", "s1").await;
    let stored_texts = texts(&stored.events);
    assert!(!stored_texts.contains('@'), "stored: {stored_texts}");
    assert_eq!(stored_texts.matches("[e-mail redacted]").count(), 3, "{stored_texts}");
    // With streaming asked for, the model was still called whole: nothing to redact in pieces.
    for request in stack.provider.requests() {
        assert_ne!(request.json()["stream"], json!(true));
    }
    assert_eq!(stack.hooks.calls("/redact").len(), 3);
}

#[tokio::test]
async fn an_app_wide_hook_redacts_e_mail_addresses_before_they_are_stored() {
    e_mail_addresses_are_redacted(false).await;
}

#[tokio::test]
async fn an_app_wide_hook_redacts_e_mail_addresses_before_they_are_streamed() {
    e_mail_addresses_are_redacted(true).await;
}

#[tokio::test]
async fn a_cache_answers_a_repeated_question_without_the_model() {
    let stack = Stack::start().await;
    stack.provider.push(openai::text("We open at 9 and close at 5."));
    let first = stack.run_ok("faq", "f1", "When are you open?", false).await;
    assert_eq!(texts(&first), "We open at 9 and close at 5.");
    let asked = stack.provider.requests().len();
    assert_eq!(asked, 1);

    // Another session, the same question: the cache answers, the model is not called.
    let second = stack.run_ok("faq", "f2", "When are you open?", false).await;
    assert_eq!(texts(&second), "We open at 9 and close at 5.");
    assert_eq!(stack.provider.requests().len(), asked, "the model was not called again");
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].author, "faq");
    let stored = stack.session("faq", "f2").await;
    assert_eq!(
        texts(&stored.events),
        "When are you open?\nWe open at 9 and close at 5."
    );

    // What the cache was sent at before_model: the request as google-genai JSON.
    let before = &stack.hooks.calls("/cache")[0];
    assert_eq!(before["point"], "before_model");
    assert_eq!(
        before["request"]["contents"],
        json!([{"role": "user", "parts": [{"text": "When are you open?"}]}])
    );
    assert_eq!(before["request"]["model"], "fake-model");
    assert!(before["context"].get("function_call_id").is_none(), "{before}");
}

#[tokio::test]
async fn a_hook_that_times_out_fails_open_or_closed_as_it_says() {
    let stack = Stack::start().await;

    // fail_open: the run goes on without the hook after its timeout.
    stack.provider.push(openai::text("Fine."));
    let started = Instant::now();
    let events = stack.run_ok("patient", "p1", "Hello", false).await;
    assert_eq!(texts(&events), "Fine.");
    assert!(started.elapsed() >= Duration::from_secs(1), "the hook was waited for");
    assert!(
        stack
            .metric(r#"adk_hook_calls_total{hook="slow_open",outcome="DEADLINE_EXCEEDED",point="before_model"} 1"#)
            .await
    );

    // fail_closed: the run fails naming the hook, and the model is not called.
    let asked = stack.provider.requests().len();
    let (events, failure) = stack.run("strict", "p2", "Hello", false).await;
    let failure = failure.expect("the run fails");
    assert_eq!(failure.code(), Code::DeadlineExceeded, "{failure:?}");
    assert!(
        failure.message().contains("hook slow_closed (before_model)") && failure.message().contains("timed out"),
        "{failure:?}"
    );
    assert!(events.iter().all(|e| text_of(e).is_empty()), "{events:?}");
    assert_eq!(stack.provider.requests().len(), asked, "the model was not called");
    assert!(
        stack
            .metric(r#"adk_hook_calls_total{hook="slow_closed",outcome="DEADLINE_EXCEEDED",point="before_model"} 1"#)
            .await
    );
    assert!(
        stack
            .metric(r#"adk_hook_call_duration_seconds_count{hook="slow_closed",point="before_model"} 1"#)
            .await
    );
}

#[tokio::test]
async fn a_hook_writes_user_state_through_its_actions() {
    let stack = Stack::start().await;
    stack.provider.push(openai::text("Welcome."));
    stack.run_ok("club", "c1", "Hi", false).await;
    stack.provider.push(openai::text("Welcome back."));
    stack.run_ok("club", "c2", "Hi again", false).await;

    // user: state spans the user's sessions; the second visit's instruction shows it.
    let system = stack.provider.last_request().json()["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        system,
        "Visits: 2.\n\nYou are an agent. Your internal name is \"host\"."
    );
    let session = stack.session("club", "c2").await;
    let state = session.state.expect("state");
    let value = |key: &str| json_from_proto(key, &state[key]).expect("JSON");
    assert_eq!(value("user:visits"), json!(2));
    assert_eq!(value("user:last_agent"), json!("host"));
    // The hook's actions are an event of the agent, stored before it runs.
    let first = &session.events[1];
    assert_eq!(first.author, "host");
    assert!(
        first
            .actions
            .as_ref()
            .is_some_and(|a| a.state_delta.contains_key("user:visits"))
    );

    // It was sent only the state it declared.
    let calls = stack.hooks.calls("/visits");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["point"], "before_agent");
    assert_eq!(
        calls[0]["user_content"],
        json!({"role": "user", "parts": [{"text": "Hi"}]})
    );
    assert_eq!(calls[1]["context"]["state"], json!({"user:visits": 1}));
}

#[tokio::test]
async fn an_on_model_error_hook_answers_for_a_failed_model_call_or_lets_the_error_stand() {
    let stack = Stack::start().await;
    let overloaded = || FakeReply::status(503, openai::error("overloaded", "server_error"));

    // The hook answers UNAVAILABLE: its reply is the agent's, stored as the model's.
    stack.provider.push(overloaded());
    let events = stack.run_ok("steady", "m1", "What does a coffee cost?", false).await;
    let apology = "The assistant is busy; please try again in a minute.";
    assert_eq!(texts(&events), apology);
    assert_eq!(events[0].author, "steady");
    let stored = stack.session("steady", "m1").await;
    assert_eq!(texts(&stored.events), format!("What does a coffee cost?\n{apology}"));
    let calls = stack.hooks.calls("/fallback");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["point"], "on_model_error");
    assert_eq!(calls[0]["error"]["code"], "UNAVAILABLE");
    assert!(
        calls[0]["error"]["message"].as_str().is_some_and(|m| m.contains("503")),
        "{}",
        calls[0]
    );
    assert_eq!(
        calls[0]["request"]["contents"],
        json!([{"role": "user", "parts": [{"text": "What does a coffee cost?"}]}])
    );

    // Another error the hook leaves alone: the run fails with it, as without a hook.
    stack.provider.push(FakeReply::status(
        400,
        openai::error("bad request", "invalid_request_error"),
    ));
    let (_, failure) = stack.run("steady", "m2", "And tea?", false).await;
    // (A model error is INTERNAL, its message only in the server's log.)
    assert_eq!(failure.expect("the run fails").code(), Code::Internal);
    assert_eq!(stack.hooks.calls("/fallback").len(), 2);

    // Without the hook the same 503 fails the run.
    stack.provider.push(overloaded());
    let (_, failure) = stack.run("fragile", "m3", "What does a coffee cost?", false).await;
    assert_eq!(failure.expect("the run fails").code(), Code::Unavailable);
}

#[tokio::test]
async fn an_on_tool_error_hook_answers_for_a_failed_tool_call() {
    let stack = Stack::start().await;
    // The tool's service answers 500, then the model calls a tool the agent lacks.
    stack.provider.push(openai::tool_calls(&[
        ("c1", "lookup", json!({"item": "coffee"})),
        ("c2", "weather", json!({"city": "Oslo"})),
    ]));
    stack
        .provider
        .push(openai::text("Coffee was 3 euros last time I looked."));
    let events = stack.run_ok("steady", "t1", "What does a coffee cost?", false).await;
    let all = responses(&events);
    let lookup = &all
        .iter()
        .find(|(name, _)| name == "lookup")
        .expect("lookup's response")
        .1;
    assert_eq!(lookup["stale"], json!(true), "{all:#?}");
    assert!(
        lookup["because"].as_str().is_some_and(|m| m.contains("500")),
        "the hook was sent the error: {lookup}"
    );
    let weather = &all
        .iter()
        .find(|(name, _)| name == "weather")
        .expect("weather's response")
        .1;
    assert!(
        weather["because"].as_str().is_some_and(|m| m.contains("not available")),
        "a call of no tool reaches the hook too, as in ADK: {weather}"
    );
    let calls = stack.hooks.calls("/tool_fallback");
    assert_eq!(calls.len(), 2);
    let first = calls.iter().find(|c| c["tool"] == "lookup").expect("lookup's call");
    assert_eq!(first["point"], "on_tool_error");
    assert_eq!(first["args"], json!({"item": "coffee"}));
    assert_eq!(first["context"]["function_call_id"], "c1");
    assert_eq!(first["error"]["code"], "INTERNAL");
    // The model read the hook's result.
    let last = stack.provider.last_request().json();
    let tool_messages: Vec<String> = last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(tool_messages.iter().all(|m| m.contains("stale")), "{tool_messages:?}");

    // Without the hook the model reads the error.
    stack
        .provider
        .push(openai::tool_calls(&[("d1", "lookup", json!({"item": "tea"}))]));
    stack.provider.push(openai::text("I cannot tell."));
    let events = stack.run_ok("fragile", "t2", "And tea?", false).await;
    let all = responses(&events);
    assert!(
        all[0].1["error"].as_str().is_some_and(|e| e.contains("500")),
        "{all:#?}"
    );
}

/// A single_turn sub-agent (ADK 2's `mode`) is called as a tool, and its caller's tool
/// hooks see the call as any tool's: a guardrail refuses one call (the agent never runs),
/// changes the arguments of another (the agent starts from them), and after_tool changes
/// both answers.
#[tokio::test]
async fn tool_hooks_see_the_calls_of_a_single_turn_agent() {
    let stack = Stack::start().await;
    stack.provider.push(openai::tool_calls(&[
        ("r1", "researcher", json!({"request": "the secret plans"})),
        ("r2", "researcher", json!({"request": "their favourite colour"})),
    ]));
    stack.provider.push(openai::text("Blue."));
    stack.provider.push(openai::text("They like blue."));
    let events = stack.run_ok("research", "r", "Find out about them", false).await;

    assert_eq!(stack.provider.requests().len(), 3, "the researcher ran once");
    let asked = stack.provider.requests()[1].json().to_string();
    assert!(
        asked.contains("their favourite colour (answer in one word)"),
        "the researcher started from the hook's arguments: {asked}"
    );
    assert!(!asked.contains("secret"), "{asked}");
    let answers: Vec<(String, Value)> = responses(&events);
    assert_eq!(
        answers,
        [
            (
                "researcher".to_string(),
                json!({"error": "refused: no research on secret topics", "checked": true})
            ),
            ("researcher".to_string(), json!({"result": "Blue.", "checked": true})),
        ]
    );
    let session = stack.session("research", "r").await;
    let branches: Vec<&str> = session
        .events
        .iter()
        .filter(|e| e.author == "researcher")
        .map(|e| e.branch.as_str())
        .collect();
    assert_eq!(branches, ["researcher@r2"], "the refused call ran nothing");
    let points: Vec<String> = stack
        .hooks
        .calls("/scope")
        .iter()
        .map(|call| {
            format!(
                "{} {}",
                call["point"].as_str().unwrap_or_default(),
                call["context"]["function_call_id"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        points,
        ["before_tool r1", "after_tool r1", "before_tool r2", "after_tool r2"]
    );
    assert_eq!(text_of(events.last().expect("a reply")), "They like blue.");
}

/// A workflow agent's hooks write state under its `state_schema` as an llm agent's do: a
/// misfit write fails the run naming the agent and the schema, and nothing is stored.
#[tokio::test]
async fn a_workflow_agents_hook_writing_what_its_state_schema_refuses_fails_the_run() {
    let stack = Stack::start().await;
    let (_, failure) = stack.run("counted", "c", "Count", false).await;
    let failure = failure.expect("the run fails");
    assert_eq!(failure.code(), Code::FailedPrecondition);
    assert!(
        failure.message().contains("agent rounds") && failure.message().contains("state_schema"),
        "{failure:?}"
    );
    assert_eq!(stack.hooks.calls("/tally").len(), 1);
    assert!(
        stack.provider.requests().is_empty(),
        "the sequence never started its step"
    );
    let session = stack.session("counted", "c").await;
    assert!(
        !format!("{:?}", session.state).contains("tally"),
        "nothing of the write is stored: {:?}",
        session.state
    );
}
