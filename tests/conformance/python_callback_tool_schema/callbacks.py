"""A callback reading the tools of the request, as an ADK user writes it: each tool's
result schema (an MCP tool's outputSchema, ADK's `response_json_schema`) told to the
model in the instruction."""

import json

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest


def describe_results(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
    """Appends what each tool returns, as its declaration's result schema says."""
    for tool in llm_request.config.tools or []:
        for declaration in tool.function_declarations or []:
            schema = declaration.response_json_schema
            said = json.dumps(schema) if schema is not None else "nothing declared"
            llm_request.append_instructions([f"{declaration.name} returns: {said}"])
    return None
