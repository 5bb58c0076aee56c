//! Gemini against a fake `generativelanguage` server on loopback HTTP.

use crate::common::{assert_stream_shape, calls, collect, collect_ok, text};
use adk_grpc_core::{
    AdkError, BuiltinTool, Content, FinishReason, FunctionResponseData, GenerateContentConfig, Llm, LlmRequest,
    ModalityTokenCount, Part, PartKind, ToolDeclaration, UsageMetadata,
};
use adk_grpc_models::Gemini;
use adk_grpc_models::testing::{FakeReply, FakeServer, gemini};
use serde_json::json;
use std::time::{Duration, Instant};
use tonic::Code;

fn model(server: &FakeServer) -> Gemini {
    Gemini::new("gemini-test")
        .unwrap()
        .with_base_url(server.url())
        .with_api_key("g-secret")
        .unwrap()
}

fn ask(text: &str) -> LlmRequest {
    LlmRequest {
        contents: vec![Content::new("user").with_text(text)],
        ..Default::default()
    }
}

const USAGE: UsageMetadata = UsageMetadata {
    prompt_token_count: Some(gemini::PROMPT_TOKENS as i32),
    candidates_token_count: Some(gemini::CANDIDATES_TOKENS as i32),
    total_token_count: Some((gemini::PROMPT_TOKENS + gemini::CANDIDATES_TOKENS) as i32),
    cached_content_token_count: None,
    thoughts_token_count: None,
    tool_use_prompt_token_count: None,
    prompt_tokens_details: Vec::new(),
    cache_tokens_details: Vec::new(),
    candidates_tokens_details: Vec::new(),
    tool_use_prompt_tokens_details: Vec::new(),
    traffic_type: None,
};

#[tokio::test]
async fn non_streaming_text_reply() {
    let server = FakeServer::start().await;
    server.push(gemini::text("Bonjour"));
    let items = collect_ok(model(&server).generate_content(ask("hi"), false).await.unwrap()).await;

    assert_eq!(items.len(), 1);
    assert_eq!(text(&items[0]), "Bonjour");
    assert_eq!(items[0].finish_reason, Some(FinishReason::Stop));
    assert_eq!(items[0].usage_metadata, Some(USAGE));
    assert!(items[0].partial.is_none() && items[0].turn_complete.is_none());

    let sent = server.last_request();
    assert_eq!(sent.path, "/v1beta/models/gemini-test:generateContent");
    assert_eq!(sent.query, None, "the key must not travel in the URL");
    assert_eq!(sent.header("x-goog-api-key"), Some("g-secret"));
    assert_eq!(
        sent.json()["contents"],
        json!([{"role": "user", "parts": [{"text": "hi"}]}])
    );
}

#[tokio::test]
async fn non_streaming_function_calls_have_no_ids() {
    let server = FakeServer::start().await;
    server.push(gemini::function_calls(&[
        ("get_weather", json!({"city": "Paris"})),
        ("get_time", json!({})),
    ]));
    let items = collect_ok(model(&server).generate_content(ask("hi"), false).await.unwrap()).await;
    assert_eq!(
        calls(&items[0]),
        [
            ("get_weather".to_string(), json!({"city": "Paris"}), None),
            ("get_time".to_string(), json!({}), None),
        ]
    );
}

#[tokio::test]
async fn streaming_text_gives_partials_then_the_whole_reply() {
    let server = FakeServer::start().await;
    server.push(gemini::stream_text(&["The sky ", "is ", "blue."]));
    let items = collect_ok(model(&server).generate_content(ask("sky?"), true).await.unwrap()).await;

    assert_stream_shape(&items);
    let partials: Vec<String> = items[..items.len() - 1].iter().map(text).collect();
    assert_eq!(partials, ["The sky ", "is ", "blue."]);
    let last = items.last().unwrap();
    assert_eq!(text(last), "The sky is blue.");
    assert_eq!(
        last.content.as_ref().unwrap().parts.len(),
        1,
        "streamed text ends as one part"
    );
    assert_eq!(last.usage_metadata, Some(USAGE));
    assert_eq!(last.finish_reason, Some(FinishReason::Stop));

    let sent = server.last_request();
    assert_eq!(sent.path, "/v1beta/models/gemini-test:streamGenerateContent");
    assert_eq!(sent.query.as_deref(), Some("alt=sse"));
}

