//! The `SessionService` conformance suite: every store rule of `docs/semantics.md`
//! (Identifiers, State and scopes, Sessions, Events, Event log and watches) as a check, run against each backend — memory, Redis,
//! Redis Cluster, and the gRPC client — so they cannot drift apart.
//!
//! Every case uses its own app name, so the suite can share a store with other tests.

use crate::unique_prefix;
use adk_grpc_core::history::estimate_event_tokens;
use adk_grpc_core::session::recent::RecentRequest;
use adk_grpc_core::session::{EventCursor, MAX_CLOCK_SKEW, SessionCursor};
use adk_grpc_core::validate::{MAX_SEQUENCE, MAX_SESSION_TTL, MAX_TIMESTAMP_SECONDS, MIN_TIMESTAMP_SECONDS};
use adk_grpc_core::{
    AdkError, AppStateRequest, AppendEventRequest, Clock, Content, CreateRequest, DeleteRequest, EncodedEvent, Event,
    EventCompaction, EventStream, ForkRequest, FunctionResponseData, GetRequest, ListEventsRequest, ListRequest, Part,
    Precondition, ReadonlyState, Session, SessionService, UpdateAppStateRequest, UserStateRequest, WatchRequest,
};
use chrono::{DateTime, Duration as ChronoDuration, TimeZone, Utc};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;
use tonic::Code;

/// One `#[tokio::test]` per case of the session suite, each on the [`crate::Fixture`]
/// `$setup` builds (an expression that may `.await`): the rules of the core service
/// ([`session_rules_conformance_tests`]) and what a backend's own machinery does
/// (app-wide listings, live watches, expiry on the fixture's clock).
///
/// ```ignore
/// mod redis_store {
///     use super::*;
///     adk_grpc_testkit::session_conformance_tests!(Fixture::sessions(connect(&url).await));
/// }
/// ```
#[macro_export]
macro_rules! session_conformance_tests {
    ($setup:expr) => {
        $crate::session_rules_conformance_tests!($setup);
        $crate::conformance_cases!($setup; conformance; |fixture| (fixture.session_service());
            app_wide_listing_merges_many_users,
            watch_replays_then_follows_live,
            deleting_a_session_ends_its_watch_with_not_found,
            many_watchers_of_one_session_each_get_every_event_once,
            a_slow_watcher_misses_nothing_and_slows_no_one,
        );
        $crate::conformance_cases!($setup; conformance; |fixture| (fixture.session_service(), fixture.clock());
            ttl_expires_sessions_and_appends_refresh_it,
            events_without_a_timestamp_take_the_stores_time,
        );
    };
}

/// The cases about the rules the core session service owns (validation, ids, scopes,
/// preconditions, paging, limits, forks, not-found), without live watches or expiry,
/// which are a backend's own machinery: what a new backend, even a minimal one, must
/// pass under `adk_grpc_core::CoreSessionService` without writing any rule itself.
#[macro_export]
macro_rules! session_rules_conformance_tests {
    ($setup:expr) => {
        $crate::conformance_cases!($setup; conformance; |fixture| (fixture.session_service());
            create_splits_state_by_scope,
            shared_scopes_are_read_fresh,
            create_generates_ids_and_rejects_duplicates,
            missing_sessions_are_not_found,
            append_assigns_id_and_sequence_and_updates_time,
            temp_keys_are_never_stored,
            partial_events_are_not_stored,
            deltas_replace_values_and_store_null,
            re_append_is_idempotent,
            precondition_detects_concurrent_changes,
            a_retry_wins_over_its_stale_precondition,
            get_filters_recent_and_after,
            list_orders_by_last_update_and_pages,
            delete_removes_session_but_not_shared_state,
            list_events_pages_both_ways,
            bad_input_is_rejected_and_changes_nothing,
            page_tokens_are_bound_and_range_checked,
            ttls_have_one_maximum,
            client_timestamps_stay_in_protobufs_range,
            adk_events_round_trip_on_every_read_path,
            objects_keep_their_keys_order_on_every_read_path,
            user_and_app_state_read_without_a_session,
            app_state_changes_without_an_event,
            hostile_ids_keep_sessions_apart,
            bounded_reads_start_at_the_latest_compaction,
            recent_reads_stop_at_the_token_budget,
            fork_copies_a_prefix_into_a_new_session,
        );
    };
}

// ---------- helpers ----------

fn map(pairs: &[(&str, Value)]) -> HashMap<String, Value> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

async fn create(svc: &dyn SessionService, app: &str, user: &str, id: &str, state: &[(&str, Value)]) -> Session {
    svc.create(CreateRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: Some(id.into()),
        state: map(state),
        ttl: None,
    })
    .await
    .unwrap_or_else(|e| panic!("create {app}/{user}/{id}: {e}"))
}

async fn get(svc: &dyn SessionService, app: &str, user: &str, id: &str) -> Session {
    try_get(svc, app, user, id)
        .await
        .unwrap_or_else(|e| panic!("get {app}/{user}/{id}: {e}"))
}

async fn try_get(svc: &dyn SessionService, app: &str, user: &str, id: &str) -> Result<Session, AdkError> {
    svc.get(GetRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        ..Default::default()
    })
    .await
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

async fn append(svc: &dyn SessionService, app: &str, user: &str, id: &str, event: Event) -> Event {
    svc.append_event(append_req(app, user, id, event))
        .await
        .unwrap_or_else(|e| panic!("append to {id}: {e}"))
}

fn event_with(delta: &[(&str, Value)]) -> Event {
    let mut e = Event::new("e-conformance")
        .with_author("tester")
        .with_content(Content::new("user").with_text("hi"));
    e.actions.state_delta = map(delta);
    e
}

fn event_at(at: DateTime<Utc>) -> Event {
    let mut e = event_with(&[]);
    e.timestamp = at;
    e
}

fn expect_code<T: std::fmt::Debug>(result: Result<T, AdkError>, code: Code, context: &str) -> AdkError {
    match result {
        Ok(value) => panic!("{context}: expected {code:?}, got Ok({value:?})"),
        Err(err) => {
            assert_eq!(err.code(), code, "{context}: expected {code:?}, got {err}");
            err
        }
    }
}

fn sequences(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.sequence).collect()
}

async fn next_event(stream: &mut EventStream) -> Event {
    match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(err))) => panic!("watch failed: {err}"),
        Ok(None) => panic!("watch ended early"),
        Err(_) => panic!("no event within 10 s"),
    }
}

/// A watch of the whole log of a session, stored events first.
async fn watch_from_start(svc: &dyn SessionService, app: &str, user: &str, id: &str) -> EventStream {
    svc.watch(WatchRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        after_sequence: Some(0),
    })
    .await
    .unwrap_or_else(|e| panic!("watch {id}: {e}"))
}

async fn assert_quiet(stream: &mut EventStream) {
    if let Ok(item) = tokio::time::timeout(Duration::from_millis(300), stream.next()).await {
        panic!("expected no more events, got {item:?}");
    }
}

// ---------- cases ----------

pub async fn create_splits_state_by_scope(svc: &dyn SessionService) {
    let app = unique_prefix("scopes");
    let s1 = create(
        svc,
        &app,
        "alice",
        "s1",
        &[
            ("app:theme", json!("dark")),
            ("user:lang", json!("en")),
            ("temp:step", json!(1)),
            ("topic", json!("s1")),
        ],
    )
    .await;
    let expected = map(&[
        ("app:theme", json!("dark")),
        ("user:lang", json!("en")),
        ("topic", json!("s1")),
    ]);
    assert_eq!(
        s1.state.all(),
        expected,
        "create's reply shows the merged state without temp: keys"
    );
    assert!(s1.events.is_empty());
    assert_eq!(
        s1.last_update_time, s1.create_time,
        "last_update_time is the creation time before any event"
    );
    assert_eq!(
        get(svc, &app, "alice", "s1").await.state.all(),
        expected,
        "get shows the same merged state"
    );

    let s2 = create(svc, &app, "alice", "s2", &[("topic", json!("s2"))]).await;
    let expected2 = map(&[
        ("app:theme", json!("dark")),
        ("user:lang", json!("en")),
        ("topic", json!("s2")),
    ]);
    assert_eq!(
        s2.state.all(),
        expected2,
        "a second session of the user inherits app: and user: state"
    );

    let b1 = create(svc, &app, "bob", "b1", &[]).await;
    assert_eq!(
        b1.state.all(),
        map(&[("app:theme", json!("dark"))]),
        "another user sees app: state only"
    );

    let other_app = unique_prefix("scopes-other");
    let o1 = create(svc, &other_app, "alice", "s1", &[]).await;
    assert!(o1.state.is_empty(), "app: and user: state are per app");
}

pub async fn shared_scopes_are_read_fresh(svc: &dyn SessionService) {
    let app = unique_prefix("fresh");
    create(svc, &app, "alice", "s1", &[("topic", json!("one"))]).await;
    create(svc, &app, "alice", "s2", &[("topic", json!("two"))]).await;
    create(svc, &app, "bob", "b1", &[]).await;
    append(
        svc,
        &app,
        "alice",
        "s1",
        event_with(&[
            ("user:lang", json!("fr")),
            ("app:theme", json!("light")),
            ("topic", json!("changed")),
            ("temp:scratch", json!(1)),
        ]),
    )
    .await;
    let s1 = get(svc, &app, "alice", "s1").await;
    assert_eq!(
        s1.state.all(),
        map(&[
            ("user:lang", json!("fr")),
            ("app:theme", json!("light")),
            ("topic", json!("changed"))
        ])
    );
    let s2 = get(svc, &app, "alice", "s2").await;
    assert_eq!(
        s2.state.get("user:lang"),
        Some(json!("fr")),
        "a user: change is visible in another session at once"
    );
    assert_eq!(s2.state.get("app:theme"), Some(json!("light")));
    assert_eq!(
        s2.state.get("topic"),
        Some(json!("two")),
        "session state stays per session"
    );
    let b1 = get(svc, &app, "bob", "b1").await;
    assert_eq!(
        b1.state.all(),
        map(&[("app:theme", json!("light"))]),
        "app: changes reach every user, user: do not"
    );

    let listed = svc.list(ListRequest {
        app_name: app.clone(),
        user_id: Some("alice".into()),
        ..Default::default()
    });
    let listed = listed.await.expect("list");
    assert!(
        listed
            .sessions
            .iter()
            .all(|s| s.state.get("user:lang") == Some(json!("fr"))),
        "listings merge fresh state"
    );
}

