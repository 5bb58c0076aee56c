"""ADK's side of the `model_consult_transcript` case: the user's message carries an image,
and ADK's ModelConsultTool passes it to the advisor as it is, between the transcript's
lines (`include_media`, ADK's default). An agents file for the runner, `agents.yaml`,
declares the same tree."""

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.tools.model_consult import ModelConsultTool

root_agent = LlmAgent(
    name="analyst",
    model="gemini-2.5-flash",
    description="Reads dashboards.",
    instruction="Explain what the engineer's dashboard shows. Answer in one sentence.",
    tools=[ModelConsultTool(model="gemini-2.5-pro")],
)
app = App(name="model_consult_transcript", root_agent=root_agent)
