//! Long-term memory end to end: real `adk-session-server` (which serves
//! adk.v1.MemoryService) and `adk-runner-server` on one real redis-server, and the
//! all-in-one `adk-server`; the model is a fake OpenAI server on loopback HTTP that
//! records every request, so the tests see exactly what the model was told.

use adk_grpc_e2e::runs::{self, agents_file, user_text as text};
use adk_grpc_e2e::{InProcessServer, spawn_session_server};
use adk_grpc_models::testing::{FakeReply, FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::memory_service_client::MemoryServiceClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess, eventually};
use serde_json::json;
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;

const FACT: &str = "My locker code is 4711.";

/// Runs one message to the end of its stream; panics if the run fails.
async fn run(client: &mut AgentRunnerClient<Channel>, app: &str, user: &str, session: &str, message: &str) {
    let request = runs::run_request(app, user, session, text(message));
    let (_, status) = runs::run_to_end(client, request).await;
    assert!(status.is_none(), "the run fails: {status:?}");
}

fn search(app: &str, user: &str, query: &str) -> pb::SearchMemoryRequest {
    pb::SearchMemoryRequest {
        app_name: app.into(),
        user_id: user.into(),
        query: query.into(),
        limit: 0,
    }
}

fn memory_texts(found: &pb::SearchMemoryResponse) -> Vec<String> {
    let parts = found
        .memories
        .iter()
        .flat_map(|m| m.content.iter().flat_map(|c| &c.parts));
    parts
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Text(t)) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// Session 1 tells a fact; the runner adds the session to memory (agents file
/// `memory: {add: session}`). Session 2 of the same user asks; the model calls
/// `load_memory` and its next request holds the fact. Another user asking the same
/// gets no memory of it.
#[tokio::test]
async fn an_agent_recalls_a_fact_from_an_earlier_session_through_load_memory() {
    let provider = FakeServer::start().await;
    let redis = RedisServer::start().await;
    let agents = agents_file(&format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}' }}
apps:
  lockers:
    memory: {{ add: session }}
    root_agent: {{ name: keeper, model: gpt, tools: [load_memory] }}
",
        provider.url()
    ));
    let sessions = spawn_session_server(&redis.url(), &[]).await;
    let args = [
        "--store-url".to_string(),
        redis.url(),
        "--agents".to_string(),
        agents.path().display().to_string(),
    ];
    let runner = ServiceProcess::spawn("adk-runner-server", &args, &[]).await;
    let mut client = AgentRunnerClient::connect(runner.endpoint()).await.expect("connect");

    provider.push(openai::text("Noted."));
    run(&mut client, "lockers", "alice", "s1", FACT).await;

    // What the runner added is in the store the session server's MemoryService serves.
    let mut memory = MemoryServiceClient::connect(sessions.endpoint())
        .await
        .expect("connect");
    let found = memory
        .search_memory(search("lockers", "alice", "locker code"))
        .await
        .expect("SearchMemory")
        .into_inner();
    // The reply is found by what it answers, after it (docs/semantics.md, Memory 4).
    assert_eq!(memory_texts(&found), [FACT, "Noted."]);

    for (user, recalls) in [("alice", true), ("bob", false)] {
        let calls_before = provider.requests().len();
        provider.push(openai::tool_calls(&[(
            "call_1",
            "load_memory",
            json!({"query": "locker code"}),
        )]));
        provider.push(openai::text("Here is what I know."));
        run(&mut client, "lockers", user, "s2", "What is my locker code?").await;
        let requests = provider.requests();
        assert_eq!(
            requests.len(),
            calls_before + 2,
            "{user}: one call for the tool, one for the answer"
        );
        let first = requests[calls_before].json().to_string();
        assert!(
            first.contains("You have memory"),
            "the model is told it has memory: {first}"
        );
        let after_tool = requests[calls_before + 1].json().to_string();
        assert!(after_tool.contains("load_memory"), "{after_tool}");
        assert_eq!(
            after_tool.contains("4711"),
            recalls,
            "{user}: the fact reaches the model only for its own user: {after_tool}"
        );
    }
}

