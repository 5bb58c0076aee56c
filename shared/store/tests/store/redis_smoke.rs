//! Smoke tests of `RedisSessionBackend` against a real `redis-server` (standalone
//! and a 3-node cluster). The complete behaviour is checked by the shared
//! conformance suite; these prove the Redis-specific parts: the data model on
//! both topologies, TTL expiry, and surviving a Redis crash.

use adk_grpc_core::CoreSessionService;
use adk_grpc_core::{
    AdkError, AppendEventRequest, Content, CreateRequest, DeleteRequest, Event, GetRequest, ListEventsRequest,
    ListRequest, Precondition, SessionService, WatchRequest,
};
use adk_grpc_store::{RedisSessionBackend, StoreConfig};
use adk_grpc_testkit::{RedisCluster, RedisServer, eventually, unique_prefix};
use futures::StreamExt;
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::{Instant, timeout};

/// Asserts the error is the given `AdkError` variant, showing it otherwise.
macro_rules! assert_kind {
    ($err:expr, $kind:ident) => {{
        let err: &AdkError = &$err;
        assert!(
            matches!(err, AdkError::$kind { .. }),
            "expected {}, got {err:?}",
            stringify!($kind)
        );
    }};
}

async fn connect(url: &str) -> CoreSessionService<RedisSessionBackend> {
    RedisSessionBackend::connect_service(url, StoreConfig::default())
        .await
        .expect("connect to test redis")
}

fn create_req(app: &str, user: &str, id: &str, state: serde_json::Value) -> CreateRequest {
    let state: HashMap<String, serde_json::Value> = serde_json::from_value(state).unwrap();
    CreateRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: Some(id.into()),
        state,
        ttl: None,
    }
}

fn get_req(app: &str, user: &str, id: &str) -> GetRequest {
    GetRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        ..Default::default()
    }
}

fn append_req(app: &str, user: &str, id: &str, event: Event) -> AppendEventRequest {
    AppendEventRequest {
        timestamp_missing: false,
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        event,
        precondition: None,
    }
}

fn text_event(text: &str) -> Event {
    Event::new("e-1")
        .with_author("user")
        .with_content(Content::new("user").with_text(text))
}

