"""The agents' tool: a plain Python function, as an ADK user writes it."""


def find_trains(route: str) -> dict:
    """Finds the trains of a route.

    Args:
      route: where from and where to, as the user says it.
    """
    return {"route": route, "hours": 1.5}