/// The all-in-one server: `preload_memory` puts the user's memories about the message
/// into the model request, from a memory added through AddMemory on the same port, and
/// the runner adds each invocation (`memory: {add: invocation}`) to the same store.
#[tokio::test]
async fn adk_server_preloads_memories_added_over_grpc_and_adds_invocations() {
    let provider = FakeServer::start().await;
    let agents = agents_file(&format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}' }}
apps:
  diary:
    memory: {{ add: invocation }}
    root_agent: {{ name: diarist, model: gpt, tools: [preload_memory] }}
",
        provider.url()
    ));
    // In the test's process: the test is about the store the services share, not the process.
    let server = InProcessServer::all_in_one(&["--agents", &agents.path().display().to_string()]).await;
    let endpoint = server.endpoint();
    let mut memory = MemoryServiceClient::connect(endpoint.clone()).await.expect("connect");
    let added = memory
        .add_memory(pb::AddMemoryRequest {
            app_name: "diary".into(),
            user_id: "alice".into(),
            memories: vec![pb::MemoryEntry {
                content: Some(text("Alice's sister Maria lives in Oslo.")),
                author: "user".into(),
                ..Default::default()
            }],
            custom_metadata: None,
        })
        .await
        .expect("AddMemory")
        .into_inner();
    assert_eq!(added.memory_ids.len(), 1);

    let mut runner = AgentRunnerClient::connect(endpoint.clone()).await.expect("connect");
    for (user, recalls) in [("alice", true), ("bob", false)] {
        provider.push(openai::text("Nice."));
        run(&mut runner, "diary", user, "s1", "Where does my sister Maria live?").await;
        let request = provider.last_request().json().to_string();
        assert!(
            !request.contains("\"preload_memory\""),
            "never declared to the model: {request}"
        );
        assert_eq!(request.contains("<PAST_CONVERSATIONS>"), recalls, "{user}: {request}");
        assert_eq!(request.contains("lives in Oslo"), recalls, "{user}: {request}");
    }

    // Each finished invocation was added: the question and the reply (found by the question
    // it answers), for their own user.
    let found = memory
        .search_memory(search("diary", "bob", "sister"))
        .await
        .expect("SearchMemory")
        .into_inner();
    assert_eq!(memory_texts(&found), ["Where does my sister Maria live?", "Nice."]);
    let session = SessionServiceClient::connect(endpoint)
        .await
        .expect("connect")
        .get_session(pb::GetSessionRequest {
            app_name: "diary".into(),
            user_id: "bob".into(),
            session_id: "s1".into(),
            ..Default::default()
        })
        .await
        .expect("GetSession")
        .into_inner();
    let event_ids: Vec<&str> = session.events.iter().map(|e| e.id.as_str()).collect();
    let memory_ids: Vec<&str> = found.memories.iter().map(|m| m.id.as_str()).collect();
    assert!(event_ids.contains(&memory_ids[0]), "a memory's id is its event's id");
}

/// Bad input over gRPC: INVALID_ARGUMENT naming the field, NOT_FOUND for a session
/// that does not exist, and nothing stored changes.
#[tokio::test]
async fn the_memory_service_names_bad_fields_and_missing_sessions() {
    let redis = RedisServer::start().await;
    let sessions = spawn_session_server(&redis.url(), &[]).await;
    let mut memory = MemoryServiceClient::connect(sessions.endpoint())
        .await
        .expect("connect");
    let entry = |t: &str| pb::MemoryEntry {
        content: Some(text(t)),
        ..Default::default()
    };
    memory
        .add_memory(pb::AddMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            memories: vec![entry("the kept memory")],
            custom_metadata: None,
        })
        .await
        .expect("AddMemory");

    let invalid = |status: tonic::Status, field: &str| {
        assert_eq!(status.code(), Code::InvalidArgument, "{field}: {status:?}");
        assert!(status.message().contains(field), "{field}: {}", status.message());
    };
    let no_content = pb::AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: vec![entry("fine"), pb::MemoryEntry::default()],
        custom_metadata: None,
    };
    invalid(memory.add_memory(no_content).await.unwrap_err(), "memories[1].content");
    let mut negative = search("app", "u", "kept");
    negative.limit = -1;
    invalid(memory.search_memory(negative).await.unwrap_err(), "limit");
    invalid(
        memory.search_memory(search("", "u", "kept")).await.unwrap_err(),
        "app_name",
    );
    let no_id = pb::DeleteMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memory_id: String::new(),
    };
    invalid(memory.delete_memory(no_id).await.unwrap_err(), "memory_id");
    let events = pb::AddEventsToMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        events: vec![pb::Event {
            content: Some(text("an event without an id")),
            ..Default::default()
        }],
        ..Default::default()
    };
    invalid(memory.add_events_to_memory(events).await.unwrap_err(), "events[0].id");

    let missing = pb::AddSessionToMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: "nope".into(),
    };
    let status = memory.add_session_to_memory(missing).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");

    let found = memory
        .search_memory(search("app", "u", "kept"))
        .await
        .expect("SearchMemory")
        .into_inner();
    assert_eq!(memory_texts(&found), ["the kept memory"], "nothing stored changed");
}

