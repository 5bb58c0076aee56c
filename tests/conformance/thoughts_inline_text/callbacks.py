"""Keeps the model's reasoning as text files, as an ADK user might to archive it."""

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_response import LlmResponse
from google.genai import types


def keep_thoughts_as_notes(callback_context: CallbackContext, llm_response: LlmResponse) -> LlmResponse | None:
    """Turns each thought of the reply into a `text/plain` file (still a thought) and cites
    the source beside a text answer as a `text/markdown` file."""
    if not llm_response.content or not llm_response.content.parts:
        return None
    parts = []
    for part in llm_response.content.parts:
        if part.thought and part.text:
            note = types.Blob(mime_type="text/plain", data=part.text.encode())
            parts.append(types.Part(inline_data=note, thought=True))
        else:
            parts.append(part)
    if any(part.text and not part.thought for part in parts):
        source = types.Blob(mime_type="text/markdown", data="*From the attached note.*".encode())
        parts.append(types.Part(inline_data=source))
    llm_response.content.parts = parts
    return None
