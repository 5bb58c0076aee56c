"""The reply's schema: a pydantic model, as an ADK user writes one.

Its fields, like the tool's result, are in alphabetical order: on the OpenAI-compatible
wire the runner writes the JSON objects of the messages (call arguments, tool results)
with sorted keys (docs/adk-conformance.md, "Differences left").
"""

from pydantic import BaseModel, Field


class WeatherReport(BaseModel):
    """The weather in one city."""

    city: str = Field(description="The city's name.")
    conditions: list[str] = Field(description="What the sky does, in a word or two each.")
    humid: bool
    temperature_c: float
