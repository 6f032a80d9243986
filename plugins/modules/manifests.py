#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: manifests
short_description: Write manifest files and apply their objects, in one task
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - The lab's building block for every step that creates objects, one task per step; the role
    C(gpushare.k8s.manifest) wraps it for one manifest.
  - Every manifest is read first with the collection's safe YAML reader
    (P(gpushare.k8s.manifest_objects#filter)), so invalid YAML, tags that build objects, alias bombs and documents
    that are not objects fail before any file is written or any object applied, naming the manifest.
  - Then each manifest with a O(manifests[].path) is written (only when its content or mode differs, through a
    temporary file renamed over the old one), and each manifest's objects are applied in order with
    M(kubernetes.core.k8s)'s logic (P(gpushare.k8s.objects#module), which creates, or patches with a strategic merge that keeps
    labels, annotations and keys other tools added). What a user reads in the written file is what was applied.
  - In check mode nothing is written. The files are compared, and the objects are sent to the API server as a
    dry run, so the diff is what the server would store; the objects of a manifest whose namespace does not
    exist yet (a real run creates it in an earlier step) are reported as objects that would be created.
  - Runs in the controller when the task's connection is local, and as a module on any other connection.
extends_documentation_fragment:
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
  manifests:
    description: The manifests, written and applied in order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path of the file to write. Empty applies O(manifests[].content) without writing a file.
        type: str
        default: ""
      content:
        description: The manifest, one or more YAML documents.
        type: str
        required: true
      namespace:
        description: Namespace for namespaced objects that do not name one.
        type: str
        default: ""
      mode:
        description: The file's mode, as a quoted octal string.
        type: str
        default: "0644"
      apply:
        description:
          - V(false) only writes the file (its objects are still read and checked), for a manifest applied later, for
            example one the API server must refuse. It then needs O(manifests[].path).
        type: bool
        default: true
  directory_mode:
    description: The mode of directories this task creates.
    type: str
    default: "0755"
  lock:
    description:
      - Take turns with other writers of the same objects. Before anything is written, the task takes a hold on an
        existing object (the annotation C(gpushare.k8s/writer), written with the object's resourceVersion as a
        precondition, so two tasks cannot both take it), and removes it when the task ends.
      - Why it matters under a ResourceQuota. The API server charges a quota at admission, before storage; when two
        writers create the same object at once, the create that storage refuses (409 AlreadyExists) stays charged until
        the quota controller recounts (C(--resource-quota-sync-period), 5 minutes by default). A quota that a team's
        objects fill exactly then refuses their next object, in both runs. Writers that hold the lock never collide.
      - A task that finds the object held waits until the hold ends or lapses (O(lock.seconds) after it was taken, so a
        run that was killed holds it no longer), then fails naming the holder and the command that removes the hold.
      - Whoever may annotate the object can write the hold, so it is read as untrusted input. A hold that is not a JSON
        object with a text C(holder) and a UTC C(until) (C(YYYY-MM-DDThh:mm:ssZ)), or whose C(until) is further ahead
        than this task's O(lock.seconds) plus 30 seconds (for clocks that differ), counts as lapsed and is taken over
        at once. Writers of one lock should therefore give the same O(lock.seconds). In messages the holder is
        JSON-quoted (control and non-ASCII characters escaped) and cut to 80 characters.
      - Not taken in check mode, which writes nothing.
    type: dict
    suboptions:
      kind:
        description: The kind of the object that carries the hold, for example V(ResourceQuota).
        type: str
        required: true
      api_version:
        description: Its API version.
        type: str
        default: v1
      name:
        description: Its name. The object must exist.
        type: str
        required: true
      namespace:
        description: Its namespace, for a namespaced kind.
        type: str
        default: ""
      seconds:
        description: How long a hold lasts at most, and how long a task waits for another's hold to end.
        type: int
        default: 60
seealso:
  - module: gpushare.k8s.objects
  - module: gpushare.k8s.files
"""

EXAMPLES = r"""
- name: Write and apply the quota and the team's Pods
  gpushare.k8s.manifests:
    kubeconfig: ~/.kube/config
    manifests:
      - path: ~/gpushare-lab/k8s/gpu-quota.yaml
        content: "{{ lookup('ansible.builtin.template', 'quota.yaml.j2') }}"
      - content: "{{ team_pods_yaml }}"
        namespace: team-a

- name: Create the team's Pods, taking turns with other runs under the team's quota
  gpushare.k8s.manifests:
    manifests:
      - content: "{{ team_pods_yaml }}"
        namespace: team-a
    lock:
      kind: ResourceQuota
      namespace: team-a
      name: gpu-quota
"""

RETURN = r"""
manifests:
  description: One entry per manifest, in order.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The file's absolute path (empty when none was written).
      type: str
    file_changed:
      description: Whether the file was (or, in check mode, would be) written.
      type: bool
    changed:
      description: Whether the file or any of the objects changed.
      type: bool
    objects:
      description: Each object applied, with C(kind), C(name), C(namespace), C(method) (V(create), V(update)) and C(changed).
      type: list
      elements: dict
    missing_namespaces:
      description: In check mode, the namespaces the manifest needs that do not exist yet (its objects were not sent).
      type: list
      elements: str
      returned: check mode, when a namespace is missing
diff:
  description: With C(--diff), each file and object that changes, before and after.
  returned: changed, with --diff
  type: list
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import hide_kubeconfig_credentials
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.manifests import MANIFESTS_ARG_SPEC, run_manifests


def main(module_class=AnsibleModule):
    module = module_class(argument_spec=MANIFESTS_ARG_SPEC, supports_check_mode=True)
    hide_kubeconfig_credentials(module)
    result = run_manifests(module.params, check_mode=module.check_mode, diff=module._diff)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
