"""The reply's schema: a list of a pydantic model, as ADK's YAML can name any Python object.

`Spots` is `list[Spot]`, not a class: ADK sends it as Gemini's array schema, validates each
item against `Spot` and stores the list under `output_key`. The fields are out of
alphabetical order, and the model's replies give them in yet another order: the stored value
keeps the class's (docs/adk-conformance.md, "Key order").
"""

from pydantic import BaseModel, Field


class Spot(BaseModel):
    """A place worth visiting."""

    name: str = Field(description="The place's name.")
    kind: str = Field(description="museum, park, market, ...")
    hours: int = Field(description="How many hours a visit takes.")


Spots = list[Spot]
