#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: mig_migration_report
short_description: List the workloads a MIG migration would leave without a node
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - On a MIG mixed-strategy node the GPU is advertised under profile names (C(nvidia.com/mig-1g.10gb)), never as
    C(nvidia.com/gpu). A workload that asks for C(nvidia.com/gpu) and may only run on that node then never schedules
    again, silently. Run this before turning a node MIG (describe the change with O(advertised_after)) or after it
    (the cluster already shows it) to list those workloads.
  - Workloads are Pods and the Pod templates of Deployments, StatefulSets, DaemonSets, ReplicaSets,
    ReplicationControllers, Jobs and CronJobs read from the cluster (O(cluster)), and the same kinds (and C(List)s of
    them) in manifest files (O(path)) or text (O(content)). Containers are found by the walker of the
    M(gpushare.k8s.gpu_request_check) module. Objects controlled by another workload (a Deployment's ReplicaSet and
    Pods) and finished Pods are left out; their owner is reported.
  - A node can run a workload when it matches the workload's C(nodeName), C(nodeSelector) and required node
    affinity, the workload tolerates the node's C(NoSchedule) and C(NoExecute) taints, and the node advertises at
    least what the Pod asks for (containers summed, or the largest init container). Preferred affinity, Pod
    (anti-)affinity, topology spread and what other Pods already use are not considered.
  - Only reads; never changes anything. Write the result to a file yourself if you want one.
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
  advertised_after:
    description:
      - "What nodes advertise after the change, as C({node: {resource: count}}) (for example the result of the
        P(gpushare.k8s.gpu_inventory#filter) filter). For each node named, every resource under O(resource_prefixes)
        in its C(allocatable) is replaced by these; other nodes keep what they advertise now."
      - Empty describes no change (the report then shows the cluster as it is, for use after the migration).
    type: dict
    default: {}
  labels_after:
    description:
      - "Labels nodes gain or lose with the change, as C({node: {label: value}}); a C(null) value removes the label."
    type: dict
    default: {}
  resources:
    description:
      - Resource names whose workloads are checked.
    type: list
    elements: str
    default: [nvidia.com/gpu]
  resource_prefixes:
    description:
      - Domains of the GPU resources O(advertised_after) replaces.
    type: list
    elements: str
    default: [nvidia.com/]
  cluster:
    description:
      - Read the workloads in the cluster (in O(namespaces)).
    type: bool
    default: true
  namespaces:
    description:
      - Namespaces whose workloads are read. Empty reads every namespace.
    type: list
    elements: str
    default: []
  path:
    description:
      - Manifest files to check as well (several YAML documents each).
    type: list
    elements: path
    default: []
  content:
    description:
      - Manifest text to check as well.
    type: str
  default_namespace:
    description:
      - Namespace reported for manifest objects that name none.
    type: str
    default: ""
  fail_on_stranded:
    description:
      - Fail when a workload would have no node left.
    type: bool
    default: false
seealso:
  - module: gpushare.k8s.quota_coverage
  - module: gpushare.k8s.gpu_request_check
"""

EXAMPLES = r"""
- name: Before turning lab-node-2 MIG, list the workloads that would lose their only node
  gpushare.k8s.mig_migration_report:
    kubeconfig: ~/.kwok/clusters/gpushare/kubeconfig.yaml
    advertised_after:
      lab-node-2:
        nvidia.com/mig-1g.10gb: 7
  register: migration

- name: Show the summary
  ansible.builtin.debug:
    msg: "{{ migration.msg }}"

- name: Check manifests on disk only, against the cluster's nodes after the change
  gpushare.k8s.mig_migration_report:
    cluster: false
    path:
      - deploy/inference.yaml
    default_namespace: ml
    advertised_after: "{{ gpushare_nodes | gpushare.k8s.gpu_inventory(gpushare_device_plugin_configs) }}"
    fail_on_stranded: true
"""

RETURN = r"""
ok:
  description: Whether every checked workload still has a node that can run it.
  returned: success
  type: bool
  sample: false
msg:
  description: A short human summary (one line, then one line per workload left without a node).
  returned: always
  type: str
  sample: "1 of 3 workload(s) asking for nvidia.com/gpu would have no node left:\n- ml/Deployment pinned (nvidia.com/gpu): ..."
checked:
  description: How many workloads ask for one of O(resources).
  returned: success
  type: int
  sample: 3
workloads:
  description: One entry per container and resource of every workload that no node can run after the change.
  returned: success
  type: list
  elements: dict
  contains:
    namespace:
      description: The workload's namespace (O(default_namespace) for manifests that name none).
      type: str
      sample: ml
    kind:
      description: Workload kind.
      type: str
      sample: Deployment
    name:
      description: Workload name.
      type: str
      sample: pinned
    container:
      description: Container asking for the resource.
      type: str
      sample: server
    resource:
      description: Resource asked for.
      type: str
      sample: nvidia.com/gpu
    count:
      description: Units the container asks for.
      type: int
      sample: 1
    reason:
      description: Why no node is left.
      type: str
      sample: "the nodes it may use advertise no room for 1 nvidia.com/gpu after the change: lab-node-2 (nvidia.com/mig-1g.10gb: 7)"
    nodes_before:
      description: Nodes that can run it before the change.
      type: list
      elements: str
      sample: [lab-node-2]
    stranded_by_change:
      description: Whether it had a node before the change (C(false) means it had none either way).
      type: bool
      sample: true
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.cluster_objects import ObjectLister
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import GpushareError
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.gpu_requests import WORKLOAD_KINDS
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import (
    AUTH_ARG_SPEC,
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    build_api_client,
    hide_kubeconfig_credentials,
)
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_yaml import MAX_INPUT_BYTES, ManifestError, load_documents
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.mig_migration import migration_report, report_summary


def argument_spec():
    spec = dict(
        advertised_after=dict(type="dict", default={}),
        labels_after=dict(type="dict", default={}),
        resources=dict(type="list", elements="str", default=["nvidia.com/gpu"]),
        resource_prefixes=dict(type="list", elements="str", default=["nvidia.com/"]),
        cluster=dict(type="bool", default=True),
        namespaces=dict(type="list", elements="str", default=[]),
        path=dict(type="list", elements="path", default=[]),
        content=dict(type="str"),
        default_namespace=dict(type="str", default=""),
        fail_on_stranded=dict(type="bool", default=False),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def _manifests(module):
    """Objects from O(path) and O(content), in that order."""
    documents = []
    sources = [(path, None) for path in module.params["path"]]
    if module.params["content"] is not None:
        sources.append(("content", module.params["content"]))
    for where, text in sources:
        if text is None:
            try:
                with open(where, "rb") as handle:
                    text = handle.read(MAX_INPUT_BYTES + 1)
            except OSError as exc:
                module.fail_json(msg="Cannot read %s: %s" % (where, to_native(exc.strerror or exc)))
        try:
            documents.extend(load_documents(text))
        except ManifestError as exc:
            module.fail_json(msg="Cannot read the manifest %s: %s" % (where, to_native(exc)))
    return documents


def main(module_class=AnsibleModule):
    module = module_class(argument_spec=argument_spec(), supports_check_mode=True)
    hide_kubeconfig_credentials(module)
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    params = module.params
    documents = _manifests(module)
    try:
        lister = ObjectLister(build_api_client(params))
        nodes = lister.list("Node")
        if params["cluster"]:
            for kind in WORKLOAD_KINDS:
                documents.extend(lister.list(kind, params["namespaces"] or None))
        report = migration_report(
            nodes,
            documents,
            advertised_after=params["advertised_after"],
            labels_after=params["labels_after"],
            resources=params["resources"],
            prefixes=params["resource_prefixes"],
            default_namespace=params["default_namespace"],
        )
    except (GpushareError, ManifestError) as exc:  # the collection's own refusals and failures, each with its message
        module.fail_json(msg=str(exc))
    except Exception as exc:  # an unexpected failure still ends as a message, not a traceback
        module.fail_json(msg="unexpected error: %s: %s" % (type(exc).__name__, exc), exception=traceback.format_exc())
    result = dict(changed=False, msg=report_summary(report, params["resources"]), **report)
    if params["fail_on_stranded"] and not report["ok"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
