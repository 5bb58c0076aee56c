//! Message compression on the all-in-one server (its own assembly, served in the test's
//! process over real gRPC): tonic's generated clients with `send_compressed` and
//! `accept_compressed` call every service (sessions, artifacts, memory, the runner, A2A,
//! health) in gzip, deflate and zstd, unary and streaming both ways; raw HTTP/2 calls
//! read the compression flag of each response message (compressed from
//! `--compression-min-bytes` on, never below, never for a client that accepts no
//! encoding); grpcurl, which can send no compressed request, reads answers above the
//! threshold. The decompression bomb is in hostile_input.rs.

use adk_grpc_e2e::InProcessServer;
use adk_grpc_e2e::raw::{frame, raw_call};
use adk_grpc_e2e::runs::{run_to_end, text_of};
use adk_grpc_proto::a2a;
use adk_grpc_proto::a2a::a2a_service_client::A2aServiceClient;
use adk_grpc_proto::ordered::value::Kind;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_proto::v1::memory_service_client::MemoryServiceClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_proto::v1::upload_artifact_request::Message as UploadMessage;
use prost::Message;
use std::time::Duration;
use tonic::Code;
use tonic::codec::CompressionEncoding;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const ENCODINGS: [CompressionEncoding; 3] = [
    CompressionEncoding::Gzip,
    CompressionEncoding::Deflate,
    CompressionEncoding::Zstd,
];
const AGENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/agents.yaml");
/// Long enough to be compressed, and compressible.
const WORDS: &str = "the quick brown fox jumps over the lazy dog; ";

fn long_text(tag: &str) -> String {
    format!("{tag}: {}", WORDS.repeat(400))
}

fn string_value(s: String) -> adk_grpc_proto::ordered::Value {
    adk_grpc_proto::ordered::Value {
        kind: Some(Kind::StringValue(s)),
    }
}

fn text_content(role: &str, text: &str) -> Option<pb::Content> {
    Some(pb::Content {
        role: role.into(),
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::Text(text.into())),
            ..Default::default()
        }],
    })
}

fn artifact_ref(user: &str, file: &str) -> Option<pb::ArtifactRef> {
    Some(pb::ArtifactRef {
        app_name: "assistant".into(),
        user_id: user.into(),
        session_id: "s".into(),
        file_name: file.into(),
    })
}

