//! The A2A service's rules over a real runner on the in-memory stores: tasks read back
//! only as far as they reach (counted at the store), cancel, and ListTasks' page tokens
//! checked against the whole log's tasks.

use super::task::tasks_of;
use super::task::tests::{agent, answer, client_call, user};
use super::{A2aTaskService, TaskId};
use crate::{ClientTool, LlmAgentBuilder, Runner, RunnerConfig};
use adk_grpc_core::{
    AdkError, AppStateRequest, AppendEventRequest, CoreSessionService, CreateRequest, DeleteRequest, Event,
    EventStream, GetRequest, ListEventsRequest, ListEventsResponse, ListRequest, ListResponse, Result, ScopeState,
    Session, SessionService, UpdateAppStateRequest, UserStateRequest, WatchRequest,
};
use adk_grpc_models::{MockFunctionCall, MockModel, MockTurn, WhenExhausted};
use adk_grpc_proto::a2a;
use adk_grpc_store::{InMemorySessionBackend, InMemorySessionLease};
use async_trait::async_trait;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const USER: &str = "alice";

/// The in-memory session store, counting the events its reads return (Get and
/// ListEvents; watches are streams of what happens, not reads of the past).
struct Counted {
    inner: Arc<dyn SessionService>,
    events_read: AtomicUsize,
}

impl Counted {
    fn take(&self) -> usize {
        self.events_read.swap(0, Ordering::SeqCst)
    }
}

#[async_trait]
impl SessionService for Counted {
    async fn create(&self, req: CreateRequest) -> Result<Session> {
        self.inner.create(req).await
    }
    async fn get(&self, req: GetRequest) -> Result<Session> {
        let session = self.inner.get(req).await?;
        self.events_read.fetch_add(session.events.len(), Ordering::SeqCst);
        Ok(session)
    }
    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        self.inner.list(req).await
    }
    async fn delete(&self, req: DeleteRequest) -> Result<()> {
        self.inner.delete(req).await
    }
    async fn append_event(&self, req: AppendEventRequest) -> Result<Event> {
        self.inner.append_event(req).await
    }
    async fn list_events(&self, req: ListEventsRequest) -> Result<ListEventsResponse> {
        let page = self.inner.list_events(req).await?;
        self.events_read.fetch_add(page.events.len(), Ordering::SeqCst);
        Ok(page)
    }
    async fn watch(&self, req: WatchRequest) -> Result<EventStream> {
        self.inner.watch(req).await
    }
    async fn user_state(&self, req: UserStateRequest) -> Result<ScopeState> {
        self.inner.user_state(req).await
    }
    async fn app_state(&self, req: AppStateRequest) -> Result<ScopeState> {
        self.inner.app_state(req).await
    }
    async fn update_app_state(&self, req: UpdateAppStateRequest) -> Result<ScopeState> {
        self.inner.update_app_state(req).await
    }
}

struct Fixture {
    store: Arc<Counted>,
    a2a: A2aTaskService,
}

/// An app whose agent `bot` has a client tool `confirm`, over counted in-memory sessions.
fn fixture(model: MockModel) -> Fixture {
    let store = Arc::new(Counted {
        inner: Arc::new(CoreSessionService::new(InMemorySessionBackend::new())),
        events_read: AtomicUsize::new(0),
    });
    let agent = LlmAgentBuilder::new("bot")
        .model(Arc::new(model))
        .tool(Arc::new(ClientTool::new("confirm", "Asks the user to confirm.")))
        .build()
        .expect("agent");
    let config = RunnerConfig::new(
        "app",
        Arc::new(agent),
        store.clone(),
        Arc::new(InMemorySessionLease::new()),
    );
    let runner = Runner::new(config).expect("runner");
    let a2a = A2aTaskService::new(Arc::new(runner), None).with_wait(Duration::from_secs(30));
    Fixture { store, a2a }
}

