//! The runner over the in-memory stores, driven by an agent the test scripts step by
//! step; and the rule every way a run ends must keep: the agent stopped, the
//! session's lease given back (released, not left to expire), the invocation out of
//! the runner's registry, and its outcome counted once.

use super::{RunOptions, Runner, RunnerConfig};
use adk_grpc_core::sync::lock;
use adk_grpc_core::{
    Acquire, AdkError, Agent, Clock, Content, CreateRequest, Event, EventStream, FunctionResponseData, GetRequest,
    InvocationContext, LeaseKey, Part, Renewal, Result, SessionLease, SessionService,
};
use adk_grpc_core::{CoreSessionService, Session};
use adk_grpc_store::{InMemorySessionBackend, InMemorySessionLease};
use adk_grpc_testkit::eventually;
use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::Code;

pub(super) const USER: &str = "u";
pub(super) const SESSION: &str = "s";
pub(super) const AGENT: &str = "scripted";

/// What happened, in order, across the agent and the lease (`agent stopped`,
/// `released <owner>`).
pub(super) type Log = Arc<Mutex<Vec<String>>>;

/// One step of the scripted agent.
pub(super) enum Step {
    /// A complete model turn with this text.
    Say(&'static str),
    /// A partial (streamed) model turn with this text.
    Partial(&'static str),
    /// An event carrying this state delta.
    Set(&'static str, Value),
    /// A model turn whose text is the JSON of these state keys as the agent sees
    /// them when it takes this step.
    Echo(&'static [&'static str]),
    /// The agent fails.
    Fail(AdkError),
}

/// An agent the test plays: it yields one event per step the test sends, waits while
/// the test sends none, and finishes when the test drops its sender. It plays one run.
struct Scripted {
    steps: Mutex<Option<mpsc::UnboundedReceiver<Step>>>,
    log: Log,
}

/// Logs `agent stopped` when the agent's stream is dropped.
struct Stopped(Log);

impl Drop for Stopped {
    fn drop(&mut self) {
        lock(&self.0).push("agent stopped".into());
    }
}

#[async_trait]
impl Agent for Scripted {
    fn name(&self) -> &str {
        AGENT
    }

    fn description(&self) -> &str {
        "plays the test's script"
    }

    fn sub_agents(&self) -> &[Arc<dyn Agent>] {
        &[]
    }

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let mut steps = lock(&self.steps)
            .take()
            .ok_or_else(|| AdkError::Agent("the script plays one run".into()))?;
        let stopped = Stopped(self.log.clone());
        Ok(Box::pin(async_stream::stream! {
            let _stopped = stopped;
            while let Some(step) = steps.recv().await {
                let event = Event::new(ctx.invocation_id()).with_author(AGENT);
                let model = |text: String| Content::new("model").with_text(text);
                yield Ok(match step {
                    Step::Say(text) => event.with_content(model(text.into())),
                    Step::Partial(text) => {
                        let mut event = event.with_content(model(text.into()));
                        event.llm_response.partial = Some(true);
                        event
                    }
                    Step::Set(key, value) => event.with_state_delta(key, value),
                    Step::Echo(keys) => {
                        let seen: serde_json::Map<String, Value> = keys
                            .iter()
                            .map(|key| (key.to_string(), ctx.state().get(key).unwrap_or(Value::Null)))
                            .collect();
                        event.with_content(model(Value::Object(seen).to_string()))
                    }
                    Step::Fail(error) => {
                        yield Err(error);
                        return;
                    }
                });
            }
        }))
    }
}

/// The session lease of the in-memory store, logging each release.
struct LoggedLease {
    inner: InMemorySessionLease,
    log: Log,
}

#[async_trait]
impl SessionLease for LoggedLease {
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire> {
        self.inner.acquire(key, owner, ttl).await
    }
    async fn acquire_in_turn(&self, key: &LeaseKey, owner: &str, ttl: Duration, patience: Duration) -> Result<Acquire> {
        self.inner.acquire_in_turn(key, owner, ttl, patience).await
    }
    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Renewal> {
        self.inner.renew(key, owner, ttl).await
    }
    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        lock(&self.log).push(format!("released {owner}"));
        self.inner.release(key, owner).await
    }
    async fn request_cancel(&self, key: &LeaseKey, owner: &str) -> Result<bool> {
        self.inner.request_cancel(key, owner).await
    }
    fn cancel_requests(&self) -> BoxStream<'static, String> {
        self.inner.cancel_requests()
    }
}

/// A runner of app `app` (an app of its own per test, so the process-wide metrics
/// count its runs alone) over in-memory sessions whose appends its leases fence, on a
/// manual clock; session `s` of user `u` exists.
pub(super) struct Fixture {
    pub(super) app: String,
    pub(super) runner: Runner,
    pub(super) sessions: Arc<dyn SessionService>,
    /// The leases the runner takes, unlogged.
    pub(super) leases: InMemorySessionLease,
    pub(super) clock: Clock,
    pub(super) log: Log,
    script: Mutex<Option<mpsc::UnboundedSender<Step>>>,
}

