#!/usr/bin/env bash
# Installs what the `adk web` dev-UI test (clients/python/tests/test_adk_web.py) drives,
# idempotently (only what is missing or changed):
#   chromium                                         from apt (when missing): the headless browser
#   ${XDG_CACHE_HOME:-$HOME/.cache}/adk/adk-web-node  playwright-core from npm, npm ci from
#                                                    tests/adk-web/package-lock.json (the library
#                                                    only: it drives the system chromium, so no
#                                                    browser is downloaded)
# Run by scripts/test-clients.sh. The test looks there (or at ADK_WEB_NODE_DIR and
# ADK_CHROMIUM) and fails, naming this script, when something is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "setup-adk-web.sh: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  die "Node.js 20 or newer (with npm) is required"
fi

if ! command -v chromium >/dev/null; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi

cache=${XDG_CACHE_HOME:-$HOME/.cache}/adk
node_dir=$cache/adk-web-node
mkdir -p "$cache" "$node_dir"
(
  # One installer at a time: the cache is shared by every checkout on the machine.
  if command -v flock >/dev/null; then flock 9; fi
  # The stamp is the lock file that was installed: reinstall only when it changes.
  if ! cmp -s tests/adk-web/package-lock.json "$node_dir/.adk-package-lock.json" \
      || [ ! -d "$node_dir/node_modules/playwright-core" ]; then
    echo "installing tests/adk-web/package.json into $node_dir"
    cp tests/adk-web/package.json tests/adk-web/package-lock.json "$node_dir/"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp tests/adk-web/package-lock.json "$node_dir/.adk-package-lock.json"
  fi
) 9>"$cache/adk-web-node.lock"
