#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: api_server_check
short_description: Check that the kubeconfig exists and the API server answers
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - The first check of a play that works on a cluster, so that a missing cluster is reported once, clearly, before any
    other task fails on it.
  - Checks, in order, that the kubeconfig file exists (when O(kubeconfig) is a path; several joined with V(:) are each
    checked), that the auth options make a client (the kubeconfig parses, its context exists), and that the API server
    answers C(GET /version) within O(request_timeout) seconds.
  - Each problem is one message ending with O(fix). An API server that does not answer is named by its URL, in the
    message every module of the collection gives then (C(cannot reach the API server ... at https://127.0.0.1:6443));
    the kubeconfig's path is shown, never masked.
  - Only reads; never changes anything.
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
  fix:
    description:
      - What to do when there is no cluster to talk to, appended to the message after C(Fix:).
    type: str
    default: >-
      start the cluster (the local lab cluster: the playbook gpushare.k8s.cluster, or `make cluster` in a checkout), or set
      kubeconfig (K8S_AUTH_KUBECONFIG) to the kubeconfig of a running cluster
  fail_on_error:
    description:
      - Fail when the check fails. V(false) returns RV(ok=false) and the message instead, for a C(rescue) block that
        explains why earlier tasks failed.
    type: bool
    default: true
seealso:
  - module: kubernetes.core.k8s_cluster_info
"""

EXAMPLES = r"""
- name: Check that the lab cluster runs before anything else
  gpushare.k8s.api_server_check:
    kubeconfig: ~/.kwok/clusters/gpushare/kubeconfig.yaml
    fix: start it with ansible-playbook gpushare.k8s.cluster, or set gpushare_kubeconfig

- name: Explain a failure in a rescue block
  gpushare.k8s.api_server_check:
    fail_on_error: false
  register: cluster

- name: Say whether the cluster was the cause
  ansible.builtin.debug:
    msg: "{{ cluster.msg if not cluster.ok else 'the API server at ' ~ cluster.host ~ ' answers' }}"
"""

RETURN = r"""
ok:
  description: Whether the kubeconfig exists and the API server answered.
  returned: always
  type: bool
  sample: true
msg:
  description: What was found; when RV(ok) is false, the problem and the fix.
  returned: always
  type: str
  sample: "kubeconfig /root/.kwok/clusters/gpushare/kubeconfig.yaml does not exist, so there is no cluster to run against. Fix: ..."
host:
  description: The API server's URL, once the auth options made a client.
  returned: always
  type: str
  sample: https://127.0.0.1:32765
version:
  description: The C(gitVersion) the API server reports.
  returned: always
  type: str
  sample: v1.36.3
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.api_server import DEFAULT_FIX, api_server_errors
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import AUTH_ARG_SPEC, hide_kubeconfig_credentials


def argument_spec():
    spec = dict(
        fix=dict(type="str", default=DEFAULT_FIX),
        fail_on_error=dict(type="bool", default=True),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def main(module_class=AnsibleModule):
    module = module_class(argument_spec=argument_spec(), supports_check_mode=True)
    hide_kubeconfig_credentials(module)
    try:
        errors, info = api_server_errors(module.params, fix=module.params["fix"])
    except Exception as exc:  # an unexpected failure still ends as a message, not a traceback
        module.fail_json(msg="unexpected error: %s: %s" % (type(exc).__name__, exc), exception=traceback.format_exc())
    if errors:
        result = dict(changed=False, ok=False, msg=" ".join(errors), **info)
        if module.params["fail_on_error"]:
            module.fail_json(**result)
        module.exit_json(**result)
    module.exit_json(changed=False, ok=True, msg="the API server at %s answers (%s)" % (info["host"], info["version"]), **info)


if __name__ == "__main__":
    main()
