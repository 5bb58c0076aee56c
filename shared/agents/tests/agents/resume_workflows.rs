//! Workflow agents resumed on another runner after theirs died (`docs/semantics.md`,
//! Runner 27): the sequence, the loop round and the parallel branches go on where
//! they were, and no sub-agent that had finished runs again.

use crate::common::*;
use adk_grpc_agents::{
    ClientTool, LlmAgentBuilder, LoopAgent, OnBusy, ParallelAgent, RunOptions, Runner, RunnerConfig, SequentialAgent,
};
use adk_grpc_core::{
    Agent, Clock, Content, CoreSessionService, CreateRequest, Event, EventStream, GetRequest, Llm, LlmRequest,
    LlmResponse, LlmResponseStream, Part, Result, RunMark, RunMarksRequest, Session, SessionLease, SessionService,
};
use adk_grpc_store::{InMemorySessionBackend, InMemorySessionLease};
use adk_grpc_testkit::eventually;
use async_trait::async_trait;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A model that answers its scripted replies in turn and then never answers (the
/// call a runner is in when it dies), counting the requests it got and keeping the last.
struct Gated {
    replies: Mutex<Vec<LlmResponse>>,
    requests: Mutex<usize>,
    last_request: Mutex<Option<LlmRequest>>,
}

impl Gated {
    fn new(replies: &[&str]) -> Arc<Gated> {
        Self::scripted(
            replies
                .iter()
                .map(|text| LlmResponse {
                    content: Some(Content::new("model").with_text(*text)),
                    ..Default::default()
                })
                .collect(),
        )
    }

    fn scripted(mut replies: Vec<LlmResponse>) -> Arc<Gated> {
        replies.reverse();
        Arc::new(Gated {
            replies: Mutex::new(replies),
            requests: Mutex::new(0),
            last_request: Mutex::new(None),
        })
    }

    /// Asks the user through the client tool `ask_user` (call `ask_1`), then says `then`.
    fn asking(then: &str) -> Arc<Gated> {
        let call = LlmResponse {
            content: Some(Content::new("model").with_part(Part::function_call(
                "ask_user",
                serde_json::json!({"question": "Which colour?"}),
                Some("ask_1".into()),
            ))),
            ..Default::default()
        };
        let reply = LlmResponse {
            content: Some(Content::new("model").with_text(then)),
            ..Default::default()
        };
        Self::scripted(vec![call, reply])
    }

    fn requests(&self) -> usize {
        *self.requests.lock().unwrap()
    }

    /// The texts of the contents of the last request it got, in order.
    fn last_texts(&self) -> Vec<String> {
        let last = self.last_request.lock().unwrap();
        last.iter()
            .flat_map(|request| &request.contents)
            .filter_map(Content::text)
            .collect()
    }
}

#[async_trait]
impl Llm for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    async fn generate_content(&self, request: LlmRequest, _stream: bool) -> Result<LlmResponseStream> {
        *self.requests.lock().unwrap() += 1;
        *self.last_request.lock().unwrap() = Some(request);
        let Some(reply) = self.replies.lock().unwrap().pop() else {
            return Ok(Box::pin(futures::stream::pending()));
        };
        Ok(Box::pin(futures::stream::iter([Ok(reply)])))
    }
}

fn llm(name: &str, model: &Arc<Gated>) -> Arc<dyn Agent> {
    Arc::new(LlmAgentBuilder::new(name).model(model.clone()).build().unwrap())
}

/// Two runners on one store and one lease store whose clock the test moves.
struct Replicas {
    sessions: Arc<dyn SessionService>,
    lease: Arc<InMemorySessionLease>,
    clock: Clock,
}

impl Replicas {
    async fn new() -> Replicas {
        let sessions: Arc<dyn SessionService> = Arc::new(CoreSessionService::new(InMemorySessionBackend::new()));
        let clock = Clock::manual();
        let lease = Arc::new(InMemorySessionLease::new().with_clock(clock.clone()));
        sessions
            .create(CreateRequest {
                app_name: APP.into(),
                user_id: USER.into(),
                session_id: Some(SESSION.into()),
                state: HashMap::new(),
                ttl: None,
            })
            .await
            .unwrap();
        Replicas { sessions, lease, clock }
    }

    fn runner(&self, root: Arc<dyn Agent>) -> Runner {
        self.runner_with(root, |_| {})
    }

    fn runner_with(&self, root: Arc<dyn Agent>, change: impl FnOnce(&mut RunnerConfig)) -> Runner {
        let lease: Arc<dyn SessionLease> = self.lease.clone();
        let mut config = RunnerConfig::new(APP, root, self.sessions.clone(), lease);
        // Long enough that the dead runner's renewals do not matter: the test moves the clock.
        config.lease_ttl = Duration::from_secs(60);
        // An app marked resumable, whose positions the log shows, unless a test says otherwise.
        config.resumability_config.is_resumable = true;
        change(&mut config);
        Runner::new(config).unwrap()
    }

    async fn session(&self) -> Session {
        self.sessions
            .get(GetRequest {
                app_name: APP.into(),
                user_id: USER.into(),
                session_id: SESSION.into(),
                ..Default::default()
            })
            .await
            .unwrap()
    }

    /// Runs `first` until `stuck` holds of the log, then lets it die there (its
    /// stream is left hanging and its lease lapses), resumes the run with `second`
    /// and returns the log once the resumed run ended.
    async fn die_and_resume(&self, first: Runner, second: Runner, stuck: impl Fn(&Session) -> bool) -> Session {
        self.die_and_resume_on(&first, second, Content::new("user").with_text("go"), stuck)
            .await
    }

    /// `text` sent to a runner of `dying`, which dies once `model` was asked `times` times
    /// (its run hangs there), then resumed by a runner of `resuming`: the session after.
    async fn die_once_asked(
        &self,
        dying: Arc<dyn Agent>,
        resuming: Arc<dyn Agent>,
        text: &str,
        model: &Arc<Gated>,
        times: usize,
    ) -> Session {
        let first = self.runner(dying);
        let model = model.clone();
        let message = Content::new("user").with_text(text);
        self.die_and_resume_on(&first, self.runner(resuming), message, move |_| {
            model.requests() == times
        })
        .await
    }

    /// As `die_and_resume`, with `message` as the run's message.
    async fn die_and_resume_on(
        &self,
        first: &Runner,
        second: Runner,
        message: Content,
        stuck: impl Fn(&Session) -> bool,
    ) -> Session {
        assert!(first.is_resumable() && second.is_resumable());
        let started = first.run(USER, SESSION, message, Default::default()).await.unwrap();
        // The dead replica: its run hangs in a model call and is never polled again.
        let dead = tokio::spawn(drain_all(started));
        eventually(Duration::from_secs(10), || async {
            let session = self.session().await;
            stuck(&session)
                .then_some(())
                .ok_or_else(|| format!("not there yet: {:?}", authors(&session)))
        })
        .await;
        self.clock.advance(Duration::from_secs(61));
        let mut claimed = self
            .lease
            .claim_lapsed(&[APP.to_string()], Duration::from_secs(60), 8)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1, "the dead runner's run is claimable");
        let events = second
            .resume(claimed.remove(0))
            .await
            .unwrap()
            .expect("a run left to do");
        let resumed = tokio::time::timeout(Duration::from_secs(10), drain_all(events))
            .await
            .expect("the resumed run ends (no finished agent is waiting on a model that never answers)");
        assert!(resumed.iter().all(|event| event.is_ok()), "{resumed:?}");
        dead.abort();
        self.session().await
    }
}

