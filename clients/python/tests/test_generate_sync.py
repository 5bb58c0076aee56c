"""client.py is generated from aio.py (generate_sync.py): the committed file must be what the
generator makes of the committed source, so the two clients cannot drift apart."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("generate_sync", HERE / "generate_sync.py")
assert _spec is not None and _spec.loader is not None
generate_sync = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate_sync)


def test_client_py_is_what_generate_sync_makes_of_aio_py() -> None:
    generated = generate_sync.sync_source(generate_sync.SOURCE.read_text(encoding="utf-8"))
    committed = generate_sync.TARGET.read_text(encoding="utf-8")
    assert committed == generated, (
        "src/adk_client/client.py is not what generate_sync.py makes of aio.py: edit aio.py "
        "(the one source of both clients), then run `python generate_sync.py` in clients/python"
    )


def test_the_marks_turn_async_lines_into_blocking_ones() -> None:
    source = (
        "import asyncio\n"
        "async def watch(stub: Any) -> AsyncIterator[int]:\n"
        "    # sync: for item in stub.Watch():\n"
        "    async for item in stub.Watch():  # async only\n"
        "        yield item\n"
        "    # async only {\n"
        "    await asyncio.wait_for(stub.ready(), 1)\n"
        "    # async only }\n"
        "    await asyncio.sleep(0.1)\n"
    )
    assert generate_sync.sync_source(source) == generate_sync.HEADER + (
        "import time\n"
        "def watch(stub: Any) -> Iterator[int]:\n"
        "    for item in stub.Watch():\n"
        "        yield item\n"
        "    time.sleep(0.1)\n"
    )


@pytest.mark.parametrize(
    "source", ["# async only {\nx = 1\n", "x = 1\n# async only }\n", "# async only {\n# async only {\n"]
)
def test_an_unbalanced_async_only_block_is_refused(source: str) -> None:
    with pytest.raises(ValueError, match="async only"):
        generate_sync.sync_source(source)
