"""ADK's side of the `task_nested` case: a coordinator delegating to a task agent that
delegates in turn to a single-turn agent and to a task agent of its own, which asks the user
a question (ADK 2's
`mode="task"`, which ADK's agent-config YAML cannot declare, so the case is a Python App
here and an agent-config directory for the runner, whose loader takes `mode`)."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

MODEL = "gemini-2.5-flash"

menu = LlmAgent(
    name="menu",
    model=MODEL,
    description="Suggests a dish for the occasion.",
    instruction="Suggest one dish in a few words.",
    mode="single_turn",
    output_key="dish",
)
guests = LlmAgent(
    name="guests",
    model=MODEL,
    description="Asks the user how many guests are coming.",
    instruction="Ask the user how many guests are coming, then finish the task.",
    mode="task",
    output_key="guest_count",
)
planner = LlmAgent(
    name="planner",
    model=MODEL,
    description="Plans a dinner.",
    instruction="Have menu suggest a dish and guests find out the number of guests, then finish the task with the plan.",
    mode="task",
    output_key="plan",
    sub_agents=[menu, guests],
)
root_agent = LlmAgent(
    name="host",
    model=MODEL,
    description="Organises dinners.",
    instruction="Delegate each dinner to planner, then confirm the plan to the user in one sentence.",
    sub_agents=[planner],
)
app = App(name="task_nested", root_agent=root_agent)