async fn drain_all(mut events: EventStream) -> Vec<Result<Event>> {
    let mut all = Vec::new();
    while let Some(event) = events.next().await {
        all.push(event);
    }
    all
}

fn authors(session: &Session) -> Vec<String> {
    session.events.iter().map(describe).collect()
}

/// `author:text`, `author:{state}` or `author:end`, for asserting on a log.
fn describe(event: &Event) -> String {
    if event.actions.end_of_agent == Some(true) {
        return format!("{}:end", event.author);
    }
    if let Some(state) = &event.actions.agent_state {
        return format!("{}:{}", event.author, serde_json::Value::Object(state.clone()));
    }
    let text = event.content().and_then(Content::text).unwrap_or_default();
    format!("{}:{text}", event.author)
}

fn text_of(session: &Session, author: &str) -> usize {
    session
        .events
        .iter()
        .filter(|e| e.author == author && e.content().is_some())
        .count()
}

#[tokio::test]
async fn a_sequence_resumes_at_the_step_it_was_in_and_does_not_run_finished_steps_again() {
    let replicas = Replicas::new().await;
    let a = Gated::new(&["from a"]);
    let (b_dead, b) = (Gated::new(&[]), Gated::new(&["from b"]));
    let (c_dead, c) = (Gated::new(&[]), Gated::new(&["from c"]));
    let tree = |b: &Arc<Gated>, c: &Arc<Gated>| -> Arc<dyn Agent> {
        Arc::new(SequentialAgent::new(
            "steps",
            vec![llm("a", &a), llm("b", b), llm("c", c)],
        ))
    };
    let first = replicas.runner(tree(&b_dead, &c_dead));
    let second = replicas.runner(tree(&b, &c));
    let b_called = b_dead.clone();
    let session = replicas
        .die_and_resume(first, second, move |_| b_called.requests() == 1)
        .await;
    assert_eq!(a.requests(), 1, "a had answered: it is not asked again");
    assert_eq!((b.requests(), c.requests(), c_dead.requests()), (1, 1, 0));
    assert_eq!(
        authors(&session),
        [
            "user:go",
            r#"steps:{"current_sub_agent":"a"}"#,
            "a:from a",
            "a:end",
            r#"steps:{"current_sub_agent":"b"}"#,
            "b:from b",
            "b:end",
            r#"steps:{"current_sub_agent":"c"}"#,
            "c:from c",
            "c:end",
            "steps:end",
        ]
    );
}

#[tokio::test]
async fn a_loop_resumes_at_its_round_and_step() {
    let replicas = Replicas::new().await;
    // x answers in every round, whichever runner asks; y dies in the second round.
    let x = Gated::new(&["x0", "x1", "x2"]);
    let (y_dead, y) = (Gated::new(&["y0"]), Gated::new(&["y1", "y2"]));
    let tree = |y: &Arc<Gated>| -> Arc<dyn Agent> {
        Arc::new(LoopAgent::new("rounds", vec![llm("x", &x), llm("y", y)]).max_iterations(3))
    };
    let first = replicas.runner(tree(&y_dead));
    let second = replicas.runner(tree(&y));
    let y_called = y_dead.clone();
    let session = replicas
        .die_and_resume(first, second, move |_| y_called.requests() == 2)
        .await;
    assert_eq!(
        x.requests(),
        3,
        "x runs once per round: not again in the round it had finished"
    );
    assert_eq!(y.requests(), 2, "y goes on in round 2 and runs round 3");
    let log = authors(&session);
    // In the log of an app marked resumable each LLM agent's end follows its reply, as in ADK's.
    assert_eq!(
        log[7..],
        [
            r#"rounds:{"current_sub_agent":"x","times_looped":1}"#,
            "x:x1",
            "x:end",
            r#"rounds:{"current_sub_agent":"y","times_looped":1}"#,
            "y:y1",
            "y:end",
            r#"rounds:{"current_sub_agent":"x","times_looped":2}"#,
            "x:x2",
            "x:end",
            r#"rounds:{"current_sub_agent":"y","times_looped":2}"#,
            "y:y2",
            "y:end",
            "rounds:end",
        ],
        "{log:?}"
    );
}

/// The loop's rounds 2 and 3 as positions kept beside the log give them: each step after
/// the position that starts it, and the loop's end.
const LOOP_FROM_ROUND_2: [&str; 9] = [
    r#"rounds:{"current_sub_agent":"x","times_looped":1}"#,
    "x:x1",
    r#"rounds:{"current_sub_agent":"y","times_looped":1}"#,
    "y:y1",
    r#"rounds:{"current_sub_agent":"x","times_looped":2}"#,
    "x:x2",
    r#"rounds:{"current_sub_agent":"y","times_looped":2}"#,
    "y:y2",
    "rounds:end",
];

/// The same loop in an app not marked resumable (ADK's default): the log is ADK's, with no
/// position in it, and the positions kept beside it (run marks) take the other runner to
/// the same round and step.
#[tokio::test]
async fn a_loop_of_an_app_not_marked_resumable_resumes_from_the_positions_kept_beside_its_log() {
    let replicas = Replicas::new().await;
    let x = Gated::new(&["x0", "x1", "x2"]);
    let (y_dead, y) = (Gated::new(&["y0"]), Gated::new(&["y1", "y2"]));
    let tree = |y: &Arc<Gated>| -> Arc<dyn Agent> {
        Arc::new(LoopAgent::new("rounds", vec![llm("x", &x), llm("y", y)]).max_iterations(3))
    };
    let not_resumable = |config: &mut RunnerConfig| config.resumability_config.is_resumable = false;
    let first = replicas.runner_with(tree(&y_dead), not_resumable);
    let second = replicas.runner_with(tree(&y), not_resumable);
    let y_called = y_dead.clone();
    let session = replicas
        .die_and_resume(first, second, move |_| y_called.requests() == 2)
        .await;
    assert_eq!((x.requests(), y.requests()), (3, 2), "no finished step runs again");
    let log = authors(&session);
    assert_eq!(
        log,
        ["user:go", "x:x0", "y:y0", "x:x1", "y:y1", "x:x2", "y:y2"],
        "ADK's log: no position"
    );
    let marks = replicas
        .sessions
        .run_marks(RunMarksRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
        })
        .await
        .unwrap();
    let merged: Vec<String> = RunMark::merge(session.events.into_vec(), marks)
        .iter()
        .map(describe)
        .collect();
    assert_eq!(
        merged[5..],
        LOOP_FROM_ROUND_2,
        "the positions, each where it was written: {merged:?}"
    );
}

