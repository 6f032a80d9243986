# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU requests by intent (role gpushare.k8s.intent_admission) on the live lab cluster.

The module creates Nodes in the lab's three device-plugin layouts (inventory gpushare_nodes: unsliced on config
`default`, time-sliced on config `shared`, MIG mixed 1g.10gb; a second time-sliced node for the relabel case), each
tainted so that only this module's Pods land there, with a config label of its own (so no other policy or Pod on the
shared cluster mistakes them for the lab's nodes). It installs the role's objects bound only to a namespace it creates,
and removes all of it afterwards (one case installs the admission guard beside it, bound to the same namespace, and
removes it). What admission must produce (resource names, node affinity), where the scheduler
must put each Pod, and the refusal messages are written by hand below, never computed by module_utils/requests/intents.py.

The DRA column: three more Nodes (whole GPUs, shared GPUs, MIG; the module's taint, a DRA label of its own) with
ResourceSlices as the DRA driver publishes them, and a second instance of the role over DRA pools only, bound to a
namespace of its own: there each intent becomes a claim from the role's ResourceClaimTemplate, and the device the
scheduler allocated is read from the ResourceClaim's status.
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


def test_the_pods_own_node_affinity_is_kept_as_written(lab, kubectl):
    """The Pod's own required term gains the pool's expression and keeps its own as the user wrote them: NotIn with one
    empty value (the label, where set, must not be empty), Exists without values. The empty value was once dropped, and
    the API server then refused the rewritten Pod (NotIn needs values)."""
    own = [{"key": "example.com/rack", "operator": "NotIn", "values": [""]}, {"key": "example.com/zone", "operator": "Exists"},
           {"key": "example.com/row", "operator": "In", "values": ["", "a"]}]
    body = pod(unique("own"), "whole")
    body["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": own}]}}}
    error, stored = dry_run(kubectl, lab["bound"], body)
    assert stored is not None, error
    assert stored["spec"]["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": own + [{"key": lab["label"], "operator": "In", "values": ["default"]}]}]}}}
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


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
    return json.loads(re.sub(r"kube-api-access-[a-z0-9]{5}", "kube-api-access-x", json.dumps(stored)).replace(json.dumps(namespace), "\"NS\""))


@pytest.mark.parametrize("case", ["no-intent", "names-gpu", "names-gpu-and-intent", "names-mig"])
def test_untouched_pods_are_byte_equal(lab, kubectl, case):
    bodies = {
        "no-intent": pod("plain"),
        # pinned to the module's unsliced node: the lab's guard (make lab binds it to every namespace) refuses 2 GPUs
        # on a Pod that could reach the lab's time-sliced node
        "names-gpu": pod("named", limits={"nvidia.com/gpu": "2"}, node=lab["nodes"]["unsliced"]),
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


# --- The DRA column: the same intents on DRA nodes -------------------------------------------------------------------
#
# Three kwok nodes of the module's own (tainted with its taint, labelled with a DRA label of its own), each with a
# ResourceSlice pool as the DRA driver publishes it (module_utils/dra/devices.py's node_slices: the scheduler is the real
# allocator), and a second instance of the role (<name>-dra) with DRA pools only, bound to a namespace of its own.
# The DeviceClasses are cluster-wide: created when absent, left as they were when present.

DRA_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "shared.gpu.nvidia.com")
CLAIM = "gpushare-gpu"
# intent -> (the template's suffix, the device class, the DRA layout the Pod must land on, the device names it may get)
DRA_TABLE = {
    "whole": ("whole", "gpu.nvidia.com", "dra-whole", r"gpu-[01]"),
    "shared": ("shared", "shared.gpu.nvidia.com", "dra-shared", r"gpu-[01]"),
    "isolated": ("isolated", "mig.nvidia.com", "dra-mig", r"gpu-0-mig-1g10gb-[0-6]"),
    "1g.10gb": ("1g-10gb", "mig.nvidia.com", "dra-mig", r"gpu-0-mig-1g10gb-[0-6]"),
}


