#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: dra_resource_slices
short_description: (lab only) Publish simulated GPUs as DRA ResourceSlices, one pool per node
version_added: 1.0.0
description:
  - The Dynamic Resource Allocation counterpart of M(gpushare.k8s.node_resources). For each node it publishes the
    ResourceSlice pool a GPU DRA driver would (names, attributes and counters of NVIDIA's k8s-dra-driver-gpu), so the
    real kube-scheduler allocates ResourceClaims against them and records its choice in each claim's status.
  - "Three kinds of node: whole GPUs (one device per GPU, with its C(memory) capacity); a MIG node (partitionable
    devices: every MIG profile the product supports at every placement, all consuming the GPU's shared counters,
    namely its compute slices and the memory slices each placement covers, so the scheduler never over-commits
    the GPU); a shared node (each GPU allows multiple allocations, its C(memory) capacity has a request policy of
    one share, memory divided by the C(replicas) of O(nodes[].shared))."
  - A pool is named after its node and written in as many slices as the API's limits ask (counter sets and devices
    in separate slices, at most 64 devices with counters or 128 without per slice), named C(<node>-<driver>-<n>),
    labelled C(app.kubernetes.io/managed-by=gpushare.k8s) and owned by the Node (deleted with it).
  - A pool that already holds what is asked is left alone (its generation too). A pool that differs is written
    whole under the next pool generation, then its stale slices are deleted. Conflicts and transient errors are
    retried on a fresh read of the pool.
  - Slices of other drivers are never read for writing; pools of this driver on nodes not listed are only
    removed with O(prune=true), and then only when this collection published them.
  - Every node is validated and read before the first write. Nodes without the annotation
    C(kwok.x-k8s.io/node=fake) are refused unless O(allow_real_nodes=true).
author:
  - gpushare.k8s maintainers (@gpushare)
options:
  nodes:
    description:
      - The nodes to publish (or, with O(state=absent), to remove the pools of).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Node name; also the pool's name.
        type: str
        required: true
      gpus:
        description: Physical GPUs of the node (1 to 64).
        type: int
        required: true
      product:
        description:
          - GPU product (a product of the MIG geometry table, e.g. V(NVIDIA-A100-SXM4-80GB)); its memory and MIG
            geometry are the collection's. Defaults to O(product).
        type: str
      mig:
        description: Publish the GPUs as partitionable MIG devices.
        type: bool
        default: false
      shared:
        description: Let several claims share each GPU. C(replicas) (2 to 64) claims fit on one GPU.
        type: dict
  product:
    description: Product of every node that names none.
    type: str
    default: NVIDIA-A100-SXM4-80GB
  driver:
    description: The DRA driver name the slices are published under.
    type: str
    default: gpu.nvidia.com
  state:
    description:
      - V(present) publishes each node's pool; V(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  prune:
    description:
      - Also delete the pools of O(driver) on nodes not in O(nodes) that this collection published
        (label C(app.kubernetes.io/managed-by=gpushare.k8s)), for example after a node left the inventory.
    type: bool
    default: false
  allow_real_nodes:
    description:
      - Also publish on Nodes without the annotation C(kwok.x-k8s.io/node=fake). On a real cluster the GPU's own
        DRA driver publishes these pools, so this is off by default.
    type: bool
    default: false
  parallelism:
    description: How many pools are written at once (and the size of the HTTP connection pool), 1 to 256.
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
      - Reads the nodes and the driver's slices and predicts C(changed) and the diff; writes nothing.
  diff_mode:
    support: full
    details:
      - The diff holds, per changed pool, each slice's spec before and after.
  idempotent:
    support: full
requirements:
  - kubernetes >= 24.2.0 (Python library)
  - Kubernetes 1.34 or later (C(resource.k8s.io/v1)); MIG nodes need C(DRAPartitionableDevices), shared nodes
    C(DRAConsumableCapacity) (both on by default from 1.36)
notes:
  - Driver versions and GPU UUIDs are made up (stable across runs); there is no GPU.
seealso:
  - module: gpushare.k8s.node_resources
  - name: Dynamic Resource Allocation
    description: Kubernetes documentation.
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/
"""

EXAMPLES = r"""
- name: Publish whole, MIG and shared GPUs on three kwok nodes
  gpushare.k8s.dra_resource_slices:
    kubeconfig: ~/.kwok/clusters/gpushare/kubeconfig.yaml
    nodes:
      - name: dra-node-0
        gpus: 2
      - name: dra-node-1
        gpus: 2
        shared:
          replicas: 4
      - name: dra-node-2
        gpus: 1
        mig: true

