"""The root agent's reply schema: a pydantic model, as an ADK user writes one."""

from pydantic import BaseModel, Field


class Route(BaseModel):
    """A route between two cities."""

    origin: str = Field(description="Where the trip starts.")
    destination: str
    hours: float
