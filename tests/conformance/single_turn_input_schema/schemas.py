"""The single-turn agent's input: a pydantic class, as an ADK user writes one."""

from pydantic import BaseModel


class Trip(BaseModel):
    """A trip to price."""

    origin: str
    destination: str
    travellers: int = 1
