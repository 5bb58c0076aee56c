"""ADK's side of the `single_turn_transfer_schema` case: the `single_turn_transfer` case whose
single-turn agent has an `output_schema`; a coordinator whose single-turn agent
(ADK 2's `mode="single_turn"`, which ADK's agent-config YAML cannot declare, so the case
is a Python App here and an agent-config directory for the runner, whose loader takes
`mode`) calls `transfer_to_agent` back to it instead of answering."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

from single_turn_transfer_schema.schemas import NoteSummary

MODEL = "gemini-2.5-flash"

notes = LlmAgent(
    name="notes",
    model=MODEL,
    description="Reads a note and says what it asks for.",
    instruction="Say in a few words what the note asks for.",
    mode="single_turn",
    output_schema=NoteSummary,
    output_key="note",
)
root_agent = LlmAgent(
    name="host",
    model=MODEL,
    description="Takes table bookings.",
    instruction="Check the note with notes, then confirm the booking in one sentence.",
    sub_agents=[notes],
)
app = App(name="single_turn_transfer_schema", root_agent=root_agent)
