"""The task's output: a pydantic class, as an ADK user writes one. ADK's `finish_task`
validates its arguments with it, and a misfit goes back to the model in pydantic's words."""

from pydantic import BaseModel


class Booking(BaseModel):
    """A table booking."""

    name: str
    guests: int
