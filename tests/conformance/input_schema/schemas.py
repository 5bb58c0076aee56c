"""The `input_schema` of the `input_schema` case's fare finder: ADK's YAML names the
pydantic class, which ADK declares as the agent's parameters when it is called as a tool."""

from pydantic import BaseModel, Field


class Trip(BaseModel):
    origin: str = Field(description="The city the trip starts in.")
    destination: str
    passengers: int = 1
