"""A long-running tool: it starts an approval and answers at once that it is pending
(the `answer_with_text_refused` case: the client's answer comes with a text, which ADK
refuses for an llm agent at the root)."""

from google.adk.tools.long_running_tool import LongRunningFunctionTool


def request_approval(amount: float, purpose: str) -> dict:
    """Asks a manager to approve an expense.

    Args:
      amount: the amount, in euros.
      purpose: what the money was spent on.
    """
    return {"status": "pending", "ticket": "approval-1", "amount": amount}


ask_for_approval = LongRunningFunctionTool(func=request_approval)
