//! Durable runs: two real `adk-runner-server` processes and a session server on one real
//! redis-server, a fake OpenAI server as the (stalling) model and a Python HTTP tool
//! server that records every call. The replica running a multi-step invocation
//! (model → tool → model → transfer to a sub-agent → reply) is killed with SIGKILL at
//! each step in turn; the other replica resumes the invocation from the log. A rolling
//! restart (SIGTERM one replica, start it again, SIGTERM the other) under 20 concurrent
//! runs hands every run over and finishes it exactly once.

use adk_grpc_e2e::runs::{self, agents_file, next, spawn_runner, text_of, user_text};
use adk_grpc_e2e::script_server::ScriptServer;
use adk_grpc_e2e::spawn_session_server;
use adk_grpc_models::testing::{FakeReply, FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisCluster, RedisServer, ServiceProcess, eventually};
use serde_json::json;
use std::collections::HashSet;
use std::time::{Duration, Instant};

const USER: &str = "alice";
/// Short leases, so a dead replica's run is resumed within about a second.
const LEASE_TTL_MS: u64 = 1000;
/// A short shutdown grace, so a SIGTERMed replica hands its runs over within a second.
const SHUTDOWN_GRACE_SECS: u64 = 1;

/// The app: a planner that calls the `forecast` HTTP tool, then hands the turn to its
/// sub-agent `writer`, which replies.
fn app(provider_url: &str, tools_url: &str) -> String {
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider_url}', timeout_secs: 120 }}
tools:
  forecast:
    kind: http
    url: {tools_url}/forecast
    description: The weather in a city.
    timeout_secs: 120
apps:
  trip:
    root_agent:
      name: planner
      model: gpt
      tools: [forecast]
      sub_agents:
        - {{ name: writer, model: gpt, description: Writes the answer. }}
"
    )
}

/// Where the replica running the invocation is killed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum KillAt {
    /// While the planner's first model call is in flight.
    PlannerFirstReply,
    /// While the tool call is in flight (its call recorded by the tool server).
    ToolRunning,
    /// While the planner's second model call (after the tool response) is in flight.
    PlannerSecondReply,
    /// While the writer's model call (after the transfer) is in flight.
    WriterReply,
}

/// The one store both replicas share.
enum Store {
    Redis(RedisServer),
    Cluster(RedisCluster),
}

impl Store {
    async fn start(cluster: bool) -> Store {
        if cluster {
            Store::Cluster(RedisCluster::start(3).await)
        } else {
            Store::Redis(RedisServer::start().await)
        }
    }

    fn url(&self) -> String {
        match self {
            Store::Redis(redis) => redis.url(),
            Store::Cluster(cluster) => cluster.url(),
        }
    }
}

struct Stack {
    _store: Store,
    sessions: ServiceProcess,
    runners: [ServiceProcess; 2],
    provider: FakeServer,
    tools: ScriptServer,
    _agents: tempfile::NamedTempFile,
    _dir: tempfile::TempDir,
}

impl Stack {
    async fn start() -> Stack {
        Stack::start_on(false).await
    }

    /// Both replicas and the session server on one Redis Cluster (`cluster`) or redis-server.
    async fn start_on(cluster: bool) -> Stack {
        Stack::start_with(cluster, SHUTDOWN_GRACE_SECS).await
    }

    /// As [`Stack::start_on`], the replicas with this shutdown grace.
    async fn start_with(cluster: bool, grace_secs: u64) -> Stack {
        let store = Store::start(cluster).await;
        let provider = FakeServer::start().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let tools = ScriptServer::start("tools/context_tools.py", dir.path()).await;
        let agents = agents_file(&app(provider.url(), &tools.url));
        let url = store.url();
        let args = [
            "--session-lease-ttl-ms".to_string(),
            LEASE_TTL_MS.to_string(),
            "--shutdown-grace-secs".to_string(),
            grace_secs.to_string(),
        ];
        let (sessions, r0, r1) = tokio::join!(
            spawn_session_server(&url, &[]),
            spawn_runner(&url, &agents, &args),
            spawn_runner(&url, &agents, &args),
        );
        Stack {
            _store: store,
            sessions,
            runners: [r0, r1],
            provider,
            tools,
            _agents: agents,
            _dir: dir,
        }
    }

