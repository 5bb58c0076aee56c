//! `adk-artifact-server` end to end: the real binary, a real redis-server (and a
//! real 3-node Redis Cluster), real gRPC clients — the typed `RemoteArtifactService`
//! and the raw generated client for what no typed client would send.

use adk_grpc_core::artifact::{DEFAULT_CHUNK_BYTES, LoadRequest, UploadRequest, VersionsRequest};
use adk_grpc_core::{AdkError, ArtifactService, Part};
use adk_grpc_e2e::{ArtifactStack, connect_artifacts, noise_sha256, noise_stream, sha256_of, spawn_artifact_server};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_proto::v1::download_artifact_response::Message as DownloadMessage;
use adk_grpc_proto::v1::upload_artifact_request::Message as UploadMessage;
use adk_grpc_testkit::artifact_conformance::ArtifactLimits;
use adk_grpc_testkit::{Fixture, RedisServer, ServiceProcess, Shared, eventually, shared, unique_prefix};
use futures::StreamExt;
use std::time::Duration;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::Channel;

const MIB: u64 = 1024 * 1024;

/// Small limits keep the conformance suite's oversized and multi-chunk cases quick over
/// gRPC (the defaults would send 256 MiB to refuse one upload). The server flags below
/// say the same.
const CONFORMANCE_LIMITS: ArtifactLimits = ArtifactLimits {
    max_artifact_bytes: 2 * MIB,
    chunk_bytes: 64 * 1024,
};
const CONFORMANCE_ARGS: [&str; 4] = ["--max-artifact-bytes", "2097152", "--artifact-chunk-bytes", "65536"];

fn upload_req(app: &str, file_name: &str, mime_type: &str) -> UploadRequest {
    UploadRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: "s".into(),
        file_name: file_name.into(),
        mime_type: mime_type.into(),
        ..Default::default()
    }
}

fn load_req(app: &str, file_name: &str) -> LoadRequest {
    LoadRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: "s".into(),
        file_name: file_name.into(),
        version: None,
    }
}

async fn versions(client: &dyn ArtifactService, app: &str, file_name: &str) -> Vec<i64> {
    let req = VersionsRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: "s".into(),
        file_name: file_name.into(),
    };
    client.versions(req).await.expect("versions").versions
}

fn artifact_ref(app: &str, file_name: &str) -> Option<pb::ArtifactRef> {
    Some(pb::ArtifactRef {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: "s".into(),
        file_name: file_name.into(),
    })
}

async fn raw_client(endpoint: String) -> ArtifactServiceClient<Channel> {
    ArtifactServiceClient::connect(endpoint).await.expect("raw client")
}

/// Every `adk:*` key in the test's own Redis, by SCAN (never KEYS on a real server).
async fn adk_keys(redis: &RedisServer) -> Vec<String> {
    let mut connection = redis.connection().await;
    let mut keys = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("adk:*")
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut connection)
            .await
            .expect("SCAN");
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}

/// Waits up to 10 s for `check` (named `what`) to hold over the `adk:*` keys, and
/// returns them; fails naming the last keys seen otherwise.
async fn wait_for_keys(redis: &RedisServer, what: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    eventually(Duration::from_secs(10), || async {
        let keys = adk_keys(redis).await;
        if check(&keys) {
            Ok(keys)
        } else {
            Err(format!("{what}: {keys:?}"))
        }
    })
    .await
}

fn header_message(header: pb::UploadHeader) -> pb::UploadArtifactRequest {
    pb::UploadArtifactRequest {
        message: Some(UploadMessage::Header(header)),
    }
}

fn chunk_message(bytes: Vec<u8>) -> pb::UploadArtifactRequest {
    pb::UploadArtifactRequest {
        message: Some(UploadMessage::Chunk(bytes)),
    }
}

mod grpc_client_conforms_against_the_real_server_on_redis {
    use super::*;
    static SERVER: Shared<ServiceProcess> = Shared::new();
    adk_grpc_testkit::artifact_conformance_tests!({
        let redis = shared::redis().await;
        let server = SERVER
            .get_or_start({
                let url = redis.url();
                || async move { spawn_artifact_server(&url, &CONFORMANCE_ARGS).await }
            })
            .await;
        let client = connect_artifacts(&server).await;
        client
            .ping()
            .await
            .expect("the server reports SERVING while Redis answers");
        Fixture::artifacts(client, CONFORMANCE_LIMITS)
            .keeping(server)
            .keeping(redis)
    });
}

