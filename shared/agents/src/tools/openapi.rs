//! `OpenApiToolset`: the operations of an OpenAPI 3.x spec as tools, one per
//! operation, as ADK's `OpenAPIToolset` makes them.
//!
//! The translation follows ADK's: an operation's tool is named after its
//! `operationId` in snake_case (`getPetById` → `get_pet_by_id`; without one, after
//! its path and method: `/pets/{id}` GET → `pets_id_get`), cut to 60 characters, a
//! repeated name numbered `_2`, `_3`…; its description is the operation's
//! `description`, else its `summary` (else `METHOD /path`, where ADK has none). Its parameters are one JSON Schema object: the
//! path, query, header and cookie parameters (path-level ones included), then the
//! JSON request body, an object body's properties flattened into the top level (a
//! name taken already gets `_0`, `_1`…), another body as one argument (`array` for
//! an array, else `body`). Argument names are the spec's in snake_case, mapped back
//! to the spec's names in the request. Local `$ref`s (`#/components/…`) are
//! resolved, a cycle cut where it closes; a `$ref` into another document is refused.
//!
//! The spec is read once, when the toolset is built: problems of the document are
//! errors then, naming the spec and the field; an operation the suite cannot call
//! (a request body that is not JSON, say) is an error only when the toolset offers
//! it, so `with_tool_filter` can leave it out.

use super::reply_limit::{JSON_MIME, TEXT_MIME, check_json, is_large, save_large_reply};
use crate::http_json::JsonEndpoint;
use crate::large_reply::LargeReply;
use crate::rules::validate_tool_name;
use adk_grpc_core::{AdkError, Result, Tool, ToolContext};
use async_trait::async_trait;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::Method;
use reqwest::header::{COOKIE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// ADK's longest operation tool name (before a prefix).
const MAX_NAME_CHARS: usize = 60;

/// What a path parameter's value is encoded with: all but RFC 3986's unreserved
/// characters, so a value cannot add a segment (`/`), a query (`?`) or a fragment (`#`).
const PATH_VALUE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The HTTP methods of a path item, in ADK's order.
const METHODS: [&str; 8] = ["get", "post", "put", "delete", "patch", "head", "options", "trace"];

/// The tools of an OpenAPI 3.x spec (see the module's documentation).
#[derive(Debug, Clone)]
pub struct OpenApiToolset {
    /// The declared name, for errors.
    name: String,
    /// The spec's file or URL, for errors.
    source: String,
    operations: Vec<ParsedOperation>,
    /// The servers' first URL, resolved; or why there is none.
    base_url: std::result::Result<reqwest::Url, String>,
    filter: Option<Vec<String>>,
    prefix: Option<String>,
    timeout: Duration,
    headers: Vec<(String, String)>,
    /// None: by method (see [`OpenApiToolset::with_safe_to_repeat`]).
    safe_to_repeat: Option<bool>,
    /// What a reply too large for the event becomes.
    large_reply: LargeReply,
}

/// One operation of the spec: its tool's name, and the operation or why it cannot be called.
#[derive(Debug, Clone)]
struct ParsedOperation {
    tool_name: String,
    operation_id: Option<String>,
    /// `GET /pets/{id}`.
    label: String,
    operation: std::result::Result<Operation, String>,
}

impl ParsedOperation {
    /// Whether a filter's `wanted` names it: its tool name or its operationId.
    fn is_named(&self, wanted: &str) -> bool {
        self.tool_name == wanted || self.operation_id.as_deref() == Some(wanted)
    }
}

#[derive(Debug, Clone)]
struct Operation {
    method: Method,
    /// The path template, `{name}` for each path parameter.
    path: String,
    description: String,
    parameters: Value,
    args: Vec<Arg>,
}

/// An argument the model gives and where the request puts it.
#[derive(Debug, Clone)]
struct Arg {
    /// The model's name (snake_case, unique in the operation).
    name: String,
    /// The spec's name.
    original: String,
    place: Place,
    required: bool,
    /// Sent when the model leaves a required argument out (ADK does the same).
    default: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Path,
    Query,
    Header,
    Cookie,
    /// A property of an object body.
    BodyProperty,
    /// The whole body.
    Body,
}

impl Place {
    fn parse(location: &str) -> Option<Place> {
        match location {
            "path" => Some(Place::Path),
            "query" => Some(Place::Query),
            "header" => Some(Place::Header),
            "cookie" => Some(Place::Cookie),
            _ => None,
        }
    }

    /// ADK's name for an argument whose spec name has nothing left in snake_case.
    fn fallback_name(self) -> &'static str {
        match self {
            Place::Path => "path_param",
            Place::Query => "query_param",
            Place::Header => "header_param",
            Place::Cookie => "cookie_param",
            Place::BodyProperty | Place::Body => "body",
        }
    }
}

impl OpenApiToolset {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// Reads the spec at `source`, a file path or an http(s) URL (fetched now, within
    /// `timeout`), in JSON or YAML, and parses it ([`OpenApiToolset::from_spec`]).
    /// Blocking: call it while loading, not from a runtime's worker in steady state.
    pub fn load(name: &str, source: &str, timeout: Duration) -> Result<Self> {
        let config = |message: String| AdkError::Config(format!("OpenAPI toolset {name}: {message}"));
        let url = reqwest::Url::parse(source)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"));
        let text = match &url {
            Some(url) => fetch(name, url, timeout).map_err(|e| config(format!("cannot fetch the spec: {e}")))?,
            None => std::fs::read_to_string(source)
                .map_err(|e| config(format!("cannot read the spec file {source:?}: {e}")))?,
        };
        let spec = parse_document(&text).map_err(|e| config(format!("the spec {source} is not {e}")))?;
        Self::from_spec(name, source, &spec, url.as_ref().map(reqwest::Url::as_str))
    }

