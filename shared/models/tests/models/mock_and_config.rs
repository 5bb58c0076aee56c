//! The mock model, and building models from configuration.

use crate::common::{assert_stream_shape, calls, collect_ok, text};
use adk_grpc_core::{AdkError, Content, FinishReason, Llm, LlmRequest, Part};
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_models::{
    MockFunctionCall, MockModel, MockTurn, ProviderConfig, ProviderKind, WhenExhausted, build_model,
};
use serde_json::json;
use tonic::Code;

fn ask(text: &str) -> LlmRequest {
    LlmRequest {
        contents: vec![
            Content::new("user").with_text("earlier message"),
            Content::new("model").with_text("earlier reply"),
            Content::new("user").with_text(text),
        ],
        ..Default::default()
    }
}

#[tokio::test]
async fn echo_replies_with_the_last_user_text() {
    let mock = MockModel::echo();
    let items = collect_ok(mock.generate_content(ask("hello there"), false).await.unwrap()).await;
    assert_eq!(items.len(), 1);
    assert_eq!(text(&items[0]), "You said: hello there");
    assert!(items[0].turn_complete.is_none() && items[0].partial.is_none());
    assert_eq!(items[0].finish_reason, Some(FinishReason::Stop));
    let usage = items[0].usage_metadata.clone().unwrap();
    assert_eq!(
        (usage.prompt_token_count, usage.candidates_token_count),
        (Some(6), Some(4))
    );
}

#[tokio::test]
async fn echo_streams_word_by_word() {
    let items = collect_ok(
        MockModel::echo()
            .generate_content(ask("hello there"), true)
            .await
            .unwrap(),
    )
    .await;
    assert_stream_shape(&items);
    let partials: Vec<String> = items[..items.len() - 1].iter().map(text).collect();
    assert_eq!(partials, ["You ", "said: ", "hello ", "there"]);
    assert_eq!(text(items.last().unwrap()), "You said: hello there");
}

#[tokio::test]
async fn scripted_turns_play_in_order_then_fail_clearly() {
    let mock = MockModel::scripted(vec![
        MockTurn::Text("Let me check.".into()),
        MockTurn::FunctionCalls(vec![
            MockFunctionCall {
                name: "get_weather".into(),
                args: json!({"city": "Paris"}),
                id: None,
            },
            MockFunctionCall {
                name: "get_time".into(),
                args: json!({}),
                id: Some("t1".into()),
            },
        ]),
        MockTurn::Text("Sunny, 3 pm.".into()),
    ])
    .with_name("script");

    let first = collect_ok(mock.generate_content(ask("weather?"), true).await.unwrap()).await;
    assert_stream_shape(&first);
    assert_eq!(first.len(), 4, "three words streamed, then the whole reply");
    assert_eq!(text(first.last().unwrap()), "Let me check.");

    let second = collect_ok(mock.generate_content(ask("go on"), true).await.unwrap()).await;
    assert_eq!(second.len(), 1, "function calls come whole, without partials");
    assert_eq!(
        calls(&second[0]),
        [
            ("get_weather".to_string(), json!({"city": "Paris"}), None),
            ("get_time".to_string(), json!({}), Some("t1".to_string())),
        ]
    );

    let third = collect_ok(mock.generate_content(ask("and?"), false).await.unwrap()).await;
    assert_eq!(text(&third[0]), "Sunny, 3 pm.");
    assert_eq!(mock.calls(), 3);

    let err = mock.generate_content(ask("more"), false).await.err().unwrap();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.to_string().contains("mock model `script`: script exhausted"),
        "{err}"
    );
}

#[tokio::test]
async fn exhausted_script_can_fall_back_to_echo() {
    let mock = MockModel::scripted(vec![MockTurn::Text("scripted".into())]).when_exhausted(WhenExhausted::Echo);
    let first = collect_ok(mock.generate_content(ask("a"), false).await.unwrap()).await;
    assert_eq!(text(&first[0]), "scripted");
    let second = collect_ok(mock.generate_content(ask("b"), false).await.unwrap()).await;
    assert_eq!(text(&second[0]), "You said: b");
}

