//! OpenAiCompatible against a fake chat-completions server on loopback HTTP.

use crate::common::{assert_stream_shape, calls, collect, collect_ok, text};
use adk_grpc_core::{
    AdkError, Content, FinishReason, FunctionResponseData, GenerateContentConfig, Llm, LlmRequest, Part,
    ToolDeclaration, UsageMetadata,
};
use adk_grpc_models::OpenAiCompatible;
use adk_grpc_models::testing::{FakeReply, FakeServer, SseEnd, SseScript, SseStep, openai};
use serde_json::json;
use std::time::{Duration, Instant};
use tonic::Code;

fn model(server: &FakeServer) -> OpenAiCompatible {
    OpenAiCompatible::new(format!("{}/v1", server.url()), "gpt-test")
        .unwrap()
        .with_api_key("sk-test-key")
        .unwrap()
}

fn ask(text: &str) -> LlmRequest {
    LlmRequest {
        contents: vec![Content::new("user").with_text(text)],
        ..Default::default()
    }
}

const USAGE: UsageMetadata = UsageMetadata {
    prompt_token_count: Some(openai::PROMPT_TOKENS as i32),
    candidates_token_count: Some(openai::COMPLETION_TOKENS as i32),
    total_token_count: Some((openai::PROMPT_TOKENS + openai::COMPLETION_TOKENS) as i32),
    // ADK's LiteLlm stores 0 when the server reports no cached tokens.
    cached_content_token_count: Some(0),
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
    server.push(openai::text("Hello there"));
    let items = collect_ok(model(&server).generate_content(ask("hi"), false).await.unwrap()).await;

    assert_eq!(items.len(), 1);
    let reply = &items[0];
    assert_eq!(text(reply), "Hello there");
    assert_eq!(reply.content.as_ref().unwrap().role, "model");
    assert_eq!(reply.finish_reason, Some(FinishReason::Stop));
    assert_eq!(reply.usage_metadata, Some(USAGE));
    assert!(reply.partial.is_none() && reply.turn_complete.is_none());

    let sent = server.last_request();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-key"));
    let body = sent.json();
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
    assert!(body.get("stream").is_none(), "{body}");
}

#[tokio::test]
async fn the_request_model_overrides_the_configured_one() {
    let server = FakeServer::start().await;
    server.push(openai::text("ok"));
    let request = LlmRequest {
        model: "gpt-other".into(),
        ..ask("hi")
    };
    collect_ok(model(&server).generate_content(request, false).await.unwrap()).await;
    assert_eq!(server.last_request().json()["model"], "gpt-other");
}

