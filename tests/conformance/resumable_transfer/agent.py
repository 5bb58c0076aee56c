"""ADK's side of the `resumable_transfer` case: an App marked resumable whose root agent
transfers to a sub-agent (ADK's ResumabilityConfig has no YAML form, so the case is a
Python App here and an agents file for the runner, `agents.yaml`, declaring the same
tree)."""

from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig

MODEL = "gemini-2.5-flash"

billing = LlmAgent(
    name="billing",
    model=MODEL,
    description="Answers billing questions.",
    instruction="Answer billing questions in one sentence.",
)
root_agent = LlmAgent(
    name="front_desk",
    model=MODEL,
    description="Greets the user and sends them on.",
    instruction="Send billing questions to billing.",
    sub_agents=[billing],
)
app = App(
    name="resumable_transfer",
    root_agent=root_agent,
    resumability_config=ResumabilityConfig(is_resumable=True),
)
