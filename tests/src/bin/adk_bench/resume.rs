//! `adk-bench resume`: how long a run whose runner is killed waits for another replica
//! (`docs/semantics.md`, Runner 27). A real redis-server, `adk-session-server` and two
//! `adk-runner-server`s; an agent on the mock model calls an HTTP tool the bench serves,
//! which never answers. Once the call is in flight the runner running it is killed with
//! SIGKILL; the time measured is from the kill to the first event the other replica
//! stores for the invocation (the tool's "interrupted" response), as a client watching
//! the session sees it. The killed runner is started again before the next repetition.

use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use anyhow::{Context, Result, bail};
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[derive(clap::Args)]
pub struct ResumeArgs {
    /// Kills measured (one run each).
    #[arg(long, default_value_t = 5)]
    repetitions: usize,
    /// The runners' `--session-lease-ttl-ms`: a dead runner's run waits for its lease to lapse.
    #[arg(long, default_value_t = 5000)]
    lease_ttl_ms: u64,
}

/// One agent on the mock model: it calls `slow` (the bench's tool), then answers.
fn agents(tool_url: &str) -> String {
    format!(
        "
models:
  caller:
    provider: mock
    mock:
      per_conversation: true
      turns:
        - function_calls: [{{ name: slow, args: {{}} }}]
        - text: done
tools:
  slow: {{ kind: http, url: '{tool_url}', description: Never answers., timeout_secs: 3600 }}
apps:
  bench:
    root_agent: {{ name: assistant, model: caller, tools: [slow] }}
"
    )
}

/// An HTTP tool that counts its calls and never answers them.
async fn serve_stalling_tool() -> Result<(String, watch::Receiver<usize>)> {
    let (calls, seen) = watch::channel(0usize);
    let app = axum::Router::new().route(
        "/slow",
        axum::routing::post(move || {
            calls.send_modify(|n| *n += 1);
            std::future::pending::<&'static str>()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("bind the HTTP tool")?;
    let url = format!("http://{}/slow", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((url, seen))
}

pub async fn bench_resume(args: ResumeArgs) -> Result<()> {
    if args.repetitions == 0 {
        bail!("--repetitions must be at least 1");
    }
    let redis = RedisServer::start().await;
    let (tool_url, mut tool_calls) = serve_stalling_tool().await?;
    let agents_file = std::env::temp_dir().join(format!("adk-bench-resume-agents-{}.yaml", std::process::id()));
    std::fs::write(&agents_file, agents(&tool_url)).context("write the bench's agents file")?;
    let runner_args = [
        "--store-url".to_string(),
        redis.url(),
        "--agents".to_string(),
        agents_file.display().to_string(),
        "--session-lease-ttl-ms".to_string(),
        args.lease_ttl_ms.to_string(),
    ];
    let store = ["--store-url".to_string(), redis.url()];
    let (sessions, victim, _survivor) = tokio::join!(
        ServiceProcess::spawn("adk-session-server", &store, &[]),
        ServiceProcess::spawn("adk-runner-server", &runner_args, &[]),
        ServiceProcess::spawn("adk-runner-server", &runner_args, &[]),
    );
    let mut victim = victim;
    let result = measure(&args, &sessions, &mut victim, &mut tool_calls).await;
    let _ = std::fs::remove_file(&agents_file);
    let mut waits = result?;
    waits.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p50 = waits[(waits.len() - 1) / 2];
    let max = waits[waits.len() - 1];
    println!(
        "\nkill -9 to the resumed first event, lease TTL {} ms, {} runs: p50 {:.0} ms, max {:.0} ms",
        args.lease_ttl_ms,
        waits.len(),
        ms(p50),
        ms(max)
    );
    Ok(())
}

async fn measure(
    args: &ResumeArgs,
    sessions: &ServiceProcess,
    victim: &mut ServiceProcess,
    tool_calls: &mut watch::Receiver<usize>,
) -> Result<Vec<Duration>> {
    let mut waits = Vec::with_capacity(args.repetitions);
    for rep in 0..args.repetitions {
        let (user, session) = (format!("bench-{rep}"), format!("resume-{rep}"));
        let mut runner = AgentRunnerClient::connect(victim.endpoint()).await.context("connect")?;
        let mut stream = runner
            .run(pb::RunRequest {
                app_name: "bench".into(),
                user_id: user.clone(),
                session_id: session.clone(),
                new_message: Some(pb::Content {
                    role: "user".into(),
                    parts: vec![pb::Part {
                        kind: Some(pb::part::Kind::Text("go".into())),
                        ..Default::default()
                    }],
                }),
                create_session: true,
                ..Default::default()
            })
            .await
            .context("Run")?
            .into_inner();
        // The last stored event before the kill: the model's call of the tool.
        let mut last_sequence = None;
        while let Some(event) = stream.message().await.context("the Run stream")? {
            if event.partial == Some(true) {
                continue;
            }
            last_sequence = Some(event.sequence);
            if event.author == "assistant" {
                break;
            }
        }
        let last_sequence = last_sequence.context("the Run stream ended before the tool call")?;
        tokio::time::timeout(Duration::from_secs(30), tool_calls.wait_for(|n| *n > rep))
            .await
            .context("the tool call never arrived")?
            .context("the tool server stopped")?;
        let mut watcher = SessionServiceClient::connect(sessions.endpoint())
            .await
            .context("connect")?;
        let mut watch = watcher
            .watch_session(pb::WatchSessionRequest {
                app_name: "bench".into(),
                user_id: user,
                session_id: session,
                after_sequence: Some(last_sequence),
            })
            .await
            .context("WatchSession")?
            .into_inner();

        let killed = Instant::now();
        victim.kill9().await;
        drop(stream);
        let resumed = tokio::time::timeout(Duration::from_secs(120), watch.message())
            .await
            .context("no resumed event within 120 s")?
            .context("the watch")?
            .context("the watch ended")?;
        let waited = killed.elapsed();
        println!(
            "run {rep}: resumed first event (by {}) {:.0} ms after the kill",
            resumed.author,
            waited.as_secs_f64() * 1000.0
        );
        waits.push(waited);
        victim.restart().await;
    }
    Ok(waits)
}
