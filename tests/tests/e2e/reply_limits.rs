//! Replies from outside the runner read against their limits (issue "Limits that protect
//! the runner"): a real `adk-server` whose HTTP tools, hook and model (tests/limits/outside.py)
//! answer 200 MiB, without end, or slowly, ten runs of each at once. Each oversized reply
//! stops at its limit: a tool's is an error the model reads naming the tool and the limit,
//! a hook's a hook failure handled by its `on_failure`, a model's fails the call naming the
//! model. The server's peak memory stays within a stated bound over its idle size, it keeps
//! serving, and what it stored before is intact. Also: one channel runs hundreds of
//! concurrent runs on the default flags.

use adk_grpc_client::RemoteArtifactService;
use adk_grpc_core::ArtifactService;
use adk_grpc_core::artifact::LoadRequest;
use adk_grpc_e2e::runs::{self, text_of, user_text};
use adk_grpc_e2e::script_server::ScriptServer;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::ServiceProcess;
use futures::TryStreamExt;
use futures::future::join_all;
use tonic::Code;
use tonic::transport::Channel;

/// The test's limits, small so ten runs of each kind at once stay far below the bound.
const TOOL_LIMIT: usize = 256 * 1024;
const MODEL_LIMIT: usize = 1024 * 1024;
/// How far the server's peak memory may rise over its idle size while 60 runs meet
/// oversized, endless and slow replies: each holds at most about one reply under its
/// limit (10 × 1 MiB of model replies, 30 × 256 KiB of tool and hook replies, growing
/// buffers doubled), against the 470-640 MB one 200 MiB reply took before the limits.
const PEAK_BOUND_KIB: u64 = 64 * 1024;

struct Stack {
    outside: ScriptServer,
    server: ServiceProcess,
    _dir: tempfile::TempDir,
    _file: tempfile::NamedTempFile,
}

fn agents(outside: &str) -> String {
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{outside}/v1' }}
tools:
  huge: {{ kind: http, url: '{outside}/tool/huge', description: Answers 200 MiB. }}
  endless: {{ kind: http, url: '{outside}/tool/endless', description: Answers without end. }}
  slow: {{ kind: http, url: '{outside}/tool/slow', description: Answers after a second. }}
  ok: {{ kind: http, url: '{outside}/tool/ok', description: Answers at once. }}
  big: {{ kind: http, url: '{outside}/tool/two_mib', description: Answers 2 MiB., large_reply: artifact }}
  huge_saved: {{ kind: http, url: '{outside}/tool/huge', description: Answers 200 MiB., large_reply: artifact }}
hooks:
  heavy: {{ url: '{outside}/hook/huge', points: [before_tool] }}
  heavy_closed: {{ url: '{outside}/hook/huge', points: [before_tool], on_failure: fail_closed }}
apps:
  tools:
    root_agent: {{ name: worker, model: gpt, tools: [huge, endless, slow, ok] }}
  hooked:
    root_agent: {{ name: guarded, model: gpt, tools: [ok], hooks: [heavy] }}
  strict:
    root_agent: {{ name: strict, model: gpt, tools: [ok], hooks: [heavy_closed] }}
  saving:
    root_agent: {{ name: saver, model: gpt, tools: [big, huge_saved] }}
"
    )
}

impl Stack {
    async fn start(extra_args: &[&str]) -> Stack {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = ScriptServer::start("limits/outside.py", dir.path()).await;
        let file = runs::agents_file(&agents(&outside.url));
        let mut args = vec![
            "--store-url".to_string(),
            "memory://".to_string(),
            "--agents".to_string(),
            file.path().display().to_string(),
        ];
        args.extend(extra_args.iter().map(|arg| arg.to_string()));
        let server = ServiceProcess::spawn("adk-server", &args, &[]).await;
        Stack {
            outside,
            server,
            _dir: dir,
            _file: file,
        }
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(self.server.endpoint())
            .expect("endpoint")
            .connect()
            .await
            .expect("connect")
    }
}

