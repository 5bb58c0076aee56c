"""The MCP server of the `mcp_resources` case: a stdio server on the `mcp` package's
MCPServer with a tool and a text resource, started by ADK's McpToolset (`use_mcp_resources`)
when recording and by the runner when replaying."""

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("hotel-info")


@mcp.tool()
def book_table(time: str) -> str:
    """Books a table in the restaurant."""
    return f"Booked for {time}."


@mcp.resource("info://menu", name="menu", description="Today's menu.", mime_type="text/plain")
def menu() -> str:
    return "Soup, fish, cake."


if __name__ == "__main__":
    mcp.run()
