//! Long conversations: compaction (every N invocations and for a token budget),
//! bounded loading, and rewind, on every store.

use crate::common::{APP, SESSION, USER};
use adk_grpc_agents::{LlmAgentBuilder, RunOptions, Runner, RunnerConfig};
use adk_grpc_core::CoreSessionService;
use adk_grpc_core::artifact::{LoadRequest, SaveRequest};
use adk_grpc_core::{
    Acquire, AdkError, AppendEventRequest, ArtifactService, Artifacts, CompactionConfig, Content, CreateRequest, Event,
    GetRequest, LeaseKey, Llm, LlmRequest, LlmResponse, LlmResponseStream, Part, Result, ScopedArtifacts, SessionLease,
    SessionService,
};
use adk_grpc_store::{
    InMemoryArtifactBackend, InMemorySessionBackend, InMemorySessionLease, RedisSessionBackend, RedisSessionLease,
    StoreConfig,
};
use adk_grpc_testkit::{RedisCluster, RedisServer};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::Code;

/// A model that answers "reply <n>" and records every request; the summariser
/// variant answers "summary <n>", or fails while `failing` is set.
struct Recorder {
    name: &'static str,
    calls: AtomicUsize,
    failing: AtomicBool,
    requests: Mutex<Vec<LlmRequest>>,
}

impl Recorder {
    fn new(name: &'static str) -> Arc<Recorder> {
        Arc::new(Recorder {
            name,
            calls: AtomicUsize::new(0),
            failing: AtomicBool::new(false),
            requests: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<LlmRequest> {
        self.requests.lock().unwrap().clone()
    }

    fn last_texts(&self) -> Vec<String> {
        let last = self.requests().pop().expect("a request");
        last.contents.iter().filter_map(Content::text).collect()
    }
}

#[async_trait]
impl Llm for Recorder {
    fn name(&self) -> &str {
        self.name
    }

    async fn generate_content(&self, request: LlmRequest, _stream: bool) -> Result<LlmResponseStream> {
        self.requests.lock().unwrap().push(request);
        if self.failing.load(Ordering::SeqCst) {
            return Err(AdkError::Model(format!("{} is down", self.name)));
        }
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let reply = LlmResponse {
            content: Some(Content::new("model").with_text(format!("{} {n}", self.name))),
            ..Default::default()
        };
        Ok(Box::pin(futures::stream::iter([Ok(reply)])))
    }
}

struct Stores {
    sessions: Arc<dyn SessionService>,
    artifacts: Arc<dyn ArtifactService>,
    lease: Arc<dyn SessionLease>,
}

fn in_memory() -> Stores {
    let backend = InMemoryArtifactBackend::new();
    Stores {
        sessions: Arc::new(CoreSessionService::new(
            InMemorySessionBackend::new().with_artifacts(backend.clone()),
        )),
        artifacts: Arc::new(adk_grpc_store::memory_artifacts(backend, &StoreConfig::default())),
        lease: Arc::new(InMemorySessionLease::new()),
    }
}

async fn on_redis(url: &str) -> Stores {
    Stores {
        sessions: Arc::new(
            RedisSessionBackend::connect_service(url, StoreConfig::default())
                .await
                .unwrap(),
        ),
        artifacts: Arc::new(
            adk_grpc_store::redis_artifacts(url, &StoreConfig::default())
                .await
                .unwrap(),
        ),
        lease: Arc::new(RedisSessionLease::connect(url, Default::default()).await.unwrap()),
    }
}

async fn runner(stores: &Stores, model: Arc<Recorder>, compaction: Option<CompactionConfig>) -> Runner {
    let agent = LlmAgentBuilder::new("assistant").model(model).build().unwrap();
    let mut config = RunnerConfig::new(APP, Arc::new(agent), stores.sessions.clone(), stores.lease.clone());
    config.artifact_service = Some(stores.artifacts.clone());
    if let Some(compaction) = compaction {
        config = config.with_compaction(compaction);
    }
    let runner = Runner::new(config).unwrap();
    let created = stores
        .sessions
        .create(CreateRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: Some(SESSION.into()),
            ..Default::default()
        })
        .await;
    assert!(matches!(created, Ok(_) | Err(AdkError::AlreadyExists(..))));
    runner
}

/// Runs one turn to its end; the stored events it streamed.
async fn say(runner: &Runner, text: &str, state_delta: &[(&str, Value)]) -> Vec<Event> {
    let options = RunOptions {
        state_delta: state_delta.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        ..Default::default()
    };
    let mut stream = runner
        .run(USER, SESSION, Content::new("user").with_text(text), options)
        .await
        .unwrap_or_else(|e| panic!("run {text}: {e}"));
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.unwrap_or_else(|e| panic!("run {text}: {e}")));
    }
    events
}

