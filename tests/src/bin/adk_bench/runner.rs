//! `adk-bench runner`: agent turns over gRPC with the mock model, so what is
//! measured is the runner itself (lease, session load, two stored events, the
//! event stream) and not a provider.
//!
//! For each concurrency level: turns per second, time to the first streamed
//! event and whole-turn latency; then, beside it, the raw cost of one
//! SessionService AppendEvent at the same concurrency on the same Redis, and the
//! runner's own overhead per turn: turn latency minus N × append latency, N being
//! the events a turn stores (the user's message and the reply).
//!
//! On its own Redis it also counts what a turn costs Redis: the commands the servers
//! send it over some turns of one client (read off `MONITOR`; the commands scripts run
//! inside Redis are not round trips and not counted), and the floor those round trips
//! set: the turn p50 at one session over (commands per turn × the p50 of an `EVALSHA`
//! of a script that reads one key, on the same redis-server in the same run).
//!
//! `--session-events 10,1000,10000,100000` measures long conversations instead: for
//! each length, one session pre-filled with that many events (user/reply turns with
//! a summary every 10 turns, as compaction leaves a log), then `--turns` turns on it
//! with compaction on (every 10 invocations, summarised by a mock): turn latency per
//! length and the runner's RSS, so the curve shows whether a turn costs what the log
//! holds or what the model sees. `--no-compaction` runs the app as the examples ship
//! (turns read newest-first as far as the model's context budget allows, logs
//! without summaries); `--store memory` runs one `adk-server` on its memory store
//! instead of the session and runner servers on Redis.
//!
//! `--tool` makes every turn one tool call (the mock model calls `echo`, then
//! answers): an HTTP tool the bench serves itself, or the `echo` tool of
//! `@modelcontextprotocol/server-everything` (installed by scripts/setup-mcp.sh)
//! over MCP stdio or streamable HTTP, so the turn latencies compare the ways of
//! calling a tool.

use super::cpu::{CpuSample, cell};
use super::monitor::{Monitor, monitor_command};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{ChildGuard, RedisServer, ServiceProcess, free_port, unique_prefix, wait_for_port};
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// The agents file of the bench's own runner: one LLM agent on the echo mock,
/// with an instruction to template and an output_key (so the reply carries a
/// state_delta), as a small real app would.
const BENCH_AGENTS: &str = "
models:
  echo: { provider: mock }
apps:
  bench:
    root_agent:
      name: assistant
      model: echo
      instruction: You help {user:name?}. Be brief.
      output_key: last_reply
";

/// Unmeasured turns per client before each level, in one session.
const WARMUP_TURNS: usize = 3;

/// What each turn calls.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ToolMode {
    /// No tool: the model answers at once.
    None,
    /// An HTTP tool (`kind: http`) served by the bench.
    Http,
    /// server-everything's `echo` over MCP stdio (a child process of the runner).
    McpStdio,
    /// server-everything's `echo` over MCP streamable HTTP (a server the bench starts).
    McpHttp,
}

#[derive(clap::Args)]
pub struct RunnerArgs {
    /// A running AgentRunner (http://host:port) serving --app; default: start redis-server, adk-session-server
    /// and adk-runner-server with a mock-model agent.
    #[arg(long)]
    pub(crate) endpoint: Option<String>,
    /// The app to run; the bench's own runner serves "bench" (an echo mock with an instruction and an output_key).
    #[arg(long, default_value = "bench")]
    app: String,
    /// A SessionService on the runner's store, for the AppendEvent baseline (with --endpoint; skipped without).
    #[arg(long)]
    session_endpoint: Option<String>,
    /// Concurrent sessions to measure at, each driven by its own client connection.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1, 32])]
    concurrency: Vec<usize>,
    /// Measured turns per concurrency level, shared out between the clients.
    #[arg(long, default_value_t = 3200)]
    turns: usize,
    /// Turns in one session before a client starts a fresh one (the runner loads the whole session each turn,
    /// so this is the conversation length measured at).
    #[arg(long, default_value_t = 10)]
    turns_per_session: usize,
    /// Make every turn one tool call of this kind (the bench's own runner only).
    #[arg(long, value_enum, default_value = "none")]
    tool: ToolMode,
    /// Long conversations: per length, a session pre-filled with that many events, then --turns turns on it
    /// with compaction on (the bench's own runner only). Given twice, the last list counts.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set)]
    session_events: Vec<usize>,
    /// With --session-events: the bench app as the example apps ship, without compaction (a turn reads the
    /// log newest-first as far as the model's context budget allows), and logs without summaries.
    #[arg(long)]
    no_compaction: bool,
    /// With --session-events: the store of the bench's own servers. memory runs one adk-server (sessions
    /// and runner in one process, as `adk-server` runs by default); redis runs adk-session-server and
    /// adk-runner-server on a redis-server.
    #[arg(long, value_enum, default_value = "redis")]
    store: BenchStore,
}