def resource_api(core_v1):
    from kubernetes import client

    return client.ResourceV1Api(core_v1.api_client)


def raw(method, *args, **kwargs):
    return json.loads(method(*args, _preload_content=False, **kwargs).data)


@pytest.fixture(scope="module")
def dra_lab(lab, core_v1, run_playbook, kubectl):
    from kubernetes.client.rest import ApiException

    from ansible_collections.gpushare.k8s.plugins.module_utils.dra import devices as dra

    resource = resource_api(core_v1)
    name = lab["name"] + "-dra"
    short = lab["name"][-6:]
    label = f"gpushare-it.k8s/{short}-manager"
    nodes = {layout: f"{name}-{layout[4:]}" for layout in ("dra-whole", "dra-shared", "dra-mig")}
    inventory = {"dra-whole": {"gpus": 2}, "dra-shared": {"gpus": 2, "shared": {"replicas": 4}}, "dra-mig": {"gpus": 1, "mig": True}}
    toleration = {"key": lab["taint"]["key"], "operator": "Equal", "value": lab["taint"]["value"], "effect": "NoSchedule"}

    def pool(layout, dra_class, **extra):
        return {"name": layout, "selector": {"matchLabels": {label: "dra"}, "matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [nodes[layout]]}]},
            "dra": {"class": dra_class, **extra}, "tolerations": [dict(toleration)]}

    pools = [pool("dra-whole", "gpu.nvidia.com"), pool("dra-shared", "shared.gpu.nvidia.com"),
             pool("dra-mig", "mig.nvidia.com", profile="1g.10gb")]
    role_vars = {**lab["vars"], "intent_admission_name": name, "intent_admission_namespaces": [name],
                 "intent_admission_pools": pools, "intent_admission_configs": {}}
    info = {"name": name, "label": label, "nodes": nodes, "namespace": name, "vars": role_vars, "runs": {}, "toleration": toleration,
            "created_classes": [], "slices": []}
    try:
        core_v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        existing = {item["metadata"]["name"] for item in raw(resource.list_device_class)["items"]}
        for device_class in dra.device_classes():
            if device_class["metadata"]["name"] not in existing:
                try:
                    resource.create_device_class(device_class)
                    info["created_classes"].append(device_class["metadata"]["name"])
                except ApiException as exc:  # created meanwhile by someone else: theirs
                    assert exc.status == 409, exc
        for layout, node in nodes.items():
            capacity = dict(CAPACITY)
            created = core_v1.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": node, "labels": {"kubernetes.io/hostname": node, label: "dra"}, "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "spec": {"taints": [lab["taint"]]}, "status": {"capacity": capacity, "allocatable": capacity}})
            [normal] = dra.normalize_nodes([{"name": node, **inventory[layout]}], LAB["gpushare_gpu_product"])
            for item in dra.node_slices(normal, owner_uid=created.metadata.uid):
                item["metadata"]["labels"] = {}  # not the lab's: a pruning run of playbooks/dra.yml leaves it alone
                resource.create_resource_slice(item)
                info["slices"].append(item["metadata"]["name"])
        info["runs"]["check"] = run_playbook(PLAYBOOK, extra_vars=role_vars, check=True, diff=True)
        info["runs"]["after_check"] = kubectl("get", "resourceclaimtemplates", "-n", name, "-o", "name").stdout
        info["runs"]["apply"] = run_playbook(PLAYBOOK, extra_vars=role_vars, diff=True)
        assert info["runs"]["apply"].returncode == 0, info["runs"]["apply"].stdout[-4000:]
        info["runs"]["again"] = run_playbook(PLAYBOOK, extra_vars=role_vars)
        info["runs"]["check_again"] = run_playbook(PLAYBOOK, extra_vars=role_vars, check=True)
        wait_for(lambda: CLAIM in json.dumps((dry_run(kubectl, name, pod("probe", "whole"))[1] or {}).get("spec", {})),
                 timeout=60, what=f"policy {name} to rewrite a Pod in {name}")
        yield info
    finally:
        info["runs"]["remove"] = run_playbook(PLAYBOOK, extra_vars={**role_vars, "intent_admission_state": "absent"})
        kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
        for item in info["slices"]:
            kubectl("delete", "resourceslice", item, "--ignore-not-found", check=False)
        for node in nodes.values():
            kubectl("delete", "node", node, "--ignore-not-found", check=False)
        for device_class in info["created_classes"]:
            kubectl("delete", "deviceclass", device_class, "--ignore-not-found", check=False)