    /// The toolset of `spec` (an OpenAPI 3.x document); `source` names it in errors,
    /// `spec_url` (where it was fetched from) resolves relative server URLs.
    pub fn from_spec(name: &str, source: &str, spec: &Value, spec_url: Option<&str>) -> Result<Self> {
        let bad = |message: String| AdkError::Config(format!("OpenAPI toolset {name}: spec {source}: {message}"));
        let Some(document) = spec.as_object() else {
            return Err(bad("must be a mapping (an OpenAPI 3.x document)".into()));
        };
        match document.get("openapi").and_then(Value::as_str) {
            Some(version) if version.starts_with("3.") => {}
            Some(version) => return Err(bad(format!("field openapi: {version:?} is not 3.x (convert the spec)"))),
            None if document.contains_key("swagger") => {
                return Err(bad(
                    "field swagger: Swagger 2.0 is not read; convert the spec to OpenAPI 3.x".into(),
                ));
            }
            None => return Err(bad("field openapi: missing (the OpenAPI version, 3.x)".into())),
        }
        let Some(paths) = document.get("paths").and_then(Value::as_object) else {
            return Err(bad(
                "field paths: missing or not a mapping of paths to operations".into()
            ));
        };
        let base_url = server_url(spec, spec_url).map_err(|e| e.to_string());
        let mut operations = Vec::new();
        for (path, item) in paths {
            let field = format!("paths.{path}");
            let item = resolve(spec, item, &field).map_err(bad)?;
            let Some(item) = item.as_object() else {
                return Err(bad(format!("{field}: must be a mapping of methods to operations")));
            };
            for method in METHODS {
                let Some(operation) = item.get(method) else {
                    continue;
                };
                let field = format!("{field}.{method}");
                let Some(object) = operation.as_object() else {
                    return Err(bad(format!("{field}: must be an operation (a mapping)")));
                };
                let operation_id = match object.get("operationId") {
                    None => None,
                    Some(Value::String(id)) if !id.trim().is_empty() => Some(id.clone()),
                    Some(_) => return Err(bad(format!("{field}.operationId: must be a non-empty string"))),
                };
                let tool_name = match &operation_id {
                    Some(id) => snake_case(id),
                    None => snake_case(&format!("{path}_{method}")),
                };
                operations.push(ParsedOperation {
                    tool_name: tool_name.chars().take(MAX_NAME_CHARS).collect(),
                    operation_id,
                    label: format!("{} {path}", method.to_uppercase()),
                    operation: parse_operation(spec, path, method, item, object, &field),
                });
            }
        }
        number_repeated_names(&mut operations);
        Ok(OpenApiToolset {
            name: name.to_string(),
            source: source.to_string(),
            operations,
            base_url,
            filter: None,
            prefix: None,
            timeout: Self::DEFAULT_TIMEOUT,
            headers: Vec::new(),
            safe_to_repeat: None,
            large_reply: LargeReply::default(),
        })
    }

    /// Calls go to `url` rather than to the spec's first server.
    pub fn with_base_url(mut self, url: &str) -> Result<Self> {
        let parsed = reqwest::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                AdkError::Config(format!(
                    "OpenAPI toolset {}: base_url {url:?} is not an http(s) URL",
                    self.name
                ))
            })?;
        self.base_url = Ok(parsed);
        Ok(self)
    }

    /// Only these operations are offered: each a tool's name (before any prefix) or
    /// an operationId. A name no operation has is an error listing the operations.
    pub fn with_tool_filter(mut self, names: impl IntoIterator<Item = String>) -> Result<Self> {
        let names: Vec<String> = names.into_iter().collect();
        if let Some(unknown) = names
            .iter()
            .find(|wanted| !self.operations.iter().any(|op| op.is_named(wanted)))
        {
            return Err(AdkError::Config(format!(
                "OpenAPI toolset {}: the spec {} has no operation {unknown:?} (its operations: {})",
                self.name,
                self.source,
                self.operation_names().join(", ")
            )));
        }
        self.filter = Some(names);
        Ok(self)
    }

    /// The model sees `getPet` as `<prefix>_get_pet`.
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = Some(prefix.to_string());
        self
    }

    /// Each call must finish within this time.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// A header sent with every call (e.g. an API key).
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self> {
        if HeaderName::from_bytes(name.as_bytes()).is_err() || HeaderValue::from_str(value).is_err() {
            return Err(AdkError::Config(format!(
                "OpenAPI toolset {}: invalid header {name}",
                self.name
            )));
        }
        self.headers.push((name.to_string(), value.to_string()));
        Ok(self)
    }

    /// Whether a resumed invocation re-runs a call its dead runner left unanswered
    /// ([`Tool::safe_to_repeat`]). None (the default): the operations whose method
    /// HTTP defines as idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE; RFC 9110
    /// §9.2.2), which a client may send again; Some: every operation, or none.
    pub fn with_safe_to_repeat(mut self, safe: Option<bool>) -> Self {
        self.safe_to_repeat = safe;
        self
    }

    /// What a reply longer than `--max-tool-reply-bytes` becomes: an error the model
    /// reads (the default), or an artifact the model gets a reference to.
    pub fn with_large_reply(mut self, large_reply: LargeReply) -> Self {
        self.large_reply = large_reply;
        self
    }

    /// Every operation's tool name (before any prefix): by path, then in ADK's order of methods.
    pub fn operation_names(&self) -> Vec<&str> {
        self.operations.iter().map(|op| op.tool_name.as_str()).collect()
    }

    /// The tools offered: every operation, or the filter's. An error names what
    /// is wrong: an offered operation the suite cannot call or whose name is not a
    /// tool name, no server URL.
    pub fn tools(&self) -> Result<Vec<Arc<dyn Tool>>> {
        let bad = |message: String| AdkError::Config(format!("OpenAPI toolset {}: {message}", self.name));
        let selected: Vec<&ParsedOperation> = match &self.filter {
            None => self.operations.iter().collect(),
            Some(filter) => self
                .operations
                .iter()
                .filter(|op| filter.iter().any(|wanted| op.is_named(wanted)))
                .collect(),
        };
        if selected.is_empty() {
            return Err(bad(format!("the spec {} has no operations", self.source)));
        }
        let base_url = self.base_url.clone().map_err(&bad)?;
        let mut endpoint = JsonEndpoint::new(
            format!("OpenAPI toolset {}", self.name),
            base_url.as_str(),
            self.timeout,
        )?;
        for (header, value) in &self.headers {
            endpoint = endpoint.with_header(header, value)?;
        }
        endpoint.set_large_reply(self.large_reply);
        let endpoint = Arc::new(endpoint);
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut problems = Vec::new();
        for parsed in selected {
            let name = match &self.prefix {
                Some(prefix) => format!("{prefix}_{}", parsed.tool_name),
                None => parsed.tool_name.clone(),
            };
            let operation = match &parsed.operation {
                Ok(operation) => operation,
                Err(e) => {
                    problems.push(format!("{} ({}): {e}", parsed.label, self.source));
                    continue;
                }
            };
            if let Err(AdkError::Config(e)) = validate_tool_name(&name) {
                problems.push(format!("{} ({}): {e}", parsed.label, self.source));
                continue;
            }
            let safe_to_repeat = self.safe_to_repeat.unwrap_or(operation.method.is_idempotent());
            tools.push(Arc::new(OpenApiTool {
                name,
                operation: operation.clone(),
                endpoint: endpoint.clone(),
                base_url: base_url.clone(),
                safe_to_repeat,
            }));
        }
        if !problems.is_empty() {
            return Err(bad(format!(
                "{}; leave the operation out with tool_filter, or fix the spec",
                problems.join("; ")
            )));
        }
        Ok(tools)
    }
}

