//! Long conversations: which events of a session's log are live (rewinds), what
//! stands in for compacted ranges, where a runner's bounded read starts, and the
//! state a rewind or a fork restores. Every store and the runner use these rules;
//! none of them is written twice.
//!
//! The log is immutable: a compaction and a rewind are events appended to it
//! (`actions.compaction`, `actions.rewind_before_invocation_id`), as in ADK.

use crate::content::{Content, PartKind};
use crate::error::{AdkError, Missing, Result};
use crate::event::Event;
use crate::model::Llm;
use crate::state::{KEY_PREFIX_APP, KEY_PREFIX_TEMP, KEY_PREFIX_USER};
use crate::validate;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

/// Event compaction of an app (ADK's `EventsCompactionConfig`): after every
/// `interval` new invocations (plus the `overlap` newest, which stay verbatim until
/// the next compaction), the runner appends a summary of the older ones written by
/// `summarizer`; and a model request whose estimated size exceeds `token_budget` is
/// compacted first (or, if the summariser fails, loses its oldest contents).
#[derive(Clone)]
pub struct CompactionConfig {
    /// New invocations that trigger a compaction (at least 1).
    pub interval: u32,
    /// The newest invocations left out of a summary: the model keeps seeing them
    /// verbatim, and the next summary covers them.
    pub overlap: u32,
    /// The model that writes summaries.
    pub summarizer: Arc<dyn Llm>,
    /// The most tokens ([`estimate_tokens`] unless a provider counts) a model request
    /// may carry; None: no limit besides the interval.
    pub token_budget: Option<usize>,
}

impl CompactionConfig {
    pub fn new(interval: u32, summarizer: Arc<dyn Llm>) -> Self {
        CompactionConfig {
            interval,
            overlap: 0,
            summarizer,
            token_budget: None,
        }
    }

    pub fn with_overlap(mut self, overlap: u32) -> Self {
        self.overlap = overlap;
        self
    }

    pub fn with_token_budget(mut self, tokens: usize) -> Self {
        self.token_budget = Some(tokens);
        self
    }

    /// `Config` errors naming the setting.
    pub fn validate(&self) -> Result<()> {
        if self.interval == 0 {
            return Err(AdkError::Config(
                "compaction interval must be at least 1 invocation".into(),
            ));
        }
        if self.token_budget == Some(0) {
            return Err(AdkError::Config("compaction token_budget must be positive".into()));
        }
        Ok(())
    }
}

impl std::fmt::Debug for CompactionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionConfig")
            .field("interval", &self.interval)
            .field("overlap", &self.overlap)
            .field("summarizer", &self.summarizer.name())
            .field("token_budget", &self.token_budget)
            .finish()
    }
}

/// The events that survive every rewind, oldest first (ADK's `_apply_rewinds`); see
/// [`rewound_spans`] for what a rewind takes back.
pub fn apply_rewinds(events: &[Event]) -> Vec<Event> {
    surviving_rewinds(events).cloned().collect()
}

/// [`apply_rewinds`] without copying the events, for a reader that needs only to look.
pub fn surviving_rewinds(events: &[Event]) -> impl DoubleEndedIterator<Item = &Event> {
    let spans = rewound_spans(events);
    events
        .iter()
        .enumerate()
        .filter(move |(at, _)| !spans.iter().any(|span| span.contains(at)))
        .map(|(_, event)| event)
}

