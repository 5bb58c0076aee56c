"""The MCP server of the `mcp_toolset` case: a stdio server on the `mcp` package's
MCPServer (FastMCP until mcp 2), started by ADK's McpToolset when recording and by the
runner when replaying (`command: python`, the test venv's, as the case's YAML names it).

Its tools return text without an output schema (`structured_output=False`); a tool with
one is the `mcp_output_schema` case's."""

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("weather-desk")


@mcp.tool(structured_output=False)
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return f"{city}: sunny, 21 C"


@mcp.tool(structured_output=False)
def get_forecast(city: str, days: int = 3) -> str:
    """A forecast of the next days for a city.

    Args:
        city: The city's name.
        days: How many days ahead.
    """
    return f"{city}: sunny for {days} days"


@mcp.tool(structured_output=False)
def reset_station(station: str) -> str:
    """Resets a weather station (left out by the YAML's tool_filter)."""
    return f"{station} reset"


if __name__ == "__main__":
    mcp.run()