/// The booking demo's shape: a tool call, then the answer once the call's response is in.
fn booking_script() -> MockModel {
    MockModel::scripted(vec![
        MockTurn::FunctionCalls(vec![MockFunctionCall {
            name: "confirm".into(),
            args: json!({}),
            id: Some("c1".into()),
        }]),
        MockTurn::Text("Booked.".into()),
    ])
    .when_exhausted(WhenExhausted::Echo)
}

fn fresh_conversation() -> LlmRequest {
    LlmRequest {
        contents: vec![Content::new("user").with_text("book it")],
        ..Default::default()
    }
}

/// `fresh_conversation` after the model's call and the client's answer to it.
fn answered_conversation() -> LlmRequest {
    let mut request = fresh_conversation();
    request
        .contents
        .push(Content::new("model").with_part(Part::function_call("confirm", json!({}), Some("c1".into()))));
    request.contents.push(Content::new("user").with_text("confirmed"));
    request
}

#[tokio::test]
async fn a_per_conversation_script_starts_afresh_in_every_conversation() {
    let mock = booking_script().per_conversation(true);
    for _ in 0..3 {
        let call = collect_ok(mock.generate_content(fresh_conversation(), false).await.unwrap()).await;
        assert_eq!(
            calls(&call[0]).len(),
            1,
            "a new conversation gets the script's first turn"
        );
        let answer = collect_ok(mock.generate_content(answered_conversation(), false).await.unwrap()).await;
        assert_eq!(text(&answer[0]), "Booked.");
    }
    assert_eq!(mock.calls(), 6);
}

#[tokio::test]
async fn a_shared_script_is_played_once_per_model() {
    let mock = booking_script();
    let call = collect_ok(mock.generate_content(fresh_conversation(), false).await.unwrap()).await;
    assert_eq!(calls(&call[0]).len(), 1);
    let answer = collect_ok(mock.generate_content(answered_conversation(), false).await.unwrap()).await;
    assert_eq!(text(&answer[0]), "Booked.");
    // A second conversation finds the script played: it echoes.
    let again = collect_ok(mock.generate_content(fresh_conversation(), false).await.unwrap()).await;
    assert_eq!(text(&again[0]), "You said: book it");
}

#[tokio::test]
async fn scripted_error_turn_fails_the_call() {
    let mock = MockModel::scripted(vec![MockTurn::Error("quota gone".into())]);
    let err = mock.generate_content(ask("a"), false).await.err().unwrap();
    assert!(
        matches!(err, AdkError::Model(_)) && err.to_string().contains("quota gone"),
        "{err}"
    );
}

#[tokio::test]
async fn mock_from_configuration() {
    let config: ProviderConfig = serde_json::from_value(json!({
        "provider": "mock",
        "model": "demo",
        "mock": {
            "turns": [
                {"function_calls": [{"name": "lookup", "args": {"q": 1}, "id": "c1"}]},
                {"text": "Done."}
            ],
            "when_exhausted": "echo"
        }
    }))
    .unwrap();
    let model = build_model(&config).unwrap();
    assert_eq!(model.name(), "demo");
    let first = collect_ok(model.generate_content(ask("x"), false).await.unwrap()).await;
    assert_eq!(
        first[0].content.as_ref().unwrap().parts,
        [Part::function_call("lookup", json!({"q": 1}), Some("c1".into()))]
    );
    let second = collect_ok(model.generate_content(ask("x"), false).await.unwrap()).await;
    assert_eq!(text(&second[0]), "Done.");
    let third = collect_ok(model.generate_content(ask("hey"), false).await.unwrap()).await;
    assert_eq!(text(&third[0]), "You said: hey");

    // A mock with no settings echoes.
    let echo = build_model(&serde_json::from_value(json!({"provider": "mock"})).unwrap()).unwrap();
    assert_eq!(echo.name(), "mock");
}

