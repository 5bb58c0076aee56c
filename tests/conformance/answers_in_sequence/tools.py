"""A long-running tool: it starts an approval and answers at once that it is pending
(the `answers_in_sequence` case: the client answers two calls of two invocations at once, then one beside a text)."""

from google.adk.tools.long_running_tool import LongRunningFunctionTool


def request_approval(amount: float, purpose: str) -> dict:
    """Asks a manager to approve an expense.

    Args:
      amount: the amount, in euros.
      purpose: what the money was spent on.
    """
    # Keys not in sorted order: the result is retold `For context:` in the next agent's
    # request in its order (docs/adk-conformance.md, "Key order").
    return {"ticket": "approval-1", "status": "pending", "amount": amount}


ask_for_approval = LongRunningFunctionTool(func=request_approval)