def dra_affinity(dra_lab, layout):
    return affinity_of([(dra_lab["label"], "In", ["dra"]), ("kubernetes.io/hostname", "In", [dra_lab["nodes"][layout]])])


def templates_in(kubectl, namespace, policy):
    out = kubectl("get", "resourceclaimtemplates", "-n", namespace, "-l", f"gpushare.k8s/intent-policy={policy}",
                  "-o", "jsonpath={.items[*].metadata.name}", check=False)
    return sorted(out.stdout.split())


def test_dra_role_check_mode_templates_and_idempotence(dra_lab, kubectl):
    runs, name = dra_lab["runs"], dra_lab["name"]
    assert runs["check"].returncode == 0, runs["check"].stdout[-3000:]
    assert recap(runs["check"])["changed"] >= 1
    assert runs["after_check"] == "", "check mode created a template"
    assert f"{name}-isolated" in runs["check"].stdout  # the diff shows the templates to create
    assert recap(runs["apply"])["changed"] >= 1
    assert recap(runs["again"])["changed"] == 0, runs["again"].stdout[-3000:]
    assert recap(runs["check_again"])["changed"] == 0, runs["check_again"].stdout[-3000:]
    assert templates_in(kubectl, name, name) == [f"{name}-1g-10gb", f"{name}-isolated", f"{name}-shared", f"{name}-whole"]
    isolated = json.loads(kubectl("get", "resourceclaimtemplate", f"{name}-isolated", "-n", name, "-o", "json").stdout)
    assert isolated["spec"]["spec"]["devices"]["requests"] == [{"name": "gpu", "exactly": {
        "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}]


@pytest.mark.parametrize("intent", sorted(DRA_TABLE))
def test_dra_dry_run_spec_per_intent(dra_lab, kubectl, intent):
    suffix, _class, layout, _device = DRA_TABLE[intent]
    error, stored = dry_run(kubectl, dra_lab["namespace"], pod(unique("dry"), intent))
    assert stored is not None, error
    assert stored["spec"]["resourceClaims"] == [{"name": CLAIM, "resourceClaimTemplateName": f"{dra_lab['name']}-{suffix}"}]
    assert stored["spec"]["containers"][0]["resources"] == {"claims": [{"name": CLAIM}]}
    assert stored["spec"]["affinity"] == dra_affinity(dra_lab, layout)
    assert dra_lab["toleration"] in stored["spec"]["tolerations"]


def claim_of(core_v1, namespace, pod_name, claim=CLAIM):
    """The ResourceClaim the Pod's claim `claim` became, once allocated."""
    def allocated():
        current = raw(core_v1.read_namespaced_pod, pod_name, namespace)
        names = [c.get("resourceClaimName") for c in current.get("status", {}).get("resourceClaimStatuses", []) if c.get("name") == claim]
        if not names or not names[0]:
            return None
        found = raw(resource_api(core_v1).read_namespaced_resource_claim, names[0], namespace)
        return found if found.get("status", {}).get("allocation") else None
    return wait_for(allocated, timeout=60, what=f"the claim {claim} of Pod {namespace}/{pod_name} to be allocated")


def device_of(core_v1, node, device):
    for item in raw(resource_api(core_v1).list_resource_slice, field_selector="spec.driver=gpu.nvidia.com")["items"]:
        if item["spec"]["pool"]["name"] == node:
            for entry in item["spec"].get("devices", []):
                if entry["name"] == device:
                    return entry
    return None


@pytest.mark.parametrize("intent", sorted(DRA_TABLE))
def test_dra_scheduled_and_allocated_per_intent(dra_lab, core_v1, intent):
    """The manifest carries no toleration and no placement: admission adds both, the scheduler allocates a device of
    the intent's class on the intent's node, read back from the ResourceClaim's status."""
    _suffix, device_class, layout, device_re = DRA_TABLE[intent]
    namespace, name = dra_lab["namespace"], unique("dra-" + intent.replace(".", "-"))
    core_v1.create_namespaced_pod(namespace, pod(name, intent))
    try:
        assert scheduled_on(core_v1, namespace, name) == dra_lab["nodes"][layout]
        claim = claim_of(core_v1, namespace, name)
        assert [r["exactly"]["deviceClassName"] for r in claim["spec"]["devices"]["requests"]] == [device_class]
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"], result["request"]) == ("gpu.nvidia.com", dra_lab["nodes"][layout], "gpu")
        assert re.fullmatch(device_re, result["device"]), result
        device = device_of(core_v1, dra_lab["nodes"][layout], result["device"])
        kind = {"gpu.nvidia.com": "gpu", "shared.gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig"}[device_class]
        assert device["attributes"]["type"] == {"string": kind}
        assert bool(device.get("allowMultipleAllocations")) == (device_class == "shared.gpu.nvidia.com")
        if kind == "mig":
            assert device["attributes"]["profile"] == {"string": "1g.10gb"}
    finally:
        core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


@pytest.mark.parametrize("intent", sorted(DRA_TABLE))
def test_dra_scheduled_per_intent_and_layout(dra_lab, core_v1, intent):
    """Every intent x every DRA layout: pinned to the layout's node, the Pod is scheduled there exactly when the layout gives it."""
    _suffix, _class, wanted, _device = DRA_TABLE[intent]
    namespace, names = dra_lab["namespace"], {}
    for layout, node in dra_lab["nodes"].items():
        body = pod(unique(f"pin-{layout}"), intent, node=node)
        core_v1.create_namespaced_pod(namespace, body)
        names[layout] = body["metadata"]["name"]
    try:
        seen = {layout: scheduled_on(core_v1, namespace, name) for layout, name in names.items()}
        assert seen == {layout: (node if layout == wanted else None) for layout, node in dra_lab["nodes"].items()}
    finally:
        for name in names.values():
            core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


@pytest.mark.parametrize("intent, count, layout, devices", [
    ("whole", 2, "dra-whole", {"gpu-0", "gpu-1"}),  # the node's two GPUs
    ("isolated", 2, "dra-mig", None),  # two 1g.10gb instances
    ("whole", 3, "dra-whole", None),  # more GPUs than the node has: the scheduler leaves it Pending
])
def test_dra_count_is_one_claim_per_device(dra_lab, core_v1, kubectl, intent, count, layout, devices):
    """gpushare.k8s/gpu-count N on a DRA pool: N claims from the intent's one template, each container naming them all;
    the scheduler allocates N distinct devices on one node, or none."""
    namespace, name = dra_lab["namespace"], unique(f"dra-count-{intent}")
    claims = [CLAIM] + [f"{CLAIM}-{index}" for index in range(1, count)]
    error, stored = dry_run(kubectl, namespace, pod(name, intent, count=count))
    assert stored is not None, error
    assert stored["spec"]["resourceClaims"] == [{"name": claim, "resourceClaimTemplateName": f"{dra_lab['name']}-{intent}"} for claim in claims]
    assert stored["spec"]["containers"][0]["resources"] == {"claims": [{"name": claim} for claim in claims]}
    core_v1.create_namespaced_pod(namespace, pod(name, intent, count=count))
    try:
        if count == 3:
            assert scheduled_on(core_v1, namespace, name) is None
            return
        assert scheduled_on(core_v1, namespace, name) == dra_lab["nodes"][layout]
        got = []
        for claim in claims:
            [result] = claim_of(core_v1, namespace, name, claim)["status"]["allocation"]["devices"]["results"]
            assert result["pool"] == dra_lab["nodes"][layout], result
            got.append(result["device"])
        assert len(set(got)) == count, got
        if devices:
            assert set(got) == devices
        else:
            assert all(re.fullmatch(r"gpu-0-mig-1g10gb-[0-6]", device) for device in got), got
    finally:
        core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def test_dra_deployment_gets_a_claim_per_pod(dra_lab, core_v1, kubectl):
    namespace, name = dra_lab["namespace"], unique("dra-deploy")
    template = pod(name, "shared")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                           "template": {"metadata": {"labels": {"app": name}, "annotations": template["metadata"]["annotations"]},
                                        "spec": template["spec"]}}}
    kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(deployment))
    try:
        def placed():
            items = [p for p in core_v1.list_namespaced_pod(namespace, label_selector=f"app={name}").items if p.spec.node_name]
            return items if len(items) == 3 else None
        pods = wait_for(placed, timeout=90, what=f"the 3 Pods of Deployment {name} to be scheduled")
        claims = set()
        for item in pods:
            stored = core_v1.api_client.sanitize_for_serialization(item)
            assert stored["spec"]["resourceClaims"] == [{"name": CLAIM, "resourceClaimTemplateName": f"{dra_lab['name']}-shared"}]
            assert stored["spec"]["containers"][0]["resources"] == {"claims": [{"name": CLAIM}]}
            assert item.spec.node_name == dra_lab["nodes"]["dra-shared"]
            claim = claim_of(core_v1, namespace, item.metadata.name)
            [result] = claim["status"]["allocation"]["devices"]["results"]
            assert result["pool"] == dra_lab["nodes"]["dra-shared"] and result["device"] in ("gpu-0", "gpu-1"), result
            claims.add(claim["metadata"]["name"])
        assert len(claims) == 3  # one claim per Pod, from the one template
    finally:
        kubectl("delete", "deployment", name, "-n", namespace, "--wait=false", check=False)


