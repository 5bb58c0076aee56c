//! gRPC-Web (`--grpc-web`) on `adk-server` (served in the test's process; each separate
//! binary as a real process), spoken the way a browser does: HTTP/1.1, `application/grpc-web+proto`, the status in a trailer frame at the
//! end of the body (or in the headers when the call fails before any message), and
//! CORS preflights answered only for `--cors-allowed-origins`. The browser itself is
//! exercised by the chat page's Chromium test (clients/node/test/web-chat.test.js).

use adk_grpc_e2e::InProcessServer;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_proto::v1::{
    CreateSessionRequest, GetSessionRequest, ListAppsRequest, ListAppsResponse, ListArtifactsRequest,
    ListArtifactsResponse, Session,
};
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ALLOWED_ORIGIN: &str = "http://chat.example.test:8080";

/// An HTTP/1.1 response: status code, headers (lowercase names), body (de-chunked).
struct HttpResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Sends one request on a fresh connection (`Connection: close`) and reads the whole answer.
/// None when the server closes the connection without an HTTP/1.1 answer.
async fn http1(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Option<HttpResponse> {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut request = request.into_bytes();
    // A server that does not speak HTTP/1.1 closes the connection, maybe before the request
    // is all written: no answer either way.
    request.extend_from_slice(body);
    if tcp.write_all(&request).await.is_err() {
        return None;
    }
    let mut raw = Vec::new();
    let _ = tcp.read_to_end(&mut raw).await;
    parse_http1(&raw)
}

fn parse_http1(raw: &[u8]) -> Option<HttpResponse> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    if !status_line.starts_with("HTTP/1.1 ") {
        return None;
    }
    let status = status_line.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Some(HttpResponse { status, headers, body })
}

fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = chunked.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let size_text = std::str::from_utf8(&chunked[..line_end]).expect("chunk size");
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).expect("hex chunk size");
        if size == 0 {
            return body;
        }
        let data = &chunked[line_end + 2..];
        body.extend_from_slice(&data[..size]);
        chunked = &data[size + 2..];
    }
}

/// A gRPC-Web frame: flag byte (0 message, 0x80 trailers), 4-byte big-endian length, payload.
fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut framed = vec![flag];
    framed.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    framed.extend_from_slice(payload);
    framed
}

/// Splits a gRPC-Web response body into its messages and its trailers (as text).
fn unframe(mut body: &[u8]) -> (Vec<Vec<u8>>, String) {
    let (mut messages, mut trailers) = (Vec::new(), String::new());
    while body.len() >= 5 {
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        let payload = &body[5..5 + len];
        if body[0] & 0x80 != 0 {
            trailers.push_str(std::str::from_utf8(payload).expect("trailers are text"));
        } else {
            messages.push(payload.to_vec());
        }
        body = &body[5 + len..];
    }
    (messages, trailers)
}

async fn grpc_web_call(port: u16, method: &str, request: impl Message) -> Option<HttpResponse> {
    let headers = [
        ("Content-Type", "application/grpc-web+proto"),
        ("X-Grpc-Web", "1"),
        ("Origin", ALLOWED_ORIGIN),
    ];
    http1(port, "POST", method, &headers, &frame(0, &request.encode_to_vec())).await
}

/// `adk-server --grpc-web` with `extra`, in the test's process: these tests are about what
/// it answers to a browser, not about the process.
async fn web_server(extra: &[&str]) -> InProcessServer {
    let args: Vec<&str> = ["--grpc-web"].iter().chain(extra).copied().collect();
    InProcessServer::all_in_one(&args).await
}

/// A browser-style gRPC-Web call over HTTP/1.1 creates a session that a plain gRPC
/// client then reads, and reads it back itself; the CORS headers let the allowed page
/// see the answer and the error statuses.
#[tokio::test]
async fn grpc_web_over_http1_calls_the_services() {
    let server = web_server(&["--cors-allowed-origins", ALLOWED_ORIGIN]).await;
    let create = CreateSessionRequest {
        app_name: "web".into(),
        user_id: "alice".into(),
        session_id: "from-browser".into(),
        ..Default::default()
    };
    let answer = grpc_web_call(server.port(), "/adk.v1.SessionService/CreateSession", create)
        .await
        .expect("an HTTP/1.1 answer");
    assert_eq!(answer.status, 200);
    assert!(
        answer
            .header("content-type")
            .unwrap()
            .starts_with("application/grpc-web")
    );
    assert_eq!(answer.header("access-control-allow-origin"), Some(ALLOWED_ORIGIN));
    let exposed = answer.header("access-control-expose-headers").unwrap_or_default();
    assert!(exposed.contains("grpc-status-details-bin"), "exposed: {exposed}");
    let (messages, trailers) = unframe(&answer.body);
    assert!(trailers.contains("grpc-status:0"), "trailers: {trailers:?}");
    let created = Session::decode(messages[0].as_slice()).expect("a Session");
    assert_eq!(created.id, "from-browser");

    // The same session through plain gRPC (HTTP/2) on the same port.
    let mut sessions = SessionServiceClient::connect(server.endpoint())
        .await
        .expect("connect over gRPC");
    let got = sessions
        .get_session(GetSessionRequest {
            app_name: "web".into(),
            user_id: "alice".into(),
            session_id: "from-browser".into(),
            ..Default::default()
        })
        .await
        .expect("the session created over gRPC-Web is stored");
    assert_eq!(got.into_inner().id, "from-browser");

    // A failed call: the status arrives in the answer's headers ("trailers-only").
    let missing = GetSessionRequest {
        app_name: "web".into(),
        user_id: "alice".into(),
        session_id: "nope".into(),
        ..Default::default()
    };
    let answer = grpc_web_call(server.port(), "/adk.v1.SessionService/GetSession", missing)
        .await
        .unwrap();
    let status = answer
        .header("grpc-status")
        .map(str::to_string)
        .or_else(|| {
            let (_, trailers) = unframe(&answer.body);
            trailers
                .lines()
                .find_map(|l| l.strip_prefix("grpc-status:").map(|s| s.trim().to_string()))
        })
        .expect("a grpc-status");
    assert_eq!(status, (tonic::Code::NotFound as i32).to_string());
    // With its details (google.rpc.Status: the ErrorInfo reason), which CORS lets the page read.
    let details = answer
        .header("grpc-status-details-bin")
        .map(str::to_string)
        .or_else(|| {
            let (_, trailers) = unframe(&answer.body);
            trailers
                .lines()
                .find_map(|l| l.strip_prefix("grpc-status-details-bin:").map(|s| s.trim().to_string()))
        })
        .expect("grpc-status-details-bin");
    use base64::Engine as _;
    let status = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(details.trim_end_matches('='))
        .expect("base64 details");
    let reason = String::from_utf8_lossy(&status);
    assert!(reason.contains("SESSION_NOT_FOUND"), "details: {reason:?}");
}

