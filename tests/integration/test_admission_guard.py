# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission guard (role gpushare.k8s.admission_guard) on the live lab cluster.

The module creates the Nodes of tests/admission_guard_cases.yml (tainted, never scheduled
to), installs its own instance of the guard (unique name) over them, bound only to a
namespace it creates (and kube-system, which the policy must leave alone), and removes
all of it afterwards. Names are made unique: the table's node names, its config label and
its resource name (nvidia.com/gpu becomes nvidia.com/it-<id>, so no other guard on the
cluster judges these Pods). Every case of the table is sent to the API server, which must
admit it exactly when the table says the Pod reaches no time-sliced node (`reaches`, written
by hand; tests/unit/plugins/module_utils/test_guards.py holds module_utils/requests/guards.py to the
same table). Pods that must be admitted are created with dryRun=All: they pass every
admission step and take no slot.

The table's `routes` are the lab's own node layout (lab-node-0 unsliced, lab-node-1
time-sliced, lab-node-2 MIG on the default config): a second guard instance is installed over
those nodes, with the lab's default config, and each route (placement by label, hostname,
nodeName, nodeName with a contradicting selector or affinity, NotIn, matchFields, init and
sidecar containers) must get the outcome written in the table.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from kubernetes.client.rest import ApiException

from lab_helpers import unique, wait_for

TABLE = yaml.safe_load((Path(__file__).resolve().parents[1] / "admission_guard_cases.yml").read_text(encoding="utf-8"))
ROUTES = TABLE["routes"]
GPU = "nvidia.com/gpu"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
PLAYBOOK = "tests/integration/playbooks/admission_guard.yml"
TAINT = {"key": "gpushare-it.k8s/guard", "value": "test-node", "effect": "NoSchedule"}


def recap(proc):
    lines = [line for line in proc.stdout.splitlines() if line.startswith("localhost")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1])}