#[tokio::test]
async fn a_parallel_agent_resumes_only_the_branches_that_had_not_finished() {
    let replicas = Replicas::new().await;
    let (p, p_again) = (Gated::new(&["from p"]), Gated::new(&[]));
    let (q_dead, q) = (Gated::new(&[]), Gated::new(&["from q"]));
    let tree = |p: &Arc<Gated>, q: &Arc<Gated>| -> Arc<dyn Agent> {
        Arc::new(ParallelAgent::new("both", vec![llm("p", p), llm("q", q)]))
    };
    let first = replicas.runner(tree(&p, &q_dead));
    let second = replicas.runner(tree(&p_again, &q));
    let q_called = q_dead.clone();
    let session = replicas
        .die_and_resume(first, second, move |session| {
            q_called.requests() == 1 && authors(session).contains(&"p:end".to_string())
        })
        .await;
    assert_eq!(
        (p.requests(), p_again.requests()),
        (1, 0),
        "p had finished: it is not run again"
    );
    assert_eq!(q.requests(), 1);
    assert_eq!((text_of(&session, "p"), text_of(&session, "q")), (1, 1));
    let log = authors(&session);
    assert_eq!(log.last().map(String::as_str), Some("both:end"), "{log:?}");
    let q_end = session
        .events
        .iter()
        .find(|e| e.author == "q" && e.actions.end_of_agent == Some(true));
    assert_eq!(q_end.map(|e| e.branch.as_str()), Some("both.q"), "{log:?}");
}

/// A sequence that finished stores its end, and its run record is gone: nothing claims it again.
#[tokio::test]
async fn a_finished_sequence_leaves_nothing_to_resume() {
    let replicas = Replicas::new().await;
    let a = Gated::new(&["from a"]);
    let runner = replicas.runner(Arc::new(SequentialAgent::new("steps", vec![llm("a", &a)])));
    let run = runner
        .run(USER, SESSION, Content::new("user").with_text("go"), Default::default())
        .await
        .unwrap();
    assert!(drain_all(run).await.iter().all(|e| e.is_ok()));
    replicas.clock.advance(Duration::from_secs(61));
    let claimed = replicas
        .lease
        .claim_lapsed(&[APP.to_string()], Duration::from_secs(60), 8)
        .await
        .unwrap();
    assert!(
        claimed.is_empty(),
        "a finished run leaves no run record: {}",
        claimed.len()
    );
    let session = replicas.session().await;
    assert_eq!(
        authors(&session),
        [
            "user:go",
            r#"steps:{"current_sub_agent":"a"}"#,
            "a:from a",
            "a:end",
            "steps:end"
        ]
    );
}

/// Nested workflows: the loop's next round starts its sequence afresh (the sequence's
/// end in the round before is not taken for its end in this one), and the sequence
/// goes on at its step.
#[tokio::test]
async fn a_sequence_in_a_loop_resumes_at_its_step_in_the_loops_round() {
    let replicas = Replicas::new().await;
    let x = Gated::new(&["x0", "x1"]);
    let (y_dead, y) = (Gated::new(&["y0"]), Gated::new(&["y1"]));
    let tree = |y: &Arc<Gated>| -> Arc<dyn Agent> {
        let pair: Arc<dyn Agent> = Arc::new(SequentialAgent::new("pair", vec![llm("x", &x), llm("y", y)]));
        Arc::new(LoopAgent::new("rounds", vec![pair]).max_iterations(2))
    };
    let first = replicas.runner(tree(&y_dead));
    let second = replicas.runner(tree(&y));
    let y_called = y_dead.clone();
    let session = replicas
        .die_and_resume(first, second, move |_| y_called.requests() == 2)
        .await;
    assert_eq!((x.requests(), y.requests()), (2, 1), "x ran once per round, y went on");
    let log = authors(&session);
    assert_eq!(
        log[log.len() - 7..],
        [
            "x:x1",
            "x:end",
            r#"pair:{"current_sub_agent":"y"}"#,
            "y:y1",
            "y:end",
            "pair:end",
            "rounds:end",
        ],
        "{log:?}"
    );
}

/// An llm agent asking the user through the client tool `ask_user`.
fn asker(model: &Arc<Gated>) -> Arc<dyn Agent> {
    Arc::new(
        LlmAgentBuilder::new("asker")
            .model(model.clone())
            .tool(Arc::new(ClientTool::new("ask_user", "Asks the user a question.")))
            .build()
            .unwrap(),
    )
}

#[tokio::test]
async fn the_answer_to_a_client_tool_in_a_sequence_goes_on_with_the_sequence() {
    let replicas = Replicas::new().await;
    let asking = Gated::asking("blue it is");
    let closer = Gated::new(&["all done"]);
    let runner = replicas.runner(Arc::new(SequentialAgent::new(
        "steps",
        vec![asker(&asking), llm("closer", &closer)],
    )));
    let paused = drain_all(
        runner
            .run(USER, SESSION, Content::new("user").with_text("go"), Default::default())
            .await
            .unwrap(),
    )
    .await;
    let last = paused.last().unwrap().as_ref().unwrap();
    assert_eq!(
        last.long_running_tool_ids,
        ["ask_1"],
        "the sequence paused on the client tool"
    );
    assert_eq!(closer.requests(), 0);

    let answer = function_response("ask_1", "ask_user", serde_json::json!({"colour": "blue"}));
    let answered = drain_all(runner.run(USER, SESSION, answer, Default::default()).await.unwrap()).await;
    assert!(answered.iter().all(|event| event.is_ok()), "{answered:?}");
    assert_eq!((asking.requests(), closer.requests()), (2, 1));
    let session = replicas.session().await;
    assert_eq!(
        authors(&session),
        [
            "user:go",
            r#"steps:{"current_sub_agent":"asker"}"#,
            "asker:",
            "user:",
            "asker:blue it is",
            "asker:end",
            r#"steps:{"current_sub_agent":"closer"}"#,
            "closer:all done",
            "closer:end",
            "steps:end",
        ],
        "the asker went on and the sequence after it, each once"
    );
}

