//! Session reads: what a tool or callback running outside the runner reads of its
//! call's session while the call runs (the artifacts saved before it, the user's
//! memories), as ADK's `ToolContext` / `CallbackContext` read them from their
//! services. Offered to the Python worker of an ADK agent-config directory
//! (`docs/adk-python.md`, "Python tools and callbacks"), whose code calls
//! `load_artifact`, `list_artifacts` and `search_memory`.
//!
//! One loopback-only HTTP endpoint per process. Each call that may read gets a
//! [`ReadLease`]: a random token the call's `context` carries (`"reads": {"url",
//! "token"}`), bound to that call's own artifacts and memory (its app, user and
//! session, through the same scoped services a Rust tool reads). The lease ends
//! with the call, so a read after it, or with any other token, is refused.
//!
//! ```text
//! POST <url>/load_artifact   {"filename": "a.txt", "version": 2 | null}  -> {"part": <part> | null}
//! POST <url>/list_artifacts  {}                                         -> {"filenames": ["a.txt", "user:b.txt"]}
//! POST <url>/search_memory   {"query": "…"}                             -> {"memories": [<ADK MemoryEntry>, …]}
//! header `authorization: Bearer <token>`; an error is {"error": "…"} with a non-2xx status
//! ```
//!
//! Versions are the suite's (from 1); the worker maps ADK's (from 0) as the ADK
//! plug-in does. A missing artifact or version is `null`, as ADK's `load_artifact`
//! returns `None`.

use super::memory::entry_json;
use super::remote_part::part_json;
use adk_grpc_core::{AdkError, Artifacts, CallbackContext, Memory, Result, sync};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

type Leases = Arc<Mutex<HashMap<String, Arc<Scope>>>>;

/// What one call may read, and the runtime its stores run on (the endpoint's own
/// runtime is not the one the stores' connections were made on).
struct Scope {
    artifacts: Option<Arc<dyn Artifacts>>,
    memory: Option<Arc<dyn Memory>>,
    runtime: tokio::runtime::Handle,
}

/// The process's endpoint: where it listens and the calls it answers for.
struct Endpoint {
    url: String,
    leases: Leases,
}

/// A call's permission to read its session; the reads end when it is dropped.
pub struct ReadLease {
    token: String,
    leases: Leases,
}

impl Drop for ReadLease {
    fn drop(&mut self) {
        sync::lock(&self.leases).remove(&self.token);
    }
}

/// Opens the reads of the call running in `ctx`: the `reads` its context carries
/// (`{"url", "token"}`) and the lease that keeps them valid.
pub(crate) fn open(ctx: &(impl CallbackContext + ?Sized)) -> Result<(Value, ReadLease)> {
    let endpoint = endpoint()?;
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| AdkError::Internal(format!("session reads are opened outside a runtime: {e}")))?;
    let token = uuid::Uuid::new_v4().simple().to_string();
    let scope = Scope {
        artifacts: ctx.artifacts(),
        memory: ctx.memory(),
        runtime,
    };
    sync::lock(&endpoint.leases).insert(token.clone(), Arc::new(scope));
    let reads = json!({ "url": endpoint.url, "token": token });
    Ok((
        reads,
        ReadLease {
            token,
            leases: endpoint.leases.clone(),
        },
    ))
}

/// The endpoint, started on first use on a thread and runtime of its own: it serves
/// for the process's whole life, whichever runtime opened the first lease (tests
/// start one per test).
fn endpoint() -> Result<&'static Endpoint> {
    static ENDPOINT: OnceLock<std::result::Result<Endpoint, String>> = OnceLock::new();
    ENDPOINT
        .get_or_init(start)
        .as_ref()
        .map_err(|e| AdkError::Internal(format!("the session reads endpoint did not start: {e}")))
}

fn start() -> std::result::Result<Endpoint, String> {
    // Loopback only: the worker runs beside the runner, and nothing else needs it.
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let url = format!("http://{}", listener.local_addr().map_err(|e| e.to_string())?);
    let leases = Leases::default();
    let app = axum::Router::new()
        .route("/{read}", axum::routing::post(answer))
        .with_state(leases.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    std::thread::Builder::new()
        .name("session-reads".into())
        .spawn(move || {
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => {
                        if let Err(e) = axum::serve(listener, app).await {
                            tracing::error!("the session reads endpoint stopped: {e}");
                        }
                    }
                    Err(e) => tracing::error!("the session reads endpoint cannot listen: {e}"),
                }
            });
        })
        .map_err(|e| e.to_string())?;
    Ok(Endpoint { url, leases })
}

async fn answer(
    State(leases): State<Leases>,
    Path(read): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(header::HeaderName, &'static str); 1], String) {
    let reply =
        |status: StatusCode, body: Value| (status, [(header::CONTENT_TYPE, "application/json")], body.to_string());
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let Some(scope) = token.and_then(|token| sync::lock(&leases).get(token).cloned()) else {
        return reply(
            StatusCode::FORBIDDEN,
            json!({ "error": "no call is running with this token: a session is read only while the tool or callback call it was sent to runs" }),
        );
    };
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({ "error": format!("the body is not JSON: {e}") }),
            );
        }
    };
    let runtime = scope.runtime.clone();
    match runtime.spawn(async move { scope.read(&read, request).await }).await {
        Ok(Ok(answer)) => reply(StatusCode::OK, answer),
        Ok(Err(e)) => {
            let status = match e.code() {
                tonic::Code::InvalidArgument => StatusCode::BAD_REQUEST,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            reply(status, json!({ "error": e.to_string() }))
        }
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, json!({ "error": e.to_string() })),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadArtifact {
    filename: String,
    #[serde(default)]
    version: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchMemory {
    query: String,
}

impl Scope {
    async fn read(&self, read: &str, request: Value) -> Result<Value> {
        let parse = |e: serde_json::Error| AdkError::invalid(read, e.to_string());
        match read {
            "load_artifact" => {
                let LoadArtifact { filename, version } = serde_json::from_value(request).map_err(parse)?;
                match self.artifacts()?.load_version(&filename, version).await {
                    Ok(part) => Ok(json!({ "part": part_json(&part) })),
                    // ADK's load_artifact returns None for a missing artifact or version.
                    Err(AdkError::NotFound(..)) => Ok(json!({ "part": null })),
                    Err(e) => Err(e),
                }
            }
            "list_artifacts" => Ok(json!({ "filenames": self.artifacts()?.list().await? })),
            "search_memory" => {
                let SearchMemory { query } = serde_json::from_value(request).map_err(parse)?;
                let memory = self.memory.as_ref().ok_or_else(|| {
                    AdkError::FailedPrecondition("this runner has no memory service to search".into())
                })?;
                let found = memory.search(&query).await?;
                Ok(json!({ "memories": found.memories.iter().map(entry_json).collect::<Vec<_>>() }))
            }
            other => Err(AdkError::invalid_with(
                "read",
                format!("no read {other:?}: load_artifact, list_artifacts or search_memory"),
            )),
        }
    }

    fn artifacts(&self) -> Result<&Arc<dyn Artifacts>> {
        self.artifacts.as_ref().ok_or_else(|| {
            AdkError::FailedPrecondition("this runner has no artifact service to read artifacts from".into())
        })
    }
}
