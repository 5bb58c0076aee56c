"""The desk's callbacks at the agent, model reply and tool reply points, as an ADK user writes them."""

from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types


def closed_on_sundays(callback_context: CallbackContext) -> types.Content | None:
    """Answers a question about Sunday in the agent's place: the agent does not run."""
    message = callback_context.user_content
    text = "".join(part.text or "" for part in (message.parts or [])) if message else ""
    if "sunday" not in text.lower():
        return None
    callback_context.state["sunday_questions"] = callback_context.state.get("sunday_questions", 0) + 1
    return types.Content(role="model", parts=[types.Part(text="The desk is closed on Sundays.")])


def thank_the_user(callback_context: CallbackContext, llm_response: LlmResponse) -> LlmResponse | None:
    """Adds thanks to every text reply of the model, changing the reply in place."""
    parts = llm_response.content.parts if llm_response.content else []
    if parts and parts[-1].text:
        parts[-1].text += " Thank you for waiting."
    return None


def add_delivery_estimate(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: dict
) -> dict | None:
    """Gives the model a delivery estimate with a shipped order, and remembers the order."""
    if tool.name != "lookup_order" or tool_response.get("status") != "shipped":
        return None
    tool_context.state["last_order"] = args["order_id"]
    return {"delivery": "in 2 days", **tool_response}


def offer_more_help(callback_context: CallbackContext) -> types.Content | None:
    """After the agent's reply about an order, one more reply of the agent's."""
    order = callback_context.state.get("last_order")
    if not order or callback_context.state.get("offered_help_for") == order:
        return None
    callback_context.state["offered_help_for"] = order
    return types.Content(role="model", parts=[types.Part(text=f"Anything else about order {order}?")])
