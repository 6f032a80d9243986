#!/usr/bin/env bash
# Build the local lab cluster's binaries from Go modules, offline from release
# pages: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
# (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3), kwok and kwokctl
# (sigs.k8s.io/kwok).
#
# Binaries land in a per-user cache keyed by version:
#   ${GPUSHARE_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gpushare}/<component>-<version>/
# Each component directory is built in a temporary sibling and renamed into place
# in one step, so an interrupted build never leaves a half-filled directory and a
# present directory is always complete (and skipped).
#
# Prints the directory holding all seven binaries (as symlinks) on its last line:
#   ${cache}/bin-<k8s>-<etcd>-<kwok>/
#
# Set GPUSHARE_BIN_DIR to a directory that already holds the binaries to skip
# the build entirely (the script then only checks that they are there).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

cache=${GPUSHARE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
k8s_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
all_bins=("${k8s_bins[@]}" etcd kwok kwokctl)

log() { printf '[controlplane] %s\n' "$*" >&2; }
elapsed() { local s=$(( $(date +%s) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

if [[ -n "${GPUSHARE_BIN_DIR:-}" ]]; then
  for b in "${all_bins[@]}"; do
    [[ -x "$GPUSHARE_BIN_DIR/$b" ]] || { log "GPUSHARE_BIN_DIR=$GPUSHARE_BIN_DIR has no executable '$b'; unset GPUSHARE_BIN_DIR to build it"; exit 2; }
  done
  log "using prebuilt binaries from GPUSHARE_BIN_DIR=$GPUSHARE_BIN_DIR"
  printf '%s\n' "$GPUSHARE_BIN_DIR"
  exit 0
fi

command -v go >/dev/null || { log "go is not on PATH; install Go >= 1.25 or set GPUSHARE_BIN_DIR"; exit 2; }
mkdir -p "$cache"

tmpdirs=()
cleanup() { local d; for d in "${tmpdirs[@]}"; do rm -rf "$d"; done; }
trap cleanup EXIT
trap 'log "interrupted; nothing half-built was installed"; exit 130' INT TERM

# install_component NAME VERSION BUILD_FN: run BUILD_FN OUTDIR in a temp dir and
# rename it to $cache/NAME-VERSION when it succeeds.
install_component() {
  local name=$1 version=$2 fn=$3 dest="$cache/$1-$2" start tmp
  if [[ -d "$dest" ]]; then
    log "$name $version: cached in $dest"
    return 0
  fi
  start=$(date +%s)
  log "$name $version: building (first time only; Go build cache makes rebuilds fast)"
  tmp=$(mktemp -d "$cache/.$name-$version.XXXXXX")
  tmpdirs+=("$tmp")
  mkdir -p "$tmp/out" "$tmp/src"
  "$fn" "$tmp/out" "$tmp/src"
  rm -rf "$tmp/src"
  chmod 0755 "$tmp/out"
  mv -T "$tmp/out" "$dest"
  log "$name $version: done in $(elapsed "$start") ($(du -sh "$dest" | cut -f1))"
}

# Kubernetes' own go.mod replaces every staging module with ./staging/...; a
# wrapper module pins each of them to the published v0.<minor>.<patch> instead.
# The list is read from the tag's go.mod, never typed.
build_k8s() {
  local out=$1 src=$2 gomod staging minor ver=${K8S_VERSION#v}
  minor=${ver#*.}; minor=${minor%%.*}
  gomod=$(cd "$src" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  staging=$(awk '/=> \.\/staging\/src\//{print $1}' "$gomod" | sort -u)
  {
    echo "module gpushare.local/controlplane-k8s"
    echo "go 1.25"
    echo "require k8s.io/kubernetes $K8S_VERSION"
    for m in $staging; do echo "replace $m => $m v0.${ver#*.}"; done
  } > "$src/go.mod"
  cat > "$src/tools.go" <<GO
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  (cd "$src" && go mod tidy -e >/dev/null 2>&1 || true; cd "$src" && GOFLAGS=-mod=mod go mod download)
  local pkgv=k8s.io/component-base/version cgv=k8s.io/client-go/pkg/version ld="-s -w"
  local v
  for v in "$pkgv" "$cgv"; do
    ld+=" -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
  done
  local pkgs=() b
  for b in "${k8s_bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$out/" "${pkgs[@]}")
}

build_etcd() {
  local out=$1 src=$2
  printf 'module gpushare.local/controlplane-etcd\ngo 1.25\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$src/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > "$src/tools.go"
  (cd "$src" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true)
  (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
  local out=$1 src=$2
  (cd "$src" && CGO_ENABLED=0 GOBIN="$out" go install -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION")
}

total=$(date +%s)
install_component kwok "$KWOK_VERSION" build_kwok
install_component etcd "$ETCD_VERSION" build_etcd
install_component kubernetes "$K8S_VERSION" build_k8s

# One directory with all seven, for kwokctl's kubeBinaryPrefix and PATH.
bindir="$cache/bin-$K8S_VERSION-$ETCD_VERSION-$KWOK_VERSION"
if [[ ! -d "$bindir" ]]; then
  tmp=$(mktemp -d "$cache/.bin.XXXXXX"); tmpdirs+=("$tmp")
  for b in "${k8s_bins[@]}"; do ln -s "../kubernetes-$K8S_VERSION/$b" "$tmp/$b"; done
  ln -s "../etcd-$ETCD_VERSION/etcd" "$tmp/etcd"
  ln -s "../kwok-$KWOK_VERSION/kwok" "$tmp/kwok"
  ln -s "../kwok-$KWOK_VERSION/kwokctl" "$tmp/kwokctl"
  chmod 0755 "$tmp"
  mv -T "$tmp" "$bindir" 2>/dev/null || true   # lost a race with a concurrent build: theirs is identical
fi
log "binaries ready in $bindir (total $(elapsed "$total"))"
printf '%s\n' "$bindir"
