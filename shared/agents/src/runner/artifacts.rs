//! Artifact restore for a rewind: every session artifact changed since the rewind
//! point gets the version it had then saved again as its newest version.

use adk_grpc_core::artifact::{LoadRequest, SaveRequest};
use adk_grpc_core::history::{self, ArtifactRestore};
use adk_grpc_core::{AdkError, ArtifactService, Event, Result, Session};
use std::collections::HashMap;

/// Restores the session's artifacts changed in `events[cut..]` to their versions at
/// `cut`; returns the rewind event's `artifact_delta` (file name -> new version).
pub(super) async fn restore_artifacts(
    artifacts: &dyn ArtifactService,
    session: &Session,
    events: &[Event],
    cut: usize,
) -> Result<HashMap<String, i64>> {
    let mut delta = HashMap::new();
    for restore in history::rewind_artifacts(events, cut) {
        let version = restore_artifact(artifacts, session, &restore).await?;
        delta.insert(restore.file_name, version);
    }
    Ok(delta)
}

/// Saves the artifact's version at the rewind point again as its newest version (or
/// ADK's tombstone when it did not exist then) and returns the new version.
async fn restore_artifact(
    artifacts: &dyn ArtifactService,
    session: &Session,
    restore: &ArtifactRestore,
) -> Result<i64> {
    let part = match restore.version {
        Some(version) => {
            let load = LoadRequest {
                app_name: session.app_name.clone(),
                user_id: session.user_id.clone(),
                session_id: session.id.clone(),
                file_name: restore.file_name.clone(),
                version: Some(version),
            };
            match artifacts.load(load).await {
                Ok(loaded) => loaded.part,
                Err(AdkError::NotFound(..)) => {
                    tracing::warn!(
                        file_name = %restore.file_name, version,
                        "artifact version gone at rewind; saving a tombstone instead"
                    );
                    history::rewind_tombstone()
                }
                Err(e) => return Err(e),
            }
        }
        None => history::rewind_tombstone(),
    };
    let saved = artifacts
        .save(SaveRequest {
            app_name: session.app_name.clone(),
            user_id: session.user_id.clone(),
            session_id: session.id.clone(),
            file_name: restore.file_name.clone(),
            part,
            version: None,
        })
        .await?;
    Ok(saved.version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::{Artifacts, Events, Part, ScopedArtifacts, StateMap};
    use adk_grpc_store::{InMemoryArtifactBackend, StoreConfig, memory_artifacts};
    use chrono::Utc;
    use std::sync::Arc;

    fn session() -> Session {
        Session {
            id: "s".into(),
            app_name: "app".into(),
            user_id: "u".into(),
            state: StateMap::default(),
            events: Events::new(Vec::new()),
            create_time: Utc::now(),
            last_update_time: Utc::now(),
            event_count: 0,
            expire_time: None,
        }
    }

    /// The artifact's newest version as stored (a tombstone included).
    async fn latest(service: &dyn ArtifactService, file_name: &str) -> Part {
        let load = LoadRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            file_name: file_name.into(),
            version: None,
        };
        service.load(load).await.unwrap().part
    }

    /// An event recording these artifact saves.
    fn saved(versions: &[(&str, i64)]) -> Event {
        let mut event = Event::new("e-1").with_author("agent");
        event.actions.artifact_delta = versions.iter().map(|(name, v)| (name.to_string(), *v)).collect();
        event
    }

    #[tokio::test]
    async fn each_artifact_changed_since_the_rewind_point_gets_its_version_then_back() {
        let service: Arc<dyn ArtifactService> = Arc::new(memory_artifacts(
            InMemoryArtifactBackend::new(),
            &StoreConfig::default(),
        ));
        let session = session();
        let files = ScopedArtifacts::new(service.clone(), "app".into(), "u".into(), "s".into());
        let kept = files.save("kept.txt", &Part::text_part("kept")).await.unwrap();
        let old = files.save("notes.txt", &Part::text_part("old")).await.unwrap();
        let new = files.save("notes.txt", &Part::text_part("new")).await.unwrap();
        let born = files.save("later.txt", &Part::text_part("born after")).await.unwrap();
        let user = files.save("user:profile.txt", &Part::text_part("mine")).await.unwrap();
        let events = [
            saved(&[("kept.txt", kept), ("notes.txt", old)]),
            // The rewind point: what follows is undone.
            saved(&[("notes.txt", new), ("later.txt", born), ("user:profile.txt", user)]),
        ];

        let delta = restore_artifacts(service.as_ref(), &session, &events, 1).await.unwrap();

        // Unchanged and user-scoped artifacts are left alone.
        let mut names: Vec<&str> = delta.keys().map(String::as_str).collect();
        names.sort();
        assert_eq!(names, ["later.txt", "notes.txt"]);
        assert_eq!(delta["notes.txt"], new + 1, "saved again as the newest version");
        assert_eq!(latest(service.as_ref(), "notes.txt").await, Part::text_part("old"));
        assert!(history::is_rewind_tombstone(
            &latest(service.as_ref(), "later.txt").await
        ));
        assert_eq!(
            latest(service.as_ref(), "user:profile.txt").await,
            Part::text_part("mine")
        );
    }

    #[tokio::test]
    async fn a_version_gone_from_the_store_is_restored_as_a_tombstone() {
        let service: Arc<dyn ArtifactService> = Arc::new(memory_artifacts(
            InMemoryArtifactBackend::new(),
            &StoreConfig::default(),
        ));
        let files = ScopedArtifacts::new(service.clone(), "app".into(), "u".into(), "s".into());
        let current = files.save("notes.txt", &Part::text_part("current")).await.unwrap();
        // The log names a version the store no longer has.
        let events = [saved(&[("notes.txt", current + 7)]), saved(&[("notes.txt", current)])];

        let delta = restore_artifacts(service.as_ref(), &session(), &events, 1)
            .await
            .unwrap();

        assert_eq!(delta["notes.txt"], current + 1);
        assert!(history::is_rewind_tombstone(
            &latest(service.as_ref(), "notes.txt").await
        ));
    }
}
