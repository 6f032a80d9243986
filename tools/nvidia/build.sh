#!/usr/bin/env bash
# Build NVIDIA's unmodified commands of github.com/NVIDIA/k8s-device-plugin (the version this folder's go.mod
# pins, with its own go-nvml) into the user's cache and print the directory holding them on stdout:
#
#   tools/nvidia/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# Today the one command is gpu-feature-discovery (GFD), which tests/integration/test_nvidia_gfd.py runs over our
# mock libnvidia-ml.so.1 (tools/nvml-mock). The binaries land in
# CACHE_DIR/nvidia-k8s-device-plugin-<version>-<digest of go.mod, go.sum, build.sh>/, so a new pin, a new command or
# new build flags build anew and an unchanged one is reused without running Go.
# As tools/helm/build.sh: `go build <module>/cmd/<command>` from this folder's go.mod (never inside a copy of
# NVIDIA's tree); the build runs in a temporary sibling renamed into place when complete (a present directory is
# complete); Go's output goes to CACHE_DIR/logs/nvidia-k8s-device-plugin-<...>.log; each step, a line starting with
# "[build nvidia VERSION]", goes to stderr (a cold build takes several minutes on 2 cores; a cached one prints
# nothing but the path).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
module=github.com/NVIDIA/k8s-device-plugin
commands=(gpu-feature-discovery)
version=$(awk -v m="$module" '$1 == m {print $2}' "$src/go.mod")
[[ -n "$version" ]] || { echo "[build nvidia] $src/go.mod requires no $module" >&2; exit 2; }
digest=$(cd "$src" && find . -maxdepth 1 \( -name go.mod -o -name go.sum -o -name build.sh \) -print0 | LC_ALL=C sort -z \
  | xargs -0 cat | sha256sum | cut -c1-12)
name=nvidia-k8s-device-plugin-$version-$digest
dest=$cache/$name
log=$cache/logs/$name.log
complete() { local c; for c in "${commands[@]}"; do [[ -x "$1/$c" ]] || return 1; done; }
if complete "$dest"; then
  echo "$dest"
  exit 0
fi

say() { printf '[build nvidia %s] %s\n' "$version" "$*" >&2; printf '[build nvidia %s] %s\n' "$version" "$*" >> "$log"; }
start=$(date +%s)
elapsed() { local s=$(( $(date +%s) - start )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
mkdir -p "$cache/logs"
: > "$log"
command -v go >/dev/null || { say "go is not on PATH: install Go (the go line of $src/go.mod)"; exit 2; }
# NVIDIA's release flags (the module's Makefile): the version the commands report, and the external linker flags
# that let go-nvml's cgo calls stay unresolved until it dlopens libnvidia-ml.so.1 at run time.
ldflags="-s -w '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'"
ldflags+=" -X $module/internal/info.version=$version"
tmp=$(mktemp -d "$cache/.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'say "interrupted after $(elapsed); nothing was installed"; exit 130' INT TERM
say "building ${commands[*]} of $module from $src with $(go env GOVERSION) into $dest (cgo; a cold build takes several minutes); Go's output in $log"
# -mod=readonly: the checked-in go.mod and go.sum decide every module version, nothing is resolved anew.
# A line every GPUSHARE_NVIDIA_HEARTBEAT seconds (20) while Go compiles, so a cold build is seen to progress.
# One-second sleeps: a sleep left when the ticker is killed holds stderr open for a second at most.
( n=0; while sleep 1; do n=$((n + 1)); (( n % ${GPUSHARE_NVIDIA_HEARTBEAT:-20} )) || say "still compiling ($(elapsed))"; done ) >/dev/null & ticker=$!
trap 'kill "$ticker" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for c in "${commands[@]}"; do
  say "go build $module/cmd/$c ($(elapsed) so far)"
  if ! (cd "$src" && CGO_ENABLED=1 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/$c" "$module/cmd/$c") >> "$log" 2>&1; then
    kill "$ticker" 2>/dev/null || true
    say "$c failed after $(elapsed); last lines of $log:"
    tail -n 25 "$log" | sed 's/^/  /' >&2
    exit 1
  fi
done
kill "$ticker" 2>/dev/null || true
if ! mv -T "$tmp" "$dest" 2>/dev/null; then
  complete "$dest" || { say "could not install into $dest"; exit 1; }
  say "a concurrent build installed $dest first; keeping it"
fi
chmod 0755 "$dest"
say "installed in $dest in $(elapsed)"
echo "$dest"
