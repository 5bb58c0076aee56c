"""AdkClient: the ADK gRPC services (sessions, artifacts, runner) behind plain Python calls."""
from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import duration_pb2

from ._convert import JsonValue, dict_to_struct, python_to_value, value_map_to_dict
from .errors import AdkError, from_rpc_error
from .types import Artifact, Session
from .v1 import (
    artifact_pb2,
    artifact_pb2_grpc,
    content_pb2,
    event_pb2,
    runner_pb2,
    runner_pb2_grpc,
    session_pb2,
    session_pb2_grpc,
)

StateDict = Mapping[str, JsonValue]


class AdkClient:
    """A client of ``adk.v1.SessionService``, ``ArtifactService`` and ``AgentRunner``.

    ``AdkClient("localhost:50051")`` talks to ``adk-server``, which serves all three on one
    port. With the services deployed separately, give the artifact and runner addresses
    too. Failed calls raise the exception of their ``ErrorInfo`` reason
    (``adk_client.errors``: ``SessionNotFound``, ``SessionBusy``, ``LimitExceeded``…), each
    a ``grpc.RpcError`` with ``.code()`` and ``.details()``.

    Calls that are safe to repeat are retried on ``UNAVAILABLE`` up to ``retries`` times,
    with exponential backoff (or the server's RetryInfo delay): reads, an append whose
    event has an id, a save with an explicit version. Nothing else is ever retried: a
    create, a run or an append without an event id could happen twice.

    The generated stubs stay available as ``client.sessions``, ``client.artifacts`` and
    ``client.runner`` for every RPC this wrapper does not cover (their errors typed the
    same way, never retried).
    """

    def __init__(
        self,
        target: str = "localhost:50051",
        *,
        artifacts_target: Optional[str] = None,
        runner_target: Optional[str] = None,
        timeout: Optional[float] = 30.0,
        credentials: Optional[grpc.ChannelCredentials] = None,
        options: Sequence[Tuple[str, Any]] = (),
        retries: int = 3,
        backoff: float = 0.1,
        interceptors: Sequence[Any] = (),
    ) -> None:
        """``timeout`` (seconds) bounds each unary call; ``run`` streams have none unless
        given one. ``credentials`` makes the channels TLS; without, they are plaintext."""
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._channels: Dict[str, grpc.Channel] = {}
        self._intercepted: Dict[str, grpc.Channel] = {}

        def channel(addr: str) -> grpc.Channel:
            if addr not in self._channels:
                if credentials is not None:
                    self._channels[addr] = grpc.secure_channel(addr, credentials, options=list(options))
                else:
                    self._channels[addr] = grpc.insecure_channel(addr, options=list(options))
            if addr not in self._intercepted:
                ch = self._channels[addr]
                self._intercepted[addr] = grpc.intercept_channel(ch, *interceptors) if interceptors else ch
            return self._intercepted[addr]

        self.sessions: Any = _Typed(session_pb2_grpc.SessionServiceStub(channel(target)))
        self.artifacts: Any = _Typed(artifact_pb2_grpc.ArtifactServiceStub(channel(artifacts_target or target)))
        self.runner: Any = _Typed(runner_pb2_grpc.AgentRunnerStub(channel(runner_target or target)))

    def _call(self, method: Callable[..., Any], request: Any, *, safe: bool) -> Any:
        """One unary call; a ``safe`` one (repeating it changes nothing) is retried while
        the server says a retry may succeed (UNAVAILABLE)."""
        attempt = 0
        while True:
            try:
                return method(request, timeout=self.timeout)
            except AdkError as err:
                if not (safe and err.code() == grpc.StatusCode.UNAVAILABLE and attempt < self.retries):
                    raise
                time.sleep(min(err.retry_delay or 0.0, 5.0) or self.backoff * (2**attempt))
                attempt += 1

    def wait_for_ready(self, timeout: float = 10.0) -> None:
        """Blocks until every channel is connected; ``grpc.FutureTimeoutError`` otherwise."""
        for ch in self._channels.values():
            grpc.channel_ready_future(ch).result(timeout=timeout)

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()

    def __enter__(self) -> "AdkClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- sessions ---------------------------------------------------------------

    def create_session(
        self,
        app: str,
        user: str,
        *,
        state: Optional[StateDict] = None,
        session_id: Optional[str] = None,
        ttl: Union[timedelta, float, None] = None,
    ) -> Session:
        """Creates a session (``session_id=None``: the server generates a UUID).

        ``state`` keys are split by prefix: ``app:`` and ``user:`` go to the shared
        scopes, ``temp:`` is dropped, the rest is this session's."""
        request = session_pb2.CreateSessionRequest(
            app_name=app, user_id=user, session_id=session_id or "", state=dict_to_struct(state)
        )
        if ttl is not None:
            request.ttl.CopyFrom(_duration(ttl))
        return Session.from_proto(self._call(self.sessions.CreateSession, request, safe=False))

    def get_session(
        self, app: str, user: str, session_id: str, *, num_recent_events: Optional[int] = None
    ) -> Session:
        """Reads a session: merged state and its events, oldest first (``NOT_FOUND`` when missing)."""
        request = session_pb2.GetSessionRequest(app_name=app, user_id=user, session_id=session_id)
        if num_recent_events is not None:
            request.num_recent_events = num_recent_events
        return Session.from_proto(self._call(self.sessions.GetSession, request, safe=True))

    def list_sessions(self, app: str, user: str = "") -> List[Session]:
        """Every session of a user (or of the whole app), merged state, no events."""
        sessions: List[Session] = []
        token = ""
        while True:
            page = self._call(
                self.sessions.ListSessions,
                session_pb2.ListSessionsRequest(app_name=app, user_id=user, page_token=token),
                safe=True,
            )
            sessions.extend(Session.from_proto(s) for s in page.sessions)
            token = page.next_page_token
            if not token:
                return sessions

    def delete_session(self, app: str, user: str, session_id: str) -> None:
        # Deleting is idempotent (a missing session deletes fine): safe to repeat.
        self._call(
            self.sessions.DeleteSession,
            session_pb2.DeleteSessionRequest(app_name=app, user_id=user, session_id=session_id),
            safe=True,
        )

    def append_event(
        self,
        app: str,
        user: str,
        session_id: str,
        *,
        author: str = "user",
        text: Optional[str] = None,
        state_delta: Optional[StateDict] = None,
        event: Optional[event_pb2.Event] = None,
    ) -> event_pb2.Event:
        """Appends an event and returns it as stored (id, timestamp and sequence set).

        Either build it from ``author``, ``text`` (a one-part message; role "user" for the
        user, "model" otherwise) and ``state_delta``, or pass a whole ``event``."""
        if event is None:
            event = event_pb2.Event(author=author)
            if text is not None:
                role = "user" if author == "user" else "model"
                event.content.CopyFrom(content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]))
            for key, value in (state_delta or {}).items():
                event.actions.state_delta[key].CopyFrom(python_to_value(value))
        elif text is not None or state_delta is not None:
            raise TypeError("append_event: pass either event, or text/state_delta")
        request = session_pb2.AppendEventRequest(app_name=app, user_id=user, session_id=session_id, event=event)
        # With an id, a repeated append returns the stored event instead of a second one.
        stored: event_pb2.Event = self._call(self.sessions.AppendEvent, request, safe=bool(event.id))
        return stored

    # ---- artifacts --------------------------------------------------------------

    def save_artifact(
        self,
        app: str,
        user: str,
        session_id: str,
        file_name: str,
        data: Union[bytes, str],
        mime_type: Optional[str] = None,
        *,
        custom_metadata: Optional[StateDict] = None,
        version: Optional[int] = None,
    ) -> int:
        """Saves the next version (or ``version``) and returns its number.

        ``str`` data is stored as a text part (loaded back as ``str``) unless a MIME type
        other than text/plain is given: then it is stored as its UTF-8 bytes. ``bytes``
        are stored with ``mime_type`` (default application/octet-stream). A ``user:``
        file name is visible from every session of the user. Parts larger than one gRPC
        message (4 MiB by default) need the streaming ``UploadArtifact`` RPC."""
        if isinstance(data, str) and mime_type in (None, "text/plain"):
            part = content_pb2.Part(text=data)
        else:
            raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            part = content_pb2.Part(
                inline_data=content_pb2.Blob(mime_type=mime_type or "application/octet-stream", data=raw)
            )
        request = artifact_pb2.SaveArtifactRequest(ref=_ref(app, user, session_id, file_name), part=part)
        if custom_metadata:
            request.custom_metadata.CopyFrom(dict_to_struct(custom_metadata))
        if version is not None:
            request.version = version
        # Versions are immutable: repeating an explicit version cannot store a second one.
        reply: artifact_pb2.SaveArtifactResponse = self._call(
            self.artifacts.SaveArtifact, request, safe=version is not None
        )
        return reply.version

    def load_artifact(
        self, app: str, user: str, session_id: str, file_name: str, version: Optional[int] = None
    ) -> Artifact:
        """Loads the latest version (or ``version``); ``NOT_FOUND`` when missing."""
        request = artifact_pb2.LoadArtifactRequest(ref=_ref(app, user, session_id, file_name))
        if version is not None:
            request.version = version
        return Artifact.from_proto(self._call(self.artifacts.LoadArtifact, request, safe=True))

    def list_artifacts(self, app: str, user: str, session_id: str) -> List[str]:
        """File names visible from a session (its own and the user's ``user:`` ones), sorted."""
        request = artifact_pb2.ListArtifactsRequest(app_name=app, user_id=user, session_id=session_id)
        return list(self._call(self.artifacts.ListArtifacts, request, safe=True).file_names)

    def list_versions(self, app: str, user: str, session_id: str, file_name: str) -> List[int]:
        """An artifact's versions, newest first."""
        request = artifact_pb2.ListVersionsRequest(ref=_ref(app, user, session_id, file_name))
        return list(self._call(self.artifacts.ListVersions, request, safe=True).versions)

    def delete_artifact(
        self, app: str, user: str, session_id: str, file_name: str, version: Optional[int] = None
    ) -> None:
        """Deletes one version, or all of them."""
        request = artifact_pb2.DeleteArtifactRequest(ref=_ref(app, user, session_id, file_name))
        if version is not None:
            request.version = version
        self._call(self.artifacts.DeleteArtifact, request, safe=True)

    # ---- runner -----------------------------------------------------------------

    def run(
        self,
        app: str,
        user: str,
        session_id: str,
        message: Union[str, content_pb2.Content],
        *,
        streaming: bool = False,
        state_delta: Optional[StateDict] = None,
        create_session: bool = False,
        max_llm_calls: int = 0,
        timeout: Optional[float] = None,
    ) -> Generator[event_pb2.Event, None, None]:
        """Runs the app's agent on a message and yields its events as they arrive, the
        first being the message itself as stored (its ``invocation_id`` lets you cancel).

        ``message`` is the user's text, or a whole ``Content`` (e.g. from
        ``function_response()`` to answer a client tool). With ``streaming=True`` (SSE)
        the reply comes as ``partial`` events first, then complete; only complete events
        are stored. Errors raise the typed ``adk_client.errors`` exceptions while iterating
        (``SessionBusy`` when another invocation runs); a run is never retried. Closing the iterator
        early (``.close()``, or dropping it) cancels the call, which stops the invocation."""
        content = (
            message
            if isinstance(message, content_pb2.Content)
            else content_pb2.Content(role="user", parts=[content_pb2.Part(text=message)])
        )
        mode = runner_pb2.STREAMING_MODE_SSE if streaming else runner_pb2.STREAMING_MODE_NONE
        request = runner_pb2.RunRequest(
            app_name=app,
            user_id=user,
            session_id=session_id,
            new_message=content,
            run_config=runner_pb2.RunConfig(streaming_mode=mode, max_llm_calls=max_llm_calls),
            create_session=create_session,
        )
        for key, value in (state_delta or {}).items():
            request.state_delta[key].CopyFrom(python_to_value(value))
        return _cancel_on_close(self.runner.Run(request, timeout=timeout))

    def list_apps(self) -> List[runner_pb2.App]:
        """The apps the runner serves (name and agent tree)."""
        return list(self._call(self.runner.ListApps, runner_pb2.ListAppsRequest(), safe=True).apps)


