//! A2A tasks read from a session's log, so any replica answers GetTask, ListTasks
//! and SubscribeToTask the same.
//!
//! A task starts with a user message (a user event with content) of a new invocation,
//! and is joined by the invocations whose message answers its pending (long-running or
//! client) function calls: an `input-required` task resumed keeps its id. Every event of
//! its invocations is the task's, wherever it lies in the log (an outcome recorded after
//! the next run began included); invocations without a message (a rewind's marker)
//! belong to no task. Its state is the last invocation's:
//! - the outcome the A2A server records when the run ends (an event without content,
//!   so no model reads it, whose `custom_metadata` says the state), when present;
//! - failed, when the invocation was closed as interrupted (its runner crashed);
//! - input-required, while a call it made waits for an answer;
//! - completed, once another invocation ran after it (a run started over AgentRunner);
//! - working otherwise.
//!
//! A [`Region`] is a stretch of the log read newest first, down to some event: the tasks
//! whose first message lies in it are whole (everything after a task's start is read),
//! so a reader reads back only as far as the tasks it answers with reach.

use super::convert::{TaskId, message_of_event};
use crate::rules::USER_AUTHOR;
use adk_grpc_core::{Event, JsonObject};
use adk_grpc_proto::a2a;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The `custom_metadata` key of the event recording how an A2A task's run ended.
pub const OUTCOME_KEY: &str = "a2a_task_state";
/// The `custom_metadata` key of a failed run's error, beside [`OUTCOME_KEY`].
pub const ERROR_KEY: &str = "a2a_error";

/// One task of a session: its invocations' events, in log order.
#[derive(Debug, Clone)]
pub struct TaskLog {
    pub id: TaskId,
    pub invocations: Vec<String>,
    pub events: Vec<Event>,
    /// True when an invocation outside the task ran after its last event.
    pub followed: bool,
}

/// The tasks of a session whose whole log is `events` (oldest first), oldest first.
pub fn tasks_of(session_id: &str, events: &[Event]) -> Vec<TaskLog> {
    Region {
        events: events.to_vec(),
        at_start: true,
        above: false,
    }
    .tasks(session_id)
    .tasks
}

/// A stretch of a session's log: `events` (oldest first) run to the log's last event, or
/// to an event every later one of which belongs to tasks that start later.
#[derive(Debug, Clone, Default)]
pub struct Region {
    pub events: Vec<Event>,
    /// The region begins with the log's first event.
    pub at_start: bool,
    /// Events follow the region's last (left unread: they belong to later tasks).
    pub above: bool,
}

/// What a region says about its tasks.
#[derive(Debug, Default)]
pub struct RegionTasks {
    /// The tasks whose first message is in the region, whole, oldest first.
    pub tasks: Vec<TaskLog>,
    /// The sequences of events the region cannot place: of invocations that began
    /// below it (a run's late outcome, an answer to an older call). Their tasks start
    /// below the region; None of them once the region reaches the log's start.
    pub unplaced: Vec<u64>,
}

impl RegionTasks {
    /// The highest sequence a reader of the tasks that start below `start` must read
    /// (at least `start`): their events above it, and every event not placed.
    pub fn reach_below(&self, start: u64) -> u64 {
        let placed = self
            .tasks
            .iter()
            .filter(|task| task.start() < start)
            .flat_map(|task| task.events.iter().map(|e| e.sequence));
        placed.chain(self.unplaced.iter().copied()).fold(start, u64::max)
    }
}

/// True for the event that starts an invocation of a run: the user's message.
pub(crate) fn is_message(event: &Event) -> bool {
    event.author == USER_AUTHOR && event.content().is_some_and(|c| !c.parts.is_empty())
}

impl Region {
    /// The sequence of the region's last event (0 when empty).
    pub fn top(&self) -> u64 {
        self.events.last().map_or(0, |e| e.sequence)
    }

