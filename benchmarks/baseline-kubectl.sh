#!/usr/bin/env bash
# baseline-kubectl.sh KUBECONFIG LAB_ROOT
#
# The GPU-sharing lab, steps 1-8, done by hand with kubectl (and bash/coreutils):
# the baseline benchmarks/run.py times `ansible-playbook playbooks/lab.yml` against.
# It writes the same files under LAB_ROOT (k8s/, bin/, out/) and creates the same
# objects as the playbook, with the same checks a careful person would make
# (Pods bound where their resource is, quota rejection at admission), and it is
# idempotent: a second run on the same cluster converges and succeeds again.
#
#   KUBECTL=/path/to/kubectl  kubectl to use (default: kubectl on PATH)
#   PYTHON=/path/to/python3   Python with PyYAML for the step-6 self-test
#                             (default: python3 on PATH)
#   MODULE_UTILS=/path        the collection's plugins/module_utils (k8s/manifest_yaml.py,
#                             requests/gpu_requests.py, ...; default: found
#                             relative to this script)
#
#   VERIFY=1                  also verify as the playbook does (benchmarks/baseline-kubectl-fair.sh
#                             sets it): the API server answers and the nodes exist before
#                             anything is written, each write is read back and compared,
#                             and each placed Pod's node advertises what the Pod asks for.
#
# Step 6 (bin/check-request.sh) is the lab's own program: the script installs a
# wrapper around the collection's check_request.py and self-tests it once, as the
# playbook does; the request rule is not re-implemented in shell.
set -euo pipefail

kubeconfig=${1:?usage: baseline-kubectl.sh KUBECONFIG LAB_ROOT}
root=${2:?usage: baseline-kubectl.sh KUBECONFIG LAB_ROOT}
KUBECTL=${KUBECTL:-kubectl}
PYTHON=${PYTHON:-python3}
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
MODULE_UTILS=${MODULE_UTILS:-$here/../plugins/module_utils}

k() { "$KUBECTL" --kubeconfig "$kubeconfig" "$@"; }
die() { echo "baseline-kubectl: $*" >&2; exit 1; }
# wait_scheduled NAMESPACE POD...: until the scheduler has bound every Pod.
wait_scheduled() { local ns=$1; shift; k wait -n "$ns" --for=condition=PodScheduled --timeout=60s "${@/#/pod/}" >/dev/null; }
# pod_nodes NAMESPACE POD...: "<pod>=<node>" lines, in the order given.
pod_nodes() { local ns=$1; shift; k get pod -n "$ns" "$@" -o jsonpath='{range .items[*]}{.metadata.name}={.spec.nodeName}{"\n"}{end}'; }

# verify CMD...: run the check only with VERIFY=1 (the fair baseline).
verify() { [[ ${VERIFY:-0} != 1 ]] || "$@"; }
# expect WHAT WANT GOT: a read-back that must match.
expect() { [[ $2 == "$3" ]] || die "$1: expected '$2', the API server has '$3'"; }
preflight() {
  [[ $(k get --raw /readyz) == ok ]] || die "the API server is not ready"
  k get node lab-node-0 lab-node-1 lab-node-2 -o name >/dev/null
}
# node_is NODE CONFIG-LABEL RESOURCE COUNT: the label and capacity/allocatable as written.
node_is() {
  local got
  got=$(k get node "$1" -o jsonpath="{.metadata.labels.nvidia\\.com/device-plugin\\.config}|{.status.capacity.${3//./\\.}}|{.status.allocatable.${3//./\\.}}")
  expect "node $1" "$2|$4|$4" "$got"
}
configmap_has() {  # configmap_has KEY...: the device-plugin ConfigMap holds each key
  local keys
  # shellcheck disable=SC2016  # $k, $v and $n are the Go template's variables, not the shell's
  keys=$(k get configmap -n gpu-share device-plugin-configs -o go-template='{{range $k, $v := .data}}{{$k}} {{end}}')
  for key in "$@"; do [[ " $keys" == *" $key "* ]] || die "ConfigMap device-plugin-configs lacks $key (has: $keys)"; done
}
placements_fit() {  # each Pod of gpu-share is on a node that advertises the resource it asks for (one read of each kind)
  local pods nodes pod node resource
  # shellcheck disable=SC2016  # $k, $v and $n are the Go template's variables, not the shell's
  pods=$(k get pod -n gpu-share -o go-template='{{range .items}}{{.metadata.name}} {{.spec.nodeName}} {{range $k, $v := (index .spec.containers 0).resources.limits}}{{$k}}{{end}}{{"\n"}}{{end}}')
  # shellcheck disable=SC2016  # $k, $v and $n are the Go template's variables, not the shell's
  nodes=$(k get node -o go-template='{{range .items}}{{$n := .metadata.name}}{{range $k, $v := .status.allocatable}}{{$n}}/{{$k}}={{$v}}{{"\n"}}{{end}}{{end}}')
  while read -r pod node resource; do
    grep -Eq "^$node/$resource=[1-9]" <<<"$nodes" || die "$pod asks for $resource but its node $node does not advertise it"
  done <<<"$pods"
}

