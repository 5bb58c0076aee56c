"""The MCP server of the `mcp_media` case: a stdio server on the `mcp` package's
MCPServer (FastMCP until mcp 2), started by ADK's McpToolset when recording and by the
runner when replaying (`command: python`, the test venv's, as the case's YAML names it).

Its tool answers with a text block and an image block (a 1x1 PNG, base64 in MCP's
`data`)."""

import base64

from mcp.server.mcpserver import Image, MCPServer

mcp = MCPServer("weather-charts")

# A 1x1 PNG, small enough to read in the recording.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/eL9zJAAAAABJRU5ErkJggg=="
)


@mcp.tool(structured_output=False)
def draw_chart(city: str) -> list:
    """A chart of the week's temperatures in a city."""
    return [f"The week's temperatures in {city}.", Image(data=PIXEL, format="png")]


if __name__ == "__main__":
    mcp.run()
