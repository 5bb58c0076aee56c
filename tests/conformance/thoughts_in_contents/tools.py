"""The front desk's tool: a plain Python function, as an ADK user writes it."""


def get_opening_hours(place: str) -> dict:
    """Tells when a place of the hotel is open.

    Args:
      place: the restaurant, the pool or the gym.
    """
    return {"hours": "7:00-22:00", "place": place}
