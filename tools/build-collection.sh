#!/usr/bin/env bash
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Build the collection tarball with docs/collection/README.md as its README.md.
#   tools/build-collection.sh [OUTPUT_DIR]      (default: the checkout; an older tarball of this version is replaced)
#
# The checkout's README.md is for the checkout (make lab, make test); an installed collection needs its own. The
# working tree is copied into a temporary directory (leaving out only version control, virtual environments, caches
# and built tarballs), docs/collection/README.md is put in place of README.md there and docs/collection is dropped
# (the tarball's README.md is that file; a second copy, with links written for the top level, would only be a stale
# duplicate), and ansible-galaxy builds the copy, so galaxy.yml's build_ignore decides the rest as it does for the
# checkout. The copy is removed however the build ends.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readme="$repo/docs/collection/README.md"
output=${1:-$repo}
mkdir -p "$output"
output=$(cd "$output" && pwd)

if [[ ! -f "$readme" ]]; then
    echo "build-collection: $readme does not exist: it is the tarball's README.md" >&2
    exit 2
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/gpushare-k8s-build.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# Unanchored patterns (any depth) first, then the top-level entries, anchored to the copy's root.
tar -C "$repo" -cf - \
    --exclude=__pycache__ --exclude='*.pyc' \
    --anchored \
    --exclude=./.git --exclude=./.venv --exclude=./.venv-sanity --exclude=./.nox --exclude=./.collections --exclude=./collections \
    --exclude=./.ansible --exclude=./.pytest_cache --exclude=./.hypothesis --exclude=./tests/output \
    --exclude='./*.tar.gz' \
    . | tar -C "$stage" -xf -

cp "$readme" "$stage/README.md"
rm -rf "$stage/docs/collection"
rmdir "$stage/docs" 2>/dev/null || true  # only when docs/ held nothing else

ansible-galaxy collection build --force --output-path "$output" "$stage"
