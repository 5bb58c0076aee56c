//! OpenTelemetry trace export: when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, `tracing` spans are exported over
//! OTLP/gRPC through tracing-opentelemetry, and W3C trace context is read from
//! incoming calls and written on outgoing requests (adk-grpc-telemetry). Without it,
//! nothing is installed and nothing changes.
//!
//! The standard variables are honoured by the SDK itself: `OTEL_EXPORTER_OTLP_HEADERS`,
//! `_TIMEOUT`, `_COMPRESSION`, `_INSECURE`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_BSP_*`; `OTEL_SDK_DISABLED=true` turns export off.

use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry::{Key, KeyValue};
use opentelemetry_otlp::WithTonicConfig;
use opentelemetry_otlp::tonic_types::transport::ClientTlsConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::resource::{EnvResourceDetector, ResourceDetector};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::sync::OnceLock;
use std::time::Duration;
use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Subscriber, dispatcher::WeakDispatch, field::Field};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// How long the exit waits for the last spans to reach the collector.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// What a binary reports itself as: `service.name` (unless `OTEL_SERVICE_NAME` or
/// `OTEL_RESOURCE_ATTRIBUTES` name it) and `service.version`.
#[derive(Debug, Clone, Copy)]
pub struct ServiceInfo {
    pub name: &'static str,
    pub version: &'static str,
}

/// The running exporter, if any. [`Telemetry::shutdown`] flushes it; call it when
/// the server has stopped.
#[must_use = "shut it down at exit so the last spans are exported"]
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// True while spans are exported.
    pub fn is_exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports the spans still queued and stops the exporter, waiting at most 5 s
    /// (a collector that is gone must not hold up the exit).
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        // Blocking (the batch processor's thread does the export), so off the async
        // workers, which keep driving the exporter's connection meanwhile.
        let flush = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT));
        match tokio::time::timeout(FLUSH_TIMEOUT + Duration::from_secs(1), flush).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(err))) => tracing::warn!("could not export the last spans: {err}"),
            Ok(Err(err)) => tracing::warn!("could not export the last spans: {err}"),
            Err(_) => tracing::warn!("the last spans were not exported within {FLUSH_TIMEOUT:?}; exiting anyway"),
        }
    }
}

/// Whether the environment asks for OTLP export.
pub(crate) fn export_requested() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|value| !value.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) && !disabled
}

/// The exporter, the provider and its tracer; installs the W3C propagator. Must
/// run inside the tokio runtime (the exporter's channel lives there). Fails for a
/// malformed endpoint or header.
pub(crate) fn start(service: ServiceInfo) -> anyhow::Result<(Telemetry, SdkTracer)> {
    for variable in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
        if let Ok(protocol) = std::env::var(variable)
            && !protocol.trim().is_empty()
            && protocol.trim() != "grpc"
        {
            anyhow::bail!("{variable}={protocol} is not supported: traces are exported over OTLP/gRPC only (grpc)");
        }
    }
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    if collector_uses_tls() {
        // tonic's default TLS settings trust no root at all: check an https:// collector
        // against the system's CA store (rustls with ring; SSL_CERT_FILE is honoured).
        exporter = exporter.with_tls_config(ClientTlsConfig::new().with_native_roots());
    }
    let exporter = exporter
        .build()
        .map_err(|err| anyhow::anyhow!("cannot set up the OTLP trace exporter: {err}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource(service))
        .build();
    let tracer = provider.tracer("adk");
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    Ok((
        Telemetry {
            provider: Some(provider),
        },
        tracer,
    ))
}

/// Whether the collector's endpoint (the traces one if set, else the general one) is https://.
fn collector_uses_tls() -> bool {
    let endpoint = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
    endpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| endpoint("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_some_and(|url| url.trim().to_ascii_lowercase().starts_with("https://"))
}

/// The SDK's resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `telemetry.sdk.*`)
/// with the binary's name and version where the environment names none.
fn resource(service: ServiceInfo) -> Resource {
    let from_env = EnvResourceDetector::new().detect();
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|name| !name.trim().is_empty())
        || from_env.get(&Key::new("service.name")).is_some();
    let mut builder = Resource::builder();
    if !named {
        builder = builder.with_service_name(service.name);
    }
    if from_env.get(&Key::new("service.version")).is_none() {
        builder = builder.with_attribute(KeyValue::new("service.version", service.version));
    }
    builder.build()
}

/// The ids an RPC works on, as span fields anywhere inside it name them.
const ID_FIELDS: [&str; 4] = ["app", "user", "session", "invocation"];

/// Copies the app, user, session and invocation ids that spans inside an RPC
/// record (the handlers' `#[instrument]` fields, the runner's invocation span)
/// onto the RPC's own server span as attributes, so a trace backend finds the
/// call by them without opening its children. The children keep them too.
///
/// Installed in every subscriber (tracing-subscriber's `Option<Layer>` would not pass
/// on the dispatch this layer needs), behind a filter that lets nothing through unless
/// spans are exported (see logging.rs).
pub(crate) struct RpcIds {
    dispatch: OnceLock<WeakDispatch>,
}

impl RpcIds {
    pub(crate) fn new() -> Self {
        RpcIds {
            dispatch: OnceLock::new(),
        }
    }

    fn copy<S>(&self, id: &Id, ids: Vec<KeyValue>, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if ids.is_empty() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let Some(rpc) = span.scope().skip(1).find(|s| crate::rpc::is_rpc_span(s.metadata())) else {
            return;
        };
        let rpc_id = rpc.id();
        drop(span);
        let Some(dispatch) = self.dispatch.get().and_then(WeakDispatch::upgrade) else {
            return;
        };
        if let Some(context) = tracing_opentelemetry::get_otel_context(&rpc_id, &dispatch) {
            context.span().set_attributes(ids);
        }
    }
}

impl<S> Layer<S> for RpcIds
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_register_dispatch(&self, subscriber: &Dispatch) {
        let _ = self.dispatch.set(subscriber.downgrade());
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut ids = IdVisitor::default();
        attrs.record(&mut ids);
        self.copy(id, ids.0, &ctx);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut ids = IdVisitor::default();
        values.record(&mut ids);
        self.copy(id, ids.0, &ctx);
    }
}

#[derive(Default)]
struct IdVisitor(Vec<KeyValue>);

impl tracing::field::Visit for IdVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if ID_FIELDS.contains(&field.name()) && !value.is_empty() {
            self.0.push(KeyValue::new(field.name(), value.to_string()));
        }
    }

    /// `%value` fields arrive here; their Debug is their Display.
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if ID_FIELDS.contains(&field.name()) {
            let text = format!("{value:?}");
            if !text.is_empty() {
                self.0.push(KeyValue::new(field.name(), text));
            }
        }
    }
}
