//! Several replicas behind one Service: two real `adk-runner-server` processes and
//! two real `adk-session-server` processes on one real redis-server, a fake
//! OpenAI server on loopback HTTP as the (slow) model. A client's calls land on
//! any replica: Cancel on the other one, a client that goes away and re-attaches
//! through the other session server, two messages sent at once with each
//! `on_busy` policy.

use adk_grpc_e2e::runs::{self, agents_file, chat_app, next, rest, spawn_runner, text_of, user_text};
use adk_grpc_e2e::spawn_session_server;
use adk_grpc_models::testing::{FakeReply, FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Streaming};

const USER: &str = "alice";

/// One Redis, two session servers, two runner servers (`runners[0]`, `runners[1]`).
struct Replicas {
    redis: RedisServer,
    sessions: [ServiceProcess; 2],
    runners: [ServiceProcess; 2],
    provider: FakeServer,
    _agents: tempfile::NamedTempFile,
}

impl Replicas {
    async fn start() -> Replicas {
        let redis = RedisServer::start().await;
        let provider = FakeServer::start().await;
        let queued = "  queued:\n    on_busy: enqueue\n    root_agent: { name: chatter, model: gpt }\n";
        let agents = agents_file(&(chat_app(provider.url(), 120) + queued));
        let url = redis.url();
        let (s0, s1, r0, r1) = tokio::join!(
            spawn_session_server(&url, &[]),
            spawn_session_server(&url, &[]),
            spawn_runner(&url, &agents, &[]),
            spawn_runner(&url, &agents, &[]),
        );
        Replicas {
            redis,
            sessions: [s0, s1],
            runners: [r0, r1],
            provider,
            _agents: agents,
        }
    }

    async fn runner(&self, replica: usize) -> AgentRunnerClient<Channel> {
        AgentRunnerClient::connect(self.runners[replica].endpoint())
            .await
            .expect("connect to the runner")
    }

    async fn sessions(&self, replica: usize) -> SessionServiceClient<Channel> {
        SessionServiceClient::connect(self.sessions[replica].endpoint())
            .await
            .expect("connect to the session server")
    }

    async fn events(&self, app: &str, session: &str) -> Vec<pb::Event> {
        runs::get_session(self.sessions[0].endpoint(), app, USER, session)
            .await
            .events
    }

    /// Starts a run on `replica` and returns its stream once the stored user event
    /// (the first event) has arrived.
    async fn start_run(&self, replica: usize, request: pb::RunRequest) -> (Streaming<pb::Event>, pb::Event) {
        let mut stream = self
            .runner(replica)
            .await
            .run(request)
            .await
            .expect("the run starts")
            .into_inner();
        let user = next(&mut stream)
            .await
            .expect("the stream is open")
            .expect("the user event");
        assert_eq!(user.author, "user", "the stored user event comes first: {user:?}");
        assert!(user.invocation_id.starts_with("e-") && user.sequence > 0, "{user:?}");
        (stream, user)
    }

    /// Waits until `invocation` no longer holds the session's lease (a read: a Cancel
    /// would end a run that still held it).
    async fn lease_released(&self, app: &str, session: &str, invocation: &str) {
        let key = format!("adk:lease:{{{app}:{USER}}}:{session}");
        let port = self.redis.port().to_string();
        adk_grpc_testkit::eventually(Duration::from_secs(20), || async {
            let holder = adk_grpc_testkit::redis_cli(&["-p", &port, "get", &key]).await;
            if holder.trim() == invocation {
                Err(format!("{invocation} still holds {key}"))
            } else {
                Ok(())
            }
        })
        .await;
    }

    /// Waits until `count` runs wait in the session's line (`enqueue`).
    async fn line_length(&self, app: &str, session: &str, count: u64) {
        let key = format!("adk:lease:{{{app}:{USER}}}:{session}:line");
        let port = self.redis.port().to_string();
        adk_grpc_testkit::eventually(Duration::from_secs(20), || async {
            let length = adk_grpc_testkit::redis_cli(&["-p", &port, "zcard", &key]).await;
            if length.trim() == count.to_string() {
                Ok(())
            } else {
                Err(format!("{} of {count} runs in line", length.trim()))
            }
        })
        .await
    }

    /// Waits until the model has received `count` requests in all.
    async fn model_requests(&self, count: usize) {
        adk_grpc_testkit::eventually(Duration::from_secs(20), || async {
            let seen = self.provider.requests().len();
            if seen >= count {
                Ok(())
            } else {
                Err(format!("{seen} of {count} model requests"))
            }
        })
        .await
    }
}

fn run_request(app: &str, session: &str, text: &str) -> pb::RunRequest {
    runs::run_request(app, USER, session, user_text(text))
}

fn with_policy(mut request: pb::RunRequest, on_busy: pb::OnBusy) -> pb::RunRequest {
    request.on_busy = on_busy as i32;
    request
}

fn cancel_request(app: &str, session: &str, invocation_id: &str) -> pb::CancelRequest {
    pb::CancelRequest {
        app_name: app.into(),
        user_id: USER.into(),
        session_id: session.into(),
        invocation_id: invocation_id.into(),
    }
}

