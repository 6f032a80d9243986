#!/usr/bin/env bash
# Build NVIDIA's unmodified nvidia-mig-parted (github.com/NVIDIA/mig-parted at the version this folder's go.mod
# pins, with its own go-nvml) into the user's cache and print the directory holding it on stdout:
#
#   tools/mig-parted/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# The operator lab's stand-in runs it over a node's mock libnvidia-ml.so.1 (tools/nvml-mock) to apply the layout the
# node's nvidia.com/mig.config label names, as the GPU Operator's MIG manager does. The binary lands in
# CACHE_DIR/nvidia-mig-parted-<version>-<digest of go.mod, go.sum and the build's flags>/; an unchanged pin is reused
# without running Go. `go build <module>/cmd/nvidia-mig-parted` from this folder's go.mod (never inside a copy of
# NVIDIA's tree); tools/lib/cached-build.sh does the rest (temporary sibling renamed into place, Go's output in
# CACHE_DIR/logs/, a "[build mig-parted VERSION]" line per step and every GPUSHARE_NVIDIA_HEARTBEAT seconds (20)).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/lib/cached-build.sh
source "$src/../lib/cached-build.sh"
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
module=github.com/NVIDIA/mig-parted
command=nvidia-mig-parted
version=$(awk -v m="$module" '$1 == m {print $2}' "$src/go.mod")
[[ -n "$version" ]] || { echo "[build mig-parted] $src/go.mod requires no $module" >&2; exit 2; }
# NVIDIA's release flags (the module's Makefile) with the external linker flags that let go-nvml's cgo calls stay
# unresolved until it dlopens libnvidia-ml.so.1 at run time, as for tools/nvidia/build.sh.
ldflags="-s -w '-extldflags=-Wl,-z,lazy -Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'"
ldflags+=" -X $module/internal/info.version=$version"
digest=$(printf '%s %s %s CGO_ENABLED=1\n' "$(cb_digest "$src" go.mod go.sum)" "$command" "$ldflags" | sha256sum | cut -c1-12)
cb_setup "mig-parted $version" "$cache" "nvidia-mig-parted-$version-$digest"
complete() { [[ -x "$1/$command" ]]; }
if complete "$cb_dest"; then
  echo "$cb_dest"
  exit 0
fi

cb_open
cb_require go "install Go (the go line of $src/go.mod)"
cb_say "building $command of $module from $src with $(go env GOVERSION) into $cb_dest (cgo); Go's output in $cb_log"
cb_heartbeat "${GPUSHARE_NVIDIA_HEARTBEAT:-20}"
# -mod=readonly: the checked-in go.mod and go.sum decide every module version, nothing is resolved anew.
cb_run "$src" "$command" env CGO_ENABLED=1 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$cb_tmp/$command" "$module/cmd/$command"
cb_install complete
echo "$cb_dest"
