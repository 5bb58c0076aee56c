"""Callbacks as an ADK user chains them: a workflow agent's `before_agent` callback, and two
`before_model` callbacks run in order until one answers."""

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types


def open_shift(callback_context: CallbackContext) -> None:
    """Writes the shift into the state before the sequence runs; lets it run."""
    callback_context.state["shift"] = "morning"
    return None


def add_the_shift(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
    """Tells the model which shift it is; lets the next callback decide."""
    llm_request.append_instructions([f"It is the {callback_context.state.get('shift')} shift."])
    return None


def answer_greetings(callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse | None:
    """Answers a greeting in the model's place."""
    said = llm_request.contents[-1].parts[0].text or ""
    if said.lower().startswith("hello"):
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Good morning!")]))
    return None
