#!/usr/bin/env bash
# Build the kubelet side of the device-plugin API for the lab cluster's kwok nodes (this folder's main.go; go.mod
# pins k8s.io/kubelet, the API NVIDIA's device plugin speaks) into the user's cache and print the binary's path:
#
#   tools/device-plugin-kubelet/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# The binary lands in CACHE_DIR/device-plugin-kubelet-<k8s.io/kubelet version>-<digest of go.mod, go.sum, *.go>/, so
# an edit or a new pin builds anew and an unchanged one is reused without running Go. tools/lib/cached-build.sh does
# the rest, as for every tool built here: Go's output goes to CACHE_DIR/logs/device-plugin-kubelet-<...>.log; each
# step, a line starting with "[build device-plugin-kubelet VERSION]", goes to stderr (a cold build takes a minute or
# two on 2 cores, a line every GPUSHARE_NVIDIA_HEARTBEAT seconds (20); a cached one prints nothing but the path).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/lib/cached-build.sh
source "$src/../lib/cached-build.sh"
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
version=$(awk '$1 == "k8s.io/kubelet" {print $2}' "$src/go.mod")
[[ -n "$version" ]] || { echo "[build device-plugin-kubelet] $src/go.mod requires no k8s.io/kubelet" >&2; exit 2; }
cb_setup "device-plugin-kubelet $version" "$cache" "device-plugin-kubelet-$version-$(cb_digest "$src" go.mod go.sum '*.go')"
complete() { [[ -x "$1/device-plugin-kubelet" ]]; }
if complete "$cb_dest"; then
  echo "$cb_dest/device-plugin-kubelet"
  exit 0
fi

cb_open
cb_require go "install Go (the go line of $src/go.mod)"
cb_say "building $src with $(go env GOVERSION) into $cb_dest (a cold build takes a minute or two); Go's output in $cb_log"
cb_heartbeat "${GPUSHARE_NVIDIA_HEARTBEAT:-20}"
# -mod=readonly: the checked-in go.mod and go.sum decide every module version, nothing is resolved anew.
cb_run "$src" "" env CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$cb_tmp/device-plugin-kubelet" .
cb_install complete
echo "$cb_dest/device-plugin-kubelet"
