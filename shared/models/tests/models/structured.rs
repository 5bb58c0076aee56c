//! Structured output, thinking and the other generation settings, on each provider's
//! wire: what the request carries, and thoughts in replies, streamed and not.

use crate::common::{assert_stream_shape, collect_ok, text};
use adk_grpc_core::{
    Content, FunctionCallingConfig, FunctionCallingMode, GenerateContentConfig, ImageConfig, Llm, LlmRequest,
    LlmResponse, Part, ThinkingConfig, ThinkingEffort, ToolConfig, ToolDeclaration,
};
use adk_grpc_models::testing::{FakeServer, gemini, openai};
use adk_grpc_models::{Gemini, MockModel, MockTurn, OpenAiCompatible};
use serde_json::{Value, json};

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"],
        "additionalProperties": false,
    })
}

fn request(config: GenerateContentConfig) -> LlmRequest {
    LlmRequest {
        contents: vec![Content::new("user").with_text("Weather in Oslo?")],
        config,
        ..Default::default()
    }
}

fn openai_model(server: &FakeServer) -> OpenAiCompatible {
    OpenAiCompatible::new(format!("{}/v1", server.url()), "gpt-test").unwrap()
}

fn gemini_model(server: &FakeServer) -> Gemini {
    Gemini::new("gemini-test").unwrap().with_base_url(server.url())
}

/// The thought parts and the answer parts of a response.
fn split(response: &LlmResponse) -> (Vec<String>, Vec<String>) {
    let parts = response.content.iter().flat_map(|c| &c.parts);
    let texts = |thought: bool| -> Vec<String> {
        parts
            .clone()
            .filter(|p| p.is_thought() == thought)
            .filter_map(|p| match &p.kind {
                adk_grpc_core::PartKind::Text { text } => Some(text.clone()),
                _ => None,
            })
            .collect()
    };
    (texts(true), texts(false))
}

#[tokio::test]
async fn openai_gets_a_json_schema_response_format_and_the_other_settings() {
    let server = FakeServer::start().await;
    server.push(openai::json_reply(&json!({"city": "Oslo", "celsius": 3})));
    let config = GenerateContentConfig {
        response_schema: Some(schema()),
        seed: Some(7),
        presence_penalty: Some(0.5),
        frequency_penalty: Some(-0.5),
        top_k: Some(40),
        thinking: Some(ThinkingConfig {
            effort: Some(ThinkingEffort::High),
            ..Default::default()
        }),
        ..Default::default()
    };
    let items = collect_ok(
        openai_model(&server)
            .generate_content(request(config), false)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(text(&items[0]), r#"{"city":"Oslo","celsius":3}"#);
    let body = server.last_request().json();
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema(), "strict": true}})
    );
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["seed"], 7);
    assert_eq!(body["presence_penalty"], 0.5);
    assert_eq!(body["frequency_penalty"], -0.5);
    assert_eq!(body["top_k"], 40);

    // A schema OpenAI's strict mode would refuse goes without strict, unchanged; the
    // title names it; JSON without a schema is json_object.
    server.push(openai::text("{}"));
    let loose = json!({"title": "Forecast", "type": "object", "properties": {"city": {"type": "string"}}});
    let config = GenerateContentConfig {
        response_schema: Some(loose.clone()),
        ..Default::default()
    };
    collect_ok(
        openai_model(&server)
            .generate_content(request(config), false)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        server.last_request().json()["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "Forecast", "schema": loose, "strict": false}})
    );
    server.push(openai::text("{}"));
    let config = GenerateContentConfig {
        response_mime_type: Some("application/json".into()),
        ..Default::default()
    };
    collect_ok(
        openai_model(&server)
            .generate_content(request(config), false)
            .await
            .unwrap(),
    )
    .await;
    let body = server.last_request().json();
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert!(
        body.get("reasoning_effort").is_none() && body.get("seed").is_none(),
        "{body}"
    );
}