/// An app with an embedding model (`--memory-embeddings`, here a fake OpenAI
/// `/v1/embeddings` server): its memories are embedded when added, and a search finds a
/// memory by meaning though they share no word; an app without one searches by keyword.
#[tokio::test]
async fn an_app_with_an_embedding_model_finds_memories_by_meaning() {
    let provider = FakeServer::start().await;
    let redis = RedisServer::start().await;
    let embeddings = agents_file(&format!(
        "semantic: {{ provider: openai, model: fake-embedding, base_url: '{}/v1' }}\n",
        provider.url()
    ));
    let path = embeddings.path().display().to_string();
    let sessions = spawn_session_server(&redis.url(), &["--memory-embeddings", &path]).await;
    let mut memory = MemoryServiceClient::connect(sessions.endpoint())
        .await
        .expect("connect");

    // The model's vectors: [pets, cars].
    provider.push(openai::embeddings(&[vec![1.0, 0.0], vec![0.0, 1.0]]));
    for app in ["semantic", "keyword"] {
        memory
            .add_memory(pb::AddMemoryRequest {
                app_name: app.into(),
                user_id: "alice".into(),
                memories: vec![
                    pb::MemoryEntry {
                        id: "pet".into(),
                        content: Some(text("Rex is a beagle")),
                        ..Default::default()
                    },
                    pb::MemoryEntry {
                        id: "garage".into(),
                        content: Some(text("The automobile needs tyres")),
                        ..Default::default()
                    },
                ],
                custom_metadata: None,
            })
            .await
            .expect("AddMemory");
    }
    let added = provider.last_request().json();
    assert_eq!(added["input"], json!(["Rex is a beagle", "The automobile needs tyres"]));

    provider.push(openai::embeddings(&[vec![0.9, 0.1]]));
    let found = memory
        .search_memory(search("semantic", "alice", "my puppy"))
        .await
        .expect("SearchMemory")
        .into_inner();
    let ids: Vec<&str> = found.memories.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["pet"], "found by meaning, no word shared");
    assert_eq!(provider.last_request().json()["input"], json!(["my puppy"]));
    assert_eq!(provider.requests().len(), 2, "the keyword app never calls the model");
    let found = memory
        .search_memory(search("keyword", "alice", "my puppy"))
        .await
        .expect("SearchMemory")
        .into_inner();
    assert!(found.memories.is_empty());
    assert_eq!(provider.requests().len(), 2);
}