#[test]
fn configuration_mistakes_are_config_errors() {
    let unknown_field = serde_json::from_value::<ProviderConfig>(json!({"provider": "openai", "modle": "x"}));
    assert!(unknown_field.unwrap_err().to_string().contains("modle"));
    let unknown_provider = serde_json::from_value::<ProviderConfig>(json!({"provider": "claude"}));
    assert!(unknown_provider.is_err());

    let no_model = build_model(&ProviderConfig::new(ProviderKind::Openai, ""))
        .err()
        .unwrap();
    assert!(matches!(no_model, AdkError::Config(_)), "{no_model:?}");
    let embeddings_only = build_model(&ProviderConfig::new(ProviderKind::Local, "/models/minilm"))
        .err()
        .unwrap();
    assert!(
        embeddings_only.to_string().contains("only serves embeddings"),
        "{embeddings_only}"
    );

    let mut missing_key = ProviderConfig::new(ProviderKind::Gemini, "gemini-2.0-flash");
    missing_key.api_key_env = Some("ADK_MODELS_TEST_SURELY_UNSET_KEY".into());
    let err = build_model(&missing_key).err().unwrap();
    assert!(matches!(err, AdkError::Config(_)), "{err:?}");
    assert!(err.to_string().contains("ADK_MODELS_TEST_SURELY_UNSET_KEY"), "{err}");
    assert_eq!(err.code(), Code::FailedPrecondition);
}

/// The key and the base URL come from the variables the file names; the variable's URL
/// wins over the file's `base_url` (here a port nothing listens on).
#[tokio::test]
async fn openai_from_configuration_reads_the_key_and_base_url_from_the_named_variables() {
    let server = FakeServer::start().await;
    // SAFETY: the only environment writes in this test binary, to variables no other
    // code reads.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("ADK_MODELS_TEST_OPENAI_KEY", "sk-from-env");
        std::env::set_var("ADK_MODELS_TEST_OPENAI_BASE_URL", format!("{}/v1/", server.url()));
    };
    server.push(openai::text("configured"));
    let config: ProviderConfig = serde_json::from_value(json!({
        "provider": "openai",
        "model": "llama3.2",
        "base_url": "http://127.0.0.1:9/v1",
        "base_url_env": "ADK_MODELS_TEST_OPENAI_BASE_URL",
        "api_key_env": "ADK_MODELS_TEST_OPENAI_KEY",
        "timeout_secs": 5
    }))
    .unwrap();
    let model = build_model(&config).unwrap();
    assert_eq!(model.name(), "llama3.2");
    let items = collect_ok(model.generate_content(ask("hi"), false).await.unwrap()).await;
    assert_eq!(text(&items[0]), "configured");
    let sent = server.last_request();
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-from-env"));
}

/// A reply addressed to an agent answers that agent's request whatever order the agents
/// ask in (the branches of a parallel agent), on either wire; a request from an agent no
/// reply is addressed to, or from no agent, takes the first reply addressed to none.
#[tokio::test]
async fn the_fake_server_answers_each_agent_its_own_reply() {
    use adk_grpc_models::testing::{gemini, requesting_agent};
    let server = FakeServer::start().await;
    server
        .push_for("left", gemini::text("for left"))
        .push(gemini::text("for anyone"))
        .push_for("right", openai::text("for right"));
    let identity = |name: &str| format!("Be brief.\n\nYou are an agent. Your internal name is \"{name}\".");
    let gemini_body = |name: &str| json!({"systemInstruction": {"parts": [{"text": identity(name)}]}, "contents": []});
    let openai_body = |name: &str| json!({"messages": [{"role": "system", "content": identity(name)}]});
    assert_eq!(requesting_agent(&openai_body("right")).as_deref(), Some("right"));
    // reqwest is built without a default TLS provider; this client speaks plain HTTP anyway.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let ask = |body: serde_json::Value| {
        let request = client.post(format!("{}/generate", server.url())).json(&body);
        async move {
            request
                .send()
                .await
                .expect("send")
                .json::<serde_json::Value>()
                .await
                .expect("JSON")
        }
    };
    let reply_text = |reply: &serde_json::Value| {
        reply
            .pointer("/candidates/0/content/parts/0/text")
            .or_else(|| reply.pointer("/choices/0/message/content"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(reply_text(&ask(openai_body("right")).await), "for right");
    assert_eq!(reply_text(&ask(gemini_body("middle")).await), "for anyone");
    assert_eq!(reply_text(&ask(gemini_body("left")).await), "for left");
    let unanswered = client
        .post(format!("{}/generate", server.url()))
        .json(&json!({"contents": []}))
        .send()
        .await
        .expect("send");
    assert_eq!(unanswered.status(), 500, "no reply is left for a request from no agent");
}