# ---- helpers ----------------------------------------------------------------------


def event_text(event: event_pb2.Event) -> str:
    """The text of an event's parts, concatenated ("" when it has none)."""
    return "".join(p.text for p in event.content.parts if p.WhichOneof("kind") == "text")


def state_delta(event: event_pb2.Event) -> Dict[str, JsonValue]:
    """An event's ``actions.state_delta`` as a dict."""
    return value_map_to_dict(event.actions.state_delta)


def function_calls(event: event_pb2.Event) -> List[content_pb2.FunctionCall]:
    """The tool calls an event asks for (answer long-running ones with ``function_response``)."""
    return [p.function_call for p in event.content.parts if p.WhichOneof("kind") == "function_call"]


def function_response(name: str, call_id: Optional[str], response: JsonValue) -> content_pb2.Content:
    """A user message answering a tool call; pass it to ``AdkClient.run`` to resume the run."""
    fr = content_pb2.FunctionResponse(name=name, response=python_to_value(response))
    if call_id is not None:
        fr.id = call_id
    return content_pb2.Content(role="user", parts=[content_pb2.Part(function_response=fr)])


def _ref(app: str, user: str, session_id: str, file_name: str) -> artifact_pb2.ArtifactRef:
    return artifact_pb2.ArtifactRef(app_name=app, user_id=user, session_id=session_id, file_name=file_name)


def _duration(ttl: Union[timedelta, float]) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromTimedelta(ttl if isinstance(ttl, timedelta) else timedelta(seconds=ttl))
    return d


def _cancel_on_close(call: Any) -> Generator[event_pb2.Event, None, None]:
    try:
        yield from call
    except grpc.RpcError as err:
        raise from_rpc_error(err) from err
    finally:
        call.cancel()  # a no-op once the stream has ended


class _Typed:
    """A generated stub whose unary calls raise the typed exceptions of ``errors.py``
    (streaming calls return the call as it is; ``_cancel_on_close`` types their errors)."""

    def __init__(self, stub: Any) -> None:
        self._stub = stub

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except grpc.RpcError as err:
                raise from_rpc_error(err) from err

        return call