    async fn model_requests(&self, count: usize) {
        eventually(Duration::from_secs(20), || async {
            let seen = self.provider.requests().len();
            if seen >= count {
                Ok(())
            } else {
                Err(format!("{seen} of {count} model requests"))
            }
        })
        .await
    }

    async fn tool_calls(&self, count: usize) {
        eventually(Duration::from_secs(20), || async {
            let seen = self.tools.calls("/forecast").len();
            if seen >= count {
                Ok(())
            } else {
                Err(format!("{seen} of {count} tool calls"))
            }
        })
        .await
    }
}

fn forecast_call(wait_secs: u64) -> serde_json::Value {
    openai::tool_calls(&[("c1", "forecast", json!({"city": "Paris", "wait_secs": wait_secs}))])
}

fn transfer_call() -> serde_json::Value {
    openai::tool_calls(&[("c2", "transfer_to_agent", json!({"agent_name": "writer"}))])
}

const REPLY: &str = "Sunny in Paris: pack sunglasses.";
/// How a resumed run answers a cut call of a tool not safe to repeat (rule 27); the
/// event's own `interrupted` field is another matter.
const INTERRUPTED: &str = "interrupted: the runner running this call stopped";

/// Kills the replica running the invocation at `kill_at` and checks the other one
/// finishes it: no stored step redone, a whole log, the reply seen by a re-attached watch.
async fn killed_at(kill_at: KillAt) {
    killed_at_on(kill_at, false).await
}

async fn killed_at_on(kill_at: KillAt, cluster: bool) {
    let mut stack = Stack::start_on(cluster).await;
    let session = format!("s-{kill_at:?}");
    // The model's replies in call order; the call in flight at the kill stalls forever.
    let tool_wait = if kill_at == KillAt::ToolRunning { 600 } else { 0 };
    let mut script = vec![
        FakeReply::json(forecast_call(tool_wait)),
        FakeReply::json(transfer_call()),
        FakeReply::json(openai::text(REPLY)),
    ];
    let stalled_call = match kill_at {
        KillAt::PlannerFirstReply => Some(0),
        KillAt::PlannerSecondReply => Some(1),
        KillAt::WriterReply => Some(2),
        KillAt::ToolRunning => None,
    };
    if let Some(at) = stalled_call {
        script.insert(at, FakeReply::Stall);
    }
    for reply in script {
        stack.provider.push(reply);
    }

    let mut runner = AgentRunnerClient::connect(stack.runners[0].endpoint())
        .await
        .expect("connect");
    let request = runs::run_request("trip", USER, &session, user_text("Weather in Paris?"));
    let mut stream = runner.run(request).await.expect("Run").into_inner();
    let user = next(&mut stream).await.expect("open").expect("the user event");
    assert_eq!(user.author, "user");

    match stalled_call {
        Some(at) => stack.model_requests(at + 1).await,
        None => stack.tool_calls(1).await,
    }
    let killed = Instant::now();
    stack.runners[0].kill9().await;
    drop(stream);

    // The client re-attaches to the session from the last sequence it saw.
    let mut sessions = SessionServiceClient::connect(stack.sessions.endpoint())
        .await
        .expect("connect");
    let mut watch = sessions
        .watch_session(pb::WatchSessionRequest {
            app_name: "trip".into(),
            user_id: USER.into(),
            session_id: session.clone(),
            after_sequence: Some(user.sequence),
        })
        .await
        .expect("WatchSession")
        .into_inner();
    let mut watched = Vec::new();
    let reply = loop {
        let event = tokio::time::timeout(Duration::from_secs(30), next(&mut watch))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no final reply within 30 s; runner 1 log:\n{}",
                    stack.runners[1].tail_log(40)
                )
            })
            .expect("the watch is open")
            .expect("an event");
        watched.push(event.clone());
        if event.author == "writer" && !text_of(&event).is_empty() {
            break event;
        }
    };
    println!("{kill_at:?}: the reply came {:?} after the kill", killed.elapsed());
    assert_eq!(text_of(&reply), REPLY);
    assert_eq!(reply.invocation_id, user.invocation_id, "the same invocation, resumed");

    // No model call whose reply was stored was made again: three replies, plus the one
    // in flight at the kill; the tool ran once (it is not declared safe to repeat).
    let expected_requests = 3 + usize::from(stalled_call.is_some());
    assert_eq!(stack.provider.requests().len(), expected_requests, "{kill_at:?}");
    assert_eq!(
        stack.tools.calls("/forecast").len(),
        1,
        "{kill_at:?}: the tool ran once"
    );

    // The log: the user's message, the planner's call, its response, the transfer call
    // and its response, the writer's reply; no duplicate, no interruption event.
    let events = runs::get_session(stack.sessions.endpoint(), "trip", USER, &session)
        .await
        .events;
    let ids: HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), events.len(), "no duplicate event");
    let authors: Vec<&str> = events.iter().map(|e| e.author.as_str()).collect();
    assert_eq!(
        authors,
        ["user", "planner", "planner", "planner", "planner", "writer"],
        "{kill_at:?}: {events:#?}"
    );
    assert!(events.iter().all(|e| e.invocation_id == user.invocation_id));
    assert!(
        events.iter().all(|e| !format!("{e:?}").contains("INTERRUPTED")),
        "not closed as interrupted"
    );
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    let contiguous: Vec<u64> = (user.sequence..user.sequence + events.len() as u64).collect();
    assert_eq!(sequences, contiguous);
    // The tool's response: its result, or (killed mid-call) the interruption the model read.
    let tool_response = format!("{:?}", events[2]);
    if kill_at == KillAt::ToolRunning {
        assert!(tool_response.contains("interrupted"), "{tool_response}");
    } else {
        assert!(tool_response.contains("sunny"), "{tool_response}");
    }
    // The re-attached watch saw every event after the user's, the reply last.
    assert_eq!(watched.len(), events.len() - 1);
}

