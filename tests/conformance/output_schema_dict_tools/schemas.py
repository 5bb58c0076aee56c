"""The reply's schema: `dict[str, int]`, a Python type that is not a pydantic class.

ADK sends it as Gemini's object schema with `additional_properties`, declares
`set_model_response` with one argument, `response`, and stores the call's value as it came
(ADK validates only pydantic classes and lists of them).
"""

Counts = dict[str, int]
