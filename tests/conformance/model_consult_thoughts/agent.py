"""ADK's side of the `model_consult_thoughts` case: ADK's ModelConsultTool with
`include_thoughts`, so the advisor's transcript has the executor's thoughts as `[thought]`
lines (an earlier turn's thought beside its text, and the thought beside the consult's
own call). An agents file for the runner, `agents.yaml`, declares the same tree."""

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.tools.model_consult import ModelConsultContextConfig, ModelConsultTool

root_agent = LlmAgent(
    name="analyst",
    model="gemini-2.5-flash",
    description="Reads dashboards.",
    instruction="Explain what the engineer's dashboard shows. Answer in one sentence.",
    tools=[
        ModelConsultTool(
            model="gemini-2.5-pro",
            context_config=ModelConsultContextConfig(include_thoughts=True),
        )
    ],
)
app = App(name="model_consult_thoughts", root_agent=root_agent)
