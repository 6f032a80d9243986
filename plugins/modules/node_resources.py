#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: node_resources
short_description: (lab only) Set or remove extended resources in Node status
version_added: 1.0.0
description:
  - Sets or removes extended resources (for example V(nvidia.com/gpu)) in the C(status.capacity) and
    C(status.allocatable) of Kubernetes Nodes, through the Node C(status) subresource, which
    M(kubernetes.core.k8s) cannot patch.
  - Only the named resources are touched, with a JSON merge patch; every other key of the Node status
    (C(cpu), C(memory), C(pods), other extended resources, conditions) is kept.
  - Everything is validated and every target Node is read before the first write. Changed Nodes are
    patched concurrently; conflicts with other writers are retried on a fresh read of the Node, and
    transient API errors (HTTP 429 and 5xx, connections refused or cut) with a short backoff.
  - Meant for kwok Nodes (annotation C(kwok.x-k8s.io/node=fake)), which have no kubelet or device
    plugin. Other Nodes are refused unless O(allow_real_nodes=true).
  - With O(nodes), also sets or removes Node labels, so one task labels and advertises every Node of a role.
author:
  - gpushare.k8s maintainers (@gpushare)
options:
  name:
    description:
      - Names of the Nodes to change. Every Node must exist.
      - Exactly one of O(name), O(label_selector) and O(nodes) is required.
    type: list
    elements: str
    aliases: [names, node]
  label_selector:
    description:
      - Label selector choosing the Nodes to change, for example V(gpushare.example.com/gpu=true).
      - An empty string selects every Node.
      - Exactly one of O(name), O(label_selector) and O(nodes) is required.
    type: str
  nodes:
    description:
      - One entry per Node, each with its own changes, so that a role labels and advertises all its Nodes in one
        task. Every Node must exist (they are read in one request before the first write).
      - Exactly one of O(name), O(label_selector) and O(nodes) is required; with O(nodes), O(resources) and
        O(state) are not used.
      - Each Node's labels are written first (a merge patch of C(metadata.labels)), then its status. Labels may be
        written on any Node; resources only on kwok Nodes unless O(allow_real_nodes=true).
    type: list
    elements: dict
    suboptions:
      name:
        description: The Node's name.
        type: str
        required: true
      resources:
        description: Extended resources to set, resource name to count, as O(resources) with O(state=present).
        type: dict
      remove_resources:
        description: Extended resources to remove from the Node status.
        type: list
        elements: str
      labels:
        description:
          - Labels to set, key to value (a string). A value of V(null) removes the label. Other labels are kept.
        type: dict
  resources:
    description:
      - "With O(state=present), a mapping of extended resource name to count, for example
        V({\"nvidia.com/gpu\": 8}). Counts are non-negative integers, not strings."
      - With O(state=absent), a list of the resource names to remove (a mapping is accepted too;
        its values are ignored).
      - Names must carry a domain prefix (V(example.com/gpu)). V(cpu), V(memory), V(pods) and names
        in the V(kubernetes.io) domain are refused.
      - Required with O(name) or O(label_selector).
    type: raw
  state:
    description:
      - V(present) sets the resources to the given counts.
      - V(absent) removes the resources from the Node status.
    type: str
    choices: [present, absent]
    default: present
  fields:
    description:
      - Which lists of the Node status to change.
      - Write both unless you know why. With no kubelet, nothing copies C(capacity) into
        C(allocatable), and the scheduler reads C(allocatable).
    type: list
    elements: str
    choices: [capacity, allocatable]
    default: [capacity, allocatable]
  allow_real_nodes:
    description:
      - Also write to Nodes without the annotation C(kwok.x-k8s.io/node=fake).
      - On a real cluster the device plugin owns these numbers and overwrites them, so this is off
        by default.
    type: bool
    default: false
  allow_no_match:
    description:
      - With O(label_selector), succeed without changes when no Node matches, instead of failing.
    type: bool
    default: false
  parallelism:
    description:
      - How many Nodes are patched at once (and the size of the HTTP connection pool).
      - From V(1) to V(256).
    type: int
    default: 16
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpushare.k8s.k8s_auth
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - Reads the Nodes and predicts C(changed) and the diff; writes nothing.
  diff_mode:
    support: full
    details:
      - The diff lists, per changed Node, the managed resources before and after.
  idempotent:
    support: full
requirements:
  - kubernetes >= 24.2.0 (Python library)
notes:
  - Values in the results are Kubernetes quantity strings, as the API server stores them.
  - A value that is already equal as a quantity (V(1k) for V(1000)) is left as it is.
seealso:
  - module: kubernetes.core.k8s_info
  - name: Extended resources for a Node
    description: Advertising extended resources through the Node status subresource.
    link: https://kubernetes.io/docs/tasks/administer-cluster/extended-resource-node/
"""

EXAMPLES = r"""
- name: Advertise 8 shared GPU slots on the lab nodes
  gpushare.k8s.node_resources:
    kubeconfig: ~/.kwok/clusters/gpushare/kubeconfig.yaml
    name:
      - lab-node-0
      - lab-node-1
    resources:
      nvidia.com/gpu: 8

- name: Advertise MIG devices on every node labelled for MIG
  gpushare.k8s.node_resources:
    label_selector: gpushare.example.com/mig=true
    resources:
      nvidia.com/mig-1g.10gb: 7

- name: Label each node with its device-plugin config and advertise its slots, in one task
  gpushare.k8s.node_resources:
    nodes:
      - name: lab-node-0
        labels:
          nvidia.com/device-plugin.config: shared
        resources:
          nvidia.com/gpu: 8
      - name: lab-node-2
        labels:
          nvidia.com/mig.strategy: mixed
        resources:
          nvidia.com/mig-1g.10gb: 7
        remove_resources: [nvidia.com/gpu]

- name: Remove the GPU resources again
  gpushare.k8s.node_resources:
    name: lab-node-0
    state: absent
    resources:
      - nvidia.com/gpu
      - nvidia.com/mig-1g.10gb

- name: Set the connection once for this collection's and kubernetes.core's tasks (works on a play too)
  module_defaults:
    group/gpushare.k8s.k8s:
      kubeconfig: ~/.kwok/clusters/gpushare/kubeconfig.yaml
  block:
    - name: Preview the change without writing
      gpushare.k8s.node_resources:
        label_selector: type=kwok
        resources:
          example.com/foo: 2
      check_mode: true
      register: preview

    - name: Change only allocatable
      gpushare.k8s.node_resources:
        name: lab-node-2
        fields: [allocatable]
        resources:
          example.com/foo: 2
"""

RETURN = r"""
changed_nodes:
  description: Names of the Nodes that were changed (or would be, in check mode).
  returned: success
  type: list
  elements: str
  sample: [lab-node-0]
nodes:
  description: One entry per target Node, in the order of O(name) or sorted by name for O(label_selector).
  returned: success, and on a failed write
  type: list
  elements: dict
  contains:
    name:
      description: Node name.
      type: str
      returned: always
      sample: lab-node-0
    changed:
      description: Whether this Node's managed resources changed (would change, in check mode).
      type: bool
      returned: always
      sample: true
    before:
      description:
        - The managed resources per field before the run. A resource that was not set is left out.
        - With O(nodes) entries that set labels, also C(labels), the managed labels (a label that was not set is
          left out).
      type: dict
      returned: always
      sample: {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"}}
    after:
      description:
        - The managed resources per field after the run (the prediction in check mode).
      type: dict
      returned: always
      sample: {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}
    error:
      description: Why this Node could not be written.
      type: str
      returned: when writing this Node failed
      sample: "HTTP 403: nodes \"lab-node-0\" is forbidden"
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpushare.k8s.plugins.module_utils.errors import GpushareError
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import (
    AUTH_ARG_SPEC,
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    build_api_client,
    hide_kubeconfig_credentials,
)
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.nodes import CoreNodeApi
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.node_status import (
    DEFAULT_FIELDS,
    DEFAULT_PARALLELISM,
    FIELDS,
    STATES,
    NodeWriteError,
    apply_node_resources,
    check_parallelism,
)


def argument_spec():
    spec = dict(
        name=dict(type="list", elements="str", aliases=["names", "node"]),
        label_selector=dict(type="str"),
        nodes=dict(type="list", elements="dict", options=dict(
            name=dict(type="str", required=True),
            resources=dict(type="dict"),
            remove_resources=dict(type="list", elements="str"),
            labels=dict(type="dict"),
        )),
        resources=dict(type="raw"),
        state=dict(type="str", default="present", choices=list(STATES)),
        fields=dict(type="list", elements="str", default=list(DEFAULT_FIELDS), choices=list(FIELDS)),
        allow_real_nodes=dict(type="bool", default=False),
        allow_no_match=dict(type="bool", default=False),
        parallelism=dict(type="int", default=DEFAULT_PARALLELISM),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def build_diff(results):
    before = {}
    after = {}
    for result in results:
        if result["changed"]:
            before[result["name"]] = result["before"]
            after[result["name"]] = result["after"]
    return {"before": before, "after": after}


def main(module_class=AnsibleModule):
    module = module_class(
        argument_spec=argument_spec(),
        mutually_exclusive=[("name", "label_selector", "nodes"), ("nodes", "resources")],
        required_one_of=[("name", "label_selector", "nodes")],
        required_by={"name": "resources", "label_selector": "resources"},
        supports_check_mode=True,
    )
    hide_kubeconfig_credentials(module)
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)

    params = module.params
    request = dict(
        resources=params["resources"],
        state=params["state"],
        names=params["name"],
        label_selector=params["label_selector"],
        nodes=params["nodes"],
        fields=params["fields"],
        check_mode=module.check_mode,
        allow_real_nodes=params["allow_real_nodes"],
        allow_no_match=params["allow_no_match"],
        parallelism=params["parallelism"],
    )

    try:
        check_parallelism(params["parallelism"])
        api = CoreNodeApi(build_api_client(params, pool_maxsize=params["parallelism"]))
        results = apply_node_resources(api, **request)
    except NodeWriteError as exc:  # some nodes may be written: say which
        changed_nodes = [r["name"] for r in exc.results if r["changed"]]
        module.fail_json(
            msg=str(exc),
            changed=bool(changed_nodes),
            changed_nodes=changed_nodes,
            nodes=exc.results,
        )
    except GpushareError as exc:  # refused before any write, or no client: nothing changed
        module.fail_json(msg=str(exc), changed=False)
    except Exception as exc:  # an unexpected failure still ends as a message, not a traceback
        module.fail_json(
            msg="unexpected error: {0}: {1}".format(type(exc).__name__, exc),
            exception=traceback.format_exc(),
        )

    changed_nodes = [r["name"] for r in results if r["changed"]]
    outcome = dict(changed=bool(changed_nodes), changed_nodes=changed_nodes, nodes=results)
    if module._diff:
        outcome["diff"] = build_diff(results)
    module.exit_json(**outcome)


if __name__ == "__main__":
    main()