#[tokio::test]
async fn a_run_whose_replica_is_killed_during_a_model_call_is_finished_by_the_other() {
    killed_at(KillAt::PlannerFirstReply).await;
}

#[tokio::test]
async fn a_run_whose_replica_is_killed_during_a_tool_call_tells_the_model_and_goes_on() {
    killed_at(KillAt::ToolRunning).await;
}

#[tokio::test]
async fn a_run_whose_replica_is_killed_after_a_tool_response_does_not_call_the_tool_again() {
    killed_at(KillAt::PlannerSecondReply).await;
}

#[tokio::test]
async fn a_run_whose_replica_is_killed_after_a_transfer_resumes_the_sub_agent() {
    killed_at(KillAt::WriterReply).await;
}

/// The same on a Redis Cluster: the index of running runs is one key in its own slot,
/// apart from the session's lease and run record, and the claim still takes the run once.
#[tokio::test]
async fn on_a_redis_cluster_a_run_whose_replica_is_killed_is_finished_by_the_other() {
    killed_at_on(KillAt::PlannerSecondReply, true).await;
}

/// The final reply of a run followed like a client would: the Run stream, then (when the
/// replica shutting down ends it `UNAVAILABLE`) WatchSession from the last sequence seen.
/// Returns the reply and whether the client had to re-attach.
async fn follow_run(runner: String, sessions: String, user: String, session: String) -> (pb::Event, bool) {
    let mut client = AgentRunnerClient::connect(runner).await.expect("connect");
    let request = runs::run_request("trip", &user, &session, user_text("Weather in Paris?"));
    let mut stream = client.run(request).await.expect("Run").into_inner();
    let mut last_sequence = None;
    loop {
        match next(&mut stream).await {
            Ok(Some(event)) if is_final(&event) => return (event, false),
            Ok(Some(event)) => last_sequence = Some(event.sequence),
            Ok(None) => panic!("{session}: the Run stream ended without a reply"),
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unavailable, "{session}: {status:?}");
                break;
            }
        }
    }
    let mut sessions = SessionServiceClient::connect(sessions).await.expect("connect");
    let mut watch = sessions
        .watch_session(pb::WatchSessionRequest {
            app_name: "trip".into(),
            user_id: user,
            session_id: session.clone(),
            after_sequence: Some(last_sequence.expect("the user event came before the hand-over")),
        })
        .await
        .expect("WatchSession")
        .into_inner();
    loop {
        let event = next(&mut watch)
            .await
            .expect("the watch is open")
            .unwrap_or_else(|| panic!("{session}: the watch ended without a reply"));
        if is_final(&event) {
            return (event, true);
        }
    }
}

