#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight_check
short_description: (lab only) Check the GPU-sharing lab's data and the cluster before the lab writes anything
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - The checks of the role P(gpushare.k8s.lab_preflight#role), in one task, each failure naming the inventory field and the fix.
  - V(names) checks every namespace and object name the lab writes (O(names)), before anything else, the way the filter
    P(gpushare.k8s.lab_name_errors#filter) does. The lab runs it alone first, before anything is read or written.
  - V(input) validates every device-plugin config (step 7's included), every node with its config name or MIG layout,
    the Pods of steps 4 and 8 and the names the team's quota covers, with the collection's inventory model; then says
    where the parameters disagree (initial configs that are not configs, nodes with neither config nor MIG layout, split
    Pods asking for a resource no node advertises, a team that does not fill its quota exactly).
  - V(control_plane) reads the leader Leases in C(kube-system) and fails when a component of O(control_plane_leases) holds
    none or did not renew it within its duration (it has exited; every later wait on it would only time out).
  - V(cluster) checks the data against the cluster, after the input checks. It checks the mode against the GPU Operator's
    ClusterPolicies and the nodes' kwok annotation, that every node exists, that no node would be labelled with a config
    the ConfigMap lacks after step 1, and that the team's quota is not lowered below what is in use.
  - Only reads (GET and LIST). Reads the credentials may not make (Leases, ClusterPolicies in advertise mode) are skipped
    with a warning that quotes the API server.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpushare.k8s.k8s_auth
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.info_module
  - gpushare.k8s.attributes.idempotent
attributes:
  idempotent:
    support: full
options:
  checks:
    description: Which checks to run, always in the order V(names), V(input), V(control_plane), V(cluster).
    type: list
    elements: str
    choices: [names, input, control_plane, cluster]
    default: [names, input, control_plane, cluster]
  names:
    description:
      - The lab's inventory fields that hold names, each field's name (C(gpushare_namespace), C(gpushare_team_pods),
        C(gpushare_nodes) ...) mapped to its value, for the V(names) check; a field left out is not checked.
      - A field that holds no name (a misspelt one) fails the task, naming the fields it knows.
    type: dict
    default: {}
  nodes:
    description:
      - The lab's nodes (C(gpushare_nodes)), each C({name, gpus, config} or {name, gpus, mig}).
      - Required by the V(input) and V(cluster) checks.
    type: list
    elements: raw
  configs:
    description:
      - Named device-plugin configs (C(gpushare_device_plugin_configs)).
      - Required by the V(input) and V(cluster) checks.
    type: raw
  initial_configs:
    description: Configs step 1 puts in the ConfigMap (C(gpushare_device_plugin_initial_configs)).
    type: list
    elements: raw
    default: []
  configmap:
    description: Name of the device-plugin ConfigMap.
    type: str
    default: device-plugin-configs
  configmap_namespace:
    description: Namespace of the device-plugin ConfigMap.
    type: str
    default: gpu-share
  split_pods:
    description: Step 4's Pods (C(gpushare_split_pods)).
    type: list
    elements: raw
    default: []
  placement:
    description: Step 8's workloads (C(gpushare_placement)).
    type: list
    elements: raw
    default: []
  image:
    description: Image of the lab's Pods.
    type: str
    default: registry.k8s.io/pause:3.10
  team_namespace:
    description: The team's namespace.
    type: str
    default: team-a
  team_quota:
    description: The team's quota (C(gpushare_team_quota), C({name, gpus, resources?, coverage?}), C(coverage) as C({name?, limits?, uncovered?})).
    type: raw
    default: {name: gpu-quota, gpus: 2}
  team_pods:
    description: The team's Pods (C(gpushare_team_pods)).
    type: list
    elements: raw
    default: []
  team_over_pod:
    description: The Pod step 5's quota must refuse.
    type: str
    default: team-over
  allow_quota_shrink:
    description: Allow lowering the team's quota below what is in use.
    type: bool
    default: false
  mode:
    description:
      - How the advertised GPUs reach the nodes (C(gpushare_mode)). V(operator) is refused when the cluster has no
        ClusterPolicy O(cluster_policy); V(advertise) when it has any ClusterPolicy or an inventory node is not a kwok node.
    type: str
    choices: [advertise, operator]
    default: advertise
  cluster_policy:
    description: The GPU Operator's ClusterPolicy (operator mode).
    type: str
    default: cluster-policy
  control_plane_leases:
    description:
      - Components that must hold a fresh leader Lease named after them in C(kube-system). V([]) skips the check.
    type: list
    elements: str
    default: [kube-controller-manager, kube-scheduler]
  control_plane_fix:
    description: How to restore a component that is not running, appended to the failure.
    type: str
    default: restart them; on the local lab cluster run the playbook gpushare.k8s.cluster (`make cluster` in a checkout)
seealso:
  - module: gpushare.k8s.api_server_check
"""

EXAMPLES = r"""
- name: Check the names the lab writes before anything is read
  gpushare.k8s.preflight_check:
    checks: [names]
    names:
      gpushare_namespace: "{{ gpushare_namespace }}"
      gpushare_team_pods: "{{ gpushare_team_pods }}"

- name: Check the lab's data alone (no cluster needed)
  gpushare.k8s.preflight_check:
    checks: [input]
    nodes: "{{ gpushare_nodes }}"
    configs: "{{ gpushare_device_plugin_configs }}"
    team_pods: "{{ gpushare_team_pods }}"

- name: Check the control plane and the data against the cluster
  gpushare.k8s.preflight_check:
    checks: [control_plane, cluster]
    kubeconfig: ~/.kwok/clusters/gpushare/kubeconfig.yaml
    nodes: "{{ gpushare_nodes }}"
    configs: "{{ gpushare_device_plugin_configs }}"
    team_pods: "{{ gpushare_team_pods }}"
"""

RETURN = r"""
msg:
  description: What was checked, or every problem found by the first failing check, each with its field and fix.
  returned: always
  type: str
  sample: "gpushare_nodes: lab-node-9 does not exist in the cluster. ..."
checks:
  description: The checks asked for.
  returned: always
  type: list
  elements: str
  sample: [names, input, control_plane, cluster]
inventory:
  description: What each inventory node advertises, when the input was checked.
  returned: success and the input was checked
  type: dict
  sample: {"lab-node-1": {"nvidia.com/gpu": 8}}
quota_resource_names:
  description: The resource names the team's quota limits.
  returned: success and the input was checked
  type: list
  elements: str
  sample: [nvidia.com/gpu]
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import hide_kubeconfig_credentials
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.cluster_preflight import PREFLIGHT_ARG_SPEC, run_preflight


def main(module_class=AnsibleModule):
    module = module_class(argument_spec=PREFLIGHT_ARG_SPEC, supports_check_mode=True)
    hide_kubeconfig_credentials(module)
    try:
        result = run_preflight(module.params)
    except Exception as exc:  # an unexpected failure still ends as a message, not a traceback
        module.fail_json(msg="unexpected error: %s: %s" % (type(exc).__name__, exc), exception=traceback.format_exc())
    for warning in result.pop("warnings", []):
        module.warn(warning)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
