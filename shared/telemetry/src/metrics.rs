//! Every Prometheus metric of the suite, in one registry: what a binary serves on
//! `/metrics` (see adk-grpc-server-kit). Library crates record through the functions
//! below; nothing is exported unless a binary serves the registry.
//!
//! Label values come from code or configuration (method names known to the server,
//! Redis command and script names, configured apps, models and tools, gRPC code
//! names), never from what a client sends, so no client can blow up the number of
//! series.

use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};
use std::sync::LazyLock;
use std::time::Duration;

/// gRPC calls: from sub-millisecond unary calls to streams that last minutes.
const RPC_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];
/// Redis round trips: tens of microseconds on loopback up to the 2 s reply timeout.
const REDIS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];
/// Model calls (a whole reply, streamed or not) and tool calls: milliseconds to minutes.
const SLOW_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
];

struct Metrics {
    registry: Registry,
    rpc_requests: IntCounterVec,
    rpc_duration: HistogramVec,
    rpc_active_streams: IntGaugeVec,
    redis_duration: HistogramVec,
    redis_errors: IntCounterVec,
    invocations_started: IntCounterVec,
    invocations_finished: IntCounterVec,
    model_calls: IntCounterVec,
    model_duration: HistogramVec,
    model_tokens: IntCounterVec,
    tool_calls: IntCounterVec,
    tool_duration: HistogramVec,
    hook_calls: IntCounterVec,
    hook_duration: HistogramVec,
    compactions: IntCounterVec,
    history_events_dropped: IntCounterVec,
    history_left_out: IntCounterVec,
    mcp_connection_attempts: IntCounterVec,
    mcp_connected: IntGaugeVec,
    runs_resumed: IntCounterVec,
    resumed_steps: IntCounterVec,
    resume_latency: HistogramVec,
}

/// The definitions are constants; building or registering them fails only for a
/// malformed name or a duplicate, a bug the unit test below catches.
fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let metric = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid counter definition");
    registry
        .register(Box::new(metric.clone()))
        .expect("a metric name registered once");
    metric
}

fn histogram(registry: &Registry, name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
    let metric = HistogramVec::new(opts, labels).expect("a valid histogram definition");
    registry
        .register(Box::new(metric.clone()))
        .expect("a metric name registered once");
    metric
}

fn gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid gauge definition");
    registry
        .register(Box::new(metric.clone()))
        .expect("a metric name registered once");
    metric
}