- name: Remove a node's pool
  gpushare.k8s.dra_resource_slices:
    nodes:
      - name: dra-node-0
        gpus: 2
    state: absent
"""

RETURN = r"""
changed_pools:
  description: Names of the pools that were written or deleted (or would be, in check mode).
  returned: success
  type: list
  elements: str
  sample: [dra-node-2]
pools:
  description: One entry per pool, in the order of O(nodes), then pruned pools.
  returned: success, and on a failed write
  type: list
  elements: dict
  contains:
    name:
      description: Pool (node) name.
      type: str
      returned: always
    changed:
      description: Whether the pool was (or would be) written or deleted.
      type: bool
      returned: always
    generation:
      description: The pool's generation after the run (the next one in check mode when it changes); null when removed.
      type: int
      returned: always
    slices:
      description: Names of the pool's slices after the run.
      type: list
      elements: str
      returned: always
      sample: [dra-node-2-gpu.nvidia.com-0, dra-node-2-gpu.nvidia.com-1]
    devices:
      description: Devices the pool publishes.
      type: int
      returned: always
      sample: 18
    created:
      description: Slices created.
      type: list
      elements: str
      returned: always
    updated:
      description: Slices replaced with the new generation.
      type: list
      elements: str
      returned: always
    deleted:
      description: Stale slices deleted.
      type: list
      elements: str
      returned: always
    error:
      description: Why the pool could not be written.
      type: str
      returned: when writing this pool failed
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import (
    AUTH_ARG_SPEC,
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    build_api_client,
)
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import GpushareError
from ansible_collections.gpushare.k8s.plugins.module_utils.dra.devices import (
    DEFAULT_PARALLELISM,
    DRIVER,
    STATES,
    DraWriteError,
    ResourceSliceApi,
    apply_resource_slices,
    check_parallelism,
)


def argument_spec():
    spec = dict(
        nodes=dict(type="list", elements="dict", required=True, options=dict(
            name=dict(type="str", required=True),
            gpus=dict(type="int", required=True),
            product=dict(type="str"),
            mig=dict(type="bool", default=False),
            shared=dict(type="dict"),
        )),
        product=dict(type="str", default="NVIDIA-A100-SXM4-80GB"),
        driver=dict(type="str", default=DRIVER),
        state=dict(type="str", default="present", choices=list(STATES)),
        prune=dict(type="bool", default=False),
        allow_real_nodes=dict(type="bool", default=False),
        parallelism=dict(type="int", default=DEFAULT_PARALLELISM),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def _node(entry):
    """The module's suboptions as the inventory writes a node (unset keys dropped)."""
    node = {"name": entry["name"], "gpus": entry["gpus"]}
    if entry.get("product"):
        node["product"] = entry["product"]
    if entry.get("mig"):
        node["mig"] = True
    if entry.get("shared") is not None:
        node["shared"] = entry["shared"]
    return node


def main(module_class=AnsibleModule):
    module = module_class(argument_spec=argument_spec(), supports_check_mode=True)
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    params = module.params
    try:
        check_parallelism(params["parallelism"])
        api = ResourceSliceApi(build_api_client(params, pool_maxsize=params["parallelism"]))
        results = apply_resource_slices(
            api,
            [_node(entry) for entry in params["nodes"]],
            driver=params["driver"],
            state=params["state"],
            prune=params["prune"],
            check_mode=module.check_mode,
            allow_real_nodes=params["allow_real_nodes"],
            parallelism=params["parallelism"],
            default_product=params["product"],
        )
    except DraWriteError as exc:  # some pools may be written: say which
        changed = [result["name"] for result in exc.results if result["changed"] and "error" not in result]
        module.fail_json(msg=str(exc), changed=bool(changed), changed_pools=changed, pools=_public(exc.results))
    except GpushareError as exc:  # refused before any write, or no client: nothing changed
        module.fail_json(msg=str(exc), changed=False)
    except Exception as exc:  # an unexpected failure still ends as a message, not a traceback
        module.fail_json(msg="unexpected error: {0}: {1}".format(type(exc).__name__, exc), exception=traceback.format_exc())

    changed = [result["name"] for result in results if result["changed"]]
    outcome = dict(changed=bool(changed), changed_pools=changed, pools=_public(results))
    if module._diff:
        outcome["diff"] = {
            "before": {result["name"]: result["before"] for result in results if result["changed"]},
            "after": {result["name"]: result["after"] for result in results if result["changed"]},
        }
    module.exit_json(**outcome)


def _public(results):
    return [{key: value for key, value in result.items() if key not in ("before", "after")} for result in results]


if __name__ == "__main__":
    main()