impl Fixture {
    pub(super) async fn new(app: &str) -> Fixture {
        Self::with(app, |_| {}).await
    }

    /// A fixture whose runner configuration `configure` adjusts first.
    pub(super) async fn with(app: &str, configure: impl FnOnce(&mut RunnerConfig)) -> Fixture {
        let clock = Clock::manual();
        let backend = InMemorySessionBackend::new().with_clock(clock.clone());
        let leases = backend.leases();
        let sessions: Arc<dyn SessionService> = Arc::new(CoreSessionService::new(backend));
        let log = Log::default();
        let (script, steps) = mpsc::unbounded_channel();
        let agent = Arc::new(Scripted {
            steps: Mutex::new(Some(steps)),
            log: log.clone(),
        });
        let lease = Arc::new(LoggedLease {
            inner: leases.clone(),
            log: log.clone(),
        });
        let mut config = RunnerConfig::new(app, agent, sessions.clone(), lease);
        configure(&mut config);
        let runner = Runner::new(config).expect("a valid runner");
        sessions
            .create(CreateRequest {
                app_name: app.into(),
                user_id: USER.into(),
                session_id: Some(SESSION.into()),
                ..Default::default()
            })
            .await
            .expect("create the session");
        Fixture {
            app: app.into(),
            runner,
            sessions,
            leases,
            clock,
            log,
            script: Mutex::new(Some(script)),
        }
    }

    /// The agent's next step (it takes it when the runner asks for its next event).
    pub(super) fn play(&self, step: Step) {
        let script = lock(&self.script);
        let sender = script.as_ref().expect("the script is still open");
        sender.send(step).expect("the agent is listening");
    }

    /// The agent has no more steps: it finishes once it has taken those sent.
    pub(super) fn end_script(&self) {
        lock(&self.script).take();
    }

    pub(super) async fn run(&self, text: &str) -> Result<EventStream> {
        self.runner
            .run(
                USER,
                SESSION,
                Content::new("user").with_text(text),
                RunOptions::default(),
            )
            .await
    }

    pub(super) fn key(&self) -> LeaseKey {
        LeaseKey {
            app_name: self.app.clone(),
            user_id: USER.into(),
            session_id: SESSION.into(),
        }
    }

    /// The whole stored session.
    pub(super) async fn session(&self) -> Session {
        self.sessions
            .get(GetRequest {
                app_name: self.app.clone(),
                user_id: USER.into(),
                session_id: SESSION.into(),
                ..Default::default()
            })
            .await
            .expect("the session")
    }

    pub(super) fn logged(&self) -> Vec<String> {
        lock(&self.log).clone()
    }

    /// Whether the session's lease was given back: free, and not merely expired (a
    /// lease that ran out unreleased would be reported as an interrupted holder).
    async fn lease_given_back(&self) -> std::result::Result<(), String> {
        let probe = "probe";
        match self.leases.acquire(&self.key(), probe, Duration::from_secs(5)).await {
            Ok(Acquire::Acquired { interrupted: None }) => {
                self.leases
                    .release(&self.key(), probe)
                    .await
                    .expect("release the probe");
                Ok(())
            }
            other => Err(format!("the session's lease is not given back: {other:?}")),
        }
    }

    /// How many of this app's invocations ended with `outcome` (OK or a gRPC code name).
    fn finished(&self, outcome: &str) -> u64 {
        let metrics = adk_grpc_telemetry::metrics::encode_text().expect("the metrics");
        let line = format!(
            "adk_runner_invocations_finished_total{{app=\"{}\",outcome=\"{outcome}\"}} ",
            self.app
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .map_or(0, |count| count.parse().expect("a count"))
    }

    /// The run is over and every part of it is undone: the agent stopped, the lease
    /// released at once (`released_at_once`; a dropped stream releases from a task),
    /// no invocation registered, and one invocation counted, with `outcome`.
    async fn assert_cleaned_up(&self, outcome: &str, released_at_once: bool) {
        assert!(
            self.logged().iter().any(|entry| entry == "agent stopped"),
            "the agent still runs: {:?}",
            self.logged()
        );
        if released_at_once {
            self.lease_given_back().await.unwrap();
        } else {
            eventually(Duration::from_secs(10), || self.lease_given_back()).await;
        }
        assert!(
            lock(&self.runner.running).is_empty(),
            "the invocation is still registered as running"
        );
        assert_eq!(self.finished(outcome), 1, "invocations of {} ended {outcome}", self.app);
        let all: u64 = ["OK", "CANCELLED", "ABORTED", "INTERNAL", "INVALID_ARGUMENT"]
            .iter()
            .map(|outcome| self.finished(outcome))
            .sum();
        assert_eq!(all, 1, "the invocation is counted once");
    }
}

/// Every event of a stream, and the error that ended it.
pub(super) async fn drain(mut stream: EventStream) -> (Vec<Event>, Option<AdkError>) {
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => {
                assert!(stream.next().await.is_none(), "the stream ends after its error");
                return (events, Some(error));
            }
        }
    }
    (events, None)
}

