#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_request_check
short_description: Reject workloads that ask for more than one GPU slice before they are deployed
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - Reads Kubernetes manifests and lists every container that asks for more than O(max_per_container) units of a GPU
    resource, in C(limits) or C(requests) (the larger counts).
  - On a time-sliced node two slices are the same physical GPU reserved twice, not twice the speed or memory. The device
    plugin's C(failRequestsGreaterThanOne) only fails such a Pod at kubelet admission, where it stays until deleted by hand;
    this check stops it before deploy.
  - Walks Pod, PodTemplate, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job and CronJob
    objects in their own API groups; checks C(containers), C(initContainers) and C(ephemeralContainers). Any object
    holding C(items) is read as kubectl reads it, as a list (C(List), C(PodList), but also a C(Pod) or C(ConfigMap)
    with C(items)) - its items are checked, and kind-less items take the list's kind without C(List). Other kinds of
    Kubernetes' own groups are ignored.
  - Custom resources (any other API group) and workload kind names in a group not their own are searched wherever they
    nest their Pods, so kinds the module never heard of are checked. Every mapping outside C(metadata) and C(status)
    holding containers is a Pod spec (Argo Rollouts and C(containerSet), JobSets, LeaderWorkerSets, Volcano Jobs,
    Kubeflow training jobs, KubeRay head and worker groups, KServe predictors and ServingRuntimes). Every other mapping
    holding a container's resource requirements (C(resources), Tekton's C(computeResources), Kubeflow Trainer's
    C(resourcesPerNode)) whose C(limits) or C(requests) name a checked resource is a container, reported by its C(name)
    or the path of those requirements (Argo templates' C(container), C(script) and C(sidecars); Tekton steps,
    C(stepTemplate), sidecars and TaskRun overrides; KServe C(predictor.model) and framework predictors).
  - YAML text is read as kubectl reads it, anchors, aliases and merge keys included (a C(<<) overrides the keys
    written before it, as in kubectl), or refused with a message naming the construct - explicit tags (C(!!binary)
    included), repeated keys, C(...) document ends, directives, text after C(---), JSON followed by more input, and
    what kubectl itself refuses (excessive aliasing, an anchor containing its own alias, a merge of a non-mapping).
    Hostile input (alias bombs, deep nesting) is refused at once.
  - Counts are read as the API server reads quantities (V(2000m) and V(2e0) are 2, V(1k) is 1000); a count that is not
    a whole number of units fails the module.
  - The same check runs as a script (C(check-request <manifest>)), see the C(check_request) module utility.
requirements:
  - PyYAML (on the managed host)
  - kubernetes (Python library, on the managed host; only its quantity parser is loaded)
extends_documentation_fragment:
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - The module only reads, so check mode runs the same check.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  path:
    description:
      - Manifest file on the managed host; it may hold several YAML documents.
      - Exactly one of O(path), O(content) and O(definition) is required.
    type: path
  content:
    description:
      - Manifest text (one or more YAML documents).
    type: str
  definition:
    description:
      - Kubernetes objects as data, one object or a list of objects (a YAML string is read like O(content)).
    type: raw
  resources:
    description:
      - Extended resources to count, e.g. V(nvidia.com/gpu) or V(nvidia.com/gpu.shared).
    type: list
    elements: str
    default: [nvidia.com/gpu]
  max_per_container:
    description:
      - The most units of each resource one container may ask for.
    type: int
    default: 1
  claim_limits:
    description:
      - "Shared device classes whose ResourceClaim and ResourceClaimTemplate requests are checked too, as
        C({class: {capacity: quantity}}): a request is counted in shares, C(count) devices times the shares its
        C(capacity.requests) take (a request of twice the quantity is two shares; C(allocationMode: All) asks for every
        share), and one asking for more than O(max_per_container) shares is an offender, reported with the container
        C(<claim>/<request>)."
      - "The DRA lab's shared class is C({shared.gpu.nvidia.com: {memory: <one share>}}) (filter P(gpushare.k8s.dra_share_limits#filter))."
    type: dict
    default: {}
  fail_on_offenders:
    description:
      - Fail when a container asks for more than O(max_per_container).
      - With V(false) the module succeeds and reports the offenders in RV(offenders) and RV(ok).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Refuse manifests that ask for two slices of a shared GPU
  gpushare.k8s.gpu_request_check:
    path: "{{ gpushare_lab_root }}/k8s/placement.yaml"

- name: Check objects built in the play, counting the renamed shared resource too
  gpushare.k8s.gpu_request_check:
    definition:
      apiVersion: v1
      kind: Pod
      metadata:
        name: notebook
      spec:
        containers:
          - name: main
            image: busybox
            resources:
              limits:
                nvidia.com/gpu.shared: 2
    resources:
      - nvidia.com/gpu
      - nvidia.com/gpu.shared