#[tokio::test]
async fn cancel_sent_to_the_other_replica_stops_the_run_and_frees_the_session() {
    let replicas = Replicas::start().await;
    // The model never answers: only the stored user event tells the client its invocation.
    replicas.provider.push(FakeReply::Stall);
    let (mut stream, user) = replicas.start_run(0, run_request("chat", "s1", "Hello?")).await;
    replicas.model_requests(1).await;

    // Cancel lands on the replica that does not run the invocation.
    let mut other = replicas.runner(1).await;
    let reply = other
        .cancel(cancel_request("chat", "s1", &user.invocation_id))
        .await
        .expect("Cancel");
    assert!(reply.into_inner().cancelled, "it was running (on the other replica)");
    let (events, status) = rest(&mut stream).await;
    assert!(events.is_empty(), "nothing after the user event: {events:?}");
    let status = status.expect("the stream ends with a status");
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    assert!(status.message().contains(&user.invocation_id), "{}", status.message());
    assert!(
        replicas.provider.wait_for_disconnects(1, Duration::from_secs(10)).await,
        "the model request was dropped"
    );

    // Not running any more, anywhere; another user's or session's cancel never matched.
    for replica in [0, 1] {
        let again = replicas
            .runner(replica)
            .await
            .cancel(cancel_request("chat", "s1", &user.invocation_id))
            .await
            .expect("Cancel");
        assert!(!again.into_inner().cancelled, "replica {replica}: nothing runs");
    }
    let elsewhere = other
        .cancel(cancel_request("chat", "s2", &user.invocation_id))
        .await
        .expect("Cancel");
    assert!(!elsewhere.into_inner().cancelled);

    // The session is free at once (released, not expired): the next run succeeds.
    replicas.provider.push(openai::text("Hi again."));
    let (mut stream, _) = replicas.start_run(1, run_request("chat", "s1", "Again")).await;
    let (events, status) = rest(&mut stream).await;
    assert!(status.is_none(), "{status:?}");
    assert_eq!(events.iter().map(text_of).collect::<Vec<_>>(), ["Hi again."]);
}

#[tokio::test]
async fn a_kept_run_outlives_its_client_who_reattaches_through_the_other_session_server() {
    let replicas = Replicas::start().await;
    // The model answers a while after the client went away.
    replicas
        .provider
        .push(FakeReply::json(openai::text("Finished without you.")).delayed(Duration::from_secs(2)));
    let mut request = run_request("chat", "s1", "Take your time");
    request.keep_running = true;
    let (stream, user) = replicas.start_run(0, request).await;
    replicas.model_requests(1).await;
    drop(stream); // the browser refresh

    // Re-attach on the other session server from the last sequence seen.
    let mut watch = replicas
        .sessions(1)
        .await
        .watch_session(pb::WatchSessionRequest {
            app_name: "chat".into(),
            user_id: USER.into(),
            session_id: "s1".into(),
            after_sequence: Some(user.sequence),
        })
        .await
        .expect("WatchSession")
        .into_inner();
    let reply = next(&mut watch).await.expect("the watch is open").expect("an event");
    assert_eq!(text_of(&reply), "Finished without you.");
    assert_eq!(reply.invocation_id, user.invocation_id);
    assert_eq!(reply.sequence, user.sequence + 1);
    assert_eq!(replicas.provider.requests().len(), 1, "the model was not asked twice");

    // A kept run can still be cancelled from the other replica after its client left.
    replicas.provider.push(FakeReply::Stall);
    let mut request = run_request("chat", "s2", "Think forever");
    request.keep_running = true;
    let (stream, user) = replicas.start_run(0, request).await;
    replicas.model_requests(2).await;
    drop(stream);
    let reply = replicas
        .runner(1)
        .await
        .cancel(cancel_request("chat", "s2", &user.invocation_id))
        .await
        .expect("Cancel");
    assert!(reply.into_inner().cancelled, "the detached run was still running");
    assert!(
        replicas.provider.wait_for_disconnects(1, Duration::from_secs(10)).await,
        "its model request was dropped"
    );

    // Without keep_running (the default), a client that goes away stops its run.
    replicas.provider.push(FakeReply::Stall);
    let (stream, user) = replicas.start_run(0, run_request("chat", "s3", "Hello?")).await;
    replicas.model_requests(3).await;
    drop(stream);
    assert!(
        replicas.provider.wait_for_disconnects(2, Duration::from_secs(10)).await,
        "the dropped run's model request was dropped"
    );
    // The run ends after its model request does: wait (reading only) until it no longer
    // holds the session, then Cancel finds nothing to cancel.
    replicas.lease_released("chat", "s3", &user.invocation_id).await;
    let reply = replicas
        .runner(1)
        .await
        .cancel(cancel_request("chat", "s3", &user.invocation_id))
        .await
        .expect("Cancel");
    assert!(!reply.into_inner().cancelled, "nothing runs any more");
}

