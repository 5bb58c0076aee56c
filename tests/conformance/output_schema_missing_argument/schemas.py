"""Schemas whose `set_model_response` carries the value in one argument, called without it.

`Route` is `Train | None`: ADK declares the argument `response` and reads it with
`args.get('response')`, so a call without it gives None: ADK stores no reply, answers the
call with None and calls the model again. `Stops` is `list[Stop]`: ADK reads `items` with
an empty list as its default, so a call without it is the final reply `[]`.
"""

from pydantic import BaseModel


class Train(BaseModel):
    line: str
    hours: float


class Stop(BaseModel):
    city: str
    nights: int = 1


Route = Train | None

Stops = list[Stop]
