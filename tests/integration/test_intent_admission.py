# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU requests by intent (role gpushare.k8s.intent_admission) on the live lab cluster.

The module creates Nodes in the lab's three device-plugin layouts (inventory gpushare_nodes: unsliced on config
`default`, time-sliced on config `shared`, MIG mixed 1g.10gb; a second time-sliced node for the relabel case), each
tainted so that only this module's Pods land there, with a config label of its own (so no other policy or Pod on the
shared cluster mistakes them for the lab's nodes). It installs the role's objects bound only to a namespace it creates,
and removes all of it afterwards (one case installs the admission guard beside it, bound to the same namespace, and
removes it). What admission must produce (resource names, node affinity), where the scheduler
must put each Pod, and the refusal messages are written by hand below, never computed by module_utils/intents.py.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from lab_helpers import unique, wait_for

REPO = Path(__file__).resolve().parents[2]
LAB = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "lab.yml").read_text(encoding="utf-8"))
PLAYBOOK = "tests/integration/playbooks/role.yml"
INTENT, COUNT = "gpushare.k8s/gpu", "gpushare.k8s/gpu-count"
CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110"}

# The lab's layouts: node suffix -> (config label value or None, what the node advertises). Written by hand from
# inventory/group_vars/all/lab.yml: 2 GPUs unsliced, 2 GPUs x 4 replicas, 1 A100-80GB in 7 x 1g.10gb.
LAYOUTS = {
    "unsliced": ("default", {"nvidia.com/gpu": "2"}),
    "sliced": ("shared", {"nvidia.com/gpu": "8"}),
    "mig": (None, {"nvidia.com/mig-1g.10gb": "7"}),
}
# intent -> (resource admission writes, the layouts whose node the scheduler may use)
TABLE = {
    "whole": ("nvidia.com/gpu", {"unsliced"}),
    "shared": ("nvidia.com/gpu", {"sliced"}),
    "isolated": ("nvidia.com/mig-1g.10gb", {"mig"}),
    "1g.10gb": ("nvidia.com/mig-1g.10gb", {"mig"}),
}


def recap(proc):
    lines = [line for line in proc.stdout.splitlines() if line.startswith("localhost")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1])}


@pytest.fixture(scope="module")
def lab(core_v1, run_playbook, kubeconfig, kubectl):
    name = unique("gpushare-it-intent")
    short = name[-6:]
    label = f"gpushare-it.k8s/{short}-config"
    taint = {"key": "gpushare-it.k8s/intent", "value": short, "effect": "NoSchedule"}
    bound, unbound = name, f"{name}-plain"
    nodes = {layout: f"{name}-{layout}" for layout in LAYOUTS}
    nodes["sliced-2"] = f"{name}-sliced-2"
    mig_node = [node for node in LAB["gpushare_nodes"] if node.get("mig")][0]
    pools = [
        {"name": "unsliced", "selector": {"matchLabels": {label: "default"}}, "config": "default"},
        {"name": "time-sliced", "selector": {"matchLabels": {label: "shared"}}, "config": "shared"},
        {"name": "mig-1g-10gb", "selector": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [nodes["mig"]]}]},
         "mig": {"profile": mig_node["mig"]["profile"]}},
    ]
    role_vars = {
        "it_role": "gpushare.k8s.intent_admission", "gpushare_kubeconfig": kubeconfig,
        "intent_admission_name": name, "intent_admission_namespaces": [bound],
        "intent_admission_pools": pools, "intent_admission_configs": LAB["gpushare_device_plugin_configs"],
    }
    info = {"name": name, "label": label, "taint": taint, "nodes": nodes, "bound": bound, "unbound": unbound, "vars": role_vars, "runs": {}}
    try:
        for namespace in (bound, unbound):
            core_v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for layout, node in nodes.items():
            config, gpus = LAYOUTS[layout.split("-")[0]]
            labels = {"kubernetes.io/hostname": node, **({label: config} if config else {})}
            capacity = {**CAPACITY, **gpus}
            core_v1.create_node({"apiVersion": "v1", "kind": "Node",
                                 "metadata": {"name": node, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
                                 "spec": {"taints": [taint]}, "status": {"capacity": capacity, "allocatable": capacity}})
        info["runs"]["check"] = run_playbook(PLAYBOOK, extra_vars=role_vars, check=True, diff=True)
        info["runs"]["after_check"] = kubectl("get", "mutatingadmissionpolicy", name, check=False).returncode
        info["runs"]["apply"] = run_playbook(PLAYBOOK, extra_vars=role_vars, diff=True)
        assert info["runs"]["apply"].returncode == 0, info["runs"]["apply"].stdout[-4000:]
        info["runs"]["again"] = run_playbook(PLAYBOOK, extra_vars=role_vars)
        info["runs"]["check_again"] = run_playbook(PLAYBOOK, extra_vars=role_vars, check=True)
        # The API server loads policies asynchronously: wait until a dry-run Pod asking for `whole` is rewritten.
        wait_for(lambda: "nvidia.com/gpu" in json.dumps((dry_run(kubectl, bound, pod("probe", "whole"))[1] or {}).get("spec", {})),
                 timeout=60, what=f"policy {name} to rewrite a Pod in {bound}")
        yield info
    finally:
        info["runs"]["remove"] = run_playbook(PLAYBOOK, extra_vars={**role_vars, "intent_admission_state": "absent"})
        for namespace in (bound, unbound):
            kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)
        for node in nodes.values():
            kubectl("delete", "node", node, "--ignore-not-found", check=False)


