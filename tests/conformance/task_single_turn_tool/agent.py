"""ADK's side of the `task_single_turn_tool` case: a task agent delegating to a single-turn
agent that calls a tool before it answers, so it asks its model twice inside the task (ADK 2's
`mode`, which ADK's agent-config YAML cannot declare, so the case is a Python App here and an
agent-config directory for the runner, whose loader takes `mode`)."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

from task_single_turn_tool.tools import check_pantry

MODEL = "gemini-2.5-flash"

menu = LlmAgent(
    name="menu",
    model=MODEL,
    description="Suggests a dish the kitchen can cook.",
    instruction="Check the pantry for the main ingredient, then suggest one dish in a few words.",
    mode="single_turn",
    output_key="dish",
    tools=[check_pantry],
)
planner = LlmAgent(
    name="planner",
    model=MODEL,
    description="Plans a dinner.",
    instruction="Have menu suggest a dish, then finish the task with the plan.",
    mode="task",
    output_key="plan",
    sub_agents=[menu],
)
root_agent = LlmAgent(
    name="host",
    model=MODEL,
    description="Organises dinners.",
    instruction="Delegate each dinner to planner, then confirm the plan to the user in one sentence.",
    sub_agents=[planner],
)
app = App(name="task_single_turn_tool", root_agent=root_agent)