/// The positions of `events` that rewinds take back, as spans, oldest first: walking
/// back from the end, a rewind event drops itself and every event back to the first
/// event of the invocation it names (inclusive); a rewind naming an invocation that is
/// not before it drops only itself. A rewind inside a span taken back does nothing.
pub fn rewound_spans(events: &[Event]) -> Vec<Range<usize>> {
    if !events.iter().any(is_rewind) {
        return Vec::new();
    }
    let mut first_of_invocation: HashMap<&str, usize> = HashMap::new();
    for (index, event) in events.iter().enumerate() {
        if !event.invocation_id.is_empty() {
            first_of_invocation.entry(event.invocation_id.as_str()).or_insert(index);
        }
    }
    let mut spans = Vec::new();
    let mut index = events.len();
    while index > 0 {
        index -= 1;
        if let Some(target) = events[index].actions.rewind_before_invocation_id.as_deref() {
            let end = index + 1;
            if let Some(&first) = first_of_invocation.get(target).filter(|&&first| first < index) {
                index = first;
            }
            spans.push(index..end);
        }
    }
    spans.reverse();
    spans
}

fn is_rewind(event: &Event) -> bool {
    event.actions.rewind_before_invocation_id.is_some()
}

/// The history with compactions applied (ADK's `_process_compaction_events`):
/// every summary not covered by a wider one stands, as a turn of `agent` at its
/// range's end, in place of the raw events whose timestamps fall in a summarised
/// range; other events stay in order.
pub fn apply_compactions(events: &[Event], agent: &str) -> Vec<Event> {
    let summaries: Vec<(usize, DateTime<Utc>, DateTime<Utc>)> = events
        .iter()
        .enumerate()
        .filter_map(|(index, e)| {
            let c = e.actions.compaction.as_ref()?;
            Some((index, c.start_timestamp, c.end_timestamp))
        })
        .collect();
    if summaries.is_empty() {
        return events.to_vec();
    }
    // A summary whose range lies inside another's is subsumed (the later one wins a tie).
    let kept: Vec<&(usize, DateTime<Utc>, DateTime<Utc>)> = summaries
        .iter()
        .filter(|(index, start, end)| {
            !summaries.iter().any(|(other, o_start, o_end)| {
                other != index && o_start <= start && end <= o_end && (o_start < start || end < o_end || other > index)
            })
        })
        .collect();
    let covered = |t: DateTime<Utc>| kept.iter().any(|(_, start, end)| *start <= t && t <= *end);
    let mut items: Vec<(DateTime<Utc>, usize, Event)> = Vec::new();
    for &&(index, _, end) in &kept {
        let source = &events[index];
        let Some(compaction) = &source.actions.compaction else {
            continue;
        };
        let mut summary = Event::new(&source.invocation_id).with_author(agent);
        summary.id = source.id.clone();
        summary.timestamp = end;
        summary.branch = source.branch.clone();
        summary.sequence = source.sequence;
        summary.llm_response.content = Some(compaction.compacted_content.clone());
        items.push((end, index, summary));
    }
    for (index, event) in events.iter().enumerate() {
        if event.actions.compaction.is_none() && !covered(event.timestamp) {
            items.push((event.timestamp, index, event.clone()));
        }
    }
    items.sort_by_key(|item| (item.0, item.1));
    items.into_iter().map(|(_, _, event)| event).collect()
}

/// The latest live compaction of `events` (rewinds applied first): the one a new
/// compaction builds on.
pub fn latest_compaction(live: &[Event]) -> Option<&Event> {
    live.iter().rev().find(|e| e.actions.compaction.is_some())
}

/// How appending `event` moves its session's bounded-read window (the first
/// sequence a runner turn must read; see [`GetRequest::since_compaction`]).
///
/// [`GetRequest::since_compaction`]: crate::GetRequest::since_compaction
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowUpdate {
    /// Nothing changes.
    Keep,
    /// A compaction: the window starts at the first event stamped at or after this
    /// microsecond (the summarised range's end; the compaction event itself is
    /// always in the window). Compared in microseconds, the precision every store
    /// indexes timestamps with; the history filters exactly.
    From { micros: i64 },
    /// A rewind may revive events before the window (or drop the compaction that set
    /// it): the next bounded read is the whole log, until the next compaction.
    Reset,
}

