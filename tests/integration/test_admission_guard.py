# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission guard (role gpushare.k8s.admission_guard) on the live lab cluster.

The module installs its own instance of the guard (unique name), bound only to two
namespaces it creates, with its own opt-in label, and removes all of it afterwards.
Pods that must be admitted are created with dryRun=All: they pass every admission
step without taking GPU slots from the lab's nodes.
"""
from __future__ import annotations

import json
import re

import pytest
from kubernetes.client.rest import ApiException

from lab_helpers import unique, wait_for

GPU = "nvidia.com/gpu"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
PLAYBOOK = "tests/integration/playbooks/admission_guard.yml"


def recap(proc):
    lines = [line for line in proc.stdout.splitlines() if line.startswith("localhost")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1])}


def pod(name, count=1, selector=None, affinity_values=None, init_count=None, requests=False, resources=True, gates=None):
    limits = {GPU: str(count)}
    container = {"name": "cuda", "image": "pause:3.10"}
    if resources:
        container["resources"] = {"limits": limits, **({"requests": dict(limits)} if requests else {})}
    spec = {"containers": [container]}
    if init_count is not None:
        spec["initContainers"] = [{"name": "warmup", "image": "pause:3.10", "resources": {"limits": {GPU: str(init_count)}}}]
    if selector:
        spec["nodeSelector"] = selector
    if affinity_values:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "Exists"}]},
            {"matchExpressions": [{"key": CONFIG_LABEL, "operator": "In", "values": affinity_values}]},
        ]}}}
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def create(core_v1, namespace, body, dry_run=True):
    """Create a Pod; returns None when admitted, else the API's (status, message)."""
    try:
        core_v1.create_namespaced_pod(namespace, body, dry_run="All" if dry_run else None)
    except ApiException as exc:
        return exc.status, json.loads(exc.body).get("message", exc.body)
    return None


@pytest.fixture(scope="module")
def guard(core_v1, run_playbook, kubeconfig, tmp_path_factory):
    name = unique("gpushare-it-guard")
    scope = {"gpushare-it.k8s/guard-scope": name}
    opt_in = f"gpushare-it.k8s/{name}"
    plain, opted = f"{name}-plain", f"{name}-optin"
    root = tmp_path_factory.mktemp("guard") / "gpushare"
    for ns, labels in ((plain, scope), (opted, {**scope, opt_in: "true"})):
        core_v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
    role_vars = {
        "gpushare_kubeconfig": kubeconfig,
        "admission_guard_name": name,
        "admission_guard_namespace_label": opt_in,
        "admission_guard_namespace_selector": {"matchLabels": scope},
        "admission_guard_probe_namespace": plain,
        "admission_guard_lab_root": str(root),
    }
    info = {"name": name, "plain": plain, "opted": opted, "vars": role_vars, "root": root, "runs": {}}
    try:
        info["runs"]["check"] = run_playbook(PLAYBOOK, extra_vars=role_vars, check=True, diff=True)
        info["runs"]["policy_after_check"] = _policy_exists(kubeconfig, name)
        info["runs"]["root_after_check"] = root.exists()
        info["runs"]["apply"] = run_playbook(PLAYBOOK, extra_vars=role_vars)
        assert info["runs"]["apply"].returncode == 0, info["runs"]["apply"].stdout[-4000:] + info["runs"]["apply"].stderr[-2000:]

        # The API server loads policies asynchronously: only this instance guards the opt-in namespace,
        # so a dry-run over-request being refused there means this policy and its binding are active.
        def refused_by_this_policy():
            answer = create(core_v1, opted, pod(unique("probe"), count=2))
            return answer if answer and f"ValidatingAdmissionPolicy '{name}'" in answer[1] else None

        wait_for(refused_by_this_policy, timeout=60, interval=0.5, what=f"policy {name} to refuse an over-request in {opted}")
        yield info
    finally:
        info["runs"]["remove"] = run_playbook(PLAYBOOK, extra_vars={**role_vars, "admission_guard_state": "absent"})
        for ns in (plain, opted):
            try:
                core_v1.delete_namespace(ns)
            except ApiException:
                pass
        # Removed even if the role failed half way.
        from kubernetes import client, config

        admission = client.AdmissionregistrationV1Api(config.new_client_from_config(config_file=kubeconfig))
        for delete in (admission.delete_validating_admission_policy_binding, admission.delete_validating_admission_policy):
            try:
                delete(name)
            except ApiException as exc:
                assert exc.status == 404, exc


def _policy_exists(kubeconfig, name):
    from kubernetes import client, config

    admission = client.AdmissionregistrationV1Api(config.new_client_from_config(config_file=kubeconfig))
    try:
        admission.read_validating_admission_policy(name)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_check_mode_predicts_the_guard_and_writes_nothing(guard):
    proc = guard["runs"]["check"]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert recap(proc)["changed"] > 0
    assert guard["runs"]["policy_after_check"] is False
    assert guard["runs"]["root_after_check"] is False
    assert "ValidatingAdmissionPolicy" in proc.stdout  # the diff shows what would be created