/// A model that asks for `confirm` at the start of each conversation, then echoes.
fn asks_to_confirm() -> MockModel {
    MockModel::scripted(vec![MockTurn::FunctionCalls(vec![MockFunctionCall {
        name: "confirm".into(),
        args: json!({}),
        id: None,
    }])])
    .when_exhausted(WhenExhausted::Echo)
    .per_conversation(true)
}

fn message(context_id: &str, task_id: &str, text: &str) -> a2a::SendMessageRequest {
    a2a::SendMessageRequest {
        message: Some(a2a::Message {
            message_id: format!("m-{text}"),
            context_id: context_id.into(),
            task_id: task_id.into(),
            role: a2a::Role::User as i32,
            parts: vec![a2a::Part {
                content: Some(a2a::part::Content::Text(text.into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn get(id: &str) -> a2a::GetTaskRequest {
    a2a::GetTaskRequest {
        id: id.into(),
        ..Default::default()
    }
}

fn state(task: &a2a::Task) -> a2a::TaskState {
    task.status.as_ref().expect("status").state()
}

async fn append(store: &dyn SessionService, session_id: &str, event: Event) -> Event {
    store
        .append_event(AppendEventRequest {
            app_name: "app".into(),
            user_id: USER.into(),
            session_id: session_id.into(),
            event,
            timestamp_missing: false,
            precondition: None,
        })
        .await
        .expect("append")
}

async fn create(store: &dyn SessionService, session_id: &str) {
    store
        .create(CreateRequest {
            app_name: "app".into(),
            user_id: USER.into(),
            session_id: Some(session_id.into()),
            ..Default::default()
        })
        .await
        .expect("create");
}

async fn whole_log(store: &dyn SessionService, session_id: &str) -> Vec<Event> {
    store
        .get(GetRequest {
            app_name: "app".into(),
            user_id: USER.into(),
            session_id: session_id.into(),
            ..Default::default()
        })
        .await
        .expect("get")
        .events
        .into_vec()
}

fn outcome(invocation: &str, state: a2a::TaskState) -> Event {
    super::task::outcome_event(invocation, "bot", state, None)
}

#[tokio::test]
async fn a_task_is_read_back_only_as_far_as_its_first_message() {
    let Fixture { store, a2a } = fixture(MockModel::echo());
    create(store.as_ref(), "long").await;
    for i in 0..500 {
        append(store.as_ref(), "long", user(&format!("old-{i}"), "an old question")).await;
        append(store.as_ref(), "long", agent(&format!("old-{i}"), "an old answer")).await;
    }
    let task = a2a
        .send_message(USER, &message("long", "", "hello"))
        .await
        .expect("send");
    assert_eq!(state(&task), a2a::TaskState::Completed);

    store.take();
    let read = a2a.get_task(USER, &get(&task.id)).await.expect("GetTask");
    let events_read = store.take();
    assert_eq!(read.history.len(), 2, "{read:?}");
    assert!(
        events_read <= 16,
        "GetTask of a 3-event task read {events_read} events of a 1,003-event log"
    );

    let listed = a2a
        .list_tasks(
            USER,
            &a2a::ListTasksRequest {
                context_id: "long".into(),
                page_size: Some(1),
                ..Default::default()
            },
        )
        .await
        .expect("ListTasks");
    let events_read = store.take();
    assert_eq!(listed.tasks, [read]);
    assert!(!listed.next_page_token.is_empty());
    assert!(events_read <= 16, "a page of one task read {events_read} events");
}

#[tokio::test]
async fn an_input_required_task_is_canceled_and_a_finished_one_is_not() {
    let Fixture { a2a, .. } = fixture(asks_to_confirm());
    let waiting = a2a
        .send_message(USER, &message("c", "", "book it"))
        .await
        .expect("send");
    assert_eq!(state(&waiting), a2a::TaskState::InputRequired);

    let cancel = a2a::CancelTaskRequest {
        id: waiting.id.clone(),
        ..Default::default()
    };
    let canceled = a2a.cancel_task(USER, &cancel).await.expect("CancelTask");
    assert_eq!(state(&canceled), a2a::TaskState::Canceled);
    let read = a2a.get_task(USER, &get(&waiting.id)).await.expect("GetTask");
    assert_eq!(state(&read), a2a::TaskState::Canceled, "recorded, for every replica");

    // Canceled is terminal: no second cancel, no answer.
    let again = a2a.cancel_task(USER, &cancel).await.expect_err("terminal");
    assert_eq!(again.code(), tonic::Code::FailedPrecondition, "{again}");
    assert!(again.to_string().contains("TASK_STATE_CANCELED"), "{again}");
    let answer = a2a
        .send_message(USER, &message("c", &waiting.id, "yes"))
        .await
        .expect_err("a canceled task takes no answer");
    assert_eq!(answer.code(), tonic::Code::FailedPrecondition, "{answer}");

    // A completed task cannot be canceled either.
    let done = a2a.send_message(USER, &message("c", "", "thanks")).await.expect("send");
    assert_eq!(state(&done), a2a::TaskState::Completed);
    let err = a2a
        .cancel_task(
            USER,
            &a2a::CancelTaskRequest {
                id: done.id.clone(),
                ..Default::default()
            },
        )
        .await
        .expect_err("completed");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err}");
    assert!(err.to_string().contains("TASK_STATE_COMPLETED"), "{err}");
}

/// A context whose tasks interleave: `a` waits for input while `b` runs, `a`'s outcome
/// lands after `b` began, a rewind marker sits between, `d` answers `a` later on.
async fn tangled_context(store: &dyn SessionService, session_id: &str) -> Vec<Event> {
    create(store, session_id).await;
    let mut rewind = Event::new("r").with_author("user");
    rewind.actions.rewind_before_invocation_id = Some("gone".into());
    for event in [
        user("a", "book it"),
        client_call("a", "call-1"),
        user("b", "weather?"),
        agent("b", "sunny"),
        outcome("a", a2a::TaskState::InputRequired),
        rewind,
        user("c", "still there?"),
        answer("d", "call-1"),
        agent("d", "booked"),
        outcome("d", a2a::TaskState::Completed),
        user("e", "and tomorrow?"),
        agent("e", "rain"),
        outcome("e", a2a::TaskState::Completed),
        user("f", "one more"),
        client_call("f", "call-2"),
        user("g", "never mind"),
        outcome("g", a2a::TaskState::Failed),
        user("h", "last"),
    ] {
        append(store, session_id, event).await;
    }
    whole_log(store, session_id).await
}

fn request(context_id: &str, status: a2a::TaskState, page_size: i32, page_token: &str) -> a2a::ListTasksRequest {
    a2a::ListTasksRequest {
        context_id: context_id.into(),
        status: status as i32,
        page_size: Some(page_size),
        page_token: page_token.into(),
        ..Default::default()
    }
}

/// Every page of a listing, in order.
async fn pages(a2a: &A2aTaskService, first: a2a::ListTasksRequest) -> Vec<a2a::ListTasksResponse> {
    let mut pages = Vec::new();
    let mut request = first;
    loop {
        let page = a2a.list_tasks(USER, &request).await.expect("ListTasks");
        let next = page.next_page_token.clone();
        pages.push(page);
        if next.is_empty() {
            return pages;
        }
        assert!(pages.len() < 100, "the listing does not end");
        request.page_token = next;
    }
}

#[tokio::test]
async fn list_tasks_pages_match_the_whole_logs_tasks_in_any_page_size_and_filter() {
    let Fixture { store, a2a } = fixture(MockModel::echo());
    let log = tangled_context(store.as_ref(), "c").await;
    let all = tasks_of("c", &log);
    assert_eq!(
        all.iter().map(|t| t.id.invocation_id.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c", "e", "f", "g", "h"],
        "the rewind marker is no task and d joins a"
    );
    for filter in [
        a2a::TaskState::Unspecified,
        a2a::TaskState::Completed,
        a2a::TaskState::Working,
        a2a::TaskState::InputRequired,
        a2a::TaskState::Failed,
        a2a::TaskState::Canceled,
    ] {
        let mut expected: Vec<a2a::Task> = all
            .iter()
            .rev()
            .filter(|t| filter == a2a::TaskState::Unspecified || t.state() == filter)
            .map(|t| t.to_a2a(None, Vec::new()))
            .collect();
        if filter == a2a::TaskState::Unspecified {
            assert_eq!(expected.len(), 7);
        }
        for page_size in 1..=4 {
            let pages = pages(&a2a, request("c", filter, page_size, "")).await;
            for page in &pages {
                assert!(page.tasks.len() <= page_size as usize);
            }
            let listed: Vec<a2a::Task> = pages.iter().flat_map(|p| p.tasks.clone()).collect();
            assert_eq!(listed, expected, "status {filter:?}, page size {page_size}");
            let last = pages.last().expect("a page");
            assert_eq!(last.total_size as usize, expected.len(), "the last page's total");
            if !expected.is_empty() {
                assert!(
                    pages.iter().all(|p| !p.tasks.is_empty()),
                    "no empty page when tasks remain"
                );
            }
        }
        expected.clear();
    }
    // The states the log says, by the rules of task.rs.
    let states: Vec<(String, a2a::TaskState)> = all.iter().map(|t| (t.id.invocation_id.clone(), t.state())).collect();
    assert_eq!(
        states,
        [
            ("a".into(), a2a::TaskState::Completed),
            ("b".into(), a2a::TaskState::Completed),
            ("c".into(), a2a::TaskState::Completed),
            ("e".into(), a2a::TaskState::Completed),
            ("f".into(), a2a::TaskState::InputRequired),
            ("g".into(), a2a::TaskState::Failed),
            ("h".into(), a2a::TaskState::Working),
        ]
    );
}

#[tokio::test]
async fn a_listing_of_every_context_pages_through_each_once() {
    let Fixture { store, a2a } = fixture(MockModel::echo());
    let mut expected = Vec::new();
    for context in ["c1", "c2", "c3"] {
        let log = tangled_context(store.as_ref(), context).await;
        // ListSessions order (least recently updated first): the order they were filled in.
        expected.extend(tasks_of(context, &log).iter().rev().map(|t| t.to_a2a(None, Vec::new())));
    }
    for page_size in [1, 2, 3, 7, 50] {
        let pages = pages(&a2a, request("", a2a::TaskState::Unspecified, page_size, "")).await;
        let listed: Vec<a2a::Task> = pages.iter().flat_map(|p| p.tasks.clone()).collect();
        assert_eq!(listed, expected, "page size {page_size}");
    }
}

#[tokio::test]
async fn page_tokens_are_opaque_and_bound_to_their_listing() {
    let Fixture { store, a2a } = fixture(MockModel::echo());
    tangled_context(store.as_ref(), "c").await;
    tangled_context(store.as_ref(), "other").await;
    let first = a2a
        .list_tasks(USER, &request("c", a2a::TaskState::Unspecified, 2, ""))
        .await
        .expect("ListTasks");
    let token = first.next_page_token.clone();
    assert!(token.parse::<u64>().is_err(), "not a bare number: {token}");

    let refused = [
        request("c", a2a::TaskState::Unspecified, 2, "garbage!"),
        request("c", a2a::TaskState::Unspecified, 2, "2"),
        request("other", a2a::TaskState::Unspecified, 2, &token),
        request("c", a2a::TaskState::Completed, 2, &token),
        request("", a2a::TaskState::Unspecified, 2, &token),
    ];
    for bad in refused {
        let err = a2a.list_tasks(USER, &bad).await.expect_err("refused");
        match &err {
            AdkError::InvalidArgument { field, .. } => assert_eq!(field, "page_token", "{err}"),
            other => panic!("{:?}: {other:?}", bad.page_token),
        }
        assert!(err.to_string().contains("page_token"), "{err}");
    }
    // Another user's listing refuses it too.
    let err = a2a
        .list_tasks("bob", &request("c", a2a::TaskState::Unspecified, 2, &token))
        .await
        .expect_err("another user's token");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
    // Bad page sizes and statuses name their field.
    let err = a2a
        .list_tasks(USER, &request("c", a2a::TaskState::Unspecified, 101, ""))
        .await
        .expect_err("too large");
    assert!(
        matches!(&err, AdkError::InvalidArgument { field, .. } if field == "page_size"),
        "{err}"
    );
    let mut unknown = request("c", a2a::TaskState::Unspecified, 2, "");
    unknown.status = 99;
    let err = a2a.list_tasks(USER, &unknown).await.expect_err("unknown status");
    assert!(
        matches!(&err, AdkError::InvalidArgument { field, .. } if field == "status"),
        "{err}"
    );
}

#[tokio::test]
async fn get_task_finds_tasks_by_their_first_message_only() {
    let Fixture { store, a2a } = fixture(MockModel::echo());
    tangled_context(store.as_ref(), "c").await;
    let a = a2a.get_task(USER, &get("c:a")).await.expect("a");
    assert_eq!(state(&a), a2a::TaskState::Completed, "answered by d");
    assert_eq!(a.history.len(), 4, "{a:?}");
    for missing in ["c:d", "c:r", "c:nope", "nope:a"] {
        let err = a2a.get_task(USER, &get(missing)).await.expect_err(missing);
        assert_eq!(err.code(), tonic::Code::NotFound, "{missing}: {err}");
    }
    let err = a2a.get_task(USER, &get("no-colon")).await.expect_err("bad id");
    assert!(
        matches!(&err, AdkError::InvalidArgument { field, .. } if field == "id"),
        "{err}"
    );
    let mut negative = get("c:a");
    negative.history_length = Some(-1);
    let err = a2a.get_task(USER, &negative).await.expect_err("negative");
    assert!(
        matches!(&err, AdkError::InvalidArgument { field, .. } if field == "history_length"),
        "{err}"
    );
    assert_eq!(TaskId::parse("id", "c:a").expect("id"), TaskId::new("c", "a"));
}

/// ADK's internal `custom_metadata` keys (`__adk_internal_…`, docs/semantics.md §10 rule 8)
/// are stored with the events of a context, but never leave the suite in an A2A task.
#[tokio::test]
async fn adks_internal_metadata_never_leaves_in_a_task() {
    let Fixture { store, a2a } = fixture(MockModel::echo());
    create(store.as_ref(), "restored").await;
    let mut question = user("old", "a restored question");
    let mut reply = agent("old", "a restored answer");
    for event in [&mut question, &mut reply] {
        let metadata = json!({"__adk_internal_restored_event": true, "origin": "import"});
        event.llm_response.custom_metadata = metadata.as_object().cloned();
    }
    append(store.as_ref(), "restored", question).await;
    append(store.as_ref(), "restored", reply).await;
    let listed = a2a
        .list_tasks(
            USER,
            &a2a::ListTasksRequest {
                context_id: "restored".into(),
                ..Default::default()
            },
        )
        .await
        .expect("ListTasks");
    assert_eq!(listed.tasks.len(), 1, "{listed:?}");
    let task = a2a.get_task(USER, &get(&listed.tasks[0].id)).await.expect("GetTask");
    assert_eq!(task.history.len(), 2, "{task:?}");
    for shown in [format!("{listed:?}"), format!("{task:?}")] {
        assert!(!shown.contains(adk_grpc_core::INTERNAL_METADATA_PREFIX), "{shown}");
    }
}
