"""The finder's tool: a plain Python function, as an ADK user writes it."""


def find_spots(city: str) -> dict:
    """Finds the places worth visiting in a city.

    Args:
      city: the city's name.
    """
    return {"city": city, "spots": ["Louvre (museum, 4h)", "Jardin du Luxembourg (park, 2h)"]}
