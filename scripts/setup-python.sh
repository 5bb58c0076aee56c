#!/usr/bin/env bash
# Makes the cached Python venv the client tests and the ADK Python tests use, idempotently:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/adk/python-venv, with the pinned
#   clients/python/requirements-dev.txt (grpcio, grpcio-tools, protobuf, pytest, google-adk)
# reinstalled only when that file changes, and the project's worker python/adk_grpc_worker
# reinstalled only when its files change, then generates the Python stubs from proto/.
# Run by scripts/test.sh before `cargo test` (tests/tests/e2e/adk_python.rs runs this venv's
# Python) and by scripts/test-clients.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "setup-python.sh: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 (3.11 or newer) is required"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "python3 is $(python3 -V 2>&1); 3.11 or newer is required (google-adk needs it)"

cache=${XDG_CACHE_HOME:-$HOME/.cache}/adk
venv=$cache/python-venv
reqs=clients/python/requirements-dev.txt
mkdir -p "$cache"
(
  # One installer at a time: the venv is shared by every checkout on the machine.
  if command -v flock >/dev/null; then flock 9; fi
  if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "creating the Python venv $venv"
    python3 -m venv --clear "$venv"
  fi
  # The stamp records what was installed: reinstall only when the pins change.
  if ! cmp -s "$reqs" "$venv/.adk-requirements"; then
    echo "installing $reqs into $venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$reqs"
    cp "$reqs" "$venv/.adk-requirements"
  fi
  # The project's Python worker (python/adk_grpc_worker: the runner serves an ADK agent-config
  # directory's Python tools and callbacks with it), reinstalled when its files change; built
  # from a copy, so no build litter is left in the checkout.
  worker=python/adk_grpc_worker
  stamp=$(find "$worker" -name '*.py' -o -name pyproject.toml | sort | xargs cat | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$venv/.adk-worker" 2>/dev/null)" != "$stamp" ]; then
    echo "installing $worker into $venv"
    copy=$(mktemp -d)
    cp -r "$worker/." "$copy"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation "$copy"
    rm -rf "$copy"
    echo "$stamp" >"$venv/.adk-worker"
  fi
) 9>"$cache/python-venv.lock"
"$venv/bin/python" clients/python/generate.py
