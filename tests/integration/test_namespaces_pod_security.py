# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role namespaces on the lab cluster: Pod Security labels set from data, other labels kept, and enforced.

Step 1 of the lab labels the lab's namespaces; two namespaces of this module's own show the rest: one the role
creates, one that exists with a label of someone else's. The labels are compared with the values written out here;
the API server itself, by server-side dry run, refuses a privileged Pod in the lab's namespace and admits a Pod as the
lab writes them (a plain container asking for a GPU).
"""
from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from lab_helpers import unique
from reliability import output, recap

ROLE_PLAYBOOK = "tests/integration/playbooks/role.yml"
PSA = {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted",
       "pod-security.kubernetes.io/audit": "restricted"}


@pytest.fixture(scope="module")
def namespaces(run_playbook, core_v1):
    created, existing = unique("psa-new"), unique("psa-old")
    core_v1.create_namespace({"metadata": {"name": existing, "labels": {"owner": "someone-else"}}})
    try:
        extra = {"it_role": "gpushare.k8s.namespaces", "namespaces_names": [created, existing]}
        first = run_playbook(ROLE_PLAYBOOK, extra)
        second = run_playbook(ROLE_PLAYBOOK, extra)
        yield {"created": created, "existing": existing, "first": first, "second": second}
    finally:
        for name in (created, existing):
            try:
                core_v1.delete_namespace(name)
            except ApiException:
                pass


def labels(core_v1, name):
    return dict(core_v1.read_namespace(name).metadata.labels or {})


@pytest.fixture(scope="module")
def step1(run_playbook, tmp_path_factory):
    """Step 1 of the lab (namespaces, the device-plugin configs), as `make lab` runs it on this cluster."""
    root = tmp_path_factory.mktemp("psa-lab") / "gpushare"
    return run_playbook("playbooks/lab.yml", {"gpushare_lab_root": str(root)}, extra_args=["--tags", "step1"])


def test_step_1_labels_the_labs_namespaces(step1, core_v1):
    assert step1.returncode == 0, output(step1)[-3000:]
    for namespace in ("gpu-share", "team-a"):
        assert {key: value for key, value in labels(core_v1, namespace).items() if key.startswith("pod-security.")} == PSA, namespace


def test_a_privileged_pod_is_refused_in_the_labs_namespace(step1, core_v1):
    assert step1.returncode == 0, output(step1)[-3000:]
    assert refusal(lambda: core_v1.create_namespaced_pod("gpu-share", pod("probe", "gpu-share", {"privileged": True}), dry_run="All")) == (
        'pods "probe" is forbidden: violates PodSecurity "baseline:latest": privileged (container "probe" must not set '
        'securityContext.privileged=true)')


def test_the_namespaces_carry_the_pod_security_labels_and_keep_their_own(namespaces, core_v1):
    assert namespaces["first"].returncode == 0, output(namespaces["first"])[-3000:]
    created, existing = namespaces["created"], namespaces["existing"]
    assert labels(core_v1, created) == dict(PSA, **{"kubernetes.io/metadata.name": created})
    assert labels(core_v1, existing) == dict(PSA, **{"kubernetes.io/metadata.name": existing, "owner": "someone-else"})


def test_a_second_run_writes_nothing(namespaces):
    proc = namespaces["second"]
    assert proc.returncode == 0 and recap(proc)["changed"] == 0, output(proc)[-3000:]


def refusal(call):
    """The API server's message refusing ``call`` (403)."""
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 403, caught.value.body
    return json.loads(caught.value.body)["message"]


def pod(name, namespace, security=None):
    container = {"name": name, "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    if security:
        container["securityContext"] = security
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {"containers": [container]}}


@pytest.mark.parametrize("security, message", [
    ({"privileged": True}, 'pods "probe" is forbidden: violates PodSecurity "baseline:latest": privileged (container "probe" must not '
                           'set securityContext.privileged=true)'),
    ({"capabilities": {"add": ["SYS_ADMIN"]}},
     'pods "probe" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities (container "probe" must not '
     'include "SYS_ADMIN" in securityContext.capabilities.add)'),
])
def test_the_api_server_refuses_what_baseline_forbids(namespaces, core_v1, security, message):
    created = namespaces["created"]
    assert refusal(lambda: core_v1.create_namespaced_pod(created, pod("probe", created, security), dry_run="All")) == message


def test_a_pod_as_the_lab_writes_it_is_admitted(namespaces, core_v1):
    admitted = core_v1.create_namespaced_pod(namespaces["existing"], pod("notebook", namespaces["existing"]), dry_run="All")
    assert admitted.metadata.name == "notebook"