fn is_final(event: &pb::Event) -> bool {
    event.author == "planner" && !text_of(event).is_empty()
}

/// Rule 28 under load: 20 runs spread over both replicas, each stopped in a slow tool
/// call. SIGTERM replica 0: it hands its runs over and replica 1 finishes them; replica 0
/// starts again; SIGTERM replica 1: the new replica 0 finishes the rest. Every run answers
/// its user exactly once and no model or tool call is repeated.
#[tokio::test]
async fn a_rolling_restart_of_both_replicas_finishes_every_run_exactly_once() {
    const RUNS: usize = 20;
    let mut stack = Stack::start().await;
    // Every run's first model call asks for the tool, which outlasts the grace: the runs
    // can only finish by being handed over.
    for _ in 0..RUNS {
        stack.provider.push(FakeReply::json(forecast_call(600)));
    }
    let sessions_endpoint = stack.sessions.endpoint();
    let clients: Vec<_> = (0..RUNS)
        .map(|i| {
            let runner = stack.runners[i % 2].endpoint();
            // A user each: the per-user run limit is not what this test is about.
            tokio::spawn(follow_run(
                runner,
                sessions_endpoint.clone(),
                format!("user-{i}"),
                format!("roll-{i}"),
            ))
        })
        .collect();
    stack.model_requests(RUNS).await;
    // Only now the second replies, so that no run takes one as its first.
    for _ in 0..RUNS {
        stack.provider.push(FakeReply::json(openai::text(REPLY)));
    }
    stack.tool_calls(RUNS).await;

    // Replica 0 restarts: SIGTERM, grace, hand-over, a clean exit, a new process.
    let status = stack.runners[0].terminate().await;
    assert!(
        status.success(),
        "replica 0 shut down cleanly: {status:?}\n{}",
        stack.runners[0].tail_log(40)
    );
    stack.runners[0].restart().await;
    // Replica 0's ten runs were finished (by replica 1 or the new replica 0).
    stack.model_requests(RUNS + RUNS / 2).await;

    let status = stack.runners[1].terminate().await;
    assert!(
        status.success(),
        "replica 1 shut down cleanly: {status:?}\n{}",
        stack.runners[1].tail_log(40)
    );

    let mut reattached = 0;
    for (i, client) in clients.into_iter().enumerate() {
        let (reply, moved) = tokio::time::timeout(Duration::from_secs(30), client)
            .await
            .unwrap_or_else(|_| panic!("roll-{i}: no reply within 30 s:\n{}", stack.runners[0].tail_log(40)))
            .expect("the client task");
        assert_eq!(text_of(&reply), REPLY);
        reattached += usize::from(moved);
    }
    assert_eq!(reattached, RUNS, "every run was handed over and its client re-attached");

    // No step twice: one tool call and two model calls per run.
    assert_eq!(stack.tools.calls("/forecast").len(), RUNS, "no tool call repeated");
    assert_eq!(stack.provider.requests().len(), 2 * RUNS, "no model call repeated");
    // Each user message is answered by exactly one reply, in one invocation, in its session.
    for i in 0..RUNS {
        let session = format!("roll-{i}");
        let events = runs::get_session(stack.sessions.endpoint(), "trip", &format!("user-{i}"), &session)
            .await
            .events;
        let authors: Vec<&str> = events.iter().map(|e| e.author.as_str()).collect();
        assert_eq!(
            authors,
            ["user", "planner", "planner", "planner"],
            "{session}: {events:#?}"
        );
        assert_eq!(events.iter().filter(|e| is_final(e)).count(), 1, "{session}");
        assert!(
            events.iter().all(|e| e.invocation_id == events[0].invocation_id),
            "{session}"
        );
        let ids: HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids.len(), events.len(), "{session}: no duplicate event");
        assert!(
            format!("{:?}", events[2]).contains(INTERRUPTED),
            "{session}: {:?}",
            events[2]
        );
    }
}

