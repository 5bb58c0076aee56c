"""The reply's schema: a pydantic model, as an ADK user writes one."""

from pydantic import BaseModel, Field


class WeatherReport(BaseModel):
    """The weather in one city."""

    city: str = Field(description="The city's name.")
    temperature_c: float
    conditions: list[str] = Field(description="What the sky does, in a word or two each.")
    humid: bool