/// Where the bench's own servers keep sessions (`--store`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BenchStore {
    Memory,
    Redis,
}

/// Turns between summaries, in the pre-filled logs and in the runner's compaction.
const COMPACTION_INTERVAL: usize = 10;

/// The bench app with compaction on: a summary every [`COMPACTION_INTERVAL`]
/// invocations, written by a mock that always answers the same short summary.
const COMPACTING_AGENTS: &str = "
models:
  echo: { provider: mock }
  summarizer:
    provider: mock
    mock:
      per_conversation: true
      turns:
        - text: The user keeps asking about the weather in Tokyo; the assistant repeats the question.
apps:
  bench:
    root_agent:
      name: assistant
      model: echo
      instruction: You help {user:name?}. Be brief.
      output_key: last_reply
    compaction: { interval: 10, model: summarizer, token_budget: 100000 }
";

/// The bench's own processes, stopped when dropped.
struct Stack {
    runner: String,
    sessions: Option<String>,
    runner_process: Option<ServiceProcess>,
    _session_process: Option<ServiceProcess>,
    redis: Option<RedisServer>,
    /// server-everything for `--tool mcp-http`.
    _tool_server: Option<ChildGuard>,
    agents_file: Option<PathBuf>,
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(file) = &self.agents_file {
            let _ = std::fs::remove_file(file);
        }
    }
}

async fn start(args: &RunnerArgs) -> Result<Stack> {
    if let Some(endpoint) = &args.endpoint {
        return Ok(Stack {
            runner: endpoint.clone(),
            sessions: args.session_endpoint.clone(),
            runner_process: None,
            _session_process: None,
            redis: None,
            _tool_server: None,
            agents_file: None,
        });
    }
    if args.store == BenchStore::Memory {
        return start_in_memory(args).await;
    }
    let redis = RedisServer::start().await;
    // Redis's recommended durability, as the other benches use.
    adk_grpc_testkit::redis_cli(&[
        "-p",
        &redis.port().to_string(),
        "config",
        "set",
        "appendfsync",
        "everysec",
    ])
    .await;
    let agents_file = std::env::temp_dir().join(format!("adk-bench-agents-{}.yaml", std::process::id()));
    let (agents, tool_server) = match args.tool {
        ToolMode::None if !args.session_events.is_empty() && !args.no_compaction => {
            (COMPACTING_AGENTS.to_string(), None)
        }
        ToolMode::None => (BENCH_AGENTS.to_string(), None),
        mode => {
            let (tool, server) = tool_config(mode).await?;
            (tool_agents(&tool, args.turns_per_session), server)
        }
    };
    std::fs::write(&agents_file, agents).context("write the bench's agents file")?;
    let store = ["--store-url".to_string(), redis.url()];
    let sessions = ServiceProcess::spawn("adk-session-server", &store, &[]).await;
    let mut runner_args = store.to_vec();
    runner_args.extend(["--agents".to_string(), agents_file.display().to_string()]);
    let runner = ServiceProcess::spawn("adk-runner-server", &runner_args, &[]).await;
    Ok(Stack {
        runner: runner.endpoint(),
        sessions: Some(sessions.endpoint()),
        runner_process: Some(runner),
        _session_process: Some(sessions),
        redis: Some(redis),
        _tool_server: tool_server,
        agents_file: Some(agents_file),
    })
}