pub async fn create_generates_ids_and_rejects_duplicates(svc: &dyn SessionService) {
    let app = unique_prefix("ids");
    for session_id in [None, Some(String::new())] {
        let s = svc
            .create(CreateRequest {
                app_name: app.clone(),
                user_id: "u".into(),
                session_id,
                ..Default::default()
            })
            .await
            .expect("create without id");
        let uuid = uuid::Uuid::parse_str(&s.id).unwrap_or_else(|_| panic!("generated id {:?} is not a UUID", s.id));
        assert_eq!(uuid.get_version_num(), 4, "generated ids are UUIDv4");
        get(svc, &app, "u", &s.id).await;
    }

    create(svc, &app, "u", "taken", &[("k", json!(1)), ("user:x", json!("first"))]).await;
    let dup = svc
        .create(CreateRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: Some("taken".into()),
            state: map(&[("k", json!(2)), ("user:x", json!("second")), ("app:y", json!(true))]),
            ttl: None,
        })
        .await;
    expect_code(dup, Code::AlreadyExists, "create with a taken id");
    let s = get(svc, &app, "u", "taken").await;
    assert_eq!(
        s.state.all(),
        map(&[("k", json!(1)), ("user:x", json!("first"))]),
        "a rejected create changes nothing, shared scopes included"
    );
    create(svc, &app, "other-user", "taken", &[]).await;
}

pub async fn missing_sessions_are_not_found(svc: &dyn SessionService) {
    let app = unique_prefix("missing");
    expect_code(try_get(svc, &app, "u", "nope").await, Code::NotFound, "get");
    expect_code(
        svc.append_event(append_req(&app, "u", "nope", event_with(&[]))).await,
        Code::NotFound,
        "append",
    );
    let list_events = ListEventsRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "nope".into(),
        ..Default::default()
    };
    expect_code(svc.list_events(list_events).await, Code::NotFound, "list_events");
    let watch = WatchRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "nope".into(),
        after_sequence: None,
    };
    expect_code(svc.watch(watch).await.map(|_| ()), Code::NotFound, "watch");
    let delete = DeleteRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "nope".into(),
    };
    svc.delete(delete).await.expect("deleting a missing session succeeds");
}

pub async fn append_assigns_id_and_sequence_and_updates_time(svc: &dyn SessionService) {
    let app = unique_prefix("append");
    create(svc, &app, "u", "s", &[]).await;
    let mut first = event_with(&[("k", json!("v"))]);
    first.id = String::new();
    first.timestamp = Utc::now() + ChronoDuration::seconds(5);
    let stored1 = append(svc, &app, "u", "s", first.clone()).await;
    assert!(
        uuid::Uuid::parse_str(&stored1.id).is_ok(),
        "a missing event id is filled with a UUID"
    );
    assert_eq!(stored1.sequence, 1);
    assert_eq!(stored1.timestamp, first.timestamp, "a given timestamp is kept");
    assert_eq!(stored1.llm_response, first.llm_response);
    assert_eq!(stored1.actions, first.actions);

    let second = event_with(&[]);
    let stored2 = append(svc, &app, "u", "s", second.clone()).await;
    assert_eq!(stored2.id, second.id, "a given event id is kept");
    assert_eq!(stored2.sequence, 2);

    let s = get(svc, &app, "u", "s").await;
    assert_eq!(
        s.events.as_slice(),
        &[stored1, stored2.clone()],
        "get returns exactly the stored events, in order"
    );
    assert_eq!(s.event_count, 2);
    assert_eq!(
        s.last_update_time, stored2.timestamp,
        "last_update_time is the last event's timestamp"
    );
    assert_eq!(s.state.get("k"), Some(json!("v")));
}

/// The session service stamps an event sent without a timestamp with its store's clock
/// (the placeholder in `event.timestamp` is not read); a given timestamp is kept.
pub async fn events_without_a_timestamp_take_the_stores_time(svc: &dyn SessionService, clock: &Clock) {
    let app = unique_prefix("stamp");
    create(svc, &app, "u", "s", &[]).await;
    let unstamped = |event: Event| AppendEventRequest {
        timestamp_missing: true,
        ..append_req(&app, "u", "s", event)
    };
    let mut placeholder = Event::new("i").with_author("user");
    placeholder.timestamp = Utc.timestamp_opt(0, 0).unwrap();
    let before = clock.now();
    let stamped = svc.append_event(unstamped(placeholder.clone())).await.expect("append");
    let after = clock.now();
    assert!(
        (before..=after).contains(&stamped.timestamp),
        "stamped {} while the store's clock went from {before} to {after}",
        stamped.timestamp
    );

    // A partial event is stamped too, though it is not stored.
    let mut partial = placeholder.clone();
    partial.id = String::new();
    partial.llm_response.partial = Some(true);
    let before = clock.now();
    let fragment = svc.append_event(unstamped(partial)).await.expect("partial append");
    assert!(
        (before..=clock.now()).contains(&fragment.timestamp),
        "{}",
        fragment.timestamp
    );

    let given = Utc.timestamp_opt(1_000_000_000, 123_456_000).unwrap();
    let mut timed = Event::new("i").with_author("user");
    timed.timestamp = given;
    let kept = append(svc, &app, "u", "s", timed).await;
    assert_eq!(kept.timestamp, given, "a given timestamp is kept");

    let stored = get(svc, &app, "u", "s").await;
    assert_eq!(
        stored.events.as_slice(),
        &[stamped, kept],
        "the store holds the times the appends answered with"
    );
}

pub async fn temp_keys_are_never_stored(svc: &dyn SessionService) {
    let app = unique_prefix("temp");
    create(svc, &app, "u", "s", &[]).await;
    let stored = append(
        svc,
        &app,
        "u",
        "s",
        event_with(&[("temp:t", json!(1)), ("k", json!(2))]),
    )
    .await;
    assert_eq!(
        stored.actions.state_delta,
        map(&[("k", json!(2))]),
        "temp: keys are trimmed from the stored delta"
    );
    let s = get(svc, &app, "u", "s").await;
    assert_eq!(
        s.events.at(0).expect("event").actions.state_delta,
        map(&[("k", json!(2))])
    );
    assert_eq!(s.state.all(), map(&[("k", json!(2))]));
}

pub async fn partial_events_are_not_stored(svc: &dyn SessionService) {
    let app = unique_prefix("partial");
    create(svc, &app, "u", "s", &[]).await;
    let mut chunk = event_with(&[("k", json!(1))]);
    chunk.llm_response.partial = Some(true);
    let returned = append(svc, &app, "u", "s", chunk.clone()).await;
    assert_eq!(returned, chunk, "a partial event is returned unchanged");
    let s = get(svc, &app, "u", "s").await;
    assert!(s.events.is_empty(), "a partial event is not stored");
    assert_eq!(s.event_count, 0);
    assert!(s.state.is_empty(), "a partial event's delta is not applied");
}

pub async fn deltas_replace_values_and_store_null(svc: &dyn SessionService) {
    let app = unique_prefix("delta");
    create(
        svc,
        &app,
        "u",
        "s",
        &[("k", json!({"a": 1})), ("user:u", json!([1, 2]))],
    )
    .await;
    append(
        svc,
        &app,
        "u",
        "s",
        event_with(&[("k", json!({"b": 2})), ("user:u", json!([3]))]),
    )
    .await;
    let s = get(svc, &app, "u", "s").await;
    assert_eq!(
        s.state.get("k"),
        Some(json!({"b": 2})),
        "a delta value replaces the stored one, no deep merge"
    );
    assert_eq!(s.state.get("user:u"), Some(json!([3])));
    append(svc, &app, "u", "s", event_with(&[("k", Value::Null)])).await;
    let s = get(svc, &app, "u", "s").await;
    assert_eq!(
        s.state.get("k"),
        Some(Value::Null),
        "JSON null is stored as null, not a delete"
    );
    assert!(s.state.all().contains_key("k"));
}

pub async fn re_append_is_idempotent(svc: &dyn SessionService) {
    let app = unique_prefix("idem");
    create(svc, &app, "u", "s", &[]).await;
    let original = event_with(&[("n", json!(1))]);
    let stored = append(svc, &app, "u", "s", original.clone()).await;
    let mut retry = event_with(&[("n", json!(2)), ("user:x", json!(true))]);
    retry.id = original.id.clone();
    let again = append(svc, &app, "u", "s", retry).await;
    assert_eq!(again, stored, "re-appending an id returns the stored event");
    let s = get(svc, &app, "u", "s").await;
    assert_eq!(s.event_count, 1, "a re-append adds nothing");
    assert_eq!(s.state.all(), map(&[("n", json!(1))]), "a re-append changes no state");
}

pub async fn precondition_detects_concurrent_changes(svc: &dyn SessionService) {
    let app = unique_prefix("precond");
    create(svc, &app, "u", "s", &[]).await;
    let with = |precondition, delta: &[(&str, Value)]| AppendEventRequest {
        timestamp_missing: false,
        precondition: Some(precondition),
        ..append_req(&app, "u", "s", event_with(delta))
    };
    let first = svc
        .append_event(with(Precondition::LastSequence(0), &[]))
        .await
        .expect("fresh session, sequence 0");
    let stale = svc
        .append_event(with(Precondition::LastSequence(0), &[("lost", json!(true))]))
        .await;
    let err = expect_code(stale, Code::Aborted, "stale last_sequence");
    assert!(
        err.to_string().contains("modified in storage since it was loaded"),
        "{err}"
    );
    let second = svc
        .append_event(with(Precondition::LastEventId(first.id.clone()), &[]))
        .await
        .expect("matching last_event_id");
    assert_eq!(second.sequence, 2);
    let stale = svc
        .append_event(with(
            Precondition::LastEventId(first.id.clone()),
            &[("lost", json!(true))],
        ))
        .await;
    expect_code(stale, Code::Aborted, "stale last_event_id");
    svc.append_event(with(Precondition::LastSequence(2), &[]))
        .await
        .expect("matching last_sequence");
    let s = get(svc, &app, "u", "s").await;
    assert_eq!(s.event_count, 3, "aborted appends store nothing");
    assert_eq!(s.state.get("lost"), None, "aborted appends apply no state");
}

