//! The A2A client side: an agent served anywhere over A2A's gRPC binding, as an agent of
//! our tree (`kind: a2a` in the agents file). A transfer to it sends the invocation's
//! user message to the remote agent with SendStreamingMessage; every status message and
//! artifact it streams becomes an event of our session, authored by this agent. When the
//! remote task needs input, the agent ends its turn with a long-running function call
//! ([`INPUT_CALL`]), as a client tool would: the client answers it in its next run, and
//! the answer goes to the same remote task.

use super::convert::{content_from_a2a, part_to_a2a};
use adk_grpc_core::{
    AdkError, Agent, Content, Event, EventStream, InvocationContext, JsonObject, Part, Result, Tool, ToolContext,
};
use adk_grpc_proto::a2a;
use adk_grpc_proto::a2a::a2a_service_client::A2aServiceClient;
use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::OnceCell;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// The name of the function call a remote agent's `input-required` state shows as;
/// its arguments carry the remote `task_id`, `context_id` and the remote's `question`.
pub const INPUT_CALL: &str = "a2a_input_required";
/// `custom_metadata` keys of the events a remote agent's updates become.
pub const REMOTE_TASK_KEY: &str = "a2a_remote_task_id";
pub const REMOTE_CONTEXT_KEY: &str = "a2a_remote_context_id";
pub const REMOTE_STATE_KEY: &str = "a2a_remote_state";

/// How to reach a remote A2A agent.
#[derive(Debug, Clone)]
pub struct RemoteA2aConfig {
    /// `http://host:port`, or `https://host:port` for TLS (the OS's roots, plus `ca_pem`).
    pub endpoint: String,
    /// The remote's tenant (an app of an ADK server); empty for none.
    pub tenant: String,
    /// A CA certificate (PEM) trusted besides the OS's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Sent as `authorization: Bearer <token>` with every call.
    pub bearer_token: Option<String>,
}

/// An agent that runs elsewhere, reached over `lf.a2a.v1.A2AService`: a transfer target.
pub struct RemoteA2aAgent {
    name: String,
    description: String,
    remote: RemoteA2a,
}