/// One `adk-server` on its default in-memory store with the bench app (no
/// compaction unless asked): SessionService and AgentRunner on one endpoint.
async fn start_in_memory(args: &RunnerArgs) -> Result<Stack> {
    let agents_file = std::env::temp_dir().join(format!("adk-bench-agents-{}.yaml", std::process::id()));
    let agents = if args.no_compaction {
        BENCH_AGENTS
    } else {
        COMPACTING_AGENTS
    };
    std::fs::write(&agents_file, agents).context("write the bench's agents file")?;
    let server_args = ["--agents".to_string(), agents_file.display().to_string()];
    let server = ServiceProcess::spawn("adk-server", &server_args, &[]).await;
    Ok(Stack {
        runner: server.endpoint(),
        sessions: Some(server.endpoint()),
        runner_process: Some(server),
        _session_process: None,
        redis: None,
        _tool_server: None,
        agents_file: Some(agents_file),
    })
}

/// `dist/index.js` of @modelcontextprotocol/server-everything, where scripts/setup-mcp.sh puts it.
fn server_everything() -> Result<String> {
    let dir = match std::env::var_os("ADK_MCP_NODE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
                .context("HOME is not set")?;
            cache.join("adk/mcp-node")
        }
    };
    let script = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    anyhow::ensure!(
        script.is_file(),
        "{} is missing: run scripts/setup-mcp.sh",
        script.display()
    );
    Ok(script.display().to_string())
}

/// The agents-file entry of the `echo` tool for `mode`, and the server the bench started for it.
async fn tool_config(mode: ToolMode) -> Result<(String, Option<ChildGuard>)> {
    match mode {
        ToolMode::None => unreachable!("no tool"),
        ToolMode::Http => {
            let url = serve_http_echo().await?;
            Ok((
                format!(
                    "{{ kind: http, url: '{url}', description: Echoes the message., \
                     parameters: {{ type: object, properties: {{ message: {{ type: string }} }}, required: [message] }} }}"
                ),
                None,
            ))
        }
        ToolMode::McpStdio => Ok((
            format!(
                "{{ kind: mcp, transport: stdio, command: node, args: ['{}', stdio], tool_filter: [echo] }}",
                server_everything()?
            ),
            None,
        )),
        ToolMode::McpHttp => {
            let port = free_port();
            let mut command = std::process::Command::new("node");
            command
                .arg(server_everything()?)
                .arg("streamableHttp")
                .env("PORT", port.to_string());
            let log = std::env::temp_dir().join(format!("adk-bench-server-everything-{}.log", std::process::id()));
            let server = ChildGuard::spawn(command, log).context("start server-everything")?;
            anyhow::ensure!(
                wait_for_port(port, Duration::from_secs(60)).await,
                "server-everything did not listen on port {port}"
            );
            Ok((
                format!("{{ kind: mcp, transport: http, url: 'http://127.0.0.1:{port}/mcp', tool_filter: [echo] }}"),
                Some(server),
            ))
        }
    }
}