/// One operation of a spec, called over HTTP as the spec describes it.
#[derive(Debug)]
struct OpenApiTool {
    name: String,
    operation: Operation,
    endpoint: Arc<JsonEndpoint>,
    base_url: reqwest::Url,
    safe_to_repeat: bool,
}

impl OpenApiTool {
    fn failure(&self, what: impl std::fmt::Display) -> AdkError {
        AdkError::Tool(format!("OpenAPI tool {}: {what}", self.name))
    }

    /// The request the call's arguments make: URL (path and query), headers, body.
    fn request(&self, args: &Value) -> Result<(reqwest::Url, HeaderMap, Option<Value>)> {
        let given = args.as_object().cloned().unwrap_or_default();
        let mut path = self.operation.path.clone();
        let mut query: Vec<(String, String)> = Vec::new();
        let mut headers = HeaderMap::new();
        let mut cookies = Vec::new();
        let mut body_properties = Map::new();
        let mut body = None;
        for arg in &self.operation.args {
            let value = match given.get(&arg.name).filter(|v| !v.is_null()) {
                Some(value) => value.clone(),
                None => match (&arg.default, arg.required) {
                    (Some(default), true) => default.clone(),
                    _ if arg.place == Place::Path => {
                        return Err(self.failure(format!("missing required path parameter {:?}", arg.name)));
                    }
                    _ => continue,
                },
            };
            match arg.place {
                Place::Path => {
                    let text = scalar_text(&value);
                    // An encoded `.` stays `.`: a dot segment could still climb out of the path.
                    if text.is_empty() || text == "." || text == ".." {
                        return Err(self.failure(format!("path parameter {:?} cannot be {text:?}", arg.name)));
                    }
                    let encoded = utf8_percent_encode(&text, PATH_VALUE).to_string();
                    path = path.replace(&format!("{{{}}}", arg.original), &encoded);
                }
                Place::Query => match value {
                    // Form style, exploded: OpenAPI's default for a query array.
                    Value::Array(items) => query.extend(items.iter().map(|v| (arg.original.clone(), scalar_text(v)))),
                    value => query.push((arg.original.clone(), scalar_text(&value))),
                },
                Place::Header => {
                    let name = HeaderName::from_bytes(arg.original.as_bytes())
                        .map_err(|_| self.failure(format!("{:?} is not a header name", arg.original)))?;
                    let value = HeaderValue::from_str(&scalar_text(&value))
                        .map_err(|_| self.failure(format!("header {:?}: not a header value", arg.name)))?;
                    headers.insert(name, value);
                }
                Place::Cookie => cookies.push(format!("{}={}", arg.original, scalar_text(&value))),
                Place::BodyProperty => {
                    body_properties.insert(arg.original.clone(), value);
                }
                Place::Body => body = Some(value),
            }
        }
        if !cookies.is_empty() {
            let value = HeaderValue::from_str(&cookies.join("; "))
                .map_err(|_| self.failure("a cookie value is not a header value"))?;
            headers.insert(COOKIE, value);
        }
        if self.operation.args.iter().any(|a| a.place == Place::BodyProperty) {
            body = Some(Value::Object(body_properties));
        }
        let base = self.base_url.as_str().trim_end_matches('/');
        let mut url = reqwest::Url::parse(&format!("{base}{path}"))
            .map_err(|e| self.failure(format!("{base}{path} is not a URL: {e}")))?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok((url, headers, body))
    }
}

#[async_trait]
impl Tool for OpenApiTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.operation.description
    }
    fn parameters_schema(&self) -> Option<Value> {
        Some(self.operation.parameters.clone())
    }
    fn safe_to_repeat(&self) -> bool {
        self.safe_to_repeat
    }
    /// The JSON reply; a reply that is not JSON as `{"text": …}` (as ADK answers);
    /// a non-2xx status, a timeout or a refused connection is a tool error the model reads.
    /// A reply too large for the event (read only with `large_reply: artifact`) is
    /// saved as it came, JSON or text, and the model gets the artifact's reference.
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        let (url, headers, body) = self.request(&args)?;
        let reply = self
            .endpoint
            .send(self.operation.method.clone(), url, headers, body.as_ref())
            .await
            .map_err(|failure| self.failure(failure.message()))?;
        if is_large(reply.len()) {
            let mime_type = if check_json(&reply).is_ok() {
                JSON_MIME
            } else {
                TEXT_MIME
            };
            return save_large_reply(&self.name, ctx.as_ref(), reply, mime_type).await;
        }
        if reply.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        Ok(serde_json::from_slice(&reply).unwrap_or_else(|_| json!({ "text": String::from_utf8_lossy(&reply) })))
    }
}

