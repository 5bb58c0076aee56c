"""The reply's schema: a pydantic model, as an ADK user writes one.

Its fields, like the tool's result and the model's arguments, are not in alphabetical
order: what the model reads keeps each object's order (docs/adk-conformance.md, "Key order").
"""

from pydantic import BaseModel, Field


class WeatherReport(BaseModel):
    """The weather in one city."""

    temperature_c: float
    city: str = Field(description="The city's name.")
    humid: bool
    conditions: list[str] = Field(description="What the sky does, in a word or two each.")