/// An HTTP tool in the bench process: POST /echo answers `{"echo": <message>}`.
async fn serve_http_echo() -> Result<String> {
    let app = axum::Router::new().route(
        "/echo",
        axum::routing::post(|body: axum::body::Bytes| async move {
            let args: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let reply = serde_json::json!({ "echo": args["message"] });
            ([("content-type", "application/json")], reply.to_string())
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("bind the HTTP tool")?;
    let url = format!("http://{}/echo", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(url)
}

/// An agent whose every turn calls `echo` once and then answers: the mock's
/// script holds a call and a reply per turn of a session (warm-up sessions included),
/// played afresh in each session.
fn tool_agents(tool: &str, turns_per_session: usize) -> String {
    let turn =
        "        - function_calls: [{ name: echo, args: { message: weather in Tokyo } }]\n        - text: done\n";
    format!(
        "
models:
  caller:
    provider: mock
    mock:
      per_conversation: true
      turns:
{}
tools:
  echo: {tool}
apps:
  bench:
    root_agent: {{ name: assistant, model: caller, tools: [echo] }}
",
        turn.repeat(turns_per_session.max(WARMUP_TURNS))
    )
}

fn histogram() -> Histogram<u64> {
    // Microseconds up to an hour, 3 significant digits: never fails to build.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

fn record(histogram: &mut Histogram<u64>, elapsed: Duration) {
    histogram.saturating_record(elapsed.as_micros().try_into().unwrap_or(u64::MAX));
}

fn ms(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    histogram.value_at_quantile(quantile) as f64 / 1000.0
}

/// One worker's measurements.
struct Turns {
    first_event: Histogram<u64>,
    turn: Histogram<u64>,
    /// Events the turns stored: the user's messages plus the non-partial events streamed.
    stored_events: u64,
    turns: u64,
}

/// The user a worker runs as: one user per worker, as the end users of a backend.
fn worker_user(worker: usize) -> String {
    format!("bench-{worker}")
}

fn turn_request(app: &str, user: &str, session: &str, turn: usize) -> pb::RunRequest {
    pb::RunRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: session.into(),
        new_message: Some(pb::Content {
            role: "user".into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(format!(
                    "turn {turn}: what is the weather like in Tokyo tomorrow afternoon?"
                ))),
                ..Default::default()
            }],
        }),
        create_session: true,
        ..Default::default()
    }
}

/// Runs `turns` turns as `user`, one after another, on sessions of `turns_per_session` turns.
async fn drive(
    mut client: AgentRunnerClient<Channel>,
    app: String,
    user: String,
    prefix: String,
    turns: usize,
    turns_per_session: usize,
) -> Result<Turns> {
    let mut measured = Turns {
        first_event: histogram(),
        turn: histogram(),
        stored_events: 0,
        turns: 0,
    };
    for turn in 0..turns {
        let session = format!("{prefix}-{}", turn / turns_per_session.max(1));
        let started = Instant::now();
        let mut events = client
            .run(turn_request(&app, &user, &session, turn))
            .await
            .context("Run")?
            .into_inner();
        let mut first = None;
        // The stream starts with the user's message as stored: it counts like the reply.
        let mut stored = 0;
        while let Some(event) = events.message().await.context("the event stream")? {
            first.get_or_insert_with(|| started.elapsed());
            if event.partial != Some(true) {
                stored += 1;
            }
        }
        let first = first.context("a turn streamed no event")?;
        record(&mut measured.first_event, first);
        record(&mut measured.turn, started.elapsed());
        measured.stored_events += stored;
        measured.turns += 1;
    }
    Ok(measured)
}

struct Level {
    concurrency: usize,
    turns_per_second: f64,
    first_event: Histogram<u64>,
    turn: Histogram<u64>,
    events_per_turn: f64,
    append: Option<Histogram<u64>>,
    /// CPU µs per turn of adk-runner-server and redis-server (when this bench started them).
    cpu_per_turn: Vec<Option<f64>>,
}

async fn measure_turns(args: &RunnerArgs, endpoint: &str, concurrency: usize) -> Result<(f64, Turns)> {
    let per_client = (args.turns / concurrency).max(1);
    let mut clients = Vec::new();
    for _ in 0..concurrency {
        clients.push(
            AgentRunnerClient::connect(endpoint.to_string())
                .await
                .context("connect to the runner")?,
        );
    }
    // Warm up connections and the server (a few turns per client, not measured).
    let warmup = unique_prefix("warmup");
    let mut warming = Vec::new();
    for (worker, client) in clients.iter().cloned().enumerate() {
        warming.push(tokio::spawn(drive(
            client,
            args.app.clone(),
            worker_user(worker),
            format!("{warmup}-{worker}"),
            WARMUP_TURNS,
            WARMUP_TURNS,
        )));
    }
    for task in warming {
        task.await??;
    }

    let prefix = unique_prefix("turns");
    let started = Instant::now();
    let mut workers = Vec::new();
    for (worker, client) in clients.into_iter().enumerate() {
        workers.push(tokio::spawn(drive(
            client,
            args.app.clone(),
            worker_user(worker),
            format!("{prefix}-{worker}"),
            per_client,
            args.turns_per_session,
        )));
    }
    let mut all = Turns {
        first_event: histogram(),
        turn: histogram(),
        stored_events: 0,
        turns: 0,
    };
    for worker in workers {
        let turns = worker.await??;
        all.first_event.add(&turns.first_event).context("merge histograms")?;
        all.turn.add(&turns.turn).context("merge histograms")?;
        all.stored_events += turns.stored_events;
        all.turns += turns.turns;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok((all.turns as f64 / elapsed, all))
}

/// AppendEvent latency at `concurrency`, each client appending `per_client` events to its own session.
async fn measure_appends(endpoint: &str, concurrency: usize, per_client: usize) -> Result<Histogram<u64>> {
    let app = unique_prefix("append");
    let mut workers = Vec::new();
    for worker in 0..concurrency {
        let mut client = SessionServiceClient::connect(endpoint.to_string())
            .await
            .context("connect to the session server")?;
        let app = app.clone();
        workers.push(tokio::spawn(async move {
            let session = format!("s{worker}");
            client
                .create_session(pb::CreateSessionRequest {
                    app_name: app.clone(),
                    user_id: worker_user(worker),
                    session_id: session.clone(),
                    ..Default::default()
                })
                .await?;
            let mut latency = histogram();
            for i in 0..per_client {
                let request = pb::AppendEventRequest {
                    app_name: app.clone(),
                    user_id: worker_user(worker),
                    session_id: session.clone(),
                    event: Some(pb::Event {
                        author: "assistant".into(),
                        invocation_id: "e-bench".into(),
                        content: turn_request("", "", "", i).new_message,
                        ..Default::default()
                    }),
                    precondition: None,
                };
                let started = Instant::now();
                client.append_event(request).await?;
                record(&mut latency, started.elapsed());
            }
            anyhow::Ok(latency)
        }));
    }
    let mut all = histogram();
    for worker in workers {
        all.add(&worker.await??).context("merge histograms")?;
    }
    Ok(all)
}

pub async fn bench_runner(args: RunnerArgs) -> Result<()> {
    anyhow::ensure!(
        args.tool == ToolMode::None || args.endpoint.is_none(),
        "--tool sets up the bench's own runner: leave out --endpoint"
    );
    anyhow::ensure!(
        args.session_events.is_empty() || (args.endpoint.is_none() && args.tool == ToolMode::None),
        "--session-events sets up the bench's own runner with compaction: leave out --endpoint and --tool"
    );
    anyhow::ensure!(
        !args.session_events.is_empty() || (!args.no_compaction && args.store == BenchStore::Redis),
        "--no-compaction and --store go with --session-events"
    );
    let stack = start(&args).await?;
    if !args.session_events.is_empty() {
        return bench_long_sessions(&args, &stack).await;
    }
    let tool = match args.tool {
        ToolMode::None => "no tool",
        ToolMode::Http => "one HTTP tool call per turn",
        ToolMode::McpStdio => "one MCP tool call per turn (stdio)",
        ToolMode::McpHttp => "one MCP tool call per turn (streamable HTTP)",
    };
    println!(
        "runner {}, app {}, {} measured turns per level, {} turns per session, {tool}\n",
        stack.runner, args.app, args.turns, args.turns_per_session
    );
    let mut levels = Vec::new();
    for &concurrency in &args.concurrency {
        anyhow::ensure!(concurrency > 0, "--concurrency values must be at least 1");
        let processes = [
            stack.runner_process.as_ref().map(ServiceProcess::pid),
            stack.redis.as_ref().map(RedisServer::pid),
        ];
        let cpu_before = CpuSample::take(&processes);
        let (turns_per_second, turns) = measure_turns(&args, &stack.runner, concurrency).await?;
        let cpu_per_turn = cpu_before.per_op_us(&CpuSample::take(&processes), turns.turns);
        let events_per_turn = turns.stored_events as f64 / turns.turns.max(1) as f64;
        let append = match &stack.sessions {
            Some(sessions) => {
                let per_client = (args.turns * 2 / concurrency).clamp(50, 2000);
                Some(measure_appends(sessions, concurrency, per_client).await?)
            }
            None => None,
        };
        eprintln!("measured {concurrency} concurrent sessions");
        levels.push(Level {
            concurrency,
            turns_per_second,
            first_event: turns.first_event,
            turn: turns.turn,
            events_per_turn,
            append,
            cpu_per_turn,
        });
    }

    println!("| concurrent sessions | turns/s | first event p50 ms | p99 ms | turn p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|---|");
    for level in &levels {
        println!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            level.concurrency,
            level.turns_per_second,
            ms(&level.first_event, 0.5),
            ms(&level.first_event, 0.99),
            ms(&level.turn, 0.5),
            ms(&level.turn, 0.99),
            level.turn.max() as f64 / 1000.0,
        );
    }
    println!();
    // CPU time is far steadier than latency on a shared machine: the cost to compare.
    println!("| concurrent sessions | adk-runner-server CPU µs per turn | redis-server CPU µs per turn |");
    println!("|---|---|---|");
    for level in &levels {
        println!(
            "| {} | {} | {} |",
            level.concurrency,
            cell(level.cpu_per_turn[0], 0),
            cell(level.cpu_per_turn[1], 0)
        );
    }
    println!();
    println!(
        "| concurrent sessions | events stored per turn (N) | AppendEvent p50 ms | turn p50 ms | runner overhead p50 ms (turn − N × append) |"
    );
    println!("|---|---|---|---|---|");
    for level in &levels {
        let Some(append) = &level.append else {
            continue;
        };
        let append_p50 = ms(append, 0.5);
        let turn_p50 = ms(&level.turn, 0.5);
        println!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.2} |",
            level.concurrency,
            level.events_per_turn,
            append_p50,
            turn_p50,
            turn_p50 - level.events_per_turn * append_p50,
        );
    }
    if let Some(redis) = &stack.redis {
        let single = levels.iter().find(|level| level.concurrency == 1);
        report_redis_cost(&args, &stack, redis, single.map(|level| ms(&level.turn, 0.5))).await?;
    }
    if let Some(runner) = &stack.runner_process
        && let (Some(peak), Some(now)) = (runner.peak_rss_kib(), runner.rss_kib())
    {
        println!(
            "\nadk-runner-server peak RSS (VmHWM) {:.1} MiB; RSS now {:.1} MiB",
            peak as f64 / 1024.0,
            now as f64 / 1024.0
        );
    }
    Ok(())
}