#[tokio::test]
async fn streaming_text_gives_partials_then_the_whole_reply() {
    let server = FakeServer::start().await;
    server.push(openai::stream_text(&["Hel", "lo, ", "world"]));
    let items = collect_ok(model(&server).generate_content(ask("hi"), true).await.unwrap()).await;

    assert_stream_shape(&items);
    let partials: Vec<String> = items[..items.len() - 1].iter().map(text).collect();
    assert_eq!(partials, ["Hel", "lo, ", "world"]);
    let last = items.last().unwrap();
    assert_eq!(text(last), "Hello, world");
    assert_eq!(last.finish_reason, Some(FinishReason::Stop));
    assert_eq!(last.usage_metadata, Some(USAGE));

    let body = server.last_request().json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn cached_and_reasoning_tokens_and_the_answering_model_are_kept_as_adk_litellm_keeps_them() {
    let server = FakeServer::start().await;
    let mut reply = openai::text("ok");
    reply["model"] = json!("gpt-test-2025-01-01");
    reply["usage"] = json!({
        "prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49,
        "prompt_tokens_details": {"cached_tokens": 32, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 6, "audio_tokens": 0}
    });
    server.push(reply);
    // A server that names no model and reports neither count.
    let mut bare = openai::text("ok");
    bare.as_object_mut().unwrap().remove("model");
    server.push(bare);
    // Another's flat name for the cached tokens.
    let mut flat = openai::text("ok");
    flat["usage"]["cached_tokens"] = json!(3);
    server.push(flat);

    let mut replies = Vec::new();
    for _ in 0..3 {
        let items = collect_ok(model(&server).generate_content(ask("hi"), false).await.unwrap()).await;
        replies.push(items.into_iter().next().unwrap());
    }
    let usage = replies[0].usage_metadata.clone().unwrap();
    assert_eq!(
        (
            usage.prompt_token_count,
            usage.cached_content_token_count,
            usage.thoughts_token_count
        ),
        (Some(40), Some(32), Some(6))
    );
    assert_eq!(replies[0].model_version.as_deref(), Some("gpt-test-2025-01-01"));
    assert_eq!(replies[1].usage_metadata, Some(USAGE), "cached 0, no thoughts count");
    assert_eq!(
        replies[1].model_version.as_deref(),
        Some("gpt-test"),
        "the model asked for"
    );
    let flat = replies[2].usage_metadata.clone().unwrap();
    assert_eq!(flat.cached_content_token_count, Some(3));
}

#[tokio::test]
async fn a_streamed_reply_names_the_model_its_chunks_name() {
    let server = FakeServer::start().await;
    server.push(openai::stream_text(&["a", "b"]));
    let items = collect_ok(model(&server).generate_content(ask("hi"), true).await.unwrap()).await;
    // The fake's chunks say "fake-model"; the request asked for "gpt-test".
    assert_eq!(items.last().unwrap().model_version.as_deref(), Some("fake-model"));
}

#[tokio::test]
async fn a_function_response_stored_as_adk_stores_it_or_as_before_is_a_tool_message() {
    let server = FakeServer::start().await;
    let mut sent = Vec::new();
    // "user" is how ADK (and the runner) store it; "tool" is in sessions stored before.
    for role in ["user", "tool"] {
        let request = LlmRequest {
            contents: vec![
                Content::new("user").with_text("find x"),
                Content::new("model").with_part(Part::function_call("lookup", json!({}), Some("call_1".into()))),
                Content::new(role).with_part(Part::function_response(
                    FunctionResponseData {
                        name: "lookup".into(),
                        response: json!({"result": null}),
                    },
                    Some("call_1".into()),
                )),
            ],
            ..Default::default()
        };
        server.push(openai::text("ok"));
        collect_ok(model(&server).generate_content(request, false).await.unwrap()).await;
        sent.push(server.last_request().json()["messages"].clone());
    }
    assert_eq!(
        sent[0][2],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"result\": null}"})
    );
    assert_eq!(sent[0], sent[1]);
}

