"""Builds the adk.v1 stubs from the protos while building the package (grpcio-tools comes
from [build-system] requires), so `pip install ./clients/python` and `python -m build` work
on a machine that has never run generate.py.

The protos are the repository's proto/ (../../proto) in a checkout; an sdist carries its own
copy (proto/ next to this file, put there by the sdist command below), so a wheel builds
from the sdist alone.
"""
import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent

_spec = importlib.util.spec_from_file_location("generate", HERE / "generate.py")
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)


class BuildPyWithStubs(build_py):
    """Generates the stubs afresh from the protos, so a wheel never ships stale ones."""

    def run(self):
        generate.generate(generate.default_proto_dir())
        super().run()


class SdistWithProtos(sdist):
    """Copies the protos into the sdist, so it builds without the repository around it."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        source = generate.default_proto_dir() / generate.PACKAGE_DIR
        target = Path(base_dir) / "proto" / generate.PACKAGE_DIR
        target.mkdir(parents=True, exist_ok=True)
        for proto in sorted(source.glob("*.proto")):
            shutil.copyfile(proto, target / proto.name)


# setuptools lists adk_client.v1's files before build_py runs: it must exist by then.
if not (HERE / "src" / "adk_client" / "v1" / "session_pb2.py").exists():
    generate.generate(generate.default_proto_dir())

setup(cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProtos})
