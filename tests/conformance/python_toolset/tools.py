"""The shop's tools as ADK's YAML can name them: a toolset, a tool class made with
`args`, a function making a tool from `args`, and a tool instance."""

from __future__ import annotations

from typing import Any, Optional

from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_configs import ToolArgsConfig
from google.adk.tools.tool_context import ToolContext
from google.genai import types


def lookup_order(order_id: str) -> dict:
    """Looks an order up.

    Args:
      order_id: the order's id.
    """
    return {"order_id": order_id, "status": "shipped"}


def cancel_order(order_id: str, tool_context: ToolContext) -> dict:
    """Cancels an order.

    Args:
      order_id: the order's id.
    """
    tool_context.state["cancelled"] = order_id
    return {"order_id": order_id, "status": "cancelled"}


class OrderToolset(BaseToolset):
    """The order tools, named with the toolset's prefix."""

    async def get_tools(self, readonly_context: Optional[ReadonlyContext] = None) -> list[BaseTool]:
        return [FunctionTool(lookup_order), FunctionTool(cancel_order)]


# A toolset instance, its tools named `orders_<tool>`.
order_tools = OrderToolset(tool_name_prefix="orders")


class Greeter(BaseTool):
    """A tool class: ADK makes it with `from_config` from the YAML's args."""

    def __init__(self, greeting: str):
        super().__init__(name="greet", description="Greets a customer by name.")
        self.greeting = greeting

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters=types.Schema(
                type=types.Type.OBJECT,
                properties={"name": types.Schema(type=types.Type.STRING, description="The customer's name.")},
                required=["name"],
            ),
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return f"{self.greeting}, {args['name']}!"


def discount_tool(args: ToolArgsConfig) -> FunctionTool:
    """A function making the tool from the YAML's args (ADK calls it with them)."""
    percent = args.model_dump()["percent"]

    def apply_discount(price: float) -> dict:
        """Applies the shop's discount to a price.

        Args:
          price: the price before the discount.
        """
        return {"price": round(price * (100 - percent) / 100, 2)}

    return FunctionTool(apply_discount)


def _opening_hours(day: str) -> str:
    """Says when the shop is open on a day.

    Args:
      day: the day of the week.
    """
    return "closed" if day.lower() == "sunday" else "9:00-18:00"


# A tool instance.
opening_hours = FunctionTool(_opening_hours)