    /// The region's tasks, as the module's rules say.
    pub fn tasks(&self, session_id: &str) -> RegionTasks {
        // Where each invocation of the region went: a task, nowhere (no task), or unplaced.
        #[derive(Clone, Copy)]
        enum Placed {
            Task(usize),
            NoTask,
            Unplaced,
        }
        let mut tasks: Vec<TaskLog> = Vec::new();
        let mut unplaced = Vec::new();
        let mut placed: HashMap<&str, Placed> = HashMap::new();
        let mut task_of_call: HashMap<String, usize> = HashMap::new();
        for event in &self.events {
            let invocation = event.invocation_id.as_str();
            if !placed.contains_key(invocation) {
                let place = if is_message(event) {
                    let answered: Vec<String> = answered_calls(event).collect();
                    match answered.iter().find_map(|id| task_of_call.get(id).copied()) {
                        Some(index) => Placed::Task(index),
                        // An answer to calls made below the region: whose, only a longer read tells.
                        None if !answered.is_empty() && !self.at_start => Placed::Unplaced,
                        None => {
                            tasks.push(TaskLog {
                                id: TaskId::new(session_id, invocation),
                                invocations: Vec::new(),
                                events: Vec::new(),
                                followed: false,
                            });
                            Placed::Task(tasks.len() - 1)
                        }
                    }
                } else if self.at_start || event.actions.rewind_before_invocation_id.is_some() {
                    Placed::NoTask
                } else {
                    // Began below the region, or holds no message at all: a longer read tells.
                    Placed::Unplaced
                };
                if let Placed::Task(index) = place {
                    tasks[index].invocations.push(invocation.to_string());
                }
                placed.insert(invocation, place);
            }
            match placed[invocation] {
                Placed::Task(index) => {
                    for call in calls(event) {
                        task_of_call.insert(call, index);
                    }
                    tasks[index].events.push(event.clone());
                }
                Placed::Unplaced => unplaced.push(event.sequence),
                Placed::NoTask => {}
            }
        }
        // Followed: another invocation stored an event after the task's last (every event of
        // the task's own invocations is the task's, so any later event is another's).
        let top = self.top();
        for task in tasks.iter_mut() {
            let last = task.events.last().map_or(0, |e| e.sequence);
            task.followed = self.above || last < top;
        }
        RegionTasks { tasks, unplaced }
    }
}

fn calls(event: &Event) -> impl Iterator<Item = String> + '_ {
    event
        .function_calls()
        .map(|call| call.id)
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

fn answered_calls(event: &Event) -> impl Iterator<Item = String> + '_ {
    event
        .function_responses()
        .map(|response| response.id)
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

/// The outcome an A2A server records at the end of a run of `invocation_id`.
pub fn outcome_event(invocation_id: &str, author: &str, state: a2a::TaskState, error: Option<&str>) -> Event {
    let mut metadata = JsonObject::new();
    metadata.insert(OUTCOME_KEY.into(), Value::String(state.as_str_name().to_string()));
    if let Some(error) = error {
        metadata.insert(ERROR_KEY.into(), Value::String(error.to_string()));
    }
    let mut event = Event::new(invocation_id).with_author(author);
    event.llm_response.custom_metadata = Some(metadata);
    event
}

/// The state an outcome event records; None for any other event.
pub fn recorded_outcome(event: &Event) -> Option<a2a::TaskState> {
    let recorded = event
        .llm_response
        .custom_metadata
        .as_ref()?
        .get(OUTCOME_KEY)?
        .as_str()?;
    a2a::TaskState::from_str_name(recorded)
}

/// True when `state` ends the current run of a task (a client waiting on it stops).
pub fn ends_run(state: a2a::TaskState) -> bool {
    !matches!(
        state,
        a2a::TaskState::Unspecified | a2a::TaskState::Submitted | a2a::TaskState::Working
    )
}

/// True for A2A's terminal states: nothing follows them (no message, no cancel). The
/// interrupted states (input-required, auth-required) end a run but not the task.
pub fn is_terminal(state: a2a::TaskState) -> bool {
    matches!(
        state,
        a2a::TaskState::Completed | a2a::TaskState::Failed | a2a::TaskState::Canceled | a2a::TaskState::Rejected
    )
}

impl TaskLog {
    /// The sequence of the task's first event, its opening message.
    pub fn start(&self) -> u64 {
        self.events.first().map_or(0, |e| e.sequence)
    }

    /// The invocation that runs (or last ran) the task.
    pub fn last_invocation(&self) -> &str {
        self.invocations.last().map_or("", String::as_str)
    }

    /// The sequence just before the last invocation's first event: a watch from there
    /// sees all it does.
    pub fn before_last_run(&self) -> u64 {
        self.last_run().next().map_or(0, |e| e.sequence.saturating_sub(1))
    }

    fn last_run(&self) -> impl Iterator<Item = &Event> {
        let last = self.last_invocation().to_string();
        self.events.iter().filter(move |e| e.invocation_id == last)
    }

    /// The calls of the last run still waiting for an answer: (call id, function name).
    pub fn pending_calls(&self) -> Vec<(String, String)> {
        let answered: HashSet<String> = self.last_run().flat_map(answered_calls).collect();
        let long_running: HashSet<&str> = self
            .last_run()
            .flat_map(|e| e.long_running_tool_ids.iter().map(String::as_str))
            .collect();
        self.last_run()
            .flat_map(Event::function_calls)
            .filter(|call| long_running.contains(call.id) && !answered.contains(call.id))
            .map(|call| (call.id.to_string(), call.name.to_string()))
            .collect()
    }