/// A client whose append landed but whose reply was lost (a timeout, `UNAVAILABLE`)
/// retries with the same event id and the same precondition. By then the session has
/// moved on (its own event, maybe others'), so the precondition is stale; the retry
/// must still get the stored event, not `ABORTED`: the id check comes first.
pub async fn a_retry_wins_over_its_stale_precondition(svc: &dyn SessionService) {
    let app = unique_prefix("retry-precond");
    create(svc, &app, "u", "s", &[]).await;
    let first = event_with(&[("n", json!(1))]);
    let guarded = |event: Event| AppendEventRequest {
        timestamp_missing: false,
        precondition: Some(Precondition::LastSequence(0)),
        ..append_req(&app, "u", "s", event)
    };
    let stored = svc.append_event(guarded(first.clone())).await.expect("first try");
    append(svc, &app, "u", "s", event_with(&[("n", json!(2))])).await;
    let retried = svc
        .append_event(guarded(first.clone()))
        .await
        .expect("a retry with a stale precondition returns the stored event");
    assert_eq!(retried, stored);
    let stale_by_id = AppendEventRequest {
        timestamp_missing: false,
        precondition: Some(Precondition::LastEventId("no-such-event".into())),
        ..append_req(&app, "u", "s", first)
    };
    let retried = svc
        .append_event(stale_by_id)
        .await
        .expect("a retry with a stale last_event_id returns the stored event");
    assert_eq!(retried, stored);
    let s = get(svc, &app, "u", "s").await;
    assert_eq!(s.event_count, 2, "the retries stored nothing");
    assert_eq!(s.state.get("n"), Some(json!(2)), "the retries changed no state");
    // A new event with the same stale precondition is refused as before.
    expect_code(
        svc.append_event(guarded(event_with(&[("n", json!(3))]))).await,
        Code::Aborted,
        "a new event with a stale precondition",
    );
}

pub async fn get_filters_recent_and_after(svc: &dyn SessionService) {
    let app = unique_prefix("filters");
    create(svc, &app, "u", "s", &[]).await;
    let base = Utc::now();
    let at = |i: i64| base + ChronoDuration::seconds(10 * i);
    for i in 1..=5 {
        append(svc, &app, "u", "s", event_at(at(i))).await;
    }
    // Clocks are not order: a sixth event stamped earlier than all others is still the newest.
    append(svc, &app, "u", "s", event_at(at(-10))).await;
    let filtered = |num_recent_events, after| {
        svc.get(GetRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            num_recent_events,
            after,
            since_compaction: false,
        })
    };
    let seqs = |s: Session| sequences(s.events.as_slice());
    assert_eq!(seqs(filtered(None, None).await.unwrap()), [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        seqs(filtered(Some(0), None).await.unwrap()),
        Vec::<u64>::new(),
        "num_recent_events 0 keeps none"
    );
    assert_eq!(seqs(filtered(Some(2), None).await.unwrap()), [5, 6]);
    assert_eq!(
        seqs(filtered(Some(1), None).await.unwrap()),
        [6],
        "recency is by sequence, not timestamp"
    );
    assert_eq!(seqs(filtered(Some(99), None).await.unwrap()), [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        seqs(filtered(None, Some(at(3))).await.unwrap()),
        [3, 4, 5],
        "after keeps timestamp >= after"
    );
    assert_eq!(
        seqs(filtered(Some(3), Some(at(3))).await.unwrap()),
        [4, 5],
        "both: the intersection"
    );
    assert_eq!(seqs(filtered(None, Some(at(9))).await.unwrap()), Vec::<u64>::new());
    let s = filtered(Some(0), None).await.unwrap();
    assert_eq!(
        s.event_count, 6,
        "event_count is the whole log's size whatever the filter"
    );
}

/// An app-wide listing of many users (on a Redis Cluster: many index shards, one per
/// slot) keeps one order, (last update, `user:id`), ties between users included, and
/// its pages stitch together across ties; an expired session is skipped.
pub async fn app_wide_listing_merges_many_users(svc: &dyn SessionService) {
    let app = unique_prefix("many");
    let base = Utc::now() - ChronoDuration::hours(1);
    let mut expected: Vec<(DateTime<Utc>, String)> = Vec::new();
    for u in 0..24 {
        let user = format!("u{u:02}");
        for s in 0..1 + u % 2 {
            let id = format!("s{s}");
            create(svc, &app, &user, &id, &[]).await;
            // Five update times over 36 sessions: every page boundary below falls inside a tie.
            let at = base + ChronoDuration::seconds(((u * 7 + s * 3) % 5) as i64);
            append(svc, &app, &user, &id, event_at(at)).await;
            expected.push((at, format!("{user}:{id}")));
        }
    }
    // Would be listed first, had it not expired.
    svc.create(CreateRequest {
        app_name: app.clone(),
        user_id: "u05".into(),
        session_id: Some("gone".into()),
        state: HashMap::new(),
        ttl: Some(Duration::from_millis(300)),
    })
    .await
    .expect("create with ttl");
    append(svc, &app, "u05", "gone", event_at(base - ChronoDuration::seconds(1))).await;
    crate::eventually(Duration::from_secs(10), || async {
        match try_get(svc, &app, "u05", "gone").await {
            Err(AdkError::NotFound(..)) => Ok(()),
            other => Err(format!("the session has not expired yet: {other:?}")),
        }
    })
    .await;
    expected.sort();
    let expected: Vec<String> = expected.into_iter().map(|(_, member)| member).collect();

    let list = |page_size, page_token| {
        svc.list(ListRequest {
            app_name: app.clone(),
            user_id: None,
            page_size,
            page_token,
        })
    };
    let member = |s: &Session| format!("{}:{}", s.user_id, s.id);
    let all = list(0, None).await.expect("list the app");
    assert_eq!(all.sessions.iter().map(member).collect::<Vec<_>>(), expected);
    assert!(all.next_page_token.is_none());
    for page_size in [1, 5, 7] {
        let mut paged = Vec::new();
        let mut token = None;
        loop {
            let reply = list(page_size, token).await.expect("app page");
            assert!(reply.sessions.len() <= page_size);
            paged.extend(reply.sessions.iter().map(member));
            token = reply.next_page_token;
            if token.is_none() {
                break;
            }
            assert!(paged.len() <= expected.len(), "paging does not end");
        }
        assert_eq!(paged, expected, "pages of {page_size}: every session once, in order");
    }
}

pub async fn list_orders_by_last_update_and_pages(svc: &dyn SessionService) {
    let app = unique_prefix("list");
    // In the past: a session's update time may not run ahead of the server clock by more
    // than a few minutes (see `client_timestamps_stay_in_protobufs_range`).
    let base = Utc::now() - ChronoDuration::hours(1);
    for (i, id) in ["s1", "s2", "s3", "s4", "s5"].iter().enumerate() {
        create(svc, &app, "alice", id, &[("n", json!(i))]).await;
        append(
            svc,
            &app,
            "alice",
            id,
            event_at(base + ChronoDuration::seconds(i as i64)),
        )
        .await;
    }
    append(svc, &app, "alice", "s2", event_at(base + ChronoDuration::seconds(60))).await;
    create(svc, &app, "bob", "b1", &[("app:shared", json!(1))]).await;

    let list = |user: Option<&str>, page_size, page_token| {
        svc.list(ListRequest {
            app_name: app.clone(),
            user_id: user.map(Into::into),
            page_size,
            page_token,
        })
    };
    let all = list(Some("alice"), 0, None).await.expect("list alice");
    let ids: Vec<&str> = all.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["s1", "s3", "s4", "s5", "s2"], "oldest last_update_time first");
    assert!(all.next_page_token.is_none());
    assert!(
        all.sessions.iter().all(|s| s.events.is_empty()),
        "listings carry no events"
    );
    assert!(
        all.sessions.iter().all(|s| s.state.get("app:shared") == Some(json!(1))),
        "listings merge state"
    );
    assert_eq!(all.sessions[4].state.get("n"), Some(json!(1)));
    assert_eq!(all.sessions[4].event_count, 2);

    let mut paged = Vec::new();
    let mut token = None;
    for page in 0.. {
        assert!(page < 10, "paging does not end");
        let reply = list(Some("alice"), 2, token.clone()).await.expect("page");
        assert!(reply.sessions.len() <= 2);
        paged.extend(reply.sessions.into_iter().map(|s| s.id));
        token = reply.next_page_token;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(
        paged,
        ["s1", "s3", "s4", "s5", "s2"],
        "pages cover every session exactly once, in order"
    );

    let app_wide = list(None, 0, None).await.expect("list app");
    let mut owners: Vec<(String, String)> = app_wide
        .sessions
        .iter()
        .map(|s| (s.user_id.clone(), s.id.clone()))
        .collect();
    assert_eq!(owners.len(), 6, "an omitted user lists the whole app");
    // bob's session has no events, so its creation time (now) is newer than alice's appends (an hour ago).
    assert_eq!(owners.pop(), Some(("bob".into(), "b1".into())));
    assert_eq!(owners.remove(0), ("alice".into(), "s1".into()));
    let bob = app_wide
        .sessions
        .iter()
        .find(|s| s.user_id == "bob")
        .expect("bob's session");
    assert_eq!(bob.state.get("n"), None, "each session shows its own state");

    let mut app_paged = Vec::new();
    let mut token = None;
    loop {
        let reply = list(None, 4, token).await.expect("app page");
        app_paged.extend(reply.sessions.into_iter().map(|s| (s.user_id, s.id)));
        token = reply.next_page_token;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(app_paged.len(), 6, "app-wide pages cover every session once");

    expect_code(
        list(Some("alice"), 2, Some("garbage".into())).await,
        Code::InvalidArgument,
        "malformed page token",
    );
    assert!(list(Some("nobody"), 0, None).await.expect("empty").sessions.is_empty());
}

pub async fn delete_removes_session_but_not_shared_state(svc: &dyn SessionService) {
    let app = unique_prefix("delete");
    create(
        svc,
        &app,
        "u",
        "s",
        &[("k", json!(1)), ("user:x", json!(2)), ("app:y", json!(3))],
    )
    .await;
    create(svc, &app, "u", "keep", &[]).await;
    append(svc, &app, "u", "s", event_with(&[("k", json!(4))])).await;
    let delete = DeleteRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
    };
    svc.delete(delete.clone()).await.expect("delete");
    expect_code(try_get(svc, &app, "u", "s").await, Code::NotFound, "get after delete");
    let listed = svc.list(ListRequest {
        app_name: app.clone(),
        user_id: Some("u".into()),
        ..Default::default()
    });
    let ids: Vec<String> = listed.await.expect("list").sessions.into_iter().map(|s| s.id).collect();
    assert_eq!(ids, ["keep"], "a deleted session leaves the listing");
    svc.delete(delete).await.expect("deleting again succeeds");

    let again = create(svc, &app, "u", "s", &[]).await;
    assert_eq!(again.event_count, 0, "a recreated session starts with an empty log");
    assert_eq!(
        again.state.all(),
        map(&[("user:x", json!(2)), ("app:y", json!(3))]),
        "session state went with the session; user: and app: state stay"
    );
    append(svc, &app, "u", "s", event_with(&[])).await;
    assert_eq!(
        get(svc, &app, "u", "s").await.events.at(0).expect("event").sequence,
        1,
        "sequences restart at 1"
    );
}

pub async fn list_events_pages_both_ways(svc: &dyn SessionService) {
    let app = unique_prefix("pages");
    create(svc, &app, "u", "s", &[]).await;
    for _ in 0..25 {
        append(svc, &app, "u", "s", event_with(&[])).await;
    }
    let page = |newest_first, page_size, page_token| {
        svc.list_events(ListEventsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            page_size,
            page_token,
            newest_first,
        })
    };
    for (newest_first, expected) in [
        (
            false,
            vec![(1..=10).collect::<Vec<u64>>(), (11..=20).collect(), (21..=25).collect()],
        ),
        (
            true,
            vec![
                (16..=25).rev().collect(),
                (6..=15).rev().collect(),
                (1..=5).rev().collect(),
            ],
        ),
    ] {
        let mut token = None;
        for (i, want) in expected.iter().enumerate() {
            let reply = page(newest_first, 10, token).await.expect("page");
            assert_eq!(&sequences(&reply.events), want, "page {i} newest_first={newest_first}");
            token = reply.next_page_token;
            assert_eq!(
                token.is_some(),
                i + 1 < expected.len(),
                "a token exactly while more remain"
            );
        }
    }
    let whole = page(false, 0, None).await.expect("default page size");
    assert_eq!(whole.events.len(), 25);
    assert!(whole.next_page_token.is_none());
    expect_code(
        page(false, 10, Some("%%%".into())).await,
        Code::InvalidArgument,
        "malformed token",
    );
}

