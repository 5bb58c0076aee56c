"""ADK's side of the `single_turn_input_schema` case: a single-turn agent (ADK 2's
`mode="single_turn"`) with an `input_schema` class, which its parent calls with the class's
fields as arguments. ADK 2's `mode` is not in ADK's agent-config YAML, so the case is a
Python App here and an agent-config directory for the runner."""

from google.adk.agents import LlmAgent
from google.adk.apps import App

from single_turn_input_schema.schemas import Trip

MODEL = "gemini-2.5-flash"

fares = LlmAgent(
    name="fares",
    model=MODEL,
    description="Finds the cheapest fare between two cities.",
    instruction="Give the cheapest fare for the trip.",
    mode="single_turn",
    input_schema=Trip,
    output_key="fare",
)
root_agent = LlmAgent(
    name="desk",
    model=MODEL,
    description="Books trips.",
    instruction="Price the trip the user asks for with fares, then answer in one sentence.",
    sub_agents=[fares],
)
app = App(name="single_turn_input_schema", root_agent=root_agent)
