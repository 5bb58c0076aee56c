//! A client's message of function responses, as ADK 2.13 takes it by the root agent
//! (docs/semantics.md, Runner 1b), through `adk-server` (runner on, in the test's
//! process) on the embedded memory store and on a real redis-server: beside text it is
//! refused for an llm agent at the root (`INVALID_ARGUMENT` in ADK's words, nothing
//! stored) and taken by a workflow agent at the root; answers to calls of two
//! invocations start an invocation of their own under a workflow agent of an app not
//! marked resumable, and are refused in an app marked resumable.

use adk_grpc_e2e::InProcessServer;
use adk_grpc_e2e::runs::{self, agents_file, user_text};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::RedisServer;
use tonic::Code;
use tonic::transport::Channel;

const USER: &str = "u";

/// ADK 2.13's refusal of function responses beside text (its `_validate_new_message`).
const ADK_REFUSAL: &str = "Message cannot contain both function responses and text. \
     Function responses resume an existing invocation while text starts a new one.";

/// Three apps whose agent asks the client to confirm (a client tool) twice, notes the
/// answers, asks a third time, then echoes: an llm agent at the root, and a sequence
/// around it in an app not marked resumable and in one marked resumable.
const AGENTS: &str = r#"
models:
  asks:
    provider: mock
    model: mock-asks
    mock:
      turns:
        - function_calls: [{ name: confirm, args: { what: "first" } }]
        - function_calls: [{ name: confirm, args: { what: "second" } }]
        - text: Both noted.
        - function_calls: [{ name: confirm, args: { what: "third" } }]
      when_exhausted: echo
      per_conversation: true
tools:
  confirm:
    kind: client
    description: Asks the user to confirm.
    parameters: { type: object, properties: { what: { type: string } }, required: [what] }
apps:
  clerk:
    root_agent: { name: clerk, model: asks, instruction: Confirm first., tools: [confirm] }
  steps:
    root_agent:
      kind: sequential
      name: steps
      sub_agents:
        - { name: clerk, model: asks, instruction: Confirm first., tools: [confirm] }
  steps_resumable:
    resumability_config: { is_resumable: true }
    root_agent:
      kind: sequential
      name: steps
      sub_agents:
        - { name: clerk, model: asks, instruction: Confirm first., tools: [confirm] }
"#;