#[tokio::test]
async fn an_answer_that_continues_a_sequence_resumes_on_another_runner_at_its_step() {
    let replicas = Replicas::new().await;
    let asking = Gated::asking("blue it is");
    let (closer_dead, closer) = (Gated::new(&[]), Gated::new(&["all done"]));
    let tree = |closer: &Arc<Gated>| -> Arc<dyn Agent> {
        Arc::new(SequentialAgent::new(
            "steps",
            vec![asker(&asking), llm("closer", closer)],
        ))
    };
    let first = replicas.runner(tree(&closer_dead));
    drain_all(
        first
            .run(USER, SESSION, Content::new("user").with_text("go"), Default::default())
            .await
            .unwrap(),
    )
    .await;
    let answer = function_response("ask_1", "ask_user", serde_json::json!({"colour": "blue"}));
    let called = closer_dead.clone();
    let session = replicas
        .die_and_resume_on(&first, replicas.runner(tree(&closer)), answer, move |_| {
            called.requests() == 1
        })
        .await;
    assert_eq!(asking.requests(), 2, "the asker had answered: it is not asked again");
    assert_eq!(closer.requests(), 1);
    assert_eq!(
        authors(&session)[3..],
        [
            "user:",
            "asker:blue it is",
            "asker:end",
            r#"steps:{"current_sub_agent":"closer"}"#,
            "closer:all done",
            "closer:end",
            "steps:end",
        ]
    );
}

/// In an app not marked resumable, ADK 2.13 runs only the agent that made the call a
/// client answers (its older runner path): the sequence does not go on, on the runner that
/// took the answer nor on one that resumes its Run.
#[tokio::test]
async fn in_an_app_not_marked_resumable_the_asking_agent_answers_alone_on_any_runner() {
    let replicas = Replicas::new().await;
    let not_resumable = |config: &mut RunnerConfig| config.resumability_config.is_resumable = false;
    let tree = |asking: &Arc<Gated>, closer: &Arc<Gated>| -> Arc<dyn Agent> {
        Arc::new(SequentialAgent::new(
            "steps",
            vec![asker(asking), llm("closer", closer)],
        ))
    };
    let answer = || function_response("ask_1", "ask_user", serde_json::json!({"colour": "blue"}));
    let go = || Content::new("user").with_text("go");

    let (asking, closer) = (Gated::asking("blue it is"), Gated::new(&["all done"]));
    let runner = replicas.runner_with(tree(&asking, &closer), not_resumable);
    drain_all(runner.run(USER, SESSION, go(), Default::default()).await.unwrap()).await;
    let answered = drain_all(runner.run(USER, SESSION, answer(), Default::default()).await.unwrap()).await;
    assert!(answered.iter().all(|event| event.is_ok()), "{answered:?}");
    assert_eq!((asking.requests(), closer.requests()), (2, 0), "the closer is not run");
    assert_eq!(
        authors(&replicas.session().await),
        ["user:go", "asker:", "user:", "asker:blue it is"]
    );

    // The asker's model hangs on the answer's Run; the replica that resumes it runs the
    // asker alone too.
    let asking_dead = Gated::scripted(vec![LlmResponse {
        content: Some(Content::new("model").with_part(Part::function_call(
            "ask_user",
            serde_json::json!({"question": "Which size?"}),
            Some("ask_1".into()),
        ))),
        ..Default::default()
    }]);
    let (asking, closer) = (Gated::new(&["size L it is"]), Gated::new(&["all done"]));
    let first = replicas.runner_with(tree(&asking_dead, &closer), not_resumable);
    drain_all(first.run(USER, SESSION, go(), Default::default()).await.unwrap()).await;
    let called = asking_dead.clone();
    let second = replicas.runner_with(tree(&asking, &closer), not_resumable);
    let session = replicas
        .die_and_resume_on(&first, second, answer(), move |_| called.requests() == 2)
        .await;
    assert_eq!((asking.requests(), closer.requests()), (1, 0), "the closer is not run");
    assert_eq!(authors(&session).last().map(String::as_str), Some("asker:size L it is"));
}

