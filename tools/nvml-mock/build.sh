#!/usr/bin/env bash
# Build our mock NVML library (nvml_mock.c, gcc only, no NVIDIA header) into the user's cache and print the
# directory holding libnvidia-ml.so.1 on stdout, the directory to put in LD_LIBRARY_PATH:
#
#   tools/nvml-mock/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# The library lands in CACHE_DIR/nvml-mock-<digest of nvml_mock.c, build.sh>/libnvidia-ml.so.1, so an edit builds
# anew and an unchanged source is reused. As tools/gpu-tables/build.sh: the build runs in a temporary sibling
# renamed into place when complete (a present directory is complete); the compiler's output goes to
# CACHE_DIR/logs/nvml-mock-<digest>.log; each step, a line starting with "[build nvml-mock]", goes to stderr (a
# build takes a second; a cached one prints nothing but the path). CC overrides the compiler (gcc).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
cc=${CC:-gcc}
digest=$(cd "$src" && find . -maxdepth 1 \( -name '*.c' -o -name build.sh \) -print0 | LC_ALL=C sort -z \
  | xargs -0 cat | sha256sum | cut -c1-12)
name=nvml-mock-$digest
dest=$cache/$name
log=$cache/logs/$name.log
lib=libnvidia-ml.so.1
if [[ -f "$dest/$lib" ]]; then
  echo "$dest"
  exit 0
fi

say() { printf '[build nvml-mock] %s\n' "$*" >&2; printf '[build nvml-mock] %s\n' "$*" >> "$log"; }
mkdir -p "$cache/logs"
: > "$log"
command -v "$cc" >/dev/null || { say "$cc is not on PATH: install a C compiler (gcc) or set CC"; exit 2; }
tmp=$(mktemp -d "$cache/.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
say "compiling $src/nvml_mock.c with $cc into $dest/$lib; the compiler's output in $log"
# Only the NVML entry points are exported (-fvisibility=hidden, EXPORT in the source); the soname is the one
# go-nvml dlopens.
if ! "$cc" -std=c11 -D_DEFAULT_SOURCE -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
    -Wl,-soname,$lib -o "$tmp/$lib" "$src/nvml_mock.c" >> "$log" 2>&1; then
  say "failed; last lines of $log:"
  tail -n 25 "$log" | sed 's/^/  /' >&2
  exit 1
fi
if ! mv -T "$tmp" "$dest" 2>/dev/null; then
  [[ -f "$dest/$lib" ]] || { say "could not install into $dest"; exit 1; }
  say "a concurrent build installed $dest first; keeping it"
fi
chmod 0755 "$dest"
say "installed in $dest"
echo "$dest"
