"""ADK's side of the `resumable_workflow` case: an App marked resumable (ADK's
ResumabilityConfig has no YAML form, so the case is a Python App here and an agents file
for the runner, `agents.yaml`, declaring the same tree)."""

from google.adk.agents import LlmAgent, LoopAgent, SequentialAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.tools import exit_loop

MODEL = "gemini-2.5-flash"

writer = LlmAgent(
    name="writer",
    model=MODEL,
    description="Writes and rewrites a short poem.",
    instruction="Write or improve a two-line poem about the sea.",
    output_key="poem",
)
critic = LlmAgent(
    name="critic",
    model=MODEL,
    description="Judges the poem.",
    instruction="If this poem is good, call exit_loop. Otherwise say what to improve: {poem}",
    tools=[exit_loop],
)
refine = LoopAgent(
    name="refine_loop",
    description="Refines a poem until it is good.",
    max_iterations=3,
    sub_agents=[writer, critic],
)
title = LlmAgent(
    name="titler",
    model=MODEL,
    description="Gives the poem a title.",
    instruction="Give this poem a title: {poem}",
)
root_agent = SequentialAgent(
    name="pipeline",
    description="Writes a poem, refines it, then titles it.",
    sub_agents=[refine, title],
)
app = App(
    name="resumable_workflow",
    root_agent=root_agent,
    resumability_config=ResumabilityConfig(is_resumable=True),
)
