//! An invocation's live log with where its run stands indexed once, when the invocation
//! starts or resumes, and kept current as its events are recorded, so that no reader
//! scans the log for it (ADK fills `InvocationContext.agent_states` / `end_of_agents`
//! once the same way): calls and their answers by id, with the rule of repeated call
//! ids; each invocation's events and each agent's position and end in it; each agent's
//! events per branch (what a delegated call did); the branches started; the messages
//! (which decide the agent that has the conversation); the spans rewinds took back.
//!
//! The index holds positions only: what they mean for an agent tree (which workflow
//! agent is open, which delegation is pending) is read from it by the runner library.

use crate::event::Event;
use crate::history::rewound_spans;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

/// An invocation's live log and its index. Cheap to share: readers hold a snapshot
/// (`Arc<RunLog>`) while the invocation records on ([`RunLog::record`] copies only
/// what a reader still holds).
#[derive(Debug, Clone, Default)]
pub struct RunLog {
    events: Arc<Vec<Event>>,
    /// Each function call id, with the positions of the events making a call with it,
    /// oldest first: models repeat call ids.
    calls: HashMap<String, Vec<usize>>,
    /// Each function call id, with the positions of the events answering it, oldest first.
    answers: HashMap<String, Vec<usize>>,
    /// The positions of the events holding calls, oldest first.
    call_events: Vec<usize>,
    invocations: HashMap<String, InvocationMarks>,
    /// Branch, then author: the positions of that agent's events on that branch.
    threads: HashMap<String, HashMap<String, Vec<usize>>>,
    /// Every branch an event is on, with each branch above it (`a.b` gives `a` too).
    branches: HashSet<String>,
    /// The positions of the messages: events with content that record no position.
    messages: Vec<usize>,
    rewound: Vec<Range<usize>>,
}

/// One invocation's events and where each of its agents stands in it.
#[derive(Debug, Clone, Default)]
pub struct InvocationMarks {
    events: Vec<usize>,
    agents: HashMap<String, AgentMarks>,
}

impl InvocationMarks {
    /// The positions of the invocation's events, oldest first.
    pub fn events(&self) -> &[usize] {
        &self.events
    }

    /// Where agent `name` stands in the invocation; None when it has no event in it.
    pub fn agent(&self, name: &str) -> Option<&AgentMarks> {
        self.agents.get(name)
    }
}

/// Where one agent stands in one invocation: the positions of its newest event, of its
/// newest position (`actions.agent_state`) and of its end (`actions.end_of_agent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentMarks {
    pub last_event: usize,
    pub last_state: Option<usize>,
    pub last_end: Option<usize>,
}

impl AgentMarks {
    /// Its newest position or end, whichever is newer.
    pub fn last_mark(&self) -> Option<usize> {
        self.last_state.max(self.last_end)
    }
}

impl RunLog {
    /// The state of a run whose log so far is `events`, oldest first.
    pub fn new(events: Vec<Event>) -> Self {
        let mut state = RunLog::default();
        for event in events {
            state.record(event);
        }
        state
    }

    /// Makes `event` the newest of the log.
    pub fn record(&mut self, event: Event) {
        let at = self.events.len();
        let mut has_calls = false;
        for call in event.function_calls().filter(|call| !call.id.is_empty()) {
            has_calls = true;
            push_once(self.calls.entry(call.id.to_string()).or_default(), at);
        }
        if has_calls {
            self.call_events.push(at);
        }
        for response in event.function_responses().filter(|response| !response.id.is_empty()) {
            push_once(self.answers.entry(response.id.to_string()).or_default(), at);
        }
        let actions = &event.actions;
        let invocation = self.invocations.entry(event.invocation_id.clone()).or_default();
        invocation.events.push(at);
        let marks = invocation.agents.entry(event.author.clone()).or_insert(AgentMarks {
            last_event: at,
            last_state: None,
            last_end: None,
        });
        marks.last_event = at;
        if actions.agent_state.is_some() {
            marks.last_state = Some(at);
        }
        if actions.end_of_agent == Some(true) {
            marks.last_end = Some(at);
        }
        let position = actions.agent_state.is_some() || actions.end_of_agent == Some(true);
        if !position && event.content().is_some_and(|content| !content.parts.is_empty()) {
            self.messages.push(at);
        }
        self.threads
            .entry(event.branch.clone())
            .or_default()
            .entry(event.author.clone())
            .or_default()
            .push(at);
        let mut branch = event.branch.as_str();
        while !branch.is_empty() && self.branches.insert(branch.to_string()) {
            branch = branch.rfind('.').map_or("", |dot| &branch[..dot]);
        }
        let rewinds = actions.rewind_before_invocation_id.is_some();
        Arc::make_mut(&mut self.events).push(event);
        if rewinds {
            // Rare: the spans are worked out again over the whole log.
            self.rewound = rewound_spans(&self.events);
        }
    }

