//! OpenTelemetry end to end: the real binaries export their spans over OTLP/gRPC
//! to a fake collector of the test's own (a tonic `TraceService` on loopback).
//! A client sends a W3C `traceparent` in its gRPC metadata; the server's spans
//! continue that trace, and the runner passes it on to the model provider and to
//! HTTP tools.

use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status};

/// The client's trace and span (`00-<trace>-<span>-01`: sampled).
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN_ID: &str = "00f067aa0ba902b7";
const SERVER_SPAN: i32 = 2; // opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER
const CLIENT_SPAN: i32 = 3; // SPAN_KIND_CLIENT

/// One exported span, flattened for assertions.
#[derive(Debug, Clone)]
struct Collected {
    /// The resource's attributes (`service.name`, ...).
    resource: HashMap<String, String>,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    kind: i32,
    attributes: HashMap<String, String>,
    /// The span's status code: 0 unset, 1 ok, 2 error.
    status: i32,
    /// Whether it arrived after the test marked the server's shutdown as begun.
    after_shutdown: bool,
}

impl Collected {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The fake collector: records every span it is sent.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Collected>>>,
    /// Set by a test just before it stops the server, so each span records which side
    /// of the shutdown it arrived on.
    shutdown_begun: Arc<std::sync::atomic::AtomicBool>,
}

fn text(value: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn attributes(list: &[KeyValue]) -> HashMap<String, String> {
    list.iter().map(|kv| (kv.key.clone(), text(&kv.value))).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let after_shutdown = self.shutdown_begun.load(std::sync::atomic::Ordering::SeqCst);
        let mut spans = self.spans.lock().expect("lock");
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans
                .resource
                .as_ref()
                .map(|r| attributes(&r.attributes))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push(Collected {
                        resource: resource.clone(),
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        name: span.name.clone(),
                        kind: span.kind,
                        attributes: attributes(&span.attributes),
                        status: span.status.as_ref().map_or(0, |s| s.code),
                        after_shutdown,
                    });
                }
            }
        }
        Ok(Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

impl Collector {
    /// Serves on a free loopback port; returns the endpoint for OTEL_EXPORTER_OTLP_ENDPOINT.
    async fn start() -> (Collector, String) {
        let collector = Collector::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let service = TraceServiceServer::new(collector.clone());
        tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
        });
        (collector, endpoint)
    }

    fn spans(&self) -> Vec<Collected> {
        self.spans.lock().expect("lock").clone()
    }

    /// Waits (10 s at most) until the spans of the test's trace satisfy `done`; returns them.
    async fn wait_for(&self, what: &str, done: impl Fn(&[Collected]) -> bool) -> Vec<Collected> {
        adk_grpc_testkit::eventually(Duration::from_secs(10), || async {
            let spans: Vec<Collected> = self.spans().into_iter().filter(|s| s.trace_id == TRACE_ID).collect();
            if done(&spans) {
                Ok(spans)
            } else {
                Err(format!(
                    "the collector never got {what}; spans of the trace: {spans:#?}"
                ))
            }
        })
        .await
    }
}

/// The environment that turns export on, to `endpoint`, with a short batch delay.
fn otel_env(endpoint: &str) -> Vec<(String, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint.into()),
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()),
    ]
}

/// A request carrying the client's trace context in its metadata.
fn traced<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN_ID}-01");
    request.metadata_mut().insert(
        "traceparent",
        MetadataValue::try_from(traceparent.as_str()).expect("ascii"),
    );
    request
}

fn create_request(session: &str) -> pb::CreateSessionRequest {
    pb::CreateSessionRequest {
        app_name: "otel_app".into(),
        user_id: "alice".into(),
        session_id: session.into(),
        ..Default::default()
    }
}

fn find<'a>(spans: &'a [Collected], name: &str) -> &'a Collected {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
}

