#!/usr/bin/env bash
# Build the gpu-tables generator (this folder's go.mod pins go-nvml and go-nvlib) into the user's cache
# and print the binary's path on stdout:
#
#   tools/gpu-tables/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# The binary lands in CACHE_DIR/gpu-tables-<go-nvml version>-<digest of go.mod, go.sum, *.go>/gpu-tables,
# so an edit of the generator or its pins builds anew and an unchanged one is reused without running Go.
# tools/lib/cached-build.sh does the rest, as for every tool built here: the build runs in a temporary sibling
# renamed into place when complete; Go's output goes to CACHE_DIR/logs/gpu-tables-<...>.log; each step, a line
# starting with "[build gpu-tables VERSION]", goes to stderr (a cold build of the mock's cgo packages takes a
# minute or two on 2 cores, a line every GPU_TABLES_HEARTBEAT seconds (20); a cached one prints nothing).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/lib/cached-build.sh
source "$src/../lib/cached-build.sh"
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
version=$(awk '$1 == "github.com/NVIDIA/go-nvml" {print $2}' "$src/go.mod")
[[ -n "$version" ]] || { echo "[build gpu-tables] $src/go.mod requires no github.com/NVIDIA/go-nvml" >&2; exit 2; }
cb_setup "gpu-tables $version" "$cache" "gpu-tables-$version-$(cb_digest "$src" go.mod go.sum '*.go')"
if [[ -x "$cb_dest/gpu-tables" ]]; then
  echo "$cb_dest/gpu-tables"
  exit 0
fi
complete() { [[ -x "$1/gpu-tables" ]]; }

cb_open
cb_require go "install Go (the go line of $src/go.mod)"
cb_say "building $src with $(go env GOVERSION) into $cb_dest (cgo; a cold build takes a minute or two); Go's output in $cb_log"
cb_heartbeat "${GPU_TABLES_HEARTBEAT:-20}"
# -mod=readonly: the checked-in go.mod and go.sum decide every module version, nothing is resolved anew.
cb_run "$src" "" env CGO_ENABLED=1 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$cb_tmp/gpu-tables" .
cb_install complete
echo "$cb_dest/gpu-tables"