/// Turns of one client whose Redis commands are counted: enough for a steady mean
/// (the runner's scan for lapsed runs adds a command now and then).
const COUNTED_TURNS: usize = 200;

/// Prints the Redis commands a turn sends and, given the turn p50 at one session,
/// the floor ratio: turn p50 / (commands per turn × EVALSHA p50).
async fn report_redis_cost(args: &RunnerArgs, stack: &Stack, redis: &RedisServer, turn_p50: Option<f64>) -> Result<()> {
    let turns = COUNTED_TURNS.min(args.turns).max(1);
    let per_turn = redis_commands_per_turn(args, stack, redis, turns).await?;
    let scripts: f64 = per_turn
        .iter()
        .filter(|(name, _)| name == "EVALSHA" || name == "EVAL")
        .map(|(_, n)| n)
        .sum();
    let total: f64 = per_turn.iter().map(|(_, n)| n).sum();
    let each = per_turn
        .iter()
        .map(|(name, n)| format!("{name} {n:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "\nRedis commands per turn (1 client, {turns} turns, {} per session, read off MONITOR): {total:.2}, \
         of them {scripts:.2} scripts ({each})",
        args.turns_per_session
    );
    let evalsha = evalsha_latency(redis, args.turns.clamp(100, 2000)).await?;
    let evalsha_p50 = ms(&evalsha, 0.5);
    println!(
        "EVALSHA of a one-key script on the same redis-server, 1 client: p50 {evalsha_p50:.3} ms, p99 {:.3} ms",
        ms(&evalsha, 0.99)
    );
    match turn_p50 {
        Some(turn_p50) => println!(
            "floor ratio: turn p50 at 1 session / ({total:.2} commands × EVALSHA p50) = {turn_p50:.2} / {:.2} = {:.2}",
            total * evalsha_p50,
            turn_p50 / (total * evalsha_p50)
        ),
        None => println!("floor ratio: measure --concurrency 1 for it"),
    }
    Ok(())
}

/// The commands `turns` turns of one client make the servers send Redis, by command,
/// per turn, most first. Counted with MONITOR, which only runs in this phase (it
/// slows Redis down): the commands scripts run are marked `lua` there and left out.
async fn redis_commands_per_turn(
    args: &RunnerArgs,
    stack: &Stack,
    redis: &RedisServer,
    turns: usize,
) -> Result<Vec<(String, f64)>> {
    let client = AgentRunnerClient::connect(stack.runner.clone())
        .await
        .context("connect to the runner")?;
    let mut monitor = Monitor::start(redis.port()).await?;
    let prefix = unique_prefix("counted");
    drive(
        client,
        args.app.clone(),
        worker_user(0),
        prefix,
        turns,
        args.turns_per_session,
    )
    .await?;
    // The end of the count: a command of the bench's own, after the last turn's. A write
    // the runner queued at the very end may land after it (one in all those turns).
    let marker = unique_prefix("adk-bench-counted");
    let _: String = redis::cmd("ECHO")
        .arg(&marker)
        .query_async(&mut redis.connection().await)
        .await
        .context("ECHO the end of the count")?;
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = monitor.next_line().await? {
            if line.contains(&marker) {
                return Ok(());
            }
            let (name, by_script) = monitor_command(&line)?;
            if !by_script {
                *counts.entry(name).or_default() += 1;
            }
        }
        anyhow::bail!("redis-cli monitor ended before the count did")
    })
    .await
    .context("MONITOR never showed the end of the count")??;
    let mut per_turn: Vec<(String, f64)> = counts
        .into_iter()
        .map(|(name, n)| (name, n as f64 / turns as f64))
        .collect();
    per_turn.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(per_turn)
}

