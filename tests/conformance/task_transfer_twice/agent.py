"""ADK's side of the `task_transfer_twice` case: the `task_transfer` case whose caller, re-run
after the hand-back, calls its task agent again, which hands back again; a coordinator delegating to a task agent (ADK 2's
`mode="task"`, which ADK's agent-config YAML cannot declare, so the case is a Python App
here and an agent-config directory for the runner, whose loader takes `mode`)."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

from task_transfer_twice.schemas import Booking

MODEL = "gemini-2.5-flash"

intake = LlmAgent(
    name="intake",
    model=MODEL,
    description="Asks the user for the booking's details.",
    instruction="Ask the user for the name and the number of guests, then finish the task.",
    mode="task",
    output_schema=Booking,
    output_key="booking",
)
root_agent = LlmAgent(
    name="host",
    model=MODEL,
    description="Takes table bookings.",
    instruction="Delegate each booking to intake, then confirm it to the user in one sentence.",
    sub_agents=[intake],
)
app = App(name="task_transfer_twice", root_agent=root_agent)