/// A parameter's value as it goes into a path, a query, a header: strings as they
/// are, anything else as JSON.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// GETs `url` on a thread of its own with its own runtime: loading is synchronous
/// and may run on a runtime's worker, which must not block on another future.
fn fetch(name: &str, url: &reqwest::Url, timeout: Duration) -> std::result::Result<String, String> {
    let endpoint =
        JsonEndpoint::new(format!("OpenAPI toolset {name}"), url.as_str(), timeout).map_err(|e| e.to_string())?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start a runtime: {e}"))?;
                let reply = runtime
                    .block_on(endpoint.send(Method::GET, url.clone(), HeaderMap::new(), None))
                    .map_err(|failure| failure.message().to_string())?;
                String::from_utf8(reply).map_err(|_| format!("GET {url} answered with a body that is not UTF-8"))
            })
            .join()
            .unwrap_or_else(|_| Err("the fetch panicked".into()))
    })
}

/// A document in JSON or YAML (a YAML mapping's number and boolean keys, as
/// `200:` under `responses`, become strings).
fn parse_document(text: &str) -> std::result::Result<Value, String> {
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| format!("JSON: {e}"));
    }
    let mut yaml: yaml_serde::Value = yaml_serde::from_str(text).map_err(|e| format!("YAML (nor JSON): {e}"))?;
    yaml.apply_merge().map_err(|e| format!("YAML: {e}"))?;
    yaml_to_json(yaml).map_err(|e| format!("a YAML mapping of strings: {e}"))
}

fn yaml_to_json(value: yaml_serde::Value) -> std::result::Result<Value, String> {
    use yaml_serde::Value as Yaml;
    Ok(match value {
        Yaml::Mapping(mapping) => {
            let mut object = Map::new();
            for (key, value) in mapping {
                let key = match key {
                    Yaml::String(key) => key,
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    other => return Err(format!("a key is {other:?}")),
                };
                object.insert(key, yaml_to_json(value)?);
            }
            Value::Object(object)
        }
        Yaml::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(yaml_to_json)
                .collect::<std::result::Result<_, _>>()?,
        ),
        Yaml::Tagged(tagged) => yaml_to_json(tagged.value)?,
        scalar => serde_json::to_value(scalar).map_err(|e| e.to_string())?,
    })
}

/// The spec's first server URL, its variables at their defaults, resolved against
/// `spec_url` when relative. No servers means `/` (OpenAPI's default): the origin
/// the spec was fetched from.
fn server_url(spec: &Value, spec_url: Option<&str>) -> std::result::Result<reqwest::Url, String> {
    let server = spec.get("servers").and_then(Value::as_array).and_then(|s| s.first());
    let mut url = match server {
        None => "/".to_string(),
        Some(server) => server
            .get("url")
            .and_then(Value::as_str)
            .ok_or("field servers[0].url: missing or not a string")?
            .to_string(),
    };
    if let Some(variables) = server.and_then(|s| s.get("variables")).and_then(Value::as_object) {
        for (variable, definition) in variables {
            let default = definition
                .get("default")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("field servers[0].variables.{variable}.default: missing or not a string"))?;
            url = url.replace(&format!("{{{variable}}}"), default);
        }
    }
    let resolved = match reqwest::Url::parse(&url) {
        Ok(absolute) => absolute,
        Err(_) => {
            let Some(spec_url) = spec_url.and_then(|u| reqwest::Url::parse(u).ok()) else {
                return Err(format!(
                    "the spec's server URL {url:?} is relative and the spec is a file: set base_url"
                ));
            };
            spec_url
                .join(&url)
                .map_err(|e| format!("field servers[0].url: {url:?} against {spec_url}: {e}"))?
        }
    };
    if !matches!(resolved.scheme(), "http" | "https") {
        return Err(format!("the spec's server URL {resolved} is not http(s): set base_url"));
    }
    Ok(resolved)
}

/// The operation's tool: description, arguments and their schema. `item` is its path item.
fn parse_operation(
    spec: &Value,
    path: &str,
    method: &str,
    item: &Map<String, Value>,
    operation: &Map<String, Value>,
    field: &str,
) -> std::result::Result<Operation, String> {
    let text = |key: &str| {
        operation
            .get(key)
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
    };
    let description = text("description")
        .or_else(|| text("summary"))
        .map(str::to_string)
        .unwrap_or_else(|| format!("{} {path}", method.to_uppercase()));
    let mut args = parameter_args(spec, path, item, operation, field)?;
    if let Some(body) = operation.get("requestBody") {
        args.extend(body_args(spec, body, &format!("{field}.requestBody"))?);
    }
    let (mut args, schemas): (Vec<Arg>, Vec<Value>) = args.into_iter().unzip();
    number_repeated_arguments(&mut args);
    let properties: Map<String, Value> = args.iter().map(|a| a.name.clone()).zip(schemas).collect();
    let required: Vec<Value> = args
        .iter()
        .filter(|a| a.required)
        .map(|a| Value::String(a.name.clone()))
        .collect();
    let mut parameters = json!({ "type": "object", "properties": properties });
    if !required.is_empty() {
        parameters["required"] = Value::Array(required);
    }
    Ok(Operation {
        method: Method::from_bytes(method.to_uppercase().as_bytes()).map_err(|e| format!("{field}: {e}"))?,
        path: path.to_string(),
        description,
        parameters,
        args,
    })
}

