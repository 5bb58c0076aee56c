//! Event compaction (ADK's `EventsCompactionConfig`): summaries appended to the log
//! in place of older events, so a long conversation's model requests stay small.
//!
//! Two triggers: after an invocation, every `interval` new invocations (the `overlap`
//! newest stay verbatim); and before a model request whose estimated size exceeds the
//! token budget, everything before the current invocation. A summary builds on the
//! previous one (its range starts where the previous one's started, so the previous
//! summary is subsumed and the history shows one summary). A failed summary leaves
//! the session as it was: the interval trigger tries again after the next invocation,
//! and an over-budget request loses its oldest contents instead (log line + metric).

use crate::rules::USER_AUTHOR;
use adk_grpc_core::history::{
    apply_rewinds, estimate_content_tokens, estimate_text_tokens, estimate_tokens, latest_compaction,
};
use adk_grpc_core::{
    AdkError, CompactionConfig, Content, Event, EventCompaction, LlmRequest, PartKind, Result, history::invocations,
};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use std::collections::HashSet;

/// What a summary will replace.
pub(crate) struct Plan {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    previous: Option<Content>,
    events: Vec<Event>,
}

/// Why a compaction ran (the metric's `trigger` label).
#[derive(Clone, Copy)]
pub(crate) enum Trigger {
    Interval,
    TokenBudget,
}

impl Trigger {
    fn label(self) -> &'static str {
        match self {
            Trigger::Interval => "interval",
            Trigger::TokenBudget => "token_budget",
        }
    }
}

/// The compaction due after an invocation: when the live events after the latest
/// summary span at least `interval + overlap` invocations, all but the `overlap` newest.
pub(crate) fn interval_plan(events: &[Event], config: &CompactionConfig) -> Option<Plan> {
    let live = apply_rewinds(events);
    let (previous, unsummarised) = unsummarised(&live);
    let ids = invocations(&unsummarised);
    let keep = config.overlap as usize;
    if ids.len() < config.interval as usize + keep {
        return None;
    }
    let kept: HashSet<&str> = ids[ids.len() - keep..].iter().copied().collect();
    let events = unsummarised
        .iter()
        .filter(|e| !kept.contains(e.invocation_id.as_str()))
        .cloned()
        .collect();
    plan(previous, events, config.token_budget)
}

/// The compaction a request over budget needs: every live event before the current
/// invocation. None when there is nothing before it.
pub(crate) fn budget_plan(events: &[Event], current_invocation: &str, budget: usize) -> Option<Plan> {
    let live = apply_rewinds(events);
    let (previous, unsummarised) = unsummarised(&live);
    let events = unsummarised
        .into_iter()
        .filter(|e| e.invocation_id != current_invocation)
        .collect();
    plan(previous, events, Some(budget))
}

/// The latest summary and the events after its range (summaries themselves excluded).
fn unsummarised(live: &[Event]) -> (Option<EventCompaction>, Vec<Event>) {
    let previous = latest_compaction(live).and_then(|e| e.actions.compaction.clone());
    let after = live
        .iter()
        .filter(|e| e.actions.compaction.is_none() && !e.is_partial())
        .filter(|e| previous.as_ref().is_none_or(|p| e.timestamp > p.end_timestamp))
        .cloned()
        .collect();
    (previous, after)
}

/// A plan for `events` after `previous`. With a budget, the summariser's own request
/// must fit it too: only the oldest events that do are summarised (the rest wait for
/// the next compaction); None when not even one does.
fn plan(previous: Option<EventCompaction>, mut events: Vec<Event>, budget: Option<usize>) -> Option<Plan> {
    if let Some(budget) = budget {
        let mut tokens = estimate_text_tokens(SUMMARY_PROMPT)
            + previous
                .as_ref()
                .map_or(0, |p| estimate_content_tokens(&p.compacted_content));
        let fitting = events
            .iter()
            .take_while(|event| {
                tokens += event_lines(event)
                    .iter()
                    .map(|line| estimate_text_tokens(line) + 1)
                    .sum::<usize>();
                tokens <= budget
            })
            .count();
        events.truncate(fitting);
    }
    let end = events.iter().map(|e| e.timestamp).max()?;
    let first = events.iter().map(|e| e.timestamp).min()?;
    Some(Plan {
        start: previous.as_ref().map_or(first, |p| p.start_timestamp.min(first)),
        end,
        previous: previous.map(|p| p.compacted_content),
        events,
    })
}

