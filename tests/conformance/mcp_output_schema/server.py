"""The MCP server of the `mcp_output_schema` case: a stdio server on the `mcp` package's
MCPServer (FastMCP until mcp 2), started by ADK's McpToolset when recording and by the
runner when replaying (`command: python`, the test venv's, as the case's YAML names it).

Its tool returns a typed value (a pydantic class), so the server declares the class's
JSON Schema as the tool's `outputSchema` and answers with `structuredContent` beside the
same value as JSON text."""

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

mcp = MCPServer("weather-station")


class Reading(BaseModel):
    city: str
    temp_c: int = Field(description="The temperature in degrees Celsius.")
    sky: str


@mcp.tool()
def read_station(city: str) -> Reading:
    """The station's latest reading for a city."""
    return Reading(city=city, temp_c=21, sky="sunny")


if __name__ == "__main__":
    mcp.run()