#[tokio::test]
async fn gemini_gets_a_response_json_schema_thinking_config_and_safety_settings() {
    let server = FakeServer::start().await;
    server.push(gemini::json_reply(&json!({"city": "Oslo", "celsius": 3})));
    let safety = vec![json!({"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"})];
    let config = GenerateContentConfig {
        response_schema: Some(schema()),
        safety_settings: safety.clone(),
        top_k: Some(20),
        seed: Some(11),
        presence_penalty: Some(0.25),
        frequency_penalty: Some(0.75),
        thinking: Some(ThinkingConfig {
            budget_tokens: Some(1024),
            include_thoughts: Some(true),
            effort: None,
        }),
        ..Default::default()
    };
    let items = collect_ok(
        gemini_model(&server)
            .generate_content(request(config), false)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(text(&items[0]), r#"{"city":"Oslo","celsius":3}"#);
    let body = server.last_request().json();
    assert_eq!(
        body["generationConfig"],
        json!({
            "responseMimeType": "application/json",
            "responseJsonSchema": schema(),
            "topK": 20.0,
            "seed": 11,
            "presencePenalty": 0.25,
            "frequencyPenalty": 0.75,
            "thinkingConfig": {"thinking_budget": 1024, "include_thoughts": true},
        })
    );
    assert_eq!(
        body["safetySettings"],
        json!(safety),
        "safetySettings is a top-level field"
    );

    server.push(gemini::text("ok"));
    let config = GenerateContentConfig {
        response_mime_type: Some("text/x.enum".into()),
        thinking: Some(ThinkingConfig {
            effort: Some(ThinkingEffort::Low),
            ..Default::default()
        }),
        ..Default::default()
    };
    collect_ok(
        gemini_model(&server)
            .generate_content(request(config), false)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        server.last_request().json()["generationConfig"],
        json!({"responseMimeType": "text/x.enum", "thinkingConfig": {"thinking_level": "LOW"}})
    );
}

#[tokio::test]
async fn gemini_thoughts_become_thought_parts_streamed_and_not() {
    let server = FakeServer::start().await;
    server.push(gemini::thinking("The user wants Oslo.", "It is cold."));
    let items = collect_ok(
        gemini_model(&server)
            .generate_content(request(Default::default()), false)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        split(&items[0]),
        (vec!["The user wants Oslo.".into()], vec!["It is cold.".into()])
    );
    assert_eq!(text(&items[0]), "It is cold.", "a thought is not the reply's text");

    let signed = json!({"text": "Answer.", "thoughtSignature": "c2lnbmVk"});
    server.push(gemini::stream(vec![
        gemini::response(vec![gemini::thought_part("Think ")], None),
        gemini::response(vec![gemini::thought_part("harder.")], None),
        gemini::response(vec![signed], Some("STOP")),
    ]));
    let items = collect_ok(
        gemini_model(&server)
            .generate_content(request(Default::default()), true)
            .await
            .unwrap(),
    )
    .await;
    assert_stream_shape(&items);
    let partial_thoughts: Vec<_> = items[..items.len() - 1].iter().map(split).collect();
    assert_eq!(
        partial_thoughts,
        [
            (vec!["Think ".to_string()], vec![]),
            (vec!["harder.".to_string()], vec![]),
            (vec![], vec!["Answer.".to_string()]),
        ]
    );
    let last = items.last().unwrap();
    assert_eq!(split(last), (vec!["Think harder.".into()], vec!["Answer.".into()]));
    let answer = &last.content.as_ref().unwrap().parts[1];
    assert_eq!(answer.thought_signature.as_deref(), Some(&b"signed"[..]));
}

#[tokio::test]
async fn openai_reasoning_content_becomes_thought_parts_streamed_and_not() {
    let server = FakeServer::start().await;
    server.push(openai::reasoning("Oslo is in Norway.", "Cold."));
    let items = collect_ok(
        openai_model(&server)
            .generate_content(request(Default::default()), false)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        split(&items[0]),
        (vec!["Oslo is in Norway.".into()], vec!["Cold.".into()])
    );

    server.push(openai::stream(
        vec![
            openai::reasoning_chunk("Hmm, "),
            openai::reasoning_chunk("Oslo."),
            openai::text_chunk("{\"city\":"),
            openai::text_chunk("\"Oslo\"}"),
        ],
        "stop",
    ));
    let items = collect_ok(
        openai_model(&server)
            .generate_content(request(Default::default()), true)
            .await
            .unwrap(),
    )
    .await;
    assert_stream_shape(&items);
    let partials: Vec<_> = items[..items.len() - 1].iter().map(split).collect();
    assert_eq!(
        partials,
        [
            (vec!["Hmm, ".to_string()], vec![]),
            (vec!["Oslo.".to_string()], vec![]),
            (vec![], vec!["{\"city\":".to_string()]),
            (vec![], vec!["\"Oslo\"}".to_string()]),
        ]
    );
    assert_eq!(
        split(items.last().unwrap()),
        (vec!["Hmm, Oslo.".into()], vec![r#"{"city":"Oslo"}"#.into()])
    );
}

#[tokio::test]
async fn the_mock_scripts_structured_replies_and_thoughts() {
    let mock = MockModel::scripted(vec![
        MockTurn::Json(json!({"city": "Oslo"})),
        MockTurn::Thinking {
            thought: "Let me think.".into(),
            text: "Done.".into(),
        },
    ]);
    let items = collect_ok(mock.generate_content(request(Default::default()), false).await.unwrap()).await;
    assert_eq!(text(&items[0]), r#"{"city":"Oslo"}"#);
    let items = collect_ok(mock.generate_content(request(Default::default()), true).await.unwrap()).await;
    assert_stream_shape(&items);
    assert_eq!(split(&items[0]), (vec!["Let me think.".into()], vec![]));
    assert_eq!(
        split(items.last().unwrap()),
        (vec!["Let me think.".into()], vec!["Done.".into()])
    );
    let parts: &[Part] = &items.last().unwrap().content.as_ref().unwrap().parts;
    assert_eq!(parts[0].thought, Some(true));
}

#[tokio::test]
async fn gemini_gets_the_reply_settings_and_its_log_probabilities_are_kept() {
    let server = FakeServer::start().await;
    let mut reply = gemini::text("Oslo");
    reply["candidates"][0]["avgLogprobs"] = json!(-0.25);
    reply["candidates"][0]["logprobsResult"] = json!({
        "chosenCandidates": [{"token": "Oslo", "tokenId": 7, "logProbability": -0.25}],
        "topCandidates": [{"candidates": [
            {"token": "Oslo", "tokenId": 7, "logProbability": -0.25},
            {"token": "Bergen", "tokenId": 9, "logProbability": -1.5},
        ]}],
    });
    server.push(reply);
    let config = GenerateContentConfig {
        candidate_count: Some(1),
        response_logprobs: Some(true),
        logprobs: Some(2),
        media_resolution: Some("MEDIA_RESOLUTION_LOW".into()),
        cached_content: Some("cachedContents/abc".into()),
        response_modalities: vec!["TEXT".into(), "IMAGE".into()],
        enable_enhanced_civic_answers: Some(false),
        ..Default::default()
    };
    let items = collect_ok(
        gemini_model(&server)
            .generate_content(request(config.clone()), false)
            .await
            .unwrap(),
    )
    .await;
    let body = server.last_request().json();
    assert_eq!(
        body["generationConfig"],
        json!({
            "candidateCount": 1,
            "responseLogprobs": true,
            "logprobs": 2,
            "mediaResolution": "MEDIA_RESOLUTION_LOW",
            "responseModalities": ["TEXT", "IMAGE"],
            "enableEnhancedCivicAnswers": false,
        })
    );
    assert_eq!(body["cachedContent"], "cachedContents/abc");
    let response = &items[0];
    assert_eq!(response.avg_logprobs, Some(-0.25));
    assert_eq!(
        Value::Object(response.logprobs_result.clone().expect("logprobs_result")),
        json!({
            "chosen_candidates": [{"token": "Oslo", "token_id": 7, "log_probability": -0.25}],
            "top_candidates": [{"candidates": [
                {"token": "Oslo", "token_id": 7, "log_probability": -0.25},
                {"token": "Bergen", "token_id": 9, "log_probability": -1.5},
            ]}],
        })
    );

    // Streamed: each chunk brings its tokens; the average is that of all chosen tokens.
    let chunk = |text: &str, logprob: f64, last: bool| {
        let mut chunk = gemini::response(vec![json!({"text": text})], last.then_some("STOP"));
        chunk["candidates"][0]["avgLogprobs"] = json!(logprob);
        chunk["candidates"][0]["logprobsResult"] =
            json!({"chosenCandidates": [{"token": text, "logProbability": logprob}]});
        chunk
    };
    server.push(gemini::stream(vec![chunk("Os", -0.5, false), chunk("lo", -1.5, true)]));
    let items = collect_ok(
        gemini_model(&server)
            .generate_content(request(config), true)
            .await
            .unwrap(),
    )
    .await;
    assert_stream_shape(&items);
    let last = items.last().unwrap();
    assert_eq!(text(last), "Oslo");
    assert_eq!(last.avg_logprobs, Some(-1.0));
    assert_eq!(
        last.logprobs_result.as_ref().unwrap()["chosen_candidates"],
        json!([{"token": "Os", "log_probability": -0.5}, {"token": "lo", "log_probability": -1.5}])
    );
    // Without the settings nothing is asked, and nothing comes back.
    server.push(gemini::text("Oslo"));
    let items = collect_ok(
        gemini_model(&server)
            .generate_content(request(GenerateContentConfig::default()), false)
            .await
            .unwrap(),
    )
    .await;
    assert!(items[0].avg_logprobs.is_none() && items[0].logprobs_result.is_none());
    let body = server.last_request().json();
    assert!(
        body.get("generationConfig").is_none() && body.get("cachedContent").is_none(),
        "{body}"
    );
}

#[tokio::test]
async fn openai_is_sent_no_logprobs_as_adks_litellm_and_any_a_server_returns_are_kept() {
    let server = FakeServer::start().await;
    let mut reply = openai::text("Oslo");
    reply["choices"][0]["logprobs"] = json!({"content": [
        {"token": "Os", "logprob": -0.5, "bytes": [79, 115], "top_logprobs": [
            {"token": "Os", "logprob": -0.5, "bytes": [79, 115]},
            {"token": "Ber", "logprob": -2.0, "bytes": [66, 101, 114]},
        ]},
        {"token": "lo", "logprob": -1.5, "bytes": [108, 111], "top_logprobs": [
            {"token": "lo", "logprob": -1.5, "bytes": [108, 111]},
        ]},
    ]});
    server.push(reply);
    let config = GenerateContentConfig {
        response_logprobs: Some(true),
        logprobs: Some(2),
        ..Default::default()
    };
    let items = collect_ok(
        openai_model(&server)
            .generate_content(request(config.clone()), false)
            .await
            .unwrap(),
    )
    .await;
    let body = server.last_request().json();
    // ADK's LiteLlm hands LiteLLM neither setting (docs/adk-conformance.md).
    assert!(
        body.get("logprobs").is_none() && body.get("top_logprobs").is_none(),
        "{body}"
    );
    let response = &items[0];
    assert_eq!(response.avg_logprobs, Some(-1.0));
    assert_eq!(
        Value::Object(response.logprobs_result.clone().expect("logprobs_result")),
        json!({
            "chosen_candidates": [
                {"token": "Os", "log_probability": -0.5},
                {"token": "lo", "log_probability": -1.5},
            ],
            "top_candidates": [
                {"candidates": [{"token": "Os", "log_probability": -0.5}, {"token": "Ber", "log_probability": -2.0}]},
                {"candidates": [{"token": "lo", "log_probability": -1.5}]},
            ],
        })
    );

    // Streamed: every chunk's choice carries its tokens.
    let chunk = |text: &str, logprob: f64| {
        json!({
            "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null,
                         "logprobs": {"content": [{"token": text, "logprob": logprob, "top_logprobs": []}]}}],
        })
        .to_string()
    };
    server.push(openai::stream(vec![chunk("Os", -0.25), chunk("lo", -0.75)], "stop"));
    let items = collect_ok(
        openai_model(&server)
            .generate_content(request(config), true)
            .await
            .unwrap(),
    )
    .await;
    assert_stream_shape(&items);
    let last = items.last().unwrap();
    assert_eq!(text(last), "Oslo");
    assert_eq!(last.avg_logprobs, Some(-0.5));
    let result = last.logprobs_result.as_ref().unwrap();
    assert_eq!(
        result["chosen_candidates"],
        json!([{"token": "Os", "log_probability": -0.25}, {"token": "lo", "log_probability": -0.75}])
    );
    assert_eq!(result["top_candidates"], json!([]));
}

/// ADK's tool, image, speech and transcription settings, service tier and `store`, as
/// google-genai sends them to Gemini; on the OpenAI-compatible wire, as ADK's LiteLlm
/// converts them: the function-calling mode alone, as `tool_choice`, with tools only.
#[tokio::test]
async fn the_tool_image_speech_and_serving_settings_on_each_wire() {
    let config = GenerateContentConfig {
        tool_config: Some(ToolConfig {
            function_calling_config: Some(FunctionCallingConfig {
                mode: Some(FunctionCallingMode::Any),
                allowed_function_names: Some(vec!["lookup".into()]),
            }),
        }),
        image_config: Some(ImageConfig {
            aspect_ratio: Some("16:9".into()),
            image_size: Some("1K".into()),
        }),
        speech_config: Some(json!({"voice_config": {"prebuilt_voice_config": {"voice_name": "Kore"}}})),
        audio_transcription_config: Some(json!({})),
        service_tier: Some("flex".into()),
        store: Some(false),
        ..Default::default()
    };
    let with_a_tool = |config: GenerateContentConfig| LlmRequest {
        tools: vec![ToolDeclaration {
            name: "lookup".into(),
            description: "Looks up.".into(),
            parameters: None,
            response: None,
        }],
        ..request(config)
    };
    let server = FakeServer::start().await;
    server.push(gemini::text("Oslo"));
    collect_ok(
        gemini_model(&server)
            .generate_content(with_a_tool(config.clone()), false)
            .await
            .unwrap(),
    )
    .await;
    let body = server.last_request().json();
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}})
    );
    assert_eq!((&body["serviceTier"], &body["store"]), (&json!("flex"), &json!(false)));
    assert_eq!(
        body["generationConfig"],
        json!({
            "imageConfig": {"aspectRatio": "16:9", "imageSize": "1K"},
            "speechConfig": {"voice_config": {"prebuilt_voice_config": {"voice_name": "Kore"}}},
            "audioTranscriptionConfig": {},
        })
    );

    server.push(openai::text("Oslo"));
    collect_ok(
        openai_model(&server)
            .generate_content(with_a_tool(config.clone()), false)
            .await
            .unwrap(),
    )
    .await;
    let body = server.last_request().json();
    assert_eq!(body["tool_choice"], "required");
    for dropped in [
        "service_tier",
        "store",
        "image_config",
        "speech_config",
        "modalities",
        "audio",
    ] {
        assert!(body.get(dropped).is_none(), "{dropped} in {body}");
    }
    // NONE is "none"; without tools there is nothing to choose, and no tool_choice.
    let mut none = config.clone();
    none.tool_config = Some(ToolConfig {
        function_calling_config: Some(FunctionCallingConfig {
            mode: Some(FunctionCallingMode::None),
            allowed_function_names: None,
        }),
    });
    server.push(openai::text("Oslo"));
    collect_ok(
        openai_model(&server)
            .generate_content(with_a_tool(none.clone()), false)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(server.last_request().json()["tool_choice"], "none");
    server.push(openai::text("Oslo"));
    collect_ok(
        openai_model(&server)
            .generate_content(request(none), false)
            .await
            .unwrap(),
    )
    .await;
    assert!(server.last_request().json().get("tool_choice").is_none());
}