/// One Run on `channel`: its events after the user's message, and how it ended.
async fn run(
    channel: &Channel,
    app: &str,
    user: &str,
    session: &str,
    message: &str,
) -> (Vec<pb::Event>, Option<tonic::Status>) {
    let mut client = AgentRunnerClient::new(channel.clone());
    runs::run_to_end(&mut client, runs::run_request(app, user, session, user_text(message))).await
}

fn last_text(events: &[pb::Event]) -> String {
    events
        .iter()
        .rev()
        .map(text_of)
        .find(|t| !t.is_empty())
        .unwrap_or_default()
}

#[tokio::test]
async fn oversized_endless_and_slow_replies_stop_at_their_limits_ten_at_once() {
    let tool_limit = TOOL_LIMIT.to_string();
    let model_limit = MODEL_LIMIT.to_string();
    let stack = Stack::start(&[
        "--max-tool-reply-bytes",
        &tool_limit,
        "--max-model-reply-bytes",
        &model_limit,
    ])
    .await;
    let channel = stack.channel().await;

    // Something stored before, to find intact after.
    let (before, failure) = run(&channel, "tools", "keeper", "kept", "call ok").await;
    assert!(failure.is_none(), "{failure:?}");
    let kept = runs::get_session(stack.server.endpoint(), "tools", "keeper", "kept").await;
    assert_eq!(last_text(&before), r#"heard: {"ok": true}"#);
    let idle = stack.server.rss_kib().expect("the server runs");

    let kinds = [
        ("tools", "call huge"),
        ("tools", "call endless"),
        ("tools", "call slow"),
        ("hooked", "call ok"),
        ("strict", "call ok"),
        ("tools", "huge reply"),
        ("tools", "endless reply"),
    ];
    let runs = kinds.iter().flat_map(|&(app, message)| {
        let channel = &channel;
        (0..10).map(move |i| async move {
            let user = format!("{}-{i}", message.replace(' ', "-"));
            (app, message, run(channel, app, &user, "s", message).await)
        })
    });
    let results = join_all(runs).await;
    let peak = stack.server.peak_rss_kib().expect("the server runs");

    let tool_error = format!("is longer than {TOOL_LIMIT} bytes, the limit of a reply (--max-tool-reply-bytes");
    for (app, message, (events, failure)) in &results {
        let heard = last_text(events);
        match (*app, *message) {
            ("tools", "call huge") => {
                assert!(failure.is_none(), "{failure:?}");
                assert!(heard.starts_with("heard: {\"error\": "), "{heard}");
                assert!(heard.contains("HTTP tool huge: the reply to POST "), "{heard}");
                assert!(
                    heard.contains("(209715212 bytes)") && heard.contains(&tool_error),
                    "{heard}"
                );
            }
            ("tools", "call endless") => {
                assert!(failure.is_none(), "{failure:?}");
                assert!(heard.contains("HTTP tool endless: the reply to POST "), "{heard}");
                assert!(heard.contains(&tool_error), "{heard}");
            }
            ("tools", "call slow") => {
                assert!(failure.is_none(), "{failure:?}");
                assert_eq!(heard, r#"heard: {"ok": "slow"}"#);
            }
            // fail_open: the hook's failure is logged and the tool runs.
            ("hooked", _) => {
                assert!(failure.is_none(), "{failure:?}");
                assert_eq!(heard, r#"heard: {"ok": true}"#);
            }
            // fail_closed: the hook's failure fails the run, naming the hook and the limit.
            ("strict", _) => {
                let status = failure.as_ref().expect("a fail_closed hook's failure ends the run");
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(
                    status.message().contains("hook heavy_closed (before_tool)"),
                    "{status:?}"
                );
                assert!(status.message().contains(&tool_error), "{status:?}");
            }
            (_, model_reply) => {
                let status = failure
                    .as_ref()
                    .unwrap_or_else(|| panic!("{model_reply}: the model call fails"));
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(
                    status.message().contains("openai (model fake-model): the reply"),
                    "{status:?}"
                );
                assert!(
                    status.message().contains(&format!(
                        "is longer than {MODEL_LIMIT} bytes, the limit of a reply (--max-model-reply-bytes"
                    )),
                    "{status:?}"
                );
            }
        }
    }
    eprintln!(
        "reply limits: idle VmRSS {idle} KiB, peak VmHWM {peak} KiB over 70 runs (+{} KiB)",
        peak.saturating_sub(idle)
    );
    assert!(
        peak < idle + PEAK_BOUND_KIB,
        "peak {peak} KiB is more than {PEAK_BOUND_KIB} KiB over the idle {idle} KiB"
    );

    // It keeps serving, and what it stored before is intact.
    let (after, failure) = run(&channel, "tools", "keeper", "later", "call ok").await;
    assert!(failure.is_none(), "{failure:?}");
    assert_eq!(last_text(&after), r#"heard: {"ok": true}"#);
    let still = runs::get_session(stack.server.endpoint(), "tools", "keeper", "kept").await;
    assert_eq!(still.events, kept.events);
    assert_eq!(still.state, kept.state);
    assert!(
        !stack.outside.calls("/tool/ok").is_empty(),
        "the tools the hooks let through ran"
    );
}

/// A backend calling for all its users through one channel is not refused at hundreds
/// of concurrent runs on the default flags (each run's model answers after a second).
#[tokio::test]
async fn one_channel_runs_three_hundred_concurrent_runs_on_the_default_flags() {
    const RUNS: usize = 300;
    let stack = Stack::start(&[]).await;
    let channel = stack.channel().await;
    let idle = stack.server.rss_kib().expect("the server runs");
    let started = std::time::Instant::now();
    let results = join_all((0..RUNS).map(|i| {
        let channel = &channel;
        async move { run(channel, "tools", &format!("user-{i}"), "s", "slow reply").await }
    }))
    .await;
    let took = started.elapsed();
    let peak = stack.server.peak_rss_kib().expect("the server runs");
    for (events, failure) in &results {
        assert!(failure.is_none(), "{failure:?}");
        assert_eq!(last_text(events), "fine: slow reply");
    }
    eprintln!(
        "{RUNS} concurrent runs on one channel: {took:?}, idle VmRSS {idle} KiB, peak VmHWM {peak} KiB \
         ({} KiB per run)",
        peak.saturating_sub(idle) / RUNS as u64
    );
    // Measured at about 100 KiB per run (debug build; BENCHMARKS.md): five times that is a leak.
    assert!(
        peak < idle + RUNS as u64 * 512,
        "peak {peak} KiB is more than 512 KiB per run over the idle {idle} KiB"
    );
}

/// What tests/limits/outside.py's /tool/two_mib answers, byte for byte.
fn two_mib_reply() -> Vec<u8> {
    let mut body = br#"{"data": ""#.to_vec();
    body.extend("0123456789abcdef".repeat(2 * 1024 * 1024 / 16).bytes());
    body.extend(br#""}"#);
    body
}

/// An HTTP tool with `large_reply: artifact` answering 2 MiB, eight times the limit of a
/// tool reply: the reply is saved as a session artifact with the exact bytes, the tool
/// event's artifact_delta names it, the model's next request carries the reference, and
/// the run goes on. A reply past the artifact limit is still an error the model reads.
#[tokio::test]
async fn a_large_reply_of_a_tool_that_saves_it_becomes_an_artifact_the_model_is_pointed_to() {
    const ARTIFACT_LIMIT: usize = 4 * 1024 * 1024;
    let tool_limit = TOOL_LIMIT.to_string();
    let artifact_limit = ARTIFACT_LIMIT.to_string();
    let stack = Stack::start(&[
        "--max-tool-reply-bytes",
        &tool_limit,
        "--max-artifact-bytes",
        &artifact_limit,
    ])
    .await;
    let channel = stack.channel().await;
    let reply = two_mib_reply();
    let idle = stack.server.rss_kib().expect("the server runs");

    let (events, failure) = run(&channel, "saving", "ann", "s1", "call big").await;
    assert!(failure.is_none(), "{failure:?}");
    let name = "big-call-big.json";
    let saved_in = events
        .iter()
        .find_map(|event| event.actions.as_ref()?.artifact_delta.get(name))
        .unwrap_or_else(|| panic!("no event's artifact_delta names {name}: {events:#?}"));
    assert_eq!(*saved_in, 1);
    // The model's next request had the reference as the tool's answer (it echoes its start).
    let heard = last_text(&events);
    assert!(heard.starts_with(r#"heard: {"artifact":"#), "{heard}");
    for field in [
        format!(r#""file_name": "{name}""#),
        r#""version": 1"#.to_string(),
        format!(r#""size_bytes": {}"#, reply.len()),
        r#""mime_type": "application/json""#.to_string(),
    ] {
        assert!(heard.contains(&field), "{field} in {heard}");
    }

    // The artifact holds the reply exactly as the tool sent it.
    let artifacts = RemoteArtifactService::connect(stack.server.endpoint())
        .await
        .expect("connect to the artifact service");
    let load = LoadRequest {
        app_name: "saving".into(),
        user_id: "ann".into(),
        session_id: "s1".into(),
        file_name: name.into(),
        version: None,
    };
    let (metadata, body) = artifacts.download(load, 0).await.expect("the saved reply");
    let bytes: Vec<u8> = body.try_concat().await.expect("its bytes");
    assert_eq!((metadata.version, metadata.mime_type.as_str()), (1, "application/json"));
    assert_eq!(metadata.size_bytes, reply.len() as u64);
    assert!(
        bytes == reply,
        "the artifact differs from the reply ({} bytes)",
        bytes.len()
    );

    // Ten at once: each reply is held while it is saved, and kept by the memory store.
    let saves = join_all((0..10).map(|i| {
        let channel = &channel;
        async move { run(channel, "saving", "ann", &format!("many-{i}"), "call big").await }
    }))
    .await;
    let peak = stack.server.peak_rss_kib().expect("the server runs");
    for (events, failure) in &saves {
        assert!(failure.is_none(), "{failure:?}");
        assert!(last_text(events).contains(name), "{}", last_text(events));
    }
    eprintln!(
        "large replies saved as artifacts: idle VmRSS {idle} KiB, peak VmHWM {peak} KiB over 11 saves of 2 MiB \
         (+{} KiB)",
        peak.saturating_sub(idle)
    );
    // Measured at about 5 MiB per save (the reply, the copies of a save, what the memory
    // store keeps): twice that is a reply buffered more often than it should be.
    assert!(
        peak < idle + 11 * 10 * 1024,
        "peak {peak} KiB is more than 10 MiB per save over the idle {idle} KiB"
    );

    // Past the artifact limit, the reply is not read further: the error names both sizes.
    let (events, failure) = run(&channel, "saving", "ann", "s2", "call huge_saved").await;
    assert!(failure.is_none(), "{failure:?}");
    let heard = last_text(&events);
    assert!(heard.contains("HTTP tool huge_saved: the reply to POST "), "{heard}");
    assert!(
        heard.contains(&format!(
            "(209715212 bytes) is longer than {ARTIFACT_LIMIT} bytes, the limit of a reply (--max-artifact-bytes"
        )),
        "{heard}"
    );
    assert!(
        events.iter().all(|event| event
            .actions
            .as_ref()
            .is_none_or(|actions| actions.artifact_delta.is_empty())),
        "nothing was saved"
    );
}