/// A model reply calling `name` with call id `id`.
fn call(name: &str, id: &str) -> LlmResponse {
    LlmResponse {
        content: Some(Content::new("model").with_part(Part::function_call(
            name,
            serde_json::json!({"request": "the note"}),
            Some(id.into()),
        ))),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_single_turn_agent_resumed_mid_call_answers_its_callers_call_which_goes_on() {
    let replicas = Replicas::new().await;
    let lookup = || -> Arc<dyn adk_grpc_core::Tool> {
        Arc::new(adk_grpc_agents::FunctionTool::new(
            "lookup",
            "Looks up.",
            |_ctx, _args| async { Ok(serde_json::json!({"found": "a cat"})) },
        ))
    };
    let tree = |host: &Arc<Gated>, summ: &Arc<Gated>| -> Arc<dyn Agent> {
        let summ = LlmAgentBuilder::new("summ")
            .mode(adk_grpc_core::AgentMode::SingleTurn)
            .model(summ.clone())
            .tool(lookup())
            .build()
            .unwrap();
        Arc::new(
            LlmAgentBuilder::new("host")
                .model(host.clone())
                .sub_agents([Arc::new(summ) as Arc<dyn Agent>])
                .build()
                .unwrap(),
        )
    };
    // The dead runner: the host calls summ, summ looks up, then its model never answers.
    let (host_dead, summ_dead) = (
        Gated::scripted(vec![call("summ", "k1")]),
        Gated::scripted(vec![call("lookup", "l1")]),
    );
    let (host, summ) = (Gated::new(&["Done: a cat."]), Gated::new(&["A cat."]));
    let first = replicas.runner(tree(&host_dead, &summ_dead));
    let second = replicas.runner(tree(&host, &summ));
    let summ_called = summ_dead.clone();
    let session = replicas
        .die_and_resume(first, second, move |_| summ_called.requests() == 2)
        .await;
    // The run resumed with summ, on its branch, through the host: summ answered the
    // host's call and the host went on; no model call was made twice.
    assert_eq!(
        authors(&session),
        [
            "user:go",
            "host:",
            "summ:",
            "summ:",
            "summ:A cat.",
            "summ:end",
            "host:",
            "host:Done: a cat.",
            "host:end"
        ]
    );
    let branches: Vec<&str> = session.events.iter().map(|e| e.branch.as_str()).collect();
    assert_eq!(
        branches,
        ["", "", "summ@k1", "summ@k1", "summ@k1", "summ@k1", "", "", ""]
    );
    assert_eq!((host.requests(), summ.requests()), (1, 1));
}

/// Two steps of a sequence ask the user through client tools whose calls have the same id
/// (models repeat ids): each answer goes on from the pause it answers, and the sequence ends.
#[tokio::test]
async fn answers_to_two_pauses_with_one_call_id_each_go_on_from_their_own_pause() {
    let replicas = Replicas::new().await;
    let (first, second) = (Gated::asking("noted one"), Gated::asking("noted two"));
    let closer = Gated::new(&["all done"]);
    let asker_named = |name: &str, model: &Arc<Gated>| -> Arc<dyn Agent> {
        Arc::new(
            LlmAgentBuilder::new(name)
                .model(model.clone())
                .tool(Arc::new(ClientTool::new("ask_user", "Asks the user a question.")))
                .build()
                .unwrap(),
        )
    };
    let runner = replicas.runner(Arc::new(SequentialAgent::new(
        "steps",
        vec![
            asker_named("one", &first),
            asker_named("two", &second),
            llm("closer", &closer),
        ],
    )));
    let go = Content::new("user").with_text("go");
    drain_all(runner.run(USER, SESSION, go, Default::default()).await.unwrap()).await;
    for _ in 0..2 {
        let answer = function_response("ask_1", "ask_user", serde_json::json!({"colour": "blue"}));
        let answered = drain_all(runner.run(USER, SESSION, answer, Default::default()).await.unwrap()).await;
        assert!(answered.iter().all(|event| event.is_ok()), "{answered:?}");
    }
    assert_eq!((first.requests(), second.requests(), closer.requests()), (2, 2, 1));
    let texts: Vec<String> = authors(&replicas.session().await)
        .into_iter()
        .filter(|line| !line.ends_with(':') && !line.contains('{'))
        .collect();
    assert_eq!(
        texts,
        [
            "user:go",
            "one:noted one",
            "one:end",
            "two:noted two",
            "two:end",
            "closer:all done",
            "closer:end",
            "steps:end"
        ]
    );
}

/// A run resumed on another replica is added to long-term memory when it finishes, as a
/// run that never moved is (`RunnerConfig::add_to_memory`).
#[tokio::test]
async fn a_resumed_run_is_added_to_memory_when_it_finishes() {
    let replicas = Replicas::new().await;
    let memory = adk_grpc_store::Stores::open("memory://", adk_grpc_store::StoreConfig::default())
        .unwrap()
        .memory()
        .await
        .unwrap();
    let remembering = |model: &Arc<Gated>| {
        let memory = memory.clone();
        replicas.runner_with(llm("helper", model), move |config| {
            config.memory_service = Some(memory);
            config.add_to_memory = Some(adk_grpc_agents::AddToMemory::Invocation);
        })
    };
    let (dead, alive) = (Gated::new(&[]), Gated::new(&["penguins swim"]));
    let (first, second) = (remembering(&dead), remembering(&alive));
    let session = replicas
        .die_and_resume_on(&first, second, Content::new("user").with_text("penguins?"), |session| {
            dead.requests() == 1 && !session.events.is_empty()
        })
        .await;
    assert_eq!(
        authors(&session),
        ["user:penguins?", "helper:penguins swim", "helper:end"]
    );
    let found = memory
        .search(adk_grpc_core::memory::SearchMemoryRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            query: "penguins".into(),
            limit: 0,
        })
        .await
        .unwrap();
    let texts: Vec<String> = found.memories.iter().map(|m| m.text()).collect();
    assert!(
        texts.iter().any(|text| text.contains("penguins swim")),
        "the resumed run's reply is in memory: {texts:?}"
    );
}

/// As ADK's: an LLM agent whose turn called a long-running tool, even one that answered at
/// once and let the model go on, stores no end (`should_pause_invocation` marks the turn
/// paused), and the sequence above it pauses there: its next step waits for the next
/// message, and the sequence stores no end either.
#[tokio::test]
async fn a_sequence_pauses_after_an_llm_agent_that_called_a_long_running_tool() {
    let replicas = Replicas::new().await;
    let call = LlmResponse {
        content: Some(Content::new("model").with_part(Part::function_call(
            "approve",
            serde_json::json!({"amount": 900}),
            Some("c1".into()),
        ))),
        ..Default::default()
    };
    let reply = LlmResponse {
        content: Some(Content::new("model").with_text("asked")),
        ..Default::default()
    };
    let approve = adk_grpc_agents::FunctionTool::new("approve", "Asks a manager.", |_ctx, _args| async {
        Ok(serde_json::json!({"status": "pending"}))
    })
    .long_running();
    let expenses: Arc<dyn Agent> = Arc::new(
        LlmAgentBuilder::new("expenses")
            .model(Gated::scripted(vec![call, reply]))
            .tool(Arc::new(approve))
            .build()
            .unwrap(),
    );
    let closer = Gated::new(&["done"]);
    let runner = replicas.runner(Arc::new(SequentialAgent::new(
        "steps",
        vec![expenses, llm("closer", &closer)],
    )));
    let events = drain_all(
        runner
            .run(USER, SESSION, Content::new("user").with_text("go"), Default::default())
            .await
            .unwrap(),
    )
    .await;
    assert!(events.iter().all(|event| event.is_ok()), "{events:?}");
    assert_eq!(closer.requests(), 0, "the sequence paused before its next step");
    assert_eq!(
        authors(&replicas.session().await),
        [
            "user:go",
            r#"steps:{"current_sub_agent":"expenses"}"#,
            "expenses:",
            "expenses:",
            "expenses:asked",
        ]
    );
}

/// As ADK 2.13 resumes an app marked resumable: the client's answer to a long-running call
/// the agent had replied after (its interim result read) goes on with that agent, which the
/// model answers again, then with the sequence's next step.
#[tokio::test]
async fn an_answer_to_a_long_running_call_replied_after_goes_on_with_its_agent_then_the_sequence() {
    let replicas = Replicas::new().await;
    let call = LlmResponse {
        content: Some(Content::new("model").with_part(Part::function_call(
            "approve",
            serde_json::json!({"amount": 900}),
            Some("c1".into()),
        ))),
        ..Default::default()
    };
    let text = |text: &str| LlmResponse {
        content: Some(Content::new("model").with_text(text)),
        ..Default::default()
    };
    let approve = adk_grpc_agents::FunctionTool::new("approve", "Asks a manager.", |_ctx, _args| async {
        Ok(serde_json::json!({"status": "pending"}))
    })
    .long_running();
    let expenses_model = Gated::scripted(vec![call, text("asked"), text("approved")]);
    let expenses: Arc<dyn Agent> = Arc::new(
        LlmAgentBuilder::new("expenses")
            .model(expenses_model.clone())
            .tool(Arc::new(approve))
            .build()
            .unwrap(),
    );
    let closer = Gated::new(&["done"]);
    let runner = replicas.runner(Arc::new(SequentialAgent::new(
        "steps",
        vec![expenses, llm("closer", &closer)],
    )));
    drain_all(
        runner
            .run(USER, SESSION, Content::new("user").with_text("go"), Default::default())
            .await
            .unwrap(),
    )
    .await;
    let answer = function_response("c1", "approve", serde_json::json!({"status": "approved"}));
    let events = drain_all(runner.run(USER, SESSION, answer, Default::default()).await.unwrap()).await;
    assert!(events.iter().all(|event| event.is_ok()), "{events:?}");
    assert_eq!((expenses_model.requests(), closer.requests()), (3, 1));
    assert_eq!(
        authors(&replicas.session().await)[5..],
        [
            "user:",
            "expenses:approved",
            "expenses:end",
            r#"steps:{"current_sub_agent":"closer"}"#,
            "closer:done",
            "closer:end",
            "steps:end",
        ]
    );
}

/// In an app marked resumable an agent's end is stored at its transfer, before the agent
/// it hands the turn to runs (as ADK 2 stores it): a run whose runner died there, its log
/// ending with that end, goes on with the target, and the transferring agent's model is
/// not asked again.
#[tokio::test]
async fn a_run_that_died_after_a_transfer_goes_on_with_the_target() {
    let replicas = Replicas::new().await;
    let transfer = LlmResponse {
        content: Some(Content::new("model").with_part(Part::function_call(
            "transfer_to_agent",
            serde_json::json!({"agent_name": "billing"}),
            Some("t1".into()),
        ))),
        ..Default::default()
    };
    let front = Gated::scripted(vec![transfer]);
    let tree = |billing: &Arc<Gated>| -> Arc<dyn Agent> {
        Arc::new(
            LlmAgentBuilder::new("front")
                .model(front.clone())
                .sub_agents([llm("billing", billing)])
                .build()
                .unwrap(),
        )
    };
    let (billing_dead, billing) = (Gated::new(&[]), Gated::new(&["A hold."]));
    let first = replicas.runner(tree(&billing_dead));
    let second = replicas.runner(tree(&billing));
    let billing_called = billing_dead.clone();
    let session = replicas
        .die_and_resume(first, second, move |_| billing_called.requests() == 1)
        .await;
    assert_eq!(
        authors(&session),
        [
            "user:go",
            "front:",
            "front:",
            "front:end",
            "billing:A hold.",
            "billing:end"
        ]
    );
    assert_eq!((front.requests(), billing.requests()), (1, 1));
}

/// A host delegating to task agent `intake`.
fn host_with_task(host: &Arc<Gated>, intake: &Arc<Gated>) -> Arc<dyn Agent> {
    let intake = LlmAgentBuilder::new("intake")
        .mode(adk_grpc_core::AgentMode::Task)
        .model(intake.clone())
        .build()
        .unwrap();
    Arc::new(
        LlmAgentBuilder::new("host")
            .model(host.clone())
            .sub_agents([Arc::new(intake) as Arc<dyn Agent>])
            .build()
            .unwrap(),
    )
}

/// A task opened on `running`, and the task's later turn ("Four") started there, which
/// hangs in intake's model call (its script is spent): the task's invocation id, which
/// the later turn goes on with, and that Run.
async fn task_with_hanging_later_turn(replicas: &Replicas, running: &Runner) -> (String, adk_grpc_agents::StartedRun) {
    let task_invocation = open_task(replicas, running).await;
    let later = running
        .start_run(
            USER,
            SESSION,
            Content::new("user").with_text("Four"),
            Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(later.user_event.invocation_id, task_invocation);
    (task_invocation, later)
}

/// Turn 1 on `runner`: the host hands the booking to intake, which asks the user and
/// waits. The task's invocation id.
async fn open_task(replicas: &Replicas, runner: &Runner) -> String {
    let started = runner
        .run(
            USER,
            SESSION,
            Content::new("user").with_text("Book"),
            Default::default(),
        )
        .await
        .unwrap();
    assert!(drain_all(started).await.iter().all(|event| event.is_ok()));
    replicas.session().await.events.as_slice()[0].invocation_id.clone()
}

/// A task's later turn goes on with the task's invocation (ADK 2's borrowed id): when
/// its runner dies mid-turn, the run is resumed under that invocation, from the turn's
/// own message, and finishes the task and its caller's turn.
#[tokio::test]
async fn a_tasks_later_turn_resumed_after_its_runner_died_goes_on_in_the_tasks_invocation() {
    let replicas = Replicas::new().await;
    // Turn 1: the host hands the booking to intake, which asks the user and waits.
    let (host_1, intake_1) = (Gated::scripted(vec![call("intake", "t1")]), Gated::new(&["How many?"]));
    let task_invocation = open_task(&replicas, &replicas.runner(host_with_task(&host_1, &intake_1))).await;

    // Turn 2: the user's answer joins the task; its runner dies in intake's model call.
    let (host_dead, intake_dead) = (Gated::new(&[]), Gated::new(&[]));
    let finish = LlmResponse {
        content: Some(Content::new("model").with_part(Part::function_call(
            "finish_task",
            serde_json::json!({"result": "four guests"}),
            Some("f1".into()),
        ))),
        ..Default::default()
    };
    let (host, intake) = (Gated::new(&["Booked."]), Gated::scripted(vec![finish]));
    let session = replicas
        .die_once_asked(
            host_with_task(&host_dead, &intake_dead),
            host_with_task(&host, &intake),
            "Four",
            &intake_dead,
            1,
        )
        .await;

    let events = session.events.as_slice();
    let answer = events
        .iter()
        .position(|e| e.author == "user" && e.content().and_then(Content::text).as_deref() == Some("Four"))
        .expect("the user's answer is stored");
    assert_eq!(
        (events[answer].branch.as_str(), events[answer].isolation_scope.as_str()),
        ("", "t1"),
        "on no branch, in the task's scope"
    );
    assert!(
        events[answer..].iter().all(|e| e.invocation_id == task_invocation),
        "the turn, resumed too, goes on in the task's invocation: {:?}",
        events.iter().map(describe).collect::<Vec<_>>()
    );
    let done = events
        .iter()
        .find(|e| e.output.is_some())
        .expect("finish_task's response carries the task's output");
    assert_eq!(
        (done.author.as_str(), done.isolation_scope.as_str(), done.output.clone()),
        ("intake", "t1", Some(serde_json::json!({"result": "four guests"})))
    );
    let last = events.iter().rev().find(|e| e.content().is_some()).unwrap();
    assert_eq!(
        (last.author.as_str(), last.content().and_then(Content::text)),
        ("host", Some("Booked.".into()))
    );
    // Nothing asked twice: intake's model once on each runner, the host's once after.
    assert_eq!((intake.requests(), host.requests(), host_dead.requests()), (1, 1, 0));
}

/// A client cancels a task's later turn by the invocation id its stored message shows
/// (the task's), from any replica: the lease is held under `<invocation id>@<run>`.
#[tokio::test]
async fn a_tasks_later_turn_is_cancelled_by_the_tasks_invocation_id_from_another_replica() {
    let replicas = Replicas::new().await;
    let (host, intake) = (Gated::scripted(vec![call("intake", "t1")]), Gated::new(&["How many?"]));
    let running = replicas.runner(host_with_task(&host, &intake));
    let (task_invocation, later) = task_with_hanging_later_turn(&replicas, &running).await;
    let other = replicas.runner(host_with_task(&host, &intake));
    assert!(
        other.cancel(USER, SESSION, &task_invocation).await.unwrap(),
        "the running turn is found by the task's invocation id"
    );
    let ended = tokio::time::timeout(Duration::from_secs(10), drain_all(later.events))
        .await
        .expect("the cancelled turn ends");
    assert!(
        matches!(ended.last(), Some(Err(adk_grpc_core::AdkError::Cancelled(_)))),
        "{ended:?}"
    );
    // Its first turn's invocation is not running any more: nothing else to cancel.
    assert!(!other.cancel(USER, SESSION, &task_invocation).await.unwrap());
}

/// Run options that roll back whatever runs on the session (`on_busy: rollback`).
fn rolling_back() -> RunOptions {
    RunOptions {
        on_busy: Some(OnBusy::Rollback),
        ..Default::default()
    }
}

/// The texts of the messages that survive every rewind, `author:text`.
fn live_messages(session: &Session) -> Vec<String> {
    adk_grpc_core::history::apply_rewinds(session.events.as_slice())
        .iter()
        .filter(|event| event.content().and_then(Content::text).is_some())
        .map(describe)
        .collect()
}

/// A Run of invocation `displaced`, once it hangs in a model call (`in_model_call`; its
/// stream read as a client reads it, which drives it and lets it hear the stop), rolled
/// back by a Run `other` starts with `message` and `on_busy: rollback`: the hanging Run
/// ends CANCELLED, and the log holds the rewind before `displaced` between the two Runs'
/// messages. The new Run, started.
async fn roll_back_while_hanging(
    replicas: &Replicas,
    hanging: adk_grpc_agents::StartedRun,
    displaced: &str,
    in_model_call: impl Fn() -> bool,
    other: &Runner,
    message: &str,
) -> adk_grpc_agents::StartedRun {
    let hanging_user = hanging.user_event.clone();
    let reading = tokio::spawn(drain_all(hanging.events));
    eventually(Duration::from_secs(10), || async {
        in_model_call()
            .then_some(())
            .ok_or_else(|| "the Run to roll back is not in its model call yet".to_string())
    })
    .await;
    let replacing = tokio::time::timeout(
        Duration::from_secs(10),
        other.start_run(USER, SESSION, Content::new("user").with_text(message), rolling_back()),
    )
    .await
    .expect("the rollback takes the session once the hanging Run stopped")
    .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), reading)
        .await
        .expect("the rolled-back Run ends")
        .unwrap();
    assert!(
        matches!(ended.last(), Some(Err(adk_grpc_core::AdkError::Cancelled(_)))),
        "{ended:?}"
    );
    let session = replicas.session().await;
    let rewind = session
        .events
        .iter()
        .find(|event| event.actions.rewind_before_invocation_id.as_deref() == Some(displaced))
        .expect("a rewind before the displaced invocation");
    assert!(
        hanging_user.sequence < rewind.sequence && rewind.sequence < replacing.user_event.sequence,
        "the rewind comes between the two Runs' messages: {:?}",
        authors(&session)
    );
    replacing
}