impl WindowUpdate {
    pub fn of(event: &Event) -> WindowUpdate {
        if is_rewind(event) {
            return WindowUpdate::Reset;
        }
        match &event.actions.compaction {
            Some(c) => WindowUpdate::From {
                micros: c.end_timestamp.timestamp_micros(),
            },
            None => WindowUpdate::Keep,
        }
    }
}

/// The bounded-read window's first sequence for a log (stored events, oldest
/// first), as the appends of `events` left it: 0 reads the whole log. What a fork
/// starts with: the copied events' own window.
pub fn window_start(events: &[Event]) -> u64 {
    let last_move = events.iter().rev().find_map(|e| match WindowUpdate::of(e) {
        WindowUpdate::Keep => None,
        update => Some((e.sequence, update)),
    });
    match last_move {
        None | Some((_, WindowUpdate::Reset | WindowUpdate::Keep)) => 0,
        Some((sequence, WindowUpdate::From { micros })) => window_from(events, micros, sequence),
    }
}

/// The window's first sequence after a compaction (sequence `compaction`) whose range
/// ends at `micros`: the first stored event stamped at or after it, at the latest the
/// compaction itself.
pub fn window_from(events: &[Event], micros: i64, compaction: u64) -> u64 {
    events
        .iter()
        .find(|e| e.timestamp.timestamp_micros() >= micros)
        .map_or(compaction, |e| e.sequence.min(compaction))
}

/// The session-scoped state a session had just before `events` ended, as ADK's
/// rewind computes it: every session key's last value in the deltas of `events`
/// (a `null` value removes the key). `user:`, `app:` and `temp:` keys are shared or
/// transient, so they are not part of it. State given at creation is not in the
/// log, so it is not either (as in ADK).
pub fn session_state_through(events: &[Event]) -> HashMap<String, Value> {
    let mut state = HashMap::new();
    for event in events {
        for (key, value) in &event.actions.state_delta {
            if !is_session_key(key) {
                continue;
            }
            if value.is_null() {
                state.remove(key);
            } else {
                state.insert(key.clone(), value.clone());
            }
        }
    }
    state
}

/// A session-scoped key (no `app:`, `user:` or `temp:` prefix).
pub fn is_session_key(key: &str) -> bool {
    ![KEY_PREFIX_APP, KEY_PREFIX_USER, KEY_PREFIX_TEMP]
        .iter()
        .any(|prefix| key.starts_with(prefix))
}

/// Where a rewind to before `invocation_id` cuts `events` (the whole log): the
/// index of the invocation's first event. `NOT_FOUND` naming the field when no
/// event of the log belongs to it.
pub fn rewind_point(events: &[Event], invocation_id: &str) -> Result<usize> {
    validate::id("rewind_before_invocation_id", invocation_id)?;
    events
        .iter()
        .position(|e| e.invocation_id == invocation_id)
        .ok_or_else(|| {
            AdkError::NotFound(
                Missing::Invocation,
                format!(
                    "rewind_before_invocation_id {invocation_id}: no event of the session belongs to that invocation"
                ),
            )
        })
}

/// The state delta a rewind event carries (ADK's `compute_state_delta_for_rewind`):
/// each session key whose value differs from its value at the rewind point is set
/// back to it, and each session key that did not exist then is set to `null`.
pub fn rewind_state_delta(
    events_before: &[Event],
    current_session_state: &HashMap<String, Value>,
) -> HashMap<String, Value> {
    let then = session_state_through(events_before);
    let mut delta: HashMap<String, Value> = then
        .iter()
        .filter(|(key, value)| current_session_state.get(*key) != Some(value))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    for (key, value) in current_session_state {
        if is_session_key(key) && !then.contains_key(key) && !value.is_null() {
            delta.insert(key.clone(), Value::Null);
        }
    }
    delta
}