impl RemoteA2aAgent {
    /// Checks the settings (endpoint URI, TLS only over https, a token metadata can carry).
    pub fn new(name: &str, description: &str, config: RemoteA2aConfig) -> Result<RemoteA2aAgent> {
        Ok(RemoteA2aAgent {
            name: name.to_string(),
            description: description.to_string(),
            remote: RemoteA2a::new(name, config)?,
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.remote.config.endpoint
    }
}

/// The connection to one remote A2A agent, shared by its agent and tool forms.
struct RemoteA2a {
    name: String,
    config: RemoteA2aConfig,
    authorization: Option<AsciiMetadataValue>,
    /// Connected on first use (a channel needs the runtime; loading the file does not).
    channel: OnceCell<Channel>,
}

impl RemoteA2a {
    fn new(name: &str, config: RemoteA2aConfig) -> Result<RemoteA2a> {
        endpoint(&config)?;
        let authorization = match &config.bearer_token {
            Some(token) => {
                let mut value = AsciiMetadataValue::try_from(format!("Bearer {}", token.trim()))
                    .map_err(|_| AdkError::Config("the bearer token holds characters metadata cannot carry".into()))?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(RemoteA2a {
            name: name.to_string(),
            config,
            authorization,
            channel: OnceCell::new(),
        })
    }

    async fn client(&self) -> Result<A2aServiceClient<Channel>> {
        let channel = self
            .channel
            .get_or_try_init(|| async { Ok::<_, AdkError>(endpoint(&self.config)?.connect_lazy()) })
            .await?;
        // Each message the remote sends is decoded up to the server's limit of a reply
        // from outside (--max-tool-reply-bytes); a larger one fails the call.
        Ok(A2aServiceClient::new(channel.clone())
            .max_decoding_message_size(adk_grpc_core::replies::max_tool_reply_bytes()))
    }

    /// What the remote said went wrong, as our error (the remote's own codes would
    /// read as if our server had answered them).
    fn remote_error(&self, status: tonic::Status) -> AdkError {
        if let Some(error) = too_large(&self.name, &self.config.endpoint, &status) {
            return error;
        }
        let message = format!(
            "remote A2A agent {} ({}) answered {:?}: {}",
            self.name,
            self.config.endpoint,
            status.code(),
            status.message()
        );
        match status.code() {
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown => {
                AdkError::Unavailable(message)
            }
            _ => AdkError::FailedPrecondition(message),
        }
    }

    /// Sends `message` and returns the remote's stream of updates.
    async fn send(&self, message: a2a::Message) -> Result<BoxStream<'static, Result<a2a::StreamResponse>>> {
        let mut request = tonic::Request::new(a2a::SendMessageRequest {
            tenant: self.config.tenant.clone(),
            message: Some(message),
            ..Default::default()
        });
        if let Some(authorization) = &self.authorization {
            request.metadata_mut().insert("authorization", authorization.clone());
        }
        let mut client = self.client().await?;
        let updates = client
            .send_streaming_message(request)
            .await
            .map_err(|status| self.remote_error(status))?
            .into_inner();
        let name = self.name.clone();
        let endpoint = self.config.endpoint.clone();
        Ok(updates
            .map_err(move |status| {
                too_large(&name, &endpoint, &status).unwrap_or_else(|| {
                    AdkError::Unavailable(format!(
                        "remote A2A agent {name} ({endpoint}) broke off its stream: {:?}: {}",
                        status.code(),
                        status.message()
                    ))
                })
            })
            .boxed())
    }
}

/// A message of the remote longer than a reply may be (`--max-tool-reply-bytes`): tonic
/// refuses to decode it with `OutOfRange`, which says nothing of the flag that sets it.
fn too_large(name: &str, endpoint: &str, status: &tonic::Status) -> Option<AdkError> {
    (status.code() == tonic::Code::OutOfRange && status.message().contains("message length too large")).then(|| {
        AdkError::limit(
            "max_tool_reply_bytes",
            adk_grpc_core::replies::max_tool_reply_bytes(),
            format!(
                "remote A2A agent {name} ({endpoint}): {} ({})",
                adk_grpc_core::replies::tool_reply_too_large("a message of the remote"),
                status.message()
            ),
        )
    })
}

impl RemoteA2aAgent {
    /// The message to send for this invocation: the answer to our pending input call
    /// (to the remote task that asked), else the user's message in the remote context
    /// this session already talks to.
    fn outgoing(&self, ctx: &dyn InvocationContext) -> Result<a2a::Message> {
        let events = ctx.events();
        let mut message = a2a::Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: a2a::Role::User as i32,
            ..Default::default()
        };
        if let Some((args, response)) = answered_input_call(&self.name, &events, ctx.user_content()) {
            message.task_id = arg(&args, "task_id");
            message.context_id = arg(&args, "context_id");
            message.parts = vec![answer_part(response)];
            return Ok(message);
        }
        message.context_id = events
            .iter()
            .rev()
            .filter(|event| event.author == self.name)
            .find_map(|event| metadata_str(event, REMOTE_CONTEXT_KEY))
            .unwrap_or_default();
        message.parts = ctx.user_content().parts.iter().filter_map(part_to_a2a).collect();
        if message.parts.is_empty() {
            return Err(AdkError::invalid_with(
                "new_message.parts",
                format!("nothing of the message can be sent to remote A2A agent {}", self.name),
            ));
        }
        Ok(message)
    }
}

fn endpoint(config: &RemoteA2aConfig) -> Result<Endpoint> {
    let bad = |why: String| AdkError::Config(format!("endpoint {:?} {why}", config.endpoint));
    let endpoint = Endpoint::from_shared(config.endpoint.clone()).map_err(|e| bad(format!("is not a URI: {e}")))?;
    let uri = endpoint.uri();
    if uri.host().is_none() {
        return Err(bad("needs a host: http://host:port or https://host:port".into()));
    }
    match uri.scheme_str() {
        Some("https") => {
            let mut tls = ClientTlsConfig::new().with_native_roots();
            if let Some(pem) = &config.ca_pem {
                tls = tls.ca_certificate(Certificate::from_pem(pem));
            }
            endpoint
                .tls_config(tls)
                .map_err(|e| bad(format!("cannot use these TLS settings: {e}")))
        }
        Some("http") if config.ca_pem.is_some() => Err(bad("is http://: a CA certificate needs https://".into())),
        Some("http") => Ok(endpoint),
        _ => Err(bad("must start with http:// or https://".into())),
    }
}

#[async_trait]
impl Agent for RemoteA2aAgent {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn sub_agents(&self) -> &[Arc<dyn Agent>] {
        &[]
    }

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let message = self.outgoing(ctx.as_ref())?;
        let mut updates = self.remote.send(message).await?;
        let agent = self.name.clone();
        Ok(Box::pin(async_stream::try_stream! {
            let mut task = RemoteTask::default();
            while let Some(update) = updates.next().await {
                for event in task.events_of(&agent, ctx.invocation_id(), ctx.branch(), update?)? {
                    if !event.long_running_tool_ids.is_empty() {
                        // As after a client tool's call: nothing else in this invocation goes on.
                        ctx.end_invocation();
                    }
                    yield event;
                }
            }
        }))
    }
}

/// A remote A2A agent offered to an LLM agent as a tool (as ADK's `AgentTool` offers an
/// agent): the model sends a `request`, the remote's words come back as the result. When
/// the remote task needs input, the result says so (`state: input_required`, the
/// `question`, the `task_id` and `context_id`): the model asks the user, then calls the
/// tool again with the answer as `request` and those ids, and the same task goes on.
pub struct RemoteA2aTool {
    description: String,
    remote: RemoteA2a,
}

impl RemoteA2aTool {
    pub fn new(name: &str, description: &str, config: RemoteA2aConfig) -> Result<RemoteA2aTool> {
        Ok(RemoteA2aTool {
            description: description.to_string(),
            remote: RemoteA2a::new(name, config)?,
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.remote.config.endpoint
    }
}

#[async_trait]
impl Tool for RemoteA2aTool {
    fn name(&self) -> &str {
        &self.remote.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {
                "request": { "type": "string", "description": "what to ask the agent, or the answer to its question" },
                "task_id": { "type": "string", "description": "when answering the agent's question: the task_id it gave" },
                "context_id": { "type": "string", "description": "when answering the agent's question: the context_id it gave" },
            },
            "required": ["request"],
        }))
    }

    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        let request = args.get("request").and_then(Value::as_str).unwrap_or_default();
        if request.trim().is_empty() {
            return Err(AdkError::Tool(format!(
                "{}: \"request\" must be a non-empty string",
                self.remote.name
            )));
        }
        let message = a2a::Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: a2a::Role::User as i32,
            task_id: arg(&args, "task_id"),
            context_id: arg(&args, "context_id"),
            parts: vec![a2a::Part {
                content: Some(a2a::part::Content::Text(request.to_string())),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut updates = self.remote.send(message).await?;
        let mut task = RemoteTask::default();
        let mut said = Vec::new();
        let mut last = None;
        while let Some(update) = updates.next().await {
            for event in task.events_of(&self.remote.name, ctx.invocation_id(), "", update?)? {
                said.extend(event.content().and_then(Content::text));
                last = Some(event);
            }
        }
        let state = last
            .as_ref()
            .and_then(|e| metadata_str(e, REMOTE_STATE_KEY))
            .unwrap_or_default();
        if let Some(error) = last.as_ref().and_then(|e| e.llm_response.error_message.clone()) {
            return Err(AdkError::Tool(format!("{}: {state}: {error}", self.remote.name)));
        }
        let ids = json!({ "task_id": task.task_id, "context_id": task.context_id });
        Ok(match last.filter(|e| !e.long_running_tool_ids.is_empty()) {
            Some(asking) => {
                let question = asking.content().and_then(Content::text).unwrap_or_default();
                json!({ "state": "input_required", "question": question, "task_id": ids["task_id"], "context_id": ids["context_id"] })
            }
            None => {
                json!({ "state": "completed", "result": said.join("\n"), "task_id": ids["task_id"], "context_id": ids["context_id"] })
            }
        })
    }
}

/// What the agent knows of the remote task it is following.
#[derive(Default)]
struct RemoteTask {
    task_id: String,
    context_id: String,
}

impl RemoteTask {
    /// The events of one streamed update (none for updates with nothing to say).
    fn events_of(
        &mut self,
        agent: &str,
        invocation_id: &str,
        branch: &str,
        update: a2a::StreamResponse,
    ) -> Result<Vec<Event>> {
        let Some(payload) = update.payload else {
            return Ok(Vec::new());
        };
        let (state, parts) = self.follow(payload);
        let content = remote_content(agent, parts)?;
        let mut event = Event::new(invocation_id).with_author(agent);
        event.branch = branch.to_string();
        let mut metadata = JsonObject::new();
        metadata.insert(REMOTE_TASK_KEY.into(), Value::String(self.task_id.clone()));
        metadata.insert(REMOTE_CONTEXT_KEY.into(), Value::String(self.context_id.clone()));
        if state != a2a::TaskState::Unspecified {
            metadata.insert(REMOTE_STATE_KEY.into(), Value::String(state.as_str_name().to_string()));
        }
        event.llm_response.custom_metadata = Some(metadata);
        match state {
            a2a::TaskState::InputRequired | a2a::TaskState::AuthRequired => {
                let question = content.as_ref().and_then(Content::text).unwrap_or_default();
                let call_id = format!("a2a-{}", uuid::Uuid::new_v4());
                let call = Part::function_call(
                    INPUT_CALL,
                    json!({ "task_id": self.task_id, "context_id": self.context_id, "question": question }),
                    Some(call_id.clone()),
                );
                event = event.with_content(content.unwrap_or_else(|| Content::new("model")).with_part(call));
                event.long_running_tool_ids.push(call_id);
            }
            a2a::TaskState::Failed | a2a::TaskState::Rejected | a2a::TaskState::Canceled => {
                let why = content.as_ref().and_then(Content::text);
                event.llm_response.error_code = Some(format!("A2A_{}", state.as_str_name()));
                event.llm_response.error_message =
                    Some(why.unwrap_or_else(|| format!("the remote task ended {}", state.as_str_name())));
                if let Some(content) = content {
                    event = event.with_content(content);
                }
            }
            _ => match content {
                Some(content) => event = event.with_content(content),
                // Nothing to store: the remote task only moved on (submitted, working).
                None => return Ok(Vec::new()),
            },
        }
        Ok(vec![event])
    }

