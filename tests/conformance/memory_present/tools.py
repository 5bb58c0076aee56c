"""A Python tool searching the user's memories through its ToolContext, as ADK's
load_memory does."""

from google.adk.tools import ToolContext


async def recall(query: str, tool_context: ToolContext) -> dict:
    """Recalls what the user said before about something.

    Args:
      query: what to recall.
    """
    found = await tool_context.search_memory(query)
    return {"said": [f"{m.author}: {m.content.parts[0].text}" for m in found.memories]}
