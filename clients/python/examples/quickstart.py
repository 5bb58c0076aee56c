#!/usr/bin/env python3
"""A tour of the ADK services from Python.

Start a server first, then run it (from the repository root; the Example section of
clients/python/README.md has the one-time setup: a venv with the pinned packages, and the
stubs generated from proto/):

    cargo run --profile quick --bin adk-server -- --agents examples/agents.yaml
    PYTHONPATH=clients/python/src python clients/python/examples/quickstart.py --target localhost:50051

Every run uses a user of its own, so it prints the same tour however often it runs.
"""
from __future__ import annotations

import argparse
import sys
import uuid

import grpc

from adk_client import AdkClient, function_response


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="localhost:50051", help="adk-server address (host:port)")
    args = parser.parse_args()

    user = f"alice-{uuid.uuid4().hex[:6]}"  # a fresh user, so the tour can run again and again
    with AdkClient(args.target) as adk:
        # A session with state in every scope: temp: is dropped, the rest merged.
        session = adk.create_session("assistant", user, state={"user:name": "Alice", "temp:draft": True})
        print(f"session {session.id}: state {session.state}")

        # An event with a state delta, applied atomically with the append.
        event = adk.append_event("assistant", user, session.id, text="Note this.", state_delta={"topic": "demo"})
        print(f"appended event #{event.sequence} ({event.id})")

        # Artifacts are versioned; user: names are shared by all of the user's sessions.
        v1 = adk.save_artifact("assistant", user, session.id, "user:notes.md", "# Notes\n", "text/plain")
        v2 = adk.save_artifact("assistant", user, session.id, "user:notes.md", "# Notes\n- more\n")
        latest = adk.load_artifact("assistant", user, session.id, "user:notes.md")
        print(f"saved versions {v1} and {v2}; latest is v{latest.version}: {latest.data!r}")

        # Run the agent and print the reply as it streams (SSE: partial events, then the whole).
        print("assistant: ", end="", flush=True)
        for ev in adk.run("assistant", user, session.id, "Hello, agent!", streaming=True):
            if ev.partial:
                print(ev.text, end="", flush=True)
        print()
        state = adk.get_session("assistant", user, session.id).state
        print(f"last_reply in state: {state['last_reply']!r}")

        # A client tool: the run pauses with a call for us to answer, then resumes.
        # (The booker's mock model plays its script afresh in every session.)
        answer = None
        for ev in adk.run("trip_planner", user, "trip", "Two nights at Hotel Sakura", create_session=True):
            print(f"{ev.author}: {ev.text}" if ev.text else f"{ev.author}: (tool call)")
            for call in ev.client_tool_calls:  # the calls the client answers
                print(f"the agent asks: {call.name}({call.args}) -> confirming")
                answer = function_response(call, {"confirmed": True})
        if answer is not None:
            for ev in adk.run("trip_planner", user, "trip", answer):
                print(f"{ev.author}: {ev.text}")
        else:
            print("(the agent asked for no confirmation)")

        # Bad input fails with a status naming the field.
        try:
            adk.create_session("not\tvalid", user)
        except grpc.RpcError as err:
            print(f"invalid input -> {err.code().name}: {err.details()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
