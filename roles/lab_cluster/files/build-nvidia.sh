#!/usr/bin/env bash
# Build (or find in the cache) what the GPU Operator stand-in runs for each GPU node: NVIDIA's unmodified
# gpu-feature-discovery (TOOLS/nvidia/build.sh) and our mock libnvidia-ml.so.1 (TOOLS/nvml-mock/build.sh):
#
#   build-nvidia.sh TOOLS CACHE_DIR PROGRESS_FILE
#
# Each build script caches its result in CACHE_DIR and prints the path on stdout; their progress lines
# ("[build nvidia ...]", "[build nvml-mock] ...") are appended to PROGRESS_FILE as they come, for the role to show
# while this runs in the background, and repeated on stderr at the end. On success stdout has two lines: the
# gpu-feature-discovery binary and the mock's directory. A failed build exits non-zero with its message on stderr.
set -euo pipefail

tools=${1:?tools directory}
cache=${2:?cache directory}
progress=${3:?progress file}
mkdir -p "$(dirname "$progress")"
: > "$progress"
fail() { cat "$progress" >&2; exit 1; }
gfd=$("$tools/nvidia/build.sh" "$cache" 2>> "$progress") || fail
mock=$("$tools/nvml-mock/build.sh" "$cache" 2>> "$progress") || fail
cat "$progress" >&2
[[ -x "$gfd/gpu-feature-discovery" && -f "$mock/libnvidia-ml.so.1" ]] || {
  echo "[build nvidia] $gfd/gpu-feature-discovery or $mock/libnvidia-ml.so.1 is missing after the build" >&2; exit 1; }
printf '%s\n%s\n' "$gfd/gpu-feature-discovery" "$mock"
