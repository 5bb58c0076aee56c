"""Two schemas ADK takes but does not validate: a `Union` of two classes and a `types.Schema`.

`Route` is `Train | Flight`: ADK sends it as google-genai makes a union (`anyOf`) and, on the
OpenAI-compatible wire, as ADK's LiteLlm sends it; the value is stored as the JSON parses,
in the model's key order and with its nulls. `WEATHER` is a `types.Schema`, sent as written.
"""

from google.genai import types
from pydantic import BaseModel


class Train(BaseModel):
    line: str
    hours: float


class Flight(BaseModel):
    number: str
    airport: str | None = None


Route = Train | Flight

WEATHER = types.Schema(
    type=types.Type.OBJECT,
    properties={
        "sky": types.Schema(type=types.Type.STRING, description="clear, cloudy, rain, ..."),
        "celsius": types.Schema(type=types.Type.INTEGER),
    },
    required=["sky"],
)
