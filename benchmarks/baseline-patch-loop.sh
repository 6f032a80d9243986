#!/usr/bin/env bash
# baseline-patch-loop.sh KUBECONFIG LABEL-SELECTOR RESOURCE COUNT
#
# The baseline of the scale benchmark: advertise RESOURCE=COUNT on every Node the
# selector matches, one `kubectl patch --subresource=status` per Node, in a plain
# loop (capacity and allocatable, a JSON merge patch, as the module writes).
#   KUBECTL=/path/to/kubectl  kubectl to use (default: kubectl on PATH)
set -euo pipefail

kubeconfig=${1:?usage: baseline-patch-loop.sh KUBECONFIG SELECTOR RESOURCE COUNT}
selector=${2:?selector}
resource=${3:?resource, e.g. nvidia.com/gpu}
count=${4:?count}
KUBECTL=${KUBECTL:-kubectl}

patch="{\"status\":{\"capacity\":{\"$resource\":\"$count\"},\"allocatable\":{\"$resource\":\"$count\"}}}"
for node in $("$KUBECTL" --kubeconfig "$kubeconfig" get nodes -l "$selector" -o name); do
  "$KUBECTL" --kubeconfig "$kubeconfig" patch "$node" --subresource=status --type=merge -p "$patch" >/dev/null
done
