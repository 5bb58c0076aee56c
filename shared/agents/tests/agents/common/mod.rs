//! Test support: a runner on in-memory stores, helpers to run and collect, and
//! the check every test ends with (the stored log is exactly what was streamed).
#![allow(dead_code)]

use adk_grpc_agents::{RunOptions, Runner, RunnerConfig};
use adk_grpc_core::CoreSessionService;
use adk_grpc_core::{
    AdkError, Agent, ArtifactService, Content, CreateRequest, Event, FunctionResponseData, GetRequest, Llm, LlmRequest,
    LlmResponse, LlmResponseStream, PartKind, Result, Session, SessionLease, SessionService,
};
use adk_grpc_models::OpenAiCompatible;
use adk_grpc_models::testing::FakeServer;
use adk_grpc_store::{InMemorySessionBackend, InMemorySessionLease};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

pub const APP: &str = "app";
pub const USER: &str = "u";
pub const SESSION: &str = "s";

/// A runner over in-memory sessions, artifacts and leases, with session `s` created.
pub struct Harness {
    pub runner: Arc<Runner>,
    pub sessions: Arc<dyn SessionService>,
    pub artifacts: Arc<dyn ArtifactService>,
    /// Every non-partial event streamed so far, in order, across runs.
    streamed: Mutex<Vec<Event>>,
}

/// What one run produced.
pub struct Run {
    pub events: Vec<Event>,
    pub error: Option<AdkError>,
}

impl Run {
    pub fn complete(&self) -> Vec<&Event> {
        self.events.iter().filter(|e| !e.is_partial()).collect()
    }

    pub fn partial(&self) -> Vec<&Event> {
        self.events.iter().filter(|e| e.is_partial()).collect()
    }

    pub fn texts(&self) -> Vec<String> {
        self.complete()
            .iter()
            .filter_map(|e| e.content().and_then(Content::text))
            .collect()
    }

    #[track_caller]
    pub fn ok(self) -> Self {
        if let Some(error) = &self.error {
            panic!("run failed: {error}");
        }
        self
    }
}

impl Harness {
    pub async fn new(root: Arc<dyn Agent>) -> Harness {
        Self::with_state(root, HashMap::new()).await
    }

    pub async fn with_state(root: Arc<dyn Agent>, state: HashMap<String, Value>) -> Harness {
        let sessions: Arc<dyn SessionService> = Arc::new(CoreSessionService::new(InMemorySessionBackend::new()));
        let lease: Arc<dyn SessionLease> = Arc::new(InMemorySessionLease::new());
        Self::build(root, sessions, lease, state).await
    }

    pub async fn build(
        root: Arc<dyn Agent>,
        sessions: Arc<dyn SessionService>,
        lease: Arc<dyn SessionLease>,
        state: HashMap<String, Value>,
    ) -> Harness {
        let artifacts: Arc<dyn ArtifactService> = Arc::new(adk_grpc_store::memory_artifacts(
            adk_grpc_store::InMemoryArtifactBackend::new(),
            &adk_grpc_store::StoreConfig::default(),
        ));
        let mut config = RunnerConfig::new(APP, root, sessions.clone(), lease);
        config.artifact_service = Some(artifacts.clone());
        let runner = Arc::new(Runner::new(config).expect("valid runner"));
        sessions
            .create(CreateRequest {
                app_name: APP.into(),
                user_id: USER.into(),
                session_id: Some(SESSION.into()),
                state,
                ttl: None,
            })
            .await
            .expect("create session");
        Harness {
            runner,
            sessions,
            artifacts,
            streamed: Mutex::new(Vec::new()),
        }
    }

    pub async fn say(&self, text: &str) -> Run {
        self.send(Content::new("user").with_text(text), RunOptions::default())
            .await
    }

