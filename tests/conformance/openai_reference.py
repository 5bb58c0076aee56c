"""What ADK Python sends an OpenAI-compatible model, for each recorded model request.

ADK reaches OpenAI-compatible servers through its LiteLlm model, which converts each
LlmRequest to chat-completions messages and tools (google.adk.models.lite_llm's
`_get_completion_inputs`) before LiteLLM sends them. For every `recording.json` this
rebuilds each recorded Gemini request as the LlmRequest it came from (the Gemini body
carries the whole request: contents, system instruction, tools, generation config) and
runs ADK's own conversion on it, writing `openai.json` beside the recording: per request,
the messages, the tools and the generation parameters ADK hands LiteLLM.

LiteLLM itself (about 80 MB with its dependencies) is not installed: ADK's conversion
reads only its message constructors, which are dicts (TypedDicts), so a stand-in module
gives those; everything else the conversion does is ADK's code. The model name is the
recorded one behind the `openai/` prefix, as an agent moved to an OpenAI-compatible
server names it. What LiteLLM would decide from its own model table (how a thinking
config maps) is not ADK's conversion and is left out.

Run with the test venv's Python after record.py:

    ~/.cache/adk/python-venv/bin/python tests/conformance/openai_reference.py [case ...]

See docs/adk-conformance.md.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.machinery
import json
import os
import sys
import types as pytypes
from pathlib import Path

HERE = Path(__file__).resolve().parent


def install_litellm_stand_in() -> None:
    """A `litellm` module with the message constructors ADK's conversion calls.

    LiteLLM's are TypedDicts (dicts when built), so `dict` is what they make; the
    model table is asked nothing (no model supports reasoning here).
    """
    module = pytypes.ModuleType("litellm")
    module.__spec__ = importlib.machinery.ModuleSpec("litellm", loader=None)
    for name in (
        "ChatCompletionAssistantMessage",
        "ChatCompletionMessageToolCall",
        "ChatCompletionSystemMessage",
        "ChatCompletionToolMessage",
        "ChatCompletionUserMessage",
        "ChatCompletionToolCallFunctionChunk",
        "Message",
        "OpenAIMessageContent",
    ):
        setattr(module, name, dict)
    for name in ("CustomStreamWrapper", "ModelResponse", "ModelResponseStream", "acompletion", "completion"):
        setattr(module, name, None)
    module.supports_reasoning = lambda **_: False
    sys.modules["litellm"] = module


def schema_classes(case: Path) -> list:
    """The `output_schema`s of the case's agents as ADK holds them (a pydantic class, or
    any other Python object ADK's YAML names: `list[Model]`, `dict[str, int]`, …)."""
    from google.adk.agents import config_agent_utils

    sys.path.insert(0, str(HERE))
    if (case / "agent.py").exists():
        root = importlib.import_module(f"{case.name}.agent").app.root_agent
    else:
        root = config_agent_utils.from_config(str(case / "root_agent.yaml"))
    classes, agents = [], [root]
    while agents:
        agent = agents.pop()
        if getattr(agent, "output_schema", None) is not None:
            classes.append(agent.output_schema)
        agents.extend(agent.sub_agents)
    return classes


def response_schema(sent: dict, classes: list):
    """The output schema a request's `responseSchema` was sent for: the agent's schema
    object (ADK's LlmRequest holds it, and LiteLlm converts it, not Gemini's form of it),
    else the schema as sent."""
    from google.genai import _common, _transformers

    for cls in classes:
        # On a copy: google-genai's conversion writes into a dict schema (its
        # `propertyOrdering`), which LiteLlm, converting the agent's own, never sees.
        gemini = _common.encode_unserializable_types(
            _common.convert_to_dict(_transformers.t_schema(None, copy.deepcopy(cls)))
        )
        if json.loads(json.dumps(gemini)) == sent:
            return cls
    return sent