/// The arguments (with their schemas) of the operation's parameters, then of the path
/// item's it does not override; every `{placeholder}` of the path must be one of them.
fn parameter_args(
    spec: &Value,
    path: &str,
    item: &Map<String, Value>,
    operation: &Map<String, Value>,
    field: &str,
) -> std::result::Result<Vec<(Arg, Value)>, String> {
    let own = parameter_list(spec, operation.get("parameters"), &format!("{field}.parameters"))?;
    let shared = parameter_list(spec, item.get("parameters"), &format!("paths.{path}.parameters"))?;
    let overridden: HashSet<(String, String)> = own.iter().map(|(_, p)| (p.0.clone(), p.1.clone())).collect();
    let parameters = own.into_iter().chain(
        shared
            .into_iter()
            .filter(|(_, p)| !overridden.contains(&(p.0.clone(), p.1.clone()))),
    );
    let mut args = Vec::new();
    for (at, (name, location, parameter)) in parameters {
        let place = Place::parse(&location)
            .ok_or_else(|| format!("{at}.in: {location:?} is not path, query, header or cookie"))?;
        let mut schema = resolve_deep(spec, &parameter_schema(&parameter, &at)?, &at)?;
        let description = parameter.get("description").and_then(Value::as_str).unwrap_or_default();
        if !description.is_empty()
            && let Some(object) = schema.as_object_mut()
        {
            object.entry("description").or_insert_with(|| description.into());
        }
        // OpenAPI requires every path parameter; the URL cannot be built without one.
        let required = place == Place::Path || parameter.get("required") == Some(&Value::Bool(true));
        let arg = Arg {
            name: arg_name(&name, place),
            default: schema.get("default").cloned(),
            original: name,
            place,
            required,
        };
        args.push((arg, schema));
    }
    for placeholder in placeholders(path) {
        if !args
            .iter()
            .any(|(a, _)| a.place == Place::Path && a.original == placeholder)
        {
            return Err(format!(
                "{field}.parameters: the path has {{{placeholder}}} and no path parameter {placeholder:?} declares it"
            ));
        }
    }
    Ok(args)
}

/// The arguments (with their schemas) of a JSON request body found at `at`: an object's
/// properties each, any other body as one `body` (or `array`) argument.
fn body_args(spec: &Value, body: &Value, at: &str) -> std::result::Result<Vec<(Arg, Value)>, String> {
    let body = resolve(spec, body, at)?;
    let content = body.get("content").and_then(Value::as_object);
    let json_media = content.and_then(|content| {
        content.iter().find(|(media, _)| {
            media.starts_with("application/json") || media.split(';').next().is_some_and(|m| m.ends_with("+json"))
        })
    });
    let (media, media_object) = match (content, json_media) {
        (None, _) => return Ok(Vec::new()),
        (Some(content), None) if content.is_empty() => return Ok(Vec::new()),
        (Some(content), None) => {
            let types: Vec<&str> = content.keys().map(String::as_str).collect();
            return Err(format!(
                "{at}.content: the body is {} only; the suite sends JSON bodies",
                types.join(", ")
            ));
        }
        (Some(_), Some(json_media)) => json_media,
    };
    let at = format!("{at}.content.{media}.schema");
    let schema = match media_object.get("schema") {
        Some(schema) => resolve_deep(spec, schema, &at)?,
        None => json!({}),
    };
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        let required: BTreeSet<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten();
        return Ok(properties
            .map(|(property, property_schema)| {
                let arg = Arg {
                    name: arg_name(property, Place::BodyProperty),
                    original: property.clone(),
                    place: Place::BodyProperty,
                    required: required.contains(property.as_str()),
                    default: property_schema.get("default").cloned(),
                };
                (arg, property_schema.clone())
            })
            .collect());
    }
    let name = if schema.get("type").and_then(Value::as_str) == Some("array") {
        "array"
    } else {
        "body"
    };
    let mut schema = schema;
    if let (Some(description), Some(object)) = (body.get("description").and_then(Value::as_str), schema.as_object_mut())
    {
        object.entry("description").or_insert_with(|| description.into());
    }
    let arg = Arg {
        name: name.into(),
        original: name.into(),
        place: Place::Body,
        required: body.get("required") == Some(&Value::Bool(true)),
        default: None,
    };
    Ok(vec![(arg, schema)])
}

/// A parameter list, each resolved: (where, (name, in, the parameter)).
type Parameters = Vec<(String, (String, String, Value))>;

fn parameter_list(spec: &Value, list: Option<&Value>, field: &str) -> std::result::Result<Parameters, String> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let Some(list) = list.as_array() else {
        return Err(format!("{field}: must be a list of parameters"));
    };
    let mut parameters = Vec::new();
    for (i, parameter) in list.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let parameter = resolve(spec, parameter, &at)?;
        let name = parameter
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{at}.name: missing"))?;
        let location = parameter
            .get("in")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{at}.in: missing"))?;
        parameters.push((at.clone(), (name.to_string(), location.to_string(), parameter.clone())));
    }
    Ok(parameters)
}

/// A parameter's schema, resolved: its `schema`, or the one of its `content`.
fn parameter_schema(parameter: &Value, at: &str) -> std::result::Result<Value, String> {
    let schema = parameter.get("schema").or_else(|| {
        parameter
            .get("content")
            .and_then(Value::as_object)
            .and_then(|content| content.values().next())
            .and_then(|media| media.get("schema"))
    });
    match schema {
        Some(schema) => Ok(schema.clone()),
        None => Err(format!("{at}: neither schema nor content says what the value is")),
    }
}

/// The `{name}`s of a path template.
fn placeholders(path: &str) -> Vec<String> {
    path.split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name.to_string()))
        .collect()
}

