"""The note keeper's tools: one saves a note as an artifact, the other, in a later turn,
loads it (the latest version and the first) and lists the session's artifacts."""

from google.adk.tools import ToolContext
from google.genai import types


async def save_note(text: str, tool_context: ToolContext) -> str:
    """Saves the note as note.txt, a new version each time, and who wrote it.

    Args:
      text: the note.
    """
    await tool_context.save_artifact("note.txt", types.Part(text=text))
    await tool_context.save_artifact("user:owner.txt", types.Part(text="the user"))
    return "note saved"


async def read_notes(tool_context: ToolContext) -> dict:
    """Reads the notes saved before: the first note, the latest, and every file's name."""
    first = await tool_context.load_artifact("note.txt", version=0)
    latest = await tool_context.load_artifact("note.txt")
    return {
        "first": first.text if first else None,
        "latest": latest.text if latest else None,
        "names": await tool_context.list_artifacts(),
    }