/// The `grpc-encoding` a response's metadata names ("" for none).
fn encoding_of(metadata: &tonic::metadata::MetadataMap) -> String {
    metadata
        .get("grpc-encoding")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// Every service of the all-in-one server, called by clients that compress what they
/// send and accept compressed answers: each request arrives whole (the server stores and
/// returns it), streamed requests included (an upload's chunks; the first message of a
/// watch, an upload and a run, which the server reads before its handler does to count
/// the user's streams), and each answer above the threshold comes back compressed in the
/// client's encoding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_takes_compressed_requests_and_compresses_its_answers() {
    let server = InProcessServer::all_in_one(&["--agents", AGENTS]).await;
    let channel = server.channel().await;
    for encoding in ENCODINGS {
        let name = encoding.to_string();
        let user = format!("u-{name}");
        let state_text = long_text(&format!("state in {name}"));

        // SessionService: unary both ways, then a watch (server streaming).
        let mut sessions = SessionServiceClient::new(channel.clone())
            .send_compressed(encoding)
            .accept_compressed(encoding);
        sessions
            .create_session(pb::CreateSessionRequest {
                app_name: "assistant".into(),
                user_id: user.clone(),
                session_id: "s".into(),
                state: Some(adk_grpc_proto::ordered::Struct::from([(
                    "notes".to_string(),
                    string_value(state_text.clone()),
                )])),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: CreateSession: {e:?}"));
        let event_text = long_text(&format!("event in {name}"));
        let appended = sessions
            .append_event(pb::AppendEventRequest {
                app_name: "assistant".into(),
                user_id: user.clone(),
                session_id: "s".into(),
                event: Some(pb::Event {
                    author: "user".into(),
                    content: text_content("user", &event_text),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: AppendEvent: {e:?}"))
            .into_inner();
        let got = sessions
            .get_session(pb::GetSessionRequest {
                app_name: "assistant".into(),
                user_id: user.clone(),
                session_id: "s".into(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: GetSession: {e:?}"));
        assert_eq!(encoding_of(got.metadata()), name, "GetSession's answer is compressed");
        let session = got.into_inner();
        let stored = session.state.as_ref().and_then(|s| s.get("notes")).cloned();
        assert_eq!(stored, Some(string_value(state_text)), "{name}: the state came through");
        assert_eq!(session.events.len(), 1, "{name}");
        assert_eq!(
            text_of(&session.events[0]),
            event_text,
            "{name}: the event came through"
        );
        let watch = sessions
            .watch_session(pb::WatchSessionRequest {
                app_name: "assistant".into(),
                user_id: user.clone(),
                session_id: "s".into(),
                after_sequence: Some(0),
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: WatchSession: {e:?}"));
        assert_eq!(encoding_of(watch.metadata()), name);
        let mut watch = watch.into_inner();
        let watched = tokio::time::timeout(Duration::from_secs(10), watch.message())
            .await
            .expect("the watch sends the stored event")
            .unwrap_or_else(|e| panic!("{name}: watch: {e:?}"))
            .expect("an event");
        assert_eq!(watched.id, appended.id, "{name}");
        assert_eq!(text_of(&watched), event_text, "{name}");
        drop(watch);

        // ArtifactService: SaveArtifact/LoadArtifact, then UploadArtifact (client streaming)
        // and DownloadArtifact (server streaming).
        let mut artifacts = ArtifactServiceClient::new(channel.clone())
            .send_compressed(encoding)
            .accept_compressed(encoding);
        let saved_text = long_text(&format!("artifact in {name}"));
        artifacts
            .save_artifact(pb::SaveArtifactRequest {
                r#ref: artifact_ref(&user, "notes.txt"),
                part: Some(pb::Part {
                    kind: Some(pb::part::Kind::Text(saved_text.clone())),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: SaveArtifact: {e:?}"));
        let loaded = artifacts
            .load_artifact(pb::LoadArtifactRequest {
                r#ref: artifact_ref(&user, "notes.txt"),
                version: None,
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: LoadArtifact: {e:?}"));
        assert_eq!(encoding_of(loaded.metadata()), name);
        let part = loaded.into_inner().part.and_then(|p| p.kind);
        assert_eq!(part, Some(pb::part::Kind::Text(saved_text)), "{name}");
        let chunks: Vec<Vec<u8>> = (0..3).map(|i| long_text(&format!("chunk {i}")).into_bytes()).collect();
        let header = pb::UploadArtifactRequest {
            message: Some(UploadMessage::Header(pb::UploadHeader {
                r#ref: artifact_ref(&user, "upload.bin"),
                mime_type: "application/octet-stream".into(),
                ..Default::default()
            })),
        };
        let messages: Vec<_> = std::iter::once(header)
            .chain(chunks.iter().map(|chunk| pb::UploadArtifactRequest {
                message: Some(UploadMessage::Chunk(chunk.clone())),
            }))
            .collect();
        artifacts
            .upload_artifact(tokio_stream::iter(messages))
            .await
            .unwrap_or_else(|e| panic!("{name}: UploadArtifact: {e:?}"));
        let mut download = artifacts
            .download_artifact(pb::DownloadArtifactRequest {
                r#ref: artifact_ref(&user, "upload.bin"),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: DownloadArtifact: {e:?}"))
            .into_inner();
        let mut downloaded = Vec::new();
        while let Some(reply) = download
            .message()
            .await
            .unwrap_or_else(|e| panic!("{name}: download: {e:?}"))
        {
            if let Some(pb::download_artifact_response::Message::Chunk(bytes)) = reply.message {
                downloaded.extend(bytes);
            }
        }
        assert!(
            downloaded == chunks.concat(),
            "{name}: the upload came back byte for byte"
        );

        // MemoryService.
        let mut memory = MemoryServiceClient::new(channel.clone())
            .send_compressed(encoding)
            .accept_compressed(encoding);
        memory
            .add_session_to_memory(pb::AddSessionToMemoryRequest {
                app_name: "assistant".into(),
                user_id: user.clone(),
                session_id: "s".into(),
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: AddSessionToMemory: {e:?}"));
        let found = memory
            .search_memory(pb::SearchMemoryRequest {
                app_name: "assistant".into(),
                user_id: user.clone(),
                query: "quick fox".into(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: SearchMemory: {e:?}"))
            .into_inner();
        assert_eq!(found.memories.len(), 1, "{name}: the appended event is remembered");

        // AgentRunner.Run (server streaming): the mock model echoes the message.
        let mut runner = AgentRunnerClient::new(channel.clone())
            .send_compressed(encoding)
            .accept_compressed(encoding);
        let said = long_text(&format!("run in {name}"));
        let (events, status) = run_to_end(
            &mut runner,
            pb::RunRequest {
                app_name: "assistant".into(),
                user_id: user.clone(),
                session_id: "run".into(),
                new_message: text_content("user", &said),
                create_session: true,
                ..Default::default()
            },
        )
        .await;
        assert!(status.is_none(), "{name}: Run: {status:?}");
        let last = events.last().map(text_of).unwrap_or_default();
        assert_eq!(last, format!("You said: {said}"), "{name}");

        // The A2A service: the same app as an A2A agent.
        let mut agent = A2aServiceClient::new(channel.clone())
            .send_compressed(encoding)
            .accept_compressed(encoding);
        let asked = long_text(&format!("a2a in {name}"));
        let reply = agent
            .send_message(a2a::SendMessageRequest {
                tenant: "assistant".into(),
                message: Some(a2a::Message {
                    message_id: format!("m-{name}"),
                    role: a2a::Role::User as i32,
                    parts: vec![a2a::Part {
                        content: Some(a2a::part::Content::Text(asked.clone())),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: SendMessage: {e:?}"))
            .into_inner();
        assert!(
            format!("{reply:?}").contains(&format!("You said: {asked}")),
            "{name}: the agent answered the whole message"
        );

        // grpc.health.v1, served by tonic-health behind the same layers.
        let health = HealthClient::new(channel.clone())
            .send_compressed(encoding)
            .accept_compressed(encoding)
            .check(HealthCheckRequest { service: String::new() })
            .await
            .unwrap_or_else(|e| panic!("{name}: Health/Check: {e:?}"));
        assert_eq!(health.into_inner().status, 1, "{name}: SERVING");
    }
}

fn get_session(session: &str) -> Vec<u8> {
    frame(
        0,
        &pb::GetSessionRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: session.into(),
            ..Default::default()
        }
        .encode_to_vec(),
    )
}

/// A response message is compressed when the client accepts an encoding and the message
/// is at least `--compression-min-bytes` (1024 by default) long, and then only; with
/// `--compression-min-bytes off` never. A request in an encoding the server lacks is
/// UNIMPLEMENTED with the `grpc-accept-encoding` it has; a compressed flag without a
/// `grpc-encoding` is the client's error, INVALID_ARGUMENT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_compressed_from_the_threshold_on_and_only_for_clients_that_accept() {
    let server = InProcessServer::all_in_one(&[]).await;
    let channel = server.channel().await;
    let mut sessions = SessionServiceClient::new(channel.clone());
    for (id, notes) in [("small", "short".to_string()), ("big", long_text("big"))] {
        sessions
            .create_session(pb::CreateSessionRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                session_id: id.into(),
                state: Some(adk_grpc_proto::ordered::Struct::from([(
                    "notes".to_string(),
                    string_value(notes),
                )])),
                ..Default::default()
            })
            .await
            .expect("CreateSession");
    }
    let path = "/adk.v1.SessionService/GetSession";
    for (accept, encoding) in [
        ("identity,deflate,gzip", "gzip"),
        ("gzip, br", "gzip"),
        ("deflate", "deflate"),
        ("gzip,zstd", "zstd"),
    ] {
        let small = raw_call(
            &channel,
            path,
            &[("grpc-accept-encoding", accept)],
            get_session("small"),
        )
        .await;
        assert_eq!(small.status.code(), Code::Ok, "{:?}", small.status);
        assert_eq!(small.header("grpc-encoding"), encoding, "{accept}");
        let [(flag, bytes)] = small.messages.as_slice() else {
            panic!("one message")
        };
        assert!(
            *flag == 0 && bytes.len() < 1024,
            "{accept}: a small answer goes as it is"
        );
        let big = raw_call(&channel, path, &[("grpc-accept-encoding", accept)], get_session("big")).await;
        assert_eq!(big.status.code(), Code::Ok, "{:?}", big.status);
        let [(flag, bytes)] = big.messages.as_slice() else {
            panic!("one message")
        };
        assert_eq!(*flag, 1, "{accept}: a big answer is compressed");
        assert!(bytes.len() < WORDS.len() * 400 / 10, "{accept}: {} bytes", bytes.len());
    }
    // A client that accepts nothing (or only what the server lacks) gets it plain.
    for headers in [&[][..], &[("grpc-accept-encoding", "identity, br")][..]] {
        let big = raw_call(&channel, path, headers, get_session("big")).await;
        assert_eq!(big.header("grpc-encoding"), "", "{headers:?}");
        assert!(big.messages.iter().all(|(flag, _)| *flag == 0), "{headers:?}");
    }
    // An encoding the server does not have.
    let snappy = raw_call(&channel, path, &[("grpc-encoding", "snappy")], get_session("big")).await;
    assert_eq!(snappy.status.code(), Code::Unimplemented, "{:?}", snappy.status);
    assert!(snappy.status.message().contains("snappy"), "{:?}", snappy.status);
    assert!(
        snappy.header("grpc-accept-encoding").contains("gzip"),
        "{:?}",
        snappy.headers
    );
    // A compressed flag in a call that names no encoding (on a streaming method, whose first
    // message the server reads before its handler, and on a unary one).
    let flagged = [&[1u8][..], &get_session("big")[1..]].concat();
    for path in [path, "/adk.v1.SessionService/WatchSession"] {
        let reply = raw_call(&channel, path, &[], flagged.clone()).await;
        assert_eq!(reply.status.code(), Code::InvalidArgument, "{path}: {:?}", reply.status);
        assert!(
            reply.status.message().contains("compressed"),
            "{path}: {:?}",
            reply.status
        );
    }
    drop(server);

    let server = InProcessServer::all_in_one(&["--compression-min-bytes", "off"]).await;
    let channel = server.channel().await;
    SessionServiceClient::new(channel.clone())
        .create_session(pb::CreateSessionRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "big".into(),
            state: Some(adk_grpc_proto::ordered::Struct::from([(
                "notes".to_string(),
                string_value(long_text("big")),
            )])),
            ..Default::default()
        })
        .await
        .expect("CreateSession");
    let big = raw_call(&channel, path, &[("grpc-accept-encoding", "gzip")], get_session("big")).await;
    assert_eq!(big.status.code(), Code::Ok, "{:?}", big.status);
    assert_eq!(big.header("grpc-encoding"), "", "off: nothing is compressed");
    assert!(big.messages.iter().all(|(flag, _)| *flag == 0));
    // Compressed requests are still taken.
    let mut client = SessionServiceClient::new(channel).send_compressed(CompressionEncoding::Gzip);
    client
        .get_session(pb::GetSessionRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "big".into(),
            ..Default::default()
        })
        .await
        .expect("a gzip request with response compression off");
}

/// grpcurl has no flag to compress what it sends, and asks for no compressed answer
/// (it sends no `grpc-accept-encoding` the server has): to it the server answers as
/// before, uncompressed. Given `-H 'grpc-accept-encoding: gzip'` it gets the answer (and
/// the reflection answers before it) gzip-compressed, and reads it whole: counted on the
/// wire through a relay, the bytes it receives shrink to a fraction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcurl_reads_answers_compressed_when_it_asks_and_plain_otherwise() {
    let server = InProcessServer::all_in_one(&[]).await;
    let notes = format!("for grpcurl: {}", WORDS.repeat(4000));
    SessionServiceClient::new(server.channel().await)
        .create_session(pb::CreateSessionRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            state: Some(adk_grpc_proto::ordered::Struct::from([(
                "notes".to_string(),
                string_value(notes.clone()),
            )])),
            ..Default::default()
        })
        .await
        .expect("CreateSession");
    let mut received = Vec::new();
    for extra in [&[][..], &["-H", "grpc-accept-encoding: gzip"][..]] {
        let (port, relayed) = relay_one_connection(server.port()).await;
        let address = format!("127.0.0.1:{port}");
        let request = r#"{"app_name": "app", "user_id": "u", "session_id": "s"}"#;
        let mut args = vec!["-plaintext", "-d", request];
        args.extend(extra);
        args.extend([address.as_str(), "adk.v1.SessionService/GetSession"]);
        let output = tokio::process::Command::new("grpcurl")
            .args(&args)
            .output()
            .await
            .expect("grpcurl on PATH (the README's test command installs it)");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "grpcurl {extra:?}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let reply: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
        assert_eq!(
            reply["state"]["notes"],
            serde_json::Value::String(notes.clone()),
            "{extra:?}"
        );
        let (_, to_grpcurl) = tokio::time::timeout(Duration::from_secs(10), relayed)
            .await
            .expect("the connection ends with grpcurl")
            .expect("the relay");
        received.push(to_grpcurl);
    }
    println!(
        "bytes grpcurl received: {received:?} (plain, gzip) for {} bytes of notes",
        notes.len()
    );
    assert!(received[0] > notes.len() as u64, "plain: {received:?}");
    assert!(
        received[1] > 0 && received[1] < notes.len() as u64 / 4,
        "gzip: {received:?}"
    );
}

/// A port that relays its first connection to `port`; the task ends with the bytes
/// relayed each way (to the server, to the client) once both sides are done (a reset
/// ends a direction too: what was relayed until then counts).
async fn relay_one_connection(port: u16) -> (u16, tokio::task::JoinHandle<(u64, u64)>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    async fn pump(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf) -> u64 {
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0;
        while let Ok(n @ 1..) = from.read(&mut buf).await {
            if to.write_all(&buf[..n]).await.is_err() {
                break;
            }
            total += n as u64;
        }
        let _ = to.shutdown().await;
        total
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let relay_port = listener.local_addr().expect("address").port();
    let relayed = tokio::spawn(async move {
        let (client, _) = listener.accept().await.expect("grpcurl connects");
        let server = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect to the server");
        let ((client_read, client_write), (server_read, server_write)) = (client.into_split(), server.into_split());
        tokio::join!(pump(client_read, server_write), pump(server_read, client_write))
    });
    (relay_port, relayed)
}