verify preflight
mkdir -p "$root/k8s" "$root/bin" "$root/out"

# --- Step 1: namespaces and the ConfigMap with two named device-plugin configs -----
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Namespace, metadata: {name: gpu-share}}
  - {apiVersion: v1, kind: Namespace, metadata: {name: team-a}}
EOF
cat > "$root/k8s/device-plugin-configs.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: device-plugin-configs
  namespace: gpu-share
data:
  default: |-
    version: v1
    flags:
      migStrategy: none
  shared: |-
    version: v1
    flags:
      migStrategy: none
    sharing:
      timeSlicing:
        failRequestsGreaterThanOne: true
        resources:
          - name: nvidia.com/gpu
            replicas: 4
EOF
k apply -f "$root/k8s/device-plugin-configs.yaml" >/dev/null
verify k get namespace gpu-share team-a -o name >/dev/null
verify configmap_has default shared

# --- Step 2: label the config per node, advertise 2 and 2 x replicas ----------------
k label node lab-node-0 nvidia.com/device-plugin.config=default --overwrite >/dev/null
k label node lab-node-1 nvidia.com/device-plugin.config=shared --overwrite >/dev/null
# The multiplier is read from the shared config of step 1, not typed in.
replicas=$(awk '/^  shared: \|-$/ {s = 1; next} s && /^  [^ ]/ {s = 0} s && $1 == "replicas:" {print $2; exit}' \
  "$root/k8s/device-plugin-configs.yaml")
[[ $replicas =~ ^[0-9]+$ ]] || die "could not read sharing.timeSlicing.resources[0].replicas from the shared config"
gpus=2
advertise() {  # advertise NODE JSON-RESOURCES: capacity and allocatable, through the status subresource
  k patch node "$1" --subresource=status --type=merge \
    -p "{\"status\":{\"capacity\":$2,\"allocatable\":$2}}" >/dev/null
}
advertise lab-node-0 "{\"nvidia.com/gpu\":\"$gpus\"}"
advertise lab-node-1 "{\"nvidia.com/gpu\":\"$((gpus * replicas))\"}"
verify node_is lab-node-0 default nvidia.com/gpu "$gpus"
verify node_is lab-node-1 shared nvidia.com/gpu "$((gpus * replicas))"

# --- Step 3: lab-node-2 is a MIG mixed-strategy node --------------------------------
product=NVIDIA-A100-SXM4-80GB profile=1g.10gb
case "$product/$profile" in  # instances of the profile per GPU, by product geometry
  NVIDIA-A100-SXM4-80GB/1g.10gb | NVIDIA-H100-80GB-HBM3/1g.10gb) per_gpu=7 ;;
  NVIDIA-A100-SXM4-40GB/1g.5gb) per_gpu=7 ;;
  NVIDIA-A100-SXM4-40GB/1g.10gb) per_gpu=4 ;;
  *) die "no MIG geometry for $profile on $product" ;;
esac
k label node lab-node-2 nvidia.com/mig.strategy=mixed "nvidia.com/gpu.product=$product" --overwrite >/dev/null
# mixed strategy: the profile is the resource name; nvidia.com/gpu must not be advertised (null removes it)
advertise lab-node-2 "{\"nvidia.com/mig-$profile\":\"$per_gpu\",\"nvidia.com/gpu\":null}"
verify node_is lab-node-2 "" "nvidia.com/mig-$profile" "$per_gpu"
verify expect "lab-node-2 nvidia.com/gpu" "" "$(k get node lab-node-2 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')"