    /// The task's state, as the module's rules say.
    pub fn state(&self) -> a2a::TaskState {
        if let Some(recorded) = self.last_run().filter_map(recorded_outcome).last() {
            return recorded;
        }
        if self
            .last_run()
            .any(|e| e.llm_response.error_code.as_deref() == Some(Event::INTERRUPTED))
        {
            return a2a::TaskState::Failed;
        }
        if !self.pending_calls().is_empty() {
            return a2a::TaskState::InputRequired;
        }
        if self.followed {
            return a2a::TaskState::Completed;
        }
        a2a::TaskState::Working
    }

    /// The message of the task's status: the pending calls (input-required), the
    /// error (failed), or the agents' last words.
    pub fn status_message(&self) -> Option<a2a::Message> {
        if let Some(error) = self
            .last_run()
            .filter_map(|e| e.llm_response.custom_metadata.as_ref()?.get(ERROR_KEY)?.as_str())
            .last()
        {
            return Some(text_message(&self.id, error));
        }
        self.last_run()
            .filter(|e| e.author != "user")
            .filter_map(|e| message_of_event(e, &self.id))
            .last()
    }

    /// Every artifact version the task's runs saved, in order: (file name, version).
    pub fn artifact_versions(&self) -> Vec<(String, i64)> {
        let mut versions = Vec::new();
        for event in &self.events {
            let mut delta: Vec<(&String, &i64)> = event.actions.artifact_delta.iter().collect();
            delta.sort();
            versions.extend(delta.into_iter().map(|(name, version)| (name.clone(), *version)));
        }
        versions
    }

    /// The task as A2A shows it, with `history_length` most recent messages (None: all)
    /// and `artifacts` (loaded by the caller).
    pub fn to_a2a(&self, history_length: Option<usize>, artifacts: Vec<a2a::Artifact>) -> a2a::Task {
        let mut history: Vec<a2a::Message> = self
            .events
            .iter()
            .filter_map(|e| message_of_event(e, &self.id))
            .collect();
        if let Some(keep) = history_length {
            history.drain(..history.len().saturating_sub(keep));
        }
        let timestamp = self
            .events
            .last()
            .map(|e| adk_grpc_core::convert::timestamp_to_proto(e.timestamp));
        a2a::Task {
            id: self.id.to_string(),
            context_id: self.id.session_id.clone(),
            status: Some(a2a::TaskStatus {
                state: self.state() as i32,
                message: self.status_message(),
                timestamp,
            }),
            artifacts,
            history,
            metadata: None,
        }
    }
}