    /// Takes the task's ids from `payload` (when it names them): its state and the parts
    /// it says (a status message's, else the artifact's or message's own).
    fn follow(&mut self, payload: a2a::stream_response::Payload) -> (a2a::TaskState, Vec<a2a::Part>) {
        use a2a::stream_response::Payload;
        let (task_id, context_id, status, parts) = match payload {
            Payload::Task(task) => (task.id, task.context_id, task.status, Vec::new()),
            Payload::StatusUpdate(update) => (update.task_id, update.context_id, update.status, Vec::new()),
            Payload::ArtifactUpdate(update) => (
                update.task_id,
                update.context_id,
                None,
                update.artifact.map(|artifact| artifact.parts).unwrap_or_default(),
            ),
            Payload::Message(message) => (message.task_id, message.context_id, None, message.parts),
        };
        if !task_id.is_empty() {
            self.task_id = task_id;
        }
        if !context_id.is_empty() {
            self.context_id = context_id;
        }
        let state = status
            .as_ref()
            .map(|s| s.state())
            .unwrap_or(a2a::TaskState::Unspecified);
        let parts = match status.and_then(|s| s.message) {
            Some(message) => message.parts,
            None => parts,
        };
        (state, parts)
    }
}

/// The remote's words as ours: the same conversion as a client's message, spoken by the model.
fn remote_content(agent: &str, parts: Vec<a2a::Part>) -> Result<Option<Content>> {
    if parts.is_empty() {
        return Ok(None);
    }
    let mut content = content_from_a2a(&a2a::Message {
        parts,
        ..Default::default()
    })
    .map_err(|e| AdkError::FailedPrecondition(format!("remote A2A agent {agent} sent a bad part: {e}")))?;
    content.role = "model".to_string();
    Ok(Some(content))
}

/// When `user_content` answers an [`INPUT_CALL`] that `agent` made: the call's
/// arguments and the answer.
fn answered_input_call(agent: &str, events: &[Event], user_content: &Content) -> Option<(Value, Value)> {
    user_content.function_responses().find_map(|answer| {
        let args = events
            .iter()
            .rev()
            .filter(|event| event.author == agent)
            .flat_map(Event::function_calls)
            .find(|call| call.name == INPUT_CALL && call.id == answer.id)?
            .args
            .clone();
        Some((args, answer.response.clone()))
    })
}

/// The client's answer as the part the remote reads: `{"result": "<text>"}` (what a
/// plain reply becomes) as that text, any other answer as a data part.
fn answer_part(response: Value) -> a2a::Part {
    let content = match response.as_object() {
        Some(object) if object.len() == 1 && object.get("result").is_some_and(Value::is_string) => {
            a2a::part::Content::Text(object["result"].as_str().unwrap_or_default().to_string())
        }
        _ => a2a::part::Content::Data(adk_grpc_core::convert::json_to_proto(&response)),
    };
    a2a::Part {
        content: Some(content),
        ..Default::default()
    }
}

fn arg(args: &Value, key: &str) -> String {
    args.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn metadata_str(event: &Event, key: &str) -> Option<String> {
    let value = event.llm_response.custom_metadata.as_ref()?.get(key)?.as_str()?;
    (!value.is_empty()).then(|| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(endpoint: &str) -> RemoteA2aConfig {
        RemoteA2aConfig {
            endpoint: endpoint.into(),
            tenant: String::new(),
            ca_pem: None,
            bearer_token: None,
        }
    }

    #[test]
    fn endpoints_are_checked() {
        assert!(RemoteA2aAgent::new("remote", "", config("http://127.0.0.1:1")).is_ok());
        for bad in ["127.0.0.1:1", "ftp://host:1", "not a uri"] {
            let err = RemoteA2aAgent::new("remote", "", config(bad)).err().expect(bad);
            assert!(err.to_string().contains("endpoint"), "{err}");
        }
        let mut tls_over_http = config("http://127.0.0.1:1");
        tls_over_http.ca_pem = Some(b"pem".to_vec());
        let err = RemoteA2aAgent::new("remote", "", tls_over_http).err().unwrap();
        assert!(err.to_string().contains("https://"), "{err}");
    }

    #[test]
    fn a_plain_answer_is_sent_as_text_and_others_as_data() {
        let text = answer_part(json!({"result": "yes"}));
        assert_eq!(text.content, Some(a2a::part::Content::Text("yes".into())));
        let data = answer_part(json!({"confirmed": true}));
        assert!(matches!(data.content, Some(a2a::part::Content::Data(_))));
    }

    #[test]
    fn an_answer_finds_the_remote_task_of_its_call() {
        let call = Part::function_call(
            INPUT_CALL,
            json!({"task_id": "t1", "context_id": "c1", "question": "sure?"}),
            Some("a2a-1".into()),
        );
        let asked = Event::new("i1")
            .with_author("remote")
            .with_content(Content::new("model").with_part(call));
        let answer = Content::new("user").with_part(Part::function_response(
            adk_grpc_core::FunctionResponseData {
                name: INPUT_CALL.into(),
                response: json!({"result": "yes"}),
            },
            Some("a2a-1".into()),
        ));
        let (args, response) = answered_input_call("remote", std::slice::from_ref(&asked), &answer).unwrap();
        assert_eq!(arg(&args, "task_id"), "t1");
        assert_eq!(response, json!({"result": "yes"}));
        assert!(answered_input_call("other", &[asked], &answer).is_none());
    }
}
