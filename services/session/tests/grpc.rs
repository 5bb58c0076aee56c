//! The session gRPC server in-process on 127.0.0.1:0 over the memory store,
//! driven through `RemoteSessionService` (and its MemoryService through
//! `RemoteMemoryService`): what a Rust client sees end to end, without Redis or
//! spawned processes.

use adk_grpc_client::{RemoteMemoryService, RemoteSessionService};
use adk_grpc_core::{
    AdkError, AppendEventRequest, Content, CreateRequest, DeleteRequest, Event, EventStream, GetRequest,
    ListEventsRequest, ListRequest, ReadonlyState, Session, SessionService, WatchRequest,
};
use adk_grpc_core::{CoreMemoryService, CoreSessionService, MemoryService};
use adk_grpc_server_kit::{GrpcArgs, GrpcServer, ServeError, Shutdown};
use adk_grpc_session_service::{memory_service, session_service};
use adk_grpc_store::{InMemoryMemoryBackend, InMemorySessionBackend};
use adk_grpc_testkit::Fixture;
use adk_grpc_testkit::memory_conformance::ConceptEmbedder;
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const APP: &str = "app";
const USER: &str = "alice";
const WAIT: Duration = Duration::from_secs(5);

struct TestServer {
    addr: SocketAddr,
    shutdown: Shutdown,
    serving: JoinHandle<Result<(), ServeError>>,
}

impl TestServer {
    async fn start(store: Arc<dyn SessionService>, grpc: GrpcArgs) -> TestServer {
        TestServer::serve(store, None, grpc).await
    }

    /// With `memory` served beside the sessions too, as `adk-session-server` does.
    async fn serve(
        store: Arc<dyn SessionService>,
        memory: Option<Arc<dyn MemoryService>>,
        grpc: GrpcArgs,
    ) -> TestServer {
        let shutdown = Shutdown::new();
        let mut server = GrpcServer::new(&grpc, shutdown.clone())
            .add_service(session_service(store.clone(), &grpc, shutdown.clone()))
            .health_check("session store", store.clone());
        if let Some(memory) = memory {
            server = server
                .add_service(memory_service(memory.clone(), store, &grpc))
                .health_check("memory store", memory);
        }
        let bound = server.bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = bound.local_addr();
        TestServer {
            addr,
            shutdown,
            serving: tokio::spawn(bound.serve()),
        }
    }

    async fn in_memory() -> TestServer {
        TestServer::start(
            Arc::new(CoreSessionService::new(InMemorySessionBackend::new())),
            GrpcArgs::default(),
        )
        .await
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    async fn client(&self) -> RemoteSessionService {
        RemoteSessionService::connect(self.endpoint()).await.expect("connect")
    }

    async fn stop(self) {
        self.shutdown.trigger();
        let served = tokio::time::timeout(WAIT, self.serving)
            .await
            .expect("graceful shutdown in time");
        served.expect("serve task").expect("serve result");
    }
}

fn create(session_id: &str) -> CreateRequest {
    CreateRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: Some(session_id.into()),
        ..Default::default()
    }
}

fn get(session_id: &str) -> GetRequest {
    GetRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: session_id.into(),
        ..Default::default()
    }
}

fn append(session_id: &str, event: Event) -> AppendEventRequest {
    AppendEventRequest {
        timestamp_missing: false,
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: session_id.into(),
        event,
        precondition: None,
    }
}

fn watch(session_id: &str) -> WatchRequest {
    WatchRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: session_id.into(),
        after_sequence: None,
    }
}

fn text_event(text: impl Into<String>) -> Event {
    Event::new("e-inv")
        .with_author("user")
        .with_content(Content::new("user").with_text(text))
}

async fn next_event(stream: &mut EventStream) -> Event {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("an event in time")
        .expect("the stream is still open")
        .expect("an event, not an error")
}