/// `on_busy: rollback` of a task's later turn from another replica (its lease held under
/// `<task invocation>@<run>`) undoes the task's whole invocation, first turn included, as
/// ADK's rewind before an invocation does: the new message, which joined the task when it
/// was read, meets no task once the rollback is stored, and the root answers it as if
/// the task had never been opened.
#[tokio::test]
async fn rollback_of_a_tasks_later_turn_undoes_the_tasks_whole_invocation() {
    let replicas = Replicas::new().await;
    let (host, intake) = (Gated::scripted(vec![call("intake", "t1")]), Gated::new(&["How many?"]));
    let running = replicas.runner(host_with_task(&host, &intake));
    let (task_invocation, later) = task_with_hanging_later_turn(&replicas, &running).await;
    let (other_host, other_intake) = (Gated::new(&["Hello! What can I do?"]), Gated::new(&[]));
    let other = replicas.runner(host_with_task(&other_host, &other_intake));
    let asked = || intake.requests() == 2;
    let replacing = roll_back_while_hanging(&replicas, later, &task_invocation, asked, &other, "Hi").await;
    // Chosen before the lease was taken (it names the lease's owner), the Run keeps the
    // id of the task it joined then (Runner 25b); it is stored in no task's scope.
    assert_eq!(
        (
            replacing.user_event.invocation_id.as_str(),
            replacing.user_event.branch.as_str(),
            replacing.user_event.isolation_scope.as_str()
        ),
        (task_invocation.as_str(), "", "")
    );
    let replaced = tokio::time::timeout(Duration::from_secs(10), drain_all(replacing.events))
        .await
        .expect("the new Run ends");
    assert!(replaced.iter().all(|event| event.is_ok()), "{replaced:?}");

    let session = replicas.session().await;
    assert_eq!(
        live_messages(&session),
        ["user:Hi", "host:Hello! What can I do?"],
        "the task's first turn and its later one are undone"
    );
    assert_eq!(
        other_host.last_texts(),
        ["Hi"],
        "the host's model sees none of the task's invocation"
    );
    assert_eq!(other_intake.requests(), 0, "no task is open any more");
    assert_eq!(
        text_of(&session, "intake"),
        1,
        "the log keeps what was said: {:?}",
        authors(&session)
    );
}