async fn log(sessions: &dyn SessionService, since_compaction: bool) -> Vec<Event> {
    let session = sessions
        .get(GetRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            since_compaction,
            ..Default::default()
        })
        .await
        .unwrap();
    session.events.into_vec()
}

fn compactions(events: &[Event]) -> Vec<&Event> {
    events.iter().filter(|e| e.actions.compaction.is_some()).collect()
}

/// Every `interval` invocations (the `overlap` newest kept verbatim) a summary is
/// appended once the invocation is over; the next turn reads only the window from
/// it and sends the model the summary, then the events after it, then the message.
#[tokio::test]
async fn compaction_summarises_every_interval_and_turns_start_from_the_summary() {
    let stores = in_memory();
    let (model, summarizer) = (Recorder::new("reply"), Recorder::new("summary"));
    let config = CompactionConfig::new(2, summarizer.clone()).with_overlap(1);
    let runner = runner(&stores, model.clone(), Some(config)).await;

    say(&runner, "one", &[]).await;
    say(&runner, "two", &[]).await;
    assert!(
        compactions(&log(stores.sessions.as_ref(), false).await).is_empty(),
        "2 < interval + overlap"
    );
    say(&runner, "three", &[]).await;
    let events = log(stores.sessions.as_ref(), false).await;
    let stored = compactions(&events);
    assert_eq!(stored.len(), 1, "a summary after the third invocation");
    let compaction = stored[0].actions.compaction.as_ref().unwrap();
    assert_eq!(compaction.compacted_content.text().as_deref(), Some("summary 1"));
    assert_eq!(compaction.start_timestamp, events[0].timestamp);
    assert_eq!(
        compaction.end_timestamp, events[3].timestamp,
        "ends with the second invocation's reply"
    );
    let transcript = summarizer.last_texts().join("\n");
    assert!(
        transcript.contains("user: one") && transcript.contains("assistant: reply 2"),
        "{transcript}"
    );
    assert!(!transcript.contains("three"), "the overlap stays out: {transcript}");

    say(&runner, "four", &[]).await;
    assert_eq!(
        model.last_texts(),
        ["summary 1", "three", "reply 3", "four"],
        "the summary, the events after it, the new message"
    );
    let window = log(stores.sessions.as_ref(), true).await;
    assert!(window.len() < log(stores.sessions.as_ref(), false).await.len());
    assert!(
        window.iter().all(|e| e.timestamp >= compaction.end_timestamp),
        "the window starts at the summary's end"
    );

    // The next summary builds on the previous one and replaces it in the history.
    say(&runner, "five", &[]).await;
    say(&runner, "six", &[]).await;
    let events = log(stores.sessions.as_ref(), false).await;
    assert_eq!(compactions(&events).len(), 2);
    assert!(summarizer.last_texts()[0].starts_with("Summary of the conversation before:\nsummary 1"));
    say(&runner, "seven", &[]).await;
    assert_eq!(
        model.last_texts(),
        ["summary 2", "five", "reply 5", "six", "reply 6", "seven"],
        "summary 2 covers turns 1-4; five is the overlap, six is newer"
    );
}

/// A summariser that fails leaves the session as it was and the run succeeds; the
/// next invocation tries again.
#[tokio::test]
async fn a_failed_compaction_changes_nothing_and_is_retried() {
    let stores = in_memory();
    let (model, summarizer) = (Recorder::new("reply"), Recorder::new("summary"));
    let runner = runner(
        &stores,
        model.clone(),
        Some(CompactionConfig::new(1, summarizer.clone())),
    )
    .await;
    summarizer.failing.store(true, Ordering::SeqCst);
    say(&runner, "one", &[]).await;
    assert_eq!(summarizer.requests().len(), 1, "it was asked");
    let events = log(stores.sessions.as_ref(), false).await;
    assert!(compactions(&events).is_empty());
    assert_eq!(events.len(), 2, "the turn is stored whole");
    summarizer.failing.store(false, Ordering::SeqCst);
    say(&runner, "two", &[]).await;
    let events = log(stores.sessions.as_ref(), false).await;
    assert_eq!(compactions(&events).len(), 1, "retried after the next invocation");
}

