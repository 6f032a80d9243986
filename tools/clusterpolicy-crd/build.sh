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
# tools/lib/cached-build.sh does the rest of each of the two steps, as for every tool built here: each runs in a
# temporary sibling renamed into place when complete; Go's and controller-gen's output go to CACHE_DIR/logs/<name>.log;
# each step, a line starting with "[build clusterpolicy-crd]", goes to stderr (a cold controller-gen build takes about
# two minutes on 2 cores, a line every GPUSHARE_CLUSTERPOLICY_CRD_HEARTBEAT seconds (20); the generation seconds; a
# cached CRD prints nothing but the path).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/lib/cached-build.sh
source "$src/../lib/cached-build.sh"
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
tools_version=$(awk '$1 == "sigs.k8s.io/controller-tools" {print $2}' "$src/go.mod")
operator_version=$(awk '$1 == "github.com/NVIDIA/gpu-operator" || $2 == "github.com/NVIDIA/gpu-operator" {print $NF}' "$src/types/go.mod" | head -n 1)
[[ -n "$tools_version" ]] || { echo "[build clusterpolicy-crd] $src/go.mod requires no sigs.k8s.io/controller-tools" >&2; exit 2; }
[[ "$operator_version" == v* ]] || { echo "[build clusterpolicy-crd] $src/types/go.mod requires no github.com/NVIDIA/gpu-operator" >&2; exit 2; }
digest() { (cd "$src" && printf '%s\0' "$@" | LC_ALL=C sort -z | xargs -0 cat | sha256sum | cut -c1-12); }
gen_dest=$cache/controller-gen-$tools_version-$(digest go.mod go.sum build.sh)
crd_name=clusterpolicy-crd-$(digest go.mod go.sum build.sh types/go.mod types/go.sum types/types.go)
crd_file=nvidia.com_clusterpolicies.yaml
if [[ -s "$cache/$crd_name/$crd_file" ]]; then
  echo "$cache/$crd_name/$crd_file"
  exit 0
fi
heartbeat=${GPUSHARE_CLUSTERPOLICY_CRD_HEARTBEAT:-20}
# -mod=readonly: the checked-in go.mod and go.sum files decide every module version, nothing is resolved anew (the
# go list that controller-gen's package loader runs inherits it).
export GOFLAGS="${GOFLAGS:-} -mod=readonly"

if [[ ! -x "$gen_dest/controller-gen" ]]; then
  cb_setup clusterpolicy-crd "$cache" "$(basename "$gen_dest")"
  cb_open
  cb_require go "install Go (the go line of $src/go.mod)"
  cb_say "building controller-gen $tools_version (sigs.k8s.io/controller-tools/cmd/controller-gen) from $src with $(go env GOVERSION) into $gen_dest (a cold build takes about two minutes); output in $cb_log"
  cb_heartbeat "$heartbeat"
  cb_run "$src" "go build of controller-gen" env CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$cb_tmp/controller-gen" \
    sigs.k8s.io/controller-tools/cmd/controller-gen
  gen_complete() { [[ -x "$1/controller-gen" ]]; }
  cb_install gen_complete
fi

package=github.com/NVIDIA/gpu-operator/api/nvidia/v1
cb_setup clusterpolicy-crd "$cache" "$crd_name"
cb_open
cb_say "generating the ClusterPolicy CRD from $package@$operator_version (controller-gen crd, from $src/types) into $cb_dest"
cb_heartbeat "$heartbeat"
cb_run "$src/types" "controller-gen crd" "$gen_dest/controller-gen" crd paths="$package" output:crd:dir="$cb_tmp"
cb_stop_heartbeat
[[ -s "$cb_tmp/$crd_file" ]] || { cb_say "controller-gen wrote no $crd_file (it wrote: $(find "$cb_tmp" -mindepth 1 -printf '%f '))"; exit 1; }
extra=$(find "$cb_tmp" -mindepth 1 ! -name "$crd_file" -printf '%f ')
[[ -z "$extra" ]] || cb_say "controller-gen also wrote: $extra(kept beside it)"
crd_complete() { [[ -s "$1/$crd_file" ]]; }
cb_install crd_complete
echo "$cb_dest/$crd_file"
