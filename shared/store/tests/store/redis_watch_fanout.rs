//! WatchSession fan-out on a real redis-server and a real Redis Cluster: however many
//! watchers a process serves, on one session or on many, it holds the same Redis
//! connections, and every watcher gets every event.

use adk_grpc_core::CoreSessionService;
use adk_grpc_core::{AppendEventRequest, Content, CreateRequest, Event, EventStream, SessionService, WatchRequest};
use adk_grpc_store::{RedisSessionBackend, StoreConfig};
use adk_grpc_testkit::{RedisCluster, RedisServer, eventually, unique_prefix};
use futures::StreamExt;
use std::time::Duration;

/// Connections to the server(s) at `urls` (clients connected to each node, summed).
async fn connected_clients(urls: &[String]) -> u64 {
    let mut total = 0;
    for url in urls {
        let client = redis::Client::open(url.as_str()).expect("url");
        let mut conn = adk_grpc_testkit::patient_connection(&client).await.expect("connect");
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query_async(&mut conn)
            .await
            .expect("INFO");
        let line = info
            .lines()
            .find_map(|line| line.strip_prefix("connected_clients:"))
            .expect("connected_clients");
        // Our own connection for this question does not count.
        total += line.trim().parse::<u64>().expect("a count") - 1;
    }
    total
}

async fn create(svc: &CoreSessionService<RedisSessionBackend>, app: &str, session: &str) {
    svc.create(CreateRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: Some(session.into()),
        ..Default::default()
    })
    .await
    .expect("create");
}

async fn append(svc: &CoreSessionService<RedisSessionBackend>, app: &str, session: &str, text: &str) -> Event {
    svc.append_event(AppendEventRequest {
        timestamp_missing: false,
        app_name: app.into(),
        user_id: "u".into(),
        session_id: session.into(),
        event: Event::new("e-fanout")
            .with_author("agent")
            .with_content(Content::new("model").with_text(text)),
        precondition: None,
    })
    .await
    .expect("append")
}

async fn watch(svc: &CoreSessionService<RedisSessionBackend>, app: &str, session: &str) -> EventStream {
    svc.watch(WatchRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: session.into(),
        after_sequence: None,
    })
    .await
    .expect("watch")
}

async fn next(stream: &mut EventStream) -> Event {
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("an event within 20 s")
        .expect("the watch is open")
        .expect("not an error")
}

/// 10 watchers, then 1,000 more (half on one session, half on 50 others): the
/// process's Redis connections stay the same, and every watcher gets its event.
async fn watchers_share_the_connections(svc: &CoreSessionService<RedisSessionBackend>, node_urls: &[String]) {
    let app = unique_prefix("fanout");
    let sessions: Vec<String> = (0..=50).map(|i| format!("s{i}")).collect();
    for session in &sessions {
        create(svc, &app, session).await;
    }
    let mut few = Vec::new();
    for _ in 0..10 {
        few.push(watch(svc, &app, "s0").await);
    }
    append(svc, &app, "s0", "warm-up").await;
    for stream in &mut few {
        assert_eq!(next(stream).await.sequence, 1);
    }
    // Settled: the subscriber connections of the process are up (they start in the background).
    let previous = std::sync::Mutex::new(None);
    let with_few = eventually(Duration::from_secs(10), || async {
        let now = connected_clients(node_urls).await;
        match previous.lock().unwrap().replace(now) {
            Some(before) if before == now => Ok(now),
            before => Err(format!("{before:?} then {now}: not settled")),
        }
    })
    .await;

    let mut many = Vec::new();
    for i in 0..1_000 {
        let session = if i % 2 == 0 {
            "s0"
        } else {
            sessions[1 + i % 50].as_str()
        };
        many.push((session.to_string(), watch(svc, &app, session).await));
    }
    let with_many = connected_clients(node_urls).await;
    assert_eq!(
        with_many, with_few,
        "1,010 watchers hold as many Redis connections as 10"
    );
    for session in &sessions {
        append(svc, &app, session, "for everyone").await;
    }
    let got = futures::future::join_all(many.iter_mut().map(|(session, stream)| async move {
        let event = next(stream).await;
        (session.clone(), event)
    }))
    .await;
    for (session, event) in got {
        let want = if session == "s0" { 2 } else { 1 };
        assert_eq!(event.sequence, want, "{session}");
        assert_eq!(event.content().and_then(Content::text).as_deref(), Some("for everyone"));
    }
    for stream in &mut few {
        assert_eq!(next(stream).await.sequence, 2);
    }
    assert_eq!(connected_clients(node_urls).await, with_few);
}

#[tokio::test]
async fn watchers_share_one_reader_per_process_on_redis() {
    let server = RedisServer::start().await;
    let svc = RedisSessionBackend::connect_service(&server.url(), StoreConfig::default())
        .await
        .expect("connect");
    watchers_share_the_connections(&svc, &[server.url()]).await;
}

#[tokio::test]
async fn watchers_share_one_reader_per_process_on_a_cluster() {
    let cluster = RedisCluster::start(3).await;
    let svc = RedisSessionBackend::connect_service(&cluster.url(), StoreConfig::default())
        .await
        .expect("connect");
    watchers_share_the_connections(&svc, &cluster.node_urls()).await;
}