/// A request over the token budget is compacted first (the summary is stored and
/// streamed); when the summariser fails, the oldest contents are left out (counted in
/// a metric) and the request still fits.
#[tokio::test]
async fn a_request_over_the_token_budget_is_compacted_first_or_trimmed() {
    let budget = 300;
    let stores = in_memory();
    let (model, summarizer) = (Recorder::new("reply"), Recorder::new("summary"));
    let config = CompactionConfig::new(1000, summarizer.clone()).with_token_budget(budget);
    let runner = runner(&stores, model.clone(), Some(config)).await;
    let long = |i: usize| format!("{i} {}", "x".repeat(400));
    say(&runner, &long(1), &[]).await;
    say(&runner, &long(2), &[]).await;
    let streamed = say(&runner, &long(3), &[]).await;
    assert_eq!(
        compactions(&streamed).len(),
        1,
        "compacted before the request, streamed as any event"
    );
    assert_eq!(summarizer.requests().len(), 1);
    for request in model.requests() {
        let tokens: usize = adk_grpc_core::history::estimate_tokens(&request.contents);
        assert!(tokens <= budget, "a request of {tokens} tokens went out");
    }
    assert_eq!(model.last_texts()[0], "summary 1");

    summarizer.failing.store(true, Ordering::SeqCst);
    let before = dropped_metric();
    for i in 4..8 {
        say(&runner, &long(i), &[]).await;
    }
    for request in model.requests() {
        let tokens: usize = adk_grpc_core::history::estimate_tokens(&request.contents);
        assert!(tokens <= budget, "a request of {tokens} tokens went out");
    }
    assert!(dropped_metric() > before, "trimming is counted");
    assert!(
        model.last_texts().last().unwrap().starts_with("7 "),
        "the new message is always sent"
    );
}

