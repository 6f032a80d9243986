#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: kwok_cluster
short_description: (lab only) Create, start or delete a kwokctl cluster in one task
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - Asks kwokctl for the components of cluster O(name) (C(kwokctl get components)), then brings it to O(state).
  - O(state=present) creates a cluster that does not exist from O(config), after checking that nothing accepts
    connections on O(ports) at O(host) (waiting at most a second, for listeners a removed cluster is still closing);
    a port in use fails the task, naming it, before kwokctl runs. A cluster that exists has its stopped components
    started (C(kwokctl start cluster)); one whose components all run is left alone.
  - O(state=absent) deletes the cluster with its state and kubeconfig; no cluster of that name is no change, nor is
    a missing O(kwokctl) (a kwokctl never installed made no cluster).
  - kwokctl never edits the user's C(~/.kube/config). A new cluster's kubeconfig is the one in its directory
    (RV(kubeconfig)), and deleting edits only that file.
  - The lab_cluster role starts and removes the lab cluster with it. Runs in the controller when the task's connection
    is local (a fork and kwokctl, where M(ansible.builtin.command) costs a module process per kwokctl call), and as a
    module on any other connection.
extends_documentation_fragment:
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.idempotent
attributes:
  check_mode:
    support: full
    details: Asks kwokctl for the components (it only reads) and reports what would change.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  name:
    description: The cluster's name.
    type: str
    required: true
  state:
    description: Whether the cluster should run (V(present)) or not exist (V(absent)).
    type: str
    choices: [present, absent]
    default: present
  kwokctl:
    description: The kwokctl program, a path or a name on E(PATH).
    type: path
    default: kwokctl
  workdir:
    description: kwokctl's state directory (E(KWOK_WORKDIR)); the cluster lives in its C(clusters/NAME).
    type: path
    default: ~/.kwok
  config:
    description: The kwokctl configuration a new cluster is created from; needed only when it does not exist.
    type: path
  wait:
    description: Seconds kwokctl may take to create or start the cluster and wait for its components; unset uses kwokctl's default.
    type: int
  host:
    description: The address the cluster's components listen on, where O(ports) are checked.
    type: str
    default: 127.0.0.1
  ports:
    description: The ports a new cluster will listen on (any names as keys); none may be in use before it is created.
    type: dict
    default: {}
  timeout:
    description:
      - Seconds each kwokctl command may take. Then it is stopped and the task fails naming the command. A create or
        start is given at least O(wait) plus 120 seconds.
    type: int
    default: 600
seealso:
  - module: gpushare.k8s.api_server_check
  - name: kwokctl
    description: kwokctl, the command that runs a kwok cluster.
    link: https://kwok.sigs.k8s.io/docs/user/kwokctl-manage-cluster/
"""

EXAMPLES = r"""
- name: Start the lab cluster, creating it when it does not exist
  gpushare.k8s.kwok_cluster:
    name: gpushare
    kwokctl: ~/.cache/gpushare/kwok-v0.8.0/kwokctl
    config: ~/.kwok/gpushare.kwokctl.yaml
    wait: 300
    ports: {etcd: 20000, kube-apiserver: 20002}

- name: Remove it
  gpushare.k8s.kwok_cluster:
    name: gpushare
    kwokctl: ~/.cache/gpushare/kwok-v0.8.0/kwokctl
    state: absent
"""

RETURN = r"""
exists:
  description: Whether the cluster existed before the task.
  returned: always
  type: bool
components:
  description: Each component's status before the task, as kwokctl reports it (V(Ready), V(Running), V(Stopped), V(Unknown)); empty when there was no cluster.
  returned: always
  type: dict
  sample: {etcd: Ready, kube-apiserver: Ready, kube-controller-manager: Stopped}
created:
  description: Whether the cluster was created.
  returned: always
  type: bool
started:
  description: Whether stopped components were started.
  returned: always
  type: bool
deleted:
  description: Whether the cluster was deleted.
  returned: always
  type: bool
kubeconfig:
  description: The cluster's kubeconfig, in its directory under O(workdir).
  returned: always
  type: str
cmd:
  description: The kwokctl command that changed the cluster, or that was stopped when it took longer than O(timeout).
  returned: when one ran
  type: str
timed_out:
  description: Whether a kwokctl command was stopped because it took longer than O(timeout) (the task failed).
  returned: when one was stopped
  type: bool
ports_in_use:
  description: The ports of O(ports) something listens on (the task failed, nothing was created).
  returned: when a port is in use
  type: list
  elements: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpushare.k8s.plugins.module_utils.lab.kwok_cluster import DEFAULT_TIMEOUT, KwokctlError, ensure


def main(module_class=AnsibleModule):
    module = module_class(
        argument_spec=dict(
            name=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            kwokctl=dict(type="path", default="kwokctl"),
            workdir=dict(type="path", default="~/.kwok"),
            config=dict(type="path"),
            wait=dict(type="int"),
            host=dict(type="str", default="127.0.0.1"),
            ports=dict(type="dict", default={}),
            timeout=dict(type="int", default=DEFAULT_TIMEOUT),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = ensure(params["kwokctl"], params["name"], params["workdir"], state=params["state"], config=params["config"],
                        wait=params["wait"], host=params["host"], ports=params["ports"], check_mode=module.check_mode,
                        timeout=params["timeout"])
    except KwokctlError as exc:
        module.fail_json(msg=str(exc), changed=False, **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