/// What a rewind does to one artifact of the session (`user:` artifacts are shared
/// by the user's sessions and are left alone, as in ADK).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRestore {
    pub file_name: String,
    /// The version current at the rewind point, saved again as a new version; None
    /// when the artifact did not exist then: a tombstone version (an empty
    /// `application/octet-stream` payload, ADK's marker) is saved instead.
    pub version: Option<i64>,
}

/// The artifacts whose latest version (per the events' `artifact_delta`s) differs
/// from the one current at the rewind point, sorted by name.
pub fn rewind_artifacts(events: &[Event], rewind_index: usize) -> Vec<ArtifactRestore> {
    let versions = |events: &[Event]| {
        let mut versions: HashMap<String, i64> = HashMap::new();
        for event in events {
            versions.extend(event.actions.artifact_delta.iter().map(|(k, v)| (k.clone(), *v)));
        }
        versions
    };
    let then = versions(&events[..rewind_index.min(events.len())]);
    let now = versions(events);
    let mut restores: Vec<ArtifactRestore> = now
        .iter()
        .filter(|(name, version)| !crate::artifact::is_user_scoped(name) && then.get(*name) != Some(*version))
        .map(|(name, _)| ArtifactRestore {
            file_name: name.clone(),
            version: then.get(name).copied(),
        })
        .collect();
    restores.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    restores
}

/// MIME type of the tombstone a rewind saves for an artifact that did not exist at
/// the rewind point (with no bytes).
pub const REWIND_TOMBSTONE_MIME: &str = "application/octet-stream";

/// What a rewind saves as the newest version of an artifact that did not exist at the
/// rewind point (ADK's marker: a version cannot be deleted from the history, so a new
/// one says "absent"): an empty `application/octet-stream` inline part.
pub fn rewind_tombstone() -> crate::Part {
    crate::Part::inline_data(REWIND_TOMBSTONE_MIME, Vec::new())
}

/// True for [`rewind_tombstone`]: agents load such a version as absent (as in ADK, an
/// artifact saved with exactly that content does too).
pub fn is_rewind_tombstone(part: &crate::Part) -> bool {
    matches!(&part.kind, PartKind::InlineData { mime_type, data } if mime_type == REWIND_TOMBSTONE_MIME && data.is_empty())
}

/// Fork a session: a copy of the source's events up to and including `up_to_event_id`
/// under a new session id of the same app and user. The copy's session state is the
/// state those events built ([`session_state_through`]); the source is untouched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForkRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    /// The last event copied (inclusive).
    pub up_to_event_id: String,
    /// The fork's id; None (or empty) generates a UUIDv4.
    pub new_session_id: Option<String>,
}

impl ForkRequest {
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)?;
        validate::id("up_to_event_id", &self.up_to_event_id)?;
        if let Some(id) = self.new_session_id.as_deref().filter(|id| !id.is_empty()) {
            validate::id("new_session_id", id)?;
            if id == self.session_id {
                return Err(AdkError::invalid(
                    "new_session_id",
                    "is the source session's id: a fork needs an id of its own",
                ));
            }
        }
        Ok(())
    }

    /// The fork's id: the requested one, or a new UUIDv4.
    pub fn fork_id(&self) -> String {
        self.new_session_id
            .clone()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(crate::event::new_event_id)
    }

    /// `NOT_FOUND` for an event id that is not in the source session.
    pub fn event_not_found(&self) -> AdkError {
        AdkError::NotFound(
            Missing::Event,
            format!(
                "up_to_event_id {} is not an event of session {}",
                self.up_to_event_id, self.session_id
            ),
        )
    }
}

/// Tokens a request's contents are estimated to take when the provider gives no
/// count: one per 4 characters of text (JSON text for calls, responses and other
/// parts), plus 4 per content for its role and framing. Deliberately simple and
/// on the generous side, so a budget below the provider's window keeps requests
/// under it.
pub fn estimate_tokens(contents: &[Content]) -> usize {
    contents.iter().map(estimate_content_tokens).sum()
}