def pod(name, intent=None, count=None, limits=None, node=None, toleration=None, annotations=None):
    """A Pod asking by intent (or naming `limits` itself), optionally pinned to `node` by hostname."""
    meta = {"name": name, "annotations": dict(annotations or {})}
    if intent is not None:
        meta["annotations"][INTENT] = intent
    if count is not None:
        meta["annotations"][COUNT] = str(count)
    container = {"name": "cuda", "image": "pause:3.10"}
    if limits:
        container["resources"] = {"limits": limits}
    spec = {"containers": [container]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if toleration:
        spec["tolerations"] = [{"key": toleration["key"], "operator": "Equal", "value": toleration["value"], "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def dry_run(kubectl, namespace, body):
    """(stderr, the Pod the API server would store) of `kubectl create --dry-run=server`; the Pod is None when refused."""
    proc = kubectl("create", "--dry-run=server", "-o", "json", "-n", namespace, "-f", "-", input_text=json.dumps(body), check=False)
    return proc.stderr, (json.loads(proc.stdout) if proc.returncode == 0 else None)


def affinity_of(*terms):
    """The node affinity admission must produce: one term per pool, written by hand."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": op, "values": values} for key, op, values in term]} for term in terms]}}}


def expected_affinity(lab, intent):
    pools = {"whole": [[(lab["label"], "In", ["default"])]], "shared": [[(lab["label"], "In", ["shared"])]],
             "isolated": [[("kubernetes.io/hostname", "In", [lab["nodes"]["mig"]])]], "1g.10gb": [[("kubernetes.io/hostname", "In", [lab["nodes"]["mig"]])]]}
    return affinity_of(*pools[intent])


def scheduled_on(core_v1, namespace, name, timeout=60):
    """The node the scheduler put the Pod on, or None when it says the Pod fits no node."""
    def decided():
        current = core_v1.read_namespaced_pod(name, namespace)
        if current.spec.node_name:
            return ("node", current.spec.node_name)
        for condition in current.status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "False" and condition.reason == "Unschedulable":
                return ("none", None)
        return None
    return wait_for(decided, timeout=timeout, what=f"the scheduler to decide on Pod {namespace}/{name}")[1]


def test_role_check_mode_and_idempotence(lab):
    runs = lab["runs"]
    assert runs["check"].returncode == 0, runs["check"].stdout[-3000:]
    assert recap(runs["check"])["changed"] >= 1
    assert runs["after_check"] != 0, "check mode created the policy"
    assert recap(runs["apply"])["changed"] >= 1
    assert recap(runs["again"])["changed"] == 0, runs["again"].stdout[-3000:]
    assert recap(runs["check_again"])["changed"] == 0, runs["check_again"].stdout[-3000:]


@pytest.mark.parametrize("intent", sorted(TABLE))
def test_dry_run_spec_per_intent(lab, kubectl, intent):
    resource, _layouts = TABLE[intent]
    error, stored = dry_run(kubectl, lab["bound"], pod(unique("dry"), intent))
    assert stored is not None, error
    assert stored["spec"]["containers"][0]["resources"] == {"limits": {resource: "1"}, "requests": {resource: "1"}}
    assert stored["spec"]["affinity"] == expected_affinity(lab, intent)


@pytest.mark.parametrize("intent", sorted(TABLE))
def test_scheduled_per_intent_and_layout(lab, core_v1, intent):
    """Every intent x every layout: pinned to the layout's node, the Pod is scheduled there exactly when the layout gives it."""
    resource, layouts = TABLE[intent]
    namespace, names = lab["bound"], {}
    for layout in LAYOUTS:
        body = pod(unique(f"pin-{layout}"), intent, node=lab["nodes"][layout], toleration=lab["taint"])
        created = core_v1.create_namespaced_pod(namespace, body)
        assert created.spec.containers[0].resources.limits == {resource: "1"}
        names[layout] = body["metadata"]["name"]
    try:
        seen = {layout: scheduled_on(core_v1, namespace, name) for layout, name in names.items()}
        assert seen == {layout: (lab["nodes"][layout] if layout in layouts else None) for layout in LAYOUTS}
    finally:
        for name in names.values():
            core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def test_unpinned_pod_lands_in_its_pool(lab, core_v1):
    namespace = lab["bound"]
    body = pod(unique("free"), "isolated", toleration=lab["taint"])
    core_v1.create_namespaced_pod(namespace, body)
    try:
        assert scheduled_on(core_v1, namespace, body["metadata"]["name"]) == lab["nodes"]["mig"]
    finally:
        core_v1.delete_namespaced_pod(body["metadata"]["name"], namespace, grace_period_seconds=0)


def test_deployment_pods_get_the_same(lab, core_v1, kubectl):
    namespace, name = lab["bound"], unique("deploy")
    template = pod(name, "shared", toleration=lab["taint"])
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                           "template": {"metadata": {"labels": {"app": name}, "annotations": template["metadata"]["annotations"]},
                                        "spec": template["spec"]}}}
    kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(deployment))
    try:
        pods = wait_for(lambda: [p for p in core_v1.list_namespaced_pod(namespace, label_selector=f"app={name}").items if p.spec.node_name]
                        if len([p for p in core_v1.list_namespaced_pod(namespace, label_selector=f"app={name}").items if p.spec.node_name]) == 3 else None,
                        timeout=90, what=f"the 3 Pods of Deployment {name} to be scheduled")
        sliced = {lab["nodes"]["sliced"], lab["nodes"]["sliced-2"]}
        for item in pods:
            stored = core_v1.api_client.sanitize_for_serialization(item)
            assert stored["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
            assert stored["spec"]["affinity"] == expected_affinity(lab, "shared")
            assert item.spec.node_name in sliced
    finally:
        kubectl("delete", "deployment", name, "-n", namespace, "--wait=false", check=False)


def test_relabel_moves_a_node_between_pools_without_reapplying(lab, core_v1, kubectl):
    namespace, node = lab["bound"], lab["nodes"]["sliced-2"]
    before = {kind: kubectl("get", kind, lab["name"], "-o", "jsonpath={.metadata.resourceVersion}").stdout
              for kind in ("mutatingadmissionpolicy", "validatingadmissionpolicy")}

    def outcome(intent):
        body = pod(unique(f"relabel-{intent}"), intent, node=node, toleration=lab["taint"])
        core_v1.create_namespaced_pod(namespace, body)
        try:
            return scheduled_on(core_v1, namespace, body["metadata"]["name"])
        finally:
            core_v1.delete_namespaced_pod(body["metadata"]["name"], namespace, grace_period_seconds=0)

    assert (outcome("whole"), outcome("shared")) == (None, node)
    kubectl("label", "node", node, f"{lab['label']}=default", "--overwrite")
    try:
        assert (outcome("whole"), outcome("shared")) == (node, None)
    finally:
        kubectl("label", "node", node, f"{lab['label']}=shared", "--overwrite")
    after = {kind: kubectl("get", kind, lab["name"], "-o", "jsonpath={.metadata.resourceVersion}").stdout
             for kind in ("mutatingadmissionpolicy", "validatingadmissionpolicy")}
    assert after == before


def normalised(stored, namespace):
    """A dry-run Pod without what differs per request: uid, timestamps, namespace, the token volume's random suffix."""
    stored = copy.deepcopy(stored)
    for key in ("uid", "creationTimestamp", "resourceVersion", "managedFields", "namespace", "generation"):
        stored["metadata"].pop(key, None)
    return json.loads(re.sub(r"kube-api-access-[a-z0-9]{5}", "kube-api-access-x", json.dumps(stored)).replace(namespace, "NS"))


@pytest.mark.parametrize("case", ["no-intent", "names-gpu", "names-gpu-and-intent", "names-mig"])
def test_untouched_pods_are_byte_equal(lab, kubectl, case):
    bodies = {
        "no-intent": pod("plain"),
        "names-gpu": pod("named", limits={"nvidia.com/gpu": "2"}),
        "names-gpu-and-intent": pod("named-intent", "whole", limits={"nvidia.com/gpu": "1"}),
        "names-mig": pod("named-mig", "shared", limits={"nvidia.com/mig-1g.10gb": "1"}),
    }
    body = bodies[case]
    error, with_policy = dry_run(kubectl, lab["bound"], body)
    assert with_policy is not None, error
    error, without = dry_run(kubectl, lab["unbound"], body)
    assert without is not None, error
    assert normalised(with_policy, lab["bound"]) == normalised(without, lab["unbound"])


def test_refusals_name_the_pools(lab, kubectl):
    summary = ("pools: unsliced gives whole as nvidia.com/gpu; time-sliced gives shared as nvidia.com/gpu (at most 1 per container); "
               "mig-1g-10gb gives isolated as nvidia.com/mig-1g.10gb, 1g.10gb as nvidia.com/mig-1g.10gb")
    error, stored = dry_run(kubectl, lab["bound"], pod("bogus", "3g.40gb"))
    assert stored is None
    assert ("GPU intent '3g.40gb' (annotation gpushare.k8s/gpu) is given by no pool of this cluster; " + summary
            + ". Fix: ask for one of 1g.10gb,isolated,shared,whole") in error, error
    error, stored = dry_run(kubectl, lab["bound"], pod("two", "shared", count=2))
    assert stored is None
    assert "GPU intent 'shared' gives at most 1 per container (nvidia.com/gpu), asked for 2; " + summary in error, error
    error, stored = dry_run(kubectl, lab["bound"], pod("zero", "whole", count=0))
    assert stored is None and "annotation gpushare.k8s/gpu-count must be a whole number from 1 to 999, got '0'" in error, error
    # more than one whole GPU is fine, on the unsliced pool
    error, stored = dry_run(kubectl, lab["bound"], pod("two-whole", "whole", count=2))
    assert stored is not None and stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}, error