# --- Step 4: different resource names never share slots ------------------------------
pod() {  # pod NAME NAMESPACE RESOURCE [SELECTOR-KEY SELECTOR-VALUE]
  printf -- '---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n' "$1" "$2"
  [[ $# -ge 5 ]] && printf '  nodeSelector:\n    %s: %s\n' "$4" "$5"
  printf '  containers:\n    - name: %s\n      image: registry.k8s.io/pause:3.10\n' "$1"
  printf '      resources:\n        limits:\n          %s: 1\n' "$3"
}
{
  pod mig-job gpu-share "nvidia.com/mig-$profile"
  pod plain-gpu gpu-share nvidia.com/gpu
} > "$root/k8s/mig-job.yaml"
k apply -n gpu-share -f "$root/k8s/mig-job.yaml" >/dev/null
wait_scheduled gpu-share mig-job plain-gpu
split=$(pod_nodes gpu-share mig-job plain-gpu)
grep -qx 'mig-job=lab-node-2' <<<"$split" || die "mig-job did not land on lab-node-2: $split"
! grep -qx 'plain-gpu=lab-node-2' <<<"$split" || die "plain-gpu landed on the MIG node"

# --- Step 5: the team's quota; a third Pod is rejected at admission -----------------
cat > "$root/k8s/gpu-quota.yaml" <<'EOF'
apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpu-quota
  namespace: team-a
spec:
  hard:
    requests.nvidia.com/gpu: "2"
EOF
k apply -f "$root/k8s/gpu-quota.yaml" >/dev/null
verify expect "quota gpu-quota" 2 "$(k get resourcequota -n team-a gpu-quota -o jsonpath='{.spec.hard.requests\.nvidia\.com/gpu}')"
# Until the quota controller has filled in status.hard, admission refuses Pods in team-a.
for _ in $(seq 1 300); do
  [[ $(k get resourcequota -n team-a gpu-quota -o jsonpath='{.status.hard.requests\.nvidia\.com/gpu}') == 2 ]] && break
  sleep 0.2
done
{
  pod team-a-job-1 team-a nvidia.com/gpu nvidia.com/device-plugin.config shared
  pod team-a-job-2 team-a nvidia.com/gpu nvidia.com/device-plugin.config shared
} | k apply -f - >/dev/null
wait_scheduled team-a team-a-job-1 team-a-job-2
pod team-over team-a nvidia.com/gpu nvidia.com/device-plugin.config shared > "$root/k8s/team-over.yaml"
if k apply -f "$root/k8s/team-over.yaml" >/dev/null 2>"$root/out/quota-denied.txt"; then
  die "team-over was admitted; the quota did not hold"
fi
grep -q 'exceeded quota: gpu-quota' "$root/out/quota-denied.txt" || die "unexpected rejection: $(cat "$root/out/quota-denied.txt")"
! k get pod -n team-a team-over >/dev/null 2>&1 || die "the rejected Pod exists"

# --- Step 6: bin/check-request.sh (the lab's rule, check_request.py), self-tested --
cp "$MODULE_UTILS/k8s/quantity.py" "$MODULE_UTILS/k8s/manifest_yaml.py" "$MODULE_UTILS/requests/gpu_requests.py" "$MODULE_UTILS/requests/check_request.py" "$root/bin/"
cat > "$root/bin/check-request.sh" <<EOF
#!/usr/bin/env bash
exec $(printf '%q' "$PYTHON") "\$(dirname -- "\$(readlink -f -- "\${BASH_SOURCE[0]}")")/check_request.py" "\$@"
EOF
chmod 0755 "$root/bin/check-request.sh"
[[ $("$root/bin/check-request.sh" "$root/k8s/mig-job.yaml") == OK ]] || die "check-request.sh does not pass k8s/mig-job.yaml"

# --- Step 7: add the mps config; the isolation table --------------------------------
k patch configmap -n gpu-share device-plugin-configs --type=merge -p '{"data":{"mps":"version: v1\nflags:\n  migStrategy: none\nsharing:\n  mps:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 4"}}' >/dev/null
verify configmap_has default shared mps
cat > "$root/out/isolation.txt" <<'EOF'
TIMESLICING_MEMORY_ISOLATION=no
MPS_MEMORY_ISOLATION=partial
MIG_MEMORY_ISOLATION=yes
TIMESLICING_FAULT_ISOLATION=no
MIG_FAULT_ISOLATION=yes
EOF

# --- Step 8: each workload where it fits, by the labels of steps 2 and 3 ------------
{
  pod prod-inference gpu-share "nvidia.com/mig-$profile" nvidia.com/mig.strategy mixed
  pod notebook gpu-share nvidia.com/gpu nvidia.com/device-plugin.config shared
  pod batch-train gpu-share nvidia.com/gpu nvidia.com/device-plugin.config default
} > "$root/k8s/placement.yaml"
k apply -f "$root/k8s/placement.yaml" >/dev/null
wait_scheduled gpu-share prod-inference notebook batch-train
pod_nodes gpu-share prod-inference notebook batch-train > "$root/out/placement.txt"
if grep -q '=$' "$root/out/placement.txt"; then die "a placement Pod is not bound: $(cat "$root/out/placement.txt")"; fi
verify placements_fit

# --- The lab at a glance (what the playbook's report shows) ------------------------
k get nodes -o custom-columns='NODE:.metadata.name,CONFIG:.metadata.labels.nvidia\.com/device-plugin\.config,MIG-STRATEGY:.metadata.labels.nvidia\.com/mig\.strategy,GPU:.status.allocatable.nvidia\.com/gpu,MIG-1G.10GB:.status.allocatable.nvidia\.com/mig-1g\.10gb'
k get pods -A -o wide --field-selector=metadata.namespace!=kube-system
