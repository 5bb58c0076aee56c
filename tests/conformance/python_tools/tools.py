"""The shop's tools: plain Python functions, as an ADK user writes them."""

from google.adk.tools import ToolContext
from google.genai import types


def add_to_cart(item: str, count: int, tool_context: ToolContext) -> dict:
    """Adds an item to the user's cart.

    Args:
      item: what to add.
      count: how many of it.
    """
    cart = dict(tool_context.state.get("cart") or {})
    cart[item] = cart.get(item, 0) + count
    tool_context.state["cart"] = cart
    tool_context.state["user:last_item"] = item
    return {"cart": cart}


async def save_receipt(tool_context: ToolContext) -> str:
    """Saves the cart as a receipt the user can download."""
    cart = tool_context.state.get("cart") or {}
    lines = "\n".join(f"{count} x {item}" for item, count in sorted(cart.items()))
    await tool_context.save_artifact("receipt.txt", types.Part(text=lines))
    return "receipt saved"