/// GenerateMemories on a real `adk-session-server` given `--memory-generation` (the
/// model a fake OpenAI server): a stored session's fact under the app's topic becomes a
/// memory SearchMemory returns, with its revision; the same call again changes nothing
/// and asks nothing; an app the file does not name is FAILED_PRECONDITION naming it; a
/// missing session NOT_FOUND.
#[tokio::test]
async fn generate_memories_extracts_a_sessions_facts_once() {
    let provider = FakeServer::start().await;
    let redis = RedisServer::start().await;
    let generation = agents_file(&format!(
        "facts:\n  model: {{ provider: openai, model: fake-model, base_url: '{}/v1' }}\n  topics: [{{ label: USER_PREFERENCES }}]\n",
        provider.url()
    ));
    let path = generation.path().display().to_string();
    let server = spawn_session_server(&redis.url(), &["--memory-generation", &path]).await;
    let mut sessions = SessionServiceClient::connect(server.endpoint()).await.expect("connect");
    let mut memory = MemoryServiceClient::connect(server.endpoint()).await.expect("connect");
    sessions
        .create_session(pb::CreateSessionRequest {
            app_name: "facts".into(),
            user_id: "u".into(),
            session_id: "s1".into(),
            ..Default::default()
        })
        .await
        .expect("CreateSession");
    let told = sessions
        .append_event(pb::AppendEventRequest {
            app_name: "facts".into(),
            user_id: "u".into(),
            session_id: "s1".into(),
            event: Some(pb::Event {
                author: "user".into(),
                content: Some(text("I drink green tea every morning")),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("AppendEvent")
        .into_inner();
    provider.push(openai::json_reply(&json!({"facts": [
        {"fact": "The user drinks green tea every morning", "topics": ["USER_PREFERENCES"]},
        {"fact": "It is morning", "topics": ["SMALL_TALK"]},
    ]})));
    let generate = |app: &str, session: &str| pb::GenerateMemoriesRequest {
        app_name: app.into(),
        user_id: "u".into(),
        source_session_id: session.into(),
        ..Default::default()
    };
    let changes = memory
        .generate_memories(generate("facts", "s1"))
        .await
        .expect("GenerateMemories")
        .into_inner()
        .memories;
    assert_eq!(changes.len(), 1, "only the topic's fact: {changes:?}");
    assert_eq!(changes[0].action(), pb::MemoryAction::Created);
    let memory_entry = changes[0].memory.clone().expect("the memory");
    let fact = memory_entry.fact.clone().expect("its fact");
    assert_eq!(
        (fact.revision, fact.topics.clone()),
        (1, vec!["USER_PREFERENCES".to_string()])
    );
    assert_eq!(fact.source_event_ids, std::slice::from_ref(&told.id));
    let asked = provider.last_request().json();
    let transcript = asked["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(transcript.contains("I drink green tea every morning"), "{transcript}");

    let found = memory
        .search_memory(search("facts", "u", "green tea"))
        .await
        .expect("SearchMemory")
        .into_inner();
    assert_eq!(found.memories, std::slice::from_ref(&memory_entry));
    let again = memory
        .generate_memories(generate("facts", "s1"))
        .await
        .expect("GenerateMemories again")
        .into_inner();
    assert!(again.memories.is_empty(), "{again:?}");
    assert_eq!(provider.requests().len(), 1, "a retry asks the model nothing");
    let revisions = memory
        .list_memory_revisions(pb::ListMemoryRevisionsRequest {
            app_name: "facts".into(),
            user_id: "u".into(),
            memory_id: memory_entry.id.clone(),
        })
        .await
        .expect("ListMemoryRevisions")
        .into_inner()
        .revisions;
    assert_eq!(revisions.len(), 1);
    assert_eq!(revisions[0].fact, "The user drinks green tea every morning");

    let refused = memory.generate_memories(generate("other", "")).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().contains("\"other\""), "{refused:?}");
    let missing = memory.generate_memories(generate("facts", "nope")).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
    let none = memory.generate_memories(generate("facts", "")).await;
    assert!(
        none.is_ok_and(|r| r.into_inner().memories.is_empty()),
        "no events: nothing to generate"
    );
}

/// IngestEvents on two `adk-session-server` replicas of one Redis: the first buffers an
/// event and is killed (SIGKILL) before the user's idle time is up; the second, started
/// afterwards, finds the user due and generates the event's fact, once: the same event
/// ingested again buffers nothing and asks the model nothing.
#[tokio::test]
async fn events_ingested_on_a_killed_replica_are_generated_by_another_once() {
    let provider = FakeServer::start().await;
    let redis = RedisServer::start().await;
    let generation = agents_file(&format!(
        "facts:\n  model: {{ provider: openai, model: fake-model, base_url: '{}/v1' }}\n  topics: [{{ label: USER_PREFERENCES }}]\n  ingest: {{ max_events: 50, idle_secs: 2 }}\n",
        provider.url()
    ));
    let path = generation.path().display().to_string();
    let ingest = pb::IngestEventsRequest {
        app_name: "facts".into(),
        user_id: "u".into(),
        stream_id: "s1".into(),
        events: vec![pb::Event {
            id: "e1".into(),
            author: "user".into(),
            content: Some(text("I drink green tea every morning")),
            ..Default::default()
        }],
        force_flush: false,
    };
    let mut first = spawn_session_server(&redis.url(), &["--memory-generation", &path]).await;
    let mut memory = MemoryServiceClient::connect(first.endpoint()).await.expect("connect");
    let buffered = memory
        .ingest_events(ingest.clone())
        .await
        .expect("IngestEvents")
        .into_inner();
    assert_eq!(buffered.buffered_events, 1);
    first.kill9().await;
    assert!(provider.requests().is_empty(), "killed before the idle time was up");

    provider.push(openai::json_reply(&json!({"facts": [
        {"fact": "The user drinks green tea every morning", "topics": ["USER_PREFERENCES"], "source_event_ids": ["e1"]},
    ]})));
    let second = spawn_session_server(&redis.url(), &["--memory-generation", &path]).await;
    let mut memory = MemoryServiceClient::connect(second.endpoint()).await.expect("connect");
    let found = eventually(Duration::from_secs(30), || {
        let mut memory = memory.clone();
        async move {
            let found = memory
                .search_memory(search("facts", "u", "green tea"))
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            match memory_texts(&found).as_slice() {
                [] => Err("not generated yet".to_string()),
                _ => Ok(found),
            }
        }
    })
    .await;
    assert_eq!(memory_texts(&found), ["The user drinks green tea every morning"]);
    let fact = found.memories[0].fact.clone().expect("a generated memory");
    assert_eq!(fact.source_event_ids, ["e1"]);
    let again = memory
        .ingest_events(ingest)
        .await
        .expect("IngestEvents again")
        .into_inner();
    assert_eq!(
        again.buffered_events, 0,
        "an event generated from is not buffered again"
    );
    assert_eq!(provider.requests().len(), 1, "the event was generated from once");
}

/// An app with `memory: {add: ingest}` on `adk-server` given `--memory-generation`: the
/// runner ingests session 1's turn after the run, the server generates its fact (the
/// buffer full at 2 events) in the background, and session 2's model request carries the
/// fact through `preload_memory`, as ADK reads a Memory Bank memory (`user: <fact>`). One
/// scripted model answers the agent and the extraction, each by what it asks.
#[tokio::test]
async fn an_agent_remembers_facts_generated_from_its_ingested_turns() {
    const EXTRACTION: &str = "You extract memories";
    let provider = FakeServer::start().await;
    provider.answer_with(|request| {
        let body = request.json();
        if !body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with(EXTRACTION)
        {
            return FakeReply::json(openai::text("Noted."));
        }
        let transcript = body["messages"][1]["content"].as_str().unwrap_or_default();
        let facts: Vec<serde_json::Value> = transcript
            .contains("green tea")
            .then(|| json!({"fact": "The user drinks green tea every morning", "topics": ["USER_PREFERENCES"]}))
            .into_iter()
            .collect();
        FakeReply::json(openai::json_reply(&json!({ "facts": facts })))
    });
    let agents = agents_file(&format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}' }}
apps:
  tea:
    memory: {{ add: ingest }}
    root_agent: {{ name: barista, model: gpt, tools: [preload_memory] }}
",
        provider.url()
    ));
    let generation = agents_file(&format!(
        "tea:\n  model: {{ provider: openai, model: fake-model, base_url: '{}/v1' }}\n  ingest: {{ max_events: 2, idle_secs: 3600 }}\n",
        provider.url()
    ));
    let server = InProcessServer::all_in_one(&[
        "--agents",
        &agents.path().display().to_string(),
        "--memory-generation",
        &generation.path().display().to_string(),
    ])
    .await;
    let mut runner = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let memory = MemoryServiceClient::connect(server.endpoint()).await.expect("connect");
    run(&mut runner, "tea", "alice", "s1", "I drink green tea every morning").await;
    let found = eventually(Duration::from_secs(30), || {
        let mut memory = memory.clone();
        async move {
            let found = memory
                .search_memory(search("tea", "alice", "green tea"))
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            match memory_texts(&found).as_slice() {
                [] => Err("no fact generated yet".to_string()),
                _ => Ok(found),
            }
        }
    })
    .await;
    assert_eq!(memory_texts(&found), ["The user drinks green tea every morning"]);
    assert_eq!(found.memories[0].author, "user");

    run(&mut runner, "tea", "alice", "s2", "What do I drink in the morning?").await;
    let asked = provider
        .requests()
        .iter()
        .map(|r| r.json())
        .rfind(|body| {
            !body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .starts_with(EXTRACTION)
        })
        .expect("the agent's request")
        .to_string();
    assert!(asked.contains("<PAST_CONVERSATIONS>"), "{asked}");
    assert!(
        asked.contains("user: The user drinks green tea every morning"),
        "{asked}"
    );
}
