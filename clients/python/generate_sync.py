#!/usr/bin/env python3
"""Generates the blocking client, src/adk_client/client.py, from the asyncio one, aio.py.

    python generate_sync.py            # writes client.py
    python generate_sync.py --check    # exits 1, saying so, when client.py is not what aio.py makes

``AdkClient`` and ``AsyncAdkClient`` have the same methods, arguments and docstrings: only
``await``, ``async for`` and ``grpc.aio`` set them apart. So aio.py is the one source and
client.py is committed as this script makes it (tests/test_generate_sync.py fails while it
is not). From aio.py, line by line:

- ``# sync: CODE`` (a line of its own) is CODE in client.py, at that indentation: a line
  only the blocking client has;
- a line ending in ``# async only``, and the lines from ``# async only {`` to
  ``# async only }``, are left out: lines only the asyncio client has;
- then every line has the asyncio words replaced by their blocking twins (``SUBSTITUTIONS``).

The rest (requests, views, retries, a watch's resumption, uploads' chunks) is written once
in ``_calls`` and ``_retry``, which both clients call.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "src" / "adk_client" / "aio.py"
TARGET = HERE / "src" / "adk_client" / "client.py"

HEADER = """\
# Generated from aio.py by clients/python/generate_sync.py: do not edit. Edit aio.py (the
# asyncio client, the one source of both), then run `python generate_sync.py` in clients/python.
"""

# Whole words, in this order (an asyncio word, its blocking twin).
SUBSTITUTIONS = [
    (r"\basync def ", "def "),
    (r"\basync for ", "for "),
    (r"\basync with ", "with "),
    (r"\bawait ", ""),
    (r"\bimport asyncio\b", "import time"),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\bgrpc\.aio\.", "grpc."),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncAdkClient\b", "AdkClient"),
    (r"\bAsyncDownload\b", "Download"),
    (r"\bAsyncChunks\b", "Chunks"),
    (r"\bAsyncToolAnswer\b", "ToolAnswer"),
    (r"\bcall_with_retry_async\b", "call_with_retry"),
    (r"\bupload_messages_async\b", "upload_messages"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\baclose\b", "close"),
]

_SYNC_LINE = re.compile(r"^(\s*)# sync:(?: (.*))?$")
_ASYNC_ONLY_LINE = re.compile(r"\s+# async only$")
_ASYNC_ONLY_BEGIN = "# async only {"
_ASYNC_ONLY_END = "# async only }"


def sync_source(async_source: str) -> str:
    """client.py's text, made from aio.py's."""
    lines = []
    in_async_only = False
    for number, line in enumerate(async_source.splitlines(), start=1):
        mark = line.strip()
        if mark == _ASYNC_ONLY_BEGIN:
            if in_async_only:
                raise ValueError(f"aio.py:{number}: {_ASYNC_ONLY_BEGIN!r} inside another")
            in_async_only = True
            continue
        if mark == _ASYNC_ONLY_END:
            if not in_async_only:
                raise ValueError(f"aio.py:{number}: {_ASYNC_ONLY_END!r} without its {_ASYNC_ONLY_BEGIN!r}")
            in_async_only = False
            continue
        if in_async_only or _ASYNC_ONLY_LINE.search(line):
            continue
        sync_line = _SYNC_LINE.match(line)
        if sync_line:
            indent, code = sync_line.group(1), sync_line.group(2) or ""
            line = indent + code if code.strip() else ""
        for pattern, replacement in SUBSTITUTIONS:
            line = re.sub(pattern, replacement, line)
        lines.append(line)
    if in_async_only:
        raise ValueError(f"aio.py: {_ASYNC_ONLY_BEGIN!r} never ends")
    return HEADER + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that client.py is up to date")
    args = parser.parse_args()
    generated = sync_source(SOURCE.read_text(encoding="utf-8"))
    if args.check:
        if TARGET.read_text(encoding="utf-8") != generated:
            sys.exit(f"{TARGET.relative_to(HERE)} is not what generate_sync.py makes of aio.py: "
                     "edit aio.py, then run `python generate_sync.py`")
        return
    TARGET.write_text(generated, encoding="utf-8")
    print(f"generated {TARGET.relative_to(HERE)} from {SOURCE.relative_to(HERE)}")


if __name__ == "__main__":
    main()