#[tokio::test]
async fn rpc_spans_continue_the_clients_trace_and_name_the_service_and_the_session() {
    let (collector, endpoint) = Collector::start().await;
    let server = ServiceProcess::spawn("adk-server", &[], &otel_env(&endpoint)).await;
    let mut client = SessionServiceClient::connect(server.endpoint()).await.expect("connect");

    client
        .create_session(traced(create_request("s1")))
        .await
        .expect("CreateSession");
    // An RPC that fails on the client's account: NOT_FOUND, not an error of the server.
    let missing = client
        .get_session(traced(pb::GetSessionRequest {
            app_name: "otel_app".into(),
            user_id: "alice".into(),
            session_id: "nope".into(),
            ..Default::default()
        }))
        .await
        .expect_err("no such session");
    assert_eq!(missing.code(), tonic::Code::NotFound);

    let spans = collector
        .wait_for("both RPC spans", |spans| {
            [
                "adk.v1.SessionService/CreateSession",
                "adk.v1.SessionService/GetSession",
            ]
            .iter()
            .all(|name| spans.iter().any(|s| s.name == *name))
        })
        .await;
    let create = find(&spans, "adk.v1.SessionService/CreateSession");
    assert_eq!(create.parent_span_id, CLIENT_SPAN_ID, "the client's span is the parent");
    assert_eq!(create.kind, SERVER_SPAN);
    assert_eq!(
        create.resource.get("service.name").map(String::as_str),
        Some("adk-server")
    );
    assert_eq!(
        create.resource.get("service.version").map(String::as_str),
        Some(env!("CARGO_PKG_VERSION"))
    );
    for (key, value) in [
        ("rpc.system", "grpc"),
        ("rpc.service", "adk.v1.SessionService"),
        ("rpc.method", "CreateSession"),
        ("rpc.grpc.status_code", "0"),
        // Recorded by the handler; copied onto the server span.
        ("app", "otel_app"),
        ("user", "alice"),
        ("session", "s1"),
    ] {
        assert_eq!(create.attr(key), Some(value), "{key} of {create:#?}");
    }
    // The handler's own span is a child of the RPC span and carries the ids too.
    let handler = find(&spans, "create_session");
    assert_eq!(handler.parent_span_id, create.span_id);
    assert_eq!(handler.attr("session"), Some("s1"));

    let get = find(&spans, "adk.v1.SessionService/GetSession");
    assert_eq!(get.parent_span_id, CLIENT_SPAN_ID);
    assert_eq!(get.attr("rpc.grpc.status_code"), Some("5"));
    assert_eq!(
        get.status, 0,
        "a client's mistake leaves the server span's status unset"
    );
}

#[tokio::test]
async fn redis_operations_are_spans_of_the_rpc_naming_the_command_and_no_values() {
    let redis = RedisServer::start().await;
    let (collector, endpoint) = Collector::start().await;
    let args = ["--store-url".to_string(), redis.url()];
    let server = ServiceProcess::spawn("adk-session-server", &args, &otel_env(&endpoint)).await;
    let mut client = SessionServiceClient::connect(server.endpoint()).await.expect("connect");
    client
        .create_session(traced(create_request("s-redis")))
        .await
        .expect("CreateSession");

    let spans = collector
        // The script's span ends first and may be exported in an earlier batch than the
        // handler's and the RPC's: wait for all three.
        .wait_for("the create script's, handler's and RPC's spans", |spans| {
            ["script:create", "create_session", "adk.v1.SessionService/CreateSession"]
                .iter()
                .all(|name| spans.iter().any(|s| s.name == *name))
        })
        .await;
    let rpc = find(&spans, "adk.v1.SessionService/CreateSession");
    let handler = find(&spans, "create_session");
    let script = find(&spans, "script:create");
    assert_eq!(script.parent_span_id, handler.span_id);
    assert_eq!(handler.parent_span_id, rpc.span_id);
    assert_eq!(script.kind, CLIENT_SPAN);
    assert_eq!(script.attr("db.system.name"), Some("redis"));
    assert_eq!(script.attr("db.operation.name"), Some("EVALSHA"));
    assert_eq!(script.attr("db.stored_procedure.name"), Some("create"));
    assert_eq!(
        rpc.resource.get("service.name").map(String::as_str),
        Some("adk-session-server")
    );
    // Names only: no key, no value of the session in any Redis span.
    for span in spans.iter().filter(|s| s.attr("db.system.name").is_some()) {
        for value in span.attributes.values() {
            assert!(!value.contains("s-redis") && !value.contains("alice"), "{span:#?}");
        }
    }
}