mod grpc_client_conforms_against_the_real_server_on_redis_cluster {
    use super::*;
    static SERVER: Shared<ServiceProcess> = Shared::new();
    adk_grpc_testkit::artifact_conformance_tests!({
        let cluster = shared::cluster().await;
        let server = SERVER
            .get_or_start({
                let url = cluster.url();
                || async move { spawn_artifact_server(&url, &CONFORMANCE_ARGS).await }
            })
            .await;
        Fixture::artifacts(connect_artifacts(&server).await, CONFORMANCE_LIMITS)
            .keeping(server)
            .keeping(cluster)
    });
}

/// 64 MiB up and down in a stream: the same SHA-256 comes back, the server's peak
/// memory stays far below the artifact's size, and a unary load is refused from
/// the metadata without the server reading the bytes.
#[tokio::test]
async fn a_64_mib_artifact_streams_both_ways_in_bounded_server_memory() {
    const SIZE: u64 = 64 * MIB;
    // Larger than the client's 1 MiB messages, so the client's re-cutting is exercised too.
    const SOURCE_CHUNK: usize = 4 * MIB as usize;
    const SEED: u64 = 64;
    let stack = ArtifactStack::start(&[]).await;
    let client = stack.client().await;
    let app = unique_prefix("big");
    let idle_kib = stack.server.rss_kib().expect("server running");

    let mut upload = upload_req(&app, "big.bin", "application/octet-stream");
    upload.size_hint = Some(SIZE);
    let saved = client
        .upload(upload, noise_stream(SIZE, SOURCE_CHUNK, SEED))
        .await
        .unwrap_or_else(|err| panic!("upload: {err}\n{}", stack.server.tail_log(20)));
    assert_eq!(saved.version, 1);

    let err = raw_client(stack.server.endpoint())
        .await
        .load_artifact(pb::LoadArtifactRequest {
            r#ref: artifact_ref(&app, "big.bin"),
            version: None,
        })
        .await
        .expect_err("64 MiB do not fit in one message");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(
        err.message().contains("DownloadArtifact") && err.message().contains(&SIZE.to_string()),
        "{}",
        err.message()
    );

    let (metadata, chunks) = client
        .download(load_req(&app, "big.bin"), DEFAULT_CHUNK_BYTES)
        .await
        .expect("download");
    assert_eq!((metadata.size_bytes, metadata.version), (SIZE, 1));
    let (len, digest) = sha256_of(chunks).await.expect("download stream");
    assert_eq!(len, SIZE);
    assert_eq!(
        digest,
        noise_sha256(SIZE, SOURCE_CHUNK, SEED),
        "the same bytes came back"
    );

    let peak_kib = stack.server.peak_rss_kib().expect("server running");
    println!(
        "adk-artifact-server memory around a {} MiB upload + download: idle RSS {:.1} MiB, peak RSS (VmHWM) {:.1} MiB",
        SIZE / MIB,
        idle_kib as f64 / 1024.0,
        peak_kib as f64 / 1024.0
    );
    assert!(
        peak_kib < 48 * 1024,
        "the server held too much of the artifact: peak RSS {peak_kib} KiB for a {SIZE}-byte artifact"
    );
}

