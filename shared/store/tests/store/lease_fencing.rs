//! Fencing: an append carrying `Precondition::LeaseHeldBy(owner)` is stored only while
//! `owner` holds the session's lease, atomically with the append (in the append script
//! on Redis, under the store's lock in memory), so a runner that lost its lease can
//! never write after another took over.

use adk_grpc_core::CoreSessionService;
use adk_grpc_core::{
    Acquire, AdkError, AppendEventRequest, Content, CreateRequest, DeleteRequest, Event, GetRequest, JsonObject,
    LeaseKey, ListEventsRequest, Precondition, RunMark, RunMarksRequest, SessionLease, SessionService,
};
use adk_grpc_store::{InMemorySessionBackend, RedisSessionBackend, RedisSessionLease, StoreConfig, Stores};
use adk_grpc_testkit::{RedisCluster, RedisServer, unique_prefix};
use std::time::Duration;

/// A Redis session service and lease on `url`, as the servers connect them.
async fn redis_sessions_and_lease(url: &str) -> (CoreSessionService<RedisSessionBackend>, RedisSessionLease) {
    let sessions = RedisSessionBackend::connect_service(url, StoreConfig::default())
        .await
        .unwrap();
    let lease = RedisSessionLease::connect(url, Default::default()).await.unwrap();
    (sessions, lease)
}

async fn fenced_appends_need_the_lease(sessions: &dyn SessionService, lease: &dyn SessionLease) {
    let app = unique_prefix("fence");
    sessions
        .create(CreateRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: Some("s".into()),
            ..Default::default()
        })
        .await
        .expect("create");
    let key = LeaseKey {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
    };
    let append = |owner: &str, text: &str| AppendEventRequest {
        timestamp_missing: false,
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        event: Event::new(owner)
            .with_author("agent")
            .with_content(Content::new("model").with_text(text)),
        precondition: Some(Precondition::LeaseHeldBy(owner.into())),
    };

    let short = Duration::from_millis(300);
    assert!(matches!(
        lease.acquire(&key, "e-first", short).await.unwrap(),
        Acquire::Acquired { .. }
    ));
    sessions
        .append_event(append("e-first", "while held"))
        .await
        .expect("the holder appends");
    let refused = sessions.append_event(append("e-other", "not mine")).await.unwrap_err();
    assert!(matches!(refused, AdkError::Aborted(..)), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("e-other no longer holds the session's lease"),
        "{refused}"
    );

    // The holder stalls past its TTL: the next holder takes the session as soon as
    // it lapses and learns it was interrupted; the stalled holder's appends are refused.
    let next = adk_grpc_testkit::eventually(Duration::from_secs(5), || async {
        match lease.acquire(&key, "e-next", Duration::from_secs(30)).await.unwrap() {
            Acquire::Held(holder) => Err(format!("still held by {holder}")),
            acquired => Ok(acquired),
        }
    })
    .await;
    assert_eq!(
        next,
        Acquire::Acquired {
            interrupted: Some("e-first".into())
        }
    );
    let late = sessions.append_event(append("e-first", "too late")).await.unwrap_err();
    assert!(matches!(late, AdkError::Aborted(..)), "{late}");
    sessions
        .append_event(append("e-next", "mine now"))
        .await
        .expect("the new holder appends");
    let stale = sessions.append_event(append("e-first", "stale")).await.unwrap_err();
    assert!(matches!(stale, AdkError::Aborted(..)), "{stale}");

    let session = sessions
        .get(GetRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let texts: Vec<String> = session
        .events
        .iter()
        .map(|e| e.content().and_then(Content::text).unwrap_or_default())
        .collect();
    assert_eq!(texts, ["while held", "mine now"], "refused appends stored nothing");
}

#[tokio::test]
async fn fenced_appends_need_the_lease_in_memory() {
    let backend = InMemorySessionBackend::new();
    let lease = backend.leases();
    let sessions = CoreSessionService::new(backend);
    fenced_appends_need_the_lease(&sessions, &lease).await;
}

/// The leases of `Stores` are the ones its session store fences appends with, also in memory.
#[tokio::test]
async fn fenced_appends_need_the_lease_of_the_stores_in_memory() {
    let stores = Stores::open("memory://", StoreConfig::default()).unwrap();
    let (sessions, lease) = (stores.sessions().await.unwrap(), stores.leases().await.unwrap());
    fenced_appends_need_the_lease(sessions.as_ref(), lease.as_ref()).await;
}

#[tokio::test]
async fn fenced_appends_need_the_lease_of_the_stores_on_redis() {
    let server = RedisServer::start().await;
    let stores = Stores::open(&server.url(), StoreConfig::default()).unwrap();
    let (sessions, lease) = (stores.sessions().await.unwrap(), stores.leases().await.unwrap());
    fenced_appends_need_the_lease(sessions.as_ref(), lease.as_ref()).await;
}

#[tokio::test]
async fn fenced_appends_need_the_lease_on_redis() {
    let server = RedisServer::start().await;
    let (sessions, lease) = redis_sessions_and_lease(&server.url()).await;
    fenced_appends_need_the_lease(&sessions, &lease).await;
}

#[tokio::test]
async fn fenced_appends_need_the_lease_on_a_cluster() {
    let cluster = RedisCluster::start(3).await;
    let (sessions, lease) = redis_sessions_and_lease(&cluster.url()).await;
    fenced_appends_need_the_lease(&sessions, &lease).await;
}