pub async fn watch_replays_then_follows_live(svc: &dyn SessionService) {
    let app = unique_prefix("watch");
    create(svc, &app, "u", "s", &[]).await;
    for _ in 0..3 {
        append(svc, &app, "u", "s", event_with(&[])).await;
    }
    let watch = |after_sequence| {
        svc.watch(WatchRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            after_sequence,
        })
    };
    let mut from_start = watch(Some(0)).await.expect("watch from 0");
    let mut from_now = watch(None).await.expect("watch from now");
    for want in 1..=3 {
        assert_eq!(
            next_event(&mut from_start).await.sequence,
            want,
            "stored events replay first"
        );
    }
    let e4 = append(svc, &app, "u", "s", event_with(&[("k", json!(4))])).await;
    let e5 = append(svc, &app, "u", "s", event_with(&[])).await;
    assert_eq!(next_event(&mut from_start).await, e4, "live events arrive as stored");
    assert_eq!(next_event(&mut from_start).await, e5);
    assert_eq!(
        next_event(&mut from_now).await.sequence,
        4,
        "a watch from now starts with the next append"
    );
    assert_eq!(next_event(&mut from_now).await.sequence, 5);
    assert_quiet(&mut from_start).await;
    assert_quiet(&mut from_now).await;

    let mut resumed = watch(Some(4)).await.expect("resume after 4");
    assert_eq!(
        next_event(&mut resumed).await.sequence,
        5,
        "a resumed watch gets exactly the rest"
    );
    append(svc, &app, "u", "s", event_with(&[])).await;
    assert_eq!(next_event(&mut resumed).await.sequence, 6);
    assert_eq!(next_event(&mut from_start).await.sequence, 6);
    assert_quiet(&mut resumed).await;

    let mut partial = event_with(&[]);
    partial.llm_response.partial = Some(true);
    append(svc, &app, "u", "s", partial).await;
    assert_quiet(&mut resumed).await;
}

/// A watch of a session that is deleted ends with `NOT_FOUND` (not OK, not silence),
/// so a follower knows not to resume it. Redis notices between two blocking reads
/// (about 2 s), hence the generous wait.
pub async fn deleting_a_session_ends_its_watch_with_not_found(svc: &dyn SessionService) {
    let app = unique_prefix("watch-delete");
    create(svc, &app, "u", "s", &[]).await;
    let first = append(svc, &app, "u", "s", event_with(&[])).await;
    let mut watch = watch_from_start(svc, &app, "u", "s").await;
    assert_eq!(next_event(&mut watch).await, first, "the watch is running");
    svc.delete(DeleteRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
    })
    .await
    .expect("delete");
    match tokio::time::timeout(Duration::from_secs(10), watch.next()).await {
        Ok(Some(Err(err))) => assert_eq!(err.code(), Code::NotFound, "{err}"),
        other => panic!("expected the watch to end with NOT_FOUND within 10 s, got {other:?}"),
    }
    let after = tokio::time::timeout(Duration::from_secs(10), watch.next()).await;
    assert!(matches!(after, Ok(None)), "nothing follows the NOT_FOUND: {after:?}");
}

/// Many watchers of one session (one reader per process on Redis) each get every
/// event once, in order, whatever sequence each started after.
pub async fn many_watchers_of_one_session_each_get_every_event_once(svc: &dyn SessionService) {
    // Under the gRPC server's default per-user stream limit (64); the Redis tests
    // (`redis_watch_fanout.rs`) run a thousand.
    const WATCHERS: usize = 40;
    let app = unique_prefix("watch-many");
    create(svc, &app, "u", "s", &[]).await;
    append(svc, &app, "u", "s", event_with(&[])).await;
    let mut watchers = Vec::new();
    for i in 0..WATCHERS {
        // Half replay the stored event first, half start from now.
        let after_sequence = if i % 2 == 0 { Some(0) } else { Some(1) };
        let watch = svc.watch(WatchRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            after_sequence,
        });
        watchers.push((after_sequence.unwrap_or_default(), watch.await.expect("watch")));
    }
    let mut appended = Vec::new();
    for _ in 0..3 {
        appended.push(append(svc, &app, "u", "s", event_with(&[])).await.sequence);
    }
    let seen = futures::future::join_all(watchers.into_iter().map(|(after, mut watch)| async move {
        let mut seen = Vec::new();
        while seen.last() != Some(&4) {
            seen.push(next_event(&mut watch).await.sequence);
        }
        (after, seen)
    }))
    .await;
    for (after, seen) in seen {
        let want: Vec<u64> = (after + 1..=4).collect();
        assert_eq!(seen, want, "a watcher after {after} gets each event once, in order");
    }
    assert_eq!(appended, [2, 3, 4]);
}

/// A watcher whose client reads nothing while many events are appended (more than
/// any buffer kept for it) does not hold the others back, and later receives every
/// event once, in order: it continues from the last sequence it sent.
pub async fn a_slow_watcher_misses_nothing_and_slows_no_one(svc: &dyn SessionService) {
    const EVENTS: u64 = 400;
    let app = unique_prefix("watch-slow");
    create(svc, &app, "u", "s", &[]).await;
    let mut slow = watch_from_start(svc, &app, "u", "s").await;
    let mut fast = watch_from_start(svc, &app, "u", "s").await;
    let appending = async {
        for _ in 0..EVENTS {
            append(svc, &app, "u", "s", event_with(&[])).await;
        }
    };
    let following = async {
        let mut seen = Vec::new();
        while seen.len() < EVENTS as usize {
            seen.push(next_event(&mut fast).await.sequence);
        }
        seen
    };
    let ((), fast_seen) = tokio::join!(appending, following);
    let want: Vec<u64> = (1..=EVENTS).collect();
    assert_eq!(
        fast_seen, want,
        "the fast watcher got everything while the slow one read nothing"
    );
    let mut slow_seen = Vec::new();
    while slow_seen.len() < EVENTS as usize {
        slow_seen.push(next_event(&mut slow).await.sequence);
    }
    assert_eq!(slow_seen, want, "the slow watcher misses nothing and repeats nothing");
    append(svc, &app, "u", "s", event_with(&[])).await;
    assert_eq!(
        next_event(&mut slow).await.sequence,
        EVENTS + 1,
        "and then follows live"
    );
    assert_quiet(&mut slow).await;
}

pub async fn bad_input_is_rejected_and_changes_nothing(svc: &dyn SessionService) {
    let app = unique_prefix("bad");
    create(svc, &app, "u", "s", &[("k", json!(1)), ("user:k", json!(1))]).await;
    append(svc, &app, "u", "s", event_with(&[])).await;
    let before = get(svc, &app, "u", "s").await;

    for bad in [
        "",
        "a\0b",
        "line\nbreak",
        "tab\t",
        "del\u{7f}",
        "   ",
        &"x".repeat(129),
        &"é".repeat(65),
    ] {
        let create_bad = |app_name: &str, user_id: &str, session_id: &str| CreateRequest {
            app_name: app_name.into(),
            user_id: user_id.into(),
            session_id: Some(session_id.into()),
            state: map(&[("user:k", json!("overwritten"))]),
            ttl: None,
        };
        if !bad.is_empty() {
            let err = expect_code(
                svc.create(create_bad(&app, "u", bad)).await,
                Code::InvalidArgument,
                "create session_id",
            );
            assert!(err.to_string().contains("session_id"), "{err}");
        }
        let err = expect_code(
            svc.create(create_bad(bad, "u", "s2")).await,
            Code::InvalidArgument,
            "create app_name",
        );
        assert!(err.to_string().contains("app_name"), "{err}");
        let err = expect_code(
            svc.create(create_bad(&app, bad, "s2")).await,
            Code::InvalidArgument,
            "create user_id",
        );
        assert!(err.to_string().contains("user_id"), "{err}");
        let get_bad = GetRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: bad.into(),
            ..Default::default()
        };
        expect_code(svc.get(get_bad).await, Code::InvalidArgument, "get session_id");
        let append_bad = append_req(&app, bad, "s", event_with(&[("k", json!("overwritten"))]));
        expect_code(
            svc.append_event(append_bad).await,
            Code::InvalidArgument,
            "append user_id",
        );
        let delete_bad = DeleteRequest {
            app_name: app.clone(),
            user_id: bad.into(),
            session_id: "s".into(),
        };
        expect_code(svc.delete(delete_bad).await, Code::InvalidArgument, "delete user_id");
        let list_bad = ListRequest {
            app_name: bad.into(),
            ..Default::default()
        };
        expect_code(svc.list(list_bad).await, Code::InvalidArgument, "list app_name");
        let list_user_bad = ListRequest {
            app_name: app.clone(),
            user_id: Some(bad.into()),
            ..Default::default()
        };
        if !bad.is_empty() {
            expect_code(svc.list(list_user_bad).await, Code::InvalidArgument, "list user_id");
        }
        let events_bad = ListEventsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: bad.into(),
            ..Default::default()
        };
        expect_code(
            svc.list_events(events_bad).await,
            Code::InvalidArgument,
            "list_events session_id",
        );
        let watch_bad = WatchRequest {
            app_name: bad.into(),
            user_id: "u".into(),
            session_id: "s".into(),
            after_sequence: None,
        };
        expect_code(
            svc.watch(watch_bad).await.map(|_| ()),
            Code::InvalidArgument,
            "watch app_name",
        );
        let user_state_bad = UserStateRequest {
            app_name: app.clone(),
            user_id: bad.into(),
        };
        expect_invalid(svc.user_state(user_state_bad).await, "user_id", "user_state user_id");
        let app_state_bad = AppStateRequest { app_name: bad.into() };
        expect_invalid(svc.app_state(app_state_bad).await, "app_name", "app_state app_name");
    }

    for bad_key in ["", "app:", "user:", "temp:", &"k".repeat(1025)] {
        let err = expect_code(
            svc.append_event(append_req(
                &app,
                "u",
                "s",
                event_with(&[(bad_key, json!(1)), ("k", json!(2))]),
            ))
            .await,
            Code::InvalidArgument,
            "append with a bad state key",
        );
        assert!(err.to_string().contains("state_delta"), "{err}");
        let bad_create = CreateRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: Some("new".into()),
            state: map(&[(bad_key, json!(1))]),
            ttl: None,
        };
        expect_code(
            svc.create(bad_create).await,
            Code::InvalidArgument,
            "create with a bad state key",
        );
    }
    let mut bad_id = event_with(&[("k", json!(3))]);
    bad_id.id = "not\nan id".into();
    let err = expect_code(
        svc.append_event(append_req(&app, "u", "s", bad_id)).await,
        Code::InvalidArgument,
        "event id",
    );
    assert!(err.to_string().contains("event.id"), "{err}");

    let after = get(svc, &app, "u", "s").await;
    assert_eq!(after, before, "rejected requests changed nothing");
    expect_code(
        try_get(svc, &app, "u", "new").await,
        Code::NotFound,
        "rejected create stored nothing",
    );
}

