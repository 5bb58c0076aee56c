"""A remote A2A agent built on the official a2a-sdk, served over its gRPC transport:
the peer of tests/tests/a2a.rs, where it is a `kind: a2a` sub-agent of one of our apps.

Its agent echoes: it reports that it works, saves the echo as an artifact, and
completes with "echo: <message>". A message that mentions "confirm" first asks for
input; the answer completes the same task with "confirmed: <answer>". "huge N" completes
with N MiB of text.

Prints `LISTENING <port>` once it serves (port 0 picks a free one), then runs until killed.
"""

import argparse
import asyncio

import grpc

from a2a.helpers.proto_helpers import new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as a2a
from a2a.types import a2a_pb2_grpc


class EchoExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = new_task(context.task_id, context.context_id, a2a.TASK_STATE_SUBMITTED)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def say(words: str) -> a2a.Message:
            return new_text_message(words, context_id=task.context_id, task_id=task.id, role=a2a.ROLE_AGENT)

        if task.status.state == a2a.TASK_STATE_INPUT_REQUIRED:
            await updater.complete(say(f"confirmed: {text}"))
            return
        await updater.start_work(say(f"working on: {text}"))
        if text.startswith("huge "):
            # A reply larger than the runner reads from a remote.
            await updater.complete(say("x" * (int(text.split()[1]) << 20)))
            return
        if "confirm" in text:
            await updater.requires_input(say("Shall I go ahead?"))
            return
        await updater.add_artifact([new_text_part(f"echo artifact: {text}")], name="echo.txt")
        await updater.complete(say(f"echo: {text}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def card(port: int) -> a2a.AgentCard:
    return a2a.AgentCard(
        name="echo",
        description="Echoes what it is told; asks before anything it must confirm.",
        version="1.0.0",
        supported_interfaces=[a2a.AgentInterface(url=f"127.0.0.1:{port}", protocol_binding="GRPC", protocol_version="1.0")],
        capabilities=a2a.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[a2a.AgentSkill(id="echo", name="echo", description="Echoes text.", tags=["echo"])],
    )


async def serve(port: int) -> None:
    server = grpc.aio.server()
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card(bound)
    )
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    await server.start()
    print(f"LISTENING {bound}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(serve(parser.parse_args().port))
