//! W3C trace context (`traceparent`, `tracestate`) in HTTP/2 and HTTP/1 headers,
//! through OpenTelemetry's global propagator. adk-grpc-server-kit installs the W3C
//! propagator when it exports traces; until then the global one is a no-op, so
//! without OTLP nothing is read or written.

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Adds the current span's trace context to an outgoing request's headers, so the
/// receiver (a model provider, an HTTP tool) continues the caller's trace.
pub fn inject_current_context(headers: &mut HeaderMap) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut HeaderInjector(headers));
    });
}

/// The remote parent an incoming request names in its headers (gRPC metadata are
/// HTTP/2 headers); an empty context when it names none or the propagator is off.
pub fn extract_context(headers: &HeaderMap) -> opentelemetry::Context {
    opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&HeaderExtractor(headers)))
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        // The propagator only writes well-formed names and values; anything else is skipped.
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(key.as_bytes()), HeaderValue::from_str(&value)) {
            self.0.insert(name, value);
        }
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}
