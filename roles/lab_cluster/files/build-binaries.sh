#!/usr/bin/env bash
# Build one component of the local lab cluster from Go modules (no release-page
# downloads) and install it atomically into DEST:
#
#   build-binaries.sh kubernetes v1.36.3 DEST   # kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#   build-binaries.sh etcd       v3.6.16 DEST   # etcd
#   build-binaries.sh kwok       v0.8.0  DEST   # kwok, kwokctl
#
# The build runs in a temporary sibling of DEST which is renamed to DEST in one
# step when complete: an interrupted build leaves nothing at DEST, and a present
# DEST is complete (the caller skips it). Progress goes to stderr with elapsed
# time; the Go build cache makes a rebuild fast. Go's own error is shown when a
# step fails. The arguments are checked before anything runs: VERSION must be
# vX.Y.Z (digits only), COMPONENT one of the three above.
set -euo pipefail

component=${1-}
version=${2-}
dest=${3:?destination directory}

log() { printf '[build %s %s] %s\n' "$component" "$version" "$*" >&2; }
case "$component" in
  kubernetes|etcd|kwok) ;;
  *) log "unknown component; expected kubernetes, etcd or kwok"; exit 2 ;;
esac
if [[ ! "$version" =~ ^v(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})$ ]]; then
  log "version must be vX.Y.Z (e.g. v1.36.3), not ${version@Q}; nothing was run"
  exit 2
fi
# Run a go command; on failure show what go printed (its own error) and stop.
run_go() {
  local out
  if ! out=$("$@" 2>&1); then
    log "failed: $*"
    printf '%s\n' "$out" >&2
    exit 1
  fi
}
start=$(date +%s)
elapsed() { local s=$(( $(date +%s) - start )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

if [[ -d "$dest" ]]; then
  log "already installed in $dest"
  exit 0
fi
command -v go >/dev/null || { log "go is not on PATH: install Go >= 1.25, or set lab_cluster_bin_dir to prebuilt binaries"; exit 2; }

parent=$(dirname "$dest")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.$(basename "$dest").XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'log "interrupted after $(elapsed); nothing was installed"; exit 130' INT TERM
mkdir -p "$tmp/out" "$tmp/src"
cd "$tmp/src"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

case "$component" in
  kubernetes)
    # k8s.io/kubernetes replaces every staging module (k8s.io/api, ...) with
    # ./staging/...; a wrapper module pins each to the published v0.<minor>.<patch>.
    # The list is read from the tag's own go.mod, never typed here.
    ver=${version#v}; minor=${ver#*.}; minor=${minor%%.*}
    log "resolving staging modules from k8s.io/kubernetes@$version go.mod"
    # On failure `go mod download -json` prints its error in the JSON's "Error" field, on stdout.
    if ! info=$(go mod download -json "k8s.io/kubernetes@$version" 2>&1); then
      log "could not download k8s.io/kubernetes@$version:"
      printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p;/^go: /p' >&2
      printf '%s\n' "$info" | grep -q '"Error"\|^go: ' || printf '%s\n' "$info" >&2
      exit 1
    fi
    gomod=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
    [[ -f "$gomod" ]] || { log "go mod download named no go.mod for k8s.io/kubernetes@$version:"; printf '%s\n' "$info" >&2; exit 1; }
    {
      echo "module gpushare.local/build-kubernetes"
      echo "go 1.25"
      echo "require k8s.io/kubernetes $version"
      awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$gomod" | sort -u | while read -r m; do
        echo "replace $m => $m v0.${ver#*.}"
      done
    } > go.mod
    bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      for b in "${bins[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$b"; done
      printf ')\n'
    } > tools.go
    log "resolving dependencies"
    run_go go mod tidy
    ld="-s -w"
    for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
    done
    pkgs=(); for b in "${bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    log "compiling ${bins[*]} (cold: tens of minutes on 2 cores)"
    go build -trimpath -ldflags "$ld" -o "$tmp/out/" "${pkgs[@]}"
    ;;
  etcd)
    printf 'module gpushare.local/build-etcd\ngo 1.25\nrequire go.etcd.io/etcd/server/v3 %s\n' "$version" > go.mod
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
    log "resolving dependencies"
    run_go go mod tidy
    log "compiling etcd"
    go build -trimpath -ldflags "-s -w" -o "$tmp/out/etcd" go.etcd.io/etcd/server/v3
    ;;
  kwok)
    log "compiling kwok and kwokctl"
    GOBIN="$tmp/out" go install -trimpath -ldflags "-s -w" \
      "sigs.k8s.io/kwok/cmd/kwok@$version" "sigs.k8s.io/kwok/cmd/kwokctl@$version"
    ;;
esac

chmod 0755 "$tmp/out"
if ! mv -T "$tmp/out" "$dest" 2>/dev/null; then
  [[ -d "$dest" ]] || { log "could not install into $dest"; exit 1; }
  log "a concurrent build installed $dest first; keeping it"
fi
log "installed in $dest in $(elapsed) ($(du -sh "$dest" | cut -f1))"