/// A preflight from an allowed origin is answered with that origin and POST; from any
/// other origin it carries no CORS permission, so the browser blocks the call.
#[tokio::test]
async fn cors_preflight_answers_only_allowed_origins() {
    let server = web_server(&[
        "--cors-allowed-origins",
        &format!("https://other.example.test,{ALLOWED_ORIGIN}"),
    ])
    .await;
    let preflight = |origin: &'static str| {
        let server = &server;
        async move {
            let headers = [
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "content-type,x-grpc-web,x-user-agent"),
            ];
            http1(
                server.port(),
                "OPTIONS",
                "/adk.v1.SessionService/CreateSession",
                &headers,
                b"",
            )
            .await
            .expect("an HTTP/1.1 answer")
        }
    };
    let allowed = preflight(ALLOWED_ORIGIN).await;
    assert!((200..300).contains(&allowed.status), "status {}", allowed.status);
    assert_eq!(allowed.header("access-control-allow-origin"), Some(ALLOWED_ORIGIN));
    assert!(
        allowed
            .header("access-control-allow-methods")
            .unwrap_or_default()
            .contains("POST")
    );
    let allowed_headers = allowed
        .header("access-control-allow-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        allowed_headers.contains("x-grpc-web"),
        "allowed headers: {allowed_headers}"
    );

    let denied = preflight("https://evil.example.test").await;
    assert_eq!(denied.header("access-control-allow-origin"), None);
}

/// Without --grpc-web the port speaks HTTP/2 gRPC only: a gRPC-Web request over HTTP/1.1
/// gets no answer, and no CORS header ever.
#[tokio::test]
async fn grpc_web_is_off_without_the_flag() {
    let server = InProcessServer::all_in_one(&[]).await;
    let create = CreateSessionRequest {
        app_name: "web".into(),
        user_id: "alice".into(),
        ..Default::default()
    };
    let answer = grpc_web_call(server.port(), "/adk.v1.SessionService/CreateSession", create).await;
    assert!(
        answer.is_none(),
        "HTTP/1.1 answered with status {:?}",
        answer.map(|a| a.status)
    );
}

/// The flag lives in the server kit, so each separate binary serves gRPC-Web too.
#[tokio::test]
async fn every_binary_serves_grpc_web() {
    let redis = RedisServer::start().await;
    let agents = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/agents.yaml");
    let common = ["--grpc-web".to_string(), "--store-url".to_string(), redis.url()];
    let spawn = |bin: &'static str, extra: Vec<String>| {
        let mut args = common.to_vec();
        args.extend(extra);
        async move { ServiceProcess::spawn(bin, &args, &[]).await }
    };

    let sessions = spawn("adk-session-server", vec![]).await;
    let create = CreateSessionRequest {
        app_name: "web".into(),
        user_id: "bob".into(),
        ..Default::default()
    };
    let answer = grpc_web_call(sessions.port(), "/adk.v1.SessionService/CreateSession", create)
        .await
        .unwrap();
    let (messages, trailers) = unframe(&answer.body);
    assert!(trailers.contains("grpc-status:0"), "session server: {trailers:?}");
    assert_eq!(Session::decode(messages[0].as_slice()).unwrap().user_id, "bob");

    let artifacts = spawn("adk-artifact-server", vec![]).await;
    let list = ListArtifactsRequest {
        app_name: "web".into(),
        user_id: "bob".into(),
        session_id: "s".into(),
    };
    let answer = grpc_web_call(artifacts.port(), "/adk.v1.ArtifactService/ListArtifacts", list)
        .await
        .unwrap();
    let (messages, trailers) = unframe(&answer.body);
    assert!(trailers.contains("grpc-status:0"), "artifact server: {trailers:?}");
    assert!(
        ListArtifactsResponse::decode(messages[0].as_slice())
            .unwrap()
            .file_names
            .is_empty()
    );

    let runner = spawn(
        "adk-runner-server",
        vec!["--agents".into(), agents.display().to_string()],
    )
    .await;
    let answer = grpc_web_call(runner.port(), "/adk.v1.AgentRunner/ListApps", ListAppsRequest {})
        .await
        .unwrap();
    let (messages, trailers) = unframe(&answer.body);
    assert!(trailers.contains("grpc-status:0"), "runner server: {trailers:?}");
    let apps = ListAppsResponse::decode(messages[0].as_slice()).unwrap().apps;
    assert!(apps.iter().any(|app| app.name == "assistant"));
}
