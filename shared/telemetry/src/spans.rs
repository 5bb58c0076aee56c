//! The spans (and with them the metrics) of the suite's shared choke points: a
//! Redis round trip, a model call, a tool call, an agent invocation. Each is a
//! guard: create it where the work starts (its span's parent is the current
//! span), run the work inside [`span`](RedisOp::span), then `finish` it with the
//! outcome. A guard dropped unfinished (the caller gave up: the client went away,
//! the invocation was cancelled) still counts, as CANCELLED.
//!
//! Attribute names follow OpenTelemetry's semantic conventions where one exists
//! (`db.*`, `gen_ai.*`, `error.type`); `otel.name`, `otel.kind` and
//! `otel.status_code` are read by tracing-opentelemetry. Values (keys, arguments,
//! prompts, replies) are never recorded, only names, ids and counts.

use crate::code_name;
use crate::metrics::{self, TokenUsage};
use std::time::Instant;
use tonic::Code;
use tracing::Span;
use tracing::field::Empty;

/// Records a failure on a span: OpenTelemetry's ERROR status and `error.type`,
/// the gRPC code name the failure maps to.
fn record_error(span: &Span, code: Code) {
    span.record("otel.status_code", "error");
    span.record("error.type", code_name(code));
}

fn outcome(error: Option<Code>) -> &'static str {
    error.map_or("OK", code_name)
}

/// One Redis round trip: a command, a Lua script or a pipeline.
pub struct RedisOp {
    operation: String,
    span: Span,
    started: Instant,
}

impl RedisOp {
    /// A command, named by its first word (`HGET`, `ZRANGE`, ...).
    pub fn command(name: &str) -> RedisOp {
        let operation = name.to_ascii_uppercase();
        let span = tracing::info_span!(
            "redis",
            otel.name = %operation,
            otel.kind = "client",
            db.system.name = "redis",
            db.operation.name = %operation,
            otel.status_code = Empty,
            error.type = Empty,
        );
        RedisOp::new(operation, span)
    }

    /// A Lua script (sent as EVALSHA), by the name the code gives it; operation `script:<name>`.
    pub fn script(name: &str) -> RedisOp {
        let operation = format!("script:{name}");
        let span = tracing::info_span!(
            "redis",
            otel.name = %operation,
            otel.kind = "client",
            db.system.name = "redis",
            db.operation.name = "EVALSHA",
            db.stored_procedure.name = name,
            otel.status_code = Empty,
            error.type = Empty,
        );
        RedisOp::new(operation, span)
    }

    /// A pipeline of `commands` (their names, in order); operation
    /// `pipeline:<distinct names joined by +>`, e.g. `pipeline:UNLINK+ZREM`.
    pub fn pipeline<'a>(commands: impl IntoIterator<Item = &'a str>) -> RedisOp {
        let mut names: Vec<String> = Vec::new();
        let mut size = 0usize;
        for command in commands {
            size += 1;
            let name = command.to_ascii_uppercase();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let operation = format!("pipeline:{}", names.join("+"));
        let span = tracing::info_span!(
            "redis",
            otel.name = %operation,
            otel.kind = "client",
            db.system.name = "redis",
            db.operation.name = "PIPELINE",
            db.operation.batch.size = size,
            otel.status_code = Empty,
            error.type = Empty,
        );
        RedisOp::new(operation, span)
    }

    fn new(operation: String, span: Span) -> RedisOp {
        RedisOp {
            operation,
            span,
            started: Instant::now(),
        }
    }

    /// The operation's metric label (`HGET`, `script:append`, `pipeline:UNLINK+ZREM`).
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// Run the round trip inside this span (`future.instrument(op.span().clone())`).
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// `error`: the gRPC code the failure maps to, None on success.
    pub fn finish(self, error: Option<Code>) {
        if let Some(code) = error {
            record_error(&self.span, code);
        }
        metrics::redis_finished(&self.operation, self.started.elapsed(), error.map(code_name));
    }
}

/// One model call: the request and the whole reply (streamed or not).
pub struct ModelCall {
    provider: String,
    model: String,
    span: Span,
    started: Instant,
    finished: bool,
}

impl ModelCall {
    pub fn start(provider: &str, model: &str, streaming: bool) -> ModelCall {
        let span = tracing::info_span!(
            "model_call",
            otel.name = %format_args!("chat {model}"),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = provider,
            gen_ai.request.model = model,
            streaming,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            otel.status_code = Empty,
            error.type = Empty,
        );
        ModelCall {
            provider: provider.to_string(),
            model: model.to_string(),
            span,
            started: Instant::now(),
            finished: false,
        }
    }

    /// Send the request and read the reply inside this span: the provider request
    /// carries its trace context.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The complete reply arrived (with the usage the provider reported, if any), or the call failed.
    pub fn finish(mut self, result: Result<Option<TokenUsage>, Code>) {
        self.finished = true;
        let elapsed = self.started.elapsed();
        match result {
            Ok(usage) => {
                if let Some(usage) = &usage {
                    self.span.record("gen_ai.usage.input_tokens", usage.prompt);
                    self.span.record("gen_ai.usage.output_tokens", usage.completion);
                }
                metrics::model_call_finished(&self.provider, &self.model, "OK", elapsed, usage.as_ref());
            }
            Err(code) => {
                record_error(&self.span, code);
                metrics::model_call_finished(&self.provider, &self.model, code_name(code), elapsed, None);
            }
        }
    }
}