    /// The log, oldest first.
    pub fn events(&self) -> &Arc<Vec<Event>> {
        &self.events
    }

    /// The event at position `at` of the log.
    pub fn at(&self, at: usize) -> &Event {
        &self.events[at]
    }

    /// The event holding the call with id `id` that an answer at position `at` of the
    /// log answers: the newest such call before it. A model may use a call id again
    /// later; a call made after the answer is another call, so a walk back from answer
    /// to call always ends.
    pub fn call_answered_at(&self, id: &str, at: usize) -> Option<&Event> {
        let positions = self.calls.get(id)?;
        let before = positions.partition_point(|&position| position < at);
        before.checked_sub(1).map(|index| &self.events[positions[index]])
    }

    /// The event holding the newest call with id `id`: the one an answer sent now answers.
    pub fn latest_call(&self, id: &str) -> Option<&Event> {
        self.call_answered_at(id, self.events.len())
    }

    /// Whether the call with id `id` made at position `call_at` has an answer a rewind
    /// did not take back: one after it, before the next call with that id.
    pub fn answered(&self, id: &str, call_at: usize) -> bool {
        let next_call = self
            .calls
            .get(id)
            .and_then(|positions| positions.iter().find(|&&position| position > call_at).copied())
            .unwrap_or(usize::MAX);
        self.answers.get(id).is_some_and(|answers| {
            answers
                .iter()
                .any(|&at| at > call_at && at < next_call && !self.taken_back(at))
        })
    }

    /// The events holding calls, oldest first, with their positions, but those a rewind
    /// took back.
    pub fn call_events(&self) -> impl DoubleEndedIterator<Item = (usize, &Event)> {
        self.call_events
            .iter()
            .filter(|&&at| !self.taken_back(at))
            .map(|&at| (at, &self.events[at]))
    }

    /// Whether a rewind took back the event at position `at`.
    pub fn taken_back(&self, at: usize) -> bool {
        self.rewound.iter().any(|span| span.contains(&at))
    }

    /// Invocation `id`'s events and the positions of its agents; None when it has none.
    pub fn invocation(&self, id: &str) -> Option<&InvocationMarks> {
        self.invocations.get(id)
    }

    /// The positions of the events of invocation `id`'s latest Run, oldest first: from
    /// the newest user message that started one (or any first event). An invocation is
    /// one Run but when the user's message goes on with one: a message that joins a task
    /// waiting for it goes on with the task's invocation (ADK 2's borrowed id), and a
    /// client's answer to calls with the calls' (ADK's id resolved from the function
    /// responses); each starts a Run of its own in it. A user message starts a Run when
    /// it answers no call, or answers a long-running one (a call a Run pauses on, which
    /// only a client answers; a task's answer, which a Run stores as the user's, answers
    /// a call that is not). Empty when the invocation has no event.
    pub fn run_events(&self, id: &str) -> &[usize] {
        let events = self.invocation(id).map_or(&[][..], InvocationMarks::events);
        let starts_run = |at: &usize| {
            let event = &self.events[*at];
            event.author == "user"
                && event.content().is_some()
                && event.function_responses().all(|response| {
                    self.call_answered_at(response.id, *at)
                        .is_some_and(|call| call.long_running_tool_ids.iter().any(|id| id == response.id))
                })
        };
        let start = events.iter().rposition(starts_run).unwrap_or(0);
        &events[start..]
    }

