"""The desk's tool: a plain Python function, as an ADK user writes it."""


def get_flight(code: str) -> dict:
    """Looks up a flight.

    Args:
      code: the flight's code.
    """
    return {"code": code.upper(), "departure": "14:05", "expected": "14:45", "gate": "B12"}