/// `INVALID_ARGUMENT`, with `field` named in the message.
fn expect_invalid<T: std::fmt::Debug>(result: Result<T, AdkError>, field: &str, context: &str) -> String {
    let err = expect_code(result, Code::InvalidArgument, context);
    let message = err.to_string();
    assert!(message.contains(field), "{context}: {message:?} should name {field}");
    message
}

pub async fn page_tokens_are_bound_and_range_checked(svc: &dyn SessionService) {
    let app = unique_prefix("tokens");
    for (user, id) in [("u", "s1"), ("u", "s2"), ("v", "s1")] {
        create(svc, &app, user, id, &[("k", json!(id))]).await;
        for _ in 0..3 {
            append(svc, &app, user, id, event_with(&[])).await;
        }
    }
    let before = get(svc, &app, "u", "s1").await;
    let events_of = |user: &str, id: &str, newest_first, page_token| ListEventsRequest {
        app_name: app.clone(),
        user_id: user.into(),
        session_id: id.into(),
        page_size: 1,
        page_token,
        newest_first,
    };
    let first = svc
        .list_events(events_of("u", "s1", false, None))
        .await
        .expect("first page");
    let token = first.next_page_token.expect("a next page");
    let second = svc
        .list_events(events_of("u", "s1", false, Some(token.clone())))
        .await
        .expect("the token pages its own log");
    assert_eq!(sequences(&second.events), [2]);
    for (user, id) in [("u", "s2"), ("v", "s1")] {
        let message = expect_invalid(
            svc.list_events(events_of(user, id, false, Some(token.clone()))).await,
            "page_token",
            "an event token on another session's log",
        );
        assert!(message.contains("another listing"), "{message}");
    }
    let other_app = ListEventsRequest {
        app_name: unique_prefix("tokens-other"),
        ..events_of("u", "s1", false, Some(token))
    };
    expect_invalid(
        svc.list_events(other_app).await,
        "page_token",
        "an event token on another app",
    );

    // Positions: past the end is an empty last page; beyond any log is refused.
    let at = |sequence, newest_first| {
        let req = events_of("u", "s1", newest_first, None);
        Some(EventCursor { sequence, newest_first }.encode(&req))
    };
    for sequence in [4, 1000, MAX_SEQUENCE] {
        let page = svc
            .list_events(events_of("u", "s1", false, at(sequence, false)))
            .await
            .expect("a position past the end");
        assert!(page.events.is_empty(), "past the end: no events");
        assert_eq!(page.next_page_token, None, "past the end: the last page");
    }
    let page = svc
        .list_events(ListEventsRequest {
            page_size: 10,
            ..events_of("u", "s1", true, at(MAX_SEQUENCE, true))
        })
        .await
        .expect("newest first from above the log");
    assert_eq!(
        sequences(&page.events),
        [3, 2, 1],
        "newest first: the events before the position"
    );
    for sequence in [MAX_SEQUENCE + 1, u64::MAX] {
        expect_invalid(
            svc.list_events(events_of("u", "s1", false, at(sequence, false))).await,
            "page_token",
            "a sequence no log can hold",
        );
    }
    // The token of the issue: the version 1 format, the largest sequence.
    let issue = "ZXZlbnRzLnYxLmFzYy4xODQ0Njc0NDA3MzcwOTU1MTYxNQ".to_string();
    expect_invalid(
        svc.list_events(events_of("u", "s1", false, Some(issue))).await,
        "page_token",
        "a version 1 token",
    );

    // Session listings: bound to the app, and to the user when listing per user.
    let sessions_of = |app: &str, user: Option<&str>, page_token| ListRequest {
        app_name: app.into(),
        user_id: user.map(Into::into),
        page_size: 1,
        page_token,
    };
    for user in [Some("u"), None] {
        let first = svc.list(sessions_of(&app, user, None)).await.expect("first page");
        let token = first.next_page_token.expect("a next page");
        let next = svc
            .list(sessions_of(&app, user, Some(token.clone())))
            .await
            .expect("its own listing");
        assert_eq!(next.sessions.len(), 1);
        let other_user = if user.is_some() { None } else { Some("u") };
        for other in [
            sessions_of(&app, other_user, Some(token.clone())),
            sessions_of(&app, Some("v"), Some(token.clone())),
            sessions_of(&unique_prefix("tokens-other"), user, Some(token.clone())),
        ] {
            let message = expect_invalid(
                svc.list(other).await,
                "page_token",
                "a session token of another listing",
            );
            assert!(message.contains("another listing"), "{message}");
        }
    }
    let listing = sessions_of(&app, Some("u"), None);
    let at = |update_micros: i64| {
        Some(
            SessionCursor {
                update_micros,
                member: "s1".into(),
            }
            .encode(&listing),
        )
    };
    let last_micros = MAX_TIMESTAMP_SECONDS * 1_000_000 + 999_999;
    let page = svc
        .list(sessions_of(&app, Some("u"), at(last_micros)))
        .await
        .expect("a time past every session");
    assert!(
        page.sessions.is_empty() && page.next_page_token.is_none(),
        "past the end: an empty last page"
    );
    for micros in [
        i64::MAX,
        i64::MIN,
        last_micros + 1,
        MIN_TIMESTAMP_SECONDS * 1_000_000 - 1,
    ] {
        expect_invalid(
            svc.list(sessions_of(&app, Some("u"), at(micros))).await,
            "page_token",
            "a time outside any listing",
        );
    }
    assert_eq!(
        get(svc, &app, "u", "s1").await,
        before,
        "refused tokens changed nothing"
    );
}

pub async fn ttls_have_one_maximum(svc: &dyn SessionService) {
    let app = unique_prefix("maxttl");
    let with_ttl = |id: &str, ttl| CreateRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: Some(id.into()),
        state: map(&[("k", json!(1))]),
        ttl: Some(ttl),
    };
    let started = Utc::now();
    let longest = svc
        .create(with_ttl("longest", MAX_SESSION_TTL))
        .await
        .expect("the maximum TTL");
    let expiry = longest.expire_time.expect("an expire_time");
    let max = ChronoDuration::from_std(MAX_SESSION_TTL).expect("100 years");
    // Redis keeps expiry in milliseconds.
    assert!(
        expiry >= started + max - ChronoDuration::milliseconds(1) && expiry <= Utc::now() + max,
        "expire_time is now + 100 years, exactly: {expiry}"
    );
    assert_eq!(get(svc, &app, "u", "longest").await.expire_time, Some(expiry));
    for (id, ttl) in [
        ("over", MAX_SESSION_TTL + Duration::from_secs(1)),
        ("trillion", Duration::from_secs(1_000_000_000_000)),
        ("i64max", Duration::from_secs(i64::MAX as u64)),
    ] {
        let message = expect_invalid(svc.create(with_ttl(id, ttl)).await, "ttl", "a TTL above the maximum");
        assert!(
            message.contains("3153600000"),
            "the message names the maximum: {message}"
        );
        expect_code(
            try_get(svc, &app, "u", id).await,
            Code::NotFound,
            "a refused create stores nothing",
        );
    }
}

pub async fn client_timestamps_stay_in_protobufs_range(svc: &dyn SessionService) {
    let app = unique_prefix("times");
    create(svc, &app, "u", "s", &[]).await;
    append(svc, &app, "u", "s", event_with(&[])).await;
    let before = get(svc, &app, "u", "s").await;
    let time = |seconds, nanos| DateTime::from_timestamp(seconds, nanos).expect("a chrono time");
    let first = time(MIN_TIMESTAMP_SECONDS, 0);
    let last = time(MAX_TIMESTAMP_SECONDS, 999_999_999);
    for outside in [time(MIN_TIMESTAMP_SECONDS - 1, 0), time(MAX_TIMESTAMP_SECONDS + 1, 0)] {
        let mut event = event_at(outside);
        event.actions.state_delta = map(&[("k", json!("overwritten"))]);
        expect_invalid(
            svc.append_event(append_req(&app, "u", "s", event)).await,
            "event.timestamp",
            "an event time outside google.protobuf.Timestamp",
        );
        let filtered = GetRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            num_recent_events: None,
            after: Some(outside),
            since_compaction: false,
        };
        expect_invalid(
            svc.get(filtered).await,
            "after",
            "an after outside google.protobuf.Timestamp",
        );
    }
    assert_eq!(
        get(svc, &app, "u", "s").await,
        before,
        "refused appends changed nothing"
    );

    // The first instant a Timestamp holds is kept, as the session's update time too (as in ADK).
    append(svc, &app, "u", "s", event_at(first)).await;
    assert_eq!(get(svc, &app, "u", "s").await.last_update_time, first);

    // The last one: the event keeps it, and `after` filters by it; the session's update time
    // stops at the server's clock plus the allowed skew.
    let skew = ChronoDuration::from_std(MAX_CLOCK_SKEW).expect("minutes");
    let sent = Utc::now();
    let stored = append(svc, &app, "u", "s", event_at(last)).await;
    let received = Utc::now();
    assert_eq!(stored.timestamp, last, "the event keeps the client's timestamp");
    let session = get(svc, &app, "u", "s").await;
    assert!(
        session.last_update_time >= sent + skew && session.last_update_time <= received + skew,
        "last_update_time is at most MAX_CLOCK_SKEW ahead of the append: {}",
        session.last_update_time
    );
    let listed = svc
        .list(ListRequest {
            app_name: app.clone(),
            user_id: Some("u".into()),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(listed.sessions[0].last_update_time, session.last_update_time);
    let after = svc
        .get(GetRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            num_recent_events: None,
            after: Some(time(MAX_TIMESTAMP_SECONDS - 60, 0)),
            since_compaction: false,
        })
        .await
        .expect("after in year 9999");
    assert_eq!(
        after.events.as_slice(),
        [stored],
        "after compares the event's own timestamp"
    );
}