/// Past `--max-artifact-bytes`: RESOURCE_EXHAUSTED naming the limit, whether the size is
/// announced, only discovered from the bytes, or arrives in one unary message; nothing
/// partial is left, neither a version nor any key in Redis.
#[tokio::test]
async fn oversized_uploads_are_refused_and_leave_nothing() {
    const LIMIT: u64 = MIB;
    let stack = ArtifactStack::start(&["--max-artifact-bytes", &LIMIT.to_string()]).await;
    let client = stack.client().await;
    let mut raw = raw_client(stack.server.endpoint()).await;
    let app = unique_prefix("oversized");
    let too_big = 2 * LIMIT;

    let mut announced = upload_req(&app, "big.bin", "application/octet-stream");
    announced.size_hint = Some(too_big);
    let unannounced = upload_req(&app, "big.bin", "application/octet-stream");
    for (what, upload) in [("announced size", announced), ("bytes only", unannounced)] {
        let err = client
            .upload(upload, noise_stream(too_big, 256 * 1024, 1))
            .await
            .expect_err(what);
        assert_eq!(err.code(), Code::ResourceExhausted, "{what}: {err}");
        assert!(
            err.to_string().contains(&LIMIT.to_string()),
            "{what}: names the limit: {err}"
        );
    }
    let err = raw
        .save_artifact(pb::SaveArtifactRequest {
            r#ref: artifact_ref(&app, "big.bin"),
            part: Some(pb::Part::from(&Part::inline_data("x/y", vec![7; LIMIT as usize + 1]))),
            version: None,
            custom_metadata: None,
        })
        .await
        .expect_err("unary save over the limit");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains(&LIMIT.to_string()), "{}", err.message());

    assert_eq!(
        versions(&client, &app, "big.bin").await,
        Vec::<i64>::new(),
        "no version"
    );
    wait_for_keys(&stack.redis, "no artifact keys left in Redis", <[String]>::is_empty).await;

    // Exactly the limit is allowed.
    let saved = client
        .upload(
            upload_req(&app, "big.bin", "application/octet-stream"),
            noise_stream(LIMIT, 100_000, 2),
        )
        .await
        .expect("exactly the limit fits");
    assert_eq!(saved.version, 1);
}

/// A client that goes away mid-upload (the call dropped, or its own chunk stream
/// failing) leaves no version, and the pending chunks it had sent are removed.
#[tokio::test]
async fn interrupted_uploads_leave_no_version_and_no_orphan_chunks() {
    let stack = ArtifactStack::start(&[]).await;
    let client = stack.client().await;
    let app = unique_prefix("interrupted");

    // The raw client's call is dropped while the server is storing its chunks.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut raw = raw_client(stack.server.endpoint()).await;
    let call = tokio::spawn(async move { raw.upload_artifact(ReceiverStream::new(rx)).await });
    let header = pb::UploadHeader {
        r#ref: artifact_ref(&app, "dropped.bin"),
        mime_type: "application/octet-stream".into(),
        ..Default::default()
    };
    tx.send(header_message(header)).await.expect("send header");
    let mut noise = adk_grpc_e2e::Noise::new(3);
    for _ in 0..3 {
        tx.send(chunk_message(noise.bytes(MIB as usize)))
            .await
            .expect("send chunk");
    }
    wait_for_keys(&stack.redis, "the server stores chunks while they arrive", |keys| {
        !keys.is_empty()
    })
    .await;
    call.abort();
    assert!(
        call.await.is_err_and(|err| err.is_cancelled()),
        "the call was dropped mid-upload"
    );

    // The typed client's chunk stream fails after 3 MiB: the call is cancelled and the error returned.
    let failing = noise_stream(3 * MIB, MIB as usize, 4)
        .chain(futures::stream::once(async {
            Err(AdkError::Unavailable("the disk we read from went away".into()))
        }))
        .boxed();
    let err = client
        .upload(upload_req(&app, "failed.bin", "application/octet-stream"), failing)
        .await
        .expect_err("a failing source fails the upload");
    assert!(err.to_string().contains("the disk we read from went away"), "{err}");

    for name in ["dropped.bin", "failed.bin"] {
        assert_eq!(
            versions(&client, &app, name).await,
            Vec::<i64>::new(),
            "{name}: no version"
        );
    }
    wait_for_keys(&stack.redis, "no orphan chunk keys", <[String]>::is_empty).await;
    drop(tx);
}

