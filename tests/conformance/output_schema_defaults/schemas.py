"""The reply's schema: a pydantic class with defaults, an Optional field and a nested class.

ADK validates the reply with the class and stores its dump (`model_dump(exclude_none=True)`):
the model's reply leaves out fields with a default (the dump has the default, a
`default_factory`'s too), gives a null for an Optional field (left out), a string for an
`int` and an integer for a `float` (converted, as pydantic's lax mode does), and its keys
in another order than the class's (the dump has the class's). See docs/adk-conformance.md, "Key order".
"""

from pydantic import BaseModel, Field


class Stop(BaseModel):
    """A city on the way."""

    city: str
    nights: int = Field(default=1, description="Nights spent there.")
    note: str | None = None


class Itinerary(BaseModel):
    """A trip plan."""

    title: str
    stops: list[Stop]
    budget: float
    currency: str = "EUR"
    tags: list[str] = Field(default_factory=lambda: ["holiday"])
    remarks: str | None = None
