"""The worker: resolves the directory's code references, then serves them over HTTP."""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import inspect
import json
import os
import sys
import threading
import traceback
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, get_args, get_origin

from google.adk.agents import config_agent_utils
from google.adk.agents.base_agent import BaseAgent
from google.adk.agents.common_configs import CodeConfig
from google.adk.agents.context import Context
from google.adk.agents.invocation_context import InvocationContext
from google.adk.artifacts.base_artifact_service import BaseArtifactService
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.sessions import InMemorySessionService, Session
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.set_model_response_tool import SetModelResponseTool
from google.adk.tools.tool_configs import ToolArgsConfig
from google.adk.utils import _schema_utils as schema_utils
from google.adk.utils._schema_utils import lowercase_schema_types
from google.genai import _common as genai_common
from google.genai import _transformers as genai_transformers
from google.genai import types
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

# The hook points (docs/hooks.md) and the keyword names ADK calls each callback with.
POINTS = (
    "before_agent",
    "after_agent",
    "before_model",
    "after_model",
    "on_model_error",
    "before_tool",
    "after_tool",
    "on_tool_error",
)


class UnservedTool(BaseTool):
    """The `tool` a tool callback is given for a tool this worker does not serve: its name."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, description="")


class SessionReads:
    """The runner's reads of the call's session (the context's `reads`: a loopback URL and
    a token valid while the call runs, docs/adk-python.md): what ADK's contexts read from
    their artifact and memory services. Versions are the suite's, from 1."""

    TIMEOUT_SECS = 30

    def __init__(self, sent: dict[str, Any] | None) -> None:
        self.sent = sent

    async def read(self, what: str, body: dict[str, Any]) -> dict[str, Any]:
        if not self.sent:
            raise RuntimeError(f"{what}: the runner sent no session reads with this call")
        return await asyncio.to_thread(self.post, what, body)

    def post(self, what: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.sent is not None
        request = urllib.request.Request(
            f"{self.sent['url']}/{what}",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "authorization": f"Bearer {self.sent['token']}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.TIMEOUT_SECS) as reply:  # noqa: S310 (the runner's loopback URL)
                return json.loads(reply.read())
        except urllib.error.HTTPError as e:
            error = json.loads(e.read() or b"{}").get("error", e.reason)
            raise RuntimeError(f"{what}: {error}") from None


class CallArtifacts(BaseArtifactService):
    """The artifacts of one call: what the code saves goes back to the runner, which
    saves it in the session (and records the version the store gives); what it loads
    and lists is the session's, read from the runner, with what it saved in this call."""

    def __init__(self, reads: SessionReads) -> None:
        self.reads = reads
        self.saved: dict[str, types.Part] = {}
        self.versions: dict[str, int] = {}

    async def save_artifact(  # type: ignore[override]  # the ids are the runner's to fill in
        self, *, filename: str, artifact: types.Part | dict[str, Any], **_: Any
    ) -> int:
        self.saved[filename] = artifact if isinstance(artifact, types.Part) else types.Part.model_validate(artifact)
        # ADK's stores number versions from 0; the runner's version is recorded on the event.
        self.versions[filename] = self.versions.get(filename, -1) + 1
        return self.versions[filename]

    async def load_artifact(self, *, filename: str, version: int | None = None, **_: Any) -> types.Part | None:
        if version is None and filename in self.saved:
            return self.saved[filename]
        # ADK counts versions from 0, the suite from 1 (as the ADK plug-in maps them).
        sent = {"filename": filename, "version": None if version is None else version + 1}
        part = (await self.reads.read("load_artifact", sent))["part"]
        return None if part is None else types.Part.model_validate(part)

    async def list_artifact_keys(self, **_: Any) -> list[str]:
        listed = (await self.reads.read("list_artifacts", {}))["filenames"]
        return sorted({*listed, *self.saved})

    async def delete_artifact(self, **_: Any) -> None:
        raise NotImplementedError("delete_artifact is not offered to a Python tool served by adk-grpc-worker")

    async def list_versions(self, *, filename: str, **_: Any) -> list[int]:
        return list(range(self.versions.get(filename, -1) + 1))

    async def list_artifact_versions(self, **_: Any) -> list[Any]:
        return []

    async def get_artifact_version(self, **_: Any) -> Any:
        return None


class CallMemory(BaseMemoryService):
    """The user's memories, searched by the runner's memory service for the call's app
    and user (the ids the code passes are ADK's context's own, the call's)."""

    def __init__(self, reads: SessionReads) -> None:
        self.reads = reads

    async def add_session_to_memory(self, session: Session) -> None:
        raise NotImplementedError("adding to memory is not offered to a Python tool served by adk-grpc-worker")

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        found = await self.reads.read("search_memory", {"query": query})
        return SearchMemoryResponse(memories=[MemoryEntry.model_validate(m) for m in found["memories"]])


class Placeholder(BaseAgent):
    """The agent a context names (ADK's contexts read `agent.name`); it never runs here."""


def make_context(sent: dict[str, Any], artifacts: CallArtifacts, user_content: Any = None) -> Context:
    """ADK's Context over the runner's `context` (the tool context's in half), with the
    user's message when the runner sends it (`before_agent`), which callbacks read as
    `callback_context.user_content`, and the session's artifacts and the user's memories
    read through the call's `reads`."""
    session = Session(
        id=sent.get("session_id", ""),
        app_name=sent.get("app_name", ""),
        user_id=sent.get("user_id", ""),
        state=dict(sent.get("state") or {}),
    )
    invocation = InvocationContext(
        session_service=InMemorySessionService(),
        artifact_service=artifacts,
        memory_service=CallMemory(artifacts.reads),
        invocation_id=sent.get("invocation_id", ""),
        agent=Placeholder(name=sent.get("agent_name") or "agent"),
        session=session,
        user_content=types.Content.model_validate(user_content) if user_content else None,
    )
    return Context(invocation, function_call_id=sent.get("function_call_id"))


def jsonable(value: Any) -> Any:
    return to_jsonable_python(value, by_alias=False, exclude_none=True)


def part_json(part: types.Part) -> dict[str, Any]:
    """A saved artifact as the runner reads a part: text or inline data in base64."""
    if part.inline_data is not None:
        data = base64.b64encode(part.inline_data.data or b"").decode()
        return {"inline_data": {"mime_type": part.inline_data.mime_type or "", "data": data}}
    return {"text": part.text or ""}


def actions_json(context: Context, artifacts: CallArtifacts, tool_point: bool) -> dict[str, Any]:
    """The context's out half: what the code wrote, as the runner applies it."""
    actions = context.actions
    out: dict[str, Any] = {}
    if actions.state_delta:
        out["state_delta"] = jsonable(actions.state_delta)
    if artifacts.saved:
        out["artifacts"] = {name: part_json(part) for name, part in artifacts.saved.items()}
    if actions.transfer_to_agent and tool_point:
        out["transfer_to_agent"] = actions.transfer_to_agent
    if actions.escalate:
        out["escalate"] = True
    if actions.skip_summarization:
        out["skip_summarization"] = True
    return out


def content_json(content: types.Content | str) -> Any:
    if isinstance(content, str):
        return content
    return content.model_dump(mode="json", exclude_none=True)


def llm_request(sent: dict[str, Any]) -> LlmRequest:
    """The hook's `request` as ADK's LlmRequest."""
    declarations = [
        types.FunctionDeclaration(
            name=tool.get("name"),
            description=tool.get("description"),
            parameters_json_schema=tool.get("parameters"),
            # The result's schema (an MCP tool's outputSchema), which ADK's callbacks see.
            response_json_schema=tool.get("response"),
        )
        for tool in sent.get("tools") or []
    ]
    config = types.GenerateContentConfig(
        system_instruction=sent.get("system_instruction"),
        tools=[types.Tool(function_declarations=declarations)] if declarations else None,
    )
    return LlmRequest(
        model=sent.get("model"),
        contents=[types.Content.model_validate(c) for c in sent.get("contents") or []],
        config=config,
    )


def request_view(request: LlmRequest) -> dict[str, Any]:
    """The request's contents and system instruction as the hook protocol has them."""
    instruction = request.config.system_instruction if request.config else None
    if not isinstance(instruction, (str, type(None))):
        instruction = "".join(p.text or "" for p in getattr(instruction, "parts", None) or [])
    return {"contents": [content_json(c) for c in request.contents], "system_instruction": instruction}


def request_changes(before: dict[str, Any], request: LlmRequest) -> dict[str, Any]:
    """What a callback changed of the request in place (ADK's callbacks edit it so),
    compared with the request as it was handed over (`before`, from request_view)."""
    after = request_view(request)
    return {key: value for key, value in after.items() if value != before[key]}


def response_json(response: LlmResponse) -> dict[str, Any]:
    out: dict[str, Any] = {"content": content_json(response.content or types.Content(role="model", parts=[]))}
    if response.finish_reason is not None:
        out["finish_reason"] = response.finish_reason.value
    return out


def llm_response(sent: dict[str, Any]) -> LlmResponse:
    content = sent.get("content")
    return LlmResponse(
        content=types.Content.model_validate(content) if content else None,
        finish_reason=sent.get("finish_reason"),
    )


def error_of(sent: dict[str, Any]) -> Exception:
    error = sent.get("error") or {}
    return RuntimeError(f"{error.get('code', 'UNKNOWN')}: {error.get('message', '')}")


async def settle(value: Any) -> Any:
    """A callback's or tool's answer, awaited when it is a coroutine (ADK takes both)."""
    return await value if inspect.isawaitable(value) else value


class Worker:
    """The directory's tools and callbacks, resolved."""

    def __init__(self) -> None:
        self.tools: dict[str, BaseTool] = {}
        self.callbacks: dict[str, Any] = {}
        # The output_schema classes (and lists of one) ADK validates, and the other types a
        # task agent's `finish_task` validates (any type pydantic's TypeAdapter takes),
        # served at `/validate/<ref>`.
        self.validated_schemas: dict[str, Any] = {}
        # Their TypeAdapters (but a class's, whose own methods validate), each built at its
        # schema's first `/validate`, not at every one: building one compiles pydantic's core schema.
        self.type_adapters: dict[str, TypeAdapter[Any]] = {}
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def resolve_tools(self, entry: dict[str, Any] | str) -> list[dict[str, Any]] | dict[str, Any]:
        """A `tools:` entry as ADK's loader resolves it (`_resolve_tools`), then as ADK's
        agent lists its tools (a toolset's through `get_tools_with_prefix`); each tool's
        declaration as ADK sends it, served at `/tool/<key>/<name>`. An entry is
        `{"key", "name", "args"?, "config_path"?}` (or the bare reference)."""
        if isinstance(entry, str):
            entry = {"key": entry, "name": entry}
        key, ref, args = entry["key"], entry["name"], entry.get("args")
        try:
            made = self.run(make_tools(ref, args, entry.get("config_path") or ""))
        except Exception as e:  # noqa: BLE001 (the message goes to the runner's error)
            return {"error": cause(e)}
        declarations = []
        for tool in made:
            declaration = tool._get_declaration()  # noqa: SLF001 (ADK's own declaration, as it sends it)
            if declaration is None:
                return {"error": f"{ref}: ADK makes no function declaration for its tool {tool.name!r}"}
            self.tools[f"{key}/{tool.name}"] = tool
            dumped = declaration.model_dump(mode="json", exclude_none=True)
            declarations.append(
                {
                    "name": tool.name,
                    "description": dumped.get("description", ""),
                    "parameters": dumped.get("parameters_json_schema", dumped.get("parameters")),
                    "long_running": bool(tool.is_long_running),
                }
            )
        return declarations

    def resolve_schema(self, ref: str) -> dict[str, Any]:
        """An `output_schema` reference as ADK's model clients send it. ADK's YAML can name
        any Python object its `LlmAgent` takes (google-genai's `SchemaUnion`): a pydantic
        class, a type such as `list[Model]`, `dict[str, int]` or `str`, a JSON Schema dict,
        a `types.Schema`. Reported: google-genai's `responseSchema` for Gemini, ADK's
        LiteLlm `response_format` for an OpenAI-compatible model (None where LiteLlm sends
        none), the `set_model_response` declaration ADK makes of it for an agent with tools
        and the argument carrying the value there (None: the arguments are the value), and
        its JSON Schema, which checks the replies where ADK validates them (a pydantic class
        or a list of one; ADK takes any other value as the JSON parses)."""
        try:
            obj = config_agent_utils.resolve_code_reference(CodeConfig(name=ref))
            # google-genai's own conversion, then its request serialisation (snake_case
            # `property_ordering`, upper-case types), so the body is the one it sends; on a
            # copy, as it writes into a dict schema, which ADK's LiteLlm never converts.
            gemini = genai_common.convert_to_dict(genai_transformers.t_schema(None, copy.deepcopy(obj)))
            tool = SetModelResponseTool(obj)
            declaration = tool._get_declaration()  # noqa: SLF001 (ADK's own declaration)
        except Exception as e:  # noqa: BLE001 (the message goes to the runner's error)
            return {"error": f"{ref} is no schema ADK's LlmAgent can send: {cause(e)}"}
        if gemini is None:
            return {"error": f"{ref} is empty: ADK sends no schema for it"}
        dumped = declaration.model_dump(mode="json", exclude_none=True) if declaration else {}
        pydantic_class = schema_utils.is_basemodel_schema(obj)
        list_of_class = schema_utils.is_list_of_basemodel(obj)
        # As ADK's set_model_response takes it: a class's fields as the arguments, a list
        # of a class as `items`, anything else as `response`.
        call_argument = None if pydantic_class else "items" if list_of_class else "response"
        # A type (not a JSON Schema dict nor a `types.Schema`): ADK's `finish_task` validates
        # a task's output of it with its TypeAdapter.
        type_adapter = isinstance(obj, type) or get_origin(obj) is not None
        if pydantic_class or list_of_class or type_adapter:
            self.validated_schemas[ref] = obj
            self.type_adapters.pop(ref, None)
        return {
            "json_schema": with_factory_defaults(json_schema_of(obj), obj),
            "validated": pydantic_class or list_of_class,
            "type_adapter": pydantic_class or list_of_class or type_adapter,
            "pydantic_class": pydantic_class,
            "gemini": json.loads(json.dumps(genai_common.encode_unserializable_types(gemini))),
            "openai": litellm_response_format(obj),
            "set_model_response": dumped.get("parameters_json_schema", dumped.get("parameters")),
            "set_model_response_argument": call_argument,
        }

    def validate(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        """A value of an `output_schema` class (or a list of one) as ADK validates and
        dumps it: a reply's text (`{"json"}`) as ADK's `validate_schema` takes it, a
        `set_model_response` value (`{"value"}`) as its SetModelResponseTool does; a value
        of any other type as ADK's `finish_task` does (its TypeAdapter's `validate_python`,
        then `dump_python(mode="json")`). The dump, or pydantic's error as ADK writes it
        (`str` of the ValidationError); any other error of the class's code is the
        runner's to report."""
        schema = self.validated_schemas[ref]
        if not (schema_utils.is_basemodel_schema(schema) or schema_utils.is_list_of_basemodel(schema)):
            adapter = self.type_adapter(ref)
            try:
                validated = adapter.validate_json(body["json"]) if "json" in body else adapter.validate_python(body.get("value"))
            except ValidationError as e:
                return {"error": str(e)}
            return {"value": jsonable(adapter.dump_python(validated, mode="json"))}
        # A class's own methods, as ADK calls them; a list's TypeAdapter.
        adapter = schema if schema_utils.is_basemodel_schema(schema) else self.type_adapter(ref)
        from_json = adapter.model_validate_json if adapter is schema else adapter.validate_json
        from_python = adapter.model_validate if adapter is schema else adapter.validate_python
        try:
            validated = from_json(body["json"]) if "json" in body else from_python(body.get("value"))
        except ValidationError as e:
            return {"error": str(e)}
        items = validated if isinstance(validated, list) else [validated]
        dumped = [item.model_dump(exclude_none=True) for item in items]
        return {"value": jsonable(dumped if isinstance(validated, list) else dumped[0])}

    def type_adapter(self, ref: str) -> TypeAdapter[Any]:
        """The TypeAdapter of the validated schema `ref`, built once."""
        adapter = self.type_adapters.get(ref)
        if adapter is None:
            adapter = self.type_adapters.setdefault(ref, TypeAdapter(self.validated_schemas[ref]))
        return adapter

    def resolve_callback(self, ref: str) -> dict[str, Any]:
        try:
            obj = config_agent_utils.resolve_code_reference(CodeConfig(name=ref))
        except Exception as e:  # noqa: BLE001
            return {"error": cause(e)}
        if not callable(obj):
            return {"error": f"{ref} is not a function"}
        self.callbacks[ref] = obj
        return {}

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def call_tool(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        tool = self.tools[ref]
        sent = body.get("context") or {}
        artifacts = CallArtifacts(SessionReads(sent.get("reads")))
        context = make_context(sent, artifacts)
        result = await tool.run_async(args=body.get("args") or {}, tool_context=context)
        actions = actions_json(context, artifacts, tool_point=True)
        if result is None and tool.is_long_running:
            # No response yet: the runner pauses the turn, as ADK does. ADK makes no
            # response event then, so what the tool wrote to its context (ADK's
            # get_user_choice sets skip_summarization) is dropped with it.
            return {"result": None}
        # The function response is a dict, as ADK makes it.
        if not isinstance(result, dict):
            result = {"result": result}
        return {"result": jsonable(result), "actions": actions}

    def tool_object(self, name: str) -> BaseTool:
        for tool in self.tools.values():
            if tool.name == name:
                return tool
        return UnservedTool(name)

    async def call_callback(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        callback = self.callbacks[ref]
        point = body.get("point")
        sent = body.get("context") or {}
        artifacts = CallArtifacts(SessionReads(sent.get("reads")))
        context = make_context(sent, artifacts, body.get("user_content"))
        reply: dict[str, Any] = {}
        answer: Any
        if point in ("before_agent", "after_agent"):
            answer = await settle(callback(callback_context=context))
            if answer is not None:
                reply["content"] = content_json(answer)
        elif point in ("before_model", "on_model_error"):
            request = llm_request(body.get("request") or {})
            before = request_view(request)
            if point == "before_model":
                answer = await settle(callback(callback_context=context, llm_request=request))
                if changes := request_changes(before, request):
                    reply["request"] = changes
            else:
                answer = await settle(callback(callback_context=context, llm_request=request, error=error_of(body)))
            if answer is not None:
                reply["response"] = response_json(answer)
        elif point == "after_model":
            sent = body.get("response") or {}
            response = llm_response(sent)
            before = response_json(response)
            answer = await settle(callback(callback_context=context, llm_response=response))
            if answer is None and response_json(response) != before:
                answer = response  # changed in place, as ADK lets a callback do
            if answer is not None:
                reply["response"] = response_json(answer)
        else:
            tool = self.tool_object(body.get("tool", ""))
            args = body.get("args") or {}
            sent_args = copy.deepcopy(args)
            if point == "before_tool":
                answer = await settle(callback(tool=tool, args=args, tool_context=context))
            elif point == "after_tool":
                tool_response = body.get("response")
                sent_response = copy.deepcopy(tool_response)
                answer = await settle(callback(tool=tool, args=args, tool_context=context, tool_response=tool_response))
                if answer is None and tool_response != sent_response:
                    answer = tool_response  # changed in place, as ADK lets a callback do
            else:
                answer = await settle(callback(tool=tool, args=args, tool_context=context, error=error_of(body)))
            if point == "before_tool" and args != sent_args:
                reply["args"] = jsonable(args)
            if answer is not None:
                reply["result"] = jsonable(answer)
        actions = actions_json(context, artifacts, tool_point=point in ("before_tool", "after_tool", "on_tool_error"))
        if actions:
            reply["actions"] = actions
        return reply


async def make_tools(ref: str, args: dict[str, Any] | None, config_path: str) -> list[BaseTool]:
    """The tools of one `tools:` entry, made as ADK makes them: the reference resolved as
    its loader does (an instance as it is, a tool or toolset class `from_config(args)`,
    a function called with `args` to make the tool, else a function tool), then listed
    as its agent lists them (a toolset's tools with its prefix, listed once, without a
    session: ADK lists them per request, with its context)."""
    obj = config_agent_utils.resolve_code_reference(CodeConfig(name=ref))
    config = ToolArgsConfig.model_validate(args or {})
    if isinstance(obj, (BaseTool, BaseToolset)):
        made = obj
    elif inspect.isclass(obj) and issubclass(obj, (BaseTool, BaseToolset)):
        made = obj.from_config(config, config_path)
    elif callable(obj) and not inspect.isclass(obj):
        made = obj(config) if args else obj
    else:
        raise ValueError(f"{ref} is neither a function, a tool nor a toolset")
    if isinstance(made, BaseToolset):
        return list(await made.get_tools_with_prefix(None))
    if isinstance(made, BaseTool):
        return [made]
    if callable(made) and not inspect.isclass(made):
        return [FunctionTool(made)]
    raise ValueError(f"{ref} made {type(made).__name__}, which is neither a tool nor a toolset")


def with_factory_defaults(schema: dict[str, Any], obj: Any) -> dict[str, Any]:
    """`schema` with a `default` for each field of a class (the schema's own, a list's
    item class, the classes nested in them) whose default is a `default_factory`: pydantic's
    JSON Schema leaves those out, and the runner fills a field left out of a reply from its
    `default`, as pydantic fills it from the factory. The value is the factory's as
    pydantic dumps it."""
    root = obj if schema_utils.is_basemodel_schema(obj) else schema_utils.get_list_inner_type(obj)
    if root is None:
        return schema
    seen: set[type] = set()
    pending = [root]
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        node = schema if cls is obj else schema.get("$defs", {}).get(cls.__name__)
        for name, field in cls.model_fields.items():
            pending.extend(classes_in(field.annotation))
            properties = (node or {}).get("properties", {})
            key = field.alias or name
            if field.default_factory is not None and key in properties:
                value = field.get_default(call_default_factory=True)
                properties[key]["default"] = TypeAdapter(field.annotation).dump_python(value, mode="json")
    return schema


def classes_in(annotation: Any) -> list[type]:
    """The pydantic classes an annotation names (`Stop`, `list[Stop]`, `Stop | None`, ...)."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    return [cls for arg in get_args(annotation) for cls in classes_in(arg)]


def json_schema_of(schema: Any) -> dict[str, Any]:
    """The JSON Schema of an `output_schema` object: a dict as it is, a `types.Schema` as
    google-genai reads it, a type as pydantic writes it (ADK's `schema_to_json_schema`)."""
    if isinstance(schema, types.Schema):
        return schema.json_schema.model_dump(mode="json", by_alias=True, exclude_none=True)
    return schema_utils.schema_to_json_schema(schema)


def litellm_response_format(schema: Any) -> dict[str, Any] | None:
    """The `response_format` ADK's LiteLlm sends an OpenAI-compatible model for an
    `output_schema` (its `_to_litellm_response_format`, which cannot be imported without
    LiteLLM): a JSON Schema dict (as it is when it is already a `response_format`), a
    pydantic class or a `types.Schema`, with lower-case types, made strict (every object
    closed and all its properties required, sorted; a `$ref` alone), named after the class
    or the schema's title, else `response`. Any other object (`list[Model]`, `str`, …)
    gets none: LiteLlm sends the request without one."""
    name = "response"
    if isinstance(schema, dict):
        if str(schema.get("type", "")).lower() in ("json_object", "json_schema"):
            return schema
        schema = copy.deepcopy(schema)
        name = str(schema.get("title", name))
    elif inspect.isclass(schema) and issubclass(schema, BaseModel):
        name = schema.__name__
        schema = schema.model_json_schema()
    elif isinstance(schema, types.Schema):
        schema = schema.model_dump(by_alias=True, exclude_none=True, mode="json")
        name = str(schema.get("title", name))
    else:
        return None
    lowercase_schema_types(schema)

    def strict(node: Any) -> None:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            for key in [k for k in node if k != "$ref"]:
                del node[key]
            return
        if node.get("type") == "object" and "properties" in node:
            node["additionalProperties"] = False
            node["required"] = sorted(node["properties"])
        for child in [*node.get("$defs", {}).values(), *node.get("properties", {}).values()]:
            strict(child)
        for key in ("anyOf", "oneOf", "allOf"):
            for child in node.get(key, []):
                strict(child)
        if isinstance(node.get("items"), dict):
            strict(node["items"])

    strict(schema)
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def cause(error: BaseException) -> str:
    """An import error's message with its cause (ADK wraps ModuleNotFoundError in ValueError)."""
    message = str(error)
    if error.__cause__ is not None:
        message += f" ({type(error.__cause__).__name__}: {error.__cause__})"
    return message


def serve(worker: Worker, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"null") or {}
            kind, _, ref = self.path.lstrip("/").partition("/")
            try:
                if kind == "tool" and ref in worker.tools:
                    reply = worker.run(worker.call_tool(ref, body))
                elif kind == "callback" and ref in worker.callbacks:
                    reply = worker.run(worker.call_callback(ref, body))
                elif kind == "validate" and ref in worker.validated_schemas:
                    reply = worker.validate(ref, body)
                else:
                    return self.answer(404, {"error": f"no tool, callback or validation at {self.path}"})
            except Exception as e:  # noqa: BLE001 (the runner reads it as the tool's or hook's error)
                traceback.print_exc(file=sys.stderr)
                return self.answer(500, {"error": f"{type(e).__name__}: {e}"})
            self.answer(200, reply)

        def answer(self, status: int, reply: Any) -> None:
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(prog="adk_grpc_worker", description=__doc__)
    parser.add_argument("--app-dir", required=True, help="the agent-config directory (its parent is put on sys.path)")
    parser.add_argument(
        "--refs",
        required=True,
        help='JSON: {"tools": [{"key", "name", "args"?, "config_path"?} or ref, ...], "callbacks": [ref, ...], '
        '"schemas": [ref, ...]}',
    )
    parser.add_argument("--port", type=int, default=0, help="0: a free port, reported on stdout")
    parser.add_argument("--host", default="127.0.0.1")
    cli = parser.parse_args()
    refs = json.loads(cli.refs)
    # As `adk web` / `adk run`: the directory holding the app is on sys.path, so
    # `my_app.tools.get_weather` imports my_app/tools.py.
    sys.path.insert(0, os.path.dirname(os.path.abspath(cli.app_dir)))
    worker = Worker()
    tools = {
        entry if isinstance(entry, str) else entry["key"]: worker.resolve_tools(entry) for entry in refs.get("tools", [])
    }
    callbacks = {ref: worker.resolve_callback(ref) for ref in refs.get("callbacks", [])}
    schemas = {ref: worker.resolve_schema(ref) for ref in refs.get("schemas", [])}
    server = serve(worker, cli.host, cli.port)
    report = {"port": server.server_address[1], "tools": tools, "callbacks": callbacks, "schemas": schemas}
    print(json.dumps(report), flush=True)
    # The runner holds our stdin: when it goes away, so do we.
    sys.stdin.buffer.read()
    os._exit(0)
