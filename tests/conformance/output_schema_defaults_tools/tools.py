"""The planner's tool: a plain Python function, as an ADK user writes it."""


def find_trains(origin: str, destination: str) -> dict:
    """Finds the trains between two cities.

    Args:
      origin: the city to leave from.
      destination: the city to go to.
    """
    return {"origin": origin, "destination": destination, "hours": 1.5}
