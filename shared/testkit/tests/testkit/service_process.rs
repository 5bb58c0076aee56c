//! Proves `ServiceProcess` with the crate's own `adk-testkit-listener` binary,
//! which cargo builds next to this test executable.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use adk_grpc_testkit::{ServiceProcess, wait_for_port};

const LISTENER: &str = "adk-testkit-listener";

#[tokio::test]
async fn spawns_listens_and_reports_memory() {
    let envs = [("ADK_TESTKIT_GREETING".to_owned(), "hi there".to_owned())];
    let mut service = ServiceProcess::spawn(LISTENER, &[], &envs).await;
    let port = service.port();
    assert_eq!(service.endpoint(), format!("http://127.0.0.1:{port}"));
    assert!(wait_for_port(port, Duration::from_secs(1)).await);

    let rss = service.rss_kib().expect("VmRSS of a live process");
    let peak = service.peak_rss_kib().expect("VmHWM of a live process");
    assert!(rss > 0 && peak >= rss, "rss {rss} peak {peak}");

    let log = service.tail_log(10);
    assert!(log.contains("greeting: hi there"), "{log}");
    assert!(log.contains(&format!("listening on 127.0.0.1:{port}")), "{log}");

    // The listener has no SIGTERM handler, so the default action ends it.
    let status = service.terminate().await;
    assert_eq!(status.signal(), Some(15));
    assert!(!wait_for_port(port, Duration::from_millis(100)).await);
}

#[tokio::test]
async fn restarts_on_the_same_port_after_a_crash() {
    let mut service = ServiceProcess::spawn(LISTENER, &[], &[]).await;
    let port = service.port();
    let first_pid = service.pid();

    assert_eq!(service.kill9().await.signal(), Some(9));
    assert_eq!(service.rss_kib(), None);
    service.restart().await;

    assert_eq!(service.port(), port);
    assert_ne!(service.pid(), first_pid);
    assert!(wait_for_port(port, Duration::from_secs(1)).await);
    let log = std::fs::read_to_string(service.log_path()).expect("read log");
    assert_eq!(log.matches("=== adk-grpc-testkit:").count(), 2, "{log}");
}

#[tokio::test]
#[should_panic(expected = "startup failed on purpose")]
async fn spawn_panics_with_the_log_when_the_service_exits_early() {
    ServiceProcess::spawn(LISTENER, &["--fail-at-startup".to_owned()], &[]).await;
}
