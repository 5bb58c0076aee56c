"""ADK's side of the `model_consult_settings` case: ADK's ModelConsultTool under another
name (ADK's executor text names it), with its own advisor instruction, thinking level and
output cap, no tool inventory, and a context config that keeps the newest three events and
cuts each call and result to 40 characters; the executor has a static instruction, which
the advisor is sent before the instruction. An agents file for the runner, `agents.yaml`,
declares the same tree."""

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.tools import load_artifacts
from google.adk.tools.model_consult import ModelConsultContextConfig, ModelConsultTool

root_agent = LlmAgent(
    name="troubleshooter",
    model="gemini-2.5-flash",
    description="Finds why a service is slow.",
    static_instruction="You work for the checkout team.",
    instruction="Help the on-call engineer find why {service?} is slow.",
    tools=[
        load_artifacts,
        ModelConsultTool(
            model="gemini-2.5-pro",
            name="ask_senior",
            thinking_level="low",
            max_output_tokens=256,
            advisor_instruction="You review plans for an on-call team. Answer in two lines.",
            include_tool_inventory=False,
            context_config=ModelConsultContextConfig(max_events=3, max_part_chars=40),
        ),
    ],
)
app = App(name="model_consult_settings", root_agent=root_agent)
