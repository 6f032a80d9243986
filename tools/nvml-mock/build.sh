#!/usr/bin/env bash
# Build our mock NVML library (nvml_mock.c, gcc only, no NVIDIA header) into the user's cache and print the
# directory holding libnvidia-ml.so.1 on stdout, the directory to put in LD_LIBRARY_PATH:
#
#   tools/nvml-mock/build.sh [CACHE_DIR]    # default: ${XDG_CACHE_HOME:-~/.cache}/gpushare
#
# The library lands in CACHE_DIR/nvml-mock-<digest of nvml_mock.c and the compiler's flags>/libnvidia-ml.so.1, so
# an edit builds anew and an unchanged source is reused. tools/lib/cached-build.sh does the rest, as for every
# tool built here: the build runs in a temporary sibling renamed into place when complete; the compiler's output
# goes to CACHE_DIR/logs/nvml-mock-<digest>.log; each step, a line starting with "[build nvml-mock]", goes to
# stderr (a build takes a second; a cached one prints nothing but the path). CC overrides the compiler (gcc).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/lib/cached-build.sh
source "$src/../lib/cached-build.sh"
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
cc=${CC:-gcc}
lib=libnvidia-ml.so.1
# Only the NVML entry points are exported (-fvisibility=hidden, EXPORT in the source); the soname is the one
# go-nvml dlopens.
flags=(-std=c11 -D_DEFAULT_SOURCE -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden "-Wl,-soname,$lib")
digest=$(printf '%s %s\n' "$(cb_digest "$src" '*.c')" "${flags[*]}" | sha256sum | cut -c1-12)
cb_setup nvml-mock "$cache" "nvml-mock-$digest"
if [[ -f "$cb_dest/$lib" ]]; then
  echo "$cb_dest"
  exit 0
fi
complete() { [[ -f "$1/$lib" ]]; }

cb_open
cb_require "$cc" "install a C compiler (gcc) or set CC"
cb_say "compiling $src/nvml_mock.c with $cc into $cb_dest/$lib; the compiler's output in $cb_log"
cb_run "$src" "" "$cc" "${flags[@]}" -o "$cb_tmp/$lib" "$src/nvml_mock.c"
cb_install complete
echo "$cb_dest"
