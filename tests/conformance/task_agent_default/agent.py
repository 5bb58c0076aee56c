"""ADK's side of the `task_agent_default` case: a coordinator with a single-turn agent and
a task agent without an output schema (ADK 2's `mode`, which ADK's agent-config YAML
cannot declare, so the case is a Python App here and an agent-config directory for the
runner, whose loader takes `mode`)."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

MODEL = "gemini-2.5-flash"

notes = LlmAgent(
    name="notes",
    model=MODEL,
    description="Reads a note and says what it asks for.",
    instruction="Say in a few words what the note asks for.",
    mode="single_turn",
    output_key="note",
)
intake = LlmAgent(
    name="intake",
    model=MODEL,
    description="Asks the user for the booking's details.",
    instruction="Ask the user for the number of guests, then finish the task.",
    mode="task",
    output_key="booking",
)
root_agent = LlmAgent(
    name="host",
    model=MODEL,
    description="Takes table bookings.",
    instruction="Check the note with notes, then delegate the booking to intake, then confirm it in one sentence.",
    sub_agents=[notes, intake],
)
app = App(name="task_agent_default", root_agent=root_agent)