def test_the_same_manifest_on_both_kinds_of_nodes(lab, dra_lab, kubectl):
    """`shared` in the device-plugin namespace: a time-slice by resource name; in the DRA namespace: a claim."""
    body = pod("same", "shared")
    error, plugin = dry_run(kubectl, lab["bound"], body)
    assert plugin is not None, error
    error, claimed = dry_run(kubectl, dra_lab["namespace"], body)
    assert claimed is not None, error
    assert plugin["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    assert plugin["spec"]["affinity"] == expected_affinity(lab, "shared") and "resourceClaims" not in plugin["spec"]
    assert claimed["spec"]["containers"][0]["resources"] == {"claims": [{"name": CLAIM}]}
    assert claimed["spec"]["affinity"] == dra_affinity(dra_lab, "dra-shared")


def test_dra_refusals(dra_lab, kubectl, run_playbook):
    summary = ("pools: dra-whole gives whole as a gpu.nvidia.com claim; "
               "dra-shared gives shared as a shared.gpu.nvidia.com claim (at most 1 per container); "
               "dra-mig gives isolated as a mig.nvidia.com claim for 1g.10gb, 1g.10gb as a mig.nvidia.com claim for 1g.10gb")
    error, stored = dry_run(kubectl, dra_lab["namespace"], pod("two", "shared", count=2))
    assert stored is None
    assert "GPU intent 'shared' gives at most 1 per container (shared.gpu.nvidia.com), asked for 2; " + summary in error, error
    error, stored = dry_run(kubectl, dra_lab["namespace"], pod("bogus", "3g.40gb"))
    assert stored is None and "GPU intent '3g.40gb' (annotation gpushare.k8s/gpu) is given by no pool of this cluster; " + summary in error, error
    # DRA pools with a namespace selector only: refused before any write, naming the field and the fix
    refused_name = dra_lab["name"] + "-sel"
    refused = run_playbook(PLAYBOOK, extra_vars={**dra_lab["vars"], "intent_admission_name": refused_name, "intent_admission_namespaces": [],
                                                 "intent_admission_namespace_selector": {"matchLabels": {"gpu": "yes"}}})
    assert refused.returncode != 0
    assert ("intent_admission_namespaces: is empty, and DRA pools (dra-mig, dra-shared, dra-whole) give 1g.10gb, isolated, shared, whole "
            "as a claim from a ResourceClaimTemplate") in refused.stdout, refused.stdout[-3000:]
    assert "Fix: name the namespaces (intent_admission_namespaces)" in refused.stdout
    assert "NotFound" in kubectl("get", "mutatingadmissionpolicy", refused_name, check=False).stderr


def test_dra_changed_profile_replaces_its_templates(dra_lab, run_playbook, kubectl):
    """The MIG pool's profile changes: the templates of isolated and 1g.10gb go (a template's spec is immutable),
    those of the new profile come; back again, as before."""
    name, namespace = dra_lab["name"], dra_lab["namespace"]
    pools = copy.deepcopy(dra_lab["vars"]["intent_admission_pools"])
    pools[2]["dra"]["profile"] = "2g.20gb"
    changed = {**dra_lab["vars"], "intent_admission_pools": pools}
    try:
        check = run_playbook(PLAYBOOK, extra_vars=changed, check=True)
        assert check.returncode == 0 and recap(check)["changed"] >= 1, check.stdout[-3000:]
        assert templates_in(kubectl, namespace, name) == [f"{name}-1g-10gb", f"{name}-isolated", f"{name}-shared", f"{name}-whole"]
        run = run_playbook(PLAYBOOK, extra_vars=changed)
        assert run.returncode == 0 and recap(run)["changed"] >= 1, run.stdout[-3000:]
        assert templates_in(kubectl, namespace, name) == [f"{name}-2g-20gb", f"{name}-isolated", f"{name}-shared", f"{name}-whole"]
        isolated = json.loads(kubectl("get", "resourceclaimtemplate", f"{name}-isolated", "-n", namespace, "-o", "json").stdout)
        assert isolated["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] == [
            {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '2g.20gb'"}}]
    finally:
        restored = run_playbook(PLAYBOOK, extra_vars=dra_lab["vars"])
    assert restored.returncode == 0, restored.stdout[-3000:]
    assert templates_in(kubectl, namespace, name) == [f"{name}-1g-10gb", f"{name}-isolated", f"{name}-shared", f"{name}-whole"]
    wait_for(lambda: "is given by no pool" in dry_run(kubectl, namespace, pod("back", "2g.20gb"))[0], timeout=60,
             what="2g.20gb to be refused again")


def test_dra_absent_removes_policies_and_templates(dra_lab, run_playbook, kubectl):
    name = dra_lab["name"]
    absent = {**dra_lab["vars"], "intent_admission_state": "absent"}
    check = run_playbook(PLAYBOOK, extra_vars=absent, check=True)
    assert check.returncode == 0 and recap(check)["changed"] >= 1, check.stdout[-3000:]
    assert len(templates_in(kubectl, dra_lab["namespace"], name)) == 4
    removed = run_playbook(PLAYBOOK, extra_vars=absent)
    assert removed.returncode == 0 and recap(removed)["changed"] >= 1, removed.stdout[-3000:]
    assert templates_in(kubectl, dra_lab["namespace"], name) == []
    assert "NotFound" in kubectl("get", "mutatingadmissionpolicy", name, check=False).stderr
    again = run_playbook(PLAYBOOK, extra_vars=absent)
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-3000:]


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
