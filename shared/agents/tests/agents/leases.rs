//! One invocation per session at a time: in one process, and across runner
//! replicas sharing Redis.

use crate::common::*;
use adk_grpc_agents::{LlmAgentBuilder, RunOptions, Runner, RunnerConfig};
use adk_grpc_core::CoreSessionService;
use adk_grpc_core::{Acquire, Agent, Clock, Content, LeaseKey, Renewal, SessionLease, SessionService};
use adk_grpc_models::testing::{FakeReply, FakeServer, openai};
use adk_grpc_store::{
    InMemorySessionBackend, InMemorySessionLease, RedisSessionBackend, RedisSessionLease, StoreConfig,
};
use adk_grpc_testkit::{RedisServer, eventually};
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

fn agent(server: &FakeServer) -> Arc<dyn Agent> {
    Arc::new(LlmAgentBuilder::new("assistant").model(openai(server)).build().unwrap())
}

fn hi() -> Content {
    Content::new("user").with_text("hi")
}

/// While `first` runs (its model call is slow), a second run on the same
/// session is refused with ABORTED naming the running invocation; other
/// sessions are not affected; once `first` ends the session is free.
async fn second_run_is_aborted(first: &Runner, second: &Runner, server: &FakeServer) {
    server.push(FakeReply::json(openai::text("slow answer")).delayed(Duration::from_millis(2500)));
    let requests_before = server.requests().len();
    let mut running = first.run(USER, SESSION, hi(), RunOptions::default()).await.unwrap();
    // Drive the first run until its model request is in flight.
    let first_event = tokio::spawn(async move {
        let event = running.next().await;
        (event, running)
    });
    eventually(Duration::from_secs(10), || async {
        match server.requests().len() {
            n if n > requests_before => Ok(()),
            _ => Err("the first run's model request has not arrived".to_string()),
        }
    })
    .await;

    let error = second
        .run(USER, SESSION, hi(), RunOptions::default())
        .await
        .err()
        .expect("busy");
    assert_eq!(error.code(), Code::Aborted);
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("session {SESSION} is busy with invocation e-"))
            && message.ends_with(": one invocation per session at a time"),
        "{message}"
    );

    let (event, mut running) = first_event.await.unwrap();
    let event = event.unwrap().unwrap();
    assert!(
        message.contains(&event.invocation_id),
        "the message names the running invocation"
    );
    assert!(running.next().await.is_none());

    server.push(openai::text("free again"));
    let mut third = second.run(USER, SESSION, hi(), RunOptions::default()).await.unwrap();
    assert!(third.next().await.unwrap().is_ok());
}

#[tokio::test]
async fn a_busy_session_refuses_a_second_invocation_in_memory() {
    let server = FakeServer::start().await;
    let h = Harness::new(agent(&server)).await;
    second_run_is_aborted(&h.runner, &h.runner, &server).await;

    // Different sessions run side by side.
    server.push(FakeReply::json(openai::text("one")).delayed(Duration::from_millis(300)));
    server.push(FakeReply::json(openai::text("two")).delayed(Duration::from_millis(300)));
    let create = RunOptions {
        create_session_if_missing: true,
        ..Default::default()
    };
    let a = h.runner.run(USER, "other-1", hi(), create.clone()).await.unwrap();
    let b = h.runner.run(USER, "other-2", hi(), create).await.unwrap();
    let (a, b) = tokio::join!(a.collect::<Vec<_>>(), b.collect::<Vec<_>>());
    assert!(a.iter().chain(&b).all(Result::is_ok));
}