pub fn estimate_content_tokens(content: &Content) -> usize {
    let chars: usize = content
        .parts
        .iter()
        .map(|part| match &part.kind {
            PartKind::Text { text } => text.chars().count(),
            PartKind::FunctionCall { name, args, .. } => name.len() + args.to_string().len(),
            PartKind::FunctionResponse { function_response, .. } => {
                function_response.name.len() + function_response.response.to_string().len()
            }
            _ => serde_json::to_string(part).map_or(0, |json| json.len()),
        })
        .sum();
    chars.div_ceil(4) + 4
}

/// Text tokens of a system instruction, on the same scale as [`estimate_tokens`].
pub fn estimate_text_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The estimated tokens of a turn's history when the app has no other budget: the
/// model's context budget. Real providers default to [`DEFAULT_CONTEXT_BUDGET_TOKENS`]
/// (the 128k-token windows of today's smaller models, less room for the instruction,
/// the tools and the reply); the mock, which reads no history, to
/// [`MOCK_CONTEXT_BUDGET_TOKENS`], so apps on it show a bounded turn as a real model's
/// would. A model entry's `context_budget_tokens` (or the runner's setting) overrides it.
pub fn default_context_budget_tokens(provider: &str) -> usize {
    match provider {
        "mock" => MOCK_CONTEXT_BUDGET_TOKENS,
        _ => DEFAULT_CONTEXT_BUDGET_TOKENS,
    }
}

/// See [`default_context_budget_tokens`].
pub const DEFAULT_CONTEXT_BUDGET_TOKENS: usize = 100_000;
/// See [`default_context_budget_tokens`].
pub const MOCK_CONTEXT_BUDGET_TOKENS: usize = 1_000;

/// An event's share of a model request, on [`estimate_tokens`]' scale: its content's
/// tokens, at least 1 (an event without content still has to be read).
pub fn estimate_event_tokens(event: &Event) -> usize {
    event.content().map_or(1, estimate_content_tokens).max(1)
}

/// The function call ids `content` answers (its `function_response` parts' ids).
pub fn answered_call_ids(content: &Content) -> Vec<String> {
    content
        .function_responses()
        .filter(|response| !response.id.is_empty())
        .map(|response| response.id.to_string())
        .collect()
}

/// The function call ids of `event`'s content.
pub fn call_ids(event: &Event) -> impl Iterator<Item = &str> {
    event.function_calls().map(|call| call.id).filter(|id| !id.is_empty())
}

/// A bounded turn's events (the newest of a log, oldest first, older ones left out)
/// made to stand alone, as the whole log's history would: a rewind whose invocation
/// starts at or before the first event read (or was not read) drops every event
/// before it, as [`apply_rewinds`] on the whole log would; and a tool result whose
/// call was left out goes too (a provider refuses a result without its call). Returns
/// the events kept and how many were dropped.
pub fn standalone_suffix(mut events: Vec<Event>) -> (Vec<Event>, usize) {
    let before = events.len();
    let reaches_past_start = |index: usize, events: &[Event]| {
        let target = events[index].actions.rewind_before_invocation_id.as_deref();
        target.is_some_and(|target| {
            events[..index]
                .iter()
                .position(|e| e.invocation_id == target)
                .is_none_or(|first| first == 0)
        })
    };
    if let Some(rewind) = (0..events.len()).rev().find(|&i| reaches_past_start(i, &events)) {
        events.drain(..=rewind);
    }
    let calls: HashSet<String> = events.iter().flat_map(call_ids).map(str::to_string).collect();
    events.retain(|event| {
        event
            .content()
            .is_none_or(|content| answered_call_ids(content).iter().all(|id| calls.contains(id)))
    });
    let dropped = before - events.len();
    (events, dropped)
}

