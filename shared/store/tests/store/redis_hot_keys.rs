//! No app-wide hot key on the request path of a Redis Cluster: appends, creates and
//! reads of different users of one app touch only their own user's node (except
//! explicit `app:` state writes and app-wide listings), proved by counting the
//! commands every node of a real 3-master cluster receives from clients (`MONITOR`).

use adk_grpc_core::CoreSessionService;
use adk_grpc_core::{AppendEventRequest, CreateRequest, Event, GetRequest, ListRequest, SessionService};
use adk_grpc_store::{RedisSessionBackend, StoreConfig};
use adk_grpc_testkit::{RedisCluster, unique_prefix};
use futures::{StreamExt, TryStreamExt, stream};
use std::collections::BTreeMap;

/// In-flight calls of the load the tests generate.
const CONCURRENCY: usize = 64;

async fn connect(url: &str) -> CoreSessionService<RedisSessionBackend> {
    RedisSessionBackend::connect_service(url, StoreConfig::default())
        .await
        .expect("connect to the test cluster")
}

fn user(i: usize) -> String {
    format!("u{i}")
}

fn create_req(app: &str, user: &str) -> CreateRequest {
    CreateRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: Some("s".into()),
        ..Default::default()
    }
}

fn get_req(app: &str, user: &str) -> GetRequest {
    GetRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: "s".into(),
        num_recent_events: Some(1),
        ..Default::default()
    }
}

fn append_req(app: &str, user: &str, n: usize) -> AppendEventRequest {
    let mut event = Event::new("inv").with_author("user");
    event.actions.state_delta.insert("n".into(), n.into());
    event.actions.state_delta.insert("user:last".into(), n.into());
    AppendEventRequest {
        timestamp_missing: false,
        app_name: app.into(),
        user_id: user.into(),
        session_id: "s".into(),
        event,
        precondition: None,
    }
}

fn node(port: u16) -> redis::Client {
    redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap()
}

/// The last command a [`Monitors`] waits for on each node.
const END_MARKER: &str = "adk-test-monitor-end";

/// `MONITOR` on every node of a cluster: counts the commands each node receives from
/// clients, per command (lower case). Commands Lua scripts run are not counted: they
/// are part of the one script call a client sent.
struct Monitors {
    tasks: Vec<(u16, tokio::task::JoinHandle<BTreeMap<String, u64>>)>,
}

impl Monitors {
    /// Returns once every node has acknowledged `MONITOR`: later commands are counted.
    async fn start(cluster: &RedisCluster) -> Monitors {
        let mut tasks = Vec::new();
        for port in cluster.ports() {
            let monitor = node(port).get_async_monitor().await.expect("MONITOR");
            let task = tokio::spawn(async move {
                let mut lines = std::pin::pin!(monitor.into_on_message::<String>());
                let mut calls = BTreeMap::new();
                while let Some(line) = lines.next().await {
                    if line.contains(END_MARKER) {
                        break;
                    }
                    // 1700000000.123456 [0 127.0.0.1:54321] "EVALSHA" "…" … (`[0 lua]` inside scripts)
                    let Some((source, command)) = line.split_once("] ") else {
                        continue;
                    };
                    if source.ends_with(" lua") {
                        continue;
                    }
                    let name = command.split('"').nth(1).unwrap_or_default().to_lowercase();
                    *calls.entry(name).or_insert(0) += 1;
                }
                calls
            });
            tasks.push((port, task));
        }
        Monitors { tasks }
    }

    /// Sends the end marker to every node and returns what each one received before it.
    async fn finish(self) -> BTreeMap<u16, BTreeMap<String, u64>> {
        let mut all = BTreeMap::new();
        for (port, task) in self.tasks {
            let mut conn = adk_grpc_testkit::patient_connection(&node(port)).await.unwrap();
            let _: String = redis::cmd("ECHO").arg(END_MARKER).query_async(&mut conn).await.unwrap();
            let mut calls = task.await.expect("monitor task");
            calls.remove("echo");
            all.insert(port, calls);
        }
        all
    }
}

