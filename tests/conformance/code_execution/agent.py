"""ADK's side of the `code_execution` case: an agent whose code executor is Gemini's own
(`BuiltInCodeExecutor`) beside a function tool (`load_memory`): `codeExecution` among the
request's tools, and the executor's event stored before each reply, naming the image the
reply generated (saved as an artifact, its part replaced by a text). Gemini's tool only:
no OpenAI-wire replay. An agents file for the runner, `agents.yaml`, declares the same
tree (the executor as the `code_execution` tool)."""

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.code_executors import BuiltInCodeExecutor
from google.adk.tools import load_memory

root_agent = LlmAgent(
    name="calculator",
    model="gemini-2.5-flash",
    description="Computes what the user asks.",
    instruction="Compute the answer with code when it helps. Answer in one sentence.",
    tools=[load_memory],
    code_executor=BuiltInCodeExecutor(),
)
app = App(name="code_execution", root_agent=root_agent)
