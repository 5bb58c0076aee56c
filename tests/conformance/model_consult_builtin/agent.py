"""ADK's side of the `model_consult_builtin` case: an executor with Gemini's own tools
(`google_search`, `url_context`) and the memory tools beside ADK's ModelConsultTool. ADK's
tool inventory lists the agent's tools in its order, declared or not, a built-in tool and
`preload_memory` with their names as their descriptions (`- google_search:
google_search`). Gemini's tools only: no OpenAI-wire replay. An agents file for the
runner, `agents.yaml`, declares the same tree."""

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.tools import google_search, load_memory, preload_memory, url_context
from google.adk.tools.model_consult import ModelConsultTool

root_agent = LlmAgent(
    name="researcher",
    model="gemini-2.5-flash",
    description="Researches outages.",
    instruction="Find what the engineer asks about. Answer in one sentence.",
    tools=[load_memory, google_search, preload_memory, url_context, ModelConsultTool(model="gemini-2.5-pro")],
)
app = App(name="model_consult_builtin", root_agent=root_agent)
