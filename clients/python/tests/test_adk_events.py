"""ADK's Event <-> adk.v1.Event (adk_client._adk_events), without a server: an event with
every field set and one with every optional field left None come back equal in ADK, and
each field lands where docs/adk-fields.md says."""
from __future__ import annotations

from fastapi.openapi.models import APIKey, APIKeyIn
from google.adk.auth.auth_tool import AuthConfig
from google.adk.events import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_client._adk_events import event_from_proto, event_to_proto, float_to_timestamp, timestamp_to_float
from adk_client.v1 import event_pb2


def rich_event() -> Event:
    """Every field of ADK's Event, EventActions, Part and usage metadata set."""
    every_part = [
        types.Part(text="hello", thought=False, thought_signature=bytes(range(256)),
                   part_metadata={"k": [1, 2.5, None]}),
        types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x00\xffpng", display_name="p.png"),
                   video_metadata=types.VideoMetadata(start_offset="1.5s", end_offset="3s", fps=2.5),
                   media_resolution=types.PartMediaResolution(level="MEDIA_RESOLUTION_HIGH")),
        types.Part(file_data=types.FileData(mime_type="application/pdf", file_uri="gs://b/f.pdf", display_name="f")),
        types.Part(function_call=types.FunctionCall(name="lookup", args={"q": "x", "n": 3}, id="c1",
                                                    will_continue=False)),
        types.Part(function_response=types.FunctionResponse(name="lookup", response={"ok": True}, id="c1",
                                                            will_continue=True, scheduling="WHEN_IDLE")),
        types.Part(executable_code=types.ExecutableCode(code="print(1)", language="PYTHON", id="x1")),
        types.Part(code_execution_result=types.CodeExecutionResult(outcome="OUTCOME_OK", output="1", id="x1"),
                   thought=True),
    ]
    transcription = types.Transcription(text="hi", finished=True, language_code="en-US")
    return Event(
        id="e-1",
        timestamp=1795480921.7007945,
        invocation_id="inv-1",
        author="agent",
        branch="root.agent",
        content=types.Content(role="model", parts=every_part),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=0, candidates_token_count=2, total_token_count=3, cached_content_token_count=4,
            thoughts_token_count=5, tool_use_prompt_token_count=6,
            prompt_tokens_details=[types.ModalityTokenCount(modality="TEXT", token_count=1)],
            cache_tokens_details=[types.ModalityTokenCount(modality="IMAGE", token_count=0)],
            candidates_tokens_details=[types.ModalityTokenCount(modality="AUDIO", token_count=7)],
            tool_use_prompt_tokens_details=[types.ModalityTokenCount(modality="VIDEO", token_count=8)],
            traffic_type="ON_DEMAND"),
        finish_reason=types.FinishReason.MAX_TOKENS,
        partial=False,
        turn_complete=True,
        interrupted=False,
        error_code="E1",
        error_message="boom",
        model_version="m-1",
        grounding_metadata=types.GroundingMetadata(web_search_queries=["q"]),
        citation_metadata=types.CitationMetadata(citations=[types.Citation(uri="https://x", start_index=1)]),
        custom_metadata={"trace": {"id": 7}},
        input_transcription=transcription,
        output_transcription=types.Transcription(text="bye"),
        avg_logprobs=-0.25,
        logprobs_result=types.LogprobsResult(chosen_candidates=[types.LogprobsResultCandidate(token="a")]),
        turn_complete_reason="NEED_MORE_INPUT",
        interaction_id="i-1",
        live_session_id="l-1",
        isolation_scope="adk-call-1",
        output={"name": "Ada", "guests": 4},
        long_running_tool_ids={"c1", "c2"},
        actions=EventActions(
            skip_summarization=False,
            state_delta={"k": 1, "user:u": "x", "app:a": None, "n": {"deep": [1.5]}},
            artifact_delta={"f.txt": 0, "user:g": 3},
            transfer_to_agent="sub",
            transfer_reason="because",
            escalate=True,
            requested_auth_configs={"c1": AuthConfig(auth_scheme=APIKey(**{"in": APIKeyIn.header, "name": "X-Key"}),
                                                      credential_key="k")},
            requested_tool_confirmations={"c1": ToolConfirmation(hint="ok?", confirmed=True, payload={"p": 1})},
            compaction=EventCompaction(start_timestamp=1.5, end_timestamp=2.25,
                                       compacted_content=types.Content(role="model", parts=[types.Part(text="s")])),
            end_of_agent=True,
            agent_state={"step": 2},
            rewind_before_invocation_id="inv-0",
            set_model_response={"city": "Paris", "temps": [18.5]},
            route="next",
        ),
    )