#[tokio::test]
async fn spans_still_queued_are_exported_on_a_graceful_shutdown() {
    let (collector, endpoint) = Collector::start().await;
    // A batch delay far longer than the test: only the shutdown's flush can send the span.
    let env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), endpoint),
        ("OTEL_BSP_SCHEDULE_DELAY".to_string(), "600000".to_string()),
    ];
    let mut server = ServiceProcess::spawn("adk-server", &[], &env).await;
    let mut client = SessionServiceClient::connect(server.endpoint()).await.expect("connect");
    client
        .create_session(traced(create_request("s-flush")))
        .await
        .expect("CreateSession");
    drop(client);

    // Each span records whether it arrived before or after the shutdown began: the RPC's
    // span must come, and only after, so it was still queued and the exit's flush sent it.
    collector
        .shutdown_begun
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let status = server.terminate().await;
    assert!(status.success(), "graceful exit: {status:?}\n{}", server.tail_log(20));
    let spans = collector.spans();
    assert!(
        spans
            .iter()
            .any(|s| s.name == "adk.v1.SessionService/CreateSession" && s.trace_id == TRACE_ID),
        "the RPC's span was flushed at exit: {spans:#?}"
    );
    assert!(
        spans.iter().all(|s| s.after_shutdown),
        "nothing is exported before the batch is due, only at exit: {spans:#?}"
    );
}

