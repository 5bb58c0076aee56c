//! A bounded turn's read: a session's newest events, newest first, as far as a token
//! budget allows (see [`SessionService::get_recent`]). One rule over two reads every
//! store serves in time proportional to what they return: a Get of the newest events
//! (`num_recent_events`, with the session's state in the same snapshot), then
//! ListEvents pages backwards from the oldest event read.

use super::{EventCursor, GetRequest, ListEventsRequest, Session, SessionService};
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::history::{call_ids, estimate_event_tokens};
use crate::validate;
use std::collections::HashSet;

/// Which session to read and how far back (see [`SessionService::get_recent`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecentRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    /// The most estimated tokens ([`estimate_event_tokens`]) the events read may hold
    /// (at least 1).
    pub budget_tokens: usize,
    /// Function call ids whose calls must be read, however old (a message answering
    /// them goes to the agent that made them, and the model needs the calls): the read
    /// goes on past the budget until it has them all, or reaches the log's start.
    pub function_call_ids: Vec<String>,
}

/// What [`SessionService::get_recent`] read.
#[derive(Debug, Clone, PartialEq)]
pub struct RecentSession {
    /// The session (its whole state) with the events read, oldest first.
    pub session: Session,
    /// How many older events were left out (0: the whole log was read).
    pub left_out: u64,
}

/// The first read's size: a short conversation is read whole in one round trip.
const FIRST_PAGE: usize = 32;

impl RecentRequest {
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)?;
        if self.budget_tokens == 0 {
            return Err(AdkError::invalid("budget_tokens", "must be at least 1"));
        }
        Ok(())
    }
}

/// The events of a read so far, newest first, and when to stop.
struct Reading {
    budget: usize,
    tokens: usize,
    pending: HashSet<String>,
    newest_first: Vec<Event>,
    done: bool,
}

impl Reading {
    /// Takes the events of a page (newest first) while they fit the budget (the
    /// newest event always), or until the pending calls are found; false once done.
    fn take(&mut self, page: impl IntoIterator<Item = Event>) -> bool {
        for event in page {
            self.tokens = self.tokens.saturating_add(estimate_event_tokens(&event));
            let fits = self.tokens <= self.budget || self.newest_first.is_empty();
            if !fits && self.pending.is_empty() {
                self.done = true;
                return false;
            }
            for id in call_ids(&event) {
                self.pending.remove(id);
            }
            self.newest_first.push(event);
        }
        true
    }

    /// How many events to ask for next: while calls are pending, twice the last page;
    /// else as many as the rest of the budget holds at the tokens per event read so far,
    /// and a quarter more, so that one more read usually ends it.
    fn next_page_size(&self, last: usize) -> usize {
        let read = self.newest_first.len().max(1);
        let wanted = if self.pending.is_empty() {
            let per_event = (self.tokens / read).max(1);
            let rest = self.budget.saturating_sub(self.tokens) / per_event;
            rest + rest / 4 + 2
        } else {
            last * 2
        };
        wanted.clamp(2, validate::MAX_PAGE_SIZE)
    }

    fn oldest_sequence(&self) -> Option<u64> {
        self.newest_first.last().map(|e| e.sequence)
    }
}

pub(super) async fn get_recent<S: SessionService + ?Sized>(service: &S, req: RecentRequest) -> Result<RecentSession> {
    req.validate()?;
    let mut session = service
        .get(GetRequest {
            app_name: req.app_name.clone(),
            user_id: req.user_id.clone(),
            session_id: req.session_id.clone(),
            num_recent_events: Some(FIRST_PAGE),
            ..Default::default()
        })
        .await?;
    let mut reading = Reading {
        budget: req.budget_tokens,
        tokens: 0,
        pending: req.function_call_ids.iter().cloned().collect(),
        newest_first: Vec::new(),
        done: false,
    };
    let first = std::mem::take(&mut session.events).into_vec();
    reading.take(first.into_iter().rev());
    let list = ListEventsRequest {
        app_name: req.app_name,
        user_id: req.user_id,
        session_id: req.session_id,
        newest_first: true,
        ..Default::default()
    };
    let mut page_size = FIRST_PAGE;
    // Older events never change, so later pages agree with the first snapshot.
    while !reading.done
        && let Some(oldest) = reading.oldest_sequence().filter(|&sequence| sequence > 1)
    {
        page_size = reading.next_page_size(page_size);
        let cursor = EventCursor {
            sequence: oldest,
            newest_first: true,
        };
        let page = service
            .list_events(ListEventsRequest {
                page_size,
                page_token: Some(cursor.encode(&list)),
                ..list.clone()
            })
            .await?;
        if page.events.is_empty() || !reading.take(page.events) {
            break;
        }
    }
    let left_out = reading
        .oldest_sequence()
        .map_or(0, |sequence| sequence.saturating_sub(1));
    let mut events = reading.newest_first;
    events.reverse();
    session.events = super::Events::new(events);
    Ok(RecentSession { session, left_out })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(budget: usize, pending: &[&str]) -> Reading {
        Reading {
            budget,
            tokens: 0,
            pending: pending.iter().map(|id| id.to_string()).collect(),
            newest_first: Vec::new(),
            done: false,
        }
    }

    fn events(count: usize) -> Vec<Event> {
        (0..count).map(|_| Event::new("e-1")).collect()
    }

    #[test]
    fn the_next_page_is_what_the_rest_of_the_budget_holds_and_a_quarter_more() {
        // Content-less events are estimated at 1 token each: 32 read of a budget of 100.
        let mut read = reading(100, &[]);
        assert!(read.take(events(32)));
        assert_eq!(read.next_page_size(32), 68 + 17 + 2);
        // A budget spent leaves the smallest page; a huge one is capped.
        let mut spent = reading(32, &[]);
        assert!(spent.take(events(32)));
        assert_eq!(spent.next_page_size(32), 2);
        let mut huge = reading(usize::MAX / 2, &[]);
        assert!(huge.take(events(32)));
        assert_eq!(huge.next_page_size(32), validate::MAX_PAGE_SIZE);
    }

    #[test]
    fn pages_double_while_calls_are_pending() {
        let mut read = reading(10, &["c1"]);
        assert!(read.take(events(32)), "past the budget while a call is pending");
        assert_eq!(read.next_page_size(32), 64);
    }
}
