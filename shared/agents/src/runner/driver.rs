//! The event-stream driver: one running invocation, from its first agent event to
//! the end of its stream. It pulls the agent's events, stores each complete one
//! (fenced with the lease) before streaming it and makes it part of the invocation's
//! live view before the agent is asked for the next; stops on a cancel or a lost
//! lease; and when the agent is done adds to memory, compacts, stops the agent and
//! gives the session back, in that order.

use super::lease::LeaseGuard;
use super::session::{append, append_run_mark};
use super::{AddToMemory, Registration, memory};
use crate::compaction::{self, Trigger};
use crate::context::Invocation;
use crate::context::Positions;
use crate::state_schema;
use adk_grpc_core::{AdkError, CompactionConfig, Event, EventStream, MemoryService, Result, SessionService};
use async_stream::try_stream;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// One running invocation: pulls the agent's events, stores them; its lease's
/// heartbeat keeps the lease and tells it to stop.
pub(super) struct Driver {
    pub(super) session_service: Arc<dyn SessionService>,
    pub(super) app_name: String,
    pub(super) compaction: Option<Arc<CompactionConfig>>,
    /// Where and what to add to memory once the invocation finishes.
    pub(super) add_to_memory: Option<(Arc<dyn MemoryService>, AddToMemory)>,
    pub(super) invocation: Arc<Invocation>,
    /// Its span and metrics; dropped unfinished (the stream was dropped), it counts as CANCELLED.
    pub(super) observed: adk_grpc_telemetry::Invocation,
    pub(super) events: EventStream,
    pub(super) lease: LeaseGuard,
    pub(super) _registration: Registration,
    /// Fired when this replica shuts down and hands its runs over: the invocation
    /// stops and its lease goes to another replica, which resumes it.
    pub(super) handover: CancellationToken,
    /// For a resumed invocation: when its previous runner's lease was lost, to
    /// measure the time to its first event here.
    pub(super) lease_lost_at: Option<std::time::Instant>,
    /// Fired when the replica shuts down (resumable runs only): the run is handed over
    /// at its next step boundary, so no model or tool call is cut and made again.
    pub(super) draining: Option<CancellationToken>,
    /// Within a step: a model reply is streaming, or the calls of the last stored
    /// event are not answered yet. Only between steps may a draining run stop.
    pub(super) in_step: bool,
    /// The `isolation_scope` of each branch its events were on.
    pub(super) isolation_scopes: crate::llm::task::IsolationScopes,
}

