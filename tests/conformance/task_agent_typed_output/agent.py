"""ADK's side of the `task_agent_typed_output` case: a task agent whose `output_schema` is
a Python type other than a class (`dict[str, int]`). ADK 2's `mode` is not in ADK's
agent-config YAML, so the case is a Python App here and an agent-config directory for the
runner."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

from task_agent_typed_output.schemas import Counts

MODEL = "gemini-2.5-flash"

stock = LlmAgent(
    name="stock",
    model=MODEL,
    description="Counts the fruit in the shop with the user.",
    instruction="Ask the user how many of each fruit the shop has, then finish the task.",
    mode="task",
    output_schema=Counts,
    output_key="counts",
)
root_agent = LlmAgent(
    name="keeper",
    model=MODEL,
    description="Keeps the shop's stock.",
    instruction="Delegate the count to stock, then say the total in one sentence.",
    sub_agents=[stock],
)
app = App(name="task_agent_typed_output", root_agent=root_agent)
