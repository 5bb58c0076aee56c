"""The single-turn agent's output: a pydantic class, as an ADK user writes one."""

from pydantic import BaseModel


class NoteSummary(BaseModel):
    """What a note asks for."""

    asks: str