#[tokio::test]
async fn a_run_that_finishes_gives_everything_back() {
    let f = Fixture::new("exit_finished").await;
    f.play(Step::Say("hello"));
    f.end_script();
    let (events, error) = drain(f.run("hi").await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events.len(), 1);
    f.assert_cleaned_up("OK", true).await;
}

#[tokio::test]
async fn a_run_whose_agent_fails_gives_everything_back() {
    let f = Fixture::new("exit_failed").await;
    f.play(Step::Say("working on it"));
    f.play(Step::Fail(AdkError::Model("the model broke".into())));
    let (events, error) = drain(f.run("hi").await.unwrap()).await;
    assert_eq!(events.len(), 1);
    let error = error.expect("the run fails");
    assert_eq!(error.code(), Code::Internal, "{error}");
    f.assert_cleaned_up("INTERNAL", true).await;
}

#[tokio::test]
async fn a_cancelled_run_gives_everything_back() {
    let f = Fixture::new("exit_cancelled").await;
    f.play(Step::Say("first"));
    let mut stream = f.run("hi").await.unwrap();
    let first = stream.next().await.unwrap().unwrap();
    // The agent now waits for a step that never comes: only the cancel ends it.
    assert!(f.runner.cancel(USER, SESSION, &first.invocation_id).await.unwrap());
    let (events, error) = drain(stream).await;
    assert!(events.is_empty());
    assert_eq!(error.expect("cancelled").code(), Code::Cancelled);
    f.assert_cleaned_up("CANCELLED", true).await;
}

#[tokio::test]
async fn a_run_whose_client_goes_away_gives_everything_back() {
    let f = Fixture::new("exit_dropped").await;
    f.play(Step::Say("first"));
    let mut stream = f.run("hi").await.unwrap();
    stream.next().await.unwrap().unwrap();
    drop(stream);
    f.assert_cleaned_up("CANCELLED", false).await;
}

#[tokio::test]
async fn a_run_that_fails_to_start_gives_the_session_back() {
    let f = Fixture::new("exit_start_failed").await;
    // Refused only once the lease is taken and the session read: it answers no call.
    let answer = Part::function_response(
        FunctionResponseData {
            name: "lookup".into(),
            response: json!({}),
        },
        Some("call-1".into()),
    );
    let error = f
        .runner
        .run(
            USER,
            SESSION,
            Content::new("user").with_part(answer),
            RunOptions::default(),
        )
        .await
        .err()
        .expect("refused");
    assert_eq!(error.code(), Code::InvalidArgument, "{error}");
    assert!(
        f.logged().iter().any(|entry| entry.starts_with("released e-")),
        "the lease was taken and released: {:?}",
        f.logged()
    );
    f.lease_given_back().await.unwrap();
    assert!(lock(&f.runner.running).is_empty());
    assert_eq!(f.finished("INVALID_ARGUMENT"), 1);
    assert_eq!(f.session().await.events.len(), 0, "nothing was stored");
}

#[tokio::test]
async fn a_run_refused_on_a_busy_session_leaves_the_holder_alone() {
    let f = Fixture::new("exit_busy").await;
    f.leases
        .acquire(&f.key(), "e-other", Duration::from_secs(5))
        .await
        .unwrap();
    let error = f.run("hi").await.err().expect("busy");
    assert_eq!(error.code(), Code::Aborted, "{error}");
    assert_eq!(f.finished("ABORTED"), 1);
    assert!(f.logged().is_empty(), "nothing released: {:?}", f.logged());
    assert_eq!(
        f.leases
            .renew(&f.key(), "e-other", Duration::from_secs(5))
            .await
            .unwrap(),
        Renewal::Held
    );
}

#[tokio::test]
async fn the_agent_stops_before_the_session_is_free_for_the_next_run() {
    for (app, how) in [("order_finished", "finishes"), ("order_cancelled", "is cancelled")] {
        let f = Fixture::new(app).await;
        f.play(Step::Say("hello"));
        let mut stream = f.run("hi").await.unwrap();
        let first = stream.next().await.unwrap().unwrap();
        if how == "finishes" {
            f.end_script();
        } else {
            f.runner.cancel(USER, SESSION, &first.invocation_id).await.unwrap();
        }
        drain(stream).await;
        assert_eq!(
            f.logged(),
            ["agent stopped".to_string(), format!("released {}", first.invocation_id)],
            "when the run {how}"
        );
    }
}
