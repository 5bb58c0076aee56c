//! Connection lifetimes (handshake.rs and the keepalive flags): a client that connects
//! and never finishes its HTTP/2 handshake is closed after `--handshake-timeout-ms`; a
//! client that stops answering HTTP/2 PINGs is closed after `--keepalive-interval-ms`
//! plus `--keepalive-timeout-ms`; a live client, even an idle one, keeps its connection.

use adk_grpc_server_kit::{GrpcArgs, GrpcServer, LimitArgs, Shutdown, TlsArgs};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
const EMPTY_SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];

async fn serve(limits: LimitArgs) -> (SocketAddr, Shutdown) {
    serve_with(GrpcArgs {
        limits,
        ..GrpcArgs::default()
    })
    .await
}

async fn serve_with(grpc: GrpcArgs) -> (SocketAddr, Shutdown) {
    let shutdown = Shutdown::new();
    let bound = GrpcServer::new(&grpc, shutdown.clone())
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let addr = bound.local_addr();
    tokio::spawn(bound.serve());
    (addr, shutdown)
}

/// Reads (and discards what the server sends) until the server closes the connection;
/// how long that took from `since`, or None if it is still open after `limit`.
async fn closed_after(mut conn: TcpStream, since: Instant, limit: Duration) -> Option<Duration> {
    let mut buf = [0u8; 1024];
    let closed = async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return since.elapsed(),
                Ok(_) => continue,
            }
        }
    };
    tokio::time::timeout(limit, closed).await.ok()
}

async fn health(addr: SocketAddr) -> HealthClient<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    HealthClient::new(channel)
}

#[tokio::test]
async fn connections_that_never_finish_the_handshake_are_closed_in_time() {
    let timeout = Duration::from_millis(400);
    let (addr, shutdown) = serve(LimitArgs {
        handshake_timeout_ms: timeout.as_millis() as u64,
        ..LimitArgs::default()
    })
    .await;
    let started = Instant::now();
    let mut pending = Vec::new();
    // Silent, half a preface, and a byte a time (slower than the deadline allows).
    for i in 0..60 {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        if i % 3 == 1 {
            conn.write_all(&PREFACE[..10]).await.unwrap();
        }
        pending.push(tokio::spawn(closed_after(conn, started, Duration::from_secs(10))));
    }
    let mut dribbler = TcpStream::connect(addr).await.unwrap();
    let dribbled = tokio::spawn(async move {
        for byte in PREFACE {
            if dribbler.write_all(&[*byte]).await.is_err() {
                return true;
            }
            // The slow client's pace (the thing under test), not a synchronisation.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    });
    for (i, conn) in pending.into_iter().enumerate() {
        let took = conn
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("connection {i} is still open after 10 s"));
        assert!(
            took >= timeout - Duration::from_millis(50) && took < timeout + Duration::from_secs(3),
            "connection {i} closed after {took:?}"
        );
    }
    assert!(
        dribbled.await.unwrap(),
        "a client sending its preface a byte per 100 ms was cut off"
    );
    // A real client, connected after all that, is served.
    let mut client = health(addr).await;
    client
        .check(HealthCheckRequest { service: String::new() })
        .await
        .expect("a real client is served");
    shutdown.trigger();
}

#[tokio::test]
async fn a_client_that_stops_answering_pings_is_closed_and_a_live_idle_one_kept() {
    let (interval, timeout) = (Duration::from_millis(300), Duration::from_millis(300));
    let (addr, shutdown) = serve(LimitArgs {
        keepalive_interval_ms: interval.as_millis() as u64,
        keepalive_timeout_ms: timeout.as_millis() as u64,
        ..LimitArgs::default()
    })
    .await;
    // A live client with a stream open and nothing to say.
    let mut live = health(addr).await;
    let mut watch = live
        .watch(HealthCheckRequest { service: String::new() })
        .await
        .expect("watch")
        .into_inner();
    watch.message().await.expect("the current status").expect("a status");

    // A peer that finished the handshake and then stopped answering (a vanished host).
    let mut stuck = TcpStream::connect(addr).await.unwrap();
    stuck.write_all(PREFACE).await.unwrap();
    stuck.write_all(&EMPTY_SETTINGS).await.unwrap();
    let started = Instant::now();
    let took = closed_after(stuck, started, Duration::from_secs(10))
        .await
        .expect("a client that never acknowledges a PING is closed");
    assert!(
        took >= interval && took < interval + timeout + Duration::from_secs(3),
        "closed after {took:?}"
    );

    // The live client answered the same PINGs: its stream is still open, its channel serves.
    let still_open = tokio::time::timeout(Duration::from_millis(200), watch.message()).await;
    assert!(still_open.is_err(), "the live client's watch ended: {still_open:?}");
    live.check(HealthCheckRequest { service: String::new() })
        .await
        .expect("the live client's connection serves");
    shutdown.trigger();
}

/// Over TLS the same deadline, counted from the TCP accept, covers the TLS handshake and
/// the HTTP/2 preface after it: a client silent before the handshake, and one that
/// finishes the TLS handshake and then sends nothing, are both closed; one that sends its
/// preface in time keeps its connection.
#[tokio::test]
async fn over_tls_the_deadline_covers_the_tls_handshake_and_the_preface_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("server.pem"), dir.path().join("server.key"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let timeout = Duration::from_millis(500);
    let (addr, shutdown) = serve_with(GrpcArgs {
        tls: TlsArgs {
            tls_cert: Some(cert),
            tls_key: Some(key),
            tls_client_ca: None,
        },
        limits: LimitArgs {
            handshake_timeout_ms: timeout.as_millis() as u64,
            ..LimitArgs::default()
        },
        ..GrpcArgs::default()
    })
    .await;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();

    let started = Instant::now();
    let silent = TcpStream::connect(addr).await.unwrap();
    let tls_only = connector
        .connect(name.clone(), TcpStream::connect(addr).await.unwrap())
        .await
        .expect("the TLS handshake");
    let mut prompt = connector
        .connect(name, TcpStream::connect(addr).await.unwrap())
        .await
        .expect("the TLS handshake");
    prompt.write_all(PREFACE).await.unwrap();
    prompt.write_all(&EMPTY_SETTINGS).await.unwrap();
    prompt.flush().await.unwrap();

    let took = closed_after(silent, started, Duration::from_secs(10))
        .await
        .expect("a client silent before the TLS handshake is closed");
    assert!(
        took >= timeout - Duration::from_millis(50) && took < timeout + Duration::from_secs(3),
        "{took:?}"
    );
    let mut tls_only = tls_only;
    let mut buf = [0u8; 1024];
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match tls_only.read(&mut buf).await {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => continue,
            }
        }
    })
    .await
    .expect("a client that sends no preface after the TLS handshake is closed");
    assert!(
        closed >= timeout - Duration::from_millis(50) && closed < timeout + Duration::from_secs(3),
        "{closed:?}"
    );
    // Well past the deadline, the client that sent its preface is still connected.
    let still_open = tokio::time::timeout(timeout * 3, async {
        loop {
            match prompt.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(
        still_open.is_err(),
        "the client that sent its preface in time was closed"
    );
    shutdown.trigger();
}
