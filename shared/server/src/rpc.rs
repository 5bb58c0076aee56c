//! One span and one set of metrics per gRPC call, for every service a
//! [`crate::GrpcServer`] serves (a tower layer around all routes, so no handler
//! has to do anything).
//!
//! The span is the OpenTelemetry server span of the call: named after the method
//! (`adk.v1.SessionService/CreateSession`), with `rpc.*` attributes and the gRPC
//! status code, and parented on the W3C trace context (`traceparent`,
//! `tracestate`) the client sent in its metadata. The response body is polled
//! inside the span, so everything a streaming call does after its handler
//! returned (a Run's agents, model and tool calls; a watch's reads) belongs to
//! the call's trace, and the call ends when its stream does.
//!
//! The status code is read where gRPC puts it: in the response headers of a
//! trailers-only response (an error before any message), otherwise in the
//! trailers. A call whose response is dropped before either (the client
//! cancelled or went away) counts as CANCELLED.

use adk_grpc_telemetry::metrics::{self, ActiveStream};
use adk_grpc_telemetry::{code_name, extract_context};
use http_body::Frame;
use opentelemetry::trace::TraceContextExt;
use prost::Message;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;
use tonic::body::Body;
use tonic::codegen::{Bytes, Service, http};
use tonic::{Code, Status};
use tower_layer::Layer;
use tracing::field::Empty;
use tracing::{Instrument, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The metric label of a path that names no method this server knows: clients
/// choose paths, so they never become label values.
const UNKNOWN_METHOD: &str = "unknown";

/// The methods a server knows, from the descriptor sets it also serves through
/// reflection: their paths are the `method` label values, and whether each
/// streams decides the active-streams gauge.
#[derive(Debug, Default)]
pub(crate) struct Methods {
    /// Path (`/adk.v1.SessionService/WatchSession`) -> streams (client or server side).
    streaming: HashMap<Arc<str>, bool>,
}

impl Methods {
    /// The methods described by encoded `FileDescriptorSet`s. A set that does not
    /// decode (it is compiled in, so it would be a build bug) is skipped: its
    /// methods are then counted as `unknown`, which loses detail, not calls.
    pub(crate) fn from_descriptor_sets(sets: &[&[u8]]) -> Methods {
        let mut streaming = HashMap::new();
        for bytes in sets {
            let Ok(set) = prost_types::FileDescriptorSet::decode(*bytes) else {
                tracing::warn!(
                    "a compiled-in descriptor set does not decode; its methods show as `unknown` in metrics"
                );
                continue;
            };
            for file in &set.file {
                for service in &file.service {
                    let prefix = match file.package() {
                        "" => service.name().to_string(),
                        package => format!("{package}.{}", service.name()),
                    };
                    for method in &service.method {
                        let path: Arc<str> = format!("/{prefix}/{}", method.name()).into();
                        let streams = method.client_streaming() || method.server_streaming();
                        streaming.insert(path, streams);
                    }
                }
            }
        }
        Methods { streaming }
    }

    /// The method's label and whether it streams.
    fn lookup(&self, path: &str) -> (Arc<str>, bool) {
        match self.streaming.get_key_value(path) {
            Some((label, streams)) => (label.clone(), *streams),
            None => (Arc::from(UNKNOWN_METHOD), false),
        }
    }
}

/// The tower layer [`crate::GrpcServer`] puts around its routes.
#[derive(Debug, Clone)]
pub(crate) struct RpcLayer {
    methods: Arc<Methods>,
}

impl RpcLayer {
    pub(crate) fn new(methods: Methods) -> Self {
        RpcLayer {
            methods: Arc::new(methods),
        }
    }
}

impl<S> Layer<S> for RpcLayer {
    type Service = RpcService<S>;

    fn layer(&self, inner: S) -> RpcService<S> {
        RpcService {
            inner,
            methods: self.methods.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct RpcService<S> {
    inner: S,
    methods: Arc<Methods>,
}

impl<S> Service<http::Request<Body>> for RpcService<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let path = request.uri().path();
        let (method, streams) = self.methods.lookup(path);
        let span = rpc_span(path);
        // The client's trace context, if it sent one: this call's span continues its trace.
        let parent = extract_context(request.headers());
        if parent.span().span_context().is_valid() {
            // Err only when traces are not exported (no OpenTelemetry layer): nothing to parent then.
            let _ = span.set_parent(parent);
        }
        let call = Call {
            active: streams.then(|| metrics::active_stream(&method)),
            method,
            started: Instant::now(),
            span: span.clone(),
            header_code: None,
            finished: false,
        };
        let response = self.inner.call(request);
        Box::pin(async move {
            let mut call = call;
            let response = response.instrument(span).await?;
            let (parts, body) = response.into_parts();
            // A trailers-only response (an error before any message) has its status in
            // the headers: the call is over now, whenever its empty body is dropped.
            call.header_code = grpc_status(&parts.headers);
            if let Some(code) = call.header_code {
                call.finish(code);
            }
            Ok(http::Response::from_parts(
                parts,
                Body::new(ObservedBody { body, call }),
            ))
        })
    }
}

/// The call's span. Health checks and reflection get theirs at DEBUG: probes every
/// few seconds would otherwise flood the traces and the logs with calls nobody reads.
fn rpc_span(path: &str) -> Span {
    let name = path.strip_prefix('/').unwrap_or(path);
    let (service, method) = name.split_once('/').unwrap_or(("", name));
    if service == "grpc.health.v1.Health" || service.starts_with("grpc.reflection.") {
        tracing::debug_span!(
            "rpc",
            otel.name = name,
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.service = service,
            rpc.method = method,
            rpc.grpc.status_code = Empty,
            otel.status_code = Empty,
        )
    } else {
        tracing::info_span!(
            "rpc",
            otel.name = name,
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.service = service,
            rpc.method = method,
            rpc.grpc.status_code = Empty,
            otel.status_code = Empty,
        )
    }
}

/// Whether a span is the per-call span made here.
pub(crate) fn is_rpc_span(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.name() == "rpc" && metadata.target() == module_path!()
}

/// `grpc-status` of a header map (response headers or trailers).
fn grpc_status(headers: &http::HeaderMap) -> Option<Code> {
    headers
        .get("grpc-status")
        .map(|value| Code::from_bytes(value.as_bytes()))
}

/// One call in progress: recorded once, when its status is known or it is dropped.
struct Call {
    method: Arc<str>,
    started: Instant,
    span: Span,
    /// Holds the active-streams gauge up for a streaming method until the call ends.
    active: Option<ActiveStream>,
    header_code: Option<Code>,
    finished: bool,
}

impl Call {
    fn finish(&mut self, code: Code) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.span.record("rpc.grpc.status_code", code as i64);
        if is_server_error(code) {
            self.span.record("otel.status_code", "error");
        }
        metrics::rpc_finished(&self.method, code_name(code), self.started.elapsed());
        // Only now: a scrape never sees a stream gone from the gauge but not yet counted.
        self.active = None;
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // Dropped before the trailers: the client reset the stream, unless the
        // status came in the headers (then the body was simply never read).
        let code = self.header_code.unwrap_or(Code::Cancelled);
        self.finish(code);
    }
}

/// The codes for which a server span's status is ERROR (OpenTelemetry's gRPC
/// conventions): failures of the server, not of the client's request.
fn is_server_error(code: Code) -> bool {
    matches!(
        code,
        Code::Unknown
            | Code::DeadlineExceeded
            | Code::Unimplemented
            | Code::Internal
            | Code::Unavailable
            | Code::DataLoss
    )
}

/// The response body, polled inside the call's span; finishes the call when the
/// trailers (or the end, or an error) come through.
struct ObservedBody {
    body: Body,
    call: Call,
}

impl http_body::Body for ObservedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let frame = {
            let _entered = this.call.span.enter();
            ready!(Pin::new(&mut this.body).poll_frame(cx))
        };
        match &frame {
            Some(Ok(frame)) => {
                if let Some(code) = frame.trailers_ref().and_then(grpc_status) {
                    this.call.finish(code);
                }
            }
            Some(Err(status)) => this.call.finish(status.code()),
            // The end without trailers: the status came in the headers, or none came at all.
            None => {
                let code = this.call.header_code.unwrap_or(Code::Unknown);
                this.call.finish(code);
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_come_from_the_descriptors_and_unknown_paths_share_one_label() {
        let methods = Methods::from_descriptor_sets(&[adk_grpc_proto::FILE_DESCRIPTOR_SET, &[0xff, 0xff]]);
        let (label, streams) = methods.lookup("/adk.v1.SessionService/WatchSession");
        assert_eq!((&*label, streams), ("/adk.v1.SessionService/WatchSession", true));
        let (label, streams) = methods.lookup("/adk.v1.SessionService/GetSession");
        assert_eq!((&*label, streams), ("/adk.v1.SessionService/GetSession", false));
        assert!(methods.lookup("/adk.v1.ArtifactService/UploadArtifact").1);
        assert!(methods.lookup("/adk.v1.AgentRunner/Run").1);
        assert_eq!(&*methods.lookup("/no.Such/Method").0, UNKNOWN_METHOD);
    }
}
