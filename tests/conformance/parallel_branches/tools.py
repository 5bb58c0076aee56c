"""The weather scout's tool: a plain Python function, as an ADK user writes it."""


def forecast(city: str) -> dict:
    """Tells tomorrow's weather in a city.

    Args:
      city: the city's name.
    """
    return {"city": city, "sky": "sunny", "high_c": 21}
