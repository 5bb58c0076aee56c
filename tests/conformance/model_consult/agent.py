"""ADK's side of the `model_consult` case: an agent with ADK's ModelConsultTool, a second
Gemini model advising it, with budgets per turn and per session (ADK's agent-config loader
cannot build the tool, so the case is a Python App here and an agents file for the runner,
`agents.yaml`, declaring the same tree). `load_artifacts` gives the advisor's transcript a
tool call and its result, and the executor's tools list an entry besides the consult."""

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.tools import load_artifacts
from google.adk.tools.model_consult import ModelConsultTool

root_agent = LlmAgent(
    name="troubleshooter",
    model="gemini-2.5-flash",
    description="Finds why a service is slow.",
    instruction="Help the on-call engineer find why {service?} is slow. Answer in one sentence.",
    tools=[
        load_artifacts,
        ModelConsultTool(model="gemini-2.5-pro", max_uses=1, session_max_uses=2, thinking_level="high"),
    ],
)
app = App(name="model_consult", root_agent=root_agent)
