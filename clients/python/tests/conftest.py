"""Fixtures that start the real ADK servers (and a real redis-server) on free ports.

Binaries come from $ADK_BIN_DIR, else ${CARGO_TARGET_DIR:-target}/debug of the repository
(build them with `cargo build --workspace --bins`). Every process started here is stopped
at teardown (SIGTERM, then SIGKILL), and on Linux also dies with the test process.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

from adk_client import AdkClient

REPO = Path(__file__).resolve().parents[3]
AGENTS_FILE = REPO / "examples" / "agents.yaml"


def bin_dir() -> Path:
    if os.environ.get("ADK_BIN_DIR"):
        return Path(os.environ["ADK_BIN_DIR"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
    return (target if target.is_absolute() else REPO / target) / "debug"


def binary(name: str) -> Path:
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        pytest.exit(f"{path} not found: run cargo build --workspace --bins first", returncode=2)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Process:
    """A server process on 127.0.0.1:port, its output in a log file."""

    def __init__(self, name: str, argv: List[str], port: int, log_dir: Path,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.name, self.port = name, port
        self.log_path = log_dir / f"{name}-{port}.log"
        self._log = open(self.log_path, "wb")
        # No fixed ports besides --listen: the metrics endpoint (0.0.0.0:9464 by default) is off,
        # through the environment, which binaries without that flag ignore.
        # `env` adds to (or overrides) this process's environment.
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn"), "ADK_METRICS_LISTEN": "off",
               **(env or {})}
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def wait_listening(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                # Still ours: not another process that took the port first.
                time.sleep(0.05)
                if self.proc.poll() is None:
                    return
                continue
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not listen on {self.address} within {timeout}s:\n{self.log()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


def start(name: str, args: List[str], log_dir: Path, port: Optional[int] = None) -> Process:
    """Starts a binary, retrying on another port if the chosen one was taken meanwhile."""
    for attempt in range(3):
        p = port or free_port()
        proc = Process(name, [str(binary(name)), *args, "--listen", f"127.0.0.1:{p}"], p, log_dir)
        try:
            proc.wait_listening()
            return proc
        except RuntimeError:
            proc.stop()
            if attempt == 2 or port:
                raise
    raise AssertionError("unreachable")


def start_redis(log_dir: Path) -> Process:
    redis = shutil.which("redis-server")
    if redis is None:
        pytest.exit("redis-server not found: install it (apt-get install redis-server)", returncode=2)
    for attempt in range(3):
        port = free_port()
        argv = [redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(log_dir), "--daemonize", "no"]
        proc = Process("redis-server", argv, port, log_dir)
        try:
            proc.wait_listening()
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"PING\r\n")
                assert s.recv(64).startswith(b"+PONG"), "redis did not answer PING"
            return proc
        except RuntimeError:
            proc.stop()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class Deployment:
    """Where the three services are: one address (adk-server) or one per service."""

    def __init__(self, name: str, processes: List[Process], sessions: str, artifacts: str, runner: str):
        self.name, self.processes = name, processes
        self.sessions, self.artifacts, self.runner = sessions, artifacts, runner

    def client(self) -> AdkClient:
        client = AdkClient(self.sessions, artifacts_target=self.artifacts, runner_target=self.runner)
        client.wait_for_ready(timeout=10)
        return client

    def stop(self) -> None:
        # Servers before the store they use.
        for proc in reversed(self.processes):
            proc.stop()
        for proc in self.processes:
            assert proc.proc.poll() is not None, f"{proc.name} still running"


COMMON = ["--shutdown-grace-secs", "1"]


@pytest.fixture(scope="session")
def all_in_one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """adk-server: every service on one port, in-memory store, mock-model agents."""
    logs = tmp_path_factory.mktemp("adk-server")
    server = start("adk-server", ["--agents", str(AGENTS_FILE), *COMMON], logs)
    dep = Deployment("adk-server", [server], server.address, server.address, server.address)
    yield dep
    dep.stop()


@pytest.fixture(scope="session")
def split_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """redis-server + adk-session-server + adk-artifact-server + adk-runner-server."""
    logs = tmp_path_factory.mktemp("split")
    procs: List[Process] = []
    dep = Deployment("split+redis", procs, "", "", "")
    try:
        redis = start_redis(logs)
        procs.append(redis)
        store = ["--store-url", f"redis://{redis.address}", *COMMON]
        procs.append(start("adk-session-server", store, logs))
        procs.append(start("adk-artifact-server", store, logs))
        procs.append(start("adk-runner-server", [*store, "--agents", str(AGENTS_FILE)], logs))
        dep.sessions, dep.artifacts, dep.runner = (p.address for p in procs[1:])
        yield dep
    finally:
        dep.stop()


@pytest.fixture(params=["adk-server", "split+redis"])
def deployment(request: pytest.FixtureRequest) -> Deployment:
    return request.getfixturevalue("all_in_one" if request.param == "adk-server" else "split_redis")


@pytest.fixture
def adk(deployment: Deployment) -> Iterator[AdkClient]:
    client = deployment.client()
    yield client
    client.close()
