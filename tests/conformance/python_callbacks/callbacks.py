"""The desk's callbacks, as an ADK user writes them."""

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types


def answer_greetings(callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse | None:
    """Answers a bare greeting without the model, and counts the greetings."""
    last = llm_request.contents[-1]
    text = "".join(part.text or "" for part in last.parts or []) if last.role == "user" else ""
    if text.strip().lower() != "hello":
        return None
    callback_context.state["greetings"] = callback_context.state.get("greetings", 0) + 1
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Hello! Ask me about an order.")]))


def normalise_order_id(tool: BaseTool, args: dict, tool_context: ToolContext) -> dict | None:
    """Order ids are upper case: the model's spelling is corrected before the tool runs."""
    if tool.name == "lookup_order":
        args["order_id"] = args["order_id"].upper()
    return None
