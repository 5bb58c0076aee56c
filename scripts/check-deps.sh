#!/usr/bin/env bash
# cargo deny (deny.toml): the licenses, bans (no OpenSSL, no aws-lc; wildcards),
# sources (crates.io only) and, when RustSec's advisory database can be fetched,
# advisories (vulnerabilities, unsound and yanked crates) of the whole dependency tree.
#
# cargo-deny is installed once (`cargo install --locked`, a pinned version) into a cache
# outside the clone, $HOME/.cache/adk/cargo-tools.
#
# The advisory database is a git repository on GitHub. Where GitHub cannot be reached
# (a build network that allows only crates.io, like this project's CI machine) the
# advisories check cannot run: it is then left out, saying so loudly, and the other
# three still run. Anywhere else all four run.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.20.2
tools=$HOME/.cache/adk/cargo-tools
deny=$tools/bin/cargo-deny
if ! "$deny" --version 2>/dev/null | grep -qx "cargo-deny $version"; then
  cargo install --locked --quiet --root "$tools" "cargo-deny@$version"
fi

if "$deny" fetch db >/dev/null 2>&1; then
  "$deny" --locked check licenses bans sources advisories
else
  echo "check-deps.sh: WARNING: the RustSec advisory database (github.com/rustsec/advisory-db) cannot be fetched from here; checking licenses, bans and sources only" >&2
  "$deny" --locked check licenses bans sources
fi
