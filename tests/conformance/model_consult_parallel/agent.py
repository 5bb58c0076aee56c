"""ADK's side of the `model_consult_parallel` case: the executor asks ADK's
ModelConsultTool two questions in one reply, with a budget of one consult a turn. ADK has
the second call wait for the first and count after it: it is answered `limit_reached`,
"1 of 1 used", and the advisor is asked once. An agents file for the runner,
`agents.yaml`, declares the same tree."""

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.tools.model_consult import ModelConsultTool

root_agent = LlmAgent(
    name="planner",
    model="gemini-2.5-flash",
    description="Plans a database migration.",
    instruction="Plan the migration the engineer asks about. Answer in one sentence.",
    tools=[ModelConsultTool(model="gemini-2.5-pro", max_uses=1, session_max_uses=3)],
)
app = App(name="model_consult_parallel", root_agent=root_agent)