/// With a small `--max-message-bytes`, unary loads over it are refused with a pointer to
/// DownloadArtifact, and downloads cut their chunks to fit in a message.
#[tokio::test]
async fn small_message_limits_cut_download_chunks_and_refuse_large_unary_loads() {
    const LIMIT: usize = 64 * 1024;
    const SIZE: u64 = 200 * 1024;
    let stack = ArtifactStack::start(&["--max-message-bytes", &LIMIT.to_string()]).await;
    let client = stack.client().await.with_max_message_bytes(LIMIT);
    let app = unique_prefix("small-messages");
    client
        .upload(
            upload_req(&app, "f.bin", "application/octet-stream"),
            noise_stream(SIZE, 150_000, 5),
        )
        .await
        .expect("upload in messages that fit");

    let mut raw = raw_client(stack.server.endpoint()).await;
    let err = raw
        .load_artifact(pb::LoadArtifactRequest {
            r#ref: artifact_ref(&app, "f.bin"),
            version: Some(1),
        })
        .await
        .expect_err("over the message limit");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("DownloadArtifact"), "{}", err.message());

    let mut stream = raw
        .download_artifact(pb::DownloadArtifactRequest {
            r#ref: artifact_ref(&app, "f.bin"),
            version: None,
            chunk_size: 0,
        })
        .await
        .expect("download")
        .into_inner();
    let first = stream.message().await.expect("first message").expect("metadata");
    assert!(matches!(first.message, Some(DownloadMessage::Metadata(ref m)) if m.size_bytes == SIZE));
    let mut total = 0;
    while let Some(message) = stream.message().await.expect("chunk") {
        let Some(DownloadMessage::Chunk(bytes)) = message.message else {
            panic!("only chunks after the metadata")
        };
        assert!(
            bytes.len() < LIMIT,
            "a chunk of {} bytes fits in a message",
            bytes.len()
        );
        total += bytes.len() as u64;
    }
    assert_eq!(total, SIZE);
    let (_, chunks) = client.download(load_req(&app, "f.bin"), 0).await.expect("download");
    assert_eq!(
        sha256_of(chunks).await.expect("chunks").1,
        noise_sha256(SIZE, 150_000, 5)
    );
}

