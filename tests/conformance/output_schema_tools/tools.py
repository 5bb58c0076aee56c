"""The reporter's tool: a plain Python function, as an ADK user writes it."""


def get_weather(city: str) -> dict:
    """Looks up the weather in a city.

    Args:
      city: the city's name.
    """
    return {"temperature_c": 18.5, "sky": "cloudy, light rain", "city": city, "humidity": 0.82}
