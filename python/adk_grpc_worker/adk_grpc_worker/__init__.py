"""Serves an ADK agent-config directory's Python tools and callbacks to adk-grpc's runner.

The runner starts one worker per directory that names Python code
(`python -m adk_grpc_worker --app-dir DIR --refs JSON`). The worker imports the
functions and tools as ADK's config loader does, prints one JSON line on stdout (the port
it listens on and, per reference, the tool declarations ADK would send or why it cannot be
served), then serves over HTTP:

- `POST /tool/<entry>/<tool name>`: one tool of a `tools:` entry (a function, a tool, or
  each tool of a toolset), the runner's HTTP tool envelope (docs/tools.md, "The tool context
  of HTTP and MCP tools"): `{"args", "context"}` in, `{"result", "actions"}` out;
- `POST /callback/<ref>`: the runner's hook protocol (docs/hooks.md), one point per call.

User code gets ADK's own `ToolContext` / `CallbackContext`, over a session holding the
state the runner sent; what it writes (state, artifacts, actions) goes back as the
reply's actions, which the runner applies to the real session. The worker exits when
its stdin closes, so it never outlives the runner that started it.
"""

from .worker import main

__all__ = ["main"]