def test_manifest_is_computed_from_the_configs(guard):
    import yaml

    docs = list(yaml.safe_load_all((guard["root"] / "k8s" / "admission-guard.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    variables = {v["name"]: v["expression"] for v in docs[0]["spec"]["variables"]}
    assert variables["sliced"] == '{"shared": ["nvidia.com/gpu"]}'
    assert variables["unshared"] == '["default"]'
    assert docs[1]["spec"]["validationActions"] == ["Deny"]
    assert docs[1]["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": {"gpushare-it.k8s/guard-scope": guard["name"]}}


def test_over_request_on_the_shared_node_is_denied_by_the_api(guard, core_v1):
    name = unique("over")
    answer = create(core_v1, guard["plain"], pod(name, count=2, selector={CONFIG_LABEL: "shared"}), dry_run=False)
    assert answer is not None, "a Pod asking for 2 time-slices was admitted"
    status, message = answer
    assert status == 403, message
    assert "container 'cuda' asks for 2 nvidia.com/gpu" in message
    assert f"{CONFIG_LABEL}=shared" in message and "UnexpectedAdmissionError" in message
    assert f"{CONFIG_LABEL}=default" in message  # the fix names the unsplit config
    with pytest.raises(ApiException) as missing:
        core_v1.read_namespaced_pod(name, guard["plain"])
    assert missing.value.status == 404


def test_one_slice_on_the_shared_node_is_admitted(guard, core_v1):
    assert create(core_v1, guard["plain"], pod(unique("one"), count=1, selector={CONFIG_LABEL: "shared"})) is None


def test_two_units_on_the_unsplit_node_are_admitted(guard, core_v1):
    assert create(core_v1, guard["plain"], pod(unique("whole"), count=2, selector={CONFIG_LABEL: "default"})) is None


def test_two_units_without_selector_are_admitted_outside_opted_in_namespaces(guard, core_v1):
    assert create(core_v1, guard["plain"], pod(unique("free"), count=2)) is None


def test_opted_in_namespace_denies_without_selector(guard, core_v1):
    answer = create(core_v1, guard["opted"], pod(unique("optin"), count=2))
    assert answer is not None
    status, message = answer
    assert status == 403
    assert f"ValidatingAdmissionPolicy '{guard['name']}'" in message
    assert "container 'cuda' asks for 2 nvidia.com/gpu" in message
    assert f"in namespace {guard['opted']}, which opts in" in message


@pytest.mark.parametrize("values", [["shared"], ["default", "shared"]])
def test_required_affinity_on_the_shared_config_is_denied(guard, core_v1, values):
    answer = create(core_v1, guard["plain"], pod(unique("affinity"), count=2, affinity_values=values))
    assert answer is not None, f"affinity In {values} was admitted"
    assert "container 'cuda' asks for 2 nvidia.com/gpu" in answer[1]


def test_required_affinity_on_the_unsplit_config_is_admitted(guard, core_v1):
    assert create(core_v1, guard["plain"], pod(unique("affinity"), count=2, affinity_values=["default"])) is None


def test_init_containers_and_requests_are_checked(guard, core_v1):
    answer = create(core_v1, guard["plain"], pod(unique("init"), count=3, init_count=2, requests=True, selector={CONFIG_LABEL: "shared"}))
    assert answer is not None
    assert "container 'warmup' asks for 2 nvidia.com/gpu; container 'cuda' asks for 3 nvidia.com/gpu" in answer[1]


def test_pods_without_resources_selector_or_affinity_are_admitted(guard, core_v1):
    assert create(core_v1, guard["opted"], pod(unique("bare"), resources=False)) is None
    assert create(core_v1, guard["plain"], pod(unique("bare"), resources=False, selector={CONFIG_LABEL: "shared"})) is None


def test_a_gated_pod_cannot_be_moved_onto_the_shared_node(guard, core_v1):
    name = unique("gated")
    # Scheduling-gated: never bound, so it takes no slot; its placement may still change.
    assert create(core_v1, guard["plain"], pod(name, count=2, gates=["gpushare.k8s/hold"]), dry_run=False) is None
    try:
        with pytest.raises(ApiException) as denied:
            core_v1.patch_namespaced_pod(name, guard["plain"], {"spec": {"nodeSelector": {CONFIG_LABEL: "shared"}}})
        assert "asks for 2 nvidia.com/gpu" in denied.value.body
        # Updates that leave the placement alone are not checked.
        core_v1.patch_namespaced_pod(name, guard["plain"], {"metadata": {"labels": {"checked": "no"}}})
    finally:
        core_v1.delete_namespaced_pod(name, guard["plain"], grace_period_seconds=0)


def test_second_run_changes_nothing(guard, run_playbook):
    check = run_playbook(PLAYBOOK, extra_vars=guard["vars"], check=True)
    assert check.returncode == 0, check.stdout[-4000:]
    assert recap(check)["changed"] == 0, [l for l in check.stdout.splitlines() if l.startswith(("TASK", "changed"))]
    again = run_playbook(PLAYBOOK, extra_vars=guard["vars"])
    assert again.returncode == 0, again.stdout[-4000:]
    assert recap(again)["changed"] == 0, [l for l in again.stdout.splitlines() if l.startswith(("TASK", "changed"))]


def test_absent_removes_the_guard_and_its_manifest(guard, run_playbook, kubeconfig, core_v1):
    proc = run_playbook(PLAYBOOK, extra_vars={**guard["vars"], "admission_guard_state": "absent"})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert recap(proc)["changed"] > 0
    assert not _policy_exists(kubeconfig, guard["name"])
    assert not (guard["root"] / "k8s" / "admission-guard.yaml").exists()
    # With the guard gone, the opt-in namespace admits what it refused (once the API server has dropped it).
    wait_for(lambda: create(core_v1, guard["opted"], pod(unique("after"), count=2)) is None, timeout=60,
             what="the opt-in namespace to admit an over-request after removal")
