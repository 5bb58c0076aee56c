"""ADK's side of the `task_agent_misfit_default` case: a task agent without an output schema
(ADK's `_DefaultTaskOutput`, `result: str`, no other key) whose first `finish_task` calls
miss it, answered with pydantic's text (the runner, without Python at hand, writes the same).
ADK 2's `mode` is not in ADK's agent-config YAML, so the case is a Python App here and an
agent-config directory for the runner."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

MODEL = "gemini-2.5-flash"

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
    instruction="Delegate the booking to intake, then confirm it in one sentence.",
    sub_agents=[intake],
)
app = App(name="task_agent_misfit_default", root_agent=root_agent)
