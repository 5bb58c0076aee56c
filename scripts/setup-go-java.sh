#!/usr/bin/env bash
# Sets up what the Go and Java clients (clients/go, clients/java) build with, offline, from
# Debian 12's packages; idempotent: apt-get runs only for what is missing, and the rest is a
# few small files rewritten in ${XDG_CACHE_HOME:-$HOME/.cache}/adk/go.
#
# Go (golang-go 1.19, grpc-go 1.33, google.golang.org/protobuf 1.28): Debian installs Go
# libraries as sources under /usr/share/gocode/src, each module with its go.mod, and no module
# proxy serves them. So this writes ${XDG_CACHE_HOME:-$HOME/.cache}/adk/go/go.mod: clients/go's
# go.mod plus a `replace` of every module in its build graph by its directory there (or, for
# the modules the graph names but nothing compiled here imports, e.g. grpc's xDS dependencies,
# by an empty module beside it). Builds then use it with
#   GOFLAGS='-modfile=${XDG_CACHE_HOME:-$HOME/.cache}/adk/go/go.mod -mod=mod' GOPROXY=off
# and never touch the network; clients/go/go.mod stays the ordinary one for `go mod tidy`
# against the public proxy. Prints those variables, and GOCACHE (the build cache, kept in
# ${XDG_CACHE_HOME:-$HOME/.cache}/adk/go/build), as an `export` line: eval it.
#
# Java (grpc-java 1.41, protobuf-java 3.21, Netty 4.1): jars in /usr/share/java; libgrpc-java
# declares none of the jars it needs (guava, gson, netty, perfmark), so they are listed here.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${XDG_CACHE_HOME:-$HOME/.cache}/adk
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

packages=(
  # Go: the compiler, protoc and its Go plugins, and the libraries as sources.
  golang-go protobuf-compiler protoc-gen-go protoc-gen-go-grpc
  golang-google-grpc-dev golang-google-protobuf-dev golang-google-genproto-dev
  # grpc-go's dependency resolves to golang-github-golang-protobuf-1-3-dev by default, with
  # which the first call panics (nil pointer in proto.makeOneOfMarshaler); 1.5 is the
  # APIv2-backed one.
  golang-github-golang-protobuf-1-5-dev
  # Java: grpc-java's jars and protoc plugin, protobuf-java, the jars grpc-java needs without
  # depending on them, and javax.annotation.Generated (on the generated stubs; not in Java 11+).
  libgrpc-java protobuf-compiler-grpc-java-plugin libprotobuf-java libguava-java
  libgoogle-gson-java libnetty-java libperfmark-java libgoogle-common-protos-java
  libgeronimo-annotation-1.3-spec-java
)
missing=()
# A JDK 11 or newer (Debian 12's default is 17), unless one is on PATH already.
command -v javac >/dev/null || missing+=(default-jdk-headless)
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-go-java.sh: installing ${missing[*]}" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# --- Go: the go.mod that resolves every module from /usr/share/gocode --------------------
gocode=/usr/share/gocode/src
gocache=$cache/go
mkdir -p "$gocache/empty"
# The module paths a go.mod requires (single-line and block forms).
requires() {
  awk '/^require[[:space:]]*\(/ { block = 1; next }
       block && /^\)/ { block = 0; next }
       block && NF && $1 !~ /^\/\// { print $1 }
       /^require[[:space:]]+[^(]/ { print $2 }' "$1"
}
declare -A seen=()
mapfile -t queue < <(requires clients/go/go.mod)
replaces=""
while [ ${#queue[@]} -gt 0 ]; do
  mod=${queue[0]}
  queue=("${queue[@]:1}")
  [ -z "${seen[$mod]:-}" ] || continue
  seen[$mod]=1
  if [ -f "$gocode/$mod/go.mod" ]; then
    replaces+="replace $mod => $gocode/$mod"$'\n'
    mapfile -t -O "${#queue[@]}" queue < <(requires "$gocode/$mod/go.mod")
  else
    # Named by some go.mod but not packaged: an empty module stands in; a build that imports
    # one of its packages fails naming it.
    stub=$gocache/empty/$mod
    mkdir -p "$stub"
    echo "module $mod" >"$stub/go.mod"
    replaces+="replace $mod => $stub"$'\n'
  fi
done
modfile=$gocache/go.mod
# go adds the indirect requirements to the file it builds with: rewrite it only when what it is
# made from changed (kept beside it as go.mod.in).
{ cat clients/go/go.mod; printf '\n// Added by scripts/setup-go-java.sh: Debian'"'"'s sources, offline.\n%s' "$replaces"; } >"$modfile.in.new"
if ! cmp -s "$modfile.in.new" "$modfile.in" || [ ! -f "$modfile" ]; then
  cp "$modfile.in.new" "$modfile"
  mv "$modfile.in.new" "$modfile.in"
  rm -f "$gocache/go.sum"
else
  rm -f "$modfile.in.new"
fi
# The build cache beside it, with the rest of the suite's caches.
echo "export GOFLAGS='-modfile=$modfile -mod=mod' GOPROXY=off GOCACHE=$gocache/build"