/// Rule 28 with steps shorter than the grace: 10 runs of three model → tool steps
/// (0.3 s model replies, 1 s tool calls), longer in all than the 3 s grace. SIGTERM
/// replica 0 while every run is in its first tool call, start it again, SIGTERM replica 1:
/// each draining replica starts no new step and hands every run over when the step in
/// flight ends, so no call is cut: no model or tool call is made twice, and no tool call
/// is answered as interrupted.
#[tokio::test]
async fn a_rolling_restart_hands_runs_over_between_steps_and_repeats_no_call() {
    const RUNS: usize = 10;
    const TOOL_STEPS: usize = 3;
    let mut stack = Stack::start_with(false, 3).await;
    // Whichever replica asks, the model answers by how far the run is: a forecast call
    // until the request carries three tool results, then the reply.
    stack.provider.answer_with(|request| {
        let tool_results = request.json()["messages"]
            .as_array()
            .map_or(0, |messages| messages.iter().filter(|m| m["role"] == "tool").count());
        let reply = if tool_results < TOOL_STEPS {
            openai::tool_calls(&[(
                &format!("c{tool_results}"),
                "forecast",
                json!({"city": "Paris", "wait_secs": 1}),
            )])
        } else {
            openai::text(REPLY)
        };
        FakeReply::json(reply).delayed(Duration::from_millis(300))
    });
    let sessions_endpoint = stack.sessions.endpoint();
    let clients: Vec<_> = (0..RUNS)
        .map(|i| {
            tokio::spawn(follow_run(
                stack.runners[i % 2].endpoint(),
                sessions_endpoint.clone(),
                format!("user-{i}"),
                format!("steps-{i}"),
            ))
        })
        .collect();
    stack.tool_calls(RUNS).await;

    let status = stack.runners[0].terminate().await;
    assert!(
        status.success(),
        "replica 0 shut down cleanly: {status:?}\n{}",
        stack.runners[0].tail_log(40)
    );
    stack.runners[0].restart().await;
    stack.tool_calls(2 * RUNS).await;
    let status = stack.runners[1].terminate().await;
    assert!(
        status.success(),
        "replica 1 shut down cleanly: {status:?}\n{}",
        stack.runners[1].tail_log(40)
    );

    for (i, client) in clients.into_iter().enumerate() {
        let (reply, _) = tokio::time::timeout(Duration::from_secs(60), client)
            .await
            .unwrap_or_else(|_| panic!("steps-{i}: no reply within 60 s:\n{}", stack.runners[0].tail_log(40)))
            .expect("the client task");
        assert_eq!(text_of(&reply), REPLY);
    }
    assert_eq!(
        stack.tools.calls("/forecast").len(),
        RUNS * TOOL_STEPS,
        "no tool call made twice"
    );
    assert_eq!(
        stack.provider.requests().len(),
        RUNS * (TOOL_STEPS + 1),
        "no model call made twice"
    );
    for i in 0..RUNS {
        let session = format!("steps-{i}");
        let events = runs::get_session(stack.sessions.endpoint(), "trip", &format!("user-{i}"), &session)
            .await
            .events;
        assert_eq!(events.len(), 2 + 2 * TOOL_STEPS, "{session}: {events:#?}");
        assert!(
            events.iter().all(|e| !format!("{e:?}").contains(INTERRUPTED)),
            "{session}: a call was cut: {events:#?}"
        );
        assert_eq!(events.iter().filter(|e| is_final(e)).count(), 1, "{session}");
    }
}

/// A sequential agent `steps` of three LLM agents, each answering in one model call.
/// A session server and two runner replicas with short leases, on `redis`.
async fn session_server_and_two_replicas(
    redis: &RedisServer,
    agents: &tempfile::NamedTempFile,
) -> (ServiceProcess, ServiceProcess, ServiceProcess) {
    let url = redis.url();
    let args = ["--session-lease-ttl-ms".to_string(), LEASE_TTL_MS.to_string()];
    tokio::join!(
        spawn_session_server(&url, &[]),
        spawn_runner(&url, agents, &args),
        spawn_runner(&url, agents, &args),
    )
}

