//! The SessionService conformance suite against the in-memory backend.

use adk_grpc_core::{Clock, CoreSessionService};
use adk_grpc_store::InMemorySessionBackend;
use adk_grpc_testkit::Fixture;

/// On a manual clock: the TTL case jumps over its TTLs instead of waiting them out.
mod memory_backend_conforms {
    use super::*;
    adk_grpc_testkit::session_conformance_tests!({
        let clock = Clock::manual();
        Fixture::sessions(CoreSessionService::new(
            InMemorySessionBackend::new().with_clock(clock.clone()),
        ))
        .with_clock(clock)
    });
}

/// The store's default TTL is the core's rule: a session created without a TTL gets it,
/// one with its own keeps its own, and the default expires it like any TTL.
#[tokio::test]
async fn the_default_ttl_applies_to_sessions_created_without_one() {
    use adk_grpc_core::{CreateRequest, GetRequest, SessionService};
    use std::time::Duration;
    let clock = Clock::manual();
    let config = adk_grpc_store::StoreConfig {
        default_session_ttl: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    let sessions = adk_grpc_store::session_service(InMemorySessionBackend::new().with_clock(clock.clone()), &config);
    let create = |id: &str, ttl: Option<Duration>| CreateRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: Some(id.into()),
        ttl,
        ..Default::default()
    };
    let defaulted = sessions.create(create("defaulted", None)).await.unwrap();
    let expected = clock.now() + chrono::TimeDelta::seconds(60);
    let expires = defaulted.expire_time.expect("the default TTL");
    assert!(
        (expires - expected).abs() < chrono::TimeDelta::seconds(1),
        "{expires} vs {expected}"
    );
    let own = sessions
        .create(create("own", Some(Duration::from_secs(3600))))
        .await
        .unwrap();
    assert!(own.expire_time.unwrap() > expires + chrono::TimeDelta::seconds(3000));
    clock.advance(Duration::from_secs(61));
    let get = |id: &str| GetRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: id.into(),
        ..Default::default()
    };
    let gone = sessions.get(get("defaulted")).await.unwrap_err();
    assert!(matches!(gone, adk_grpc_core::AdkError::NotFound(..)), "{gone}");
    sessions.get(get("own")).await.expect("its own TTL runs on");
}

mod reaping {
    use adk_grpc_core::{CoreSessionService, CreateRequest, SessionService};
    use adk_grpc_store::InMemorySessionBackend;
    use std::time::Duration;

    /// Waits until `done` holds, failing after `limit`.
    async fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
        let check = || std::future::ready(if done() { Ok(()) } else { Err(what.to_string()) });
        adk_grpc_testkit::eventually(limit, check).await
    }

    fn create(id: String, ttl: Option<Duration>) -> CreateRequest {
        CreateRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: Some(id),
            ttl,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn expired_sessions_are_reaped_though_nobody_reads_them() {
        let clock = adk_grpc_core::Clock::manual();
        let svc = CoreSessionService::new(
            InMemorySessionBackend::new()
                .with_clock(clock.clone())
                .with_reap_interval(Duration::from_millis(50)),
        );
        svc.create(create("kept".into(), None))
            .await
            .expect("a session without a TTL");
        for i in 0..100 {
            svc.create(create(format!("brief-{i}"), Some(Duration::from_secs(60))))
                .await
                .expect("a session with a TTL");
        }
        assert_eq!(svc.backend().stored_session_count(), 101);
        clock.advance(Duration::from_secs(61));
        // Nothing reads them: only the reaper can drop them.
        wait_until(Duration::from_secs(10), "the expired sessions are dropped", || {
            svc.backend().stored_session_count() == 1
        })
        .await;
    }

    #[tokio::test]
    async fn the_reaper_stops_with_the_store() {
        let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
        let svc = CoreSessionService::new(InMemorySessionBackend::new().with_reap_interval(Duration::from_millis(10)));
        svc.create(create("plain".into(), None)).await.expect("create");
        assert_eq!(tasks(), 0, "no reaper until a session has a TTL");
        svc.create(create("brief".into(), Some(Duration::from_secs(60))))
            .await
            .expect("create with a TTL");
        svc.create(create("brief2".into(), Some(Duration::from_secs(60))))
            .await
            .expect("create with a TTL");
        assert_eq!(tasks(), 1, "one reaper per store");
        drop(svc);
        wait_until(Duration::from_secs(10), "the reaper ends", || tasks() == 0).await;
    }
}