def llm_request(body: dict, model: str, classes: list):
    """The LlmRequest a recorded Gemini request body was made from."""
    from google.adk.models.llm_request import LlmRequest
    from google.genai import types

    config = dict(body.get("generationConfig") or {})
    schema = config.pop("responseSchema", None)
    if "systemInstruction" in body:
        config["system_instruction"] = "".join(p["text"] for p in body["systemInstruction"]["parts"])
    if "tools" in body:
        config["tools"] = body["tools"]
    # The config's fields google-genai moves to the request's top level, back in place.
    for sent, field in (
        ("safetySettings", "safety_settings"),
        ("toolConfig", "tool_config"),
        ("serviceTier", "service_tier"),
        ("store", "store"),
    ):
        if sent in body:
            config[field] = body[sent]
    request = LlmRequest(
        model=model,
        contents=[types.Content.model_validate(c) for c in body["contents"]],
        config=types.GenerateContentConfig.model_validate(config),
    )
    if schema is not None:
        request.config.response_schema = response_schema(schema, classes)
    return request


def number_calls(body: dict) -> dict:
    """The body with its function calls given ids (`call-1`, … in order) and each
    response the id of the earliest unanswered call of its name.

    ADK keeps the ids of the calls for LiteLLM (OpenAI pairs a result with its call by
    id) but leaves them out of a Gemini request, so the recording has none; the test
    numbers the runner's ids the same way.
    """
    body = json.loads(json.dumps(body))
    open_calls: list[tuple[str, str]] = []
    count = 0
    for content in body["contents"]:
        for part in content.get("parts", []):
            if "functionCall" in part:
                count += 1
                part["functionCall"]["id"] = f"call-{count}"
                open_calls.append((part["functionCall"]["name"], f"call-{count}"))
            elif "functionResponse" in part:
                name = part["functionResponse"]["name"]
                match = next(c for c in open_calls if c[0] == name)
                open_calls.remove(match)
                part["functionResponse"]["id"] = match[1]
    return body


def with_inline_files(exchange: dict) -> dict:
    """The exchange's request body with each inline file ADK's Gemini model sent as a text
    back as it was (record.py notes them as `inline_files`): ADK's LiteLlm gets the files."""
    body = json.loads(json.dumps(exchange["request"]))
    for changed in exchange.get("inline_files", []):
        body["contents"][changed["content"]]["parts"][changed["part"]] = changed["was"]
    return body


async def convert(body: dict, model: str, classes: list) -> dict:
    from google.adk.models import lite_llm

    messages, tools, response_format, generation, tool_choice = await lite_llm._get_completion_inputs(
        llm_request(number_calls(body), model, classes), model
    )
    out = {"messages": messages}
    for key, value in (
        ("tools", tools),
        ("response_format", response_format),
        ("generation", generation),
        ("tool_choice", tool_choice),
    ):
        if value is not None:
            out[key] = value
    return out


def main() -> None:
    install_litellm_stand_in()
    # Loading a case that names a stdio MCP server (which loading does not start).
    os.environ["ADK_ALLOW_CONFIG_STDIO_MCP_SERVERS"] = "1"
    names = sys.argv[1:] or sorted(p.parent.name for p in HERE.glob("*/recording.json"))
    for name in names:
        recording = json.loads((HERE / name / "recording.json").read_text())
        classes = schema_classes(HERE / name)
        requests = []
        try:
            for turn in recording["turns"]:
                for exchange in turn["exchanges"]:
                    gemini_model = exchange["path"].split("/models/")[1].split(":")[0]
                    requests.append(asyncio.run(convert(with_inline_files(exchange), f"openai/{gemini_model}", classes)))
        except Exception as error:  # noqa: BLE001 (whatever ADK's conversion refuses)
            # A case ADK's LiteLlm cannot send (a file it would upload to OpenAI's Files API,
            # a type it refuses) is a case of the Gemini wire only: it has no openai.json.
            (HERE / name / "openai.json").unlink(missing_ok=True)
            print(f"{name}: Gemini only, ADK's LiteLlm cannot send it: {error!r}")
            continue
        reference = {"adk_version": recording["adk_version"], "requests": requests}
        (HERE / name / "openai.json").write_text(json.dumps(reference, indent=1, ensure_ascii=False) + "\n")
        print(f"{name}: {len(requests)} requests")


if __name__ == "__main__":
    main()
