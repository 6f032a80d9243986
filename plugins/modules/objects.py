#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: objects
short_description: Create, patch or delete Kubernetes objects with kubernetes.core's logic, in the controller
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - Does what M(kubernetes.core.k8s) does for O(state=present), O(state=patched) and O(state=absent), with the same
    options and results, by calling kubernetes.core's own service (find, create, strategic merge patch, delete,
    wait, diff). O(resource_definition) or O(src) may hold several objects; each is acted on in order.
  - Runs in the controller when the task's connection is local (an action plugin), so a task costs a fork and
    its API calls instead of a Python process that imports C(kubernetes) (about 0.8 s). On any other connection
    (a task delegated to a host that holds the kubeconfig) it runs there as a module, with the same code. The
    variable C(gpushare_in_controller=false) makes it run as a module everywhere.
  - Takes the collection's auth options (kubernetes.core's and O(request_timeout)); the C(K8S_AUTH_*) variables
    are read as kubernetes.core's modules read them, the task's C(environment) over the controller's, on either path.
  - In check mode the API server is asked for a dry run, so the diff is what the server would store.
  - Another writer (a second run of the same play, a controller) acting between this task's read and its write is
    not a failure, where M(kubernetes.core.k8s) fails or warns. An object created meanwhile (409 AlreadyExists, or a
    quota refusal while the other create completes, the object being looked for during 0.85 s, which a create a
    full quota refuses for its own reason also waits) is patched to the definition; an object deleted meanwhile (404 on
    the delete) is absent as asked, and the task reports no change for it; one deleted before its patch is created.
extends_documentation_fragment:
  - kubernetes.core.k8s_name_options
  - gpushare.k8s.wait  # before kubernetes.core.k8s_wait_options: its wait_sleep takes fractions
  - kubernetes.core.k8s_wait_options
  - kubernetes.core.k8s_delete_options
  - kubernetes.core.k8s_auth_options
  - gpushare.k8s.k8s_auth
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.idempotent
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  resource_definition:
    description:
      - The objects, as a dict, a list of dicts, or YAML text holding one or more documents, as
        M(kubernetes.core.k8s)'s option of that name. O(kind), O(api_version), O(name) and O(namespace) fill in
        what a definition leaves out.
    type: raw
    aliases: [definition, inline]
  src:
    description:
      - A file of one or more YAML documents to act on, instead of O(resource_definition).
    type: path
  state:
    description:
      - V(present) creates each object that does not exist and patches the others (strategic merge, or
        O(merge_type)); V(patched) only patches objects that exist (a missing one is a warning); V(absent) deletes.
    type: str
    default: present
    choices: [present, absent, patched]
  merge_type:
    description:
      - The patch types to try in order, as M(kubernetes.core.k8s)'s option of that name. By default strategic
        merge, then merge for custom resources.
    type: list
    elements: str
    choices: [json, merge, strategic-merge]
  force:
    description:
      - Replace an existing object instead of patching it.
    type: bool
    default: false
  hidden_fields:
    description:
      - Fields left out of the result and the diff (for example V(data) of a Secret), as M(kubernetes.core.k8s)'s
        option of that name.
    type: list
    elements: str
seealso:
  - module: kubernetes.core.k8s
  - module: gpushare.k8s.objects_info
"""

EXAMPLES = r"""
- name: Apply the objects of a manifest file, waiting until each exists
  gpushare.k8s.objects:
    src: ~/gpushare-lab/k8s/device-plugin-configs.yaml
    wait: true

- name: Create a namespace and a ConfigMap in one task
  gpushare.k8s.objects:
    definition:
      - apiVersion: v1
        kind: Namespace
        metadata:
          name: gpu-share
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: example
          namespace: gpu-share
        data:
          key: value

- name: Label a node, leaving its other labels alone
  gpushare.k8s.objects:
    state: patched
    kind: Node
    name: gpu-node-1
    definition:
      metadata:
        labels:
          example.com/pool: shared
"""

RETURN = r"""
result:
  description:
    - The object as the API server returned it (one definition), or C(results) with one entry per definition,
      each as M(kubernetes.core.k8s) returns it (C(changed), C(method), C(result), C(diff)).
  returned: success
  type: dict
method:
  description: What was done to the one object (V(create), V(update), V(replace), V(delete)).
  returned: success, one definition
  type: str
  sample: update
diff:
  description: With C(--diff), the object before and after; with several definitions, a list of those.
  returned: changed, with --diff
  type: raw
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import hide_kubeconfig_credentials
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.objects import (
    OBJECTS_ARG_SPEC,
    OBJECTS_MUTUALLY_EXCLUSIVE,
    run_objects,
)


def main(module_class=AnsibleModule):
    module = module_class(argument_spec=OBJECTS_ARG_SPEC, mutually_exclusive=OBJECTS_MUTUALLY_EXCLUSIVE, supports_check_mode=True)
    hide_kubeconfig_credentials(module)
    result = run_objects(module.params, check_mode=module.check_mode, diff=module._diff)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