/// Run marks (`SessionService::append_run_mark`): a workflow agent's positions kept beside
/// the log under the session's lease, each after the log's last event; no read of the log
/// returns them, the runner's `run_marks` does, and they go with the session.
async fn run_marks_are_kept_beside_the_log_under_the_lease(sessions: &dyn SessionService, lease: &dyn SessionLease) {
    let app = unique_prefix("marks");
    let create = CreateRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: Some("s".into()),
        ..Default::default()
    };
    sessions.create(create.clone()).await.expect("create");
    let key = LeaseKey {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
    };
    let fenced = |owner: &str, event: Event| AppendEventRequest {
        timestamp_missing: false,
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        event,
        precondition: Some(Precondition::LeaseHeldBy(owner.into())),
    };
    let text = |text: &str| {
        Event::new("e-1")
            .with_author("a")
            .with_content(Content::new("model").with_text(text))
    };
    let position = |state: Option<&str>| {
        let mut event = Event::new("e-1").with_author("steps");
        match state {
            Some(agent) => {
                let mut state = JsonObject::new();
                state.insert("current_sub_agent".into(), agent.into());
                event.actions.agent_state = Some(state);
            }
            None => event.actions.end_of_agent = Some(true),
        }
        event
    };
    assert!(matches!(
        lease.acquire(&key, "e-1", Duration::from_secs(30)).await.unwrap(),
        Acquire::Acquired { .. }
    ));
    sessions.append_event(fenced("e-1", text("one"))).await.expect("append");
    sessions
        .append_run_mark(fenced("e-1", position(Some("b"))))
        .await
        .expect("the holder keeps a mark");
    sessions.append_event(fenced("e-1", text("two"))).await.expect("append");
    sessions
        .append_run_mark(fenced("e-1", position(None)))
        .await
        .expect("the holder keeps a mark");
    let refused = sessions
        .append_run_mark(fenced("e-other", position(None)))
        .await
        .unwrap_err();
    assert!(matches!(refused, AdkError::Aborted(..)), "{refused}");
    let mut unfenced = fenced("e-1", position(None));
    unfenced.precondition = None;
    let refused = sessions.append_run_mark(unfenced).await.unwrap_err();
    assert!(matches!(refused, AdkError::InvalidArgument { .. }), "{refused}");
    // A position changes no state: a mark with a delta is refused, naming the event.
    let mut with_delta = fenced("e-1", position(None));
    with_delta.event.actions.state_delta.insert("k".into(), "v".into());
    let refused = sessions.append_run_mark(with_delta).await.unwrap_err();
    assert!(refused.to_string().contains("event"), "{refused}");
    assert!(matches!(refused, AdkError::InvalidArgument { .. }), "{refused}");

    let get = GetRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        ..Default::default()
    };
    let session = sessions.get(get.clone()).await.unwrap();
    let texts: Vec<String> = session
        .events
        .iter()
        .map(|e| e.content().and_then(Content::text).unwrap_or_default())
        .collect();
    assert_eq!(texts, ["one", "two"], "the log holds no mark");
    assert_eq!(sessions.get_encoded(get.clone()).await.unwrap().events.len(), 2);
    let listed = sessions
        .list_events(ListEventsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.events.len(), 2, "ListEvents holds no mark");

    let marks_request = RunMarksRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
    };
    let marks = sessions.run_marks(marks_request.clone()).await.unwrap();
    let after: Vec<u64> = marks.iter().map(|mark| mark.after_sequence).collect();
    assert_eq!(after, [1, 2], "each mark after the log's last event when written");
    let merged: Vec<String> = RunMark::merge(session.events.into_vec(), marks)
        .iter()
        .map(|e| match (&e.actions.agent_state, e.actions.end_of_agent) {
            (Some(state), _) => format!("{}:{}", e.author, serde_json::Value::Object(state.clone())),
            (None, Some(true)) => format!("{}:end", e.author),
            _ => e.content().and_then(Content::text).unwrap_or_default(),
        })
        .collect();
    assert_eq!(
        merged,
        ["one", r#"steps:{"current_sub_agent":"b"}"#, "two", "steps:end"]
    );

    lease.release(&key, "e-1").await.unwrap();
    sessions
        .delete(DeleteRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
        })
        .await
        .unwrap();
    sessions.create(create).await.expect("the id again");
    assert!(
        sessions.run_marks(marks_request).await.unwrap().is_empty(),
        "the marks went with the deleted session"
    );
}

#[tokio::test]
async fn run_marks_are_kept_beside_the_log_in_memory() {
    let backend = InMemorySessionBackend::new();
    let lease = backend.leases();
    let sessions = CoreSessionService::new(backend);
    run_marks_are_kept_beside_the_log_under_the_lease(&sessions, &lease).await;
}

#[tokio::test]
async fn run_marks_are_kept_beside_the_log_on_redis() {
    let server = RedisServer::start().await;
    let (sessions, lease) = redis_sessions_and_lease(&server.url()).await;
    run_marks_are_kept_beside_the_log_under_the_lease(&sessions, &lease).await;
}

#[tokio::test]
async fn run_marks_are_kept_beside_the_log_on_a_cluster() {
    let cluster = RedisCluster::start(3).await;
    let (sessions, lease) = redis_sessions_and_lease(&cluster.url()).await;
    run_marks_are_kept_beside_the_log_under_the_lease(&sessions, &lease).await;
}