fn dropped_metric() -> u64 {
    let text = adk_grpc_telemetry::metrics::encode_text().unwrap();
    text.lines()
        .find(|line| line.starts_with(&format!("adk_runner_history_contents_dropped_total{{app=\"{APP}\"}}")))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

fn left_out_metric() -> u64 {
    let text = adk_grpc_telemetry::metrics::encode_text().unwrap();
    text.lines()
        .find(|line| line.starts_with(&format!("adk_runner_history_left_out_turns_total{{app=\"{APP}\"}}")))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// The log lines written on this thread while the guard lives (a current-thread test).
#[derive(Clone, Default)]
struct LogLines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogLines {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let lines = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || lines.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Appends `event` to the test session, as an earlier run would have.
async fn store(sessions: &dyn SessionService, event: Event) {
    sessions
        .append_event(AppendEventRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            event,
            timestamp_missing: false,
            precondition: None,
        })
        .await
        .unwrap();
}

/// Without compaction a turn reads the log newest-first only as far as the model's
/// context budget allows: the model gets the newest turns and not the older ones,
/// the turn says so (a log line, a metric), and the state is whole. A message
/// answering a function call older than the budget still goes to the agent that
/// made it, and the model sees the call with its answer.
async fn a_turn_reads_history_only_as_far_as_the_budget(stores: Stores) {
    let model = Recorder::new("reply");
    let agent = LlmAgentBuilder::new("assistant")
        .model(model.clone())
        .instruction("Known: {first}")
        .build()
        .unwrap();
    let config = RunnerConfig::new(APP, Arc::new(agent), stores.sessions.clone(), stores.lease.clone())
        .with_context_budget_tokens(200);
    let runner = Runner::new(config).unwrap();
    stores
        .sessions
        .create(CreateRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: Some(SESSION.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut call = Event::new("e-old").with_author("assistant").with_content(
        Content::new("model").with_part(Part::function_call("lookup", json!({}), Some("old-call".into()))),
    );
    call.actions.state_delta = HashMap::from([("first".to_string(), json!("kept"))]);
    store(stores.sessions.as_ref(), call).await;
    // 60 turns of 12 estimated tokens per event: 16 events fit 200 tokens.
    for i in 0..60 {
        let question = Event::new(format!("e-{i}"))
            .with_author("user")
            .with_content(Content::new("user").with_text(format!("question {i:03} about the weather")));
        let answer = Event::new(format!("e-{i}"))
            .with_author("assistant")
            .with_content(Content::new("model").with_text(format!("answer {i:03} about the weathers..")));
        store(stores.sessions.as_ref(), question).await;
        store(stores.sessions.as_ref(), answer).await;
    }

    let logs = LogLines::default();
    let guard = logs.capture();
    let before = left_out_metric();
    let streamed = say(&runner, "what now?", &[]).await;
    drop(guard);
    let texts = model.last_texts();
    assert_eq!(texts.last().map(String::as_str), Some("what now?"));
    assert!(
        texts.iter().any(|t| t == "answer 059 about the weathers.."),
        "the newest turns are sent: {texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.starts_with("question 000")),
        "the oldest are left out: {texts:?}"
    );
    let history: usize = adk_grpc_core::history::estimate_tokens(&model.requests().pop().unwrap().contents);
    assert!(history <= 200 + 20, "history of {history} tokens for a budget of 200");
    assert_eq!(left_out_metric(), before + 1, "the turn is counted");
    let logged = logs.text();
    assert!(
        logged.contains("older events were left out of the turn") && logged.contains("left_out="),
        "{logged}"
    );
    assert_eq!(streamed.len(), 1, "the reply");
    let instruction = model.requests().pop().unwrap().system_instruction;
    assert_eq!(
        instruction.as_deref(),
        Some("Known: kept\n\nYou are an agent. Your internal name is \"assistant\"."),
        "the state is whole, set by an event left out"
    );

    // The client answers the oldest call: it is found, and the model sees it answered.
    let answer = Content::new("user").with_part(Part::function_response(
        adk_grpc_core::FunctionResponseData {
            name: "lookup".into(),
            response: json!({"found": true}),
        },
        Some("old-call".into()),
    ));
    let mut stream = runner
        .run(USER, SESSION, answer, RunOptions::default())
        .await
        .expect("an answer to a call older than the budget is accepted");
    while let Some(event) = stream.next().await {
        event.unwrap();
    }
    let request = model.requests().pop().unwrap();
    let parts: Vec<&Part> = request.contents.iter().flat_map(|c| c.parts.iter()).collect();
    assert!(
        parts
            .iter()
            .any(|p| matches!(&p.kind, adk_grpc_core::PartKind::FunctionCall { id: Some(id), .. } if id == "old-call")),
        "the call is in the request with its answer"
    );
}

#[tokio::test]
async fn a_bounded_turn_in_memory() {
    a_turn_reads_history_only_as_far_as_the_budget(in_memory()).await;
}

#[tokio::test]
async fn a_bounded_turn_on_redis() {
    let redis = RedisServer::start().await;
    a_turn_reads_history_only_as_far_as_the_budget(on_redis(&redis.url()).await).await;
}

#[tokio::test]
async fn a_bounded_turn_on_a_redis_cluster() {
    let cluster = RedisCluster::start(3).await;
    a_turn_reads_history_only_as_far_as_the_budget(on_redis(&cluster.url()).await).await;
}

async fn save_artifact(stores: &Stores, name: &str, text: &str, invocation_id: &str) {
    let saved = stores
        .artifacts
        .save(SaveRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            file_name: name.into(),
            part: Part::text_part(text),
            version: None,
        })
        .await
        .unwrap();
    // What a tool's save leaves in the log: the version in an event of its invocation.
    let mut event = Event::new(invocation_id).with_author("assistant");
    event.actions.artifact_delta.insert(name.into(), saved.version);
    stores
        .sessions
        .append_event(AppendEventRequest {
            timestamp_missing: false,
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            event,
            precondition: None,
        })
        .await
        .unwrap();
}

async fn artifact(stores: &Stores, name: &str) -> Part {
    stores
        .artifacts
        .load(LoadRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            file_name: name.into(),
            version: None,
        })
        .await
        .unwrap()
        .part
}

/// Rewind, on one store: state and artifacts as they were before the invocation,
/// later runs and the model's history without the rewound invocations, the log
/// keeping everything; refused while the session is leased; bad input named.
async fn rewind_undoes_invocations(stores: Stores) {
    let model = Recorder::new("reply");
    let runner = runner(&stores, model.clone(), None).await;
    let first = say(&runner, "one", &[("k", json!(1)), ("user:seen", json!(1))]).await;
    let first_id = first[0].invocation_id.clone();
    save_artifact(&stores, "a.txt", "first", &first_id).await;
    let second = say(&runner, "two", &[("k", json!(2)), ("added", json!(true))]).await;
    let second_id = second[0].invocation_id.clone();
    save_artifact(&stores, "a.txt", "second", &second_id).await;
    save_artifact(&stores, "b.txt", "new", &second_id).await;
    say(&runner, "three", &[("k", json!(3))]).await;
    let logged = log(stores.sessions.as_ref(), false).await.len();

    let rewind = runner.rewind(USER, SESSION, &second_id).await.unwrap();
    assert_eq!(
        rewind.actions.rewind_before_invocation_id.as_deref(),
        Some(second_id.as_str())
    );
    assert_eq!(
        rewind.actions.state_delta,
        HashMap::from([("k".to_string(), json!(1)), ("added".to_string(), Value::Null)])
    );
    let session = stores
        .sessions
        .get(GetRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(session.state.as_map().get("k"), Some(&json!(1)));
    assert_eq!(session.state.as_map().get("added"), Some(&Value::Null));
    assert_eq!(
        session.state.as_map().get("user:seen"),
        Some(&json!(1)),
        "user: state is shared, not rewound"
    );
    assert_eq!(session.events.len(), logged + 1, "the log keeps what happened");
    assert_eq!(artifact(&stores, "a.txt").await.text(), Some("first"));
    let versions: Vec<&String> = {
        let mut names: Vec<&String> = rewind.actions.artifact_delta.keys().collect();
        names.sort();
        names
    };
    assert_eq!(versions, ["a.txt", "b.txt"], "every artifact changed since is restored");
    let tombstone = artifact(&stores, "b.txt").await;
    assert!(adk_grpc_core::history::is_rewind_tombstone(&tombstone), "{tombstone:?}");
    // What agents see: an artifact that did not exist then is absent again.
    let agents_view = ScopedArtifacts::new(stores.artifacts.clone(), APP.into(), USER.into(), SESSION.into());
    let absent = agents_view.load("b.txt").await.unwrap_err();
    assert_eq!(absent.code(), Code::NotFound, "{absent}");
    assert_eq!(agents_view.load("a.txt").await.unwrap().text(), Some("first"));

    say(&runner, "four", &[]).await;
    assert_eq!(
        model.last_texts(),
        ["one", "reply 1", "four"],
        "the model's history skips the rewound turns"
    );

    // The lease rules of Run.
    let key = LeaseKey {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
    };
    let held = stores
        .lease
        .acquire(&key, "e-other", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(held, Acquire::Acquired { interrupted: None });
    let busy = runner.rewind(USER, SESSION, &first_id).await.unwrap_err();
    assert_eq!(busy.code(), Code::Aborted, "{busy}");
    stores.lease.release(&key, "e-other").await.unwrap();

    let unknown = runner.rewind(USER, SESSION, "e-nope").await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown}");
    assert!(unknown.to_string().contains("rewind_before_invocation_id"), "{unknown}");
    let bad = runner.rewind(USER, SESSION, "").await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad}");
    assert!(bad.to_string().contains("rewind_before_invocation_id"), "{bad}");
    let missing = runner.rewind(USER, "no-session", &first_id).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing}");
    assert_eq!(
        log(stores.sessions.as_ref(), false).await.len(),
        logged + 1 + 2,
        "refused rewinds write nothing (only the fourth turn was added)"
    );
}

#[tokio::test]
async fn rewind_in_memory() {
    rewind_undoes_invocations(in_memory()).await;
}

#[tokio::test]
async fn rewind_on_redis() {
    let server = RedisServer::start().await;
    rewind_undoes_invocations(on_redis(&server.url()).await).await;
}

#[tokio::test]
async fn rewind_on_a_redis_cluster() {
    let cluster = RedisCluster::start(3).await;
    rewind_undoes_invocations(on_redis(&cluster.url()).await).await;
}