def test_a_changed_config_changes_the_answer(lab, run_playbook, kubectl):
    """failRequestsGreaterThanOne turned off: check mode predicts the change and writes nothing; the run rewrites the
    policies' params, and 2 x shared is admitted; turned back on, it is refused again."""
    configs = copy.deepcopy(LAB["gpushare_device_plugin_configs"])
    configs["shared"]["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] = False
    changed = {**lab["vars"], "intent_admission_configs": configs}
    version = kubectl("get", "mutatingadmissionpolicy", lab["name"], "-o", "jsonpath={.metadata.resourceVersion}").stdout
    try:
        check = run_playbook(PLAYBOOK, extra_vars=changed, check=True, diff=True)
        assert check.returncode == 0 and recap(check)["changed"] >= 1, check.stdout[-3000:]
        assert '"intent.shared.max": ""' in check.stdout, check.stdout[-3000:]  # the diff shows the new answer
        assert kubectl("get", "mutatingadmissionpolicy", lab["name"], "-o", "jsonpath={.metadata.resourceVersion}").stdout == version
        run = run_playbook(PLAYBOOK, extra_vars=changed)
        assert run.returncode == 0 and recap(run)["changed"] >= 1, run.stdout[-3000:]
        # both policies load the change asynchronously: until the mutating one has, the Pod is refused unrewritten
        stored = wait_for(lambda: dry_run(kubectl, lab["bound"], pod("two", "shared", count=2))[1], timeout=60,
                          what="2 x shared to be admitted once failRequestsGreaterThanOne is off")
        assert stored["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}
    finally:
        restored = run_playbook(PLAYBOOK, extra_vars=lab["vars"])
    assert restored.returncode == 0 and recap(restored)["changed"] >= 1, restored.stdout[-3000:]
    wait_for(lambda: "at most 1 per container" in dry_run(kubectl, lab["bound"], pod("two", "shared", count=2))[0], timeout=60,
             what="2 x shared to be refused again")


def test_the_guard_still_sees_the_rewritten_pod(lab, run_playbook, kubectl, tmp_path):
    """`whole` x2 with spec.nodeName on the time-sliced node: admission writes nvidia.com/gpu: 2 (nodeName bypasses the
    pools' affinity), and the admission guard (role admission_guard, bound to this namespace only) refuses the result."""
    body = pod("pinned", "whole", count=2)
    body["spec"]["nodeName"] = lab["nodes"]["sliced"]
    error, stored = dry_run(kubectl, lab["bound"], body)
    assert stored is not None and stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}, error
    guard = {"it_role": "gpushare.k8s.admission_guard", "gpushare_kubeconfig": lab["vars"]["gpushare_kubeconfig"],
             "admission_guard_name": lab["name"] + "-guard", "admission_guard_configs": LAB["gpushare_device_plugin_configs"],
             "admission_guard_config_label": lab["label"], "admission_guard_probe_namespace": lab["bound"],
             "admission_guard_namespace_selector": {"matchExpressions": [
                 {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [lab["bound"]]}]},
             "admission_guard_lab_root": str(tmp_path), "admission_guard_file": ""}
    try:
        installed = run_playbook(PLAYBOOK, extra_vars=guard)
        assert installed.returncode == 0, installed.stdout[-3000:]
        error = wait_for(lambda: dry_run(kubectl, lab["bound"], body)[0], timeout=60, what="the guard to refuse the rewritten Pod")
        assert f"ValidatingAdmissionPolicy '{lab['name']}-guard'" in error and "asks for 2 nvidia.com/gpu" in error, error
    finally:
        removed = run_playbook(PLAYBOOK, extra_vars={**guard, "admission_guard_state": "absent"})
    assert removed.returncode == 0, removed.stdout[-3000:]


def test_absent_removes_both_policies(lab, run_playbook, kubectl):
    """Last: state absent predicts the removal in check mode, removes the four objects, then changes nothing."""
    kinds = ("mutatingadmissionpolicy", "mutatingadmissionpolicybinding", "validatingadmissionpolicy", "validatingadmissionpolicybinding")
    absent = {**lab["vars"], "intent_admission_state": "absent"}
    check = run_playbook(PLAYBOOK, extra_vars=absent, check=True)
    assert check.returncode == 0 and recap(check)["changed"] >= 1, check.stdout[-3000:]
    assert all(kubectl("get", kind, lab["name"], check=False).returncode == 0 for kind in kinds)
    removed = run_playbook(PLAYBOOK, extra_vars=absent)
    assert removed.returncode == 0 and recap(removed)["changed"] >= 1, removed.stdout[-3000:]
    assert all("NotFound" in kubectl("get", kind, lab["name"], check=False).stderr for kind in kinds)
    again = run_playbook(PLAYBOOK, extra_vars=absent)
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-3000:]
