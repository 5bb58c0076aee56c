"""A multi-agent ADK app on a deterministic model, run by a real ADK ``Runner`` on this
suite (adk_client.adk). Used by test_adk_runner.py, by the Rust end-to-end test
tests/tests/e2e/adk_python.rs (as a script) and, as an agents dir, by ``adk api_server``.

    python adk_app.py --target HOST:PORT --app APP --user USER --session SESSION

The app: ``coordinator`` transfers to its sub-agent ``booker``, which calls the function
tool ``book_room``; the tool saves a receipt artifact and writes ``user:``, ``app:`` and
``temp:`` state; ``booker`` answers, and its ``output_key`` keeps the answer in state.
"""
from __future__ import annotations

import argparse
import asyncio
import json
from typing import AsyncGenerator, List

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types

REPLY = "Booked 2 nights at Hotel Sakura."
RECEIPT = "receipt.txt"


class ScriptedLlm(BaseLlm):
    """A deterministic model: the coordinator always transfers to the booker; the booker
    calls book_room, then answers once the tool's response is in the conversation."""

    role: str = "booker"

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1].parts[-1] if llm_request.contents else None
        if self.role == "coordinator":
            call = types.FunctionCall(name="transfer_to_agent", args={"agent_name": "booker"})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
        elif last is not None and last.function_response is not None:
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=REPLY)]),
                usage_metadata=types.GenerateContentResponseUsageMetadata(
                    prompt_token_count=12, candidates_token_count=0, total_token_count=12),
                finish_reason=types.FinishReason.STOP,
                model_version="scripted-1",
            )
        else:
            call = types.FunctionCall(name="book_room", args={"hotel": "Hotel Sakura", "nights": 2})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


async def book_room(hotel: str, nights: int, tool_context: ToolContext) -> dict:
    """Books a room and files a receipt."""
    receipt = types.Part(text=f"{nights} nights at {hotel}")
    version = await tool_context.save_artifact(RECEIPT, receipt)
    tool_context.state["user:last_hotel"] = hotel
    tool_context.state["app:bookings"] = (tool_context.state.get("app:bookings") or 0) + 1
    tool_context.state["temp:scratch"] = "never stored"
    return {"booked": True, "nights": nights, "receipt_version": version}


def build_agent() -> LlmAgent:
    booker = LlmAgent(
        name="booker",
        model=ScriptedLlm(model="scripted", role="booker"),
        instruction="Book hotel rooms.",
        tools=[book_room],
        output_key="booking_summary",
    )
    return LlmAgent(
        name="coordinator",
        model=ScriptedLlm(model="scripted", role="coordinator"),
        instruction="Hand bookings to the booker.",
        sub_agents=[booker],
    )


async def run_once(runner: Runner, user: str, session: str, text: str) -> List:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [e async for e in runner.run_async(user_id=user, session_id=session, new_message=message)]


async def _main() -> None:
    from adk_client.adk import GrpcArtifactService, GrpcSessionService

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--app", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--session", required=True)
    args = parser.parse_args()
    sessions = GrpcSessionService(target=args.target)
    runner = Runner(agent=build_agent(), app_name=args.app, session_service=sessions,
                    artifact_service=GrpcArtifactService(target=args.target))
    await sessions.create_session(app_name=args.app, user_id=args.user, session_id=args.session,
                                  state={"user:name": "Alice", "app:currency": "JPY", "step": 1})
    events = await run_once(runner, args.user, args.session, "Book 2 nights, please")
    # What the Rust side compares with: the events as ADK produced them, in ADK's JSON.
    print(json.dumps([e.model_dump(mode="json", exclude_none=True) for e in events]))


if __name__ == "__main__":
    asyncio.run(_main())