/// Lets `clock` reach `until`: a manual clock is advanced at once; on the system clock
/// (Redis's TTLs run on Redis's own clock, which nothing can advance) the real time is
/// waited out, which is what the case is about rather than a stand-in for a condition.
async fn let_time_reach(clock: &Clock, until: DateTime<Utc>) {
    let Ok(left) = (until - clock.now()).to_std() else {
        return;
    };
    if clock.is_manual() {
        clock.advance(left);
    } else {
        tokio::time::sleep(left).await;
    }
}

pub async fn ttl_expires_sessions_and_appends_refresh_it(svc: &dyn SessionService, clock: &Clock) {
    let app = unique_prefix("ttl");
    let plain = create(svc, &app, "u", "forever", &[]).await;
    assert_eq!(plain.expire_time, None, "no TTL unless asked (or configured)");
    // Short, as the real time passes on Redis; the refresh below leaves 0.6 s of margin.
    let ttl = Duration::from_millis(1500);
    let created = svc
        .create(CreateRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: Some("brief".into()),
            state: map(&[("k", json!(1))]),
            ttl: Some(ttl),
        })
        .await
        .expect("create with ttl");
    let first_expiry = created.expire_time.expect("expire_time is reported");
    assert!(first_expiry > clock.now(), "expiry lies ahead");

    // Halfway to the expiry an append pushes it a whole TTL further...
    let_time_reach(clock, first_expiry - ChronoDuration::milliseconds(750)).await;
    append(svc, &app, "u", "brief", event_with(&[])).await;
    // ...so just past the first expiry the session is still there.
    let_time_reach(clock, first_expiry + ChronoDuration::milliseconds(100)).await;
    let alive = try_get(svc, &app, "u", "brief")
        .await
        .expect("an append refreshes the TTL");
    let refreshed_expiry = alive.expire_time.expect("expiry");
    assert!(refreshed_expiry > first_expiry, "the expiry moved forward");

    let_time_reach(clock, refreshed_expiry).await;
    crate::eventually(Duration::from_secs(10), || async {
        match try_get(svc, &app, "u", "brief").await {
            Err(err) if err.code() == Code::NotFound => Ok(()),
            other => Err(format!("the session has not expired yet: {other:?}")),
        }
    })
    .await;
    for user_id in [Some("u".to_string()), None] {
        let listed = svc.list(ListRequest {
            app_name: app.clone(),
            user_id,
            ..Default::default()
        });
        let ids: Vec<String> = listed.await.expect("list").sessions.into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["forever"], "an expired session leaves no listing entry behind");
    }
}

/// A JSON object of an event keeps its keys in the order they were written, at every
/// depth, on every read path (the model on the OpenAI-compatible wire reads a call's
/// arguments and a tool's result as text in that order, docs/adk-conformance.md, "Key
/// order"). Compared as text: JSON values compare equal whatever their order.
pub async fn objects_keep_their_keys_order_on_every_read_path(svc: &dyn SessionService) {
    let app = unique_prefix("order");
    create(svc, &app, "u", "s", &[]).await;
    let args = json!({"zeta": 1, "alpha": {"mid": [{"z": true, "a": null}], "beta": "b"}, "kappa": "k"});
    let result = json!({"type": "text", "text": "done", "annotations": {"z": 1, "a": 2}});
    let mut event = Event::new("e-order").with_author("agent").with_content(
        Content::new("model")
            .with_part(Part::function_call("tool", args.clone(), Some("c1".into())))
            .with_part(Part::function_response(
                FunctionResponseData {
                    name: "tool".into(),
                    response: result.clone(),
                },
                Some("c1".into()),
            )),
    );
    event.llm_response.custom_metadata = Some(args.as_object().cloned().expect("an object"));
    let written = |event: &Event| {
        let content = event.content().expect("content");
        let call = content.function_calls().next().expect("a call");
        let response = content.function_responses().next().expect("a response");
        let metadata = serde_json::to_string(&event.llm_response.custom_metadata).expect("JSON");
        (call.args.to_string(), response.response.to_string(), metadata)
    };
    let sent = written(&event);
    assert_eq!(
        sent.0,
        r#"{"zeta":1,"alpha":{"mid":[{"z":true,"a":null}],"beta":"b"},"kappa":"k"}"#
    );
    assert_eq!(written(&append(svc, &app, "u", "s", event).await), sent, "AppendEvent");
    let get = || GetRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        ..Default::default()
    };
    let session = svc.get(get()).await.expect("get");
    assert_eq!(written(&session.events.as_slice()[0]), sent, "GetSession");
    let encoded = svc.get_encoded(get()).await.expect("get encoded");
    let decoded = encoded.events[0].decode().expect("the stored bytes decode");
    assert_eq!(written(&decoded), sent, "GetSession's stored bytes");
    let page = svc
        .list_events(ListEventsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect("list events");
    assert_eq!(written(&page.events[0]), sent, "ListEvents");
    let mut watch = watch_from_start(svc, &app, "u", "s").await;
    assert_eq!(written(&next_event(&mut watch).await), sent, "WatchSession");
}