/// An agent message of plain text in the task.
pub fn text_message(task: &TaskId, text: &str) -> a2a::Message {
    a2a::Message {
        message_id: uuid_like(),
        context_id: task.session_id.clone(),
        task_id: task.to_string(),
        role: a2a::Role::Agent as i32,
        parts: vec![a2a::Part {
            content: Some(a2a::part::Content::Text(text.to_string())),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn uuid_like() -> String {
    adk_grpc_core::new_event_id()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use adk_grpc_core::{Content, FunctionResponseData, Part};
    use serde_json::json;

    pub(crate) fn stored(mut events: Vec<Event>) -> Vec<Event> {
        for (i, e) in events.iter_mut().enumerate() {
            e.sequence = i as u64 + 1;
        }
        events
    }

    pub(crate) fn user(invocation: &str, text: &str) -> Event {
        Event::new(invocation)
            .with_author("user")
            .with_content(Content::new("user").with_text(text))
    }

    pub(crate) fn agent(invocation: &str, text: &str) -> Event {
        Event::new(invocation)
            .with_author("bot")
            .with_content(Content::new("model").with_text(text))
    }

    pub(crate) fn client_call(invocation: &str, id: &str) -> Event {
        let mut e = Event::new(invocation)
            .with_author("bot")
            .with_content(Content::new("model").with_part(Part::function_call("confirm", json!({}), Some(id.into()))));
        e.long_running_tool_ids = vec![id.into()];
        e
    }

    pub(crate) fn answer(invocation: &str, id: &str) -> Event {
        Event::new(invocation)
            .with_author("user")
            .with_content(Content::new("user").with_part(Part::function_response(
                FunctionResponseData {
                    name: "confirm".into(),
                    response: json!({"ok": true}),
                },
                Some(id.into()),
            )))
    }

    #[test]
    fn states_follow_the_log() {
        // Running: no outcome yet.
        let log = stored(vec![user("e-1", "hi"), agent("e-1", "thinking")]);
        let tasks = tasks_of("s", &log);
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].id.to_string(), "s:e-1");
        assert_eq!(tasks[0].state(), a2a::TaskState::Working);

        // The recorded outcome wins.
        let mut log = log;
        log.push(outcome_event("e-1", "bot", a2a::TaskState::Completed, None));
        let log = stored(log);
        assert_eq!(tasks_of("s", &log)[0].state(), a2a::TaskState::Completed);

        // A failure carries its error as the status message.
        let log = stored(vec![
            user("e-1", "hi"),
            outcome_event("e-1", "bot", a2a::TaskState::Failed, Some("model error: boom")),
        ]);
        let task = &tasks_of("s", &log)[0];
        assert_eq!(task.state(), a2a::TaskState::Failed);
        let status = task.to_a2a(None, vec![]).status.unwrap();
        assert!(format!("{:?}", status.message).contains("boom"));

        // A run that a crash cut short, closed by the next invocation.
        let log = stored(vec![user("e-1", "hi"), Event::interrupted_by_crash("e-1", "bot")]);
        assert_eq!(tasks_of("s", &log)[0].state(), a2a::TaskState::Failed);

        // A run over AgentRunner followed by another: completed.
        let log = stored(vec![user("e-1", "hi"), agent("e-1", "hello"), user("e-2", "again")]);
        let tasks = tasks_of("s", &log);
        assert_eq!(tasks[0].state(), a2a::TaskState::Completed);
        assert_eq!(tasks[1].state(), a2a::TaskState::Working);
    }

    #[test]
    fn an_answer_resumes_the_same_task() {
        let log = stored(vec![user("e-1", "book it"), client_call("e-1", "call-1")]);
        let tasks = tasks_of("s", &log);
        assert_eq!(tasks[0].state(), a2a::TaskState::InputRequired);
        assert_eq!(tasks[0].pending_calls(), vec![("call-1".into(), "confirm".into())]);

        let log = stored(vec![
            user("e-1", "book it"),
            client_call("e-1", "call-1"),
            answer("e-2", "call-1"),
            agent("e-2", "booked"),
            outcome_event("e-2", "bot", a2a::TaskState::Completed, None),
        ]);
        let tasks = tasks_of("s", &log);
        assert_eq!(tasks.len(), 1, "the answering invocation joins the task");
        assert_eq!(tasks[0].id.invocation_id, "e-1");
        assert_eq!(tasks[0].invocations, vec!["e-1", "e-2"]);
        assert_eq!(tasks[0].state(), a2a::TaskState::Completed);
        let task = tasks[0].to_a2a(Some(2), vec![]);
        assert_eq!(task.history.len(), 2);
    }

    #[test]
    fn a_region_places_what_it_can_and_leaves_the_rest_to_a_longer_read() {
        let log = stored(vec![
            user("e-a", "book it"),
            client_call("e-a", "call-1"),
            user("e-b", "hi"),
            outcome_event("e-a", "bot", a2a::TaskState::InputRequired, None),
            answer("e-c", "call-1"),
            agent("e-c", "booked"),
        ]);
        // From e-b's message up: e-b is whole; e-a's late outcome and e-c's answer to a
        // call made further back belong to a task that starts below.
        let region = Region {
            events: log[2..].to_vec(),
            at_start: false,
            above: false,
        };
        let found = region.tasks("s");
        let ids: Vec<String> = found.tasks.iter().map(|t| t.id.to_string()).collect();
        assert_eq!(ids, ["s:e-b"]);
        assert_eq!(found.unplaced, [4, 5, 6]);
        assert_eq!(found.reach_below(3), 6, "a reader of the older tasks reads up to e-c");
        assert!(found.tasks[0].followed);

        // The whole log places every event: e-c joins e-a, which it completes.
        let whole = Region {
            events: log,
            at_start: true,
            above: false,
        }
        .tasks("s");
        assert!(whole.unplaced.is_empty());
        assert_eq!(whole.tasks.len(), 2);
        assert_eq!(whole.tasks[0].invocations, ["e-a", "e-c"]);
        assert_eq!(
            whole.tasks[0].state(),
            a2a::TaskState::Working,
            "e-c has no outcome yet"
        );
        assert_eq!(whole.reach_below(3), 6);
    }

    #[test]
    fn invocations_without_a_message_are_no_task() {
        let mut rewind = Event::new("e-r").with_author("user");
        rewind.actions.rewind_before_invocation_id = Some("e-0".into());
        let log = stored(vec![
            rewind.clone(),
            agent("e-x", "a note appended by hand"),
            user("e-1", "hi"),
        ]);
        let ids: Vec<String> = tasks_of("s", &log).iter().map(|t| t.id.to_string()).collect();
        assert_eq!(ids, ["s:e-1"]);
        // Read from the middle, a rewind's marker is still no task; the note could be a
        // late event of an older run, so it waits for a longer read.
        let found = Region {
            events: log[..2].to_vec(),
            at_start: false,
            above: true,
        }
        .tasks("s");
        assert!(found.tasks.is_empty());
        assert_eq!(found.unplaced, [2]);
    }
}