/// `on_busy: rollback` of a client's answer to a long-running call (a Run that goes on
/// with the call's invocation, its lease held under `<invocation>@<run>`) undoes that
/// whole invocation, the call's own turn included, as ADK's rewind before it does.
#[tokio::test]
async fn rollback_of_a_clients_answer_undoes_the_whole_invocation_of_its_call() {
    let replicas = Replicas::new().await;
    // Turn 1: the asker calls the client tool and the Run pauses on it.
    let asking = Gated::scripted(vec![call("ask_user", "ask_1")]);
    let running = replicas.runner(asker(&asking));
    let paused = drain_all(
        running
            .run(USER, SESSION, Content::new("user").with_text("go"), Default::default())
            .await
            .unwrap(),
    )
    .await;
    let call_event = paused.last().unwrap().as_ref().unwrap();
    assert_eq!(call_event.long_running_tool_ids, ["ask_1"]);
    let call_invocation = call_event.invocation_id.clone();

    // The client's answer goes on with the call's invocation, and hangs in the asker's
    // model call (its script is spent).
    let answer = function_response("ask_1", "ask_user", serde_json::json!({"colour": "blue"}));
    let answering = running
        .start_run(USER, SESSION, answer, Default::default())
        .await
        .unwrap();
    assert_eq!(answering.user_event.invocation_id, call_invocation);
    let other_asking = Gated::new(&["Starting over."]);
    let other = replicas.runner(asker(&other_asking));
    let asked = || asking.requests() == 2;
    let replacing = roll_back_while_hanging(&replicas, answering, &call_invocation, asked, &other, "Start over").await;
    assert_ne!(
        replacing.user_event.invocation_id, call_invocation,
        "a message answering no call starts an invocation of its own"
    );
    let replaced = tokio::time::timeout(Duration::from_secs(10), drain_all(replacing.events))
        .await
        .expect("the new Run ends");
    assert!(replaced.iter().all(|event| event.is_ok()), "{replaced:?}");

    let session = replicas.session().await;
    assert_eq!(
        live_messages(&session),
        ["user:Start over", "asker:Starting over."],
        "the call's turn and the answer's are undone"
    );
    assert_eq!(other_asking.last_texts(), ["Start over"]);
    assert!(
        authors(&session).starts_with(&["user:go".to_string(), "asker:".to_string(), "user:".to_string()]),
        "the log keeps what was said: {:?}",
        authors(&session)
    );
}

