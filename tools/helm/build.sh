#!/usr/bin/env bash
# Build Helm's command (helm.sh/helm/v3/cmd/helm, the version this folder's go.mod pins) into the user's cache
# and print the binary's path on stdout:
#
#   tools/helm/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# The binary lands in CACHE_DIR/helm-<helm version>-<digest of go.mod, go.sum and the build's flags>/helm, so a new
# pin or new build flags build anew and an unchanged one is reused without running Go.
# tools/lib/cached-build.sh does the rest, as for every tool built here: the build runs in a temporary sibling
# renamed into place when complete; Go's output goes to CACHE_DIR/logs/helm-<...>.log; each step, a line starting
# with "[build helm VERSION]", goes to stderr (a cold build takes several minutes on 2 cores, a line every
# GPUSHARE_HELM_HEARTBEAT seconds (20); a cached one prints nothing but the path).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/lib/cached-build.sh
source "$src/../lib/cached-build.sh"
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
package=helm.sh/helm/v3/cmd/helm
version=$(awk '$1 == "helm.sh/helm/v3" {print $2}' "$src/go.mod")
[[ -n "$version" ]] || { echo "[build helm] $src/go.mod requires no helm.sh/helm/v3" >&2; exit 2; }
# Helm's release flags (its Makefile): the version `helm version` reports, a release's empty build metadata, and
# the Kubernetes version its default capabilities and lint rules assume, from the client-go it is built with
# (client-go v0.N.x is Kubernetes 1.N).
client_go=$(awk '$1 == "k8s.io/client-go" {print $2}' "$src/go.mod")
[[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || { echo "[build helm] $src/go.mod requires no k8s.io/client-go v0.N.x (found '$client_go')" >&2; exit 2; }
k8s_minor=${BASH_REMATCH[1]}
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.metadata="
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
digest=$(printf '%s %s CGO_ENABLED=0\n' "$(cb_digest "$src" go.mod go.sum)" "$ldflags" | sha256sum | cut -c1-12)
cb_setup "helm $version" "$cache" "helm-$version-$digest"
if [[ -x "$cb_dest/helm" ]]; then
  echo "$cb_dest/helm"
  exit 0
fi
complete() { [[ -x "$1/helm" ]]; }

cb_open
cb_require go "install Go (the go line of $src/go.mod)"
cb_say "building $package from $src with $(go env GOVERSION) into $cb_dest (a cold build takes several minutes); Go's output in $cb_log"
cb_heartbeat "${GPUSHARE_HELM_HEARTBEAT:-20}"
# -mod=readonly: the checked-in go.mod and go.sum decide every module version, nothing is resolved anew.
cb_run "$src" "" env CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$cb_tmp/helm" "$package"
cb_install complete
echo "$cb_dest/helm"