/// Latencies of `calls` EVALSHAs, one at a time, of a script that reads one key: what
/// one script round trip costs on this redis-server, the unit of a turn's floor.
async fn evalsha_latency(redis: &RedisServer, calls: usize) -> Result<Histogram<u64>> {
    let mut conn = redis.connection().await;
    let script = redis::Script::new("return redis.call('GET', KEYS[1])");
    let call = script.key(unique_prefix("adk-bench-floor"));
    // The first call loads the script.
    let _: Option<String> = call.invoke_async(&mut conn).await?;
    let mut latency = histogram();
    for _ in 0..calls {
        let started = Instant::now();
        let _: Option<String> = call.invoke_async(&mut conn).await?;
        record(&mut latency, started.elapsed());
    }
    Ok(latency)
}

/// One pre-filled session per length, then `--turns` turns on each (one client):
/// what a turn costs as the log grows, with compaction on.
async fn bench_long_sessions(args: &RunnerArgs, stack: &Stack) -> Result<()> {
    let sessions = stack.sessions.clone().context("the bench's own session server")?;
    let store = match args.store {
        BenchStore::Memory => "memory store (adk-server)",
        BenchStore::Redis => "Redis",
    };
    let compaction = match args.no_compaction {
        true => "no compaction (turns read as far as the model's context budget)".to_string(),
        false => format!("compaction every {COMPACTION_INTERVAL} invocations"),
    };
    println!(
        "runner {}, app {}, {store}, {compaction}, {} measured turns per length after {WARMUP_TURNS} warm-up \
         turns, one client\n",
        stack.runner, args.app, args.turns
    );
    println!("| events in the session | pre-fill s | turn p50 ms | p99 ms | max ms | runner RSS after MiB |");
    println!("|---|---|---|---|---|---|");
    let prefix = unique_prefix("long");
    let user = worker_user(0);
    for (i, &length) in args.session_events.iter().enumerate() {
        // `drive` runs its turns in session `<prefix>-0` when they all fit in one.
        let session = format!("{prefix}-{i}-{length}");
        let started = Instant::now();
        let summaries = !args.no_compaction;
        prefill(&sessions, &args.app, &user, &format!("{session}-0"), length, summaries).await?;
        let prefill_secs = started.elapsed().as_secs_f64();
        let client = AgentRunnerClient::connect(stack.runner.clone())
            .await
            .context("connect to the runner")?;
        // Warm-up turns on the same session (the client's connection, the runner's caches).
        drive(
            client.clone(),
            args.app.clone(),
            user.clone(),
            session.clone(),
            WARMUP_TURNS,
            usize::MAX,
        )
        .await?;
        let turns = drive(client, args.app.clone(), user.clone(), session, args.turns, usize::MAX).await?;
        let rss = stack
            .runner_process
            .as_ref()
            .and_then(|runner| runner.rss_kib())
            .map_or("-".to_string(), |kib| format!("{:.1}", kib as f64 / 1024.0));
        println!(
            "| {length} | {prefill_secs:.1} | {:.2} | {:.2} | {:.2} | {rss} |",
            ms(&turns.turn, 0.5),
            ms(&turns.turn, 0.99),
            turns.turn.max() as f64 / 1000.0,
        );
    }
    if let Some(runner) = &stack.runner_process
        && let Some(peak) = runner.peak_rss_kib()
    {
        println!("\nadk-runner-server peak RSS (VmHWM) {:.1} MiB", peak as f64 / 1024.0);
    }
    Ok(())
}