/// Asks the summariser for the plan's summary and returns the compaction event to
/// append (by `user`, in `invocation_id`, as ADK's are), counting the outcome.
pub(crate) async fn summarize(
    config: &CompactionConfig,
    plan: Plan,
    app: &str,
    invocation_id: &str,
    trigger: Trigger,
) -> Result<Event> {
    let result = ask_summarizer(config, &plan).await;
    let outcome = match &result {
        Ok(_) => "OK",
        Err(e) => adk_grpc_telemetry::code_name(e.code()),
    };
    adk_grpc_telemetry::metrics::compaction_finished(app, trigger.label(), outcome);
    let summary = result?;
    let mut event = Event::new(invocation_id).with_author(USER_AUTHOR);
    event.actions.compaction = Some(EventCompaction {
        start_timestamp: plan.start,
        end_timestamp: plan.end,
        compacted_content: summary,
    });
    Ok(event)
}

const SUMMARY_PROMPT: &str = "You compact the history of a conversation between a user and AI agents. Write a \
concise summary of it that keeps every fact, decision, open question and piece of state a later turn may need, \
and who said what. Reply with the summary only.";

async fn ask_summarizer(config: &CompactionConfig, plan: &Plan) -> Result<Content> {
    let mut transcript = String::new();
    if let Some(previous) = &plan.previous {
        transcript.push_str("Summary of the conversation before:\n");
        transcript.push_str(&previous.text().unwrap_or_default());
        transcript.push_str("\n\nWhat followed:\n");
    }
    for event in &plan.events {
        for line in event_lines(event) {
            transcript.push_str(&line);
            transcript.push('\n');
        }
    }
    let request = LlmRequest {
        model: config.summarizer.name().to_string(),
        contents: vec![Content::new(USER_AUTHOR).with_text(transcript)],
        system_instruction: Some(SUMMARY_PROMPT.to_string()),
        ..Default::default()
    };
    let mut replies = config.summarizer.generate_content(request, false).await?;
    while let Some(reply) = replies.next().await {
        let reply = reply?;
        if reply.partial == Some(true) {
            continue;
        }
        let text = reply.content.as_ref().and_then(Content::text).unwrap_or_default();
        if text.trim().is_empty() {
            break;
        }
        return Ok(Content::new("model").with_text(text));
    }
    Err(AdkError::Model(format!(
        "summariser {} gave no summary",
        config.summarizer.name()
    )))
}

/// The event as transcript lines: `author: text`, calls and results.
pub(crate) fn event_lines(event: &Event) -> Vec<String> {
    let Some(content) = event.content() else {
        return Vec::new();
    };
    content
        .parts
        .iter()
        .filter_map(|part| match &part.kind {
            PartKind::Text { text } if !part.is_thought() => Some(format!("{}: {text}", event.author)),
            PartKind::FunctionCall { name, args, .. } => Some(format!("{} called {name}({args})", event.author)),
            PartKind::FunctionResponse { function_response, .. } => Some(format!(
                "{} returned {}",
                function_response.name, function_response.response
            )),
            _ => None,
        })
        .collect()
}

/// The request's estimated size in tokens: contents, system instruction and tool
/// declarations.
pub(crate) fn request_tokens(request: &LlmRequest) -> usize {
    let tools: usize = request
        .tools
        .iter()
        .map(|tool| serde_json::to_string(tool).map_or(0, |json| estimate_text_tokens(&json)))
        .sum();
    estimate_tokens(&request.contents) + request.system_instruction.as_deref().map_or(0, estimate_text_tokens) + tools
}

