#!/usr/bin/env bash
# Build (or find in the cache) what the GPU Operator stand-in runs for each GPU node: NVIDIA's unmodified
# gpu-feature-discovery, nvidia-device-plugin and config-manager (TOOLS/nvidia/build.sh) and nvidia-mig-parted
# (TOOLS/mig-parted/build.sh), our mock libnvidia-ml.so.1
# (TOOLS/nvml-mock/build.sh), the kubelet side of the device-plugin API (TOOLS/device-plugin-kubelet/build.sh) and
# the ClusterPolicy CRD generated from NVIDIA's gpu-operator types (TOOLS/clusterpolicy-crd/build.sh):
#
#   build-nvidia.sh TOOLS CACHE_DIR PROGRESS_FILE [RELEASE...]
#
# Each build script caches its result in CACHE_DIR and prints the path on stdout; their progress lines
# ("[build nvidia ...]", "[build mig-parted ...]", "[build nvml-mock] ...", "[build device-plugin-kubelet ...]",
# "[build clusterpolicy-crd ...]") are appended to PROGRESS_FILE as they come, for the role to show while this runs in
# the background, and repeated on stderr at the end. On success stdout has six lines: the gpu-feature-discovery
# binary, the mock's directory, the nvidia-device-plugin binary, device-plugin-kubelet, the CRD and the
# nvidia-mig-parted binary; then, for each RELEASE (another k8s-device-plugin release pinned in TOOLS/nvidia/RELEASE/go.mod,
# e.g. v0.17.4, that the stand-in can run when the ClusterPolicy asks for it), the directory of its nvidia-device-plugin
# and config-manager. A failed build exits non-zero with its message on stderr.
set -euo pipefail

tools=${1:?tools directory}
cache=${2:?cache directory}
progress=${3:?progress file}
shift 3
mkdir -p "$(dirname "$progress")"
: > "$progress"
fail() { cat "$progress" >&2; exit 1; }
gfd=$("$tools/nvidia/build.sh" "$cache" 2>> "$progress") || fail
migparted=$("$tools/mig-parted/build.sh" "$cache" 2>> "$progress") || fail
mock=$("$tools/nvml-mock/build.sh" "$cache" 2>> "$progress") || fail
kubelet=$("$tools/device-plugin-kubelet/build.sh" "$cache" 2>> "$progress") || fail
crd=$("$tools/clusterpolicy-crd/build.sh" "$cache" 2>> "$progress") || fail
releases=()
for release in "$@"; do
  built=$("$tools/nvidia/build.sh" "$cache" "$release" 2>> "$progress") || fail
  releases+=("$built")
done
cat "$progress" >&2
for built in "$gfd/gpu-feature-discovery" "$gfd/nvidia-device-plugin" "$gfd/config-manager" "$migparted/nvidia-mig-parted" "$mock/libnvidia-ml.so.1" "$kubelet" "$crd"; do
  [[ -f "$built" ]] || { echo "[build nvidia] $built is missing after the build" >&2; exit 1; }
done
for built in "${releases[@]}"; do
  [[ -f "$built/nvidia-device-plugin" && -f "$built/config-manager" ]] || { echo "[build nvidia] $built lacks nvidia-device-plugin or config-manager after the build" >&2; exit 1; }
done
printf '%s\n%s\n%s\n%s\n%s\n%s\n' "$gfd/gpu-feature-discovery" "$mock" "$gfd/nvidia-device-plugin" "$kubelet" "$crd" "$migparted/nvidia-mig-parted"
for built in "${releases[@]}"; do
  printf '%s\n' "$built"
done