#[tokio::test]
async fn sessions_round_trip_through_grpc() {
    let server = TestServer::in_memory().await;
    let sessions: Arc<dyn SessionService> = Arc::new(server.client().await);

    let mut request = create("s1");
    request.state = HashMap::from([
        ("app:theme".into(), json!("dark")),
        ("user:lang".into(), json!("en")),
        ("temp:scratch".into(), json!(1)),
        ("count".into(), json!(0)),
    ]);
    let created = sessions.create(request).await.unwrap();
    assert_eq!(
        (created.app_name.as_str(), created.user_id.as_str(), created.id.as_str()),
        (APP, USER, "s1")
    );
    assert_eq!(created.state.get("app:theme"), Some(json!("dark")));
    assert_eq!(created.state.get("temp:scratch"), None, "temp: keys are never stored");

    let stored = sessions
        .append_event(append("s1", text_event("hi").with_state_delta("count", json!(1))))
        .await
        .unwrap();
    assert_eq!(stored.sequence, 1);
    assert!(!stored.id.is_empty());

    let session: Session = sessions.get(get("s1")).await.unwrap();
    assert_eq!(session.events.len(), 1);
    assert_eq!(session.events.at(0), Some(&stored));
    assert_eq!(session.state.get("count"), Some(json!(1)));
    assert_eq!(session.state.get("user:lang"), Some(json!("en")));
    assert_eq!(session.event_count, 1);

    let listed = sessions
        .list(ListRequest {
            app_name: APP.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed.sessions.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["s1"]
    );
    assert!(listed.sessions[0].events.is_empty(), "listings carry no events");

    let page = sessions
        .list_events(ListEventsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "s1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events, vec![stored]);
    assert_eq!(page.next_page_token, None);

    let delete = DeleteRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: "s1".into(),
    };
    sessions.delete(delete.clone()).await.unwrap();
    sessions
        .delete(delete)
        .await
        .expect("deleting a missing session succeeds");
    let missing = sessions.get(get("s1")).await.unwrap_err();
    assert!(matches!(missing, AdkError::NotFound(..)), "{missing:?}");

    server.stop().await;
}

#[tokio::test]
async fn store_errors_arrive_with_their_codes() {
    let server = TestServer::in_memory().await;
    let sessions = server.client().await;

    sessions.create(create("dup")).await.unwrap();
    let taken = sessions.create(create("dup")).await.unwrap_err();
    assert_eq!(taken.code(), Code::AlreadyExists, "{taken}");

    let bad_id = sessions.create(create("no\nnewlines")).await.unwrap_err();
    assert_eq!(bad_id.code(), Code::InvalidArgument, "{bad_id}");
    assert!(bad_id.to_string().contains("session_id"), "names the field: {bad_id}");

    let no_session = sessions
        .append_event(append("nope", text_event("x")))
        .await
        .unwrap_err();
    assert_eq!(no_session.code(), Code::NotFound, "{no_session}");

    server.stop().await;
}

#[tokio::test]
async fn an_oversized_session_is_refused_with_a_paging_hint() {
    const LIMIT: usize = 16 * 1024;
    let grpc = GrpcArgs {
        max_message_bytes: LIMIT,
        ..GrpcArgs::default()
    };
    let server = TestServer::start(Arc::new(CoreSessionService::new(InMemorySessionBackend::new())), grpc).await;
    let sessions = server.client().await;

    sessions.create(create("big")).await.unwrap();
    for i in 0..6 {
        sessions
            .append_event(append("big", text_event(format!("{i}{}", "x".repeat(4000)))))
            .await
            .unwrap();
    }

    let err = sessions.get(get("big")).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err}");
    let message = err.to_string();
    for hint in ["ListEvents", "num_recent_events", "after", &LIMIT.to_string()] {
        assert!(message.contains(hint), "{hint:?} missing from: {message}");
    }

    let recent = sessions
        .get(GetRequest {
            num_recent_events: Some(2),
            ..get("big")
        })
        .await
        .unwrap();
    assert_eq!(recent.events.iter().map(|e| e.sequence).collect::<Vec<_>>(), [5, 6]);
    assert_eq!(recent.event_count, 6);

    server.stop().await;
}

#[tokio::test]
async fn a_watch_receives_live_appends() {
    let server = TestServer::in_memory().await;
    let sessions = server.client().await;
    sessions.create(create("w")).await.unwrap();
    let before = sessions
        .append_event(append("w", text_event("before the watch")))
        .await
        .unwrap();

    let mut live = sessions.watch(watch("w")).await.unwrap();
    let mut replay = sessions
        .watch(WatchRequest {
            after_sequence: Some(0),
            ..watch("w")
        })
        .await
        .unwrap();
    let first = sessions.append_event(append("w", text_event("one"))).await.unwrap();
    let second = sessions.append_event(append("w", text_event("two"))).await.unwrap();

    assert_eq!(next_event(&mut live).await, first);
    assert_eq!(next_event(&mut live).await, second);
    for expected in [before, first, second] {
        assert_eq!(next_event(&mut replay).await, expected);
    }

    // Dropping the client's streams cancels the calls; shutdown must not wait for them.
    drop((live, replay));
    server.stop().await;
}

