"""ADK's side of the `long_running_in_task` case: a task agent (ADK 2's `mode="task"`,
which ADK's agent-config YAML cannot declare) whose long-running tool the client answers
in a later turn; an agent-config directory for the runner, whose loader takes `mode`."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

from long_running_in_task.tools import check_with_kitchen

MODEL = "gemini-2.5-flash"

intake = LlmAgent(
    name="intake",
    model=MODEL,
    description="Checks with the kitchen that a party can be seated.",
    instruction="Ask the kitchen whether the party can be seated, then finish the task with its answer.",
    mode="task",
    tools=[check_with_kitchen],
)
root_agent = LlmAgent(
    name="host",
    model=MODEL,
    description="Takes table bookings.",
    instruction="Delegate each booking to intake, then confirm it to the user in one sentence.",
    sub_agents=[intake],
)
app = App(name="long_running_in_task", root_agent=root_agent)
