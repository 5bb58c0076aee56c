"""The reply's schema: a pydantic model with its own validators, as an ADK user writes one.

ADK validates the model's reply with pydantic, so what the validators change (the code
upper-cased) is the reply, and what they refuse goes back to the model in pydantic's words.
"""

from pydantic import BaseModel, field_validator, model_validator


class FlightStatus(BaseModel):
    """A flight's status."""

    code: str
    status: str
    delay_minutes: int = 0

    @field_validator("code")
    @classmethod
    def upper_case_code(cls, code: str) -> str:
        return code.strip().upper()

    @model_validator(mode="after")
    def delay_only_when_delayed(self) -> "FlightStatus":
        if self.delay_minutes and self.status != "delayed":
            raise ValueError(f"a delay of {self.delay_minutes} minutes needs the status 'delayed', not {self.status!r}")
        return self