/// Every field of an ADK event (and "unset" apart from `false`) survives AppendEvent,
/// and every read path (GetSession, ListEvents both ways, WatchSession) returns the
/// event exactly as appended.
pub async fn adk_events_round_trip_on_every_read_path(svc: &dyn SessionService) {
    let app = unique_prefix("fidelity");
    create(svc, &app, "u", "s", &[]).await;
    let mut appended = Vec::new();
    for event in [crate::adk_events::rich_event(), crate::adk_events::bare_event()] {
        let stored = append(svc, &app, "u", "s", event.clone()).await;
        assert_eq!(
            stored,
            Event {
                sequence: stored.sequence,
                ..event
            },
            "AppendEvent returns the event as sent"
        );
        appended.push(stored);
    }
    let session = svc
        .get(GetRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect("get");
    assert_eq!(session.events.as_slice(), appended.as_slice(), "GetSession");
    for newest_first in [false, true] {
        let page = svc
            .list_events(ListEventsRequest {
                app_name: app.clone(),
                user_id: "u".into(),
                session_id: "s".into(),
                newest_first,
                ..Default::default()
            })
            .await
            .expect("list events");
        let mut expected = appended.clone();
        if newest_first {
            expected.reverse();
        }
        assert_eq!(page.events, expected, "ListEvents newest_first={newest_first}");
    }
    let mut watch = watch_from_start(svc, &app, "u", "s").await;
    for want in &appended {
        assert_eq!(&next_event(&mut watch).await, want, "WatchSession");
    }

    // Encoded, as the three RPCs reply, every store gives an event in the same form: the
    // Redis store's, the sequence last (docs/semantics.md, Event log and watches 7).
    let session = svc
        .get_encoded(GetRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect("get encoded");
    assert_stored_form(&session.events, &appended, "GetSession");
    let page = svc
        .list_events_encoded(ListEventsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect("list events encoded");
    assert_stored_form(&page.events, &appended, "ListEvents");
    let mut watch = svc
        .watch_encoded(WatchRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            after_sequence: Some(0),
        })
        .await
        .expect("watch encoded");
    let mut watched = Vec::new();
    for _ in &appended {
        let got = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .expect("a watched event in time")
            .expect("the watch goes on")
            .expect("a watched event");
        watched.push(got);
    }
    assert_stored_form(&watched, &appended, "WatchSession");
}

/// `encoded` are `events` as the Redis store keeps them: each passes the read paths' check
/// and decodes to its event, its last bytes field 16 (tag bytes 0x80 0x01) with the
/// sequence (map entries come in no fixed order, so the bytes are compared decoded).
fn assert_stored_form(encoded: &[EncodedEvent], events: &[Event], path: &str) {
    assert_eq!(encoded.len(), events.len(), "{path}");
    for (encoded, event) in encoded.iter().zip(events) {
        assert_eq!(encoded.sequence(), event.sequence, "{path}");
        assert_eq!(encoded.check(), Ok(()), "{path}");
        // Field 16's key, then the sequence as a protobuf varint.
        let mut sequence = vec![0x80, 0x01];
        let mut rest = event.sequence;
        while rest >= 0x80 {
            sequence.push((rest as u8 & 0x7f) | 0x80);
            rest >>= 7;
        }
        sequence.push(rest as u8);
        assert!(
            encoded.as_bytes().ends_with(&sequence),
            "{path}: the sequence comes last"
        );
        assert_eq!(&encoded.decode().expect("decodes"), event, "{path}");
    }
}

// ---------- scope state reads, hostile ids ----------

async fn user_state_of(svc: &dyn SessionService, app: &str, user: &str) -> HashMap<String, Value> {
    let req = UserStateRequest {
        app_name: app.into(),
        user_id: user.into(),
    };
    svc.user_state(req)
        .await
        .unwrap_or_else(|e| panic!("user_state {app}/{user}: {e}"))
}

async fn app_state_of(svc: &dyn SessionService, app: &str) -> HashMap<String, Value> {
    let req = AppStateRequest { app_name: app.into() };
    svc.app_state(req)
        .await
        .unwrap_or_else(|e| panic!("app_state {app}: {e}"))
}

pub async fn user_and_app_state_read_without_a_session(svc: &dyn SessionService) {
    let app = unique_prefix("scopes");
    // Nothing stored yet: empty, not NOT_FOUND (as ADK's get_user_state).
    assert!(user_state_of(svc, &app, "u").await.is_empty());
    assert!(app_state_of(svc, &app).await.is_empty());

    let initial = [
        ("user:name", json!("Ada")),
        ("app:model", json!("m1")),
        ("temp:scratch", json!(1)),
        ("own", json!(true)),
    ];
    create(svc, &app, "u", "s1", &initial).await;
    create(svc, &app, "v", "s1", &[("user:name", json!("Bob"))]).await;
    // Keys come without their scope prefix, as ADK's get_user_state returns them.
    assert_eq!(user_state_of(svc, &app, "u").await, map(&[("name", json!("Ada"))]));
    assert_eq!(user_state_of(svc, &app, "v").await, map(&[("name", json!("Bob"))]));
    assert_eq!(app_state_of(svc, &app).await, map(&[("model", json!("m1"))]));

    let delta = [
        ("user:name", json!("Ada L.")),
        ("user:lang", json!(null)),
        ("app:model", json!("m2")),
        ("temp:x", json!(1)),
    ];
    append(svc, &app, "u", "s1", event_with(&delta)).await;
    let expected_user = map(&[("name", json!("Ada L.")), ("lang", json!(null))]);
    assert_eq!(user_state_of(svc, &app, "u").await, expected_user);
    assert_eq!(app_state_of(svc, &app).await, map(&[("model", json!("m2"))]));
    // The same values a session's merged state shows, with their prefixes there.
    let session = get(svc, &app, "v", "s1").await;
    assert_eq!(session.state.get("app:model"), Some(json!("m2")));
    // Deleting every session keeps user and app state, as ADK does.
    for (user, id) in [("u", "s1"), ("v", "s1")] {
        let req = DeleteRequest {
            app_name: app.clone(),
            user_id: user.into(),
            session_id: id.into(),
        };
        svc.delete(req).await.expect("delete");
    }
    assert_eq!(user_state_of(svc, &app, "u").await, expected_user);
    assert_eq!(app_state_of(svc, &app).await, map(&[("model", json!("m2"))]));
    assert!(user_state_of(svc, &app, "w").await.is_empty(), "another user has none");
}

fn update_app(app: &str, delta: &[(&str, Value)]) -> UpdateAppStateRequest {
    UpdateAppStateRequest {
        app_name: app.into(),
        state_delta: map(delta),
    }
}

pub async fn app_state_changes_without_an_event(svc: &dyn SessionService) {
    let app = unique_prefix("appstate");
    create(
        svc,
        &app,
        "u",
        "s",
        &[("app:model", json!("m1")), ("app:keep", json!(1))],
    )
    .await;
    let after = svc
        .update_app_state(update_app(
            &app,
            &[("app:model", json!("m2")), ("app:off", json!(null))],
        ))
        .await
        .expect("update app state");
    let expected = map(&[("model", json!("m2")), ("keep", json!(1)), ("off", json!(null))]);
    assert_eq!(after, expected, "the reply is the app's state after the change");
    assert_eq!(app_state_of(svc, &app).await, expected);
    // Every session of the app reads it, and no event was appended.
    let session = get(svc, &app, "u", "s").await;
    assert_eq!(session.state.get("app:model"), Some(json!("m2")));
    assert_eq!(session.event_count, 0);
    let other = create(svc, &app, "v", "s", &[]).await;
    assert_eq!(other.state.get("app:model"), Some(json!("m2")));
    // An app nothing was stored for yet.
    let fresh = unique_prefix("appstate-new");
    let state = svc
        .update_app_state(update_app(&fresh, &[("app:x", json!([1]))]))
        .await
        .expect("update a new app");
    assert_eq!(state, map(&[("x", json!([1]))]));

    // Only app: keys, under the usual key and size rules; nothing changes on refusal.
    for (key, needle) in [
        ("user:name", "not an app: key"),
        ("temp:x", "not an app: key"),
        ("plain", "not an app: key"),
        ("app:", "state_delta"),
        ("", "state_delta"),
    ] {
        let req = update_app(&app, &[(key, json!(1)), ("app:model", json!("m3"))]);
        let message = expect_invalid(svc.update_app_state(req).await, "state_delta", key);
        assert!(message.contains(needle), "{key:?}: {message}");
    }
    let big = json!("x".repeat(adk_grpc_core::validate::MAX_STATE_VALUE_BYTES));
    let too_big = svc.update_app_state(update_app(&app, &[("app:big", big)])).await;
    expect_code(too_big, Code::ResourceExhausted, "an oversized value");
    expect_invalid(
        svc.update_app_state(update_app("", &[("app:x", json!(1))])).await,
        "app_name",
        "no app",
    );
    assert_eq!(
        app_state_of(svc, &app).await,
        expected,
        "refused updates changed nothing"
    );
}

pub async fn hostile_ids_keep_sessions_apart(svc: &dyn SessionService) {
    let base = unique_prefix("hostile");
    // (app, user, session). Neighbours would share keys, hash tags or index members
    // if ids went into keys as they are: `{a:x:y}` twice, member `u:v:w` twice, ...
    let places: Vec<(String, &str, &str)> = vec![
        (format!("{base}:x"), "y", "s"),
        (base.clone(), "x:y", "s"),
        (base.clone(), "u:v", "w"),
        (base.clone(), "u", "v:w"),
        (base.clone(), ":", "s"),
        (base.clone(), "%3A", "s"),
        (base.clone(), "{u}", "}{"),
        (base.clone(), "u}", "{u"),
        (base.clone(), "*", "* ?[]"),
        (base.clone(), "auth0|5f7c8ec7c33c6c004bbafe82", "s/../t"),
        (base.clone(), "group/user123", "~user"),
        (base.clone(), "ü ser 😀", " s "),
        (
            format!("{base}/projects/p/locations/l/reasoningEngines/456"),
            "tenant:42",
            "s",
        ),
    ];
    for (i, (app, user, id)) in places.iter().enumerate() {
        let state = [
            ("who", json!(i)),
            ("user:who", json!(i)),
            (&*format!("app:k{i}"), json!(i)),
        ];
        let created = create(svc, app, user, id, &state).await;
        assert_eq!(
            (created.app_name.as_str(), created.user_id.as_str()),
            (app.as_str(), *user)
        );
        assert_eq!(created.id, *id);
        let mut event = event_with(&[("n", json!(i))]);
        event.id = format!("{user}|{id}");
        append(svc, app, user, id, event).await;
    }
    for (i, (app, user, id)) in places.iter().enumerate() {
        let session = get(svc, app, user, id).await;
        assert_eq!(session.state.get("who"), Some(json!(i)), "{app}/{user}/{id}");
        assert_eq!(session.state.get("user:who"), Some(json!(i)), "{app}/{user}/{id}");
        assert_eq!(session.state.get("n"), Some(json!(i)), "{app}/{user}/{id}");
        assert_eq!(sequences(session.events.as_slice()), [1], "{app}/{user}/{id}");
        assert_eq!(session.events.at(0).expect("the event").id, format!("{user}|{id}"));
        assert_eq!(user_state_of(svc, app, user).await, map(&[("who", json!(i))]));
        let page = svc
            .list(ListRequest {
                app_name: app.clone(),
                user_id: Some(user.to_string()),
                ..Default::default()
            })
            .await
            .expect("list the user's sessions");
        let ids: Vec<&str> = page.sessions.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, [*id], "{app}/{user}");
    }
    let base_keys: Vec<String> = (0..places.len())
        .filter(|i| places[*i].0 == base)
        .map(|i| format!("k{i}"))
        .collect();
    let mut app_keys: Vec<String> = app_state_of(svc, &base).await.into_keys().collect();
    app_keys.sort();
    let mut expected_keys = base_keys.clone();
    expected_keys.sort();
    assert_eq!(
        app_keys, expected_keys,
        "the app's state holds its own sessions' keys only"
    );

    // The app-wide listing, one session per page (page tokens carry the ids): each once.
    let mut listed = Vec::new();
    let mut token = None;
    loop {
        let page = svc
            .list(ListRequest {
                app_name: base.clone(),
                user_id: None,
                page_size: 1,
                page_token: token.take(),
            })
            .await
            .expect("list the app");
        listed.extend(page.sessions.iter().map(|s| (s.user_id.clone(), s.id.clone())));
        match page.next_page_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    listed.sort();
    let mut expected: Vec<(String, String)> = places
        .iter()
        .filter(|(app, ..)| *app == base)
        .map(|(_, user, id)| (user.to_string(), id.to_string()))
        .collect();
    expected.sort();
    assert_eq!(listed, expected);

    // Deleting one leaves its neighbour whole.
    for (deleted, kept) in [(1, 0), (3, 2), (5, 4), (7, 6)] {
        let (app, user, id) = &places[deleted];
        let req = DeleteRequest {
            app_name: app.clone(),
            user_id: user.to_string(),
            session_id: id.to_string(),
        };
        svc.delete(req).await.expect("delete");
        expect_code(try_get(svc, app, user, id).await, Code::NotFound, "deleted");
        let (app, user, id) = &places[kept];
        let session = get(svc, app, user, id).await;
        assert_eq!(session.state.get("who"), Some(json!(kept)), "{app}/{user}/{id} kept");
        assert_eq!(sequences(session.events.as_slice()), [1]);
    }
}

// ---------- long conversations ----------

async fn window(svc: &dyn SessionService, app: &str, id: &str, num_recent_events: Option<usize>) -> Session {
    svc.get(GetRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: id.into(),
        num_recent_events,
        after: None,
        since_compaction: true,
    })
    .await
    .unwrap_or_else(|e| panic!("bounded read of {id}: {e}"))
}

fn compaction_of(start: DateTime<Utc>, end: DateTime<Utc>) -> Event {
    let mut e = event_at(end + ChronoDuration::milliseconds(1));
    e.llm_response.content = None;
    e.actions.compaction = Some(EventCompaction {
        start_timestamp: start,
        end_timestamp: end,
        compacted_content: Content::new("model").with_text("summary"),
    });
    e
}

/// A runner turn's bounded read (`since_compaction`): the whole log before any
/// compaction; after one, the events from the first stamped at or after its range's
/// end (clock order is not log order: an event stamped later but stored earlier is
/// in) with the compaction itself; a later compaction moves it on; a rewind resets it
/// to the whole log. Other reads keep serving the whole log, and the window's
/// filters combine with `num_recent_events`. A fork has its copied events' window.
pub async fn bounded_reads_start_at_the_latest_compaction(svc: &dyn SessionService) {
    let app = unique_prefix("window");
    create(svc, &app, "u", "s", &[]).await;
    let base = Utc::now() - ChronoDuration::minutes(1);
    let at = |i: i64| base + ChronoDuration::seconds(i);
    for i in 1..=4 {
        append(svc, &app, "u", "s", event_at(at(i))).await;
    }
    assert_eq!(
        sequences(window(svc, &app, "s", None).await.events.as_slice()),
        [1, 2, 3, 4]
    );
    // Summarises 1..=2 (ends at at(2)): the window is 2 onwards (at(2) is the range's
    // last event: the history, not the store, filters exactly).
    append(svc, &app, "u", "s", compaction_of(at(1), at(2))).await;
    assert_eq!(
        sequences(window(svc, &app, "s", None).await.events.as_slice()),
        [2, 3, 4, 5]
    );
    assert_eq!(
        sequences(window(svc, &app, "s", Some(2)).await.events.as_slice()),
        [4, 5]
    );
    assert_eq!(
        get(svc, &app, "u", "s").await.events.len(),
        5,
        "GetSession still serves the whole log"
    );
    append(svc, &app, "u", "s", event_at(at(6))).await;
    // Summarises up to at(5): event 4 (at(4)) is before the end; 5 is the old
    // compaction (stamped just after at(2)), 6 is after.
    let mut stale = event_at(at(5) + ChronoDuration::seconds(30));
    stale.llm_response.content = Some(Content::new("user").with_text("stamped ahead"));
    append(svc, &app, "u", "s", stale).await;
    append(svc, &app, "u", "s", compaction_of(at(1), at(5))).await;
    assert_eq!(
        sequences(window(svc, &app, "s", None).await.events.as_slice()),
        [6, 7, 8]
    );
    let mut rewind = event_at(at(9));
    rewind.actions.rewind_before_invocation_id = Some("e-conformance".into());
    append(svc, &app, "u", "s", rewind).await;
    assert_eq!(
        window(svc, &app, "s", None).await.events.len(),
        9,
        "a rewind may revive anything: the whole log"
    );
    append(svc, &app, "u", "s", compaction_of(at(1), at(6))).await;
    assert_eq!(
        sequences(window(svc, &app, "s", None).await.events.as_slice()),
        [6, 7, 8, 9, 10]
    );
    // A fork has the window of the events it copies.
    let log = get(svc, &app, "u", "s").await.events.into_vec();
    svc.fork(fork_req(&app, "s", &log[9].id, Some("whole"))).await.unwrap();
    assert_eq!(
        sequences(window(svc, &app, "whole", None).await.events.as_slice()),
        [6, 7, 8, 9, 10]
    );
    svc.fork(fork_req(&app, "s", &log[7].id, Some("early"))).await.unwrap();
    assert_eq!(
        sequences(window(svc, &app, "early", None).await.events.as_slice()),
        [6, 7, 8]
    );
    svc.fork(fork_req(&app, "s", &log[8].id, Some("rewound")))
        .await
        .unwrap();
    assert_eq!(
        window(svc, &app, "rewound", None).await.events.len(),
        9,
        "its last window move is the rewind"
    );
    let missing = svc
        .get(GetRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "nope".into(),
            since_compaction: true,
            ..Default::default()
        })
        .await;
    expect_code(missing, Code::NotFound, "bounded read of a missing session");
}

