#!/usr/bin/env bash
# baseline-sharing-kubectl.sh KUBECONFIG
#
# The check a careful operator would script, with kubectl and bash, for the state that
# `ansible-playbook -i INVENTORY playbooks/gpu_sharing.yml` establishes with the README's
# inventory ("On a real GPU cluster": pools chosen by the label example.com/gpu-pool,
# inference -> config shared, 4 time-slicing replicas; training -> MIG all-1g.10gb):
# benchmarks/run.py (section sharing) times the playbook's no-op re-run against it.
#
# One `kubectl get` per kind, not per field:
#   ConfigMaps     device-plugin-configs (exactly the keys default and shared, their text)
#                  and gpushare-mig-parted-config (config.yaml, its text), in gpu-operator;
#   ClusterPolicy  cluster-policy: spec.devicePlugin.config.{name,default}, spec.mig.strategy,
#                  spec.migManager.config.{name,default};
#   Nodes          every node carrying the pool label: its config label
#                  (nvidia.com/device-plugin.config) or MIG label (nvidia.com/mig.config),
#                  nvidia.com/mig.config.state, and its allocatable and capacity nvidia.com/*
#                  counts against the GPUs gpu-feature-discovery counts (nvidia.com/gpu.count):
#                  4 slots per GPU, or 7 1g.10gb instances per GPU and no nvidia.com/gpu.
# Exits 0 when everything matches, 1 naming the first mismatch otherwise. Writes nothing.
#
#   KUBECTL=/path/to/kubectl  kubectl to use (default: kubectl on PATH, else the lab
#                             cluster's build in ~/.cache/gpushare/kubernetes-*/)
set -euo pipefail

kubeconfig=${1:?usage: baseline-sharing-kubectl.sh KUBECONFIG}
if [[ -z ${KUBECTL:-} ]]; then
  KUBECTL=$(command -v kubectl || true)
  if [[ -z $KUBECTL ]]; then
    for built in "${XDG_CACHE_HOME:-$HOME/.cache}"/gpushare/kubernetes-*/kubectl; do [[ -x $built ]] && KUBECTL=$built; done
  fi
  [[ -n $KUBECTL ]] || { echo "baseline-sharing-kubectl: no kubectl (set KUBECTL)" >&2; exit 2; }
fi

namespace=gpu-operator
pool_label=example.com/gpu-pool

k() { "$KUBECTL" --kubeconfig "$kubeconfig" "$@"; }
die() { echo "baseline-sharing-kubectl: $*" >&2; exit 1; }
expect() { [[ $2 == "$3" ]] || die "$1: expected '$2', the API server has '$3'"; }

# 1. Both ConfigMaps in one read: every key of each, and its text up to an end marker.
# shellcheck disable=SC2016  # $n, $k and $v are the Go template's variables, not the shell's
configmaps=$(k get configmap -n "$namespace" device-plugin-configs gpushare-mig-parted-config -o go-template='{{range .items}}{{$n := .metadata.name}}{{range $k, $v := .data}}## {{$n}} {{$k}}{{"\n"}}{{$v}}<end>{{"\n"}}{{end}}{{end}}') \
  || die "cannot read the ConfigMaps device-plugin-configs and gpushare-mig-parted-config in $namespace"
want=$(cat <<'EOF'
## device-plugin-configs default
version: v1
flags:
  migStrategy: none<end>
## device-plugin-configs shared
version: v1
flags:
  migStrategy: none
sharing:
  timeSlicing:
    failRequestsGreaterThanOne: true
    resources:
      - name: nvidia.com/gpu
        replicas: 4<end>
## gpushare-mig-parted-config config.yaml
version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        1g.10gb: 7
  all-disabled:
    - devices: all
      mig-enabled: false
<end>
EOF
)
[[ $configmaps == "$want" ]] || die "the ConfigMaps differ from the configs:
$(diff <(printf '%s\n' "$want") <(printf '%s\n' "$configmaps") || true)"

# 2. The ClusterPolicy's fields that point the operator at them, in one read.
policy=$(k get clusterpolicy cluster-policy \
  -o jsonpath='{.spec.devicePlugin.config.name}|{.spec.devicePlugin.config.default}|{.spec.mig.strategy}|{.spec.migManager.config.name}|{.spec.migManager.config.default}')
expect "ClusterPolicy cluster-policy (devicePlugin.config.name|default, mig.strategy, migManager.config.name|default)" \
  "device-plugin-configs|default|mixed|gpushare-mig-parted-config|all-disabled" "$policy"

# 3. Every pool node in one read: name, pool, labels, GPU count, then allocatable and capacity.
# shellcheck disable=SC2016  # $k and $v are the Go template's variables
nodes=$(k get nodes -l "$pool_label" -o go-template='{{range .items}}{{.metadata.name}}|{{index .metadata.labels "example.com/gpu-pool"}}|{{index .metadata.labels "nvidia.com/device-plugin.config"}}|{{index .metadata.labels "nvidia.com/mig.config"}}|{{index .metadata.labels "nvidia.com/mig.config.state"}}|{{index .metadata.labels "nvidia.com/gpu.count"}}|{{range $k, $v := .status.allocatable}}{{$k}}={{$v}} {{end}}|{{range $k, $v := .status.capacity}}{{$k}}={{$v}} {{end}}{{"\n"}}{{end}}')
nvidia_only() {  # "k=v k=v ..." -> the nvidia.com/* entries, in the order given (sorted by kubectl)
  local entry out=""
  for entry in $1; do [[ $entry == nvidia.com/* ]] && out+="$entry "; done
  printf '%s' "$out"
}
inference=0 training=0
while IFS='|' read -r name pool config mig state gpus allocatable capacity; do
  [[ -n $name ]] || continue
  [[ $gpus =~ ^[0-9]+$ ]] || die "node $name: nvidia.com/gpu.count is '$gpus', not a GPU count"
  case $pool in
    inference)
      inference=$((inference + 1))
      expect "node $name config label" "shared" "$config"
      expect "node $name MIG label" "<no value>" "$mig"
      want="nvidia.com/gpu=$((gpus * 4)) " ;;
    training)
      training=$((training + 1))
      expect "node $name config label" "<no value>" "$config"
      expect "node $name MIG label" "all-1g.10gb" "$mig"
      expect "node $name nvidia.com/mig.config.state" "success" "$state"
      want="nvidia.com/mig-1g.10gb=$((gpus * 7)) " ;;
    *) continue ;;  # in no pool: the playbook leaves it alone too
  esac
  expect "node $name allocatable nvidia.com/*" "$want" "$(nvidia_only "$allocatable")"
  expect "node $name capacity nvidia.com/*" "$want" "$(nvidia_only "$capacity")"
done <<<"$nodes"
((inference > 0)) || die "no node is labelled $pool_label=inference"
((training > 0)) || die "no node is labelled $pool_label=training"
echo "OK: ConfigMaps, ClusterPolicy, $inference inference and $training training node(s) as configured"
