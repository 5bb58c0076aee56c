//! A2A tasks read from a session's log, so any replica answers GetTask, ListTasks
//! and SubscribeToTask the same.
//!
//! A task is the invocation a message started, joined by the invocations that answer
//! its pending (long-running or client) function calls: an `input-required` task
//! resumed keeps its id. Its state is the last invocation's:
//! - the outcome the A2A server records when the run ends (an event without content,
//!   so no model reads it, whose `custom_metadata` says the state), when present;
//! - failed, when the invocation was closed as interrupted (its runner crashed);
//! - input-required, while a call it made waits for an answer;
//! - completed, once another invocation ran after it (a run started over AgentRunner);
//! - working otherwise.

use super::convert::{TaskId, message_of_event};
use adk_core::{Event, JsonObject, PartKind};
use adk_proto::a2a;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The `custom_metadata` key of the event recording how an A2A task's run ended.
pub const OUTCOME_KEY: &str = "a2a_task_state";

/// One task of a session: its invocations' events, in log order.
#[derive(Debug, Clone)]
pub struct TaskLog {
    pub id: TaskId,
    pub invocations: Vec<String>,
    pub events: Vec<Event>,
    /// True when an invocation outside the task ran after its last event.
    pub followed: bool,
}

/// The tasks of a session whose log is `events` (oldest first), oldest first.
pub fn tasks_of(session_id: &str, events: &[Event]) -> Vec<TaskLog> {
    let mut tasks: Vec<TaskLog> = Vec::new();
    let mut task_of_invocation: HashMap<&str, usize> = HashMap::new();
    let mut task_of_call: HashMap<String, usize> = HashMap::new();
    for event in events {
        let index = match task_of_invocation.get(event.invocation_id.as_str()) {
            Some(&index) => index,
            None => {
                // A new invocation: joins the task whose call it answers, or starts one.
                let answered = answered_calls(event).find_map(|id| task_of_call.get(&id).copied());
                let index = answered.unwrap_or_else(|| {
                    tasks.push(TaskLog {
                        id: TaskId::new(session_id, &event.invocation_id),
                        invocations: Vec::new(),
                        events: Vec::new(),
                        followed: false,
                    });
                    tasks.len() - 1
                });
                tasks[index].invocations.push(event.invocation_id.clone());
                task_of_invocation.insert(&event.invocation_id, index);
                index
            }
        };
        for call in calls(event) {
            task_of_call.insert(call, index);
        }
        tasks[index].events.push(event.clone());
    }
    // Followed: an invocation outside the task stored an event after the task's last.
    for task in tasks.iter_mut() {
        let last = task.events.last().map_or(0, |e| e.sequence);
        let last_invocation = task.invocations.last().cloned().unwrap_or_default();
        task.followed = events.iter().any(|e| {
            e.sequence > last && e.invocation_id != last_invocation && !task.invocations.contains(&e.invocation_id)
        });
    }
    tasks
}

fn calls(event: &Event) -> impl Iterator<Item = String> + '_ {
    event
        .content()
        .into_iter()
        .flat_map(|c| &c.parts)
        .filter_map(|part| match &part.kind {
            PartKind::FunctionCall { id: Some(id), .. } => Some(id.clone()),
            _ => None,
        })
}

fn answered_calls(event: &Event) -> impl Iterator<Item = String> + '_ {
    event
        .content()
        .into_iter()
        .flat_map(|c| &c.parts)
        .filter_map(|part| match &part.kind {
            PartKind::FunctionResponse { id: Some(id), .. } => Some(id.clone()),
            _ => None,
        })
}

/// The outcome an A2A server records at the end of a run of `invocation_id`.
pub fn outcome_event(invocation_id: &str, author: &str, state: a2a::TaskState, error: Option<&str>) -> Event {
    let mut metadata = JsonObject::new();
    metadata.insert(OUTCOME_KEY.into(), Value::String(state.as_str_name().to_string()));
    if let Some(error) = error {
        metadata.insert("a2a_error".into(), Value::String(error.to_string()));
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

impl TaskLog {
    fn last_invocation(&self) -> &str {
        self.invocations.last().map_or("", String::as_str)
    }

    fn last_run(&self) -> impl Iterator<Item = &Event> {
        let last = self.last_invocation().to_string();
        self.events.iter().filter(move |e| e.invocation_id == last)
    }

    /// The calls of the last run still waiting for an answer: (call id, function name).
    pub fn pending_calls(&self) -> Vec<(String, String)> {
        let answered: HashSet<String> = self.last_run().flat_map(answered_calls).collect();
        let long_running: HashSet<&String> = self.last_run().flat_map(|e| &e.long_running_tool_ids).collect();
        self.last_run()
            .flat_map(|e| e.content().into_iter().flat_map(|c| &c.parts))
            .filter_map(|part| match &part.kind {
                PartKind::FunctionCall { id: Some(id), name, .. }
                    if long_running.contains(id) && !answered.contains(id) =>
                {
                    Some((id.clone(), name.clone()))
                }
                _ => None,
            })
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
            .filter_map(|e| e.llm_response.custom_metadata.as_ref()?.get("a2a_error")?.as_str())
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
            .map(|e| adk_core::convert::timestamp_to_proto(e.timestamp));
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
    adk_core::new_event_id()
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_core::{Content, FunctionResponseData, Part};
    use serde_json::json;

    fn stored(mut events: Vec<Event>) -> Vec<Event> {
        for (i, e) in events.iter_mut().enumerate() {
            e.sequence = i as u64 + 1;
        }
        events
    }

    fn user(invocation: &str, text: &str) -> Event {
        Event::new(invocation)
            .with_author("user")
            .with_content(Content::new("user").with_text(text))
    }

    fn agent(invocation: &str, text: &str) -> Event {
        Event::new(invocation)
            .with_author("bot")
            .with_content(Content::new("model").with_text(text))
    }

    fn client_call(invocation: &str, id: &str) -> Event {
        let mut e = Event::new(invocation)
            .with_author("bot")
            .with_content(Content::new("model").with_part(Part::function_call("confirm", json!({}), Some(id.into()))));
        e.long_running_tool_ids = vec![id.into()];
        e
    }

    fn answer(invocation: &str, id: &str) -> Event {
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
}
