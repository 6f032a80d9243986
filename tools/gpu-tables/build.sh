#!/usr/bin/env bash
# Build the gpu-tables generator (this folder's go.mod pins go-nvml and go-nvlib) into the user's cache
# and print the binary's path on stdout:
#
#   tools/gpu-tables/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# The binary lands in CACHE_DIR/gpu-tables-<go-nvml version>-<digest of go.mod, go.sum, *.go>/gpu-tables,
# so an edit of the generator or its pins builds anew and an unchanged one is reused without running Go.
# As the lab cluster's build-binaries.sh: the build runs in a temporary sibling renamed into place when
# complete (a present directory is complete); Go's output goes to CACHE_DIR/logs/gpu-tables-<...>.log;
# each step, a line starting with "[build gpu-tables VERSION]", goes to stderr (a cold build of the
# mock's cgo packages takes a minute or two on 2 cores; a cached one prints nothing).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
version=$(awk '$1 == "github.com/NVIDIA/go-nvml" {print $2}' "$src/go.mod")
[[ -n "$version" ]] || { echo "[build gpu-tables] $src/go.mod requires no github.com/NVIDIA/go-nvml" >&2; exit 2; }
digest=$(cd "$src" && find . -maxdepth 1 \( -name go.mod -o -name go.sum -o -name '*.go' \) -print0 | LC_ALL=C sort -z \
  | xargs -0 cat | sha256sum | cut -c1-12)
name=gpu-tables-$version-$digest
dest=$cache/$name
log=$cache/logs/$name.log
if [[ -x "$dest/gpu-tables" ]]; then
  echo "$dest/gpu-tables"
  exit 0
fi

say() { printf '[build gpu-tables %s] %s\n' "$version" "$*" >&2; printf '[build gpu-tables %s] %s\n' "$version" "$*" >> "$log"; }
start=$(date +%s)
elapsed() { local s=$(( $(date +%s) - start )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
mkdir -p "$cache/logs"
: > "$log"
command -v go >/dev/null || { say "go is not on PATH: install Go (the go line of $src/go.mod)"; exit 2; }
tmp=$(mktemp -d "$cache/.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'say "interrupted after $(elapsed); nothing was installed"; exit 130' INT TERM
say "building $src with $(go env GOVERSION) into $dest (cgo; a cold build takes a minute or two); Go's output in $log"
# -mod=readonly: the checked-in go.mod and go.sum decide every module version, nothing is resolved anew.
# A line every GPU_TABLES_HEARTBEAT seconds (20) while Go compiles, so a cold build is seen to progress.
# One-second sleeps: a sleep left when the ticker is killed holds stderr open for a second at most.
( n=0; while sleep 1; do n=$((n + 1)); (( n % ${GPU_TABLES_HEARTBEAT:-20} )) || say "still compiling ($(elapsed))"; done ) >/dev/null & ticker=$!
trap 'kill "$ticker" 2>/dev/null || true; rm -rf "$tmp"' EXIT
if ! (cd "$src" && CGO_ENABLED=1 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp/gpu-tables" .) >> "$log" 2>&1; then
  kill "$ticker" 2>/dev/null || true
  say "failed after $(elapsed); last lines of $log:"
  tail -n 25 "$log" | sed 's/^/  /' >&2
  exit 1
fi
kill "$ticker" 2>/dev/null || true
if ! mv -T "$tmp" "$dest" 2>/dev/null; then
  [[ -x "$dest/gpu-tables" ]] || { say "could not install into $dest"; exit 1; }
  say "a concurrent build installed $dest first; keeping it"
fi
chmod 0755 "$dest"
say "installed in $dest in $(elapsed)"
echo "$dest/gpu-tables"