def test_an_event_with_every_field_round_trips_equal() -> None:
    event = rich_event()
    back = event_from_proto(event_to_proto(event))
    # Equal as JSON: ADK itself reads an AuthConfig's scheme back from JSON as another
    # class of the same JSON (its own database service too).
    assert back.model_dump(mode="json", exclude_none=True) == event.model_dump(mode="json", exclude_none=True)
    # Without the auth config, equal to the very object.
    event.actions.requested_auth_configs = {}
    assert event_from_proto(event_to_proto(event)) == event


def test_an_event_with_every_optional_field_unset_round_trips_equal() -> None:
    event = Event(author="user", id="e-2", timestamp=12.5)
    back = event_from_proto(event_to_proto(event))
    assert back == event
    assert back.partial is None and back.turn_complete is None and back.branch is None
    assert back.long_running_tool_ids is None and back.content is None and back.usage_metadata is None
    # An empty set of long-running ids is not None.
    event.long_running_tool_ids = set()
    assert event_from_proto(event_to_proto(event)).long_running_tool_ids == set()


def test_fields_land_where_the_field_table_says() -> None:
    pb = event_to_proto(rich_event())
    # Unset is not false: an explicit False is a set optional field.
    assert pb.HasField("partial") and pb.partial is False
    assert pb.finish_reason == event_pb2.FINISH_REASON_MAX_TOKENS
    assert pb.turn_complete_reason == "NEED_MORE_INPUT"
    assert pb.usage_metadata.HasField("prompt_token_count") and pb.usage_metadata.prompt_token_count == 0
    assert pb.usage_metadata.traffic_type == "ON_DEMAND"
    assert list(pb.long_running_tool_ids) == ["c1", "c2"]
    assert pb.extensions["interaction_id"] == "i-1" and pb.extensions["live_session_id"] == "l-1"
    assert "node_info" not in pb.extensions  # left at its default: nothing to carry
    # ADK 2's task fields are typed (fields 26 and 27), not extensions.
    assert pb.isolation_scope == "adk-call-1"
    assert pb.output.struct_value["guests"] == 4
    assert "isolation_scope" not in pb.extensions and "output" not in pb.extensions
    assert pb.actions.extensions["route"] == "next"
    assert pb.actions.set_model_response.struct_value["city"] == "Paris"
    assert "set_model_response" not in pb.actions.extensions
    # ADK's 0-based artifact versions are the suite's 1-based ones.
    assert dict(pb.actions.artifact_delta) == {"f.txt": 1, "user:g": 4}
    assert pb.actions.requested_tool_confirmations["c1"].confirmed is True
    parts = pb.content.parts
    assert parts[0].thought_signature == bytes(range(256)) and parts[0].HasField("thought")
    assert parts[1].inline_data.data == b"\x00\xffpng" and parts[1].video_metadata.fps == 2.5
    assert parts[1].extensions["media_resolution"] == {"level": "MEDIA_RESOLUTION_HIGH"}
    assert parts[3].function_call.args.struct_value["n"] == 3
    assert parts[4].extensions["function_response"] == {"scheduling": "WHEN_IDLE"}
    assert parts[5].executable_code.language == "PYTHON"
    assert pb.input_transcription.extensions["language_code"] == "en-US"


def test_float_timestamps_come_back_exactly() -> None:
    for seconds in (0.0, 1.5, 1795480921.7007945, 1700000000.123456789, 12.000000001):
        assert timestamp_to_float(float_to_timestamp(seconds)) == seconds
