//! `rediss://` against a real TLS-only `redis-server` (plain port off), with a
//! throwaway CA and server certificate made by the `openssl` CLI. Proves rustls
//! has a crypto provider and that the store really talks TLS, and that a
//! plain-text client pointed at the TLS port fails fast and retryably.

use adk_grpc_core::SessionService;
use adk_grpc_core::{AdkError, AppendEventRequest, Content, CreateRequest, Event, GetRequest, WatchRequest};
use adk_grpc_store::{StoreConfig, Stores};
use adk_grpc_testkit::{RedisServer, free_port, redis_cli, unique_prefix};
use futures::StreamExt;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;
use tokio::time::{Instant, timeout};

/// Far above a TLS handshake on loopback; a hang fails the test instead of stalling it.
const STEP_TIMEOUT: Duration = Duration::from_secs(15);

/// A CA and a server certificate it signed, valid for 127.0.0.1 and localhost.
struct Certs {
    _dir: TempDir,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|err| panic!("cannot run `openssl` (apt-get install openssl): {err}"));
    assert!(
        output.status.success(),
        "`openssl {}` failed with {}:\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

fn make_certs() -> Certs {
    let dir = tempfile::Builder::new().prefix("adk-redis-tls-").tempdir().unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca_args = vec!["req", "-x509", "-days", "2", "-subj", "/CN=adk test CA"];
    ca_args.extend(ec);
    ca_args.extend(["-keyout", "ca.key", "-out", "ca.crt"]);
    openssl(dir.path(), &ca_args);
    let mut csr_args = vec!["req", "-new", "-subj", "/CN=localhost"];
    csr_args.extend(ec);
    csr_args.extend(["-keyout", "server.key", "-out", "server.csr"]);
    openssl(dir.path(), &csr_args);
    std::fs::write(
        dir.path().join("server.ext"),
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n\
         basicConstraints = CA:FALSE\n\
         keyUsage = digitalSignature\n\
         extendedKeyUsage = serverAuth\n",
    )
    .unwrap();
    openssl(
        dir.path(),
        &[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    );
    Certs {
        ca: dir.path().join("ca.crt"),
        cert: dir.path().join("server.crt"),
        key: dir.path().join("server.key"),
        _dir: dir,
    }
}

/// A redis-server that only speaks TLS, on the returned port.
async fn start_tls_redis(certs: &Certs) -> (RedisServer, u16) {
    let tls_port = free_port();
    let port = tls_port.to_string();
    let path = |p: &Path| p.to_str().expect("temp paths are UTF-8").to_owned();
    let (cert, key, ca) = (path(&certs.cert), path(&certs.key), path(&certs.ca));
    let server = RedisServer::start_with_args(&[
        "--port",
        "0",
        "--tls-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ])
    .await;
    (server, tls_port)
}

fn text_event(text: &str) -> Event {
    Event::new("inv-1")
        .with_author("user")
        .with_content(Content::new("user").with_text(text))
}

async fn within<T>(what: &str, step: impl Future<Output = T>) -> T {
    timeout(STEP_TIMEOUT, step)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {STEP_TIMEOUT:?}"))
}

#[tokio::test]
async fn rediss_insecure_url_creates_appends_and_gets_a_session() {
    let certs = make_certs();
    let (_server, tls_port) = start_tls_redis(&certs).await;
    let url = format!("rediss://127.0.0.1:{tls_port}/#insecure");
    let svc = within("connect", open_sessions(&url))
        .await
        .unwrap_or_else(|err| panic!("{url}: {err:?}"));

    let app = unique_prefix("tls");
    let create = CreateRequest {
        app_name: app.clone(),
        user_id: "alice".into(),
        session_id: Some("s1".into()),
        state: [("topic".to_owned(), json!("tls"))].into(),
        ttl: None,
    };
    let created = within("create", svc.create(create)).await.unwrap();
    assert_eq!(created.id, "s1");

    let append = AppendEventRequest {
        timestamp_missing: false,
        app_name: app.clone(),
        user_id: "alice".into(),
        session_id: "s1".into(),
        event: text_event("over tls").with_state_delta("topic", json!("encrypted")),
        precondition: None,
    };
    let stored = within("append", svc.append_event(append)).await.unwrap();
    assert_eq!(stored.sequence, 1);

    let get = GetRequest {
        app_name: app.clone(),
        user_id: "alice".into(),
        session_id: "s1".into(),
        ..Default::default()
    };
    let session = within("get", svc.get(get)).await.unwrap();
    assert_eq!(session.events.as_slice(), std::slice::from_ref(&stored));
    assert_eq!(session.state.as_map().get("topic"), Some(&json!("encrypted")));

    // Watches read and hear appends on connections apart from the writes' (the process's
    // one reader and its subscriber); they must speak TLS too.
    let watch = WatchRequest {
        app_name: app,
        user_id: "alice".into(),
        session_id: "s1".into(),
        after_sequence: Some(0),
    };
    let mut events = within("watch", svc.watch(watch)).await.unwrap();
    let replayed = within("watch replay", events.next()).await.expect("stream ended");
    assert_eq!(replayed.unwrap(), stored);

    // The data really is in this TLS-only server, as an independent TLS client sees it.
    let (ca, port) = (certs.ca.to_str().unwrap(), tls_port.to_string());
    let keys = redis_cli(&["--tls", "--cacert", ca, "-p", &port, "DBSIZE"]).await;
    assert_ne!(keys, "0", "the store wrote nothing to the TLS server");
}

#[tokio::test]
async fn plain_redis_url_to_the_tls_port_fails_fast_and_retryably() {
    let certs = make_certs();
    let (_server, tls_port) = start_tls_redis(&certs).await;
    let url = format!("redis://127.0.0.1:{tls_port}");
    let started = Instant::now();
    let err = within("plain connect", open_sessions(&url))
        .await
        .err()
        .expect("a plain-text client must not get through to a TLS port");
    assert!(
        matches!(err, AdkError::Unavailable(_)),
        "expected Unavailable, got {err:?}"
    );
    assert!(err.is_retryable(), "{err:?}");
    eprintln!(
        "plain redis:// to the TLS port failed after {:?}: {err}",
        started.elapsed()
    );
}

#[tokio::test]
async fn rediss_without_insecure_rejects_a_certificate_from_an_unknown_ca() {
    let certs = make_certs();
    let (_server, tls_port) = start_tls_redis(&certs).await;
    // Verification is on by default: the throwaway CA is in no trust store.
    let url = format!("rediss://127.0.0.1:{tls_port}");
    let err = within("verified connect", open_sessions(&url))
        .await
        .err()
        .expect("a certificate from an unknown CA must be rejected");
    let message = err.to_string();
    assert!(
        message.to_lowercase().contains("certificate"),
        "expected a certificate error, got {err:?}"
    );
}

#[tokio::test]
async fn a_tls_server_restarted_with_its_arguments_keeps_serving_the_store() {
    let certs = make_certs();
    let (mut server, tls_port) = start_tls_redis(&certs).await;
    let url = format!("rediss://127.0.0.1:{tls_port}/#insecure");
    let svc = within("connect", open_sessions(&url)).await.unwrap();
    let app = unique_prefix("tls-restart");
    let create = CreateRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: Some("s".into()),
        ..Default::default()
    };
    within("create", svc.create(create)).await.unwrap();

    // The restart passes the TLS arguments again and waits on the TLS port.
    server.kill9().await;
    server.restart().await;

    let get = GetRequest {
        app_name: app,
        user_id: "u".into(),
        session_id: "s".into(),
        ..Default::default()
    };
    // The shared connection reconnects (over TLS) by itself; calls in the
    // meantime fail retryably.
    let session = adk_grpc_testkit::eventually(STEP_TIMEOUT, || async {
        match within("get after restart", svc.get(get.clone())).await {
            Ok(session) => Ok(session),
            Err(err) if err.is_retryable() => Err(format!("no reconnect to the restarted TLS server: {err:?}")),
            Err(err) => panic!("the restarted TLS server fails for good: {err:?}"),
        }
    })
    .await;
    assert_eq!(session.id, "s", "the AOF kept the session across the crash");
}

/// The session store at `url`, as a server opens it.
async fn open_sessions(url: &str) -> adk_grpc_core::Result<Arc<dyn SessionService>> {
    Stores::open(url, StoreConfig::default())?.sessions().await
}
