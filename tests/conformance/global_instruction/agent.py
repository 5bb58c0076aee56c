"""ADK's side of the `global_instruction` case: a root agent's `global_instruction`, which
every agent of the tree gets (an LlmAgent field that ADK's agent-config YAML does not have,
so the case is a Python App here and an agents file for the runner, `agents.yaml`,
declaring the same tree)."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

MODEL = "gemini-2.5-flash"

rooms = LlmAgent(
    name="rooms",
    model=MODEL,
    description="Answers questions about rooms.",
    instruction="Answer questions about rooms in one sentence.",
)
root_agent = LlmAgent(
    name="front_desk",
    model=MODEL,
    description="Sends each question to the right desk.",
    global_instruction="You work for the Grand Hotel. The guest is {guest?}.",
    instruction="Transfer questions about rooms to rooms.",
    sub_agents=[rooms],
)
app = App(name="global_instruction", root_agent=root_agent)