/// Raw protobuf requests that no typed Rust client would send: each gets its status,
/// naming the problem, and the stored artifacts are unchanged afterwards.
#[tokio::test]
async fn malformed_requests_get_clear_statuses_and_change_nothing() {
    let stack = ArtifactStack::start(&[]).await;
    let client = stack.client().await;
    let app = unique_prefix("bad");
    let mut raw = raw_client(stack.server.endpoint()).await;
    let saved = raw
        .save_artifact(pb::SaveArtifactRequest {
            r#ref: artifact_ref(&app, "keep.txt"),
            part: Some(pb::Part::from(&Part::text_part("kept"))),
            version: None,
            custom_metadata: None,
        })
        .await
        .expect("save");
    assert_eq!(saved.into_inner().version, 1);

    let save = |file_name: &str, part: Option<Part>, version: Option<i64>| pb::SaveArtifactRequest {
        r#ref: artifact_ref(&app, file_name),
        part: part.as_ref().map(pb::Part::from),
        version,
        custom_metadata: None,
    };
    let text = || Some(Part::text_part("x"));
    let long = "n".repeat(1025);
    let mut cases: Vec<(&str, pb::SaveArtifactRequest, Code, &str)> = vec![
        ("empty name", save("", text(), None), Code::InvalidArgument, "file_name"),
        ("'..' name", save("..", text(), None), Code::InvalidArgument, "'..'"),
        (
            "'..' segment",
            save("a/../b", text(), None),
            Code::InvalidArgument,
            "'..'",
        ),
        (
            "absolute name",
            save("/etc/passwd", text(), None),
            Code::InvalidArgument,
            "absolute",
        ),
        ("NUL in name", save("a\0b", text(), None), Code::InvalidArgument, "NUL"),
        (
            "name too long",
            save(&long, text(), None),
            Code::InvalidArgument,
            "longer than 1024",
        ),
        (
            "file_data part without a URI",
            save("f", Some(Part::file_data("image/png", "")), None),
            Code::InvalidArgument,
            "part.file_data.file_uri is required",
        ),
        (
            "artifact reference to another user",
            save(
                "f",
                Some(Part::file_data(
                    "",
                    format!("artifact://apps/{app}/users/someone-else/artifacts/user:f/versions/1"),
                )),
                None,
            ),
            Code::InvalidArgument,
            "part.file_data.file_uri",
        ),
        (
            "function_call part",
            save(
                "f",
                Some(Part::function_call("tool", serde_json::json!({}), None)),
                None,
            ),
            Code::InvalidArgument,
            "text, inline_data or file_data",
        ),
        (
            "inline data without a MIME type",
            save("f", Some(Part::inline_data("", vec![1])), None),
            Code::InvalidArgument,
            "mime_type",
        ),
        (
            "version 0",
            save("f", text(), Some(0)),
            Code::InvalidArgument,
            "version",
        ),
        (
            "negative version",
            save("f", text(), Some(-3)),
            Code::InvalidArgument,
            "version",
        ),
        (
            "missing part",
            save("f", None, None),
            Code::InvalidArgument,
            "part is required",
        ),
        (
            "existing version",
            save("keep.txt", text(), Some(1)),
            Code::AlreadyExists,
            "",
        ),
    ];
    cases.push((
        "missing ref",
        pb::SaveArtifactRequest {
            r#ref: None,
            ..save("f", text(), None)
        },
        Code::InvalidArgument,
        "ref is required",
    ));
    cases.push((
        "bad app name",
        pb::SaveArtifactRequest {
            r#ref: Some(pb::ArtifactRef {
                app_name: "a\nb".into(),
                ..artifact_ref(&app, "f").expect("ref")
            }),
            ..save("f", text(), None)
        },
        Code::InvalidArgument,
        "app_name",
    ));
    for (name, request, code, needle) in cases {
        let err = raw.save_artifact(request).await.expect_err(name);
        assert_eq!(err.code(), code, "{name}: {err:?}");
        assert!(
            err.message().contains(needle),
            "{name}: {:?} should mention {needle:?}",
            err.message()
        );
    }

    // Reads, deletes and listings validate the same way.
    let load = |version| pb::LoadArtifactRequest {
        r#ref: artifact_ref(&app, "keep.txt"),
        version,
    };
    for (name, request, code) in [
        ("load version 0", load(Some(0)), Code::InvalidArgument),
        ("load negative version", load(Some(-1)), Code::InvalidArgument),
        ("load missing version", load(Some(9)), Code::NotFound),
        (
            "load without ref",
            pb::LoadArtifactRequest {
                r#ref: None,
                version: None,
            },
            Code::InvalidArgument,
        ),
    ] {
        let err = raw.load_artifact(request).await.expect_err(name);
        assert_eq!(err.code(), code, "{name}: {err:?}");
    }
    let err = raw
        .download_artifact(pb::DownloadArtifactRequest {
            r#ref: artifact_ref(&app, "keep.txt"),
            version: Some(-1),
            chunk_size: 0,
        })
        .await
        .expect_err("download of version -1");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let err = raw
        .get_artifact_metadata(pb::GetArtifactMetadataRequest {
            r#ref: artifact_ref(&app, "a/../b"),
            version: None,
        })
        .await
        .expect_err("metadata of a bad name");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let err = raw
        .delete_artifact(pb::DeleteArtifactRequest {
            r#ref: artifact_ref(&app, "keep.txt"),
            version: Some(0),
        })
        .await
        .expect_err("delete version 0");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let err = raw
        .list_versions(pb::ListVersionsRequest { r#ref: None })
        .await
        .expect_err("versions without ref");
    assert!(err.message().contains("ref is required"), "{}", err.message());
    let err = raw
        .list_artifacts(pb::ListArtifactsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s\t..".into(),
        })
        .await
        .expect_err("bad session id");
    assert!(err.message().contains("session_id"), "{}", err.message());

    // Uploads: the header comes first, once, complete.
    let good_header = || pb::UploadHeader {
        r#ref: artifact_ref(&app, "up.bin"),
        mime_type: "application/octet-stream".into(),
        ..Default::default()
    };
    let upload_cases: Vec<(&str, Vec<pb::UploadArtifactRequest>, &str)> = vec![
        ("no messages", vec![], "the first message must be the header"),
        (
            "chunk before header",
            vec![chunk_message(b"x".to_vec()), header_message(good_header())],
            "the first message must be the header",
        ),
        (
            "empty first message",
            vec![pb::UploadArtifactRequest { message: None }],
            "the first message must be the header",
        ),
        (
            "header without MIME type",
            vec![
                header_message(pb::UploadHeader {
                    mime_type: String::new(),
                    ..good_header()
                }),
                chunk_message(b"x".to_vec()),
            ],
            "mime_type",
        ),
        (
            "header without ref",
            vec![header_message(pb::UploadHeader {
                r#ref: None,
                ..good_header()
            })],
            "ref is required",
        ),
        (
            "header with version 0",
            vec![header_message(pb::UploadHeader {
                version: Some(0),
                ..good_header()
            })],
            "version",
        ),
        (
            "second header",
            vec![
                header_message(good_header()),
                chunk_message(b"x".to_vec()),
                header_message(good_header()),
            ],
            "only the first message may be the header",
        ),
        (
            "message without content",
            vec![
                header_message(good_header()),
                pb::UploadArtifactRequest { message: None },
            ],
            "header or a chunk",
        ),
        (
            "text that is not UTF-8",
            vec![
                header_message(pb::UploadHeader {
                    mime_type: "text/plain".into(),
                    is_text: true,
                    ..good_header()
                }),
                chunk_message(vec![0xff, 0xfe]),
            ],
            "UTF-8",
        ),
    ];
    for (name, messages, needle) in upload_cases {
        let err = raw
            .upload_artifact(futures::stream::iter(messages))
            .await
            .expect_err(name);
        assert_eq!(err.code(), Code::InvalidArgument, "{name}: {err:?}");
        assert!(
            err.message().contains(needle),
            "{name}: {:?} should mention {needle:?}",
            err.message()
        );
    }

    let listed = raw
        .list_artifacts(pb::ListArtifactsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.file_names, ["keep.txt"], "nothing else was stored");
    assert_eq!(versions(&client, &app, "keep.txt").await, [1]);
    let loaded = client.load(load_req(&app, "keep.txt")).await.expect("load");
    assert_eq!(loaded.part, Part::text_part("kept"), "the stored artifact is unchanged");
}