#[tokio::test]
async fn replicas_sharing_redis_run_one_invocation_per_session() {
    let redis = RedisServer::start().await;
    let server = FakeServer::start().await;
    let replica = || async {
        let sessions: Arc<dyn SessionService> = Arc::new(
            RedisSessionBackend::connect_service(&redis.url(), StoreConfig::default())
                .await
                .unwrap(),
        );
        let lease: Arc<dyn SessionLease> = Arc::new(
            RedisSessionLease::connect(&redis.url(), Default::default())
                .await
                .unwrap(),
        );
        let mut config = RunnerConfig::new(APP, agent(&server), sessions.clone(), lease);
        // Shorter than the slow run below, which must renew its lease to keep it.
        config.lease_ttl = Duration::from_secs(1);
        (Runner::new(config).unwrap(), sessions)
    };
    let (first, sessions) = replica().await;
    let (second, _) = replica().await;
    let run = first
        .run(
            USER,
            SESSION,
            hi(),
            RunOptions {
                create_session_if_missing: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    server.push(openai::text("created"));
    assert_eq!(run.collect::<Vec<_>>().await.len(), 1);

    second_run_is_aborted(&first, &second, &server).await;

    let session = sessions
        .get(adk_grpc_core::GetRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let authors: Vec<&str> = session.events.iter().map(|e| e.author.as_str()).collect();
    assert_eq!(authors, ["user", "assistant", "user", "assistant", "user", "assistant"]);
}

#[tokio::test]
async fn a_lease_left_by_a_dead_runner_expires() {
    let server = FakeServer::start().await;
    let clock = Clock::manual();
    let lease = Arc::new(InMemorySessionLease::new().with_clock(clock.clone()));
    let h = Harness::build(
        agent(&server),
        Arc::new(CoreSessionService::new(InMemorySessionBackend::new())),
        lease.clone(),
        HashMap::new(),
    )
    .await;
    let key = adk_grpc_core::LeaseKey {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
    };
    lease.acquire(&key, "e-dead", Duration::from_secs(60)).await.unwrap();
    let error = h.say("hi").await.error.unwrap();
    assert!(error.to_string().contains("busy with invocation e-dead"), "{error}");
    clock.advance(Duration::from_secs(61));
    server.push(openai::text("after expiry"));
    assert_eq!(h.say("hi").await.ok().texts(), ["after expiry"]);
}

/// A lease whose release takes a while, so a test can drop a run's stream while
/// the run's final release is in flight.
struct SlowRelease(InMemorySessionLease);

#[async_trait::async_trait]
impl SessionLease for SlowRelease {
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> adk_grpc_core::Result<Acquire> {
        self.0.acquire(key, owner, ttl).await
    }

    async fn acquire_in_turn(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
        patience: Duration,
    ) -> adk_grpc_core::Result<Acquire> {
        self.0.acquire_in_turn(key, owner, ttl, patience).await
    }

    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> adk_grpc_core::Result<Renewal> {
        self.0.renew(key, owner, ttl).await
    }

    async fn request_cancel(&self, key: &LeaseKey, owner: &str) -> adk_grpc_core::Result<bool> {
        self.0.request_cancel(key, owner).await
    }

    fn cancel_requests(&self) -> futures::stream::BoxStream<'static, String> {
        self.0.cancel_requests()
    }

    async fn release(&self, key: &LeaseKey, owner: &str) -> adk_grpc_core::Result<()> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.0.release(key, owner).await
    }
}

/// A client that cancels just as its run ends (the stream is dropped while the
/// runner releases the lease) must not leave the session busy until the lease expires.
#[tokio::test]
async fn a_stream_dropped_during_the_final_release_still_frees_the_session() {
    let server = FakeServer::start().await;
    server.push(openai::text("done"));
    let lease = Arc::new(SlowRelease(InMemorySessionLease::new()));
    let h = Harness::build(
        agent(&server),
        Arc::new(CoreSessionService::new(InMemorySessionBackend::new())),
        lease.clone(),
        HashMap::new(),
    )
    .await;

    let mut stream = h.runner.run(USER, SESSION, hi(), RunOptions::default()).await.unwrap();
    let reply = stream.next().await.expect("the reply").expect("no error");
    assert_eq!(reply.content().and_then(Content::text).as_deref(), Some("done"));
    // The next poll starts the (slow) release; the client goes away in the middle of it.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), stream.next())
            .await
            .is_err(),
        "the release is in flight"
    );
    drop(stream);

    let key = LeaseKey {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
    };
    // Well within the run's lease TTL, so only the release can free the session.
    const FREED_WITHIN: Duration = Duration::from_secs(3);
    const _: () = assert!(FREED_WITHIN.as_nanos() < RunnerConfig::DEFAULT_LEASE_TTL.as_nanos());
    eventually(FREED_WITHIN, || async {
        match lease.0.acquire(&key, "e-next", Duration::from_secs(30)).await {
            Ok(Acquire::Acquired { .. }) => Ok(()),
            other => Err(format!("the session is still busy: {other:?}")),
        }
    })
    .await;
}
