#!/usr/bin/env bash
# Build one component of the local lab cluster from Go modules (no release-page
# downloads) and install it atomically into DEST:
#
#   build-binaries.sh kubernetes v1.36.3 DEST [LOG]   # kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#   build-binaries.sh etcd       v3.6.16 DEST [LOG]   # etcd
#   build-binaries.sh kwok       v0.8.0  DEST [LOG]   # kwok, kwokctl
#
# The build runs in a temporary sibling of DEST which is renamed to DEST in one
# step when complete: an interrupted build leaves nothing at DEST, and a present
# DEST is complete (the caller skips it). Go's full output goes to LOG (default
# DEST.log, rewritten by each build); the steps, each a line starting with
# "[build COMPONENT VERSION]", go to stderr and LOG. When a step fails, the last
# lines of LOG follow its name on stderr. The Go build cache makes a rebuild fast.
# The arguments are checked before anything runs: VERSION must be vX.Y.Z (digits
# only), COMPONENT one of the three above.
set -euo pipefail

component=${1-}
version=${2-}
dest=${3:?destination directory}
log=${4:-$dest.log}
# Lines of LOG shown after a failed step.
tail_lines=25

say() { printf '[build %s %s] %s\n' "$component" "$version" "$*" >&2; }
case "$component" in
  kubernetes|etcd|kwok) ;;
  *) say "unknown component; expected kubernetes, etcd or kwok"; exit 2 ;;
esac
if [[ ! "$version" =~ ^v(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})$ ]]; then
  say "version must be vX.Y.Z (e.g. v1.36.3), not ${version@Q}; nothing was run"
  exit 2
fi
start=$(date +%s)
elapsed() { local s=$(( $(date +%s) - start )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

if [[ -d "$dest" ]]; then
  say "already installed in $dest; nothing to build"
  exit 0
fi
command -v go >/dev/null || {
  say "go is not on PATH: install Go (the version in the go line of $component $version's go.mod), or put prebuilt binaries in $dest"
  exit 2
}

mkdir -p "$(dirname "$log")"
: > "$log"
# A step: on stderr and in the log.
step() { say "$*"; printf '[build %s %s] %s\n' "$component" "$version" "$*" >> "$log"; }
fail() {
  step "failed after $(elapsed): $*"
  say "last lines of $log (Go's full output):"
  tail -n "$tail_lines" "$log" | sed 's/^/  /' >&2
  exit 1
}
# Run a go command, its output appended to the log.
run_go() { "$@" >> "$log" 2>&1 || fail "$*"; }

parent=$(dirname "$dest")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.$(basename "$dest").XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'step "interrupted after $(elapsed); nothing was installed"; exit 130' INT TERM
mkdir -p "$tmp/out" "$tmp/src"
cd "$tmp/src"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
step "building with $(go env GOVERSION) into $dest; Go's output in $log"

case "$component" in
  kubernetes)
    # k8s.io/kubernetes replaces every staging module (k8s.io/api, ...) with
    # ./staging/...; a wrapper module pins each to the published v0.<minor>.<patch>.
    # The list is read from the tag's own go.mod, never typed here.
    ver=${version#v}; minor=${ver#*.}; minor=${minor%%.*}
    step "downloading k8s.io/kubernetes@$version (its go.mod names the staging modules)"
    # On failure `go mod download -json` prints its error in the JSON's "Error" field, on stdout.
    if ! info=$(go mod download -json "k8s.io/kubernetes@$version" 2>&1); then
      printf '%s\n' "$info" >> "$log"
      fail "go mod download k8s.io/kubernetes@$version: $(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p;/^go: /p' | head -n 3)"
    fi
    printf '%s\n' "$info" >> "$log"
    gomod=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
    [[ -f "$gomod" ]] || fail "go mod download named no go.mod for k8s.io/kubernetes@$version"
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
    step "resolving dependencies (go mod tidy)"
    run_go go mod tidy
    ld="-s -w"
    for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
    done
    pkgs=(); for b in "${bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    step "compiling ${bins[*]} (the longest step)"
    run_go go build -trimpath -ldflags "$ld" -o "$tmp/out/" "${pkgs[@]}"
    ;;
  etcd)
    printf 'module gpushare.local/build-etcd\ngo 1.25\nrequire go.etcd.io/etcd/server/v3 %s\n' "$version" > go.mod
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
    step "resolving dependencies (go mod tidy)"
    run_go go mod tidy
    step "compiling etcd"
    run_go go build -trimpath -ldflags "-s -w" -o "$tmp/out/etcd" go.etcd.io/etcd/server/v3
    ;;
  kwok)
    step "downloading and compiling kwok and kwokctl"
    GOBIN="$tmp/out" run_go go install -trimpath -ldflags "-s -w" \
      "sigs.k8s.io/kwok/cmd/kwok@$version" "sigs.k8s.io/kwok/cmd/kwokctl@$version"
    ;;
esac

chmod 0755 "$tmp/out"
if ! mv -T "$tmp/out" "$dest" 2>/dev/null; then
  [[ -d "$dest" ]] || fail "could not install into $dest"
  step "a concurrent build installed $dest first; keeping it"
fi
step "installed in $dest in $(elapsed) ($(du -sh "$dest" | cut -f1))"
