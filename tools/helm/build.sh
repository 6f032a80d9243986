#!/usr/bin/env bash
# Build Helm's command (helm.sh/helm/v3/cmd/helm, the version this folder's go.mod pins) into the user's cache
# and print the binary's path on stdout:
#
#   tools/helm/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# The binary lands in CACHE_DIR/helm-<helm version>-<digest of go.mod, go.sum, build.sh>/helm, so a new pin
# or new build flags build anew and an unchanged one is reused without running Go.
# As tools/gpu-tables/build.sh: the build runs in a temporary sibling renamed into place when complete (a
# present directory is complete); Go's output goes to CACHE_DIR/logs/helm-<...>.log; each step, a line starting
# with "[build helm VERSION]", goes to stderr (a cold build takes several minutes on 2 cores; a cached one
# prints nothing but the path).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
version=$(awk '$1 == "helm.sh/helm/v3" {print $2}' "$src/go.mod")
[[ -n "$version" ]] || { echo "[build helm] $src/go.mod requires no helm.sh/helm/v3" >&2; exit 2; }
digest=$(cd "$src" && find . -maxdepth 1 \( -name go.mod -o -name go.sum -o -name build.sh \) -print0 | LC_ALL=C sort -z \
  | xargs -0 cat | sha256sum | cut -c1-12)
name=helm-$version-$digest
dest=$cache/$name
log=$cache/logs/$name.log
if [[ -x "$dest/helm" ]]; then
  echo "$dest/helm"
  exit 0
fi

say() { printf '[build helm %s] %s\n' "$version" "$*" >&2; printf '[build helm %s] %s\n' "$version" "$*" >> "$log"; }
start=$(date +%s)
elapsed() { local s=$(( $(date +%s) - start )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
mkdir -p "$cache/logs"
: > "$log"
command -v go >/dev/null || { say "go is not on PATH: install Go (the go line of $src/go.mod)"; exit 2; }
# Helm's release flags (its Makefile): the version `helm version` reports, a release's empty build metadata, and
# the Kubernetes version its default capabilities and lint rules assume, from the client-go it is built with
# (client-go v0.N.x is Kubernetes 1.N).
client_go=$(awk '$1 == "k8s.io/client-go" {print $2}' "$src/go.mod")
[[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || { say "$src/go.mod requires no k8s.io/client-go v0.N.x (found '$client_go')"; exit 2; }
k8s_minor=${BASH_REMATCH[1]}
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.metadata="
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
tmp=$(mktemp -d "$cache/.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'say "interrupted after $(elapsed); nothing was installed"; exit 130' INT TERM
say "building helm.sh/helm/v3/cmd/helm from $src with $(go env GOVERSION) into $dest (a cold build takes several minutes); Go's output in $log"
# -mod=readonly: the checked-in go.mod and go.sum decide every module version, nothing is resolved anew.
# A line every GPUSHARE_HELM_HEARTBEAT seconds (20) while Go compiles, so a cold build is seen to progress.
# One-second sleeps: a sleep left when the ticker is killed holds stderr open for a second at most.
( n=0; while sleep 1; do n=$((n + 1)); (( n % ${GPUSHARE_HELM_HEARTBEAT:-20} )) || say "still compiling ($(elapsed))"; done ) >/dev/null & ticker=$!
trap 'kill "$ticker" 2>/dev/null || true; rm -rf "$tmp"' EXIT
if ! (cd "$src" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm) >> "$log" 2>&1; then
  kill "$ticker" 2>/dev/null || true
  say "failed after $(elapsed); last lines of $log:"
  tail -n 25 "$log" | sed 's/^/  /' >&2
  exit 1
fi
kill "$ticker" 2>/dev/null || true
if ! mv -T "$tmp" "$dest" 2>/dev/null; then
  [[ -x "$dest/helm" ]] || { say "could not install into $dest"; exit 1; }
  say "a concurrent build installed $dest first; keeping it"
fi
chmod 0755 "$dest"
say "installed in $dest in $(elapsed)"
echo "$dest/helm"
