#!/usr/bin/env bash
# Installs the MCP servers the runner's MCP tests talk to, idempotently (only what is missing
# or changed), outside the clone:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/adk/mcp-node   @modelcontextprotocol/server-everything, npm ci
#                                                 from tests/mcp/package-lock.json
#   ${XDG_CACHE_HOME:-$HOME/.cache}/adk/mcp-venv   the `mcp` package (FastMCP), pinned in
#                                                 tests/mcp/requirements.txt
# The tests look there (or at ADK_MCP_NODE_DIR / ADK_MCP_PYTHON) and fail, naming this script,
# when something is missing. Needs Node.js 20+ with npm and Python 3.10+.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "setup-mcp.sh: $*" >&2; exit 1; }
command -v node >/dev/null && command -v npm >/dev/null || die "Node.js 20 or newer (with npm) is required"
command -v python3 >/dev/null || die "python3 (3.10 or newer) is required"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || die "python3 is $(python3 -V 2>&1); mcp needs 3.10 or newer"

cache=${XDG_CACHE_HOME:-$HOME/.cache}/adk
node_dir=$cache/mcp-node
venv=$cache/mcp-venv
mkdir -p "$cache" "$node_dir"
(
  # One installer at a time: the cache is shared by every checkout on the machine.
  if command -v flock >/dev/null; then flock 9; fi
  # The stamp is the lock file that was installed: reinstall only when it changes.
  if ! cmp -s tests/mcp/package-lock.json "$node_dir/.adk-package-lock.json" \
      || [ ! -d "$node_dir/node_modules/@modelcontextprotocol/server-everything" ]; then
    echo "installing tests/mcp/package.json into $node_dir"
    cp tests/mcp/package.json tests/mcp/package-lock.json "$node_dir/"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp tests/mcp/package-lock.json "$node_dir/.adk-package-lock.json"
  fi
  if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "creating the Python venv $venv"
    python3 -m venv --clear "$venv"
  fi
  if ! cmp -s tests/mcp/requirements.txt "$venv/.adk-requirements"; then
    echo "installing tests/mcp/requirements.txt into $venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/mcp/requirements.txt
    cp tests/mcp/requirements.txt "$venv/.adk-requirements"
  fi
) 9>"$cache/mcp.lock"