/// The distinct invocation ids of `events`, in order of first appearance.
pub fn invocations(events: &[Event]) -> Vec<&str> {
    let mut seen = HashSet::new();
    events
        .iter()
        .map(|e| e.invocation_id.as_str())
        .filter(|id| !id.is_empty() && seen.insert(*id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventCompaction;
    use serde_json::json;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + seconds, 0).unwrap()
    }

    fn event(invocation: &str, seconds: i64, text: &str) -> Event {
        let mut e = Event::new(invocation)
            .with_author("user")
            .with_content(Content::new("user").with_text(text));
        e.timestamp = at(seconds);
        e
    }

    fn rewind(invocation: &str, seconds: i64, target: &str) -> Event {
        let mut e = Event::new(invocation).with_author("user");
        e.timestamp = at(seconds);
        e.actions.rewind_before_invocation_id = Some(target.into());
        e
    }

    fn compaction(seconds: i64, start: i64, end: i64, text: &str) -> Event {
        let mut e = Event::new("c").with_author("user");
        e.timestamp = at(seconds);
        e.actions.compaction = Some(EventCompaction {
            start_timestamp: at(start),
            end_timestamp: at(end),
            compacted_content: Content::new("model").with_text(text),
        });
        e
    }

    fn texts(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| e.content().and_then(Content::text))
            .collect()
    }

    #[test]
    fn rewinds_drop_the_rewound_invocations_and_themselves() {
        let events = vec![
            event("i1", 1, "a"),
            event("i2", 2, "b"),
            event("i2", 3, "b2"),
            event("i3", 4, "c"),
            rewind("r", 5, "i2"),
            event("i4", 6, "d"),
        ];
        assert_eq!(texts(&apply_rewinds(&events)), ["a", "d"]);
        // A rewind naming no invocation of the log drops only itself.
        let unknown = vec![event("i1", 1, "a"), rewind("r", 2, "nope")];
        assert_eq!(texts(&apply_rewinds(&unknown)), ["a"]);
    }

    /// The newest events of a log stand alone as the whole log's history would: a
    /// rewind reaching before them drops what precedes it, and a tool result whose
    /// call was left out goes; a rewind within them and answered calls stay as they are.
    #[test]
    fn a_bounded_read_stands_alone() {
        let call = |invocation: &str, id: &str| {
            Event::new(invocation).with_author("agent").with_content(
                Content::new("model").with_part(crate::Part::function_call("f", json!({}), Some(id.into()))),
            )
        };
        let result = |invocation: &str, id: &str| {
            let response = crate::FunctionResponseData {
                name: "f".into(),
                response: json!({}),
            };
            Event::new(invocation)
                .with_author("agent")
                .with_content(Content::new("user").with_part(crate::Part::function_response(response, Some(id.into()))))
        };
        // i1 started before the read: the rewind to before it drops everything read before it.
        let (kept, dropped) = standalone_suffix(vec![
            event("i1", 1, "a"),
            event("i2", 2, "b"),
            rewind("r", 3, "i1"),
            event("i3", 4, "c"),
        ]);
        assert_eq!((texts(&kept), dropped), (vec!["c".to_string()], 3));
        let (kept, dropped) = standalone_suffix(vec![event("i0", 1, "a"), rewind("r", 2, "gone"), event("i3", 3, "c")]);
        assert_eq!((texts(&kept), dropped), (vec!["c".to_string()], 2));
        // A rewind of an invocation that started within the read is left to apply_rewinds.
        let within = vec![event("i1", 1, "a"), event("i2", 2, "b"), rewind("r", 3, "i2")];
        assert_eq!(standalone_suffix(within.clone()), (within, 0));
        // A result without its call goes; one with its call stays.
        let (kept, dropped) = standalone_suffix(vec![
            result("i1", "left-out"),
            event("i2", 2, "b"),
            call("i2", "c2"),
            result("i2", "c2"),
        ]);
        assert_eq!(dropped, 1);
        assert_eq!(kept.len(), 3);
        assert_eq!(estimate_event_tokens(&Event::new("i")), 1, "an event without content");
        assert_eq!(estimate_event_tokens(&event("i", 1, "12345678")), 2 + 4);
    }

    #[test]
    fn summaries_replace_their_ranges_and_wider_ones_win() {
        let events = vec![
            event("i1", 1, "a"),
            event("i2", 2, "b"),
            compaction(3, 1, 2, "s12"),
            event("i3", 4, "c"),
            compaction(5, 1, 4, "s124"),
            event("i4", 6, "d"),
        ];
        let history = apply_compactions(&events, "agent");
        assert_eq!(texts(&history), ["s124", "d"]);
        assert_eq!(history[0].author, "agent");
        assert_eq!(history[0].timestamp, at(4));
    }

    #[test]
    fn the_window_moves_on_compactions_and_resets_on_rewinds() {
        assert_eq!(WindowUpdate::of(&event("i", 1, "x")), WindowUpdate::Keep);
        assert_eq!(
            WindowUpdate::of(&compaction(9, 1, 4, "s")),
            WindowUpdate::From {
                micros: at(4).timestamp_micros()
            }
        );
        assert_eq!(WindowUpdate::of(&rewind("r", 9, "i")), WindowUpdate::Reset);
    }

    #[test]
    fn rewind_restores_changed_keys_and_removes_new_ones() {
        let before = vec![
            event("i1", 1, "a")
                .with_state_delta("k", json!(1))
                .with_state_delta("user:u", json!(1)),
            event("i1", 2, "a")
                .with_state_delta("gone", json!("x"))
                .with_state_delta("gone", Value::Null),
        ];
        let current: HashMap<String, Value> = [
            ("k".to_string(), json!(2)),
            ("new".to_string(), json!(true)),
            ("user:u".to_string(), json!(5)),
        ]
        .into();
        let delta = rewind_state_delta(&before, &current);
        assert_eq!(
            delta,
            HashMap::from([("k".to_string(), json!(1)), ("new".to_string(), Value::Null)])
        );
    }

    #[test]
    fn rewind_restores_session_artifacts_only() {
        let mut saved = event("i1", 1, "a");
        saved.actions.artifact_delta = HashMap::from([("a.txt".to_string(), 0), ("user:p".to_string(), 0)]);
        let mut later = event("i2", 2, "b");
        later.actions.artifact_delta = HashMap::from([
            ("a.txt".to_string(), 1),
            ("b.txt".to_string(), 0),
            ("user:p".to_string(), 1),
        ]);
        let restores = rewind_artifacts(&[saved, later], 1);
        assert_eq!(
            restores,
            [
                ArtifactRestore {
                    file_name: "a.txt".into(),
                    version: Some(0)
                },
                ArtifactRestore {
                    file_name: "b.txt".into(),
                    version: None
                },
            ]
        );
    }

    #[test]
    fn fork_requests_name_their_bad_fields() {
        let ok = ForkRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            up_to_event_id: "e".into(),
            new_session_id: None,
        };
        assert!(ok.validate().is_ok());
        let empty = ForkRequest {
            up_to_event_id: String::new(),
            ..ok.clone()
        };
        assert!(empty.validate().unwrap_err().to_string().contains("up_to_event_id"));
        let same = ForkRequest {
            new_session_id: Some("s".into()),
            ..ok.clone()
        };
        assert!(same.validate().unwrap_err().to_string().contains("new_session_id"));
        let bad = ForkRequest {
            new_session_id: Some("a\u{1}b".into()),
            ..ok
        };
        assert!(bad.validate().unwrap_err().to_string().contains("new_session_id"));
    }

    #[test]
    fn token_estimates_grow_with_text() {
        let short = Content::new("user").with_text("abcd");
        let long = Content::new("user").with_text("x".repeat(400));
        assert_eq!(estimate_tokens(std::slice::from_ref(&short)), 5);
        assert_eq!(estimate_tokens(&[short, long]), 5 + 104);
    }
}