/// A task agent's transfer to its caller runs the caller again (ADK 2.13's node re-run,
/// docs/semantics.md Runner 25b): a run whose runner died after the hand-back, in the
/// task's new run, goes on there: the caller runs again on `host@2` and the task agent on
/// `host@2.intake@t1`, and the model that handed back is not asked again.
#[tokio::test]
async fn a_run_that_died_after_a_tasks_hand_back_goes_on_with_the_callers_new_run() {
    let replicas = Replicas::new().await;
    let (host_1, intake_1) = (Gated::scripted(vec![call("intake", "t1")]), Gated::new(&["How many?"]));
    let task_invocation = open_task(&replicas, &replicas.runner(host_with_task(&host_1, &intake_1))).await;

    // Turn 2: intake hands the turn back; its runner dies in the task's new run's model call.
    let hand_back = LlmResponse {
        content: Some(Content::new("model").with_part(Part::function_call(
            "transfer_to_agent",
            serde_json::json!({"agent_name": "host"}),
            Some("h1".into()),
        ))),
        ..Default::default()
    };
    let (host_dead, intake_dead) = (Gated::new(&[]), Gated::scripted(vec![hand_back]));
    let (host, intake) = (Gated::new(&[]), Gated::new(&["Only bookings here. How many?"]));
    let session = replicas
        .die_once_asked(
            host_with_task(&host_dead, &intake_dead),
            host_with_task(&host, &intake),
            "Hours?",
            &intake_dead,
            2,
        )
        .await;

    let events = session.events.as_slice();
    let handed_back = events
        .iter()
        .find(|e| e.actions.transfer_to_agent.as_deref() == Some("host"))
        .expect("the hand-back is stored");
    assert_eq!(handed_back.branch, "intake@t1");
    let asked_again = events
        .iter()
        .find(|e| e.content().and_then(Content::text).as_deref() == Some("Only bookings here. How many?"))
        .expect("the task's new run asks the user");
    assert_eq!(
        (
            asked_again.author.as_str(),
            asked_again.branch.as_str(),
            asked_again.isolation_scope.as_str(),
            asked_again.invocation_id.as_str()
        ),
        ("intake", "host@2.intake@t1", "t1", task_invocation.as_str())
    );
    assert_eq!(
        (
            intake_dead.requests(),
            intake.requests(),
            host.requests(),
            host_dead.requests()
        ),
        (2, 1, 0, 0),
        "the hand-back's model is not asked again; the caller's run takes the call up without its model"
    );
}

/// A run that died in the model call of the chat peer a task agent transferred to (the
/// peer runs in the task's place, as ADK 2.13 runs it) goes on through the task's caller:
/// the peer runs on `hours@1` in the task's scope, the call is answered `{"output": null}`
/// and the caller goes on, all in the task's invocation, the task's model not asked again.
#[tokio::test]
async fn a_run_that_died_in_a_tasks_peer_goes_on_with_the_peer_then_the_caller() {
    let tree = |host: &Arc<Gated>, intake: &Arc<Gated>, hours: &Arc<Gated>| -> Arc<dyn Agent> {
        let intake = LlmAgentBuilder::new("intake")
            .mode(adk_grpc_core::AgentMode::Task)
            .model(intake.clone())
            .build()
            .unwrap();
        let hours = LlmAgentBuilder::new("hours").model(hours.clone()).build().unwrap();
        Arc::new(
            LlmAgentBuilder::new("host")
                .model(host.clone())
                .sub_agents([Arc::new(intake) as Arc<dyn Agent>, Arc::new(hours)])
                .build()
                .unwrap(),
        )
    };
    let replicas = Replicas::new().await;
    let (host_1, intake_1, hours_1) = (
        Gated::scripted(vec![call("intake", "t1")]),
        Gated::new(&["How many?"]),
        Gated::new(&[]),
    );
    let task_invocation = open_task(&replicas, &replicas.runner(tree(&host_1, &intake_1, &hours_1))).await;

    // Turn 2: intake transfers to its peer; its runner dies in the peer's model call.
    let to_the_peer = LlmResponse {
        content: Some(Content::new("model").with_part(Part::function_call(
            "transfer_to_agent",
            serde_json::json!({"agent_name": "hours"}),
            Some("p1".into()),
        ))),
        ..Default::default()
    };
    let (host_dead, intake_dead, hours_dead) = (Gated::new(&[]), Gated::scripted(vec![to_the_peer]), Gated::new(&[]));
    let (host, intake, hours) = (
        Gated::new(&["Anything else?"]),
        Gated::new(&[]),
        Gated::new(&["Noon to midnight."]),
    );
    let session = replicas
        .die_once_asked(
            tree(&host_dead, &intake_dead, &hours_dead),
            tree(&host, &intake, &hours),
            "Hours?",
            &hours_dead,
            1,
        )
        .await;

    let events = session.events.as_slice();
    let texts: Vec<(String, String, String, String)> = events
        .iter()
        .filter(|event| event.author != "user")
        .filter_map(|event| {
            let text = event.content().and_then(Content::text)?;
            Some((
                event.author.clone(),
                event.branch.clone(),
                event.isolation_scope.clone(),
                text,
            ))
        })
        .collect();
    let tuple = |author: &str, branch: &str, scope: &str, text: &str| {
        (
            author.to_string(),
            branch.to_string(),
            scope.to_string(),
            text.to_string(),
        )
    };
    assert_eq!(
        texts,
        [
            tuple("intake", "intake@t1", "t1", "How many?"),
            tuple("hours", "hours@1", "t1", "Noon to midnight."),
            tuple("host", "", "", "Anything else?"),
        ]
    );
    let answer = events
        .iter()
        .find(|event| event.function_responses().any(|response| response.id == "t1"))
        .expect("the task's call is answered");
    assert_eq!(
        (
            answer.author.as_str(),
            answer.branch.as_str(),
            answer.isolation_scope.as_str()
        ),
        ("user", "", "")
    );
    assert_eq!(
        *answer.function_responses().next().unwrap().response,
        serde_json::json!({"output": null})
    );
    assert!(
        events
            .iter()
            .filter(|event| event.author == "hours" || event.author == "host")
            .skip(1)
            .all(|event| event.invocation_id == task_invocation),
        "the turn goes on in the task's invocation"
    );
    assert_eq!(
        (
            intake_dead.requests(),
            intake.requests(),
            hours.requests(),
            host.requests()
        ),
        (1, 0, 1, 1),
        "the task's model is not asked again; the peer and then the caller are"
    );
}
