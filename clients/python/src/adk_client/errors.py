"""Exceptions typed by the servers' ``google.rpc.ErrorInfo`` reasons.

Every non-OK status of the ADK servers carries ``google.rpc`` details in the
``grpc-status-details-bin`` trailer: an ``ErrorInfo`` (domain ``adk.dev``) whose
``reason`` names the failure stably, a ``BadRequest`` naming the request field for
``INVALID_ARGUMENT``, a ``RetryInfo`` where a retry may succeed. ``from_rpc_error``
turns a ``grpc.RpcError`` into the exception class of its reason, so a program
catches ``SessionNotFound`` or ``SessionBusy`` instead of parsing English::

    try:
        adk.get_session("app", "alice", "s1")
    except SessionNotFound:
        ...

Each class is also a ``grpc.RpcError`` with ``code()`` and ``details()``, so code
catching ``grpc.RpcError`` keeps working.

The reasons are the values of the enum ``adk.v1.ErrorReason`` (``proto/adk/v1/errors.proto``,
whose comments say each one's gRPC code, meaning and whether a retry makes sense), read from
the stubs generated from it; each class names the reason it stands for in ``REASON``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Dict, Iterator, List, Mapping, Optional, Tuple, Type

import grpc
from google.rpc import error_details_pb2, status_pb2

from .v1 import errors_pb2

#: ``ErrorInfo.domain`` of every error the ADK servers send.
ERROR_DOMAIN = "adk.dev"

_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True)
class FieldViolation:
    """One ``BadRequest`` field violation: the request field at fault and why."""

    field: str
    description: str


class AdkError(grpc.RpcError):
    """A failed call. ``reason`` is the stable ``ErrorInfo`` reason (``""`` when the
    server sent none); ``metadata`` its metadata; ``field_violations`` the ``BadRequest``;
    ``retry_delay`` the ``RetryInfo`` delay in seconds, None where a retry would fail
    the same way."""

    #: The ``ErrorInfo.reason`` this class stands for; "" for a class that stands for none.
    REASON: ClassVar[str] = ""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: str = "",
        metadata: Optional[Mapping[str, str]] = None,
        field_violations: Tuple[FieldViolation, ...] = (),
        retry_delay: Optional[float] = None,
    ) -> None:
        super().__init__(f"{code.name} {reason}: {message}" if reason else f"{code.name}: {message}")
        self._code = code
        self.message = message
        self.reason = reason
        self.metadata: Dict[str, str] = dict(metadata or {})
        self.field_violations = field_violations
        self.retry_delay = retry_delay

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self.message

    @property
    def field(self) -> Optional[str]:
        """The request field an ``INVALID_ARGUMENT`` names (first field violation)."""
        return self.field_violations[0].field if self.field_violations else None

    @property
    def retryable(self) -> bool:
        """True when the server said a later retry may succeed (it sent a RetryInfo)."""
        return self.retry_delay is not None


class NotFound(AdkError):
    """``NOT_FOUND``; the subclasses say what is missing."""

    REASON = "NOT_FOUND"


class SessionNotFound(NotFound):
    REASON = "SESSION_NOT_FOUND"


class AppNotFound(NotFound):
    REASON = "APP_NOT_FOUND"


class ArtifactNotFound(NotFound):
    """The artifact, or the asked-for version of it."""

    REASON = "ARTIFACT_NOT_FOUND"


class EventNotFound(NotFound):
    """An event id the request named (a fork's ``up_to_event_id``)."""

    REASON = "EVENT_NOT_FOUND"


class InvocationNotFound(NotFound):
    """An invocation the request named (a rewind)."""

    REASON = "INVOCATION_NOT_FOUND"


class AlreadyExists(AdkError):
    REASON = "ALREADY_EXISTS"


class SessionAlreadyExists(AlreadyExists):
    REASON = "SESSION_ALREADY_EXISTS"


class ArtifactVersionExists(AlreadyExists):
    """Versions are immutable: that explicit version was saved before."""

    REASON = "ARTIFACT_VERSION_EXISTS"


class InvalidArgument(AdkError):
    """Bad input; ``field`` is the request field at fault."""

    REASON = "INVALID_ARGUMENT"


class Aborted(AdkError):
    REASON = "ABORTED"


class PreconditionFailed(Aborted):
    """The expected last event / sequence no longer holds: reload and decide again."""

    REASON = "PRECONDITION_FAILED"


class SessionBusy(Aborted):
    """Another invocation runs on the session; ``retry_delay`` says when to try again."""

    REASON = "SESSION_BUSY"


class LeaseLost(Aborted):
    REASON = "LEASE_LOST"


class RequestIncomplete(Aborted):
    REASON = "REQUEST_INCOMPLETE"


class ResourceExhausted(AdkError):
    REASON = "RESOURCE_EXHAUSTED"


class LimitExceeded(ResourceExhausted):
    """A limit was hit: ``limit`` names it (``max_message_bytes``…), ``value`` is its value."""

    REASON = "LIMIT_EXCEEDED"

    @property
    def limit(self) -> str:
        return self.metadata.get("limit", "")

    @property
    def value(self) -> Optional[int]:
        raw = self.metadata.get("value")
        return int(raw) if raw is not None and raw.isdigit() else None


class RateLimited(ResourceExhausted):
    """The model provider's rate limit; retry after ``retry_delay`` seconds."""

    REASON = "RATE_LIMITED"


class StoreFull(ResourceExhausted):
    REASON = "STORE_FULL"


class Unavailable(AdkError):
    """The store or a peer is unreachable right now; worth retrying."""

    REASON = "UNAVAILABLE"


class DeadlineExceeded(AdkError):
    REASON = "DEADLINE_EXCEEDED"


class FailedPrecondition(AdkError):
    REASON = "FAILED_PRECONDITION"


class Misconfigured(FailedPrecondition):
    """The server's own configuration is wrong."""

    REASON = "MISCONFIGURED"


class Cancelled(AdkError):
    REASON = "CANCELLED"


class PermissionDenied(AdkError):
    REASON = "PERMISSION_DENIED"


class Unauthenticated(AdkError):
    REASON = "UNAUTHENTICATED"


class Unimplemented(AdkError):
    REASON = "UNIMPLEMENTED"


class InternalError(AdkError):
    """The server's failure; ``metadata["error_id"]`` finds its log line."""

    REASON = "INTERNAL"


class AgentError(InternalError):
    REASON = "AGENT_ERROR"


class ToolError(InternalError):
    REASON = "TOOL_ERROR"


class ModelError(InternalError):
    REASON = "MODEL_ERROR"


#: Every reason the servers send: the values of ``adk.v1.ErrorReason`` but its zero value.
KNOWN_REASONS: Tuple[str, ...] = tuple(
    name for name in errors_pb2.ErrorReason.keys() if name != "ERROR_REASON_UNSPECIFIED"
)


def _declared(cls: Type[AdkError]) -> Iterator[Type[AdkError]]:
    """``cls`` and its subclasses that name a reason of their own (not an inherited one)."""
    if "REASON" in vars(cls) and cls.REASON:
        yield cls
    for sub in cls.__subclasses__():
        yield from _declared(sub)


_CLASS_OF_REASON: Dict[str, Type[AdkError]] = {cls.REASON: cls for cls in _declared(AdkError)}

#: The exception class of each reason, in the proto's order. Every reason has one (a test
#: holds this to the proto); a reason a newer server sends that this client does not know
#: gets the class of its gRPC code.
REASONS: Dict[str, Type[AdkError]] = {
    reason: _CLASS_OF_REASON[reason] for reason in KNOWN_REASONS if reason in _CLASS_OF_REASON
}

# A status without (our) details falls back to the class of its code.
_BY_CODE: Dict[grpc.StatusCode, Type[AdkError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
}


def _status_details(err: grpc.RpcError) -> Optional[status_pb2.Status]:
    trailers = getattr(err, "trailing_metadata", None)
    for key, value in (trailers() if callable(trailers) else None) or ():
        if key == _DETAILS_KEY and isinstance(value, bytes):
            return status_pb2.Status.FromString(value)
    return None


def from_rpc_error(err: grpc.RpcError) -> AdkError:
    """The typed exception of a failed call (sync or ``grpc.aio``), from its details."""
    if isinstance(err, AdkError):
        return err
    code_of = getattr(err, "code", None)
    details_of = getattr(err, "details", None)
    code: grpc.StatusCode = code_of() if callable(code_of) else grpc.StatusCode.UNKNOWN
    message: str = (details_of() if callable(details_of) else None) or ""
    reason = ""
    metadata: Dict[str, str] = {}
    violations: List[FieldViolation] = []
    retry_delay: Optional[float] = None
    status = _status_details(err)
    for any_detail in status.details if status is not None else ():
        if any_detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            any_detail.Unpack(info)
            if info.domain == ERROR_DOMAIN:
                reason, metadata = info.reason, dict(info.metadata)
        elif any_detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            any_detail.Unpack(bad)
            violations.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
        elif any_detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            any_detail.Unpack(retry)
            retry_delay = retry.retry_delay.ToTimedelta().total_seconds()
    cls = REASONS.get(reason) or _BY_CODE.get(code, AdkError)
    if cls is AdkError and code == grpc.StatusCode.INTERNAL:
        cls = InternalError
    return cls(
        code,
        message,
        reason=reason,
        metadata=metadata,
        field_violations=tuple(violations),
        retry_delay=retry_delay,
    )