impl Metrics {
    fn new() -> Metrics {
        let r = Registry::new();
        Metrics {
            rpc_requests: counter(
                &r,
                "adk_grpc_server_requests_total",
                "gRPC calls handled, by method and final status code",
                &["method", "code"],
            ),
            rpc_duration: histogram(
                &r,
                "adk_grpc_server_request_duration_seconds",
                "gRPC call duration by method and status code, from the request's arrival until the response \
                 (for streaming calls: the stream) ended",
                &["method", "code"],
                RPC_BUCKETS,
            ),
            rpc_active_streams: gauge(
                &r,
                "adk_grpc_server_active_streams",
                "Streaming gRPC calls in progress (WatchSession, Run, UploadArtifact, DownloadArtifact, ...)",
                &["method"],
            ),
            redis_duration: histogram(
                &r,
                "adk_redis_command_duration_seconds",
                "Redis round trips (command, Lua script or pipeline) by operation, failures included",
                &["operation"],
                REDIS_BUCKETS,
            ),
            redis_errors: counter(
                &r,
                "adk_redis_command_errors_total",
                "Redis round trips that failed, by operation and the gRPC code the failure maps to",
                &["operation", "code"],
            ),
            invocations_started: counter(
                &r,
                "adk_runner_invocations_started_total",
                "Agent invocations started, by app",
                &["app"],
            ),
            invocations_finished: counter(
                &r,
                "adk_runner_invocations_finished_total",
                "Agent invocations ended, by app and outcome (OK or the gRPC code of the failure; CANCELLED when \
                 cancelled or when the client went away)",
                &["app", "outcome"],
            ),
            model_calls: counter(
                &r,
                "adk_model_calls_total",
                "Model calls by provider, model and outcome (OK or the gRPC code of the failure)",
                &["provider", "model", "outcome"],
            ),
            model_duration: histogram(
                &r,
                "adk_model_call_duration_seconds",
                "Model call duration until the complete reply, by provider and model",
                &["provider", "model"],
                SLOW_BUCKETS,
            ),
            model_tokens: counter(
                &r,
                "adk_model_tokens_total",
                "Tokens the providers reported, by provider, model and kind (prompt or completion)",
                &["provider", "model", "kind"],
            ),
            tool_calls: counter(
                &r,
                "adk_tool_calls_total",
                "Tool calls by tool and outcome (OK or the gRPC code of the failure; tool \"(unknown)\" when the \
                 model named a tool the agent does not have)",
                &["tool", "outcome"],
            ),
            tool_duration: histogram(
                &r,
                "adk_tool_call_duration_seconds",
                "Tool call duration by tool",
                &["tool"],
                SLOW_BUCKETS,
            ),
            hook_calls: counter(
                &r,
                "adk_hook_calls_total",
                "Calls of the agents file's hooks by hook, point (before_model, after_tool, ...) and outcome (OK or \
                 the gRPC code of the failure: DEADLINE_EXCEEDED for a timeout, UNAVAILABLE when unreachable, \
                 INTERNAL for a reply that is not a hook reply), whatever the hook's failure policy",
                &["hook", "point", "outcome"],
            ),
            hook_duration: histogram(
                &r,
                "adk_hook_call_duration_seconds",
                "Hook call duration (the HTTP exchange and applying its reply) by hook and point",
                &["hook", "point"],
                RPC_BUCKETS,
            ),
            compactions: counter(
                &r,
                "adk_runner_compactions_total",
                "Event compactions by app, trigger (interval or token_budget) and outcome (OK or the gRPC code \
                 of the summariser's failure)",
                &["app", "trigger", "outcome"],
            ),
            history_events_dropped: counter(
                &r,
                "adk_runner_history_contents_dropped_total",
                "Oldest history contents left out of model requests to keep them within the app's token budget \
                 (when compaction could not), by app",
                &["app"],
            ),
            history_left_out: counter(
                &r,
                "adk_runner_history_left_out_turns_total",
                "Turns of apps without compaction whose read of the session stopped at the model's context budget \
                 (older events left out of the turn and its model requests), by app",
                &["app"],
            ),
            runs_resumed: counter(
                &r,
                "adk_runner_runs_resumed_total",
                "Invocations this replica took over after their runner died (its lease ran out) or handed them \
                 over (it was shutting down), by app",
                &["app"],
            ),
            resumed_steps: counter(
                &r,
                "adk_runner_resumed_steps_total",
                "Events of resumed invocations found in the log and not redone (model replies, tool responses), by app",
                &["app"],
            ),
            resume_latency: histogram(
                &r,
                "adk_runner_resume_latency_seconds",
                "From a resumed invocation's lost lease (its expiry, or the hand-over) to its first event on this \
                 replica, by app",
                &["app"],
                SLOW_BUCKETS,
            ),
            mcp_connection_attempts: counter(
                &r,
                "adk_mcp_connection_attempts_total",
                "Attempts to connect to an MCP toolset's server (start or reach it, then the MCP handshake), by \
                 toolset and outcome (OK; UNAVAILABLE when it failed; DEADLINE_EXCEEDED when it timed out)",
                &["toolset", "outcome"],
            ),
            mcp_connected: gauge(
                &r,
                "adk_mcp_toolset_connected",
                "1 while an MCP toolset is connected to its server, 0 once an attempt failed or the connection \
                 closed (absent until the toolset is first used)",
                &["toolset"],
            ),
            registry: r,
        }
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The registry in the Prometheus text exposition format (version 0.0.4).
pub fn encode_text() -> Result<String, prometheus::Error> {
    let mut buffer = Vec::new();
    TextEncoder::new().encode(&METRICS.registry.gather(), &mut buffer)?;
    String::from_utf8(buffer).map_err(|e| prometheus::Error::Msg(e.to_string()))
}

/// The content type of [`encode_text`]'s output.
pub const TEXT_CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// One finished gRPC call. `code` is a gRPC code name ([`crate::code_name`]).
pub fn rpc_finished(method: &str, code: &str, elapsed: Duration) {
    let m = &*METRICS;
    m.rpc_requests.with_label_values(&[method, code]).inc();
    m.rpc_duration
        .with_label_values(&[method, code])
        .observe(elapsed.as_secs_f64());
}

/// Counts one streaming call of `method` as active until the guard is dropped.
pub fn active_stream(method: &str) -> ActiveStream {
    let gauge = METRICS.rpc_active_streams.with_label_values(&[method]);
    gauge.inc();
    ActiveStream { gauge }
}

/// See [`active_stream`].
#[must_use = "the stream counts as active only while the guard lives"]
pub struct ActiveStream {
    gauge: prometheus::IntGauge,
}

impl Drop for ActiveStream {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// One Redis round trip; `error` is the gRPC code name of its failure, if it failed.
pub fn redis_finished(operation: &str, elapsed: Duration, error: Option<&str>) {
    let m = &*METRICS;
    m.redis_duration
        .with_label_values(&[operation])
        .observe(elapsed.as_secs_f64());
    if let Some(code) = error {
        m.redis_errors.with_label_values(&[operation, code]).inc();
    }
}

pub fn invocation_started(app: &str) {
    METRICS.invocations_started.with_label_values(&[app]).inc();
}

pub fn invocation_finished(app: &str, outcome: &str) {
    METRICS.invocations_finished.with_label_values(&[app, outcome]).inc();
}

/// Token counts as the provider reported them (negative counts are ignored).
pub struct TokenUsage {
    pub prompt: i64,
    pub completion: i64,
}

pub fn model_call_finished(provider: &str, model: &str, outcome: &str, elapsed: Duration, usage: Option<&TokenUsage>) {
    let m = &*METRICS;
    m.model_calls.with_label_values(&[provider, model, outcome]).inc();
    m.model_duration
        .with_label_values(&[provider, model])
        .observe(elapsed.as_secs_f64());
    if let Some(usage) = usage {
        for (kind, count) in [("prompt", usage.prompt), ("completion", usage.completion)] {
            if let Ok(count) = u64::try_from(count) {
                m.model_tokens.with_label_values(&[provider, model, kind]).inc_by(count);
            }
        }
    }
}

pub fn compaction_finished(app: &str, trigger: &str, outcome: &str) {
    METRICS.compactions.with_label_values(&[app, trigger, outcome]).inc();
}

pub fn history_contents_dropped(app: &str, count: usize) {
    METRICS
        .history_events_dropped
        .with_label_values(&[app])
        .inc_by(count as u64);
}

/// A turn of an app without compaction read only the session's newest events, as
/// far as the model's context budget allows: the older ones were left out.
pub fn history_left_out(app: &str) {
    METRICS.history_left_out.with_label_values(&[app]).inc();
}

/// An invocation taken over by this replica; `steps` of its events were in the log already.
pub fn run_resumed(app: &str, steps: usize) {
    METRICS.runs_resumed.with_label_values(&[app]).inc();
    METRICS.resumed_steps.with_label_values(&[app]).inc_by(steps as u64);
}

/// The time from a resumed invocation's lost lease to its first event here.
pub fn resumed_first_event(app: &str, since_lease_lost: Duration) {
    METRICS
        .resume_latency
        .with_label_values(&[app])
        .observe(since_lease_lost.as_secs_f64());
}

pub fn tool_call_finished(tool: &str, outcome: &str, elapsed: Duration) {
    let m = &*METRICS;
    m.tool_calls.with_label_values(&[tool, outcome]).inc();
    m.tool_duration
        .with_label_values(&[tool])
        .observe(elapsed.as_secs_f64());
}

pub fn hook_call_finished(hook: &str, point: &str, outcome: &str, elapsed: Duration) {
    let m = &*METRICS;
    m.hook_calls.with_label_values(&[hook, point, outcome]).inc();
    m.hook_duration
        .with_label_values(&[hook, point])
        .observe(elapsed.as_secs_f64());
}

/// One attempt of an MCP toolset to connect; `outcome` is `OK` or the gRPC code
/// name of the failure. The toolset counts as connected after an `OK`, as not
/// connected after a failure.
pub fn mcp_connection_attempt(toolset: &str, outcome: &str) {
    let m = &*METRICS;
    m.mcp_connection_attempts.with_label_values(&[toolset, outcome]).inc();
    m.mcp_connected
        .with_label_values(&[toolset])
        .set(i64::from(outcome == "OK"));
}

/// An MCP toolset's connection closed.
pub fn mcp_disconnected(toolset: &str) {
    METRICS.mcp_connected.with_label_values(&[toolset]).set(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_registers_and_appears_once_recorded() {
        rpc_finished(
            "/adk.v1.SessionService/GetSession",
            "NOT_FOUND",
            Duration::from_millis(3),
        );
        let stream = active_stream("/adk.v1.SessionService/WatchSession");
        redis_finished("HGET", Duration::from_micros(300), Some("UNAVAILABLE"));
        invocation_started("app");
        invocation_finished("app", "OK");
        let usage = TokenUsage {
            prompt: 7,
            completion: -1,
        };
        model_call_finished("mock", "m", "OK", Duration::from_millis(5), Some(&usage));
        tool_call_finished("t", "OK", Duration::from_millis(1));
        hook_call_finished("guard", "before_tool", "DEADLINE_EXCEEDED", Duration::from_millis(2));
        mcp_connection_attempt("everything", "UNAVAILABLE");
        run_resumed("app", 3);
        resumed_first_event("app", Duration::from_millis(1500));
        let text = encode_text().unwrap();
        for line in [
            "adk_grpc_server_requests_total{code=\"NOT_FOUND\",method=\"/adk.v1.SessionService/GetSession\"} 1",
            "adk_grpc_server_active_streams{method=\"/adk.v1.SessionService/WatchSession\"} 1",
            "adk_redis_command_errors_total{code=\"UNAVAILABLE\",operation=\"HGET\"} 1",
            "adk_redis_command_duration_seconds_count{operation=\"HGET\"} 1",
            "adk_runner_invocations_finished_total{app=\"app\",outcome=\"OK\"} 1",
            "adk_model_tokens_total{kind=\"prompt\",model=\"m\",provider=\"mock\"} 7",
            "adk_tool_calls_total{outcome=\"OK\",tool=\"t\"} 1",
            "adk_hook_calls_total{hook=\"guard\",outcome=\"DEADLINE_EXCEEDED\",point=\"before_tool\"} 1",
            "adk_hook_call_duration_seconds_count{hook=\"guard\",point=\"before_tool\"} 1",
            "adk_mcp_connection_attempts_total{outcome=\"UNAVAILABLE\",toolset=\"everything\"} 1",
            "adk_mcp_toolset_connected{toolset=\"everything\"} 0",
            "adk_runner_runs_resumed_total{app=\"app\"} 1",
            "adk_runner_resumed_steps_total{app=\"app\"} 3",
            "adk_runner_resume_latency_seconds_count{app=\"app\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        // A negative count from a provider is not a token count.
        assert!(!text.contains("kind=\"completion\""), "{text}");
        drop(stream);
        assert!(
            encode_text()
                .unwrap()
                .contains("adk_grpc_server_active_streams{method=\"/adk.v1.SessionService/WatchSession\"} 0")
        );
    }
}