/// A spec name as the model's argument name: snake_case, or the place's fallback.
fn arg_name(original: &str, place: Place) -> String {
    let name = snake_case(original);
    if name.is_empty() {
        place.fallback_name().to_string()
    } else {
        name
    }
}

/// ADK's numbering of a repeated argument name: the second `id` is `id_0`, the third `id_1`.
fn number_repeated_arguments(args: &mut [Arg]) {
    let mut counts = std::collections::HashMap::<String, usize>::new();
    for arg in args.iter_mut() {
        let count = counts.entry(arg.name.clone()).or_insert(0);
        if *count > 0 {
            arg.name = format!("{}_{}", arg.name, *count - 1);
        }
        *count += 1;
    }
}

/// ADK's numbering of a repeated tool name: `_2`, `_3`… (kept within the length,
/// skipping names another operation has).
fn number_repeated_names(operations: &mut [ParsedOperation]) {
    let reserved: HashSet<String> = operations.iter().map(|op| op.tool_name.clone()).collect();
    let mut assigned = HashSet::new();
    for op in operations.iter_mut() {
        if assigned.contains(&op.tool_name) {
            let base = op.tool_name.clone();
            let mut n = 2;
            while assigned.contains(&op.tool_name) || reserved.contains(&op.tool_name) {
                let suffix = format!("_{n}");
                op.tool_name = format!(
                    "{}{suffix}",
                    base.chars().take(MAX_NAME_CHARS - suffix.len()).collect::<String>()
                );
                n += 1;
            }
        }
        assigned.insert(op.tool_name.clone());
    }
}

/// ADK's snake_case: runs of other characters become `_`, a word starts at an
/// upper-case letter after a lower-case one or a digit, and at the last capital of
/// an acronym (`HTTPServer` → `http_server`); lower-cased, `_` single and trimmed.
pub(crate) fn snake_case(text: &str) -> String {
    let chars: Vec<char> = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let before = chars[i - 1];
            let after = chars.get(i + 1).copied();
            let camel = before.is_ascii_lowercase() || before.is_ascii_digit();
            let acronym_end = before.is_ascii_uppercase() && after.is_some_and(|a| a.is_ascii_lowercase());
            if camel || acronym_end {
                out.push('_');
            }
        }
        if !(c == '_' && out.ends_with('_')) {
            out.push(c.to_ascii_lowercase());
        }
    }
    out.trim_matches('_').to_string()
}

/// `value`, or what its `$ref` points at (itself resolved, one level).
fn resolve<'a>(spec: &'a Value, value: &'a Value, field: &str) -> std::result::Result<&'a Value, String> {
    let mut value = value;
    let mut seen = HashSet::new();
    while let Some(reference) = value.get("$ref").and_then(Value::as_str) {
        if !seen.insert(reference) {
            return Err(format!("{field}: $ref {reference:?} refers to itself"));
        }
        value = pointer(spec, reference, field)?;
    }
    Ok(value)
}

/// `value` with every `$ref` in it replaced by what it points at; a `$ref` back into
/// one being replaced (a recursive schema) becomes its siblings (`{}`), as in ADK.
fn resolve_deep(spec: &Value, value: &Value, field: &str) -> std::result::Result<Value, String> {
    fn walk<'a>(
        spec: &'a Value,
        value: &'a Value,
        field: &str,
        open: &mut Vec<&'a str>,
    ) -> std::result::Result<Value, String> {
        match value {
            Value::Object(object) => {
                if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
                    let siblings: Map<String, Value> = object
                        .iter()
                        .filter(|(k, _)| *k != "$ref")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    if open.contains(&reference) {
                        return Ok(Value::Object(siblings));
                    }
                    let target = pointer(spec, reference, field)?;
                    open.push(reference);
                    let mut resolved = walk(spec, target, field, open)?;
                    open.pop();
                    // Keys beside a $ref (3.1 allows description, …) are kept.
                    if let Value::Object(resolved) = &mut resolved {
                        for (key, value) in siblings {
                            resolved.entry(key).or_insert(value);
                        }
                    }
                    return Ok(resolved);
                }
                let mut out = Map::new();
                for (key, value) in object {
                    out.insert(key.clone(), walk(spec, value, field, open)?);
                }
                Ok(Value::Object(out))
            }
            Value::Array(items) => items.iter().map(|item| walk(spec, item, field, open)).collect(),
            other => Ok(other.clone()),
        }
    }
    walk(spec, value, field, &mut Vec::new())
}