/// Drops the request's oldest contents until it fits `budget` (keeping at least the
/// newest one), never leaving a tool result without the call before it. Returns how
/// many contents were dropped.
pub(crate) fn trim_to_budget(request: &mut LlmRequest, budget: usize) -> usize {
    let mut total = request_tokens(request);
    let mut dropped = 0;
    while total > budget && request.contents.len() > 1 {
        let removed = request.contents.remove(0);
        total -= estimate_content_tokens(&removed).min(total);
        dropped += 1;
        while request.contents.len() > 1 && starts_with_tool_result(&request.contents[0]) {
            let orphan = request.contents.remove(0);
            total -= estimate_content_tokens(&orphan).min(total);
            dropped += 1;
        }
    }
    dropped
}

fn starts_with_tool_result(content: &Content) -> bool {
    content.function_responses().next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::{FunctionResponseData, Part};
    use serde_json::json;
    use std::sync::Arc;

    fn turn(invocation: &str, second: i64) -> Event {
        let mut e = Event::new(invocation)
            .with_author(USER_AUTHOR)
            .with_content(Content::new("user").with_text("x".repeat(40)));
        e.timestamp = DateTime::from_timestamp(1_700_000_000 + second, 0).unwrap();
        e
    }

    fn config(interval: u32, overlap: u32) -> CompactionConfig {
        CompactionConfig::new(interval, Arc::new(adk_grpc_models::MockModel::echo())).with_overlap(overlap)
    }

    #[test]
    fn interval_plans_wait_for_enough_invocations_and_keep_the_overlap() {
        let events: Vec<Event> = (1..=2).map(|i| turn(&format!("i{i}"), i)).collect();
        assert!(interval_plan(&events, &config(2, 1)).is_none(), "2 < 2 + 1");
        let events: Vec<Event> = (1..=4).map(|i| turn(&format!("i{i}"), i)).collect();
        let plan = interval_plan(&events, &config(2, 1)).unwrap();
        let ids: Vec<&str> = plan.events.iter().map(|e| e.invocation_id.as_str()).collect();
        assert_eq!(ids, ["i1", "i2", "i3"]);
        assert_eq!(plan.end, events[2].timestamp);
    }

    #[test]
    fn a_new_plan_builds_on_the_previous_summary() {
        let mut events: Vec<Event> = (1..=2).map(|i| turn(&format!("i{i}"), i)).collect();
        let mut summary = Event::new("i2").with_author(USER_AUTHOR);
        summary.timestamp = events[1].timestamp;
        summary.actions.compaction = Some(EventCompaction {
            start_timestamp: events[0].timestamp,
            end_timestamp: events[1].timestamp,
            compacted_content: Content::new("model").with_text("s"),
        });
        events.push(summary);
        events.extend((3..=4).map(|i| turn(&format!("i{i}"), i)));
        let plan = interval_plan(&events, &config(2, 0)).unwrap();
        assert_eq!(plan.events.len(), 2);
        assert_eq!(plan.start, events[0].timestamp);
        assert_eq!(plan.previous.and_then(|c| c.text()).as_deref(), Some("s"));
        let budget = budget_plan(&events, "i4", 10_000).unwrap();
        assert_eq!(budget.events.len(), 1, "the current invocation stays");
    }

    #[test]
    fn trimming_drops_the_oldest_and_no_orphan_results() {
        let call = Content::new("model").with_part(Part::function_call("f", json!({}), Some("c".into())));
        let result = Content::new("tool").with_part(Part::function_response(
            FunctionResponseData {
                name: "f".into(),
                response: json!({"ok": true}),
            },
            Some("c".into()),
        ));
        let mut request = LlmRequest {
            contents: vec![
                Content::new("user").with_text("a".repeat(400)),
                call,
                result,
                Content::new("user").with_text("now"),
            ],
            ..Default::default()
        };
        let dropped = trim_to_budget(&mut request, 10);
        assert_eq!(dropped, 3, "the call went, so its result went too");
        assert_eq!(request.contents.len(), 1);
        assert!(request_tokens(&request) <= 10);
    }
}