    /// Runs to the end of the stream, keeping every event and the error that ended it.
    pub async fn send(&self, content: Content, options: RunOptions) -> Run {
        let mut stream = match self.runner.run(USER, SESSION, content, options).await {
            Ok(stream) => stream,
            Err(error) => {
                return Run {
                    events: vec![],
                    error: Some(error),
                };
            }
        };
        let mut events = Vec::new();
        let mut error = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => events.push(event),
                Err(e) => {
                    error = Some(e);
                    assert!(stream.next().await.is_none(), "nothing may follow an error");
                    break;
                }
            }
        }
        self.streamed
            .lock()
            .unwrap()
            .extend(events.iter().filter(|e| !e.is_partial()).cloned());
        Run { events, error }
    }

    pub async fn session(&self) -> Session {
        self.sessions
            .get(GetRequest {
                app_name: APP.into(),
                user_id: USER.into(),
                session_id: SESSION.into(),
                ..Default::default()
            })
            .await
            .expect("get session")
    }

    /// The stored log holds exactly the streamed non-partial events (plus the
    /// user's messages), in order, and the state is what their deltas imply.
    pub async fn verify_log(&self, initial_state: &HashMap<String, Value>) -> Session {
        let session = self.session().await;
        let stored: Vec<Event> = session.events.iter().filter(|e| e.author != "user").cloned().collect();
        let streamed = self.streamed.lock().unwrap().clone();
        assert_eq!(stored, streamed, "the stored log differs from what was streamed");
        let sequences: Vec<u64> = session.events.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, (1..=session.events.len() as u64).collect::<Vec<_>>());
        let mut implied = initial_state.clone();
        for event in session.events.iter() {
            assert!(
                event.actions.state_delta.keys().all(|k| !k.starts_with("temp:")),
                "a temp: key was stored: {:?}",
                event.actions.state_delta
            );
            implied.extend(event.actions.state_delta.clone());
        }
        assert_eq!(
            session.state.as_map(),
            &implied,
            "state differs from what the deltas imply"
        );
        session
    }
}

pub fn openai(server: &FakeServer) -> Arc<dyn Llm> {
    Arc::new(OpenAiCompatible::new(server.url(), "fake-model").expect("openai client"))
}

pub fn function_response(id: &str, name: &str, response: Value) -> Content {
    Content::new("user").with_part(
        PartKind::FunctionResponse {
            function_response: FunctionResponseData {
                name: name.into(),
                response,
            },
            id: Some(id.into()),
        }
        .into(),
    )
}

pub fn function_calls(event: &Event) -> Vec<(String, String, Value)> {
    event
        .content()
        .map(|c| c.parts.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p.kind {
            PartKind::FunctionCall { name, args, id } => Some((id.unwrap_or_default(), name, args)),
            _ => None,
        })
        .collect()
}

pub fn function_responses(event: &Event) -> Vec<(String, String, Value)> {
    event
        .content()
        .map(|c| c.parts.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p.kind {
            PartKind::FunctionResponse { function_response, id } => Some((
                id.unwrap_or_default(),
                function_response.name,
                function_response.response,
            )),
            _ => None,
        })
        .collect()
}

/// The chat messages of a request the OpenAI fake received.
pub fn messages(request: &adk_grpc_models::testing::RecordedRequest) -> Vec<Value> {
    request.json()["messages"].as_array().cloned().unwrap_or_default()
}

pub fn system_prompt(request: &adk_grpc_models::testing::RecordedRequest) -> String {
    messages(request)
        .iter()
        .find(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A model without HTTP, for tests about what the agent does around the model:
/// it records each request and answers with the next scripted reply.
#[derive(Default)]
pub struct ScriptedLlm {
    replies: Mutex<VecDeque<Vec<LlmResponse>>>,
    pub requests: Mutex<Vec<LlmRequest>>,
}

impl ScriptedLlm {
    pub fn new(replies: Vec<Vec<LlmResponse>>) -> Arc<Self> {
        Arc::new(ScriptedLlm {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
        })
    }

    pub fn text(text: &str) -> Vec<LlmResponse> {
        vec![LlmResponse {
            content: Some(Content::new("model").with_text(text)),
            ..Default::default()
        }]
    }

    pub fn requests(&self) -> Vec<LlmRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl Llm for ScriptedLlm {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn generate_content(&self, request: LlmRequest, _stream: bool) -> Result<LlmResponseStream> {
        self.requests.lock().unwrap().push(request);
        let reply = self
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .ok_or_else(|| AdkError::Model("script exhausted".into()))?;
        Ok(Box::pin(futures::stream::iter(reply.into_iter().map(Ok))))
    }
}