fn recent_req(app: &str, budget_tokens: usize, function_call_ids: &[&str]) -> RecentRequest {
    RecentRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: "s".into(),
        budget_tokens,
        function_call_ids: function_call_ids.iter().map(|id| id.to_string()).collect(),
    }
}

/// A turn's read without compaction (`get_recent`): the newest events, newest first,
/// while their estimated tokens fit the budget (the newest one always), over as many
/// pages as that takes, with the session's whole state and the count left out; past
/// the budget only to reach the function calls it must include. The events are the
/// whole log's tail, as GetSession serves it.
pub async fn recent_reads_stop_at_the_token_budget(svc: &dyn SessionService) {
    let app = unique_prefix("recent");
    create(svc, &app, "u", "s", &[]).await;
    // 13 estimated tokens each: 36 characters (9) and 4 for the content.
    let text = |i: usize| format!("message {i:04} of a long conversation.");
    for i in 1..=100 {
        let mut event = Event::new(format!("e-{i}"))
            .with_author("tester")
            .with_content(Content::new("user").with_text(text(i)));
        if i == 1 {
            event.actions.state_delta = map(&[("first", json!("set by event 1"))]);
        }
        if i == 5 {
            let call = Content::new("model").with_part(adk_grpc_core::Part::function_call(
                "lookup",
                json!({}),
                Some("call-5".into()),
            ));
            event = event.with_content(call);
        }
        append(svc, &app, "u", "s", event).await;
    }
    assert_eq!(
        estimate_event_tokens(&get(svc, &app, "u", "s").await.events.as_slice()[99]),
        13
    );
    let whole = get(svc, &app, "u", "s").await.events.into_vec();
    let read = |budget, calls: &'static [&'static str]| svc.get_recent(recent_req(&app, budget, calls));

    // 40 events fit 520 tokens, not 41: three pages (32, then 64 asked).
    let recent = read(520, &[]).await.unwrap();
    assert_eq!(recent.session.events.as_slice(), &whole[60..]);
    assert_eq!((recent.left_out, recent.session.event_count), (60, 100));
    assert_eq!(
        recent.session.state.get("first"),
        Some(json!("set by event 1")),
        "the whole state"
    );
    assert_eq!(
        read(532, &[]).await.unwrap().left_out,
        60,
        "one token short of 41 events"
    );
    assert_eq!(read(533, &[]).await.unwrap().left_out, 59);
    // The newest event always; a budget over the log reads it whole.
    let one = read(1, &[]).await.unwrap();
    assert_eq!(
        (sequences(one.session.events.as_slice()), one.left_out),
        (vec![100], 99)
    );
    let all = read(100_000, &[]).await.unwrap();
    assert_eq!((all.session.events.as_slice(), all.left_out), (&whole[..], 0));
    // A call being answered is read however old (event 5), and nothing older.
    let answering = read(130, &["call-5"]).await.unwrap();
    assert_eq!(
        (answering.session.events.as_slice(), answering.left_out),
        (&whole[4..], 4)
    );
    let unknown = read(130, &["call-none"]).await.unwrap();
    assert_eq!(unknown.left_out, 0, "a call that is not in the log: read to the start");

    expect_code(read(0, &[]).await, Code::InvalidArgument, "a zero budget");
    let missing = svc
        .get_recent(RecentRequest {
            session_id: "nope".into(),
            ..recent_req(&app, 10, &[])
        })
        .await;
    expect_code(missing, Code::NotFound, "recent read of a missing session");
}

fn fork_req(app: &str, source: &str, up_to: &str, new_id: Option<&str>) -> ForkRequest {
    ForkRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: source.into(),
        up_to_event_id: up_to.into(),
        new_session_id: new_id.map(String::from),
    }
}

/// ForkSession copies the source's events up to the given one (inclusive) into a new
/// session of the same app and user: same ids, timestamps and sequences; session state
/// built from the copied deltas (user: state is shared and left as it is); the source
/// untouched; the fork takes appends of its own from the next sequence; a generated id
/// when none is given. A missing session or event is NOT_FOUND, a taken id
/// ALREADY_EXISTS, bad ids INVALID_ARGUMENT naming the field, and none of them writes.
pub async fn fork_copies_a_prefix_into_a_new_session(svc: &dyn SessionService) {
    let app = unique_prefix("fork");
    create(svc, &app, "u", "src", &[]).await;
    let e1 = append(
        svc,
        &app,
        "u",
        "src",
        event_with(&[("k", json!(1)), ("user:u", json!(1))]),
    )
    .await;
    let e2 = append(
        svc,
        &app,
        "u",
        "src",
        event_with(&[("k", json!(2)), ("gone", json!("x"))]),
    )
    .await;
    let _e3 = append(
        svc,
        &app,
        "u",
        "src",
        event_with(&[("k", json!(3)), ("gone", Value::Null)]),
    )
    .await;
    append(svc, &app, "u", "src", event_with(&[("user:u", json!(4))])).await;
    let source_before = get(svc, &app, "u", "src").await;

    let fork = svc.fork(fork_req(&app, "src", &e2.id, Some("f"))).await.unwrap();
    assert_eq!(fork.id, "f");
    assert_eq!(sequences(fork.events.as_slice()), [1, 2]);
    assert_eq!(
        fork.events.as_slice(),
        &source_before.events.as_slice()[..2],
        "copies are exact"
    );
    assert_eq!(fork.event_count, 2);
    assert_eq!(fork.state.get("k"), Some(json!(2)));
    assert_eq!(fork.state.get("gone"), Some(json!("x")));
    assert_eq!(
        fork.state.get("user:u"),
        Some(json!(4)),
        "user: state is shared, not copied"
    );
    let read = get(svc, &app, "u", "f").await;
    assert_eq!(read.events, fork.events);
    assert_eq!(read.state, fork.state);
    assert_eq!(
        get(svc, &app, "u", "src").await,
        source_before,
        "the source is untouched"
    );

    let next = append(svc, &app, "u", "f", event_with(&[("k", json!(20))])).await;
    assert_eq!(next.sequence, 3);
    assert_eq!(get(svc, &app, "u", "f").await.state.get("k"), Some(json!(20)));
    assert_eq!(get(svc, &app, "u", "src").await.state.get("k"), Some(json!(3)));
    let replayed = append(svc, &app, "u", "f", e1.clone()).await;
    assert_eq!(
        replayed.sequence, 1,
        "the copied ids are the fork's own: a re-append is idempotent"
    );

    let generated = svc.fork(fork_req(&app, "src", &e1.id, None)).await.unwrap();
    assert!(
        uuid::Uuid::parse_str(&generated.id).is_ok(),
        "generated id {}",
        generated.id
    );
    assert_eq!(sequences(generated.events.as_slice()), [1]);
    let listed = svc
        .list(ListRequest {
            app_name: app.clone(),
            user_id: Some("u".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.sessions.len(), 3, "forks are listed as any session");

    expect_code(
        svc.fork(fork_req(&app, "src", &e1.id, Some("f"))).await,
        Code::AlreadyExists,
        "fork onto a taken id",
    );
    expect_code(
        svc.fork(fork_req(&app, "src", "no-such-event", Some("g"))).await,
        Code::NotFound,
        "fork at a missing event",
    );
    let fork_of_fork = svc.fork(fork_req(&app, "f", &next.id, Some("g"))).await.unwrap();
    assert_eq!(
        sequences(fork_of_fork.events.as_slice()),
        [1, 2, 3],
        "a fork forks as any session"
    );
    expect_code(
        svc.fork(fork_req(&app, "missing", &e1.id, Some("h"))).await,
        Code::NotFound,
        "fork of a missing session",
    );
    let err = expect_code(
        svc.fork(fork_req(&app, "src", "", Some("h"))).await,
        Code::InvalidArgument,
        "fork without an event id",
    );
    assert!(err.to_string().contains("up_to_event_id"), "{err}");
    let err = expect_code(
        svc.fork(fork_req(&app, "src", &e1.id, Some("src"))).await,
        Code::InvalidArgument,
        "fork onto the source's id",
    );
    assert!(err.to_string().contains("new_session_id"), "{err}");
    let err = expect_code(
        svc.fork(fork_req(&app, "src", &e1.id, Some("bad\u{7}id"))).await,
        Code::InvalidArgument,
        "fork onto a bad id",
    );
    assert!(err.to_string().contains("new_session_id"), "{err}");
    expect_code(
        try_get(svc, &app, "u", "h").await,
        Code::NotFound,
        "failed forks write nothing",
    );
    assert_eq!(
        get(svc, &app, "u", "src").await,
        source_before,
        "the source is still untouched"
    );
}
