"""The task's output: `dict[str, int]`, a Python type that is not a pydantic class. ADK's
`finish_task` validates its `result` with `TypeAdapter(dict[str, int])` (pydantic's words
for a misfit) and hands the value on as the model wrote it."""

Counts = dict[str, int]