    /// The events of agent `author` on exactly `branch` with their positions, oldest first.
    pub fn thread<'a>(
        &'a self,
        branch: &str,
        author: &str,
    ) -> impl DoubleEndedIterator<Item = (usize, &'a Event)> + 'a {
        self.threads
            .get(branch)
            .and_then(|authors| authors.get(author))
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|&at| (at, &self.events[at]))
    }

    /// Whether an event is on `branch` or a branch below it.
    pub fn started(&self, branch: &str) -> bool {
        self.branches.contains(branch)
    }

    /// The messages (events with content that record no position: the user's and the
    /// agents' replies), oldest first, but those a rewind took back (ADK finds the agent
    /// to run in the log with its rewinds applied).
    pub fn messages(&self) -> impl DoubleEndedIterator<Item = &Event> {
        self.messages
            .iter()
            .filter(|&&at| !self.taken_back(at))
            .map(|&at| &self.events[at])
    }
}

/// Adds `at` to `positions` unless it is already the newest (one event, two parts).
fn push_once(positions: &mut Vec<usize>, at: usize) {
    if positions.last() != Some(&at) {
        positions.push(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::{Content, FunctionResponseData, Part};
    use serde_json::json;

    fn call(invocation: &str, id: &str) -> Event {
        Event::new(invocation)
            .with_author("agent")
            .with_content(Content::new("model").with_part(Part::function_call("f", json!({}), Some(id.into()))))
    }

    fn answer(invocation: &str, id: &str) -> Event {
        let response = FunctionResponseData {
            name: "f".into(),
            response: json!({}),
        };
        Event::new(invocation)
            .with_author("user")
            .with_content(Content::new("user").with_part(Part::function_response(response, Some(id.into()))))
    }

    #[test]
    fn an_answer_answers_the_newest_call_before_it_with_its_id() {
        let mut run = RunLog::new(vec![call("e-1", "c1"), answer("e-2", "c1")]);
        run.record(call("e-3", "c1"));
        let answered = |at| run.call_answered_at("c1", at).map(|event| event.invocation_id.clone());
        assert_eq!(answered(1).as_deref(), Some("e-1"), "the call before the first answer");
        assert_eq!(answered(0), None, "no call before the start");
        assert_eq!(
            run.latest_call("c1").map(|event| event.invocation_id.as_str()),
            Some("e-3"),
            "a call made again after the answer is the one a new answer answers"
        );
        assert!(run.latest_call("c9").is_none());
        assert_eq!(run.events().len(), 3);
    }

    #[test]
    fn a_snapshot_keeps_its_log_while_the_run_records_on() {
        let mut run = RunLog::new(vec![call("e-1", "c1")]);
        let snapshot = Arc::new(run.clone());
        run.record(answer("e-1", "c1"));
        assert_eq!((snapshot.events().len(), run.events().len()), (1, 2));
    }

    fn position(invocation: &str, author: &str, end: bool) -> Event {
        let mut event = Event::new(invocation).with_author(author);
        if end {
            event.actions.end_of_agent = Some(true);
        } else {
            event.actions.agent_state = Some(crate::JsonObject::new());
        }
        event
    }

    #[test]
    fn a_call_is_answered_by_an_answer_after_it_and_before_the_same_id_is_used_again() {
        let mut run = RunLog::new(vec![call("e-1", "c1"), answer("e-1", "c1")]);
        assert!(run.answered("c1", 0));
        run.record(call("e-2", "c1"));
        assert!(
            !run.answered("c1", 2),
            "the answer before the second call does not answer it"
        );
        assert!(run.answered("c1", 0), "the first call stays answered");
        run.record(answer("e-2", "c1"));
        assert!(run.answered("c1", 2));
        assert!(!run.answered("c9", 0));
    }

    #[test]
    fn a_rewind_takes_back_answers_and_calls() {
        let mut run = RunLog::new(vec![call("e-1", "c1"), call("e-2", "c2"), answer("e-2", "c2")]);
        assert!(run.answered("c2", 1));
        let mut rewind = Event::new("e-3").with_author("user");
        rewind.actions.rewind_before_invocation_id = Some("e-2".into());
        run.record(rewind);
        assert!(!run.answered("c2", 1), "the answer was taken back");
        assert!(run.taken_back(1) && run.taken_back(3) && !run.taken_back(0));
        let kept: Vec<usize> = run.call_events().map(|(at, _)| at).collect();
        assert_eq!(kept, [0], "the rewound call is not open either");
    }

    #[test]
    fn each_agent_s_newest_event_position_and_end_are_kept_per_invocation() {
        let mut run = RunLog::new(vec![
            position("e-1", "flow", false),
            call("e-1", "c1").with_author("flow"),
            position("e-1", "flow", true),
        ]);
        run.record(position("e-2", "flow", false));
        let first = run.invocation("e-1").and_then(|marks| marks.agent("flow")).copied();
        assert_eq!(
            first,
            Some(AgentMarks {
                last_event: 2,
                last_state: Some(0),
                last_end: Some(2)
            })
        );
        assert_eq!(first.and_then(|marks| marks.last_mark()), Some(2));
        let second = run.invocation("e-2").expect("e-2 has events");
        assert_eq!(second.events(), [3]);
        assert_eq!(second.agent("flow").map(|marks| marks.last_end), Some(None));
        assert!(run.invocation("e-9").is_none());
        let messages: Vec<&str> = run.messages().map(|event| event.author.as_str()).collect();
        assert_eq!(messages, ["flow"], "positions are not messages");
    }

    #[test]
    fn a_run_that_joins_a_task_s_invocation_starts_at_its_message() {
        let said = |invocation: &str, author: &str, text: &str| {
            Event::new(invocation)
                .with_author(author)
                .with_content(Content::new(author).with_text(text))
        };
        let run = RunLog::new(vec![
            said("e-1", "user", "book a table"),
            call("e-1", "t1").with_author("host"),
            said("e-1", "intake", "how many?"),
            // The user's answer joins the task's invocation, and starts a Run there.
            said("e-1", "user", "four"),
            said("e-1", "intake", "done"),
            // The task's answer, the user's function response, starts none.
            answer("e-1", "t1"),
        ]);
        assert_eq!(
            run.invocation("e-1").map(InvocationMarks::events),
            Some(&[0, 1, 2, 3, 4, 5][..])
        );
        assert_eq!(run.run_events("e-1"), [3, 4, 5]);
        let single = RunLog::new(vec![answer("e-2", "c1"), said("e-2", "root", "ok")]);
        assert_eq!(
            single.run_events("e-2"),
            [0, 1],
            "a Run answering calls starts at its first event"
        );
        assert!(single.run_events("e-9").is_empty());
    }

    #[test]
    fn a_clients_answer_to_a_long_running_call_starts_a_run_in_the_calls_invocation() {
        let mut paused = call("e-1", "c1");
        paused.long_running_tool_ids = vec!["c1".into()];
        let run = RunLog::new(vec![
            Event::new("e-1")
                .with_author("user")
                .with_content(Content::new("user").with_text("file it")),
            paused,
            // The client's answer goes on with the call's invocation, in a Run of its own.
            answer("e-1", "c1"),
            call("e-1", "c2"),
            // An answer to a call that is not long-running (a task's) starts none.
            answer("e-1", "c2"),
        ]);
        assert_eq!(run.run_events("e-1"), [2, 3, 4]);
    }

    #[test]
    fn a_branch_counts_as_started_when_an_event_is_on_it_or_below() {
        let mut on_task = call("e-1", "c2");
        on_task.branch = "root.task@c1.inner@c2".into();
        let run = RunLog::new(vec![on_task]);
        assert!(run.started("root.task@c1.inner@c2"));
        assert!(run.started("root.task@c1") && run.started("root"));
        assert!(!run.started("root.task@c9") && !run.started("root.task"));
        assert_eq!(run.thread("root.task@c1.inner@c2", "agent").count(), 1);
        assert_eq!(run.thread("root.task@c1", "agent").count(), 0);
    }
}