#[tokio::test]
async fn streamed_tool_call_pieces_are_assembled_into_the_final_response() {
    let server = FakeServer::start().await;
    // Two parallel calls, told apart by `index`: id and name first, then the
    // arguments in three fragments each, interleaved between the calls.
    server.push(openai::stream(
        vec![
            openai::tool_call_chunk(0, Some("call_a"), Some("get_weather"), ""),
            openai::tool_call_chunk(1, Some("call_b"), Some("get_time"), ""),
            openai::tool_call_chunk(0, None, None, r#"{"ci"#),
            openai::tool_call_chunk(1, None, None, r#"{"tz": "#),
            openai::tool_call_chunk(0, None, None, r#"ty": "Par"#),
            openai::tool_call_chunk(1, None, None, r#""UTC""#),
            openai::tool_call_chunk(0, None, None, r#"is"}"#),
            openai::tool_call_chunk(1, None, None, "}"),
        ],
        "tool_calls",
    ));
    let items = collect_ok(model(&server).generate_content(ask("weather?"), true).await.unwrap()).await;

    assert_stream_shape(&items);
    // No half-made call leaks out in a partial: calls appear only at the end.
    for partial in &items[..items.len() - 1] {
        assert!(calls(partial).is_empty(), "{partial:?}");
    }
    let last = items.last().unwrap();
    assert_eq!(
        calls(last),
        [
            (
                "get_weather".to_string(),
                json!({"city": "Paris"}),
                Some("call_a".to_string())
            ),
            ("get_time".to_string(), json!({"tz": "UTC"}), Some("call_b".to_string())),
        ]
    );
    assert_eq!(last.finish_reason, Some(FinishReason::Stop));
    assert_eq!(last.usage_metadata, Some(USAGE));
}

#[tokio::test]
async fn text_and_tool_calls_in_one_stream() {
    let server = FakeServer::start().await;
    server.push(openai::stream(
        vec![
            openai::text_chunk("Checking"),
            openai::text_chunk("…"),
            openai::tool_call_chunk(0, Some("c1"), Some("lookup"), r#"{"q": 1}"#),
        ],
        "tool_calls",
    ));
    let items = collect_ok(model(&server).generate_content(ask("x"), true).await.unwrap()).await;
    assert_stream_shape(&items);
    assert_eq!(items.len(), 3);
    let last = items.last().unwrap();
    let parts = &last.content.as_ref().unwrap().parts;
    assert_eq!(parts[0], Part::text_part("Checking…"));
    assert_eq!(
        calls(last),
        [("lookup".to_string(), json!({"q": 1}), Some("c1".to_string()))]
    );
}

#[tokio::test]
async fn request_carries_system_tools_history_and_settings() {
    let server = FakeServer::start().await;
    server.push(openai::text("ok"));
    let request = LlmRequest {
        system_instruction: Some("Be brief.".into()),
        tools: vec![
            ToolDeclaration {
                name: "get_weather".into(),
                description: "Weather for a city".into(),
                parameters: Some(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
                response: Some(
                    json!({"type": "object", "properties": {"sky": {"type": "string", "description": "Clear — or not"}}}),
                ),
            },
            ToolDeclaration {
                name: "now".into(),
                description: "The time".into(),
                parameters: None,
                // A type alone says nothing the description needs.
                response: Some(json!({"type": "string"})),
            },
        ],
        contents: vec![
            Content::new("user").with_text("Weather in Paris?"),
            Content::new("model")
                .with_text("Let me check.")
                .with_part(Part::function_call(
                    "get_weather",
                    json!({"city": "Paris"}),
                    Some("call_1".into()),
                )),
            Content::new("tool").with_part(Part::function_response(
                FunctionResponseData {
                    name: "get_weather".into(),
                    response: json!({"sky": "sunny"}),
                },
                Some("call_1".into()),
            )),
            Content::new("model").with_text("Sunny."),
            Content::new("user")
                .with_text("And this?")
                .with_inline_data("image/png", vec![1, 2, 3]),
        ],
        config: GenerateContentConfig {
            temperature: Some(0.5),
            top_p: Some(0.25),
            max_output_tokens: Some(100),
            stop_sequences: vec!["END".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    collect_ok(model(&server).generate_content(request, false).await.unwrap()).await;

    let body = server.last_request().json();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"sky\": \"sunny\"}"},
            {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": [
                {"type": "text", "text": "And this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQID"}}
            ]},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([
            // The result's schema appended as ADK's LiteLlm writes it (Python's json.dumps,
            // keys sorted, no spaces, ASCII only).
            {"type": "function", "function": {"name": "get_weather",
                "description": "Weather for a city\nReturns a JSON object conforming to this schema: \
                    {\"properties\":{\"sky\":{\"description\":\"Clear \\u2014 or not\",\"type\":\"string\"}},\
                    \"type\":\"object\"}",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "now", "description": "The time",
                "parameters": {"type": "object", "properties": {}}}},
        ])
    );
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["top_p"], 0.25);
    assert_eq!(body["max_completion_tokens"], 100);
    assert_eq!(body["stop"], json!(["END"]));
}

/// As ADK's LiteLlm: a result's schema that would take the description past 1024
/// characters is left out, the description kept.
#[tokio::test]
async fn a_result_schema_too_long_for_the_description_is_left_out() {
    let server = FakeServer::start().await;
    server.push(openai::text("ok"));
    let mut request = ask("go");
    let schema = |chars: usize| json!({"type": "string", "description": "x".repeat(chars)});
    // `Returns a string conforming to this schema: ` and the JSON around the text.
    let frame = "The time\nReturns a string conforming to this schema: {\"description\":\"\",\"type\":\"string\"}"
        .chars()
        .count();
    request.tools = ["fits", "too_long"]
        .iter()
        .zip([1024 - frame, 1025 - frame])
        .map(|(name, chars)| ToolDeclaration {
            name: name.to_string(),
            description: "The time".into(),
            parameters: None,
            response: Some(schema(chars)),
        })
        .collect();
    collect_ok(model(&server).generate_content(request, false).await.unwrap()).await;

    let body = server.last_request().json();
    let fits = body["tools"][0]["function"]["description"].as_str().unwrap();
    assert_eq!(fits.chars().count(), 1024);
    assert!(
        fits.starts_with("The time\nReturns a string conforming to this schema: {"),
        "{fits}"
    );
    assert_eq!(body["tools"][1]["function"]["description"], "The time");
}

#[tokio::test]
async fn non_streamed_tool_calls_are_parsed() {
    let server = FakeServer::start().await;
    server.push(openai::tool_calls(&[
        ("call_x", "search", json!({"q": "rust"})),
        ("call_y", "noop", json!({})),
    ]));
    let items = collect_ok(model(&server).generate_content(ask("go"), false).await.unwrap()).await;
    assert_eq!(
        calls(&items[0]),
        [
            ("search".to_string(), json!({"q": "rust"}), Some("call_x".to_string())),
            ("noop".to_string(), json!({}), Some("call_y".to_string())),
        ]
    );
    assert_eq!(text(&items[0]), "");
}

#[tokio::test]
async fn unparseable_tool_arguments_name_the_tool() {
    let server = FakeServer::start().await;
    let mut reply = openai::tool_calls(&[("c", "search", json!({}))]);
    reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json!("{\"q\": ");
    server.push(reply);
    let err = model(&server).generate_content(ask("go"), false).await.err().unwrap();
    assert!(matches!(err, AdkError::Model(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("`search`") && message.contains("{\"q\": "),
        "{message}"
    );
}

#[tokio::test]
async fn rate_limit_is_resource_exhausted_with_retry_after() {
    let server = FakeServer::start().await;
    server.push(
        FakeReply::status(429, openai::error("Rate limit reached for gpt-test", "requests"))
            .with_header("retry-after", "7"),
    );
    let err = model(&server).generate_content(ask("hi"), false).await.err().unwrap();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err}");
    let message = err.to_string();
    assert!(
        message.starts_with("openai rate limit: Rate limit reached for gpt-test"),
        "{message}"
    );
    assert!(message.contains("retry after 7s"), "{message}");
}

#[tokio::test]
async fn server_errors_are_unavailable_with_a_body_excerpt() {
    let server = FakeServer::start().await;
    server.push(FakeReply::status(500, "upstream exploded"));
    server.push(FakeReply::status(
        503,
        openai::error("The engine is overloaded", "server_error"),
    ));
    let llm = model(&server);

    let err = llm.generate_content(ask("hi"), false).await.err().unwrap();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.to_string(), "openai returned 500: upstream exploded");

    // Streaming requests fail the same way, before any item.
    let err = llm.generate_content(ask("hi"), true).await.err().unwrap();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.to_string(), "openai returned 503: The engine is overloaded");
}

#[tokio::test]
async fn client_errors_map_to_fitting_codes() {
    let server = FakeServer::start().await;
    let cases = [(404, Code::FailedPrecondition), (400, Code::Internal)];
    for (status, _) in cases {
        server.push(FakeReply::status(
            status,
            openai::error(&format!("problem {status}"), "invalid_request_error"),
        ));
    }
    let llm = model(&server);
    for (status, code) in cases {
        let err = llm.generate_content(ask("hi"), false).await.err().unwrap();
        assert_eq!(err.code(), code, "{status}: {err}");
        let message = err.to_string();
        assert!(
            message.contains(&status.to_string()) && message.contains(&format!("problem {status}")),
            "{message}"
        );
    }
}

/// 401 and 403 refuse the SERVER's key, not the gRPC caller's credential: FAILED_PRECONDITION
/// (never UNAUTHENTICATED or PERMISSION_DENIED), naming the provider and the model, without
/// the provider's text (it may quote part of the key).
#[tokio::test]
async fn a_refused_api_key_is_the_deployments_problem_not_the_callers() {
    let server = FakeServer::start().await;
    for status in [401, 403] {
        server.push(FakeReply::status(
            status,
            openai::error("Incorrect API key provided: sk-te****-key", "invalid_request_error"),
        ));
    }
    let llm = model(&server);
    for status in [401, 403] {
        let err = llm.generate_content(ask("hi"), status == 403).await.err().unwrap();
        assert_eq!(err.code(), Code::FailedPrecondition, "{status}: {err}");
        let message = err.to_string();
        assert!(
            message.contains("openai") && message.contains("gpt-test") && message.contains(&status.to_string()),
            "{message}"
        );
        assert!(!message.contains("sk-te"), "{message}");
    }
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors_or_debug_output() {
    let server = FakeServer::start().await;
    // A misbehaving proxy that echoes the Authorization header back.
    server.push(FakeReply::status(502, "bad header: Bearer sk-test-key"));
    let llm = model(&server);
    let err = llm.generate_content(ask("hi"), false).await.err().unwrap();
    assert!(!err.to_string().contains("sk-test-key"), "{err}");
    assert!(err.to_string().contains("<redacted>"), "{err}");
    assert!(!format!("{llm:?}").contains("sk-test-key"));
}

#[tokio::test]
async fn a_stalled_server_is_deadline_exceeded_within_the_timeout() {
    let server = FakeServer::start().await;
    server.push(FakeReply::Stall);
    server.push(FakeReply::Stall);
    let llm = model(&server).with_timeout(Duration::from_secs(1));

    for stream in [false, true] {
        let started = Instant::now();
        let err = llm.generate_content(ask("hi"), stream).await.err().unwrap();
        let took = started.elapsed();
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
        assert_eq!(err.to_string(), "openai did not answer within 1s");
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }
    // Giving up closed the connections.
    assert!(server.wait_for_disconnects(2, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_stream_that_goes_silent_is_deadline_exceeded() {
    let server = FakeServer::start().await;
    server.push(SseScript::data([openai::role_chunk(), openai::text_chunk("partial")]).ending(SseEnd::Hang));
    let llm = model(&server).with_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let (items, err) = collect(llm.generate_content(ask("hi"), true).await.unwrap()).await;
    assert_eq!(items.iter().map(text).collect::<Vec<_>>(), ["partial"]);
    let err = err.expect("an error, not a silent end");
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
    assert!(err.to_string().contains("stalled"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_stream_cut_mid_way_ends_with_an_error() {
    let server = FakeServer::start().await;
    // The connection is aborted after two text chunks...
    server.push(SseScript::data([openai::text_chunk("one "), openai::text_chunk("two")]).ending(SseEnd::Cut));
    // ...or the body ends cleanly but without `[DONE]`.
    server.push(SseScript::data([openai::text_chunk("one "), openai::text_chunk("two")]));
    let llm = model(&server);

    for _ in 0..2 {
        let (items, err) = collect(llm.generate_content(ask("hi"), true).await.unwrap()).await;
        assert_eq!(items.iter().map(text).collect::<Vec<_>>(), ["one ", "two"]);
        assert!(items.iter().all(|r| r.partial == Some(true)));
        let err = err.expect("an error item, never a silent end");
        assert_eq!(err.code(), Code::Unavailable, "{err}");
        assert!(err.to_string().starts_with("openai stream"), "{err}");
    }
}

#[tokio::test]
async fn malformed_and_error_chunks_are_errors() {
    let server = FakeServer::start().await;
    server.push(SseScript::data([openai::text_chunk("ok"), "{not json".to_string()]));
    server.push(SseScript::data([
        openai::text_chunk("ok"),
        json!({"error": {"message": "model crashed"}}).to_string(),
    ]));
    let llm = model(&server);

    let (_, err) = collect(llm.generate_content(ask("hi"), true).await.unwrap()).await;
    let err = err.unwrap();
    assert!(
        matches!(err, AdkError::Model(_)) && err.to_string().contains("malformed stream chunk"),
        "{err}"
    );

    let (_, err) = collect(llm.generate_content(ask("hi"), true).await.unwrap()).await;
    assert!(err.unwrap().to_string().contains("model crashed"));
}

#[tokio::test]
async fn malformed_non_streamed_body_is_a_model_error() {
    let server = FakeServer::start().await;
    server.push(FakeReply::status(200, "<html>gateway</html>"));
    let err = model(&server).generate_content(ask("hi"), false).await.err().unwrap();
    assert!(matches!(err, AdkError::Model(_)), "{err:?}");
    assert!(err.to_string().contains("<html>gateway</html>"), "{err}");
}

#[tokio::test]
async fn events_split_across_writes_and_keep_alive_comments_are_handled() {
    let server = FakeServer::start().await;
    let event = format!("data: {}\r\n\r\n", openai::text_chunk("héllo")).into_bytes();
    let cut = event.iter().position(|&b| b == 0xC3).unwrap() + 1; // inside the two-byte 'é'
    server.push(
        SseScript::default()
            .then(SseStep::Raw(b": keep-alive\n\n".to_vec()))
            .then(SseStep::Raw(event[..cut].to_vec()))
            .then(SseStep::Pause(Duration::from_millis(50)))
            .then(SseStep::Raw(event[cut..].to_vec()))
            .then(SseStep::Data(openai::finish_chunk("length")))
            .then(SseStep::Data(openai::DONE.into())),
    );
    let items = collect_ok(model(&server).generate_content(ask("hi"), true).await.unwrap()).await;
    assert_eq!(items.iter().map(text).collect::<Vec<_>>(), ["héllo", "héllo"]);
    assert_eq!(items[1].finish_reason, Some(FinishReason::MaxTokens));
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let server = FakeServer::start().await;
    server.push(SseScript::data([openai::role_chunk(), openai::text_chunk("first")]).ending(SseEnd::Hang));
    let mut stream = model(&server).generate_content(ask("hi"), true).await.unwrap();
    let first = futures::StreamExt::next(&mut stream).await.unwrap().unwrap();
    assert_eq!(text(&first), "first");
    assert_eq!(server.disconnects(), 0);

    drop(stream);
    assert!(
        server.wait_for_disconnects(1, Duration::from_secs(5)).await,
        "the fake server never saw the client leave"
    );
}

#[tokio::test]
async fn dropping_the_call_future_closes_the_connection() {
    let server = FakeServer::start().await;
    server.push(FakeReply::Stall);
    let llm = model(&server);
    let call = llm.generate_content(ask("hi"), false);
    assert!(tokio::time::timeout(Duration::from_millis(300), call).await.is_err());
    assert!(server.wait_for_disconnects(1, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener); // nothing listens there now
    let llm = OpenAiCompatible::new(format!("http://{addr}/v1"), "m").unwrap();
    let err = llm.generate_content(ask("hi"), false).await.err().unwrap();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert!(err.to_string().starts_with("openai request failed"), "{err}");
}

/// A reply, and one event of a streamed reply, longer than `--max-model-reply-bytes`
/// (4 MiB by default) fails the call with RESOURCE_EXHAUSTED naming the model and the
/// limit; nothing past the limit is read.
#[tokio::test]
async fn a_reply_or_streamed_event_over_the_limit_fails_the_call_naming_the_model() {
    let limit = adk_grpc_core::replies::max_model_reply_bytes();
    let server = FakeServer::start().await;
    server.push(openai::text(&"x".repeat(limit + 1)));
    let failure = match model(&server).generate_content(ask("hi"), false).await {
        Ok(_) => panic!("a reply over the limit was read"),
        Err(e) => e,
    };
    let status = tonic::Status::from(failure);
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().starts_with("openai (model gpt-test): the reply (")
            && status.message().contains(&format!("is longer than {limit} bytes")),
        "{status:?}"
    );

    server.push(openai::stream(
        vec![openai::text_chunk("fine"), openai::text_chunk(&"y".repeat(limit))],
        "stop",
    ));
    let (items, failure) = collect(model(&server).generate_content(ask("hi"), true).await.unwrap()).await;
    assert_eq!(
        items.iter().map(text).collect::<Vec<_>>(),
        ["fine"],
        "the events before it arrive"
    );
    let status = tonic::Status::from(failure.expect("the oversized event fails the stream"));
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status
            .message()
            .starts_with("openai (model gpt-test): one event of the streamed reply is longer than"),
        "{status:?}"
    );
}
