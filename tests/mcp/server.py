"""An MCP server for the runner's tests, on the `mcp` package's MCPServer (FastMCP until mcp 2).

    server.py --state-dir DIR              MCP over stdio (the runner starts it)
    server.py --state-dir DIR --port PORT  MCP over streamable HTTP at http://127.0.0.1:PORT/mcp
    --no-resources                         without the resources capability (no resources/list)

What the tests cannot see through MCP is left in DIR: `pid` (rewritten at every start, one
line per start in `starts`), `started-TAG` when a slow call begins and `cancelled-TAG` when
the client cancels it (MCP's notifications/cancelled cancels the handler's task).
"""

import argparse
import base64
import json
import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import CallToolResult

# A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

parser = argparse.ArgumentParser()
parser.add_argument("--state-dir", required=True, type=Path)
parser.add_argument("--port", type=int)
parser.add_argument("--no-resources", action="store_true")
options = parser.parse_args()
state = options.state_dir
state.mkdir(parents=True, exist_ok=True)
(state / "pid").write_text(str(os.getpid()))
with open(state / "starts", "a") as starts:
    starts.write(f"{os.getpid()}\n")

mcp = MCPServer("adk-test-server")


@mcp.tool()
def weather(city: str) -> dict[str, object]:
    """Current weather of a city (structured output)."""
    return {"city": city, "temp_c": 21}


@mcp.tool()
def huge(megabytes: int) -> str:
    """A reply of that many MiB (longer than the runner reads)."""
    return "x" * (megabytes << 20)


@mcp.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ToolError(f"failed on purpose: {reason}")


@mcp.tool()
def red_pixel() -> Image:
    """A 1x1 red PNG image."""
    return Image(data=PNG, format="png")


@mcp.tool()
async def slow(seconds: float, tag: str) -> str:
    """Waits `seconds`, then answers; records a cancellation under `tag`."""
    (state / f"started-{tag}").write_text("")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        (state / f"cancelled-{tag}").write_text("")
        raise
    return f"slept {seconds}s"


@mcp.tool()
def whoami() -> dict[str, object]:
    """The server process: its working directory and test environment variable."""
    return {"cwd": os.getcwd(), "env": os.environ.get("ADK_MCP_TEST_ENV"), "secret": os.environ.get("ADK_MCP_RUNNER_SECRET")}


def bonus() -> str:
    """A tool that only exists after enable_bonus."""
    return "bonus!"


@mcp.tool()
async def enable_bonus(ctx: Context) -> str:
    """Adds the tool `bonus` and tells the client its tool list changed."""
    mcp.add_tool(bonus)
    await ctx.session.send_tool_list_changed()
    return "bonus enabled"


@mcp.tool()
def save_note(text: str, ctx: Context) -> CallToolResult:
    """Saves a note as an artifact and records who wrote it, through the ADK tool context.

    The runner sends the tool context under `_meta["adk-grpc/context"]`; the actions come
    back under the result's `_meta["adk-grpc/actions"]`. The text answer repeats the
    context received, so tests can see what the runner shared.
    """
    meta = ctx.request_context.meta or {}
    context = meta.get("adk-grpc/context", {})
    actions = {
        "state_delta": {"user:note_by": context.get("agent_name"), "notes_seen_theme": context.get("state", {}).get("user:theme")},
        "artifacts": {"note.txt": {"inline_data": {"mime_type": "text/plain", "data": base64.b64encode(text.encode()).decode()}}},
    }
    return CallToolResult.model_validate(
        {"content": [{"type": "text", "text": json.dumps({"context": context})}], "_meta": {"adk-grpc/actions": actions}}
    )


@mcp.resource("test://guide", name="guide", mime_type="text/plain", description="The house style guide.")
def guide() -> str:
    return "House style: answer in haiku."


@mcp.resource("test://pixel.png", name="pixel", mime_type="image/png", description="A 1x1 red PNG.")
def pixel() -> bytes:
    return PNG


if options.no_resources:
    # MCPServer declares the resources capability whenever its handler is registered;
    # a server without it is one without the handlers.
    for method in ("resources/list", "resources/read", "resources/templates/list"):
        mcp._lowlevel_server._request_handlers.pop(method, None)

if options.port is None:
    mcp.run()
else:
    mcp.run("streamable-http", host="127.0.0.1", port=options.port)
