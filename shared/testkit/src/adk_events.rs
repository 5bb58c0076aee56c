//! Events as ADK writes them: every field of ADK's `Event`, `EventActions` and
//! `Part` set, and every optional flag set to `false` rather than left unset, so a
//! round trip that loses a field or turns `false` into "unset" fails a comparison.

use adk_grpc_core::{
    Content, Event, EventCompaction, FinishReason, FunctionResponseData, JsonObject, ModalityTokenCount, Part,
    PartKind, ToolConfirmation, Transcription, UsageMetadata, VideoMetadata,
};
use serde_json::{Value, json};

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("not a JSON object: {other}"),
    }
}

/// A model event with every typed field and an extension on each level.
pub fn rich_event() -> Event {
    let mut thought = Part::text_part("thinking it over");
    thought.thought = Some(true);
    thought.thought_signature = Some(vec![9, 8, 7, 0, 255]);
    thought.part_metadata = Some(object(json!({"source": "model", "n": 2})));
    thought.extensions = object(json!({"media_resolution": {"level": "MEDIA_RESOLUTION_LOW"}}));
    let mut image = Part::inline_data("image/png", vec![0, 1, 2]);
    image.display_name = Some("chart.png".into());
    image.video_metadata = Some(VideoMetadata {
        start_offset: Some("1s".into()),
        end_offset: Some("2.5s".into()),
        fps: Some(0.5),
    });
    let mut file = Part::file_data("application/pdf", "gs://bucket/report.pdf");
    file.thought = Some(false);
    file.display_name = Some("report.pdf".into());
    let mut call = Part::function_call(
        "get_weather",
        json!({"city": "Tokyo", "days": [1, 2.5]}),
        Some("c1".into()),
    );
    call.will_continue = Some(false);
    call.extensions = object(json!({"function_call": {"partial_args": [{"json_path": "$.city"}]}}));
    let mut response = Part::function_response(
        FunctionResponseData {
            name: "get_weather".into(),
            response: json!({"sky": "clear", "high": 21}),
        },
        Some("c1".into()),
    );
    response.will_continue = Some(true);
    response.extensions = object(json!({"function_response": {"scheduling": "WHEN_IDLE"}}));
    let code = Part::from(PartKind::ExecutableCode {
        code: Some("print(6 * 7)".into()),
        language: Some("PYTHON".into()),
        id: Some("x1".into()),
    });
    let result = Part::from(PartKind::CodeExecutionResult {
        outcome: Some("OUTCOME_OK".into()),
        output: Some("42\n".into()),
        id: Some("x1".into()),
    });
    let content = Content::new("model")
        .with_text("Here is the forecast.")
        .with_part(thought)
        .with_part(image)
        .with_part(file)
        .with_part(call)
        .with_part(response)
        .with_part(code)
        .with_part(result);

    let mut e = Event::new("e-rich").with_author("forecaster").with_content(content);
    e.branch = "root.forecaster".into();
    e.long_running_tool_ids = vec!["c1".into()];
    // ADK 2's task fields: the delegating call's id and a task's output.
    e.isolation_scope = "adk-call-1".into();
    e.output = Some(json!({"name": "Ada", "guests": 4, "tags": ["quiet", null]}));
    e.extensions = object(json!({"interaction_id": "i-1", "node_info": {"path": "root/forecaster"}}));
    let r = &mut e.llm_response;
    r.usage_metadata = Some(UsageMetadata {
        prompt_token_count: Some(12),
        candidates_token_count: Some(0),
        total_token_count: Some(20),
        cached_content_token_count: Some(4),
        thoughts_token_count: Some(8),
        tool_use_prompt_token_count: None,
        prompt_tokens_details: vec![ModalityTokenCount {
            modality: Some("TEXT".into()),
            token_count: Some(12),
        }],
        cache_tokens_details: Vec::new(),
        candidates_tokens_details: vec![ModalityTokenCount {
            modality: Some("IMAGE".into()),
            token_count: Some(0),
        }],
        tool_use_prompt_tokens_details: Vec::new(),
        traffic_type: Some("ON_DEMAND".into()),
    });
    r.finish_reason = Some(FinishReason::MalformedFunctionCall);
    r.partial = Some(false);
    r.turn_complete = Some(true);
    r.interrupted = Some(false);
    r.error_code = Some(String::new());
    r.error_message = Some("tool said no".into());
    r.model_version = Some("gemini-2.5-flash-001".into());
    r.grounding_metadata = Some(object(json!({"web_search_queries": ["tokyo weather"]})));
    r.citation_metadata = Some(object(
        json!({"citations": [{"uri": "https://example.com", "start_index": 0}]}),
    ));
    // ADK's internal keys are stored and read back as appended (docs/semantics.md,
    // "ADK's internal metadata"): ADK's runner reads its own marks back from the session.
    r.custom_metadata = Some(object(
        json!({"trace": "abc", "nested": {"ok": true}, "__adk_internal_restored_event": true}),
    ));
    r.input_transcription = Some(Transcription {
        text: Some("what's the weather".into()),
        finished: Some(false),
        extensions: object(json!({"language_code": "en-US"})),
    });
    r.output_transcription = Some(Transcription::default());
    r.avg_logprobs = Some(-0.25);
    r.logprobs_result = Some(object(json!({"top_candidates": [], "chosen_candidates": []})));
    r.turn_complete_reason = Some("NEED_MORE_INPUT".into());

    let a = &mut e.actions;
    a.state_delta.insert("forecast".into(), json!({"sky": "clear"}));
    a.artifact_delta.insert("chart.png".into(), 1);
    a.skip_summarization = Some(false);
    a.escalate = Some(false);
    a.transfer_to_agent = Some("booker".into());
    a.transfer_reason = Some("the user wants to book".into());
    a.requested_auth_configs = object(json!({"c1": {"auth_scheme": {"type": "oauth2"}}}));
    a.requested_tool_confirmations.insert(
        "c1".into(),
        ToolConfirmation {
            hint: "Book it?".into(),
            confirmed: false,
            payload: json!({"nights": 2}),
        },
    );
    a.compaction = Some(EventCompaction {
        start_timestamp: e.timestamp - chrono::Duration::seconds(90),
        end_timestamp: e.timestamp - chrono::Duration::milliseconds(1),
        compacted_content: Content::new("model").with_text("Earlier: the user asked about Tokyo."),
    });
    a.end_of_agent = Some(true);
    a.agent_state = Some(object(json!({"step": 2})));
    a.rewind_before_invocation_id = Some("e-0".into());
    a.set_model_response = Some(json!({"city": "Tokyo", "nights": 2.5, "tags": ["quiet"]}));
    a.extensions = object(json!({"route": ["a", 1, true], "render_ui_widgets": null}));
    e
}

/// The same event with every optional field left unset (ADK's `None`) and every
/// collection empty: a round trip must not turn unset into `false`, `0` or `{}`.
pub fn bare_event() -> Event {
    Event::new("e-bare").with_author("user")
}
