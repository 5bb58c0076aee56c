"""Python client of the ADK gRPC services.

    from adk_client import AdkClient

    with AdkClient("localhost:50051") as adk:
        adk.create_session("assistant", "alice", session_id="chat1", state={"user:name": "Alice"})
        for event in adk.run("assistant", "alice", "chat1", "Hello!", streaming=True):
            print(event.partial, event.text)

``AsyncAdkClient`` is the same over ``grpc.aio``. Results are plain dataclasses
(``adk_client.types``): state and tool data are dicts, never ``Struct``/``Value``.
The protobuf messages and gRPC stubs (generated from proto/adk/v1 by generate.py) are
in ``adk_client.v1``, e.g. ``adk_client.v1.event_pb2.Event``.
"""
import importlib.util as _importlib_util

# The stubs are generated, not committed (see generate.py): say how to make them.
if _importlib_util.find_spec(f"{__name__}.v1") is None:
    raise ModuleNotFoundError(
        "adk_client.v1, the stubs generated from proto/, is missing: run "
        "`python clients/python/generate.py` from the repository root (it needs grpcio-tools: "
        "`pip install -r clients/python/requirements-dev.txt`), or `pip install ./clients/python`",
        name=f"{__name__}.v1",
    )

from ._convert import (
    JsonValue,
    dict_to_struct,
    python_to_value,
    struct_to_dict,
    value_map_to_dict,
    value_to_python,
)
from . import errors
from ._calls import MemoryInput, OnBusy
from ._retry import RetryPolicy
from .aio import AsyncAdkClient, AsyncDownload
from .client import AdkClient, Download, event_text, function_calls, state_delta
from .errors import AdkError, from_rpc_error
from .types import (
    AgentInfo,
    App,
    Artifact,
    ArtifactMetadata,
    Blob,
    Content,
    Event,
    FileData,
    FunctionCall,
    FunctionResponse,
    GeneratedMemory,
    IngestResult,
    Memory,
    MemoryFact,
    MemoryRevision,
    MessageInput,
    Part,
    Session,
    ToolInfo,
    function_response,
)

__all__ = [
    "AdkClient",
    "AdkError",
    "AgentInfo",
    "App",
    "Artifact",
    "ArtifactMetadata",
    "AsyncAdkClient",
    "AsyncDownload",
    "Blob",
    "Content",
    "Download",
    "Event",
    "FileData",
    "FunctionCall",
    "FunctionResponse",
    "GeneratedMemory",
    "IngestResult",
    "JsonValue",
    "Memory",
    "MemoryFact",
    "MemoryInput",
    "MemoryRevision",
    "MessageInput",
    "OnBusy",
    "Part",
    "RetryPolicy",
    "Session",
    "ToolInfo",
    "dict_to_struct",
    "errors",
    "event_text",
    "from_rpc_error",
    "function_calls",
    "function_response",
    "python_to_value",
    "state_delta",
    "struct_to_dict",
    "value_map_to_dict",
    "value_to_python",
]
