"""Generates the adk.v1 stubs (generate.py, from ../../proto) when they are missing, so
`pip install .` works from a checkout. grpcio-tools comes from [build-system] requires."""
import importlib.util
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent

if not (HERE / "src" / "adk_client" / "v1" / "session_pb2.py").exists():
    spec = importlib.util.spec_from_file_location("generate", HERE / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    generate.generate()

setup()