- name: Report without failing
  gpushare.k8s.gpu_request_check:
    content: "{{ lookup('ansible.builtin.file', 'team-over.yaml') }}"
    fail_on_offenders: false
  register: gpu_check

- name: Show the containers that ask for too much
  ansible.builtin.debug:
    msg: "{{ item.kind }}/{{ item.name }} container {{ item.container }} asks for {{ item.count }} {{ item.resource }}"
  loop: "{{ gpu_check.offenders }}"
"""

RETURN = r"""
ok:
  description: Whether no container asks for more than O(max_per_container).
  returned: when the manifest could be read and checked
  type: bool
  sample: false
offenders:
  description: One entry per container and resource over the limit.
  returned: always
  type: list
  elements: dict
  contains:
    document:
      description: Index (from 0) of the YAML document, or of the object in O(definition).
      type: int
      sample: 0
    kind:
      description: Kind of the workload holding the container.
      type: str
      sample: Pod
    name:
      description: The workload's C(metadata.name) (C(generateName) when no name is set; empty when neither is).
      type: str
      sample: gpu-pod
    container:
      description:
        - Container name; for a container found outside a Pod spec without a C(name) (an Argo template's C(container)),
          the path of its resource requirements, such as V(spec.templates[0].container.resources).
      type: str
      sample: trainer
    resource:
      description: Resource asked for.
      type: str
      sample: nvidia.com/gpu
    count:
      description:
        - Units asked for (the larger of the limit and the request); for a claim request, the shares it asks for
          (V(all) for C(allocationMode=All)).
      type: raw
      sample: 2
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

try:
    from ansible_collections.gpushare.k8s.plugins.module_utils.requests.gpu_requests import find_offenders
    from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_yaml import MAX_INPUT_BYTES, ManifestError
    from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_checks import manifest_fix
    from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.quantity import HAS_PARSER, PARSER_IMPORT_ERROR
except ImportError:  # PyYAML missing on the managed host
    HAS_YAML = False
    YAML_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_YAML = True
    YAML_IMPORT_ERROR = None


def _describe(offender):
    return "%s/%s container %s asks for %s %s" % (
        offender["kind"],
        offender["name"] or "(unnamed)",
        offender["container"],
        offender["count"],
        offender["resource"],
    )


def _source(module):
    """The manifest to check: file bytes, text, or objects."""
    params = module.params
    if params["path"] is not None:
        try:
            with open(params["path"], "rb") as handle:
                return handle.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            module.fail_json(msg="Cannot read %s: %s" % (params["path"], to_native(exc.strerror or exc)), offenders=[])
    if params["content"] is not None:
        return params["content"]
    definition = params["definition"]
    if isinstance(definition, (dict, list, str)):
        return definition
    module.fail_json(msg="definition must be an object, a list of objects or YAML text, got %s" % type(definition).__name__, offenders=[])
    return None  # not reached


def main(module_class=AnsibleModule):
    module = module_class(
        argument_spec=dict(
            path=dict(type="path"),
            content=dict(type="str"),
            definition=dict(type="raw"),
            resources=dict(type="list", elements="str", default=["nvidia.com/gpu"]),
            max_per_container=dict(type="int", default=1),
            claim_limits=dict(type="dict", default={}),
            fail_on_offenders=dict(type="bool", default=True),
        ),
        mutually_exclusive=[("path", "content", "definition")],
        required_one_of=[("path", "content", "definition")],
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_IMPORT_ERROR, offenders=[])
    if not HAS_PARSER:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=PARSER_IMPORT_ERROR, offenders=[])
    data = _source(module)
    try:
        offenders = find_offenders(data, resources=module.params["resources"], max_per_container=module.params["max_per_container"],
                                   claim_limits=module.params["claim_limits"])
    except ManifestError as exc:
        fix = "" if "Fix:" in exc.problem else " " + manifest_fix(exc.problem)
        module.fail_json(msg="Cannot check the manifest: %s.%s" % (to_native(exc), fix), offenders=[])
    except ValueError as exc:
        module.fail_json(msg=to_native(exc), offenders=[])

    result = dict(changed=False, ok=not offenders, offenders=offenders)
    if offenders and module.params["fail_on_offenders"]:
        module.fail_json(
            msg="%d container(s) ask for more than %d of %s: %s"
            % (len(offenders), module.params["max_per_container"], ", ".join(module.params["resources"]), "; ".join(_describe(item) for item in offenders)),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