/// 10,000 appends by 1,000 users of one app and one GetSession per user: no node
/// receives a command for every append (the old layout sent every append's `ZADD` to
/// the app index and every read's `HGETALL` of app state to one node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_and_reads_of_one_app_touch_only_their_users_nodes() {
    const USERS: usize = 1_000;
    const APPENDS: usize = 10_000;
    let cluster = RedisCluster::start(3).await;
    let svc = connect(&cluster.url()).await;
    let app = unique_prefix("hot");
    stream::iter(0..USERS)
        .map(|i| svc.create(create_req(&app, &user(i))))
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("create");

    let monitors = Monitors::start(&cluster).await;
    stream::iter(0..APPENDS)
        .map(|n| svc.append_event(append_req(&app, &user(n % USERS), n)))
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("append");
    let sessions: Vec<_> = stream::iter(0..USERS)
        .map(|i| svc.get(get_req(&app, &user(i))))
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await
        .expect("get");
    let stats = monitors.finish().await;

    let events: u64 = sessions.iter().map(|s| s.event_count).sum();
    assert_eq!(events, APPENDS as u64, "every append was stored");
    for (port, calls) in &stats {
        println!("node {port}: {calls:?}");
    }
    // The counts measure what the test thinks: every append and read is one script call.
    let scripts: u64 = stats.values().filter_map(|calls| calls.get("evalsha")).sum();
    assert!(
        scripts >= (APPENDS + USERS) as u64,
        "{scripts} script calls for {APPENDS} appends and {USERS} reads"
    );
    for (port, calls) in &stats {
        for (command, count) in calls {
            assert!(
                *count < APPENDS as u64,
                "node {port} received {count} {command} for {APPENDS} appends: {calls:?}"
            );
        }
        let app_state_reads = calls.get("hgetall").copied().unwrap_or(0);
        assert!(
            app_state_reads < USERS as u64,
            "node {port} received {app_state_reads} HGETALL for {USERS} reads: {calls:?}"
        );
    }

    // The app-wide listing merges the shards of about a thousand slots.
    let started = std::time::Instant::now();
    let mut listed = Vec::new();
    let mut page_token = None;
    loop {
        let page = svc
            .list(ListRequest {
                app_name: app.clone(),
                user_id: None,
                page_size: 100,
                page_token,
            })
            .await
            .expect("list");
        // Listing order: update time, then the index member `user:session`.
        listed.extend(
            page.sessions
                .into_iter()
                .map(|s| (s.last_update_time.timestamp_micros(), format!("{}:{}", s.user_id, s.id))),
        );
        page_token = page.next_page_token;
        if page_token.is_none() {
            break;
        }
    }
    println!(
        "app-wide listing of {} sessions in pages of 100: {:?}",
        listed.len(),
        started.elapsed()
    );
    assert_eq!(listed.len(), USERS, "every session is listed once");
    assert!(listed.is_sorted(), "oldest update first");
}

fn app_write(app: &str, user: &str, value: i64) -> AppendEventRequest {
    let mut event = Event::new("inv").with_author("user");
    event.actions.state_delta.insert("app:x".into(), value.into());
    AppendEventRequest {
        timestamp_missing: false,
        app_name: app.into(),
        user_id: user.into(),
        session_id: "s".into(),
        event,
        precondition: None,
    }
}

async fn app_x(svc: &CoreSessionService<RedisSessionBackend>, app: &str, user: &str) -> Option<serde_json::Value> {
    let session = svc.get(get_req(app, user)).await.expect("get");
    session.state.as_map().get("app:x").cloned()
}