/// Create / get / append / list / list_events / delete on any topology.
async fn basics(svc: &CoreSessionService<RedisSessionBackend>) {
    let app = unique_prefix("basics");
    let created = svc
        .create(create_req(
            &app,
            "alice",
            "s1",
            json!({"topic": "x", "user:lang": "en", "app:theme": "dark", "temp:step": 1}),
        ))
        .await
        .unwrap();
    assert_eq!(created.id, "s1");
    assert_eq!(created.state.as_map().get("topic"), Some(&json!("x")));
    assert_eq!(created.state.as_map().get("user:lang"), Some(&json!("en")));
    assert_eq!(created.state.as_map().get("app:theme"), Some(&json!("dark")));
    assert_eq!(created.state.len(), 3, "temp: keys are dropped");
    assert_eq!(created.last_update_time, created.create_time);
    assert!(created.events.is_empty());

    let again = svc
        .create(create_req(&app, "alice", "s1", json!({})))
        .await
        .unwrap_err();
    assert_kind!(again, AlreadyExists);

    // A generated id, and a second user's session to see user: scoping.
    let generated = svc
        .create(CreateRequest {
            app_name: app.clone(),
            user_id: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(uuid::Uuid::parse_str(&generated.id).is_ok());
    svc.create(create_req(&app, "bob", "s1", json!({}))).await.unwrap();

    // Appends: sequence, scoped deltas, temp: trimmed, idempotent, preconditions.
    let first = text_event("hello")
        .with_state_delta("topic", json!("y"))
        .with_state_delta("user:lang", json!("fr"))
        .with_state_delta("app:theme", json!("light"))
        .with_state_delta("temp:scratch", json!(true))
        .with_state_delta("n", json!(null));
    let stored = svc
        .append_event(append_req(&app, "alice", "s1", first.clone()))
        .await
        .unwrap();
    assert_eq!(stored.sequence, 1);
    assert_eq!(stored.id, first.id);
    assert_eq!(stored.timestamp, first.timestamp);
    assert!(!stored.actions.state_delta.contains_key("temp:scratch"));
    assert_eq!(stored.actions.state_delta.len(), 4);

    let retry = svc
        .append_event(append_req(&app, "alice", "s1", first.clone()))
        .await
        .unwrap();
    assert_eq!(retry, stored, "re-appending an event id returns the stored event");

    let mut no_id = text_event("second");
    no_id.id = String::new();
    let mut req = append_req(&app, "alice", "s1", no_id);
    req.precondition = Some(Precondition::LastSequence(1));
    let second = svc.append_event(req).await.unwrap();
    assert_eq!(second.sequence, 2);
    assert!(uuid::Uuid::parse_str(&second.id).is_ok());

    let mut stale = append_req(&app, "alice", "s1", text_event("stale"));
    stale.precondition = Some(Precondition::LastEventId(first.id.clone()));
    assert_kind!(svc.append_event(stale).await.unwrap_err(), Aborted);
    let mut stale = append_req(&app, "alice", "s1", text_event("stale"));
    stale.precondition = Some(Precondition::LastSequence(1));
    assert_kind!(svc.append_event(stale).await.unwrap_err(), Aborted);

    let mut partial = text_event("chunk");
    partial.llm_response.partial = Some(true);
    let echoed = svc
        .append_event(append_req(&app, "alice", "s1", partial.clone()))
        .await
        .unwrap();
    assert_eq!(echoed, partial);

    let missing = svc
        .append_event(append_req(&app, "alice", "nope", text_event("x")))
        .await
        .unwrap_err();
    assert_kind!(missing, NotFound);

    // Get: merged state read fresh, events filtered.
    let session = svc.get(get_req(&app, "alice", "s1")).await.unwrap();
    assert_eq!(session.event_count, 2);
    assert_eq!(session.events.as_slice(), [stored.clone(), second.clone()]);
    assert_eq!(session.last_update_time, second.timestamp);
    assert_eq!(session.state.as_map().get("topic"), Some(&json!("y")));
    assert_eq!(session.state.as_map().get("n"), Some(&json!(null)));
    assert_eq!(session.state.as_map().get("user:lang"), Some(&json!("fr")));
    assert_eq!(session.state.as_map().get("app:theme"), Some(&json!("light")));
    let other = svc.get(get_req(&app, "alice", &generated.id)).await.unwrap();
    assert_eq!(
        other.state.as_map().get("user:lang"),
        Some(&json!("fr")),
        "user: state is shared"
    );
    let bob = svc.get(get_req(&app, "bob", "s1")).await.unwrap();
    assert_eq!(bob.state.as_map().get("user:lang"), None);
    assert_eq!(
        bob.state.as_map().get("app:theme"),
        Some(&json!("light")),
        "app: state is shared"
    );

    let recent = svc
        .get(GetRequest {
            num_recent_events: Some(1),
            ..get_req(&app, "alice", "s1")
        })
        .await
        .unwrap();
    assert_eq!(recent.events.as_slice(), std::slice::from_ref(&second));
    let none = svc
        .get(GetRequest {
            num_recent_events: Some(0),
            ..get_req(&app, "alice", "s1")
        })
        .await
        .unwrap();
    assert!(none.events.is_empty());
    let after = svc
        .get(GetRequest {
            after: Some(second.timestamp),
            ..get_req(&app, "alice", "s1")
        })
        .await
        .unwrap();
    assert_eq!(after.events.as_slice(), std::slice::from_ref(&second));
    let missing = svc.get(get_req(&app, "alice", "nope")).await.unwrap_err();
    assert_kind!(missing, NotFound);
    assert!(missing.to_string().contains("session nope not found"), "{missing}");

    // ListEvents in pages, both directions.
    let page = svc
        .list_events(ListEventsRequest {
            app_name: app.clone(),
            user_id: "alice".into(),
            session_id: "s1".into(),
            page_size: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events.as_slice(), std::slice::from_ref(&stored));
    let page = svc
        .list_events(ListEventsRequest {
            app_name: app.clone(),
            user_id: "alice".into(),
            session_id: "s1".into(),
            page_size: 1,
            page_token: page.next_page_token,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events.as_slice(), std::slice::from_ref(&second));
    assert_eq!(page.next_page_token, None);
    let newest = svc
        .list_events(ListEventsRequest {
            app_name: app.clone(),
            user_id: "alice".into(),
            session_id: "s1".into(),
            newest_first: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(newest.events.as_slice(), [second.clone(), stored.clone()]);

    // Listings: one user, and the whole app, oldest update first, in pages.
    let alice = svc
        .list(ListRequest {
            app_name: app.clone(),
            user_id: Some("alice".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let ids: Vec<&str> = alice.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [generated.id.as_str(), "s1"]);
    assert!(alice.sessions.iter().all(|s| s.events.is_empty()));
    assert_eq!(alice.sessions[1].state.as_map().get("topic"), Some(&json!("y")));
    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let page = svc
            .list(ListRequest {
                app_name: app.clone(),
                user_id: None,
                page_size: 2,
                page_token: token,
            })
            .await
            .unwrap();
        seen.extend(page.sessions.iter().map(|s| format!("{}:{}", s.user_id, s.id)));
        token = page.next_page_token;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(
        seen,
        [format!("alice:{}", generated.id), "bob:s1".into(), "alice:s1".into()]
    );

    // Delete: gone everywhere; deleting again succeeds.
    let delete = DeleteRequest {
        app_name: app.clone(),
        user_id: "alice".into(),
        session_id: "s1".into(),
    };
    svc.delete(delete.clone()).await.unwrap();
    svc.delete(delete).await.unwrap();
    assert_kind!(svc.get(get_req(&app, "alice", "s1")).await.unwrap_err(), NotFound);
    let all = svc
        .list(ListRequest {
            app_name: app.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.sessions.len(), 2);
    let events = svc
        .list_events(ListEventsRequest {
            app_name: app.clone(),
            user_id: "alice".into(),
            session_id: "s1".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_kind!(events, NotFound);
    // A new session under the deleted id starts a fresh log.
    svc.create(create_req(&app, "alice", "s1", json!({}))).await.unwrap();
    let fresh = svc
        .append_event(append_req(&app, "alice", "s1", text_event("again")))
        .await
        .unwrap();
    assert_eq!(fresh.sequence, 1);

    // Bad ids never reach Redis; ids with key syntax are just ids.
    let bad = svc.get(get_req(&app, "alice", "a\nb")).await.unwrap_err();
    assert_kind!(bad, InvalidArgument);
    let hostile = svc.get(get_req(&app, "alice", "a}b")).await.unwrap_err();
    assert_kind!(hostile, NotFound);
    svc.ping().await.unwrap();
}

async fn next(stream: &mut adk_grpc_core::EventStream) -> adk_grpc_core::Result<Event> {
    timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("watch timed out")
        .expect("stream ended")
}

/// Watch: replay after a sequence, live events, end when the session is deleted.
async fn watching(svc: &CoreSessionService<RedisSessionBackend>) {
    let app = unique_prefix("watch");
    svc.create(create_req(&app, "u", "s", json!({}))).await.unwrap();
    let e1 = svc
        .append_event(append_req(&app, "u", "s", text_event("1")))
        .await
        .unwrap();
    let e2 = svc
        .append_event(append_req(&app, "u", "s", text_event("2")))
        .await
        .unwrap();
    let watch = |after_sequence| WatchRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        after_sequence,
    };
    let mut replay = svc.watch(watch(Some(0))).await.unwrap();
    let mut live = svc.watch(watch(None)).await.unwrap();
    assert_eq!(next(&mut replay).await.unwrap(), e1);
    assert_eq!(next(&mut replay).await.unwrap(), e2);
    let e3 = svc
        .append_event(append_req(&app, "u", "s", text_event("3")))
        .await
        .unwrap();
    assert_eq!(next(&mut replay).await.unwrap(), e3);
    assert_eq!(next(&mut live).await.unwrap(), e3, "None watches from now");
    drop(replay);

    let missing = svc
        .watch(WatchRequest {
            session_id: "nope".into(),
            ..watch(None)
        })
        .await
        .err()
        .expect("watching a missing session fails");
    assert_kind!(missing, NotFound);

    svc.delete(DeleteRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
    })
    .await
    .unwrap();
    let end = next(&mut live).await.unwrap_err();
    assert_kind!(end, NotFound);
    let after_end = timeout(Duration::from_secs(10), live.next())
        .await
        .expect("stream ends");
    assert!(after_end.is_none());
}

#[tokio::test]
async fn standalone_basics_and_watch() {
    let server = RedisServer::start().await;
    let svc = connect(&server.url()).await;
    basics(&svc).await;
    watching(&svc).await;
}

async fn connected_clients(server: &RedisServer) -> usize {
    let mut conn = server.connection().await;
    let info: String = redis::cmd("INFO").arg("clients").query_async(&mut conn).await.unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO clients reports connected_clients")
}

/// Watches share the process's connections (`watch_hub.rs`): opening and dropping
/// one changes no connection count, and a dropped watch stops receiving.
#[tokio::test]
async fn a_watch_opens_no_connection_of_its_own() {
    let server = RedisServer::start().await;
    let svc = connect(&server.url()).await;
    let app = unique_prefix("drop");
    svc.create(create_req(&app, "u", "s", json!({}))).await.unwrap();
    let watch = || WatchRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        after_sequence: None,
    };
    // A first watch and event: the process's subscriber connections are up.
    let mut first = svc.watch(watch()).await.unwrap();
    svc.append_event(append_req(&app, "u", "s", text_event("one")))
        .await
        .unwrap();
    timeout(Duration::from_secs(10), first.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let before = connected_clients(&server).await;
    let streams: Vec<_> = futures::future::join_all((0..20).map(|_| svc.watch(watch()))).await;
    assert_eq!(connected_clients(&server).await, before, "no connection per watch");
    drop(streams);
    drop(first);
    assert_eq!(connected_clients(&server).await, before);
}

#[tokio::test]
async fn cluster_basics_and_watch() {
    let cluster = RedisCluster::start(3).await;
    let svc = connect(&cluster.url()).await;
    basics(&svc).await;
    watching(&svc).await;
}

#[tokio::test]
async fn expired_sessions_leave_the_listings() {
    let server = RedisServer::start().await;
    let config = StoreConfig {
        default_session_ttl: Some(Duration::from_millis(400)),
        ..Default::default()
    };
    let svc = RedisSessionBackend::connect_service(&server.url(), config)
        .await
        .unwrap();
    let app = unique_prefix("ttl");
    let short = svc
        .create(create_req(&app, "u", "short", json!({"user:kept": 1})))
        .await
        .unwrap();
    assert!(short.expire_time.is_some());
    let mut long = create_req(&app, "u", "long", json!({}));
    long.ttl = Some(Duration::from_secs(3600));
    svc.create(long).await.unwrap();
    let listed = svc
        .list(ListRequest {
            app_name: app.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.sessions.len(), 2);

    eventually(Duration::from_secs(10), || async {
        match svc.get(get_req(&app, "u", "short")).await {
            Err(AdkError::NotFound(..)) => Ok(()),
            other => Err(format!("the short session has not expired: {other:?}")),
        }
    })
    .await;
    for user in [None, Some("u".to_string())] {
        let listed = svc
            .list(ListRequest {
                app_name: app.clone(),
                user_id: user,
                ..Default::default()
            })
            .await
            .unwrap();
        let ids: Vec<&str> = listed.sessions.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["long"]);
        assert_eq!(
            listed.sessions[0].state.as_map().get("user:kept"),
            Some(&json!(1)),
            "user state outlives a session"
        );
    }
    // The listings removed the expired members from both indexes.
    let mut conn = server.connection().await;
    let members: usize = redis::cmd("ZCARD")
        .arg(format!("adk:appidx:{{{app}}}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(members, 1);
    let members: usize = redis::cmd("ZCARD")
        .arg(format!("adk:idx:{{{app}:u}}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(members, 1);
}

#[tokio::test]
async fn a_redis_crash_is_survived_without_a_new_service() {
    let mut server = RedisServer::start().await;
    let svc = connect(&server.url()).await;
    let app = unique_prefix("crash");
    svc.create(create_req(&app, "u", "s", json!({"k": "v"}))).await.unwrap();
    let before = svc
        .append_event(append_req(&app, "u", "s", text_event("before")))
        .await
        .unwrap();

    server.kill9().await;
    let started = Instant::now();
    let down = svc.get(get_req(&app, "u", "s")).await.unwrap_err();
    assert_kind!(down, Unavailable);
    assert!(started.elapsed() < Duration::from_secs(8), "outage errors come quickly");
    let down = svc
        .append_event(append_req(&app, "u", "s", text_event("during")))
        .await
        .unwrap_err();
    assert_kind!(down, Unavailable);
    assert_kind!(svc.ping().await.unwrap_err(), Unavailable);

    server.restart().await;
    let session = eventually(Duration::from_secs(15), || async {
        match svc.get(get_req(&app, "u", "s")).await {
            Ok(session) => Ok(session),
            Err(err) if err.is_retryable() => Err(format!("redis restarted but the service still fails: {err}")),
            Err(err) => panic!("redis restarted but the service fails for good: {err}"),
        }
    })
    .await;
    assert_eq!(session.events.as_slice(), [before]);
    assert_eq!(session.state.as_map().get("k"), Some(&json!("v")));
    // Scripts are loaded again after the restart emptied Redis's script cache.
    let after = svc
        .append_event(append_req(&app, "u", "s", text_event("after")))
        .await
        .unwrap();
    assert_eq!(after.sequence, 2);
    svc.ping().await.unwrap();
}

mod conformance_standalone {
    use super::*;
    adk_grpc_testkit::session_conformance_tests!({
        let server = adk_grpc_testkit::shared::redis().await;
        adk_grpc_testkit::Fixture::sessions(connect(&server.url()).await).keeping(server)
    });
}

mod conformance_cluster {
    use super::*;
    adk_grpc_testkit::session_conformance_tests!({
        let cluster = adk_grpc_testkit::shared::cluster().await;
        adk_grpc_testkit::Fixture::sessions(connect(&cluster.url()).await).keeping(cluster)
    });
}

/// A store on a replicated deployment, waiting for its replicas as long as the store
/// allows: the suite checks rules, not how fast a loaded test machine replicates.
async fn connect_replicated(url: &str) -> CoreSessionService<RedisSessionBackend> {
    let config = StoreConfig {
        replica_acks: adk_grpc_store::ReplicaAcks {
            timeout: adk_grpc_store::durability::MAX_REPLICA_ACK_TIMEOUT,
            ..Default::default()
        },
        ..StoreConfig::default()
    };
    RedisSessionBackend::connect_service(url, config)
        .await
        .expect("connect to test redis")
}

/// Replicated deployments: every write waits for the replica (`auto`), and watches
/// deliver only confirmed events; the rules are the same.
mod conformance_primary_with_replica {
    use super::*;
    adk_grpc_testkit::session_conformance_tests!({
        let pair = adk_grpc_testkit::shared::primary_replica().await;
        adk_grpc_testkit::Fixture::sessions(connect_replicated(&pair.primary.url()).await).keeping(pair)
    });
}

mod conformance_cluster_with_replicas {
    use super::*;
    adk_grpc_testkit::session_conformance_tests!({
        let cluster = adk_grpc_testkit::shared::cluster_with_replicas().await;
        adk_grpc_testkit::Fixture::sessions(connect_replicated(&cluster.url()).await).keeping(cluster)
    });
}