#[tokio::test]
async fn watches_end_cleanly_when_the_server_shuts_down() {
    let server = TestServer::in_memory().await;
    let sessions = server.client().await;
    sessions.create(create("w")).await.unwrap();
    let mut stream = sessions.watch(watch("w")).await.unwrap();
    sessions.append_event(append("w", text_event("live"))).await.unwrap();
    next_event(&mut stream).await;

    server.shutdown.trigger();
    let end = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("the stream ends in time");
    assert!(end.is_none(), "a clean end, not an error: {end:?}");

    // With the stream ended, the graceful drain completes well within the 25 s grace.
    let served = tokio::time::timeout(WAIT, server.serving)
        .await
        .expect("serve returns after the drain");
    served.unwrap().unwrap();
}

/// A store whose outage can be switched on: stands in for Redis going away.
struct SwitchableStore {
    inner: CoreSessionService<InMemorySessionBackend>,
    reachable: AtomicBool,
}

#[async_trait]
impl SessionService for SwitchableStore {
    async fn create(&self, req: CreateRequest) -> adk_grpc_core::Result<Session> {
        self.inner.create(req).await
    }
    async fn get(&self, req: GetRequest) -> adk_grpc_core::Result<Session> {
        self.inner.get(req).await
    }
    async fn list(&self, req: ListRequest) -> adk_grpc_core::Result<adk_grpc_core::ListResponse> {
        self.inner.list(req).await
    }
    async fn delete(&self, req: DeleteRequest) -> adk_grpc_core::Result<()> {
        self.inner.delete(req).await
    }
    async fn append_event(&self, req: AppendEventRequest) -> adk_grpc_core::Result<Event> {
        self.inner.append_event(req).await
    }
    async fn list_events(&self, req: ListEventsRequest) -> adk_grpc_core::Result<adk_grpc_core::ListEventsResponse> {
        self.inner.list_events(req).await
    }
    async fn watch(&self, req: WatchRequest) -> adk_grpc_core::Result<EventStream> {
        self.inner.watch(req).await
    }
    async fn user_state(
        &self,
        req: adk_grpc_core::UserStateRequest,
    ) -> adk_grpc_core::Result<adk_grpc_core::ScopeState> {
        self.inner.user_state(req).await
    }
    async fn app_state(&self, req: adk_grpc_core::AppStateRequest) -> adk_grpc_core::Result<adk_grpc_core::ScopeState> {
        self.inner.app_state(req).await
    }
    async fn update_app_state(
        &self,
        req: adk_grpc_core::UpdateAppStateRequest,
    ) -> adk_grpc_core::Result<adk_grpc_core::ScopeState> {
        self.inner.update_app_state(req).await
    }
    async fn ping(&self) -> adk_grpc_core::Result<()> {
        if self.reachable.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(AdkError::Unavailable("store switched off by the test".into()))
        }
    }
}

async fn health_of(health: &mut HealthClient<tonic::transport::Channel>, service: &str) -> ServingStatus {
    let reply = health
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .expect("health check");
    reply.into_inner().status()
}

/// Polls until every name reports `expected` (the monitor ticks every 20 ms here).
async fn wait_for_health(health: &mut HealthClient<tonic::transport::Channel>, expected: ServingStatus) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let overall = health_of(health, "").await;
        let sessions = health_of(health, "adk.v1.SessionService").await;
        if overall == expected && sessions == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "health stayed {overall:?}/{sessions:?}, want {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn health_follows_the_store_ping() {
    let store = Arc::new(SwitchableStore {
        inner: CoreSessionService::new(InMemorySessionBackend::new()),
        reachable: AtomicBool::new(true),
    });
    let grpc = GrpcArgs {
        health_interval_ms: 20,
        ..GrpcArgs::default()
    };
    let server = TestServer::start(store.clone(), grpc).await;
    let sessions = server.client().await;
    let mut health = HealthClient::new(
        tonic::transport::Channel::from_shared(server.endpoint())
            .unwrap()
            .connect_lazy(),
    );

    // The first check ran before the port accepted calls.
    assert_eq!(health_of(&mut health, "").await, ServingStatus::Serving);
    sessions.ping().await.unwrap();

    store.reachable.store(false, Ordering::SeqCst);
    wait_for_health(&mut health, ServingStatus::NotServing).await;
    let down = sessions.ping().await.unwrap_err();
    assert_eq!(down.code(), Code::Unavailable, "{down}");

    store.reachable.store(true, Ordering::SeqCst);
    wait_for_health(&mut health, ServingStatus::Serving).await;
    sessions.ping().await.unwrap();

    server.stop().await;
}

