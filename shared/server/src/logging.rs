//! Tracing setup: text or JSON lines on stderr (level from `RUST_LOG`), plus
//! OpenTelemetry export when the environment asks for it (see otel.rs).

use crate::args::{LogArgs, LogFormat};
use crate::otel::{self, RpcIds, ServiceInfo, Telemetry};
use opentelemetry_sdk::trace::SdkTracer;
use std::io::IsTerminal;
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::{DefaultVisitor, Writer};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Installs the global subscriber. Without `RUST_LOG` the level is `info`; an
/// unparsable `RUST_LOG` directive is skipped rather than silencing all logs.
///
/// With `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans at INFO and above are also
/// exported over OTLP/gRPC as `service` (whatever `RUST_LOG` says: it filters
/// log lines only); [`Telemetry::shutdown`] flushes them at exit. Must run inside
/// the tokio runtime. An OTLP configuration that cannot work (a malformed
/// endpoint, an unsupported protocol) is an error; the log lines are set up
/// anyway, so the caller can report it.
///
/// Calling it again (tests starting several servers) leaves the first subscriber in place.
pub fn init_tracing(args: &LogArgs, service: ServiceInfo) -> anyhow::Result<Telemetry> {
    let (telemetry, tracer, failure) = if otel::export_requested() {
        match otel::start(service) {
            Ok((telemetry, tracer)) => (telemetry, Some(tracer), None),
            Err(err) => (Telemetry::default(), None, Some(err)),
        }
    } else {
        (Telemetry::default(), None, None)
    };

    // Err only means a subscriber is already installed, which is fine.
    let _ = subscriber(args, tracer, std::env::var("RUST_LOG").ok().as_deref()).try_init();
    match failure {
        Some(err) => Err(err),
        None => Ok(telemetry),
    }
}

/// The subscriber [`init_tracing`] installs: log lines as `rust_log` (`RUST_LOG`) says,
/// and the trace export when `tracer` is given.
fn subscriber(
    args: &LogArgs,
    tracer: Option<SdkTracer>,
    rust_log: Option<&str>,
) -> impl Subscriber + Send + Sync + 'static {
    let mut filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .parse_lossy(rust_log.unwrap_or_default());
    // The choke-point spans of adk-grpc-telemetry (one per Redis round trip, model call,
    // tool call, invocation) are for the trace export. Log lines keep out of them
    // unless RUST_LOG names them, so without an exporter no layer wants them and
    // they cost next to nothing; the log lines inside still carry the RPC's context.
    if !rust_log.is_some_and(|directives| directives.contains("adk_grpc_telemetry"))
        && let Ok(directive) = "adk_grpc_telemetry=warn".parse()
    {
        filter = filter.add_directive(directive);
    }
    // stderr keeps stdout free for anything a wrapper script may want to parse.
    // Colours only for a person at a terminal, never into log files or collectors.
    let lines = match args.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .fmt_fields(TextFields)
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
    };
    // Spans go to the exporter at INFO and above, and to nothing without one. Both
    // layers below sit behind a filter that is OFF without an exporter: a layer
    // without a filter (an `Option` layer that is `None` included) is interested in
    // every span and event at any level, so each would be built and registered per
    // request although nothing listens to it.
    let export_level = if tracer.is_some() {
        LevelFilter::INFO
    } else {
        LevelFilter::OFF
    };
    let spans = tracer
        .map(|tracer| {
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                // tracing's own bookkeeping (source location, thread, module, busy/idle
                // nanoseconds) would add bulk to every span, not insight.
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_tracked_inactivity(false)
        })
        .with_filter(export_level);
    // RpcIds only reads the spans the exporter gets.
    let ids = RpcIds::new().with_filter(export_level);
    tracing_subscriber::registry().with(lines).with(spans).with(ids)
}

/// The text format's fields: tracing-subscriber's default, minus the `otel.*`
/// fields that only steer the OpenTelemetry export (span name, kind, status),
/// which would repeat on every log line inside an RPC.
struct TextFields;

impl<'a> MakeVisitor<Writer<'a>> for TextFields {
    type Visitor = SkipOtelFields<DefaultVisitor<'a>>;

    fn make_visitor(&self, target: Writer<'a>) -> Self::Visitor {
        SkipOtelFields(DefaultVisitor::new(target, true))
    }
}

struct SkipOtelFields<V>(V);

fn shown(field: &Field) -> bool {
    !field.name().starts_with("otel.")
}

impl<V: Visit> Visit for SkipOtelFields<V> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if shown(field) {
            self.0.record_f64(field, value);
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        if shown(field) {
            self.0.record_i64(field, value);
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        if shown(field) {
            self.0.record_u64(field, value);
        }
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        if shown(field) {
            self.0.record_bool(field, value);
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if shown(field) {
            self.0.record_str(field, value);
        }
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if shown(field) {
            self.0.record_error(field, value);
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if shown(field) {
            self.0.record_debug(field, value);
        }
    }
}

impl<V: VisitOutput<std::fmt::Result>> VisitOutput<std::fmt::Result> for SkipOtelFields<V> {
    fn finish(self) -> std::fmt::Result {
        self.0.finish()
    }
}

impl<V: VisitFmt> VisitFmt for SkipOtelFields<V> {
    fn writer(&mut self) -> &mut dyn std::fmt::Write {
        self.0.writer()
    }
}

/// A binary's exit: 0 on success; otherwise the error with its causes logged on one
/// line (`cannot open the session store …: connection refused`) and 1.
pub fn exit_code(result: anyhow::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A binary's whole life after parsing its flags: logging and tracing up, `body`
/// run, the last spans flushed to the collector, and the exit code (errors logged
/// with their causes). Every `main` is this, so it is written once.
pub async fn run_binary(
    log: &LogArgs,
    service: ServiceInfo,
    body: impl std::future::Future<Output = anyhow::Result<()>>,
) -> std::process::ExitCode {
    let telemetry = match init_tracing(log, service) {
        Ok(telemetry) => telemetry,
        Err(err) => return exit_code(Err(err)),
    };
    // `#[tokio::main]` starts one worker per CPU this process may run on (its CPU
    // affinity and cgroup quota, through `std::thread::available_parallelism`), not one
    // per CPU of the host; `TOKIO_WORKER_THREADS` overrides it. Said once, so a
    // deployment can see what it got.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        tracing::info!(worker_threads = runtime.metrics().num_workers(), "runtime started");
    }
    let result = body.await;
    // The last spans (the drain's included) reach the collector before the exit.
    telemetry.shutdown().await;
    exit_code(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    /// Without an exporter nothing below INFO listens (RUST_LOG unset): the DEBUG and
    /// TRACE spans and events of every crate (h2's, tonic's, ours) are off at their
    /// call sites, so a request builds none of them.
    #[test]
    fn without_an_exporter_nothing_below_info_is_built() {
        tracing::subscriber::with_default(subscriber(&LogArgs::default(), None, None), || {
            assert!(tracing::enabled!(Level::INFO), "INFO lines are logged");
            assert!(!tracing::enabled!(Level::DEBUG));
            assert!(!tracing::enabled!(target: "h2::proto", Level::TRACE));
            assert!(tracing::span!(Level::DEBUG, "rpc").is_disabled());
            // The choke-point spans (a Redis round trip…) are for the export only.
            assert!(tracing::info_span!(target: "adk_grpc_telemetry::spans", "redis").is_disabled());
        });
    }
}