/// Processes subscribed to `app:` state changes, over every node of the cluster.
async fn app_state_subscribers(cluster: &RedisCluster) -> u64 {
    let mut total = 0;
    for port in cluster.ports() {
        let mut conn = adk_grpc_testkit::patient_connection(&node(port)).await.unwrap();
        let counts: Vec<(String, u64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("adk:app-state")
            .query_async(&mut conn)
            .await
            .unwrap();
        total += counts.iter().map(|(_, n)| n).sum::<u64>();
    }
    total
}

/// `HGETALL`s (app state loads) the whole cluster receives from clients while `svc`
/// reads `user`'s session `reads` times.
async fn app_state_loads(
    cluster: &RedisCluster,
    svc: &CoreSessionService<RedisSessionBackend>,
    app: &str,
    user: &str,
    reads: usize,
) -> u64 {
    let monitors = Monitors::start(cluster).await;
    for _ in 0..reads {
        svc.get(get_req(app, user)).await.expect("get");
    }
    let stats = monitors.finish().await;
    stats.values().filter_map(|calls| calls.get("hgetall")).sum()
}

/// Two processes (two store objects) on one cluster: an `app:` write through A is read
/// back through A at once and through B within the pub/sub delivery time; B's reads are
/// served by its cache, not by a round trip to the app's node each; when B's
/// subscription is killed, B still reads fresh values, resubscribes and caches again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_state_is_cached_per_process_and_kept_fresh() {
    const READS: usize = 200;
    let cluster = RedisCluster::start(3).await;
    let a = connect(&cluster.url()).await;
    let b = connect(&cluster.url()).await;
    let app = unique_prefix("fresh");
    a.create(create_req(&app, "alice")).await.expect("create");
    let deadline = std::time::Duration::from_secs(10);
    let subscribed = |expected: u64| {
        let cluster = &cluster;
        async move {
            adk_grpc_testkit::eventually(deadline, || async {
                match app_state_subscribers(cluster).await {
                    n if n == expected => Ok(()),
                    n => Err(format!("{n} of {expected} processes subscribed")),
                }
            })
            .await
        }
    };
    let b_reads = |expected: i64| {
        let (b, app) = (&b, &app);
        async move {
            adk_grpc_testkit::eventually(deadline, || async {
                match app_x(b, app, "alice").await {
                    Some(x) if x == expected => Ok(()),
                    other => Err(format!("B reads app:x = {other:?}, not {expected}")),
                }
            })
            .await
        }
    };
    subscribed(2).await;

    assert_eq!(app_x(&a, &app, "alice").await, None);
    assert_eq!(app_x(&b, &app, "alice").await, None);
    a.append_event(app_write(&app, "alice", 1)).await.expect("append");
    assert_eq!(
        app_x(&a, &app, "alice").await,
        Some(1.into()),
        "the writer reads its write"
    );
    b_reads(1).await;
    let loads = app_state_loads(&cluster, &b, &app, "alice", READS).await;
    assert!(loads < READS as u64, "{loads} app state loads for {READS} reads");

    let mut killed = 0;
    for port in cluster.ports() {
        let mut conn = adk_grpc_testkit::patient_connection(&node(port)).await.unwrap();
        let n: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(&mut conn)
            .await
            .unwrap();
        killed += n;
    }
    // Each process subscribes once here: app state. Its watchers' appends (`watch_hub.rs`)
    // only from its first watch on, and neither process watches.
    assert_eq!(killed, 2, "both processes' subscriptions were killed");
    a.append_event(app_write(&app, "alice", 2)).await.expect("append");
    b_reads(2).await;
    subscribed(2).await;
    a.append_event(app_write(&app, "alice", 3)).await.expect("append");
    b_reads(3).await;
    let loads = app_state_loads(&cluster, &b, &app, "alice", READS).await;
    assert!(
        loads < READS as u64,
        "after resubscribing: {loads} app state loads for {READS} reads"
    );
}

