#!/usr/bin/env bash
# Build NVIDIA's unmodified commands of github.com/NVIDIA/k8s-device-plugin (the version a pinned go.mod requires,
# with its own go-nvml) into the user's cache and print the directory holding them on stdout:
#
#   tools/nvidia/build.sh [CACHE_DIR] [RELEASE]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare, this folder's pin
#
# The pin is this folder's go.mod (the version the config model is held to), or with RELEASE the go.mod of the
# subfolder of that name (another release, e.g. v0.17.4, that an operator lab's device plugin can run). The commands
# are gpu-feature-discovery (GFD), nvidia-device-plugin and config-manager for this folder's pin, which the tests and
# the operator lab's stand-in run over our mock libnvidia-ml.so.1 (tools/nvml-mock); for a RELEASE, config-manager
# and the commands its go.mod lists as tools (v0.17.4's GFD needs a node-feature-discovery version the module proxy
# does not serve: its pin has the device plugin only). The binaries land in
# CACHE_DIR/nvidia-k8s-device-plugin-<version>-<digest of go.mod, go.sum, the commands and the build's flags>/, so a
# new pin, a new command or new build flags build anew and an unchanged one is reused without running Go.
# `go build <module>/cmd/<command>` from the pin's go.mod (never inside a copy of NVIDIA's tree);
# tools/lib/cached-build.sh does the rest, as for every tool built here: the build runs in a temporary sibling
# renamed into place when complete; Go's output goes to CACHE_DIR/logs/nvidia-k8s-device-plugin-<...>.log; each
# step, a line starting with "[build nvidia VERSION]", goes to stderr (a cold build takes several minutes on 2
# cores, a line every GPUSHARE_NVIDIA_HEARTBEAT seconds (20); a cached one prints nothing but the path).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/lib/cached-build.sh
source "$here/../lib/cached-build.sh"
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
release=${2:-}
module=github.com/NVIDIA/k8s-device-plugin
if [[ -z "$release" ]]; then
  src=$here
  commands=(gpu-feature-discovery nvidia-device-plugin config-manager)
else
  [[ "$release" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ && -f "$here/$release/go.mod" ]] || {
    pinned=()
    for pin in "$here"/v*/go.mod; do [[ -f "$pin" ]] && pinned+=("$(basename "$(dirname "$pin")")"); done
    echo "[build nvidia] no pinned release $release: $here/<release>/go.mod exists for ${pinned[*]:-none}" >&2
    exit 2
  }
  src=$here/$release
  # config-manager (the operator's sidecar of every device-plugin Pod) and the pin's tools, in the go.mod's order
  mapfile -t commands < <(awk -v m="$module/cmd/" 'index($1, m) == 1 {print substr($1, length(m) + 1)}' "$src/go.mod" | grep -vx config-manager)
  commands+=(config-manager)
fi
version=$(awk -v m="$module" '$1 == m {print $2}' "$src/go.mod")
[[ -n "$version" ]] || { echo "[build nvidia] $src/go.mod requires no $module" >&2; exit 2; }
[[ -z "$release" || "$version" == "$release" ]] || { echo "[build nvidia] $src/go.mod requires $module $version, not $release" >&2; exit 2; }
# NVIDIA's release flags (the module's Makefile): the version the commands report, and the external linker flags
# that let go-nvml's cgo calls stay unresolved until it dlopens libnvidia-ml.so.1 at run time.
ldflags="-s -w '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'"
ldflags+=" -X $module/internal/info.version=$version"
digest=$(printf '%s %s %s CGO_ENABLED=1\n' "$(cb_digest "$src" go.mod go.sum)" "${commands[*]}" "$ldflags" | sha256sum | cut -c1-12)
cb_setup "nvidia $version" "$cache" "nvidia-k8s-device-plugin-$version-$digest"
complete() { local c; for c in "${commands[@]}"; do [[ -x "$1/$c" ]] || return 1; done; }
if complete "$cb_dest"; then
  echo "$cb_dest"
  exit 0
fi

cb_open
cb_require go "install Go (the go line of $src/go.mod)"
cb_say "building ${commands[*]} of $module from $src with $(go env GOVERSION) into $cb_dest (cgo; a cold build takes several minutes); Go's output in $cb_log"
cb_heartbeat "${GPUSHARE_NVIDIA_HEARTBEAT:-20}"
for c in "${commands[@]}"; do
  cb_say "go build $module/cmd/$c ($(cb_elapsed) so far)"
  # -mod=readonly: the checked-in go.mod and go.sum decide every module version, nothing is resolved anew.
  cb_run "$src" "$c" env CGO_ENABLED=1 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$cb_tmp/$c" "$module/cmd/$c"
done
cb_install complete
echo "$cb_dest"