/// The client's answer to call `id` of `confirm`.
fn answer(id: &str) -> pb::Part {
    pb::Part {
        kind: Some(pb::part::Kind::FunctionResponse(pb::FunctionResponse {
            name: "confirm".into(),
            response: Some(adk_grpc_core::convert::json_to_proto(
                &serde_json::json!({"confirmed": true}),
            )),
            id: Some(id.into()),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn message(parts: Vec<pb::Part>) -> pb::Content {
    pb::Content {
        role: "user".into(),
        parts,
    }
}

fn text(text: &str) -> pb::Part {
    user_text(text).parts.remove(0)
}

struct Session<'a> {
    server: &'a InProcessServer,
    client: AgentRunnerClient<Channel>,
    app: &'static str,
    id: &'static str,
}

impl Session<'_> {
    /// Runs `content` to its end: the events after the user's, or the refusal.
    async fn run(&mut self, content: pb::Content) -> Result<Vec<pb::Event>, tonic::Status> {
        let request = runs::run_request(self.app, USER, self.id, content);
        match runs::run_to_end(&mut self.client, request).await {
            (events, None) => Ok(events),
            (_, Some(status)) => Err(status),
        }
    }

    /// The id of the call `confirm` the run paused on, and the run's invocation.
    async fn paused(&mut self, said: &str) -> (String, String) {
        let events = self.run(message(vec![text(said)])).await.expect("run");
        events
            .iter()
            .flat_map(|event| {
                let parts = event.content.iter().flat_map(|content| content.parts.iter());
                parts.filter_map(move |part| match &part.kind {
                    Some(pb::part::Kind::FunctionCall(call)) => Some((call.id.clone()?, event.invocation_id.clone())),
                    _ => None,
                })
            })
            .last()
            .unwrap_or_else(|| panic!("{}: no call in {events:?}", self.app))
    }

    async fn stored(&self) -> Vec<pb::Event> {
        runs::get_session(self.server.endpoint(), self.app, USER, self.id)
            .await
            .events
    }

    /// The stored user event holding the answer to `call`.
    async fn answer_event(&self, call: &str) -> pb::Event {
        self.stored()
            .await
            .into_iter()
            .rfind(|event| {
                event.author == "user"
                    && event.content.iter().flat_map(|c| c.parts.iter()).any(|part| {
                        matches!(&part.kind, Some(pb::part::Kind::FunctionResponse(r)) if r.id.as_deref() == Some(call))
                    })
            })
            .unwrap_or_else(|| panic!("{}: no stored answer to {call}", self.app))
    }
}

fn refused_as(status: Result<Vec<pb::Event>, tonic::Status>, words: &str) {
    let status = status.expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{}", status.message());
    assert!(
        status.message().starts_with("function_response ") && status.message().contains(words),
        "{:?} should name function_response and say {words:?}",
        status.message()
    );
}

async fn check(store_url: Option<String>) {
    let agents = agents_file(AGENTS);
    let mut args = vec!["--agents", agents.path().to_str().expect("path")];
    if let Some(url) = &store_url {
        args.extend(["--store-url", url.as_str()]);
    }
    let server = InProcessServer::all_in_one(&args).await;
    let client = AgentRunnerClient::new(server.channel().await);
    let session = |app, id| Session {
        server: &server,
        client: client.clone(),
        app,
        id,
    };

    // An llm agent at the root: the answer beside a text is refused in ADK's words, nothing
    // stored; the answer alone then goes on with the call's invocation.
    let mut clerk = session("clerk", "clerk-1");
    let (call, invocation) = clerk.paused("Book it").await;
    let before = clerk.stored().await;
    refused_as(clerk.run(message(vec![answer(&call), text("Yes")])).await, ADK_REFUSAL);
    refused_as(clerk.run(message(vec![text("Yes"), answer(&call)])).await, ADK_REFUSAL);
    assert_eq!(clerk.stored().await, before, "a refused message stores nothing");
    clerk.run(message(vec![answer(&call)])).await.expect("the answer alone");
    assert_eq!(clerk.answer_event(&call).await.invocation_id, invocation);

    // A sequence at the root of an app not marked resumable: the answer beside a text is
    // stored whole in the call's invocation; answers to calls of two invocations start one
    // of their own, answered by the agent that made the calls.
    let mut steps = session("steps", "steps-1");
    let (first, first_invocation) = steps.paused("Book one").await;
    let (second, second_invocation) = steps.paused("Book another").await;
    assert_ne!(first_invocation, second_invocation);
    let replies = steps
        .run(message(vec![answer(&first), answer(&second)]))
        .await
        .expect("answers to two invocations");
    let stored = steps.answer_event(&first).await;
    assert!(
        stored.invocation_id != first_invocation && stored.invocation_id != second_invocation,
        "answers to calls of two invocations start an invocation of their own: {}",
        stored.invocation_id
    );
    assert_eq!(replies.iter().map(runs::text_of).collect::<Vec<_>>(), ["Both noted."]);
    assert!(
        replies
            .iter()
            .all(|event| event.author == "clerk" && event.invocation_id == stored.invocation_id),
        "{replies:?}"
    );
    let (third, third_invocation) = steps.paused("Book a third").await;
    steps
        .run(message(vec![answer(&third), text("Yes, the third")]))
        .await
        .expect("an answer beside a text");
    let stored = steps.answer_event(&third).await;
    assert_eq!(stored.invocation_id, third_invocation);
    assert_eq!(
        stored.content.expect("content").parts,
        [answer(&third), text("Yes, the third")]
    );

    // The same sequence in an app marked resumable: answers to calls of two invocations
    // are refused, as ADK's strict resolution refuses them, nothing stored.
    let mut resumable = session("steps_resumable", "steps-2");
    let (first, _) = resumable.paused("Book one").await;
    let (second, second_invocation) = resumable.paused("Book another").await;
    let before = resumable.stored().await;
    refused_as(
        resumable.run(message(vec![answer(&first), answer(&second)])).await,
        "must answer calls of one invocation",
    );
    assert_eq!(resumable.stored().await, before, "a refused message stores nothing");
    resumable
        .run(message(vec![answer(&second), text("Yes")]))
        .await
        .expect("an answer beside a text");
    assert_eq!(resumable.answer_event(&second).await.invocation_id, second_invocation);
    assert!(server.is_running(), "the server stopped");
}

#[tokio::test]
async fn answers_with_text_and_to_two_invocations_are_taken_as_adk_takes_them_on_the_memory_store() {
    check(None).await;
}

#[tokio::test]
async fn answers_with_text_and_to_two_invocations_are_taken_as_adk_takes_them_on_redis() {
    let redis = RedisServer::start().await;
    check(Some(redis.url())).await;
}