/// UpdateAppState is an `app:` writer like any other: it publishes the app's name on the
/// cache channel (a subscriber hears it), the writing process reads its write at once, and
/// another process drops the value it had cached. The app name holds `:`, `{` and `/`:
/// the message carries it as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_app_state_is_published_to_every_process() {
    let cluster = RedisCluster::start(3).await;
    let a = connect(&cluster.url()).await;
    let b = connect(&cluster.url()).await;
    let app = format!("{}:{{tenant}}/42", unique_prefix("update"));
    a.create(create_req(&app, "alice")).await.expect("create");
    assert_eq!(app_x(&b, &app, "alice").await, None, "B caches the state without app:x");

    let mut listener = node(cluster.ports()[0]).get_async_pubsub().await.unwrap();
    listener.subscribe("adk:app-state").await.unwrap();
    let update = adk_grpc_core::UpdateAppStateRequest {
        app_name: app.clone(),
        state_delta: [("app:x".to_string(), 7.into())].into(),
    };
    let state = a.update_app_state(update).await.expect("update");
    assert_eq!(state.get("x"), Some(&7.into()));
    assert_eq!(
        app_x(&a, &app, "alice").await,
        Some(7.into()),
        "the writer reads its write"
    );

    let deadline = std::time::Duration::from_secs(10);
    let heard = tokio::time::timeout(deadline, async {
        let mut messages = listener.on_message();
        while let Some(message) = messages.next().await {
            if message.get_payload::<String>().ok().as_deref() == Some(app.as_str()) {
                return;
            }
        }
    })
    .await;
    assert!(heard.is_ok(), "the app's name was published");
    adk_grpc_testkit::eventually(deadline, || async {
        match app_x(&b, &app, "alice").await {
            Some(x) if x == 7 => Ok(()),
            other => Err(format!("B reads app:x = {other:?}")),
        }
    })
    .await;
}

/// 3,000 IngestEvents by 300 users of one app: their index of due users is sharded (16
/// shards over the nodes, a user's by its slot), so no node receives an index write for
/// every ingest, as one index key per app would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingests_of_one_app_spread_their_index_writes_over_the_nodes() {
    use adk_grpc_core::memory::{GenerationConfig, IngestEventsRequest};
    use adk_grpc_core::{Content, CoreMemoryService, MemoryService};
    const USERS: usize = 300;
    const INGESTS: usize = 3_000;
    let cluster = RedisCluster::start(3).await;
    // Never asked: ingesting buffers, and nothing here generates.
    let model = adk_grpc_models::OpenAiCompatible::new("http://127.0.0.1:9/v1", "unused").unwrap();
    let config = GenerationConfig {
        model: std::sync::Arc::new(model),
        topics: Vec::new(),
        examples: Vec::new(),
        ttl: None,
        ingest: Default::default(),
    };
    let backend = adk_grpc_store::RedisMemoryBackend::connect(&cluster.url(), StoreConfig::default())
        .await
        .expect("connect to the test cluster");
    let memory = CoreMemoryService::new(backend).with_generators(std::collections::HashMap::from([(
        "*".to_string(),
        std::sync::Arc::new(config),
    )]));
    let ingest = |n: usize| {
        let mut event = Event::new("inv").with_content(Content::new("user").with_text(format!("message {n}")));
        event.id = format!("e{n}");
        memory.ingest(IngestEventsRequest {
            app_name: "hot-ingest".into(),
            user_id: user(n % USERS),
            events: vec![event],
            ..Default::default()
        })
    };
    ingest(0).await.expect("ingest"); // the app's one SADD, before counting
    let monitors = Monitors::start(&cluster).await;
    stream::iter(1..INGESTS)
        .map(ingest)
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("ingest");
    let stats = monitors.finish().await;
    for (port, calls) in &stats {
        println!("node {port}: {calls:?}");
    }
    // The counts measure what the test thinks: every ingest writes the index once.
    let index_writes: u64 = stats.values().filter_map(|calls| calls.get("zadd")).sum();
    assert!(index_writes >= (INGESTS - 1) as u64, "{index_writes} index writes");
    for (port, calls) in &stats {
        let zadd = calls.get("zadd").copied().unwrap_or(0);
        assert!(
            zadd < (INGESTS as u64) * 3 / 4,
            "node {port} received {zadd} of the {index_writes} index writes: {calls:?}"
        );
    }
}
