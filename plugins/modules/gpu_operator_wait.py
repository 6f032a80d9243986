#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_operator_wait
short_description: Wait until the GPU Operator advertises what the config model predicts
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - On a cluster where the NVIDIA GPU Operator (or the lab cluster's stand-in) owns node status and the GPU labels, waits
    until every named Node shows what the collection's config model predicts, or until the operator is done with a Node
    that does not; it never writes.
  - Checks, per Node, C(nvidia.com/mig.config.state=success) when a MIG layout is expected, every expected resource in
    both C(status.capacity) and C(status.allocatable), that no other C(nvidia.com/*) resource is advertised, and the
    gpu-feature-discovery labels.
  - The prediction is for NVIDIA's k8s-device-plugin v0.18.0, the version the config model is held to (its
    differential tests run that release's device plugin and gpu-feature-discovery). The wait reads the versions the
    cluster runs from the images of the operand DaemonSets C(nvidia-device-plugin-daemonset) and
    C(gpu-feature-discovery) in O(operator_namespace) (a Node's own operand Pod's image where one runs); an image that
    is not a tagged C(k8s-device-plugin) release is "version unknown". A prediction for another or an unknown version
    is said to be untested, in a progress line at the start and in the failure.
  - A Node that does not match is judged once the operator is done with it by its own signals, then O(settle) seconds
    in which nothing the Node shows changes. The signals are the MIG manager's state for the layout the Node is
    labelled with (not C(pending) or C(rebooting)), the operand DaemonSets' rollout (the controller has seen their
    latest spec; the Node's device-plugin and gpu-feature-discovery Pods ready, of the current Pod template, not
    terminating), and no GPU client paused for a MIG change. Such a Node fails the wait at once, with a report per
    resource (or label) of what was predicted, what was advertised and the version of NVIDIA's component that
    advertised it.
  - Fails at once when the MIG manager reports C(failed) for the layout a Node that does not match is labelled with,
    with its reason (the lab stand-in's record of mig-parted's message, else the error lines of the Node's
    C(nvidia-mig-manager) Pod log). A C(failed) state found when the wait starts must last a few seconds (a previous
    layout's failure gives way to C(pending)).
  - Fails after O(timeout) seconds, when the operator was not done with a Node by then, with, per Node, what was
    expected, what was seen, what the wait still waited for and the likely cause (the ClusterPolicy points at another
    ConfigMap, the config label names a key the ConfigMap lacks, the mig-parted ConfigMap is missing, or no operator
    answered).
  - Reading the operand DaemonSets and Pods needs C(list) on C(daemonsets) and C(pods) in O(operator_namespace); when
    refused, the versions are unknown and the Pods' readiness is not checked (the result's RV(notes) says so), and the
    MIG manager's log needs C(get) on C(pods/log).
  - The expectations come from the P(gpushare.k8s.gpu_operator_expected#filter) filter.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpushare.k8s.k8s_auth
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - In check mode the Nodes are read once, without waiting, and the differences are returned without failing
        (a check run has not written the configuration the operator would act on).
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  nodes:
    description:
      - "What each Node must show: a mapping of Node name to C({resources, labels, mig_config}) as the
        P(gpushare.k8s.gpu_operator_expected#filter) filter returns it."
    type: dict
    required: true
  timeout:
    description:
      - Seconds to wait for every Node to match. The wait returns as soon as they do, so a long timeout costs nothing
        when the operator is quick.
      - The default fits a device-plugin re-advertisement on a real cluster (the plugin restarts, re-registers, the
        kubelet updates the status; GFD relabels). A MIG reconfiguration on a real cluster takes minutes (the MIG
        manager evicts the GPU clients, may reboot the node), so give it 1200 or more, as P(gpushare.k8s.mig_node#role)
        does.
      - The task's C(timeout) keyword (a play's, for example) cuts the task even while it waits, so keep it above this
        value (the collection's roles set it to this value plus 60 on their wait tasks).
    type: int
    default: 300
  settle:
    description:
      - Seconds a Node that does not match must stay unchanged (its C(nvidia.com/*) capacity, allocatable and labels,
        its operand Pods), with the operator's signals of completion in place, before the wait judges it and fails.
      - The kubelet writes a re-registered device plugin's devices into the Node's status on its next status update
        (every 10 seconds by default), so the default is twice that. A Node that matches is done at once.
    type: float
    default: 20.0
  interval:
    description: Seconds between two reads of the Nodes.
    type: float
    default: 0.5
  progress_interval:
    description:
      - While Nodes are pending, every this many seconds one line names each pending Node, its
        C(nvidia.com/mig.config.state), what it advertises against what is expected and what the wait waits for on it.
        C(0) prints none (the line on untested versions at the start is printed all the same).
      - The lines are shown in the run's output when the module runs in the controller (its action plugin, with a
        local connection, the default); as a module process on another host they are only returned in RV(progress).
    type: float
    default: 30.0
  cluster_policy:
    description: Name of the ClusterPolicy, read to explain a mismatch.
    type: str
    default: cluster-policy
  operator_namespace:
    description: The operator's namespace, where the ConfigMaps the ClusterPolicy names and the operand DaemonSets live.
    type: str
    default: gpu-operator
  device_plugin_configmap:
    description: The device-plugin ConfigMap the ClusterPolicy should name (a different name is reported as the cause).
    type: str
seealso:
  - module: gpushare.k8s.node_resources
  - name: GPU Operator, time-slicing and MIG configuration
    description: The ClusterPolicy fields and node labels the operator acts on.
    link: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html
"""

EXAMPLES = r"""
- name: Wait for the operator to advertise the lab's GPUs
  gpushare.k8s.gpu_operator_wait:
    nodes: "{{ gpushare_nodes | gpushare.k8s.gpu_operator_expected(gpushare_device_plugin_configs) }}"
    device_plugin_configmap: device-plugin-configs
    timeout: 300
"""

RETURN = r"""
matched:
  description: Whether every Node matched (in check mode, whether it already does).
  returned: success
  type: bool
  sample: true
elapsed:
  description: Seconds spent waiting.
  returned: success
  type: float
  sample: 0.61
differences:
  description: Per Node that does not match, a list of C([what, expected, seen]).
  returned: always
  type: dict
  sample: {"lab-node-1": [["capacity[nvidia.com/gpu]", "8", "2"]]}
settled:
  description: The Nodes the operator was done with that do not match (the wait's verdict), each with its differences.
  returned: failure
  type: dict
  sample: {"lab-node-3": [["capacity[nvidia.com/mig-1g.18gb]", "7", "absent"]]}
versions:
  description:
    - Per operand (C(nvidia-device-plugin), C(gpu-feature-discovery)), what its DaemonSet's image says - C(daemonset),
      C(image), C(version) (C(null) when unknown, with the reason in C(problem)) and C(tested) (whether it is the version
      the config model is held to).
  returned: always
  type: dict
  sample: {"nvidia-device-plugin": {"daemonset": "gpu-operator/nvidia-device-plugin-daemonset", "image": "gpushare-lab/k8s-device-plugin:v0.17.4",
           "version": "v0.17.4", "problem": null, "tested": false}}
model_version:
  description: The k8s-device-plugin release the config model is held to, which the prediction is for.
  returned: always
  type: str
  sample: v0.18.0
notes:
  description: What the wait could not read (the operand DaemonSets or Pods, when refused), and so did not check.
  returned: always
  type: list
  elements: str
  sample: []
progress:
  description: The progress lines written while waiting (see O(progress_interval)).
  returned: always
  type: list
  elements: str
  sample: ["waiting for the GPU operator: 30s of 1200s, 1 of 3 node(s) pending: lab-node-2 mig.config.state=pending
    (nvidia.com/mig.config.state expected success, seen pending)"]
nodes:
  description: Per Node, its GPU resources in allocatable and its MIG state as last read.
  returned: success
  type: dict
  sample: {"lab-node-2": {"allocatable": {"nvidia.com/mig-1g.10gb": "7"}, "mig_state": "success"}}
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator as _op
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import operator_wait as _wait
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import GpushareError
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.operator_standin import StandIn
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import (
    AUTH_ARG_SPEC,
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    build_api_client,
    hide_kubeconfig_credentials,
)
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.nodes import CoreNodeApi
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.operator_wait import OperandReader


def argument_spec():
    spec = dict(
        nodes=dict(type="dict", required=True),
        timeout=dict(type="int", default=300),
        interval=dict(type="float", default=0.5),
        settle=dict(type="float", default=_wait.DEFAULT_SETTLE),
        progress_interval=dict(type="float", default=30.0),
        cluster_policy=dict(type="str", default="cluster-policy"),
        operator_namespace=dict(type="str", default="gpu-operator"),
        device_plugin_configmap=dict(type="str"),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def _summary(nodes):
    summary = {}
    for name, node in nodes.items():
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        summary[name] = {
            "allocatable": {key: value for key, value in sorted(allocatable.items()) if key.startswith("nvidia.com/")},
            "mig_state": ((node.get("metadata") or {}).get("labels") or {}).get(_op.MIG_STATE_LABEL),
        }
    return summary


# Set by the action plugin in the controller: a function that shows one line in the run's output.
show_progress = None


def main(module_class=AnsibleModule):
    module = module_class(argument_spec=argument_spec(), supports_check_mode=True)
    hide_kubeconfig_credentials(module)
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    params = module.params
    expected = params["nodes"]
    try:
        for name, want in expected.items():
            if not isinstance(want, dict) or not isinstance(want.get("resources"), dict):
                raise _op.OperatorError("nodes.%s" % name, "must be a mapping with resources (and labels, mig_config)",
                                        "pass the gpu_operator_expected filter's result")
        if params["settle"] < 0 or params["interval"] <= 0:
            raise _op.OperatorError("settle" if params["settle"] < 0 else "interval", "must be positive (settle may be 0)",
                                    "give a number of seconds")
        api_client = build_api_client(params)
        nodes_api = CoreNodeApi(api_client)
        reader = OperandReader(api_client, params["operator_namespace"])

        def read():
            snapshot = reader.read()
            snapshot["nodes"] = {node["metadata"]["name"]: node for node in nodes_api.list_nodes()}
            return snapshot

        progress = []

        def report(line):
            progress.append(line)
            if show_progress is not None:
                show_progress(line)

        timeout = 0 if module.check_mode else params["timeout"]
        result = _wait.wait_for_nodes(read, expected, timeout, params["interval"], settle=params["settle"], progress=report,
                                      progress_interval=params["progress_interval"], namespace=params["operator_namespace"])
        common = dict(elapsed=result["elapsed"], differences=result["differences"], nodes=_summary(result["nodes"]), progress=progress,
                      versions=result["versions"], model_version=_wait.MODEL_VERSION, notes=reader.notes)
        if result["matched"] or module.check_mode:
            module.exit_json(changed=False, matched=result["matched"], **common)
        standin = StandIn(api_client, params["operator_namespace"])
        policy = standin.cluster_policy()
        names = {params["device_plugin_configmap"]}
        if policy is not None:
            spec = policy.get("spec") or {}
            names.add(((spec.get("devicePlugin") or {}).get("config") or {}).get("name"))
            names.add(((spec.get("migManager") or {}).get("config") or {}).get("name"))
        configmaps = {}
        for name in sorted(n for n in names if isinstance(n, str) and n):
            data = standin.configmap_data(name)
            if data is not None:
                configmaps[name] = data
        for name, failure in result["failed"].items():
            if not failure.get("reason"):
                pod, text = reader.mig_manager_log(name)
                failure["reason"] = _wait.mig_manager_reason(text)
                if pod and not failure["reason"]:
                    failure["where"] = "the MIG manager recorded no reason on the node; see kubectl -n %s logs %s" % (params["operator_namespace"], pod)
                elif failure["reason"]:
                    failure["reason"] = "the last error lines of %s/%s's log: %s" % (params["operator_namespace"], pod, failure["reason"])
        causes = {}
        for name in set(result["differences"]) | set(result["failed"]):
            node = result["nodes"].get(name) or {"metadata": {"name": name}}
            want = dict(expected[name], configmap=params["device_plugin_configmap"])
            if name in result["failed"]:
                causes[name] = _wait.mig_failure_causes(node, policy, configmaps, params["operator_namespace"])
                continue
            causes[name] = _op.likely_causes(node, want, policy, configmaps, params["operator_namespace"])
            if name in result["settled"]:
                causes[name] = _wait.settled_causes(node, want, causes[name], result["changed"].get(name), result["node_versions"].get(name))
        msg = _wait.describe_failure(result, expected, causes, params["timeout"], settle=params["settle"], namespace=params["operator_namespace"])
        if reader.notes:
            msg += " Not checked: %s." % "; ".join(reader.notes)
        module.fail_json(msg=msg, matched=False, settled=result["settled"], **common)
    except GpushareError as exc:  # the collection's own refusals and failures, each with its message
        module.fail_json(msg=str(exc), differences={}, progress=[], versions={}, model_version=_wait.MODEL_VERSION, notes=[])
    except Exception as exc:  # an unexpected failure still ends as a message, not a traceback
        module.fail_json(msg="unexpected error: %s: %s" % (type(exc).__name__, exc), exception=traceback.format_exc(), differences={},
                         progress=[], versions={}, model_version=_wait.MODEL_VERSION, notes=[])


if __name__ == "__main__":
    main()