/// A tool server that answers with a fixed reading and records the `traceparent` it got.
async fn traced_tool_server() -> (String, Arc<Mutex<Vec<Option<String>>>>) {
    use axum::http::HeaderMap;
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let recorded = seen.clone();
    let app = axum::Router::new().route(
        "/weather",
        axum::routing::post(move |headers: HeaderMap| {
            let recorded = recorded.clone();
            async move {
                let traceparent = headers
                    .get("traceparent")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                recorded.lock().expect("lock").push(traceparent);
                (
                    [("content-type", "application/json")],
                    json!({"temp_c": 21}).to_string(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/weather", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, seen)
}

/// `00-<trace>-<parent>-<flags>` -> (trace, parent).
fn parse_traceparent(header: &str) -> (String, String) {
    let fields: Vec<&str> = header.split('-').collect();
    assert_eq!(fields.len(), 4, "{header}");
    (fields[1].to_string(), fields[2].to_string())
}

#[tokio::test]
async fn a_run_passes_the_clients_trace_to_the_model_provider_and_the_http_tool() {
    let (collector, endpoint) = Collector::start().await;
    let provider = FakeServer::start().await;
    let (tool_url, tool_traceparents) = traced_tool_server().await;
    let agents = format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}' }}
tools:
  get_weather:
    kind: http
    url: '{tool_url}'
    description: Current weather of a city.
    parameters: {{ type: object, properties: {{ city: {{ type: string }} }}, required: [city] }}
apps:
  weather:
    root_agent: {{ name: forecaster, model: gpt, tools: [get_weather] }}
",
        provider.url()
    );
    let mut file = tempfile::Builder::new().suffix(".yaml").tempfile().expect("temp file");
    file.write_all(agents.as_bytes()).expect("write the agents file");
    let mut env = otel_env(&endpoint);
    env.push(("OTEL_SERVICE_NAME".into(), "runner-under-test".into()));
    let args = ["--agents".to_string(), file.path().display().to_string()];
    let server = ServiceProcess::spawn("adk-server", &args, &env).await;

    provider.push(openai::tool_calls(&[(
        "call_1",
        "get_weather",
        json!({"city": "Paris"}),
    )]));
    provider.push(openai::text("It is 21 degrees in Paris."));
    let mut runner = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let request = pb::RunRequest {
        app_name: "weather".into(),
        user_id: "alice".into(),
        session_id: "s-run".into(),
        new_message: Some(pb::Content {
            role: "user".into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text("Weather in Paris?".into())),
                ..Default::default()
            }],
        }),
        create_session: true,
        ..Default::default()
    };
    let mut stream = runner.run(traced(request)).await.expect("Run").into_inner();
    let mut invocation_id = String::new();
    while let Some(event) = stream.message().await.expect("the run succeeds") {
        invocation_id = event.invocation_id;
    }

    // Both provider requests and the tool request carry the client's trace id.
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    let provider_parents: Vec<String> = requests
        .iter()
        .map(|r| {
            let (trace, parent) = parse_traceparent(r.header("traceparent").expect("a traceparent header"));
            assert_eq!(trace, TRACE_ID, "the provider request continues the client's trace");
            parent
        })
        .collect();
    let tool_header = tool_traceparents.lock().expect("lock").clone();
    assert_eq!(tool_header.len(), 1);
    let (tool_trace, tool_parent) = parse_traceparent(tool_header[0].as_deref().expect("a traceparent header"));
    assert_eq!(tool_trace, TRACE_ID, "the tool request continues the client's trace");

    let spans = collector
        .wait_for("the run's spans", |spans| {
            spans.iter().filter(|s| s.name == "chat fake-model").count() == 2
                && spans.iter().any(|s| s.name == "execute_tool get_weather")
                && spans.iter().any(|s| s.name == "adk.v1.AgentRunner/Run")
                && spans.iter().any(|s| s.name == "invoke_agent weather")
        })
        .await;
    let rpc = find(&spans, "adk.v1.AgentRunner/Run");
    assert_eq!(rpc.parent_span_id, CLIENT_SPAN_ID);
    assert_eq!(
        rpc.resource.get("service.name").map(String::as_str),
        Some("runner-under-test")
    );
    assert_eq!(rpc.attr("invocation"), Some(invocation_id.as_str()), "{rpc:#?}");
    assert_eq!(rpc.attr("session"), Some("s-run"));

    let invocation = find(&spans, "invoke_agent weather");
    for (key, value) in [
        ("app", "weather"),
        ("user", "alice"),
        ("session", "s-run"),
        ("invocation", invocation_id.as_str()),
    ] {
        assert_eq!(invocation.attr(key), Some(value), "{key} of {invocation:#?}");
    }

    // The model calls: children of the invocation, the parents the provider was told about.
    let model_calls: Vec<&Collected> = spans.iter().filter(|s| s.name == "chat fake-model").collect();
    for call in &model_calls {
        assert_eq!(call.parent_span_id, invocation.span_id);
        assert_eq!(call.kind, CLIENT_SPAN);
        assert_eq!(call.attr("gen_ai.provider.name"), Some("openai"));
        assert_eq!(call.attr("gen_ai.request.model"), Some("fake-model"));
        assert_eq!(call.attr("streaming"), Some("false"));
        assert_eq!(
            call.attr("gen_ai.usage.input_tokens"),
            Some(openai::PROMPT_TOKENS.to_string().as_str())
        );
        assert_eq!(
            call.attr("gen_ai.usage.output_tokens"),
            Some(openai::COMPLETION_TOKENS.to_string().as_str())
        );
    }
    let mut call_ids: Vec<String> = model_calls.iter().map(|s| s.span_id.clone()).collect();
    call_ids.sort();
    let mut told = provider_parents.clone();
    told.sort();
    assert_eq!(
        told, call_ids,
        "each provider request names its model-call span as parent"
    );

    let tool = find(&spans, "execute_tool get_weather");
    assert_eq!(tool.parent_span_id, invocation.span_id);
    assert_eq!(tool.attr("gen_ai.tool.name"), Some("get_weather"));
    assert_eq!(tool.attr("gen_ai.tool.call.id"), Some("call_1"));
    assert_eq!(
        tool_parent, tool.span_id,
        "the tool request names the tool-call span as parent"
    );

    // Nothing of the conversation is recorded: not the prompt, not the reply, not the tool's result.
    for span in &spans {
        for value in span.attributes.values() {
            assert!(!value.contains("Paris") && !value.contains("21 degrees"), "{span:#?}");
        }
    }
}
