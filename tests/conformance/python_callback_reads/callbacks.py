"""A callback reading the session through its CallbackContext, as an ADK user writes it."""

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest


async def add_the_notes(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
    """Tells the model which files the session holds and what the note says."""
    names = await callback_context.list_artifacts()
    note = await callback_context.load_artifact("note.txt")
    missing = await callback_context.load_artifact("absent.txt")
    llm_request.append_instructions(
        [
            f"Files: {', '.join(names)}.",
            f"The note says: {note.text if note else 'nothing'}.",
            f"absent.txt: {'missing' if missing is None else 'present'}.",
        ]
    )
    return None