#[tokio::test]
async fn a_second_message_while_busy_follows_the_requested_policy() {
    let replicas = Replicas::start().await;

    // reject (the default): ABORTED naming the running invocation.
    replicas.provider.push(FakeReply::Stall);
    let (mut first, user) = replicas.start_run(0, run_request("chat", "s1", "One")).await;
    replicas.model_requests(1).await;
    let refused = replicas
        .runner(1)
        .await
        .run(run_request("chat", "s1", "Two"))
        .await
        .expect_err("busy");
    assert_eq!(refused.code(), Code::Aborted);
    assert!(refused.message().contains(&user.invocation_id), "{}", refused.message());

    // interrupt, on the other replica: the running invocation is cancelled, then this one runs.
    replicas.provider.push(openai::text("Answer to two."));
    let (mut second, second_user) = replicas
        .start_run(1, with_policy(run_request("chat", "s1", "Two"), pb::OnBusy::Interrupt))
        .await;
    let (events, status) = rest(&mut first).await;
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(status.expect("the first run ends").code(), Code::Cancelled);
    let (events, status) = rest(&mut second).await;
    assert!(status.is_none(), "{status:?}");
    assert_eq!(events.iter().map(text_of).collect::<Vec<_>>(), ["Answer to two."]);
    assert!(second_user.sequence > user.sequence);

    // rollback, on the other replica: the running invocation is cancelled and rewound,
    // so the new message replaces it, in the log's live history and the model's request.
    let asked = replicas.provider.requests().len();
    replicas.provider.push(FakeReply::Stall);
    let (mut doomed, doomed_user) = replicas
        .start_run(0, run_request("chat", "s2", "Forget this message"))
        .await;
    replicas.model_requests(asked + 1).await;
    replicas.provider.push(openai::text("Answer to the replacement."));
    let (mut replacing, replacing_user) = replicas
        .start_run(
            1,
            with_policy(run_request("chat", "s2", "The replacement"), pb::OnBusy::Rollback),
        )
        .await;
    let (_, status) = rest(&mut doomed).await;
    assert_eq!(status.expect("the rolled-back run ends").code(), Code::Cancelled);
    let (events, status) = rest(&mut replacing).await;
    assert!(status.is_none(), "{status:?}");
    assert_eq!(
        events.iter().map(text_of).collect::<Vec<_>>(),
        ["Answer to the replacement."]
    );
    let model_saw = String::from_utf8_lossy(&replicas.provider.requests().last().expect("asked").body).into_owned();
    assert!(model_saw.contains("The replacement"), "{model_saw}");
    assert!(!model_saw.contains("Forget this message"), "rolled back: {model_saw}");
    let log = replicas.events("chat", "s2").await;
    let rewind = log
        .iter()
        .find(|event| {
            event
                .actions
                .as_ref()
                .and_then(|a| a.rewind_before_invocation_id.as_deref())
                == Some(doomed_user.invocation_id.as_str())
        })
        .expect("a rewind event before the rolled-back invocation");
    assert!(doomed_user.sequence < rewind.sequence && rewind.sequence < replacing_user.sequence);
    assert_eq!(
        text_of(&log[0]),
        "Forget this message",
        "the log still shows what happened"
    );

    // enqueue (the app's default for `queued`): B (on the other replica) and then C (on
    // this one) wait for A, and run after it in the order they arrived.
    replicas
        .provider
        .push(FakeReply::json(openai::text("Answer to A.")).delayed(Duration::from_secs(1)));
    replicas.provider.push(openai::text("Answer to B."));
    replicas.provider.push(openai::text("Answer to C."));
    let (mut a, a_user) = replicas.start_run(0, run_request("queued", "s1", "A")).await;
    // The calls themselves wait for the session: each is answered once its run started.
    let waiting = |replica: usize, text: &'static str| {
        let endpoint = replicas.runners[replica].endpoint();
        tokio::spawn(async move {
            let mut client = AgentRunnerClient::connect(endpoint).await.expect("connect");
            client.run(run_request("queued", "s1", text)).await
        })
    };
    let b = waiting(1, "B");
    replicas.line_length("queued", "s1", 1).await;
    let c = waiting(0, "C");
    replicas.line_length("queued", "s1", 2).await;
    let (a_events, a_status) = rest(&mut a).await;
    assert!(a_status.is_none(), "{a_status:?}");
    assert_eq!(a_events.iter().map(text_of).collect::<Vec<_>>(), ["Answer to A."]);
    for (call, text) in [(b, "B"), (c, "C")] {
        let mut stream = call.await.unwrap().expect("waited, then ran").into_inner();
        let (events, status) = rest(&mut stream).await;
        assert!(status.is_none(), "{text}: {status:?}");
        let texts: Vec<String> = events.iter().map(text_of).collect();
        assert_eq!(
            texts,
            [text.to_string(), format!("Answer to {text}.")],
            "its user event, then its answer"
        );
        assert!(events[0].sequence > a_user.sequence);
    }
    let log: Vec<String> = replicas.events("queued", "s1").await.iter().map(text_of).collect();
    assert_eq!(
        log,
        ["A", "Answer to A.", "B", "Answer to B.", "C", "Answer to C."],
        "one after the other, in the order they arrived"
    );
}
