//! The serve loop's lifecycle: startup failures are clear, shutdown completes.

use adk_grpc_server_kit::{GrpcArgs, GrpcServer, MetricsArgs, ServeError, Shutdown};
use std::time::Duration;

#[tokio::test]
async fn a_taken_port_is_a_clear_startup_error() {
    let first = GrpcServer::new(&GrpcArgs::default(), Shutdown::new())
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let taken = first.local_addr().to_string();

    let Err(err) = GrpcServer::new(&GrpcArgs::default(), Shutdown::new())
        .bind(&taken)
        .await
    else {
        panic!("binding {taken} twice succeeded");
    };
    assert!(matches!(err, ServeError::Bind { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("cannot listen on {taken}"));
    let cause = std::error::Error::source(&err)
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(cause.contains("Address already in use"), "{cause}");
}

#[tokio::test]
async fn the_metrics_port_is_bound_at_startup_and_a_taken_one_is_a_clear_error() {
    let off = GrpcServer::new(&GrpcArgs::default(), Shutdown::new())
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    assert_eq!(off.metrics_addr(), None, "no endpoint unless asked for");

    let on = GrpcServer::new(&GrpcArgs::default(), Shutdown::new())
        .metrics(&MetricsArgs::on("127.0.0.1:0"))
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let taken = on.metrics_addr().expect("a metrics port").to_string();

    let Err(err) = GrpcServer::new(&GrpcArgs::default(), Shutdown::new())
        .metrics(&MetricsArgs::on(taken.clone()))
        .bind("127.0.0.1:0")
        .await
    else {
        panic!("binding the metrics port {taken} twice succeeded");
    };
    assert!(matches!(err, ServeError::MetricsBind { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(&format!("cannot serve metrics on {taken}")),
        "{err}"
    );
    let cause = std::error::Error::source(&err)
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(cause.contains("Address already in use"), "{cause}");
}

#[tokio::test]
async fn an_unparsable_listen_address_is_a_startup_error() {
    let Err(err) = GrpcServer::new(&GrpcArgs::default(), Shutdown::new())
        .bind("not an address")
        .await
    else {
        panic!("bound to nonsense");
    };
    assert_eq!(err.to_string(), "cannot listen on not an address");
    assert!(
        std::error::Error::source(&err).is_some(),
        "the resolver's error is the cause"
    );
}

#[tokio::test]
async fn serve_returns_once_shutdown_fires() {
    let shutdown = Shutdown::new();
    let server = GrpcServer::new(&GrpcArgs::default(), shutdown.clone())
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let endpoint = format!("http://{}", server.local_addr());
    let serving = tokio::spawn(server.serve());
    // Shut down a server that is known to be serving (it answered a health check), so
    // the test proves serve() returns from the running state, not from before it.
    let channel = tonic::transport::Channel::from_shared(endpoint)
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest { service: String::new() })
        .await
        .unwrap();
    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A stream that does not watch the Shutdown (here grpc.health.v1 Watch) cannot hold
/// the process past the grace period; its watcher is told NOT_SERVING first.
#[tokio::test]
async fn the_grace_period_bounds_shutdown() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let shutdown = Shutdown::new();
    let grpc = GrpcArgs {
        shutdown_grace_secs: 1,
        ..GrpcArgs::default()
    };
    let server = GrpcServer::new(&grpc, shutdown.clone())
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let endpoint = format!("http://{}", server.local_addr());
    let serving = tokio::spawn(server.serve());

    let channel = tonic::transport::Channel::from_shared(endpoint)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut watch = HealthClient::new(channel)
        .watch(HealthCheckRequest { service: String::new() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(watch.message().await.unwrap().unwrap().status(), ServingStatus::Serving);

    let started = tokio::time::Instant::now();
    shutdown.trigger();
    assert_eq!(
        watch.message().await.unwrap().unwrap().status(),
        ServingStatus::NotServing
    );
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
}
