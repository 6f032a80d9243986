#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: quota_coverage
short_description: Find GPU resource names a namespace's quota does not cover
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - Reads every Node's C(status.allocatable) and the cluster's ResourceQuotas, and reports, for each namespace with a GPU
    quota, the GPU resource names advertised in the cluster that its quotas leave uncovered.
  - A ResourceQuota counts an extended resource only through a C(requests.<name>) key, and each name on its own. A team
    whose quota limits C(requests.nvidia.com/gpu) can still run as many Pods asking for C(nvidia.com/gpu.shared) or
    C(nvidia.com/mig-1g.10gb) as the nodes hold. Every uncovered name is a bypass.
  - Keys that look like GPU quota but never limit it (C(limits.nvidia.com/gpu), a bare C(nvidia.com/gpu)) are reported as
    ineffective. A quota with C(scopes) or C(scopeSelector) covers only the Pods in its scope (a Pod with GPU limits only
    is C(BestEffort)), so it is listed but not counted as coverage.
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
  namespaces:
    description:
      - Namespaces to check. A namespace named here is reported even when it has no GPU quota at all (then every
        advertised name is a bypass).
      - Empty checks every namespace that has a GPU quota.
    type: list
    elements: str
    default: []
  resources:
    description:
      - GPU resource names every quota must cover. Empty (the default) means every name a Node advertises (positive
        C(allocatable)) under O(resource_prefixes).
    type: list
    elements: str
    default: []
  resource_prefixes:
    description:
      - Domains whose extended resources are GPU resources.
    type: list
    elements: str
    default: [nvidia.com/]
  uncovered:
    description:
      - GPU resource names left uncovered on purpose. A namespace whose quotas do not limit one of them is reported
        with it under RV(namespaces[].intended), not as a bypass, and O(fail_on_bypass) does not fail for it.
    type: list
    elements: str
    default: []
  fail_on_bypass:
    description:
      - Fail when a namespace's quota leaves an advertised name uncovered (a name of O(uncovered) excepted).
    type: bool
    default: false
seealso:
  - module: gpushare.k8s.mig_migration_report
  - name: Resource quotas for extended resources
    description: Only requests.<extended-resource> keys are supported.
    link: https://kubernetes.io/docs/concepts/policy/resource-quotas/#resource-quota-for-extended-resources
"""

EXAMPLES = r"""
- name: Report GPU quota bypasses in every namespace
  gpushare.k8s.quota_coverage:
    kubeconfig: ~/.kwok/clusters/gpushare/kubeconfig.yaml
  register: coverage

- name: Show them
  ansible.builtin.debug:
    msg: "{{ coverage.msg }}"

- name: Fail the play when team-a's quota can be bypassed
  gpushare.k8s.quota_coverage:
    namespaces: [team-a]
    fail_on_bypass: true
"""

RETURN = r"""
ok:
  description: Whether no checked namespace can bypass its GPU quota.
  returned: success
  type: bool
  sample: false
msg:
  description: A readable summary, one line per namespace.
  returned: always
  type: str
  sample: "team-a (quota gpu-quota): BYPASS - Pods asking for nvidia.com/mig-1g.10gb (on lab-node-2) are not counted; add requests.<name> for each"
advertised:
  description: Every GPU resource name the nodes advertise, with the nodes advertising it.
  returned: success
  type: dict
  sample: {"nvidia.com/gpu": ["lab-node-0", "lab-node-1"], "nvidia.com/mig-1g.10gb": ["lab-node-2"]}
namespaces:
  description: One entry per checked namespace, sorted by name.
  returned: success
  type: list
  elements: dict
  contains:
    namespace:
      description: Namespace name.
      type: str
      sample: team-a
    quotas:
      description: Its ResourceQuotas that mention a GPU resource.
      type: list
      elements: str
      sample: [gpu-quota]
    covered:
      description: GPU resource names limited by a C(requests.) key of an unscoped quota.
      type: list
      elements: str
      sample: [nvidia.com/gpu]
    uncovered:
      description: Advertised names no unscoped quota limits (bypasses), with the nodes advertising each.
      type: list
      elements: dict
      sample: [{"resource": "nvidia.com/mig-1g.10gb", "nodes": ["lab-node-2"]}]
    intended:
      description: Advertised names no unscoped quota limits that O(uncovered) leaves uncovered on purpose (no bypass).
      type: list
      elements: dict
      sample: []
    ineffective_keys:
      description: "C(<quota>: <key>) for GPU keys that never limit anything (C(limits.) or bare names)."
      type: list
      elements: str
      sample: ["gpu-quota: limits.nvidia.com/gpu"]
    scoped_quotas:
      description: Quotas with scopes; their keys are not counted as coverage.
      type: list
      elements: str
      sample: []
bypasses:
  description: One entry per namespace and uncovered name.
  returned: success
  type: list
  elements: dict
  sample: [{"namespace": "team-a", "resource": "nvidia.com/mig-1g.10gb", "nodes": ["lab-node-2"]}]
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.cluster_objects import ObjectLister
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import GpushareError
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import (
    AUTH_ARG_SPEC,
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    build_api_client,
    hide_kubeconfig_credentials,
)
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.quota_coverage import (
    advertised_by_nodes,
    coverage_message,
    quota_coverage,
    resolve_quota_resources,
)


def argument_spec():
    spec = dict(
        namespaces=dict(type="list", elements="str", default=[]),
        resources=dict(type="list", elements="str", default=[]),
        resource_prefixes=dict(type="list", elements="str", default=["nvidia.com/"]),
        uncovered=dict(type="list", elements="str", default=[]),
        fail_on_bypass=dict(type="bool", default=False),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def main(module_class=AnsibleModule):
    module = module_class(argument_spec=argument_spec(), supports_check_mode=True)
    hide_kubeconfig_credentials(module)
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    params = module.params
    try:
        required = resolve_quota_resources(params["resources"]) if params["resources"] else None
        lister = ObjectLister(build_api_client(params))
        advertised = advertised_by_nodes(lister.list("Node"), params["resource_prefixes"])
        if required is not None:
            advertised = {name: advertised.get(name, []) for name in required}
        quotas = lister.list("ResourceQuota", params["namespaces"] or None)
        report = quota_coverage(quotas, advertised, params["namespaces"] or None, params["resource_prefixes"], params["uncovered"])
    except GpushareError as exc:  # the collection's own refusals and failures, each with its message
        module.fail_json(msg=str(exc))
    except Exception as exc:  # an unexpected failure still ends as a message, not a traceback
        module.fail_json(msg="unexpected error: %s: %s" % (type(exc).__name__, exc), exception=traceback.format_exc())
    result = dict(changed=False, msg=coverage_message(report), **report)
    if params["fail_on_bypass"] and not report["ok"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