def localise(value, mapping):
    """The table's names made unique: node names (guard-*), the config label and the resource name."""
    if isinstance(value, dict):
        return {localise(k, mapping): localise(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [localise(v, mapping) for v in value]
    if isinstance(value, str):
        if value.startswith("guard-"):
            return mapping["prefix"] + value[len("guard"):]
        if value.startswith("lab-node-") and "lab" in mapping:
            return f"{mapping['lab']}-{value}"
        return mapping.get(value, value)
    return value


def pod(name, gpu, count=2, placement=None, init_count=None, requests=False, resources=True, gates=None):
    """A Pod whose container 'cuda' asks for `count` of `gpu`, placed as a table case (`terms`: required affinity)."""
    limits = {gpu: str(count)}
    container = {"name": "cuda", "image": "pause:3.10"}
    if resources:
        container["resources"] = {"limits": limits, **({"requests": dict(limits)} if requests else {})}
    spec = {"containers": [container]}
    if init_count is not None:
        spec["initContainers"] = [{"name": "warmup", "image": "pause:3.10", "resources": {"limits": {gpu: str(init_count)}}}]
    placement = placement or {}
    spec.update({key: value for key, value in placement.items() if key != "terms"})
    if "terms" in placement:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": placement["terms"]}}}
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def route_pod(name, gpu, case, mapping):
    """A route of the table as a Pod: its containers (`init`, `sidecar`: restartPolicy Always) asking for `gpu`."""
    body = pod(name, gpu, placement=localise(case["placement"], mapping))
    spec, init = body["spec"], []
    spec["containers"] = []
    for container in case.get("containers") or [{"name": "cuda", "gpus": 2}]:
        entry = {"name": container["name"], "image": "pause:3.10", "resources": {"limits": {gpu: str(container["gpus"])}}}
        if container.get("sidecar"):
            entry["restartPolicy"] = "Always"
        (init if container.get("init") or container.get("sidecar") else spec["containers"]).append(entry)
    if init:
        spec["initContainers"] = init
    return body


def create(core_v1, namespace, body, dry_run=True):
    """Create a Pod; returns None when admitted, else the API's (status, message)."""
    try:
        core_v1.create_namespaced_pod(namespace, body, dry_run="All" if dry_run else None)
    except ApiException as exc:
        return exc.status, json.loads(exc.body).get("message", exc.body)
    return None


def listing(guard, nodes):
    """How the policy's message names the time-sliced nodes a Pod reaches."""
    configs = {node["name"]: node["labels"][CONFIG_LABEL] for node in TABLE["nodes"] if CONFIG_LABEL in node["labels"]}
    return ", ".join(f"{localise(node, guard['map'])} ({guard['label']}={configs[node]})" for node in nodes)


@pytest.fixture(scope="module")
def guard(core_v1, run_playbook, kubeconfig, tmp_path_factory):
    name = unique("gpushare-it-guard")
    mapping = {"prefix": name, GPU: f"nvidia.com/it-{name[-6:]}", CONFIG_LABEL: f"gpushare-it.k8s/{name[-6:]}-config"}
    scope = {"gpushare-it.k8s/guard-scope": name}
    plain = f"{name}-plain"
    root = tmp_path_factory.mktemp("guard") / "gpushare"
    nodes = localise(TABLE["nodes"], mapping)
    core_v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": plain, "labels": scope}})
    role_vars = {
        "gpushare_kubeconfig": kubeconfig,
        "admission_guard_name": name,
        "admission_guard_configs": localise(TABLE["configs"], mapping),
        "admission_guard_config_label": mapping[CONFIG_LABEL],
        "admission_guard_ignored_labels": TABLE["ignored_labels"],
        # kube-system is bound too: the policy itself must leave it out.
        "admission_guard_namespace_selector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [plain, "kube-system"]}]},
        "admission_guard_probe_namespace": plain,
        "admission_guard_lab_root": str(root),
    }
    info = {"name": name, "plain": plain, "vars": role_vars, "root": root, "runs": {}, "map": mapping,
            "gpu": mapping[GPU], "label": mapping[CONFIG_LABEL], "nodes": nodes}
    try:
        for node in nodes:
            core_v1.create_node({"apiVersion": "v1", "kind": "Node", "metadata": node, "spec": {"taints": [TAINT]}})
        info["runs"]["check"] = run_playbook(PLAYBOOK, extra_vars=role_vars, check=True, diff=True)
        info["runs"]["policy_after_check"] = _policy_exists(kubeconfig, name)
        info["runs"]["root_after_check"] = root.exists()
        info["runs"]["apply"] = run_playbook(PLAYBOOK, extra_vars=role_vars)
        assert info["runs"]["apply"].returncode == 0, info["runs"]["apply"].stdout[-4000:] + info["runs"]["apply"].stderr[-2000:]

        # The API server loads policies asynchronously; the role's probe proved one API server instance enforces it.
        def refused_by_this_policy():
            answer = create(core_v1, plain, pod(unique("probe"), info["gpu"]))
            return answer if answer and f"ValidatingAdmissionPolicy '{name}'" in answer[1] else None

        wait_for(refused_by_this_policy, timeout=60, interval=0.5, what=f"policy {name} to refuse an over-request in {plain}")
        yield info
    finally:
        info["runs"]["remove"] = run_playbook(PLAYBOOK, extra_vars={**role_vars, "admission_guard_state": "absent"})
        for delete, target in ((core_v1.delete_namespace, plain), *((core_v1.delete_node, node["name"]) for node in nodes)):
            try:
                delete(target)
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


@pytest.fixture(scope="module")
def routes(core_v1, run_playbook, kubeconfig, tmp_path_factory):
    """A guard over the lab's node layout (the table's `routes`), with the lab's default config, bound to a namespace of its own."""
    name = unique("gpushare-it-routes")
    mapping = {"prefix": name, "lab": name, GPU: f"nvidia.com/it-{name[-6:]}", CONFIG_LABEL: f"gpushare-it.k8s/{name[-6:]}-config"}
    namespace = f"{name}-ns"
    nodes = localise(ROUTES["nodes"], mapping)
    role_vars = {
        "gpushare_kubeconfig": kubeconfig,
        "admission_guard_name": name,
        "admission_guard_configs": localise(ROUTES["configs"], mapping),
        "admission_guard_config_label": mapping[CONFIG_LABEL],
        "admission_guard_default_config": ROUTES["default_config"],
        "admission_guard_namespace_selector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "admission_guard_probe_namespace": namespace,
        "admission_guard_lab_root": str(tmp_path_factory.mktemp("routes") / "gpushare"),
        "admission_guard_file": "",
    }
    info = {"name": name, "namespace": namespace, "map": mapping, "gpu": mapping[GPU], "label": mapping[CONFIG_LABEL]}
    core_v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    try:
        for node in nodes:
            core_v1.create_node({"apiVersion": "v1", "kind": "Node", "metadata": node, "spec": {"taints": [TAINT]}})
        applied = run_playbook(PLAYBOOK, extra_vars=role_vars)
        assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr[-2000:]

        def refused_by_this_policy():
            answer = create(core_v1, namespace, pod(unique("probe"), info["gpu"]))
            return answer if answer and f"ValidatingAdmissionPolicy '{name}'" in answer[1] else None

        wait_for(refused_by_this_policy, timeout=60, interval=0.5, what=f"policy {name} to refuse an over-request in {namespace}")
        yield info
    finally:
        removed = run_playbook(PLAYBOOK, extra_vars={**role_vars, "admission_guard_state": "absent"})
        for delete, target in ((core_v1.delete_namespace, namespace), *((core_v1.delete_node, node["name"]) for node in nodes)):
            try:
                delete(target)
            except ApiException:
                pass
        assert removed.returncode == 0, removed.stdout[-4000:]


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


def test_manifest_carries_every_time_sliced_node_with_its_labels(guard):
    docs = list(yaml.safe_load_all((guard["root"] / "k8s" / "admission-guard.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    variables = {v["name"]: v["expression"] for v in docs[0]["spec"]["variables"]}
    sliced = [f"{guard['name']}-busy", f"{guard['name']}-shared"]
    assert json.loads(variables["nodes"]) == sliced
    by_name = {node["name"]: node for node in guard["nodes"]}
    # every label of each node, as the cluster has it (nothing adds labels to these Nodes), but the ignored ones
    assert json.loads(variables["nodeLabels"]) == {
        node: {k: v for k, v in by_name[node]["labels"].items() if k not in TABLE["ignored_labels"]} for node in sliced}
    assert json.loads(variables["ignoredLabels"]) == TABLE["ignored_labels"]
    assert json.loads(variables["nodeConfigs"]) == dict(zip(sliced, ["busy", "shared"]))
    assert json.loads(variables["nodeResources"]) == {node: [guard["gpu"]] for node in sliced}
    assert json.loads(variables["names"]) == [guard["gpu"]]
    assert docs[0]["spec"]["matchConstraints"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}
    assert docs[1]["spec"]["validationActions"] == ["Deny"]


@pytest.mark.parametrize("case", TABLE["cases"], ids=[case["id"] for case in TABLE["cases"]])
def test_the_api_server_admits_exactly_the_pods_that_reach_no_time_sliced_node(guard, core_v1, case):
    answer = create(core_v1, guard["plain"], pod(unique("case"), guard["gpu"], placement=localise(case["placement"], guard["map"])))
    if not case["reaches"]:
        assert answer is None, f"a Pod pinned away from every time-sliced node was refused: {answer}"
        return
    assert answer is not None, f"a Pod asking for 2 slices that can reach {case['reaches']} was admitted"
    status, message = answer
    assert status == 403 and f"ValidatingAdmissionPolicy '{guard['name']}'" in message, message
    assert f"container 'cuda' asks for 2 {guard['gpu']}." in message
    assert f"{guard['gpu']} is time-sliced with failRequestsGreaterThanOne on nodes this Pod can reach: " \
           f"{listing(guard, case['reaches'])}." in message
    assert "UnexpectedAdmissionError" in message
    # The two fixes: pin to the config without sharing, or rename the slices.
    assert f"nodeSelector {guard['label']}: default" in message
    assert "set renameByDefault: true in the timeSlicing section of config busy and shared" in message


def test_two_units_without_selector_are_denied(guard, core_v1):
    """Was a bypass: without a selector the Pod may land on any time-sliced node."""
    name = unique("free")
    answer = create(core_v1, guard["plain"], pod(name, guard["gpu"]), dry_run=False)
    assert answer is not None and answer[0] == 403, "a Pod asking for 2 time-slices without a selector was admitted"
    with pytest.raises(ApiException) as missing:
        core_v1.read_namespaced_pod(name, guard["plain"])
    assert missing.value.status == 404


def test_two_whole_gpus_pinned_to_the_unshared_config_are_admitted(guard, core_v1):
    """Was a false denial in namespaces that opted in: whole GPUs on the unshared config are fine anywhere."""
    placement = {"nodeSelector": {guard["label"]: "default"}}
    assert create(core_v1, guard["plain"], pod(unique("whole"), guard["gpu"], placement=placement)) is None


def test_one_slice_is_admitted_anywhere(guard, core_v1):
    assert create(core_v1, guard["plain"], pod(unique("one"), guard["gpu"], count=1)) is None


def test_init_containers_and_requests_are_checked(guard, core_v1):
    answer = create(core_v1, guard["plain"], pod(unique("init"), guard["gpu"], count=3, init_count=2, requests=True))
    assert answer is not None
    assert f"container 'warmup' asks for 2 {guard['gpu']}; container 'cuda' asks for 3 {guard['gpu']}." in answer[1]


def test_pods_without_gpu_resources_are_admitted(guard, core_v1):
    assert create(core_v1, guard["plain"], pod(unique("bare"), guard["gpu"], resources=False)) is None


def test_kube_system_is_out_of_scope(guard, core_v1):
    # The binding covers kube-system; the policy's own namespace selector leaves it out.
    assert create(core_v1, "kube-system", pod(unique("system"), guard["gpu"])) is None
    assert create(core_v1, guard["plain"], pod(unique("system"), guard["gpu"])) is not None


def test_a_relabelled_node_is_guarded_once_the_role_runs_again(guard, core_v1, run_playbook):
    whole = localise("guard-whole", guard["map"])
    pinned = {"nodeSelector": {"kubernetes.io/hostname": whole}}
    gated = unique("gated")
    # Scheduling-gated: never bound, so it takes no slot; its placement may still gain constraints.
    assert create(core_v1, guard["plain"], pod(gated, guard["gpu"], placement=pinned, gates=["gpushare.k8s/hold"]), dry_run=False) is None
    try:
        core_v1.patch_node(whole, {"metadata": {"labels": {guard["label"]: "shared"}}})
        # The policy is a snapshot of the nodes: until the role runs again, the node counts as unshared.
        assert create(core_v1, guard["plain"], pod(unique("stale"), guard["gpu"], placement=pinned)) is None
        again = run_playbook(PLAYBOOK, extra_vars=guard["vars"])
        assert again.returncode == 0 and recap(again)["changed"] > 0, again.stdout[-4000:]
        wait_for(lambda: create(core_v1, guard["plain"], pod(unique("fresh"), guard["gpu"], placement=pinned)),
                 timeout=60, what=f"the re-run guard to refuse 2 slices pinned to {whole}")
        answer = create(core_v1, guard["plain"], pod(unique("fresh"), guard["gpu"], placement=pinned))
        assert f"on nodes this Pod can reach: {whole} ({guard['label']}=shared)." in answer[1]
        # The gated Pod gains a selector that still leads to the node: checked, and refused.
        with pytest.raises(ApiException) as denied:
            core_v1.patch_namespaced_pod(gated, guard["plain"], {"spec": {"nodeSelector": {guard["label"]: "shared"}}})
        assert f"asks for 2 {guard['gpu']}" in denied.value.body
        # Updates that leave the placement alone are not checked.
        core_v1.patch_namespaced_pod(gated, guard["plain"], {"metadata": {"labels": {"checked": "no"}}})
    finally:
        core_v1.delete_namespaced_pod(gated, guard["plain"], grace_period_seconds=0)
        core_v1.patch_node(whole, {"metadata": {"labels": {guard["label"]: "default"}}})
        restored = run_playbook(PLAYBOOK, extra_vars=guard["vars"])
        assert restored.returncode == 0, restored.stdout[-4000:]


def test_without_any_time_sliced_node_the_guard_installs_and_refuses_nothing(guard, core_v1, run_playbook, kubeconfig):
    # No node carries this config label: empty node and name lists (the API server once panicked on such a policy).
    other = unique("gpushare-it-empty")
    role_vars = {**guard["vars"], "admission_guard_name": other, "admission_guard_config_label": f"gpushare-it.k8s/{other[-6:]}",
                 "admission_guard_file": ""}  # the module's guard keeps its manifest file
    try:
        proc = run_playbook(PLAYBOOK, extra_vars=role_vars)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert "No node time-slices a GPU with failRequestsGreaterThanOne" in proc.stdout
        assert _policy_exists(kubeconfig, other)
    finally:
        removed = run_playbook(PLAYBOOK, extra_vars={**role_vars, "admission_guard_state": "absent"})
        assert removed.returncode == 0, removed.stdout[-4000:]


def test_second_run_changes_nothing(guard, run_playbook, core_v1):
    # gpu-feature-discovery rewrites its timestamp on every pass: an ignored label, so nothing to change.
    core_v1.patch_node(localise("guard-shared", guard["map"]), {"metadata": {"labels": {"nvidia.com/gfd.timestamp": "1764550800"}}})
    check = run_playbook(PLAYBOOK, extra_vars=guard["vars"], check=True)
    assert check.returncode == 0, check.stdout[-4000:]
    assert recap(check)["changed"] == 0, check.stdout[-6000:]
    again = run_playbook(PLAYBOOK, extra_vars=guard["vars"])
    assert again.returncode == 0, again.stdout[-4000:]
    assert recap(again)["changed"] == 0, [l for l in again.stdout.splitlines() if l.startswith(("TASK", "changed"))]


def test_absent_removes_the_guard_and_its_manifest(guard, run_playbook, kubeconfig, core_v1):
    proc = run_playbook(PLAYBOOK, extra_vars={**guard["vars"], "admission_guard_state": "absent"})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert recap(proc)["changed"] > 0
    assert not _policy_exists(kubeconfig, guard["name"])
    assert not (guard["root"] / "k8s" / "admission-guard.yaml").exists()
    # With the guard gone, what it refused is admitted (once the API server has dropped it).
    wait_for(lambda: create(core_v1, guard["plain"], pod(unique("after"), guard["gpu"])) is None, timeout=60,
             what="an over-request to be admitted after removal")


@pytest.mark.parametrize("case", ROUTES["cases"], ids=[case["id"] for case in ROUTES["cases"]])
def test_every_route_to_the_time_sliced_lab_node_is_refused_and_whole_gpus_elsewhere_admitted(routes, core_v1, case):
    answer = create(core_v1, routes["namespace"], route_pod(unique("route"), routes["gpu"], case, routes["map"]))
    if case["outcome"] == "admitted":
        assert answer is None, f"route {case['id']} was refused: {answer}"
        return
    assert case["outcome"] == "refused"
    assert answer is not None, f"route {case['id']} asks for more than one slice and reaches {case['reaches']}, but was admitted"
    status, message = answer
    assert status == 403 and f"ValidatingAdmissionPolicy '{routes['name']}'" in message, message
    for container in case.get("containers") or [{"name": "cuda", "gpus": 2}]:
        if container["gpus"] > 1:
            assert f"container '{container['name']}' asks for {container['gpus']} {routes['gpu']}" in message, message
    configs = {node["name"]: node["labels"].get(CONFIG_LABEL, ROUTES["default_config"]) for node in ROUTES["nodes"]}
    reached = ", ".join(f"{localise(node, routes['map'])} ({routes['label']}={configs[node]})" for node in case["reaches"])
    assert f"{routes['gpu']} is time-sliced with failRequestsGreaterThanOne on nodes this Pod can reach: {reached}." in message, message
