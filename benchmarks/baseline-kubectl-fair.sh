#!/usr/bin/env bash
# baseline-kubectl-fair.sh KUBECONFIG LAB_ROOT
#
# The kubectl baseline with the verification the lab playbook does (benchmarks/baseline-kubectl.sh
# with VERIFY=1): the API server and the nodes checked before any write, every write read back and
# compared, each placed Pod's node checked to advertise what the Pod asks for. benchmarks/run.py
# reports the lab against both baselines.
set -euo pipefail
VERIFY=1 exec bash "$(dirname -- "${BASH_SOURCE[0]}")/baseline-kubectl.sh" "$@"
