"""The example script runs as documented against adk-server."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import AGENTS_FILE, COMMON, start

HERE = Path(__file__).resolve().parent.parent


def test_quickstart_runs_again_and_again(tmp_path: Path) -> None:
    # The same server every time: each run must tell the whole tour, client tool included.
    server = start("adk-server", ["--agents", str(AGENTS_FILE), *COMMON], tmp_path)
    try:
        for _ in range(2):
            run_quickstart(server.address)
    finally:
        server.stop()


def run_quickstart(target: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE / "src")}
    out = subprocess.run(
        [sys.executable, str(HERE / "examples" / "quickstart.py"), "--target", target],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "assistant: You said: Hello, agent!" in out.stdout
    assert "booker: Booked: 2 nights at Hotel Sakura." in out.stdout
    assert "invalid input -> INVALID_ARGUMENT" in out.stdout
