"""Retries with backoff, for calls that are safe to repeat only: reads, an append that
carries its event id (the server stores an id once), a save with an explicit version (a
second save of that version fails rather than adding one), a cancel. Everything else is
tried once. Used by both ``AdkClient`` and ``AsyncAdkClient``: the rule lives here once."""
from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional, TypeVar

import grpc

from .errors import AdkError, from_rpc_error

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` further attempts after the first; the first backoff is ``backoff``
    seconds, doubling up to ``max_backoff``, with full jitter."""

    retries: int = 3
    backoff: float = 0.1
    max_backoff: float = 5.0

    def delay(self, attempt: int, err: Optional[AdkError] = None) -> float:
        """How long to wait before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
        exponential = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        jittered = random.uniform(0, exponential)
        # The server knows best when a busy session or a rate limit frees up.
        if err is not None and err.retry_delay is not None:
            return min(self.max_backoff, max(err.retry_delay, jittered))
        return jittered

    def next_delay(self, safe: bool, attempt: int, err: AdkError) -> Optional[float]:
        """The wait before repeating a call that failed with ``err`` on its ``attempt``-th
        try, or None when it must not be repeated."""
        if not safe or attempt > self.retries or not may_retry(err):
            return None
        return self.delay(attempt, err)


def may_retry(err: AdkError) -> bool:
    """Whether repeating the call later may succeed: the server could not be reached
    (UNAVAILABLE), or said so (a RetryInfo: a busy session, a concurrency quota)."""
    return err.code() == grpc.StatusCode.UNAVAILABLE or err.retryable


def call_with_retry(policy: RetryPolicy, safe: bool, call: Callable[[], T]) -> T:
    """Runs ``call``, repeating it while ``safe`` and the failure may pass. Errors come out
    typed (``adk_client.errors``)."""
    attempt = 1
    while True:
        try:
            return call()
        except grpc.RpcError as raw:
            err = from_rpc_error(raw)
            delay = policy.next_delay(safe, attempt, err)
            if delay is None:
                raise err from (None if err is raw else raw)
            # Backoff between retries of a safe call (the server's RetryInfo or exponential), not a wait for a condition.
            time.sleep(delay)
            attempt += 1


async def call_with_retry_async(policy: RetryPolicy, safe: bool, call: Callable[[], Awaitable[T]]) -> T:
    """``call_with_retry`` for ``grpc.aio`` calls."""
    attempt = 1
    while True:
        try:
            return await call()
        except grpc.RpcError as raw:
            err = from_rpc_error(raw)
            delay = policy.next_delay(safe, attempt, err)
            if delay is None:
                raise err from (None if err is raw else raw)
            # Backoff between retries of a safe call, as in the sync client above.
            await asyncio.sleep(delay)
            attempt += 1