/// What a local `$ref` (`#/components/schemas/Pet`) points at.
fn pointer<'a>(spec: &'a Value, reference: &str, field: &str) -> std::result::Result<&'a Value, String> {
    let Some(path) = reference.strip_prefix('#') else {
        return Err(format!(
            "{field}: $ref {reference:?} points into another document; only references within the spec (#/…) are read"
        ));
    };
    spec.pointer(path)
        .ok_or_else(|| format!("{field}: $ref {reference:?} points at nothing in the spec"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_snake_cased_as_adk_does() {
        // Each pair checked against google-adk's own snake_case.
        for (id, expected) in [
            ("getPetById", "get_pet_by_id"),
            ("UpperCamelCase", "upper_camel_case"),
            ("HTTPServerStatus", "http_server_status"),
            ("list pets", "list_pets"),
            ("/pets/{petId}_get", "pets_pet_id_get"),
            ("read_item_items__item_id__get", "read_item_items_item_id_get"),
            ("v2Update", "v2_update"),
            ("ABcDEf", "a_bc_d_ef"),
            ("aBCd", "a_b_cd"),
            ("getHTTP2Response", "get_http2_response"),
            ("__x__Y", "x_y"),
            ("ABC", "abc"),
        ] {
            assert_eq!(snake_case(id), expected, "{id}");
        }
    }

    /// A spec in YAML (unquoted status codes, a recursive schema, refs of every kind).
    const PETS: &str = r##"
openapi: 3.0.3
info: { title: pets, version: "1" }
servers:
  - url: "{scheme}://pets.example.com/v1"
    variables: { scheme: { default: https } }
paths:
  /pets/{petId}:
    parameters:
      - $ref: "#/components/parameters/PetId"
      - { name: X-Trace, in: header, schema: { type: string } }
    get:
      operationId: getPetById
      summary: One pet.
      description: Reads one pet by its id.
      parameters:
        - { name: fields, in: query, description: Fields to return., schema: { type: array, items: { type: string } } }
        - { name: X-Trace, in: header, required: true, schema: { type: string, default: t0 } }
      responses:
        200: { description: the pet }
    delete:
      summary: Deletes a pet.
      responses: { 204: { description: gone } }
  /pets:
    post:
      operationId: createPet
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/NewPet" }
      responses: { 201: { description: created } }
    put:
      operationId: replaceAll
      requestBody:
        $ref: "#/components/requestBodies/Pets"
      responses: { 200: { description: ok } }
    patch:
      operationId: uploadPhoto
      requestBody:
        content: { multipart/form-data: { schema: { type: object } } }
      responses: { 200: { description: ok } }
components:
  parameters:
    PetId: { name: petId, in: path, required: true, description: The pet's id., schema: { type: string } }
  requestBodies:
    Pets:
      description: Every pet.
      content: { application/json: { schema: { type: array, items: { $ref: "#/components/schemas/NewPet" } } } }
  schemas:
    NewPet:
      type: object
      required: [name]
      properties:
        name: { type: string }
        petId: { type: integer, description: Also in the path of other operations. }
        parent: { $ref: "#/components/schemas/NewPet" }
"##;

    fn pets() -> OpenApiToolset {
        let spec = parse_document(PETS).expect("YAML");
        OpenApiToolset::from_spec("pets", "pets.yaml", &spec, None).expect("a spec")
    }

    fn operation<'a>(toolset: &'a OpenApiToolset, name: &str) -> &'a Operation {
        let parsed = toolset.operations.iter().find(|op| op.tool_name == name).expect(name);
        parsed.operation.as_ref().expect("callable")
    }

    fn tool(toolset: &OpenApiToolset, name: &str) -> OpenApiTool {
        let endpoint = JsonEndpoint::new("test", "http://127.0.0.1:1", Duration::from_secs(1)).expect("endpoint");
        OpenApiTool {
            name: name.into(),
            operation: operation(toolset, name).clone(),
            endpoint: Arc::new(endpoint),
            base_url: toolset.base_url.clone().expect("a base URL"),
            safe_to_repeat: false,
        }
    }

    #[test]
    fn operations_become_declarations_with_path_query_header_and_body_arguments() {
        let toolset = pets();
        // In the spec's order of paths (then ADK's method order), as ADK's parser lists them.
        assert_eq!(
            toolset.operation_names(),
            [
                "get_pet_by_id",
                "pets_pet_id_delete",
                "create_pet",
                "replace_all",
                "upload_photo"
            ]
        );
        assert_eq!(
            toolset.base_url.as_ref().map(|u| u.as_str()),
            Ok("https://pets.example.com/v1")
        );

        // Its own parameters first, then the path item's it does not override (X-Trace);
        // a $ref'd parameter resolved; the description falls to the schema; snake_case names.
        let get = operation(&toolset, "get_pet_by_id");
        assert_eq!(get.description, "Reads one pet by its id.");
        assert_eq!(get.method, Method::GET);
        assert_eq!(
            get.parameters,
            json!({
                "type": "object",
                "properties": {
                    "fields": { "type": "array", "items": { "type": "string" }, "description": "Fields to return." },
                    "x_trace": { "type": "string", "default": "t0" },
                    "pet_id": { "type": "string", "description": "The pet's id." },
                },
                "required": ["x_trace", "pet_id"],
            })
        );
        // No operationId: named after path and method; no description: the summary.
        assert_eq!(operation(&toolset, "pets_pet_id_delete").description, "Deletes a pet.");

        // An object body's properties flattened (resolved, the recursion cut to {}).
        let create = operation(&toolset, "create_pet");
        assert_eq!(
            create.parameters,
            json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string" },
                    "pet_id": { "type": "integer", "description": "Also in the path of other operations." },
                    // NewPet again, inside NewPet: the cycle is cut where it closes.
                    "parent": {},
                },
                "required": ["name"],
            })
        );
        // An array body is one argument, `array`, from a $ref'd request body.
        let replace = operation(&toolset, "replace_all");
        assert_eq!(replace.parameters["properties"]["array"]["description"], "Every pet.");
        assert_eq!(
            replace.parameters["properties"]["array"]["items"]["properties"]["name"],
            json!({"type": "string"})
        );
        assert_eq!(replace.parameters.get("required"), None);
    }

    #[test]
    fn a_call_builds_the_request_the_spec_describes() {
        let toolset = pets().with_base_url("http://127.0.0.1:9/api/").expect("a URL");
        let get = tool(&toolset, "get_pet_by_id");
        let (url, headers, body) = get
            .request(&json!({ "pet_id": "a b/../c?d", "fields": ["name", "age"], "x_trace": "t1", "unknown": 1 }))
            .expect("a request");
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9/api/pets/a%20b%2F..%2Fc%3Fd?fields=name&fields=age"
        );
        assert_eq!(headers.get("x-trace").and_then(|v| v.to_str().ok()), Some("t1"));
        assert_eq!(body, None);
        // A required argument left out is its default; a path parameter has none.
        let (_, headers, _) = get.request(&json!({ "pet_id": 7 })).expect("a request");
        assert_eq!(headers.get("x-trace").and_then(|v| v.to_str().ok()), Some("t0"));
        for args in [json!({}), json!({ "pet_id": ".." })] {
            let error = get.request(&args).expect_err("refused").to_string();
            assert!(
                error.contains("OpenAPI tool get_pet_by_id") && error.contains("pet_id"),
                "{error}"
            );
        }
        // The body: the flattened properties under the spec's names.
        let create = tool(&toolset, "create_pet");
        let (url, _, body) = create
            .request(&json!({ "name": "Rex", "pet_id": 3 }))
            .expect("a request");
        assert_eq!(url.as_str(), "http://127.0.0.1:9/api/pets");
        assert_eq!(body, Some(json!({ "name": "Rex", "petId": 3 })));
        let (_, _, body) = tool(&toolset, "replace_all")
            .request(&json!({ "array": [{ "name": "a" }] }))
            .expect("a request");
        assert_eq!(body, Some(json!([{ "name": "a" }])));
    }

    #[test]
    fn reads_are_safe_to_repeat_and_writes_are_not_unless_the_file_says() {
        let safe = |toolset: OpenApiToolset| -> Vec<(String, bool)> {
            let toolset = toolset
                .with_tool_filter(["getPetById", "pets_pet_id_delete", "create_pet"].map(String::from))
                .expect("known");
            toolset
                .tools()
                .expect("tools")
                .iter()
                .map(|t| (t.name().to_string(), t.safe_to_repeat()))
                .collect()
        };
        assert_eq!(
            safe(pets()),
            [
                ("get_pet_by_id".into(), true),
                ("pets_pet_id_delete".into(), true),
                ("create_pet".into(), false)
            ]
        );
        assert!(safe(pets().with_safe_to_repeat(Some(true))).iter().all(|(_, s)| *s));
        assert!(safe(pets().with_safe_to_repeat(Some(false))).iter().all(|(_, s)| !*s));
    }

    #[test]
    fn an_operation_that_cannot_be_called_is_refused_only_when_offered() {
        let Err(error) = pets().tools() else {
            panic!("the multipart body is offered")
        };
        let error = error.to_string();
        assert!(
            error.contains(
                "PATCH /pets (pets.yaml): paths./pets.patch.requestBody.content: the body is multipart/form-data only"
            ) && error.contains("tool_filter"),
            "{error}"
        );
        let tools = pets()
            .with_tool_filter(["createPet".to_string()])
            .expect("known")
            .with_prefix("shop")
            .tools()
            .expect("tools");
        assert_eq!(tools.iter().map(|t| t.name()).collect::<Vec<_>>(), ["shop_create_pet"]);
        let error = pets()
            .with_tool_filter(["getPet".to_string()])
            .expect_err("unknown")
            .to_string();
        assert!(
            error.contains("the spec pets.yaml has no operation \"getPet\" (its operations: get_pet_by_id,"),
            "{error}"
        );
    }

    fn refusal(yaml: &str) -> String {
        let spec = parse_document(yaml).expect("YAML");
        match OpenApiToolset::from_spec("t", "t.yaml", &spec, None).and_then(|t| t.tools()) {
            Ok(_) => panic!("accepted: {yaml}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn bad_specs_are_refused_naming_the_field() {
        let head = "openapi: 3.1.0\nservers: [{url: 'http://x'}]\npaths:\n";
        for (yaml, expected) in [
            (
                "swagger: '2.0'\npaths: {}",
                "spec t.yaml: field swagger: Swagger 2.0 is not read",
            ),
            ("openapi: 3.0.0", "spec t.yaml: field paths: missing"),
            (
                &format!("{head}  /a:\n    get: {{ parameters: [{{ $ref: 'common.yaml#/P' }}] }}"),
                "paths./a.get.parameters[0]: $ref \"common.yaml#/P\" points into another document",
            ),
            (
                &format!("{head}  /a:\n    get: {{ parameters: [{{ $ref: '#/components/parameters/Nope' }}] }}"),
                "paths./a.get.parameters[0]: $ref \"#/components/parameters/Nope\" points at nothing",
            ),
            (
                &format!("{head}  /a/{{id}}:\n    get: {{ operationId: a }}"),
                "paths./a/{id}.get.parameters: the path has {id} and no path parameter \"id\" declares it",
            ),
            (
                &format!("{head}  /a:\n    get: {{ parameters: [{{ in: query }}] }}"),
                "paths./a.get.parameters[0].name: missing",
            ),
            (
                &format!("{head}  /a:\n    get: {{ operationId: 7 }}"),
                "paths./a.get.operationId: must be a non-empty string",
            ),
            (
                &format!("{head}  /a:\n    get: {{ operationId: '9lives' }}"),
                "GET /a (t.yaml): a tool name is what the model calls",
            ),
            (
                "openapi: 3.0.0\nservers: [{url: /v1}]\npaths: { /a: { get: {} } }",
                "the spec's server URL \"/v1\" is relative and the spec is a file: set base_url",
            ),
        ] {
            let error = refusal(yaml);
            assert!(error.contains(expected), "{yaml}\n=> {error}");
        }
    }

    #[test]
    fn relative_servers_resolve_against_the_spec_url_and_names_repeat_numbered() {
        let spec = parse_document(
            "openapi: 3.0.0\nservers: [{url: /v1}]\npaths:\n  /a:\n    get: { operationId: x }\n    put: { operationId: x }\n  /b:\n    get: { operationId: x_2 }\n",
        )
        .expect("YAML");
        let toolset = OpenApiToolset::from_spec("t", "t", &spec, Some("http://h:8/docs/openapi.json")).expect("spec");
        assert_eq!(toolset.base_url.as_ref().map(|u| u.as_str()), Ok("http://h:8/v1"));
        assert_eq!(toolset.operation_names(), ["x", "x_3", "x_2"]);
        // No servers at all: OpenAPI's default `/`, the spec's origin.
        let spec = json!({"openapi": "3.1.0", "paths": {}});
        let toolset = OpenApiToolset::from_spec("t", "t", &spec, Some("http://h:8/openapi.json")).expect("spec");
        assert_eq!(toolset.base_url.as_ref().map(|u| u.as_str()), Ok("http://h:8/"));
    }
}