impl Driver {
    pub(super) fn into_stream(mut self) -> EventStream {
        Box::pin(try_stream! {
            let span = self.observed.span().clone();
            let mut failure = None;
            loop {
                match self.next().instrument(span.clone()).await {
                    Ok(Some(event)) => {
                        if let Some(lost) = self.lease_lost_at.take() {
                            adk_grpc_telemetry::metrics::resumed_first_event(&self.app_name, lost.elapsed());
                        }
                        yield event
                    }
                    Ok(None) => break,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            let invocation_id = self.invocation.invocation_id.clone();
            if failure.is_none() {
                // Still under the lease, so the session added is the one this invocation left.
                let added = memory::add_to_memory(self.add_to_memory.clone(), self.invocation.clone(), self.session_service.clone());
                failure = added.instrument(span.clone()).await.err();
                // Still under the lease: no other invocation appends meanwhile. A
                // failure is only logged: the next invocation tries again.
                self.compact_if_due().instrument(span.clone()).await;
            }
            // Stop the agent before the session is free for the next invocation.
            drop(self.events);
            if self.handover.is_cancelled() && !self.lease.signals.cancel.is_cancelled() {
                self.lease.hand_over().instrument(span).await;
            } else {
                self.lease.release().instrument(span).await;
            }
            self.observed.finish(failure.as_ref().map(AdkError::code));
            match failure {
                Some(e) => {
                    tracing::debug!(%invocation_id, error = %e, "invocation failed");
                    Err(e)?;
                }
                None => tracing::debug!(%invocation_id, "invocation finished"),
            }
        })
    }

    /// Appends a summary when the app's compaction interval says one is due.
    async fn compact_if_due(&mut self) {
        let Some(config) = self.compaction.clone() else {
            return;
        };
        let Some(plan) = compaction::interval_plan(&self.invocation.events(), &config) else {
            return;
        };
        let invocation_id = self.invocation.invocation_id.clone();
        let summarized = tokio::select! {
            biased;
            _ = self.lease.signals.cancel.cancelled() => return,
            summary = compaction::summarize(&config, plan, &self.app_name, &invocation_id, Trigger::Interval) => summary,
        };
        let stored = match summarized {
            Ok(event) => {
                append(
                    self.session_service.as_ref(),
                    &self.invocation.session,
                    event,
                    self.lease.fence(),
                )
                .await
            }
            Err(e) => Err(e),
        };
        match stored {
            Ok(event) => self.invocation.record(event, HashMap::new()),
            Err(e) => tracing::warn!(
                %invocation_id, error = %e,
                "event compaction failed; the session is unchanged and the next invocation tries again"
            ),
        }
    }

    /// The next event to stream (stored first unless partial); None when the agent is done.
    async fn next(&mut self) -> Result<Option<Event>> {
        loop {
            // Asking the agent for its next event starts its next step (a model or tool
            // call): a draining replica starts none and hands the run over instead.
            if !self.in_step && self.draining.as_ref().is_some_and(CancellationToken::is_cancelled) {
                self.handover.cancel();
            }
            let Some(mut event) = self.next_from_agent().await? else {
                return Ok(None);
            };
            // A task's events carry its scope (ADK 2's isolation_scope), streamed and stored.
            let invocation = &self.invocation;
            self.isolation_scopes
                .stamp(&invocation.root_agent, || invocation.events(), &mut event);
            if event.is_partial() {
                self.in_step = true;
                return Ok(Some(event));
            }
            match self.invocation.place_of(&event) {
                Positions::InLog => {}
                // A position no other replica needs: neither stored nor streamed.
                Positions::Nowhere => continue,
                // A position ADK's log does not hold: kept beside it, not streamed.
                Positions::BesideLog => {
                    let kept = append_run_mark(
                        self.session_service.as_ref(),
                        &self.invocation.session,
                        event,
                        self.lease.fence(),
                    )
                    .await?;
                    self.invocation.record(kept, HashMap::new());
                    continue;
                }
            }
            // Its state writes must fit its author's `state_schema`: one that does not
            // fails the run, nothing stored.
            state_schema::check_event(&self.invocation.root_agent, &event)?;
            // The store trims `temp:` keys; the overlay needs the delta as emitted.
            let delta = event.actions.state_delta.clone();
            let stored = append(
                self.session_service.as_ref(),
                &self.invocation.session,
                event,
                self.lease.fence(),
            )
            .await?;
            // A model's calls are answered in the same step: the tools run on the next pull.
            self.in_step = stored.author != crate::rules::USER_AUTHOR && stored.function_calls().next().is_some();
            self.invocation.record(stored.clone(), delta);
            return Ok(Some(stored));
        }
    }

    /// The agent's next event; Err when the invocation was cancelled, lost its lease or
    /// was handed over meanwhile.
    async fn next_from_agent(&mut self) -> Result<Option<Event>> {
        let event = tokio::select! {
            biased;
            _ = self.lease.signals.cancel.cancelled() => {
                return Err(AdkError::Cancelled(format!(
                    "invocation {} was cancelled",
                    self.invocation.invocation_id
                )));
            }
            _ = self.lease.signals.lost.cancelled() => return Err(self.lease.lost()),
            _ = self.handover.cancelled() => {
                return Err(AdkError::Unavailable(format!(
                    "the runner is shutting down: invocation {} was handed over to another replica, which \
                     resumes it; watch the session (WatchSession) from the last sequence you saw for the rest",
                    self.invocation.invocation_id
                )));
            }
            event = self.events.next() => event,
        };
        event.transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Fixture, Step, drain};
    use adk_grpc_core::{AdkError, Conflict, Content, Event};
    use futures::StreamExt;
    use serde_json::json;
    use std::time::Duration;

    fn text(event: &Event) -> String {
        event.content().and_then(Content::text).unwrap_or_default()
    }

    #[tokio::test]
    async fn complete_events_are_stored_before_they_are_streamed_and_partial_ones_never() {
        let f = Fixture::new("driver_store_then_stream").await;
        for step in [
            Step::Partial("hel"),
            Step::Say("hello"),
            Step::Partial("wor"),
            Step::Say("world"),
        ] {
            f.play(step);
        }
        f.end_script();
        let mut stream = f.run("hi").await.unwrap();
        let mut streamed = Vec::new();
        while let Some(event) = stream.next().await {
            let event = event.unwrap();
            // What the store holds at the moment the client sees the event.
            let stored = f.session().await.events.into_vec();
            if event.is_partial() {
                assert!(stored.iter().all(|e| e.id != event.id), "a partial event was stored");
            } else {
                let last = stored.last().expect("stored events");
                assert_eq!(
                    (&last.id, last.sequence),
                    (&event.id, event.sequence),
                    "{}",
                    text(&event)
                );
            }
            streamed.push(text(&event));
        }
        assert_eq!(streamed, ["hel", "hello", "wor", "world"]);
        let stored: Vec<(u64, String)> = f.session().await.events.iter().map(|e| (e.sequence, text(e))).collect();
        assert_eq!(
            stored,
            [
                (1, "hi".to_string()),
                (2, "hello".to_string()),
                (3, "world".to_string())
            ]
        );
    }

    #[tokio::test]
    async fn the_agent_sees_each_stored_delta_before_its_next_step_temp_keys_included() {
        let f = Fixture::new("driver_records_before_next").await;
        f.play(Step::Set("temp:draft", json!("d1")));
        f.play(Step::Set("topic", json!("rust")));
        f.play(Step::Echo(&["temp:draft", "topic"]));
        f.end_script();
        let (events, error) = drain(f.run("hi").await.unwrap()).await;
        assert!(error.is_none(), "{error:?}");
        let echoed: serde_json::Value = serde_json::from_str(&text(events.last().unwrap())).unwrap();
        assert_eq!(echoed, json!({"temp:draft": "d1", "topic": "rust"}));
        // The store keeps no `temp:` key: the invocation's view is their only home.
        let state = f.session().await.state.into_inner();
        assert_eq!(state.get("topic"), Some(&json!("rust")));
        assert_eq!(state.get("temp:draft"), None);
    }

    #[tokio::test]
    async fn a_run_that_loses_its_lease_stops_with_lease_lost() {
        let f = Fixture::with("driver_lease_lost", |config| {
            config.lease_ttl = Duration::from_millis(300);
        })
        .await;
        f.play(Step::Say("first"));
        let mut stream = f.run("hi").await.unwrap();
        stream.next().await.unwrap().unwrap();
        // The agent waits for a step that never comes; its lease runs out meanwhile
        // (as when the runner stalled past its TTL).
        f.clock.advance(Duration::from_secs(1));
        let (events, error) = drain(stream).await;
        assert!(events.is_empty());
        let error = error.expect("the run stops");
        assert!(matches!(error, AdkError::Aborted(Conflict::LeaseLost, _)), "{error}");
    }
}