#[tokio::test]
async fn streamed_function_calls_come_whole_in_the_final_response() {
    let server = FakeServer::start().await;
    server.push(gemini::stream(vec![
        gemini::response(vec![json!({"text": "Looking it up."})], None),
        gemini::response(
            vec![
                json!({"functionCall": {"name": "search", "args": {"q": "rust"}}}),
                json!({"functionCall": {"name": "search", "args": {"q": "tonic"}, "id": "given-id"}}),
            ],
            Some("STOP"),
        ),
    ]));
    let items = collect_ok(model(&server).generate_content(ask("hi"), true).await.unwrap()).await;
    assert_stream_shape(&items);
    assert_eq!(items.len(), 2);
    assert!(calls(&items[0]).is_empty());
    let last = &items[1];
    assert_eq!(text(last), "Looking it up.");
    assert_eq!(
        calls(last),
        [
            ("search".to_string(), json!({"q": "rust"}), None),
            (
                "search".to_string(),
                json!({"q": "tonic"}),
                Some("given-id".to_string())
            ),
        ]
    );
}

#[tokio::test]
async fn thoughts_are_not_part_of_the_reply() {
    let server = FakeServer::start().await;
    server.push(gemini::response(
        vec![json!({"text": "pondering…", "thought": true}), json!({"text": "42"})],
        Some("STOP"),
    ));
    let items = collect_ok(model(&server).generate_content(ask("?"), false).await.unwrap()).await;
    assert_eq!(text(&items[0]), "42");
}

#[tokio::test]
async fn request_carries_system_tools_history_media_and_settings() {
    let server = FakeServer::start().await;
    server.push(gemini::text("ok"));
    let request = LlmRequest {
        system_instruction: Some("You are terse.".into()),
        tools: vec![
            ToolDeclaration {
                name: "get_weather".into(),
                description: "Weather for a city".into(),
                parameters: Some(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
                response: None,
            },
            ToolDeclaration {
                name: "now".into(),
                description: "The time".into(),
                parameters: None,
                response: Some(json!({"type": "string", "format": "date-time"})),
            },
        ],
        contents: vec![
            Content::new("user")
                .with_text("What is this?")
                .with_inline_data("image/jpeg", vec![0xFF, 0xD8, 0xFF])
                .with_file_uri("application/pdf", "gs://bucket/doc.pdf"),
            Content::new("model").with_part(
                PartKind::FunctionCall {
                    name: "get_weather".into(),
                    args: json!({"city": "Paris"}),
                    id: Some("call-1".into()),
                }
                .into(),
            ),
            Content::new("tool").with_part(
                PartKind::FunctionResponse {
                    function_response: FunctionResponseData {
                        name: "get_weather".into(),
                        response: json!({"sky": "sunny"}),
                    },
                    id: Some("call-1".into()),
                }
                .into(),
            ),
        ],
        config: GenerateContentConfig {
            temperature: Some(0.5),
            top_p: Some(0.25),
            max_output_tokens: Some(64),
            stop_sequences: vec!["STOP!".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    collect_ok(model(&server).generate_content(request, false).await.unwrap()).await;

    let body = server.last_request().json();
    assert_eq!(
        body["systemInstruction"],
        json!({"role": "user", "parts": [{"text": "You are terse."}]})
    );
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [
                {"text": "What is this?"},
                {"inlineData": {"mime_type": "image/jpeg", "data": "/9j/"}},
                {"fileData": {"mime_type": "application/pdf", "file_uri": "gs://bucket/doc.pdf"}},
            ]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "call-1"}}
            ]},
            // Tool results travel as a user turn.
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"sky": "sunny"}, "id": "call-1"}}
            ]},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"functionDeclarations": [
            {"name": "get_weather", "description": "Weather for a city",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
            // The result's JSON Schema as it is, in the field that takes one (ADK's
            // `response_json_schema`).
            {"name": "now", "description": "The time",
             "responseJsonSchema": {"type": "string", "format": "date-time"}},
        ]}])
    );
    assert_eq!(
        body["generationConfig"],
        json!({"temperature": 0.5, "topP": 0.25, "maxOutputTokens": 64, "stopSequences": ["STOP!"]})
    );
}

/// A request whose tool answer is stored with `role`, and the contents Gemini gets for it.
fn answered_call(role: &str) -> LlmRequest {
    let call = Part::function_call("lookup", json!({"q": "x"}), Some("call-1".into()));
    let answer = Part::function_response(
        FunctionResponseData {
            name: "lookup".into(),
            response: json!({"result": null}),
        },
        Some("call-1".into()),
    );
    LlmRequest {
        contents: vec![
            Content::new("user").with_text("find x"),
            Content::new("model").with_part(call),
            Content::new(role).with_part(answer),
        ],
        ..Default::default()
    }
}