/// A header's `size_bytes` is a promise: an upload that sends fewer bytes (truncated)
/// or more fails with INVALID_ARGUMENT naming both sizes, and stores nothing — no
/// version, no pending chunk in Redis.
#[tokio::test]
async fn an_upload_that_breaks_its_declared_size_fails_and_stores_nothing() {
    let stack = ArtifactStack::start(&CONFORMANCE_ARGS).await;
    let client = stack.client().await;
    let mut raw = raw_client(stack.server.endpoint()).await;
    let app = unique_prefix("declared");
    let chunk = CONFORMANCE_LIMITS.chunk_bytes as u64;
    // (declared, sent): the two cases, then bodies of several storage chunks.
    for (declared, sent) in [(100, 20), (10, 20), (chunk * 3, chunk * 2 + 1), (chunk, chunk * 3)] {
        let header = pb::UploadHeader {
            r#ref: artifact_ref(&app, "f.bin"),
            mime_type: "application/octet-stream".into(),
            size_bytes: Some(declared),
            ..Default::default()
        };
        let body: Vec<u8> = (0..sent).map(|i| (i % 251) as u8).collect();
        let mut messages = vec![header_message(header)];
        messages.extend(body.chunks(16 * 1024).map(|piece| chunk_message(piece.to_vec())));
        let err = raw
            .upload_artifact(futures::stream::iter(messages))
            .await
            .expect_err("a body of another size than declared");
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "declared {declared}, sent {sent}: {err:?}"
        );
        let message = err.message();
        assert!(
            message.contains(&format!("size_bytes {declared}")),
            "names the declared size: {message}"
        );
        if sent < declared {
            assert!(
                message.contains(&format!(" {sent} bytes")),
                "names the size sent: {message}"
            );
        }
        assert_eq!(versions(&client, &app, "f.bin").await, Vec::<i64>::new(), "no version");
        wait_for_keys(&stack.redis, "no pending chunk left in Redis", <[String]>::is_empty).await;
    }
}