/// Appends `length` events to a new session through AppendEvent, many in flight at
/// once: turns of a user message and a reply, and (with `summaries`) after every
/// [`COMPACTION_INTERVAL`] turns a summary of the log so far, as the runner's
/// compaction leaves it. Timestamps come from the order events are made in, so the
/// summaries' ranges hold whatever order the appends land in.
async fn prefill(endpoint: &str, app: &str, user: &str, session: &str, length: usize, summaries: bool) -> Result<()> {
    use futures::StreamExt;
    let mut client = SessionServiceClient::connect(endpoint.to_string())
        .await
        .context("connect to the session server")?;
    client
        .create_session(pb::CreateSessionRequest {
            app_name: app.into(),
            user_id: user.into(),
            session_id: session.into(),
            ..Default::default()
        })
        .await?;
    let mut events = Vec::with_capacity(length);
    let mut first = None;
    let mut turn = 0;
    while events.len() < length {
        let invocation = format!("e-prefill-{turn}");
        let question = adk_grpc_core::Event::new(&invocation)
            .with_author("user")
            .with_content(adk_grpc_core::Content::new("user").with_text(format!("turn {turn}: the weather in Tokyo?")));
        let answer = adk_grpc_core::Event::new(&invocation)
            .with_author("assistant")
            .with_content(adk_grpc_core::Content::new("model").with_text(format!("You said: turn {turn}")));
        first.get_or_insert(question.timestamp);
        let end = answer.timestamp;
        events.push(question);
        events.push(answer);
        turn += 1;
        if summaries && turn % COMPACTION_INTERVAL == 0 {
            let mut summary = adk_grpc_core::Event::new(&invocation).with_author("user");
            summary.actions.compaction = Some(adk_grpc_core::EventCompaction {
                start_timestamp: first.unwrap_or(end),
                end_timestamp: end,
                compacted_content: adk_grpc_core::Content::new("model")
                    .with_text(format!("Summary of turns 0-{turn}.")),
            });
            events.push(summary);
        }
    }
    events.truncate(length);
    let requests = events.into_iter().map(|event| pb::AppendEventRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: session.into(),
        event: Some(pb::Event::from(&event)),
        precondition: None,
    });
    let mut appends = futures::stream::iter(requests)
        .map(|request| {
            let mut client = client.clone();
            async move { client.append_event(request).await }
        })
        .buffer_unordered(64);
    while let Some(appended) = appends.next().await {
        appended.context("pre-fill AppendEvent")?;
    }
    Ok(())
}