impl Drop for ModelCall {
    fn drop(&mut self) {
        if !self.finished {
            record_error(&self.span, Code::Cancelled);
            metrics::model_call_finished(
                &self.provider,
                &self.model,
                code_name(Code::Cancelled),
                self.started.elapsed(),
                None,
            );
        }
    }
}

/// The metric label of a tool the agent does not have (the model made the name up).
pub const UNKNOWN_TOOL: &str = "(unknown)";

/// One tool call (a function call of a model reply, executed by the runner).
pub struct ToolCall {
    /// The metric label: the tool's name, or [`UNKNOWN_TOOL`].
    tool: String,
    span: Span,
    started: Instant,
    finished: bool,
}

impl ToolCall {
    /// `known`: the agent has a tool of that name. Only then is the name a metric
    /// label, since a model can send any name.
    pub fn start(name: &str, call_id: &str, known: bool) -> ToolCall {
        let span = tracing::info_span!(
            "tool_call",
            otel.name = %format_args!("execute_tool {name}"),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = name,
            gen_ai.tool.call.id = call_id,
            otel.status_code = Empty,
            error.type = Empty,
        );
        ToolCall {
            tool: if known {
                name.to_string()
            } else {
                UNKNOWN_TOOL.to_string()
            },
            span,
            started: Instant::now(),
            finished: false,
        }
    }

    /// Records a call of a tool the agent does not have (NOT_FOUND; the model gets an
    /// error response, the run goes on).
    pub fn unknown(name: &str, call_id: &str) {
        ToolCall::start(name, call_id, false).finish(Some(Code::NotFound));
    }

    /// Execute the tool inside this span: an HTTP tool's request carries its trace context.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// `error`: the gRPC code of the tool's failure, None on success.
    pub fn finish(mut self, error: Option<Code>) {
        self.finished = true;
        if let Some(code) = error {
            record_error(&self.span, code);
        }
        metrics::tool_call_finished(&self.tool, outcome(error), self.started.elapsed());
    }
}

impl Drop for ToolCall {
    fn drop(&mut self) {
        if !self.finished {
            record_error(&self.span, Code::Cancelled);
            metrics::tool_call_finished(&self.tool, code_name(Code::Cancelled), self.started.elapsed());
        }
    }
}

/// One call of a hook (an HTTP endpoint of the agents file called at a callback
/// point: `before_model`, `after_tool`, ...), from the request to its reply applied.
pub struct HookCall {
    hook: String,
    point: &'static str,
    span: Span,
    started: Instant,
    finished: bool,
}

impl HookCall {
    /// `point`: the callback point's name, from code (`before_tool`, ...).
    pub fn start(hook: &str, point: &'static str) -> HookCall {
        let span = tracing::info_span!(
            "hook_call",
            otel.name = %format_args!("hook {hook} {point}"),
            otel.kind = "client",
            adk.hook.name = hook,
            adk.hook.point = point,
            otel.status_code = Empty,
            error.type = Empty,
        );
        HookCall {
            hook: hook.to_string(),
            point,
            span,
            started: Instant::now(),
            finished: false,
        }
    }

    /// Call the hook inside this span: its request carries the trace context.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// `error`: the gRPC code of the hook's failure, None when it answered.
    pub fn finish(mut self, error: Option<Code>) {
        self.finished = true;
        if let Some(code) = error {
            record_error(&self.span, code);
        }
        metrics::hook_call_finished(&self.hook, self.point, outcome(error), self.started.elapsed());
    }
}

impl Drop for HookCall {
    fn drop(&mut self) {
        if !self.finished {
            record_error(&self.span, Code::Cancelled);
            metrics::hook_call_finished(
                &self.hook,
                self.point,
                code_name(Code::Cancelled),
                self.started.elapsed(),
            );
        }
    }
}

/// One agent invocation, from its start (the user's message stored) to its end.
/// Its span names the app, user, session and invocation, and is the parent of the
/// invocation's model calls, tool calls and store operations.
pub struct Invocation {
    app: String,
    span: Span,
    finished: bool,
}

impl Invocation {
    pub fn start(app: &str, user: &str, session: &str, invocation: &str) -> Invocation {
        let span = tracing::info_span!(
            "invocation",
            otel.name = %format_args!("invoke_agent {app}"),
            gen_ai.operation.name = "invoke_agent",
            app,
            user,
            session,
            invocation,
            otel.status_code = Empty,
            error.type = Empty,
        );
        metrics::invocation_started(app);
        Invocation {
            app: app.to_string(),
            span,
            finished: false,
        }
    }

    /// Drive the invocation inside this span.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// `error`: the gRPC code the invocation failed with, None when it completed.
    pub fn finish(mut self, error: Option<Code>) {
        self.finished = true;
        if let Some(code) = error {
            record_error(&self.span, code);
        }
        metrics::invocation_finished(&self.app, outcome(error));
    }
}

impl Drop for Invocation {
    fn drop(&mut self) {
        if !self.finished {
            record_error(&self.span, Code::Cancelled);
            metrics::invocation_finished(&self.app, code_name(Code::Cancelled));
        }
    }
}
