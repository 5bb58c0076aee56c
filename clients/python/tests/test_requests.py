"""Requests as both clients build them (``_calls``), without a server."""
from __future__ import annotations

from adk_client import _calls as calls
from adk_client.v1 import runner_pb2


def run_request(**options: object) -> runner_pb2.RunRequest:
    defaults = dict(
        streaming=False,
        state_delta=None,
        create_session=False,
        max_llm_calls=0,
        include_thoughts_from_other_agents=False,
        keep_running=False,
        on_busy=None,
    )
    return calls.run_request("app", "alice", "s1", "Hello!", **{**defaults, **options})  # type: ignore[arg-type]


def test_a_run_request_carries_its_run_config() -> None:
    plain = run_request().run_config
    assert (plain.streaming_mode, plain.max_llm_calls) == (runner_pb2.STREAMING_MODE_NONE, 0)
    assert not plain.include_thoughts_from_other_agents
    config = run_request(streaming=True, max_llm_calls=3, include_thoughts_from_other_agents=True).run_config
    assert (config.streaming_mode, config.max_llm_calls) == (runner_pb2.STREAMING_MODE_SSE, 3)
    assert config.include_thoughts_from_other_agents
