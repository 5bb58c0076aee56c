//! An invocation's live log with what is asked of it indexed once, when the invocation
//! starts or resumes, and kept current as its events are recorded, so that no reader
//! scans the log again for it: the calls by id, with the rule of repeated call ids.

use crate::event::Event;
use std::collections::HashMap;
use std::sync::Arc;

/// An invocation's live log and its index. Cheap to share: readers hold a snapshot
/// (`Arc<RunLog>`) while the invocation records on ([`RunLog::record`] copies only
/// what a reader still holds).
#[derive(Debug, Clone, Default)]
pub struct RunLog {
    events: Arc<Vec<Event>>,
    /// Each function call id, with the positions in `events` of the events making a
    /// call with it, oldest first: models repeat call ids.
    calls: HashMap<String, Vec<usize>>,
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
        for call in event.function_calls().filter(|call| !call.id.is_empty()) {
            let positions = self.calls.entry(call.id.to_string()).or_default();
            if positions.last() != Some(&at) {
                positions.push(at);
            }
        }
        Arc::make_mut(&mut self.events).push(event);
    }

    /// The log, oldest first.
    pub fn events(&self) -> &Arc<Vec<Event>> {
        &self.events
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
}
