"""The MCP server of the `mcp_http` case, over streamable HTTP on 127.0.0.1 at the port
given as its argument: started by record.py when recording and by the replay
(tests/tests/e2e/conformance.rs), each on a free port it writes into a copy of the
case's YAML (`MCP_HTTP_PORT`)."""

import sys

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("tide-desk")


@mcp.tool(structured_output=False)
def get_tide(harbour: str) -> str:
    """The next high tide at a harbour.

    Args:
        harbour: The harbour's name.
    """
    return f"{harbour}: high tide at 14:05"


@mcp.tool(structured_output=False)
def close_harbour(harbour: str) -> str:
    """Closes a harbour (left out by the YAML's tool_filter)."""
    return f"{harbour} closed"


if __name__ == "__main__":
    mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
