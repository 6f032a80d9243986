#!/usr/bin/env bash
# Generate the GPU Operator's ClusterPolicy CRD from NVIDIA's Go types with controller-gen, into the user's cache,
# and print the CRD file's path on stdout:
#
#   tools/clusterpolicy-crd/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# Two pins, two go.mod files:
#   go.mod        sigs.k8s.io/controller-tools (controller-gen), built into
#                 CACHE_DIR/controller-gen-<version>-<digest of go.mod, go.sum, build.sh>/controller-gen;
#   types/go.mod  github.com/NVIDIA/gpu-operator, whose public package api/nvidia/v1 (the ClusterPolicy types and their
#                 kubebuilder markers) controller-gen loads by import path, from types/ in module mode, so the types
#                 resolve with the dependency versions NVIDIA's module asks for (k8s.io/api v0.32.x: the schemas of
#                 the Kubernetes types a ClusterPolicy embeds), not the newer ones controller-tools needs.
# The CRD lands in CACHE_DIR/clusterpolicy-crd-<digest of both folders' files and build.sh>/nvidia.com_clusterpolicies.yaml
# (`controller-gen crd`, NVIDIA's Makefile's options: none beyond `crd`). Nothing of NVIDIA's tree is copied or
# built in a copy; nothing generated is checked in.
# As tools/nvidia/build.sh: each step runs in a temporary sibling renamed into place when complete (a present
# directory is complete); Go's and controller-gen's output go to CACHE_DIR/logs/<name>.log; each step, a line starting
# with "[build clusterpolicy-crd]", goes to stderr (a cold controller-gen build takes about two minutes on 2 cores, the
# generation seconds; a cached CRD prints nothing but the path).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
tools_version=$(awk '$1 == "sigs.k8s.io/controller-tools" {print $2}' "$src/go.mod")
operator_version=$(awk '$1 == "github.com/NVIDIA/gpu-operator" || $2 == "github.com/NVIDIA/gpu-operator" {print $NF}' "$src/types/go.mod" | head -n 1)
[[ -n "$tools_version" ]] || { echo "[build clusterpolicy-crd] $src/go.mod requires no sigs.k8s.io/controller-tools" >&2; exit 2; }
[[ "$operator_version" == v* ]] || { echo "[build clusterpolicy-crd] $src/types/go.mod requires no github.com/NVIDIA/gpu-operator" >&2; exit 2; }
digest() { (cd "$src" && printf '%s\0' "$@" | LC_ALL=C sort -z | xargs -0 cat | sha256sum | cut -c1-12); }
gen_name=controller-gen-$tools_version-$(digest go.mod go.sum build.sh)
gen_dest=$cache/$gen_name
crd_name=clusterpolicy-crd-$(digest go.mod go.sum build.sh types/go.mod types/go.sum types/types.go)
crd_dest=$cache/$crd_name
crd_file=nvidia.com_clusterpolicies.yaml
if [[ -s "$crd_dest/$crd_file" ]]; then
  echo "$crd_dest/$crd_file"
  exit 0
fi

log=$cache/logs/$crd_name.log
say() { printf '[build clusterpolicy-crd] %s\n' "$*" >&2; printf '[build clusterpolicy-crd] %s\n' "$*" >> "$log"; }
start=$(date +%s)
elapsed() { local s=$(( $(date +%s) - start )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
mkdir -p "$cache/logs"
: > "$log"
command -v go >/dev/null || { say "go is not on PATH: install Go (the go line of $src/go.mod)"; exit 2; }
# -mod=readonly: the checked-in go.mod and go.sum files decide every module version, nothing is resolved anew (the
# go list that controller-gen's package loader runs inherits it).
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
tmp_gen="" tmp_crd="" ticker=""
cleanup() { [[ -z "$ticker" ]] || kill "$ticker" 2>/dev/null || true; rm -rf "$tmp_gen" "$tmp_crd"; }
trap cleanup EXIT
trap 'say "interrupted after $(elapsed); nothing was installed"; exit 130' INT TERM
fail() { say "$1 failed after $(elapsed); last lines of $log:"; tail -n 25 "$log" | sed 's/^/  /' >&2; exit 1; }
# A line every GPUSHARE_CLUSTERPOLICY_CRD_HEARTBEAT seconds (20) while Go works, so a cold build is seen to progress.
# One-second sleeps: a sleep left when the ticker is killed holds stderr open for a second at most.
heartbeat() {
  ( n=0; while sleep 1; do n=$((n + 1)); (( n % ${GPUSHARE_CLUSTERPOLICY_CRD_HEARTBEAT:-20} )) || say "still $1 ($(elapsed))"; done ) >/dev/null &
  ticker=$!
}
quiet() { kill "$ticker" 2>/dev/null || true; ticker=""; }

if [[ ! -x "$gen_dest/controller-gen" ]]; then
  say "building controller-gen $tools_version (sigs.k8s.io/controller-tools/cmd/controller-gen) from $src with $(go env GOVERSION) into $gen_dest (a cold build takes about two minutes); output in $log"
  tmp_gen=$(mktemp -d "$cache/.$gen_name.XXXXXX")
  heartbeat compiling
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp_gen/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen) \
    >> "$log" 2>&1 || { quiet; fail "go build of controller-gen"; }
  quiet
  if ! mv -T "$tmp_gen" "$gen_dest" 2>/dev/null; then
    [[ -x "$gen_dest/controller-gen" ]] || { say "could not install into $gen_dest"; exit 1; }
    say "a concurrent build installed $gen_dest first; keeping it"
  fi
  tmp_gen=""
  chmod 0755 "$gen_dest"
  say "controller-gen installed in $gen_dest ($(elapsed) so far)"
fi

package=github.com/NVIDIA/gpu-operator/api/nvidia/v1
say "generating the ClusterPolicy CRD from $package@$operator_version (controller-gen crd, from $src/types) into $crd_dest"
tmp_crd=$(mktemp -d "$cache/.$crd_name.XXXXXX")
heartbeat "loading $package"
(cd "$src/types" && "$gen_dest/controller-gen" crd paths="$package" output:crd:dir="$tmp_crd") >> "$log" 2>&1 \
  || { quiet; fail "controller-gen crd"; }
quiet
[[ -s "$tmp_crd/$crd_file" ]] || { say "controller-gen wrote no $crd_file (it wrote: $(find "$tmp_crd" -mindepth 1 -printf '%f '))"; exit 1; }
extra=$(find "$tmp_crd" -mindepth 1 ! -name "$crd_file" -printf '%f ')
[[ -z "$extra" ]] || say "controller-gen also wrote: $extra(kept beside it)"
if ! mv -T "$tmp_crd" "$crd_dest" 2>/dev/null; then
  [[ -s "$crd_dest/$crd_file" ]] || { say "could not install into $crd_dest"; exit 1; }
  say "a concurrent run installed $crd_dest first; keeping it"
fi
tmp_crd=""
chmod 0755 "$crd_dest"
say "installed $crd_dest/$crd_file ($(wc -l < "$crd_dest/$crd_file") lines) in $(elapsed)"
echo "$crd_dest/$crd_file"
