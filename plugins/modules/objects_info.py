#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: objects_info
short_description: Read Kubernetes objects, several at once, with kubernetes.core's logic, in the controller
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - Does what M(kubernetes.core.k8s_info) does, with the same options and results, by calling kubernetes.core's own
    service; or, given O(queries), several such reads in one task, returned in RV(results) as a looped
    M(kubernetes.core.k8s_info) task registers them.
  - Runs in the controller when the task's connection is local, as M(gpushare.k8s.objects) does, and as a module
    on any other connection.
extends_documentation_fragment:
  - gpushare.k8s.wait  # before kubernetes.core.k8s_wait_options: its wait_sleep takes fractions
  - kubernetes.core.k8s_wait_options
  - kubernetes.core.k8s_auth_options
  - gpushare.k8s.k8s_auth
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.info_module
  - gpushare.k8s.attributes.idempotent
attributes:
  idempotent:
    support: full
options:
  kind:
    description: The kind of the objects to read (one read; or use O(queries)).
    type: str
  api_version:
    description: Their C(apiVersion).
    type: str
    default: v1
    aliases: [api, version]
  name:
    description: The object's name; all objects of the kind when unset.
    type: str
  namespace:
    description: The namespace; every namespace when unset.
    type: str
  label_selectors:
    description: Label selectors the objects must match.
    type: list
    elements: str
    default: []
  field_selectors:
    description: Field selectors the objects must match.
    type: list
    elements: str
    default: []
  names:
    description:
      - Several objects of one O(kind) by name, one read each over one connection, with the other options shared.
      - Returns RV(results), one entry per name, as a task looping over the names would register.
      - Mutually exclusive with O(name) and O(queries).
    type: list
    elements: str
  queries:
    description: Several reads, each with the options of one read; the wait options apply to each.
    type: list
    elements: dict
    suboptions:
      kind:
        description: The kind of the objects to read.
        type: str
        required: true
      api_version:
        description: Their C(apiVersion).
        type: str
        default: v1
        aliases: [api, version]
      name:
        description: The object's name; all objects of the kind when unset.
        type: str
      namespace:
        description: The namespace; every namespace when unset.
        type: str
      label_selectors:
        description: Label selectors the objects must match.
        type: list
        elements: str
        default: []
      field_selectors:
        description: Field selectors the objects must match.
        type: list
        elements: str
        default: []
  hidden_fields:
    description: Fields left out of the returned objects.
    type: list
    elements: str
seealso:
  - module: kubernetes.core.k8s_info
  - module: gpushare.k8s.objects
"""

EXAMPLES = r"""
- name: Read the nodes
  gpushare.k8s.objects_info:
    kind: Node
  register: nodes

- name: Read the nodes, a ConfigMap and a ResourceQuota in one task
  gpushare.k8s.objects_info:
    queries:
      - kind: Node
      - {kind: ConfigMap, namespace: gpu-share, name: device-plugin-configs}
      - {kind: ResourceQuota, namespace: team-a, name: team-a-gpu}
  register: cluster

- name: Wait until two Pods are scheduled (one connection; results as a loop over the names registers)
  gpushare.k8s.objects_info:
    kind: Pod
    namespace: gpu-share
    names: [plain-gpu, mig-small]
    wait: true
    wait_condition:
      type: PodScheduled
      status: "True"
    wait_sleep: 1
"""

RETURN = r"""
resources:
  description: The objects found (one read).
  returned: success, without queries or names
  type: list
  elements: dict
api_found:
  description: Whether the API server serves the kind (one read).
  returned: success, without queries
  type: bool
results:
  description: One entry per query (or name), in order, with the query as C(item), C(resources) and C(api_found).
  returned: success, with queries or names
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import hide_kubeconfig_credentials
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.objects import (
    OBJECTS_INFO_ARG_SPEC,
    OBJECTS_INFO_MUTUALLY_EXCLUSIVE,
    OBJECTS_INFO_REQUIRED_ONE_OF,
    run_objects_info,
)


def main(module_class=AnsibleModule):
    module = module_class(
        argument_spec=OBJECTS_INFO_ARG_SPEC,
        mutually_exclusive=OBJECTS_INFO_MUTUALLY_EXCLUSIVE,
        required_one_of=OBJECTS_INFO_REQUIRED_ONE_OF,
        supports_check_mode=True,
    )
    hide_kubeconfig_credentials(module)
    result = run_objects_info(module.params, check_mode=module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