/// `resumable`: the app is marked resumable (ADK's `resumability_config`), so its log
/// shows the sequence's positions; otherwise they are kept beside it.
fn pipeline_app(provider_url: &str, resumable: bool) -> String {
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider_url}', timeout_secs: 120 }}
apps:
  pipeline:
    resumability_config: {{ is_resumable: {resumable} }}
    root_agent:
      name: steps
      kind: sequential
      sub_agents:
        - {{ name: a, model: gpt }}
        - {{ name: b, model: gpt }}
        - {{ name: c, model: gpt }}
"
    )
}

/// The replica running a sequential agent is killed during its second step: the
/// other one goes on with that step (the first is not run again) and the third.
/// Returns the log.
async fn sequence_killed_in_its_second_step(resumable: bool) -> Vec<pb::Event> {
    let redis = RedisServer::start().await;
    let provider = FakeServer::start().await;
    for reply in [
        FakeReply::json(openai::text("from a")),
        FakeReply::Stall,
        FakeReply::json(openai::text("from b")),
        FakeReply::json(openai::text("from c")),
    ] {
        provider.push(reply);
    }
    let agents = agents_file(&pipeline_app(provider.url(), resumable));
    let (sessions, mut dying, mut other) = session_server_and_two_replicas(&redis, &agents).await;
    let mut runner = AgentRunnerClient::connect(dying.endpoint()).await.expect("connect");
    let request = runs::run_request("pipeline", USER, "seq", user_text("go"));
    let mut stream = runner.run(request).await.expect("Run").into_inner();
    let user = next(&mut stream).await.expect("open").expect("the user event");
    // b's model call is in flight (a's was the first).
    eventually(Duration::from_secs(20), || async {
        let seen = provider.requests().len();
        if seen >= 2 {
            Ok(())
        } else {
            Err(format!("{seen} of 2 model requests"))
        }
    })
    .await;
    dying.kill9().await;
    drop(stream);

    let log = eventually(Duration::from_secs(30), || async {
        let events = runs::get_session(sessions.endpoint(), "pipeline", USER, "seq")
            .await
            .events;
        // The sequence's end is the log's last event when the app shows positions, c's reply otherwise.
        let ended = events.last().is_some_and(|e| {
            (e.author == "steps" && e.actions.as_ref().is_some_and(|a| a.end_of_agent == Some(true)))
                || (!resumable && text_of(e) == "from c")
        });
        if ended {
            Ok(events)
        } else {
            Err(format!("not finished yet; runner log:\n{}", other.tail_log(20)))
        }
    })
    .await;
    other.kill9().await;
    // a answered once; b's call in flight at the kill was made again; then c.
    assert_eq!(provider.requests().len(), 4, "a's stored reply is not asked for again");
    let replies: Vec<(String, String)> = log
        .iter()
        .filter(|e| !text_of(e).is_empty())
        .map(|e| (e.author.clone(), text_of(e)))
        .collect();
    let expected = [("user", "go"), ("a", "from a"), ("b", "from b"), ("c", "from c")];
    let expected: Vec<(String, String)> = expected.iter().map(|(a, t)| (a.to_string(), t.to_string())).collect();
    assert_eq!(replies, expected, "{log:#?}");
    assert!(
        log.iter().all(|e| e.invocation_id == user.invocation_id),
        "one invocation, resumed"
    );
    assert!(
        log.iter().all(|e| !format!("{e:?}").contains("INTERRUPTED")),
        "not closed as interrupted"
    );
    log
}

fn is_position(event: &pb::Event) -> bool {
    event
        .actions
        .as_ref()
        .is_some_and(|a| a.agent_state.is_some() || a.end_of_agent == Some(true))
}

#[tokio::test]
async fn a_sequence_whose_replica_is_killed_in_its_second_step_goes_on_from_that_step() {
    let log = sequence_killed_in_its_second_step(true).await;
    let positions = log
        .iter()
        .filter(|e| e.author == "steps" && e.actions.as_ref().is_some_and(|a| a.agent_state.is_some()))
        .count();
    assert_eq!(positions, 3, "one stored position per step: {log:#?}");
}

