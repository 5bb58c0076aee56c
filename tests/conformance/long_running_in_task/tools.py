"""A long-running tool of a task agent: it asks the kitchen and answers at once that it waits."""

from google.adk.tools.long_running_tool import LongRunningFunctionTool


def ask_kitchen(guests: int) -> dict:
    """Asks the kitchen whether it can seat a party tonight.

    Args:
      guests: how many guests.
    """
    return {"status": "asked", "guests": guests}


check_with_kitchen = LongRunningFunctionTool(func=ask_kitchen)
