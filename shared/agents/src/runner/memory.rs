//! Memory ingestion: what a finished invocation adds to the user's long-term memory
//! ([`AddToMemory`]), and the memory its agents and tools search.

use super::AddToMemory;
use crate::context::Invocation;
use adk_grpc_core::memory::ingest::ingest_session;
use adk_grpc_core::memory::{AddEventsRequest, add_session_to_memory};
use adk_grpc_core::{Memory, MemoryService, Result, ScopedMemory, Session, SessionService};
use std::collections::HashMap;
use std::sync::Arc;

/// The session's user's memory, as the invocation's agents and tools see it.
pub(super) fn scoped(service: Arc<dyn MemoryService>, session: &Session) -> Arc<dyn Memory> {
    Arc::new(ScopedMemory::new(service, &session.app_name, &session.user_id))
}

/// Adds the finished invocation (or its session) to long-term memory, if configured.
/// A failure fails the invocation: its events are stored, but the client must know
/// they were not remembered (a retry of the add is `AddSessionToMemory`).
pub(super) async fn add_to_memory(
    add_to_memory: Option<(Arc<dyn MemoryService>, AddToMemory)>,
    invocation: Arc<Invocation>,
    session_service: Arc<dyn SessionService>,
) -> Result<()> {
    let Some((memory, what)) = add_to_memory else {
        return Ok(());
    };
    let session = &invocation.session;
    match what {
        AddToMemory::Invocation => {
            let events = AddEventsRequest {
                app_name: session.app_name.clone(),
                user_id: session.user_id.clone(),
                session_id: session.id.clone(),
                events: invocation.own_events(),
                custom_metadata: HashMap::new(),
            };
            memory.add_events(events).await?;
        }
        AddToMemory::Session => {
            add_session_to_memory(
                memory.as_ref(),
                session_service.as_ref(),
                &session.app_name,
                &session.user_id,
                &session.id,
            )
            .await?;
        }
        // The whole session, not only this invocation: what an earlier invocation's
        // runner stored but did not live to ingest goes with it (the store skips the rest).
        AddToMemory::Ingest => {
            ingest_session(
                memory.as_ref(),
                session_service.as_ref(),
                &session.app_name,
                &session.user_id,
                &session.id,
            )
            .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{AGENT, Fixture, SESSION, Step, USER, drain};
    use super::*;
    use adk_grpc_core::memory::SearchMemoryRequest;
    use adk_grpc_core::{AppendEventRequest, Content, Event};
    use adk_grpc_store::{StoreConfig, Stores};

    /// A run with `what` added to memory, on a session that already holds an earlier
    /// invocation's event (about zebras); this one is about penguins. Returns what a
    /// search for each finds as soon as the run's stream has ended.
    async fn remembered(app: &str, what: AddToMemory) -> (Vec<String>, Vec<String>) {
        let memory = Stores::open("memory://", StoreConfig::default())
            .unwrap()
            .memory()
            .await
            .unwrap();
        let f = Fixture::with(app, |config| {
            config.memory_service = Some(memory.clone());
            config.add_to_memory = Some(what);
        })
        .await;
        let earlier = Event::new("e-earlier")
            .with_author(AGENT)
            .with_content(Content::new("model").with_text("zebras are striped"));
        f.sessions
            .append_event(AppendEventRequest {
                app_name: f.app.clone(),
                user_id: USER.into(),
                session_id: SESSION.into(),
                event: earlier,
                timestamp_missing: false,
                precondition: None,
            })
            .await
            .unwrap();
        f.play(Step::Say("penguins swim"));
        f.end_script();
        let (_, error) = drain(f.run("tell me about penguins").await.unwrap()).await;
        assert!(error.is_none(), "{error:?}");
        let search = |query: &str| {
            let memory = memory.clone();
            let request = SearchMemoryRequest {
                app_name: f.app.clone(),
                user_id: USER.into(),
                query: query.into(),
                limit: 0,
            };
            async move {
                let mut found: Vec<String> = memory
                    .search(request)
                    .await
                    .unwrap()
                    .memories
                    .iter()
                    .map(|m| m.text())
                    .collect();
                found.sort();
                found
            }
        };
        (search("penguins").await, search("zebras").await)
    }

    #[tokio::test]
    async fn an_invocation_adds_its_own_events_before_its_stream_ends() {
        let (penguins, zebras) = remembered("memory_invocation", AddToMemory::Invocation).await;
        assert_eq!(penguins, ["penguins swim", "tell me about penguins"]);
        assert!(zebras.is_empty(), "an earlier invocation was added: {zebras:?}");
    }

    #[tokio::test]
    async fn a_session_is_added_whole_before_its_stream_ends() {
        let (penguins, zebras) = remembered("memory_session", AddToMemory::Session).await;
        assert_eq!(penguins, ["penguins swim", "tell me about penguins"]);
        assert_eq!(zebras, ["zebras are striped"]);
    }
}
