"""The front desk's tool: writes state of every scope through ToolContext."""

from google.adk.tools import ToolContext


def check_in(guest: str, tool_context: ToolContext) -> dict:
    """Checks the guest in.

    Args:
      guest: the guest's name.
    """
    tool_context.state["app:hotel"] = "Seaview"
    tool_context.state["user:guest"] = guest
    # temp: lives for this invocation only: the next request of this turn reads it, the
    # next turn does not.
    tool_context.state["temp:note"] = "sea view, late checkout"
    return {"room": 12}