/// The same in an app not marked resumable (ADK's default): the log is ADK's, with no
/// position, and the positions kept beside it take the other replica to the same step.
#[tokio::test]
async fn a_sequence_of_an_app_not_marked_resumable_killed_in_its_second_step_goes_on_from_that_step() {
    let log = sequence_killed_in_its_second_step(false).await;
    assert!(!log.iter().any(is_position), "no position in ADK's log: {log:#?}");
}

/// A message enqueued (`on_busy: enqueue`) behind a run whose replica is killed waits for
/// that run to be resumed and finished by the other replica, then runs: the killed run is
/// not closed as interrupted by the message behind it, and each is answered once, in order.
#[tokio::test]
async fn a_message_enqueued_behind_a_killed_replicas_run_runs_after_that_run_is_resumed() {
    let redis = RedisServer::start().await;
    let provider = FakeServer::start().await;
    for reply in [
        FakeReply::Stall,
        FakeReply::json(openai::text("first answer")),
        FakeReply::json(openai::text("second answer")),
    ] {
        provider.push(reply);
    }
    let agents = agents_file(&format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}', timeout_secs: 120 }}
apps:
  pipeline:
    root_agent: {{ name: helper, model: gpt }}
",
        provider.url()
    ));
    let (sessions, mut dying, mut other) = session_server_and_two_replicas(&redis, &agents).await;
    let mut runner = AgentRunnerClient::connect(dying.endpoint()).await.expect("connect");
    let request = runs::run_request("pipeline", USER, "line", user_text("first"));
    let mut stream = runner.run(request).await.expect("Run").into_inner();
    let first = next(&mut stream).await.expect("open").expect("the user event");
    eventually(Duration::from_secs(20), || async {
        match provider.requests().len() {
            0 => Err("the first run's model call is not in flight yet".to_string()),
            _ => Ok(()),
        }
    })
    .await;
    // The second message waits in line on the other replica (sent before or after the
    // kill, it must wait either way: the killed run holds the session until resumed).
    let mut second_request = runs::run_request("pipeline", USER, "line", user_text("second"));
    second_request.on_busy = pb::OnBusy::Enqueue as i32;
    let other_endpoint = other.endpoint();
    let second = tokio::spawn(async move {
        let mut client = AgentRunnerClient::connect(other_endpoint).await.expect("connect");
        let mut stream = client.run(second_request).await.expect("Run").into_inner();
        let mut events = Vec::new();
        while let Some(event) = next(&mut stream).await.expect("the enqueued run ends well") {
            events.push(event);
        }
        events
    });
    dying.kill9().await;
    drop(stream);

    let second = tokio::time::timeout(Duration::from_secs(60), second)
        .await
        .expect("the enqueued run finishes")
        .expect("the enqueued run's task");
    let log = runs::get_session(sessions.endpoint(), "pipeline", USER, "line")
        .await
        .events;
    other.kill9().await;
    assert_eq!(
        second.iter().map(text_of).filter(|t| !t.is_empty()).collect::<Vec<_>>(),
        ["second", "second answer"],
        "the enqueued message got its own answer"
    );
    let replies: Vec<(String, String)> = log
        .iter()
        .filter(|e| !text_of(e).is_empty())
        .map(|e| (e.invocation_id.clone(), text_of(e)))
        .collect();
    let second_id = second[0].invocation_id.clone();
    assert_eq!(
        replies,
        [
            (first.invocation_id.clone(), "first".to_string()),
            (first.invocation_id.clone(), "first answer".to_string()),
            (second_id.clone(), "second".to_string()),
            (second_id, "second answer".to_string()),
        ],
        "the killed run was resumed and answered before the enqueued one ran: {log:#?}"
    );
    assert!(
        log.iter().all(|e| !format!("{e:?}").contains("INTERRUPTED")),
        "nothing closed as interrupted"
    );
    assert_eq!(
        provider.requests().len(),
        3,
        "one model call in flight at the kill, then one per run"
    );
}