#[tokio::test]
async fn a_function_response_stored_as_adk_stores_it_or_as_before_is_a_user_turn() {
    let server = FakeServer::start().await;
    let mut sent = Vec::new();
    // "user" is how ADK (and the runner) store it; "tool" is in sessions stored before.
    for role in ["user", "tool"] {
        server.push(gemini::text("ok"));
        collect_ok(
            model(&server)
                .generate_content(answered_call(role), false)
                .await
                .unwrap(),
        )
        .await;
        sent.push(server.last_request().json()["contents"].clone());
    }
    assert_eq!(
        sent[0][2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "lookup", "response": {"result": null}, "id": "call-1"}}
        ]})
    );
    assert_eq!(sent[0], sent[1]);
}

#[tokio::test]
async fn every_usage_field_and_the_model_version_are_kept() {
    let server = FakeServer::start().await;
    let usage = json!({
        "promptTokenCount": 31,
        "candidatesTokenCount": 5,
        "totalTokenCount": 60,
        "cachedContentTokenCount": 8,
        "thoughtsTokenCount": 24,
        "toolUsePromptTokenCount": 2,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 29}, {"modality": "IMAGE", "tokenCount": 2}],
        "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 8}],
        "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 5}],
        "toolUsePromptTokensDetails": [{"modality": "TEXT", "tokenCount": 2}],
        "trafficType": "ON_DEMAND"
    });
    let mut reply = gemini::text("Bonjour");
    reply["usageMetadata"] = usage;
    reply["modelVersion"] = json!("gemini-2.5-flash-001");
    server.push(reply);
    let items = collect_ok(model(&server).generate_content(ask("hi"), false).await.unwrap()).await;

    let modality = |modality: &str, token_count: i32| ModalityTokenCount {
        modality: Some(modality.into()),
        token_count: Some(token_count),
    };
    assert_eq!(
        items[0].usage_metadata,
        Some(UsageMetadata {
            prompt_token_count: Some(31),
            candidates_token_count: Some(5),
            total_token_count: Some(60),
            cached_content_token_count: Some(8),
            thoughts_token_count: Some(24),
            tool_use_prompt_token_count: Some(2),
            prompt_tokens_details: vec![modality("TEXT", 29), modality("IMAGE", 2)],
            cache_tokens_details: vec![modality("TEXT", 8)],
            candidates_tokens_details: vec![modality("TEXT", 5)],
            tool_use_prompt_tokens_details: vec![modality("TEXT", 2)],
            traffic_type: Some("ON_DEMAND".into()),
        })
    );
    assert_eq!(items[0].model_version.as_deref(), Some("gemini-2.5-flash-001"));
}

#[tokio::test]
async fn a_streamed_reply_has_the_model_version_of_its_last_chunk() {
    let server = FakeServer::start().await;
    let mut first = gemini::response(vec![json!({"text": "a"})], None);
    first["modelVersion"] = json!("gemini-early");
    let mut last = gemini::response(vec![json!({"text": "b"})], Some("STOP"));
    last["modelVersion"] = json!("gemini-late");
    server.push(gemini::stream(vec![first, last]));
    let items = collect_ok(model(&server).generate_content(ask("hi"), true).await.unwrap()).await;
    assert_eq!(items.last().unwrap().model_version.as_deref(), Some("gemini-late"));
}

#[tokio::test]
async fn http_errors_map_to_codes_with_the_provider_message() {
    let server = FakeServer::start().await;
    server.push(
        FakeReply::status(
            429,
            gemini::error(
                429,
                "Resource has been exhausted (e.g. check quota).",
                "RESOURCE_EXHAUSTED",
            ),
        )
        .with_header("retry-after", "30"),
    );
    server.push(FakeReply::status(
        503,
        gemini::error(503, "The model is overloaded.", "UNAVAILABLE"),
    ));
    server.push(FakeReply::status(
        403,
        gemini::error(403, "Permission denied.", "PERMISSION_DENIED"),
    ));
    server.push(FakeReply::status(
        400,
        gemini::error(400, "API key not valid.", "INVALID_ARGUMENT"),
    ));
    let llm = model(&server);

    let err = llm.generate_content(ask("hi"), true).await.err().unwrap();
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert_eq!(
        err.to_string(),
        "gemini rate limit: Resource has been exhausted (e.g. check quota). (retry after 30s)"
    );
    let err = llm.generate_content(ask("hi"), false).await.err().unwrap();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.to_string(), "gemini returned 503: The model is overloaded.");
    // The provider refused the server's key: the deployment's problem, not the caller's credential.
    let err = llm.generate_content(ask("hi"), false).await.err().unwrap();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.to_string().contains("gemini")
            && err.to_string().contains("gemini-test")
            && err.to_string().contains("403"),
        "{err}"
    );
    let err = llm.generate_content(ask("hi"), false).await.err().unwrap();
    assert!(matches!(err, AdkError::Model(_)), "{err:?}");
    assert!(err.to_string().contains("400: API key not valid."), "{err}");
}