/// What `grpcurl list` (reflection v1alpha) and newer tools (v1) see: exactly the
/// served services, with adk.v1 types describable.
#[tokio::test]
async fn reflection_lists_the_served_services_in_both_versions() {
    use tonic_reflection::pb::{v1, v1alpha};
    let server = TestServer::in_memory().await;
    let channel = tonic::transport::Channel::from_shared(server.endpoint())
        .unwrap()
        .connect_lazy();

    let ask = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1alpha::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut replies = v1alpha::server_reflection_client::ServerReflectionClient::new(channel.clone())
        .server_reflection_info(futures::stream::iter([ask]))
        .await
        .unwrap()
        .into_inner();
    let Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(list)) = replies
        .message()
        .await
        .unwrap()
        .and_then(|reply| reply.message_response)
    else {
        panic!("no service list");
    };
    let mut names: Vec<String> = list.service.into_iter().map(|service| service.name).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "adk.v1.SessionService",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        ]
    );

    let ask = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::FileContainingSymbol(
            "adk.v1.SessionService".into(),
        )),
    };
    let mut replies = v1::server_reflection_client::ServerReflectionClient::new(channel)
        .server_reflection_info(futures::stream::iter([ask]))
        .await
        .unwrap()
        .into_inner();
    let reply = replies
        .message()
        .await
        .unwrap()
        .and_then(|reply| reply.message_response);
    assert!(
        matches!(
            reply,
            Some(v1::server_reflection_response::MessageResponse::FileDescriptorResponse(
                _
            ))
        ),
        "{reply:?}"
    );

    server.stop().await;
}

// ---------- memory ----------

/// A session server with memory over in-memory stores.
async fn memory_server(embedders: adk_grpc_core::memory::Embedders) -> TestServer {
    let memory = CoreMemoryService::new(InMemoryMemoryBackend::new()).with_embedders(embedders);
    let sessions = Arc::new(CoreSessionService::new(InMemorySessionBackend::new()));
    TestServer::serve(sessions, Some(Arc::new(memory)), GrpcArgs::default()).await
}

/// `RemoteMemoryService` is the MemoryService a Rust program uses over gRPC: the whole
/// conformance suite holds through it, every rule applied by the server's core service
/// and every error arriving with its code and field.
mod the_grpc_memory_client_conforms {
    use super::*;
    adk_grpc_testkit::memory_conformance_tests!({
        let server = memory_server(Default::default()).await;
        let memory = RemoteMemoryService::connect(server.endpoint()).await.expect("connect");
        memory.ping().await.expect("the memory service is serving");
        Fixture::memory(memory).keeping(server)
    });
    // Its semantic cases, on a server embedding every app with the suite's model.
    adk_grpc_testkit::semantic_memory_conformance_tests!({
        let embedder: Arc<dyn adk_grpc_core::memory::Embedder> = Arc::new(ConceptEmbedder);
        let server = memory_server([("*".to_string(), embedder)].into()).await;
        let memory = RemoteMemoryService::connect(server.endpoint()).await.expect("connect");
        Fixture::memory(memory).keeping(server)
    });
}

/// AddSessionToMemory through the client: the session's events with content become
/// memories a search finds; a missing session is NOT_FOUND.
#[tokio::test]
async fn the_grpc_memory_client_adds_sessions() {
    let server = memory_server(Default::default()).await;
    let sessions = server.client().await;
    let memory = RemoteMemoryService::connect(server.endpoint()).await.expect("connect");
    sessions.create(create("s1")).await.unwrap();
    let told = sessions
        .append_event(append("s1", text_event("my bicycle is red")))
        .await
        .unwrap();
    let ids = memory.add_session_to_memory(APP, USER, "s1").await.unwrap();
    assert_eq!(ids, [told.id.as_str()]);
    let search = adk_grpc_core::memory::SearchMemoryRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        query: "bicycle".into(),
        limit: 0,
    };
    let found = memory.search(search).await.unwrap().memories;
    assert_eq!(
        found.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        [told.id.as_str()]
    );
    let missing = memory.add_session_to_memory(APP, USER, "nope").await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing}");
    server.stop().await;
}