#[tokio::test]
async fn a_stream_without_its_final_chunk_is_an_error() {
    let server = FakeServer::start().await;
    server.push(gemini::stream(vec![gemini::response(
        vec![json!({"text": "half"})],
        None,
    )]));
    let (items, err) = collect(model(&server).generate_content(ask("hi"), true).await.unwrap()).await;
    assert_eq!(items.iter().map(text).collect::<Vec<_>>(), ["half"]);
    let err = err.expect("an error, never a silent end");
    assert_eq!(err.code(), Code::Unavailable);
    assert!(err.to_string().contains("before its final chunk"), "{err}");
}

#[tokio::test]
async fn a_stalled_server_is_deadline_exceeded() {
    let server = FakeServer::start().await;
    server.push(FakeReply::Stall);
    let llm = model(&server).with_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let err = llm.generate_content(ask("hi"), true).await.err().unwrap();
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert_eq!(err.to_string(), "gemini did not answer within 1s");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn blocked_prompt_says_why() {
    let server = FakeServer::start().await;
    server.push(json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}));
    let items = collect_ok(model(&server).generate_content(ask("hi"), false).await.unwrap()).await;
    assert_eq!(items[0].error_code.as_deref(), Some("PROHIBITED_CONTENT"));
    assert_eq!(items[0].finish_reason, Some(FinishReason::Safety));
    assert!(items[0].content.is_none());
}

#[tokio::test]
async fn built_in_tools_are_named_in_the_request_and_their_results_come_back() {
    let server = FakeServer::start().await;
    server.push(json!({
        "candidates": [{
            "content": { "role": "model", "parts": [
                { "executableCode": { "language": "PYTHON", "code": "print(6 * 7)" } },
                { "codeExecutionResult": { "outcome": "OUTCOME_OK", "output": "42\n" } },
                { "text": "It is 42, as Tokyo's papers say." }
            ]},
            "finishReason": "STOP",
            "groundingMetadata": { "webSearchQueries": ["tokyo news"], "groundingChunks": [{ "web": { "uri": "https://example.com/a", "title": "A" } }] }
        }]
    }));
    let mut request = ask("What is 6 * 7 in the news?");
    request.tools = vec![ToolDeclaration {
        name: "lookup".into(),
        description: "Looks up.".into(),
        parameters: None,
        response: None,
    }];
    request.config.builtin_tools = vec![
        BuiltinTool::GoogleSearch,
        BuiltinTool::UrlContext,
        BuiltinTool::CodeExecution,
        BuiltinTool::GoogleMaps,
    ];
    let items = collect_ok(model(&server).generate_content(request.clone(), false).await.unwrap()).await;

    let sent = server.last_request().json();
    assert_eq!(
        sent["tools"],
        // Gemini's own tools first, the function declarations last, as ADK's requests.
        json!([
            { "googleSearch": {} },
            { "urlContext": {} },
            { "codeExecution": {} },
            // ADK's google_maps_grounding: types.Tool(google_maps=types.GoogleMaps()).
            { "googleMaps": {} },
            { "functionDeclarations": [{ "name": "lookup", "description": "Looks up." }] }
        ])
    );
    let reply = &items[0];
    let parts = &reply.content.as_ref().expect("content").parts;
    assert!(matches!(
        &parts[0].kind,
        PartKind::ExecutableCode { code: Some(code), language: Some(language), .. } if code == "print(6 * 7)" && language == "PYTHON"
    ));
    assert!(matches!(
        &parts[1].kind,
        PartKind::CodeExecutionResult { outcome: Some(outcome), output: Some(output), .. } if outcome == "OUTCOME_OK" && output == "42\n"
    ));
    assert_eq!(text(reply), "It is 42, as Tokyo's papers say.");
    let grounding = reply.grounding_metadata.as_ref().expect("grounding metadata");
    assert_eq!(grounding["webSearchQueries"], json!(["tokyo news"]));

    // OpenAI-compatible models have no such tools: refused, not silently dropped.
    let openai = adk_grpc_models::OpenAiCompatible::new(server.url(), "gpt-test").unwrap();
    let refused = openai.generate_content(request, false).await.err().expect("refused");
    assert!(refused.to_string().contains("google_search"), "{refused}");
}
