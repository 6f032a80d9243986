# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wait for the GPU Operator (module_utils/nvidia/operator_wait.py): the versions read from the operand images, the
operator's signals of completion, the verdict once a node has settled, the MIG manager's failure, the messages.

The cluster is a list of reads here (a fake clock moves only when the wait sleeps); the live runs are in
tests/integration/test_gpu_operator_versions.py and test_gpu_operator_mode.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator as op
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import operator_wait as w

REPO = Path(__file__).resolve().parents[4]
INVENTORY = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "lab.yml").read_text())
NODES = {node["name"]: node for node in INVENTORY["gpushare_nodes"]}
CONFIGS = INVENTORY["gpushare_device_plugin_configs"]
A100_80 = "NVIDIA-A100-SXM4-80GB"
NS = "gpu-operator"
PLUGIN_DS = "nvidia-device-plugin-daemonset"
GFD_DS = "gpu-feature-discovery"
# A registry of no one's: the tests name no real registry.
REGISTRY = "registry.example/nvidia"


def _predict(name):
    return op.predict(NODES[name], CONFIGS, "mixed", A100_80, "default")


def _node(name, labels=None, capacity=None, allocatable=None, annotations=None):
    return {"metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
            "status": {"capacity": dict(capacity or {}), "allocatable": dict(allocatable if allocatable is not None else capacity or {})}}


def _shown(want, **extra_labels):
    """A node that shows exactly what ``want`` predicts (the values written out as strings)."""
    resources = {name: str(count) for name, count in want["resources"].items()}
    return resources, dict(want["labels"], **extra_labels)


def _daemonset(name, image, generation=1, observed=1, desired=0, updated=0, selector=None, container=None):
    container = container or ("nvidia-device-plugin" if name == PLUGIN_DS else "gpu-feature-discovery")
    return {"metadata": {"name": name, "namespace": NS, "generation": generation},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"spec": {"nodeSelector": dict(selector or {}),
                                           "containers": [{"name": "toolkit-validation", "image": REGISTRY + "/gpu-operator-validator:v25.3.0"},
                                                          {"name": container, "image": image}]}}},
            "status": {"observedGeneration": observed, "desiredNumberScheduled": desired, "updatedNumberScheduled": updated}}


def _daemonsets(version="v0.18.0", **kwargs):
    image = "%s/k8s-device-plugin:%s" % (REGISTRY, version)
    return {PLUGIN_DS: _daemonset(PLUGIN_DS, image, **kwargs), GFD_DS: _daemonset(GFD_DS, image, **kwargs)}


def _pod(daemonset, node, ready=True, image=None, uid="u1", deleting=False, generation=None):
    container = "nvidia-device-plugin" if daemonset == PLUGIN_DS else "gpu-feature-discovery"
    metadata = {"name": "%s-%s" % (daemonset, node), "uid": uid, "labels": {"app": daemonset}, "creationTimestamp": "2026-12-01T00:00:00Z"}
    if generation is not None:
        metadata["labels"]["pod-template-generation"] = str(generation)
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-01T00:01:00Z"
    return {"metadata": metadata, "spec": {"nodeName": node, "containers": [{"name": container, "image": image or REGISTRY + "/k8s-device-plugin:v0.18.0"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class _Clock:
    """A clock that moves only when the wait sleeps."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _run(reads, expected, clock=None, **kwargs):
    """The wait over ``reads``: a function of the fake clock's time giving the cluster as read then."""
    clock = clock or _Clock()
    kwargs.setdefault("timeout", 300)
    kwargs.setdefault("interval", 1.0)
    kwargs.setdefault("settle", 20.0)
    return w.wait_for_nodes(lambda: reads(clock.now), expected, clock=clock, sleep=clock.sleep, **kwargs), clock


# ---------------------------------------------------------------------------
# versions


@pytest.mark.parametrize("image, version", [
    (REGISTRY + "/k8s-device-plugin:v0.17.4", "v0.17.4"),
    ("k8s-device-plugin:v0.18.0", "v0.18.0"),
    ("localhost:5000/mirror/nvidia/k8s-device-plugin:v0.18.0-ubi9", "v0.18.0"),
    (REGISTRY + "/k8s-device-plugin:v0.17.4@sha256:" + "0" * 64, "v0.17.4"),
    (REGISTRY + "/gpu-feature-discovery:v0.8.2", "v0.8.2"),
    (REGISTRY + "/k8s-device-plugin@sha256:" + "a" * 64, None),     # a digest names no release
    (REGISTRY + "/k8s-device-plugin:latest", None),
    (REGISTRY + "/k8s-device-plugin", None),
    (REGISTRY + "/k8s-device-plugin:v0.17", None),
    (REGISTRY + "/k8s-device-plugin:v00.17.4", None),
    ("gpushare-lab/operand-process:stand-in", None),                # another image
    (REGISTRY + "/k8s-device-plugin:v0.17.4\nlevel=error", None),   # not a reference: never printed as one
    ("K8S-Device-Plugin:v0.17.4", None),
    ("a/" * 300 + "k8s-device-plugin:v0.17.4", None),
    ("", None),
    (None, None),
    (["k8s-device-plugin:v0.17.4"], None),
])
def test_the_version_is_read_from_a_release_tag_of_nvidias_image_only(image, version):
    info = w.parse_image(image)
    assert info["version"] == version
    assert (info["problem"] is None) == (version is not None)


def test_a_reference_that_does_not_parse_is_shown_escaped_and_cut():
    problem = w.parse_image("k8s-device-plugin:v0.17.4\n" + "x" * 500)["problem"]
    assert "\n" not in problem and "\\n" in problem and len(problem) < 200


def test_the_model_version_is_the_release_tools_nvidia_pins():
    """The differential tests build the release tools/nvidia/go.mod requires: the prediction is for that one."""
    pinned = re.search(r"github\.com/NVIDIA/k8s-device-plugin (v\S+)", (REPO / "tools" / "nvidia" / "go.mod").read_text()).group(1)
    assert w.MODEL_VERSION == pinned == "v0.18.0"


def test_operand_versions_say_which_are_the_models_and_why_one_is_unknown():
    daemonsets = _daemonsets("v0.17.4")
    daemonsets[GFD_DS] = _daemonset(GFD_DS, REGISTRY + "/k8s-device-plugin:v0.18.0")
    versions = w.operand_versions(daemonsets, NS)
    assert versions["nvidia-device-plugin"] == {"daemonset": "gpu-operator/nvidia-device-plugin-daemonset", "image": REGISTRY + "/k8s-device-plugin:v0.17.4",
                                                "version": "v0.17.4", "problem": None, "tested": False}
    assert versions["gpu-feature-discovery"]["tested"] is True
    note = w.describe_versions(versions)
    assert note == ("The prediction is for NVIDIA k8s-device-plugin v0.18.0, the version the config model is held to; the cluster runs "
                    "nvidia-device-plugin v0.17.4 (image registry.example/nvidia/k8s-device-plugin:v0.17.4 of DaemonSet "
                    "gpu-operator/nvidia-device-plugin-daemonset): a prediction the model was not tested for.")
    assert w.describe_versions(w.operand_versions(_daemonsets(), NS)) == ""
    missing = w.operand_versions({}, NS)["gpu-feature-discovery"]
    assert (missing["version"], missing["problem"]) == (None, "no DaemonSet gpu-operator/gpu-feature-discovery")
    assert w.operand_versions(None, NS)["nvidia-device-plugin"]["problem"] == "the operand DaemonSets could not be read"
    # the main container by its name, not the operator's validation init container or another first container
    odd = _daemonset(PLUGIN_DS, REGISTRY + "/k8s-device-plugin:v0.16.2")
    assert w.operand_versions({PLUGIN_DS: odd}, NS)["nvidia-device-plugin"]["version"] == "v0.16.2"
    renamed = _daemonset(PLUGIN_DS, REGISTRY + "/k8s-device-plugin:v0.16.2", container="nvidia-device-plugin-ctr")
    assert w.operand_versions({PLUGIN_DS: renamed}, NS)["nvidia-device-plugin"]["version"] == "v0.16.2"
    garbage = {PLUGIN_DS: {"spec": {"template": {"spec": {"containers": "x"}}}}, GFD_DS: ["not", "a", "mapping"]}
    assert {v["version"] for v in w.operand_versions(garbage, NS).values()} == {None}


def test_a_nodes_own_pod_names_its_version_during_a_rollout():
    node = _node("lab-node-1")
    operands = {"daemonsets": _daemonsets("v0.18.0"), "pods": {PLUGIN_DS: [_pod(PLUGIN_DS, "lab-node-1", image=REGISTRY + "/k8s-device-plugin:v0.17.4")]}}
    mine = w.node_versions(node, w.operand_versions(operands["daemonsets"], NS), operands)
    assert (mine["nvidia-device-plugin"]["version"], mine["nvidia-device-plugin"]["tested"]) == ("v0.17.4", False)
    assert mine["gpu-feature-discovery"]["version"] == "v0.18.0"


# ---------------------------------------------------------------------------
# the verdict once settled


def test_a_node_that_matches_is_done_at_once_whatever_settle_says():
    want = _predict("lab-node-1")
    resources, labels = _shown(want)
    result, clock = _run(lambda _t: {"nodes": {"lab-node-1": _node("lab-node-1", labels, resources)}, "daemonsets": _daemonsets(), "pods": {}},
                         {"lab-node-1": want}, settle=600)
    assert result["matched"] and result["elapsed"] == 0 and clock.now == 0


def test_a_settled_difference_fails_after_settle_seconds_not_at_the_timeout():
    """lab-node-1 predicted to show 8 slots; the plugin advertises 4 and nothing changes: the verdict comes 20 s after the
    last change (the advertisement moved from 2 to 4 at 7 s), with the timeout at 1200 s."""
    want = _predict("lab-node-1")
    _resources, labels = _shown(want)

    def reads(t):
        count = "2" if t < 7 else "4"
        return {"nodes": {"lab-node-1": _node("lab-node-1", labels, {"nvidia.com/gpu": count})}, "daemonsets": _daemonsets("v0.17.4"), "pods": {}}

    seen = []
    result, _clock = _run(reads, {"lab-node-1": want}, timeout=1200, progress=seen.append, progress_interval=10)
    assert not result["matched"] and result["elapsed"] == 27
    assert result["settled"] == {"lab-node-1": [("capacity[nvidia.com/gpu]", "8", "4"), ("allocatable[nvidia.com/gpu]", "8", "4")]}
    assert result["changed"] == {"lab-node-1": True} and result["pending"] == {}
    assert result["node_versions"]["lab-node-1"]["nvidia-device-plugin"]["version"] == "v0.17.4"
    # the first line says the prediction is untested for what the cluster runs; then the pending lines say what the wait waits for
    assert seen[0].startswith("The prediction is for NVIDIA k8s-device-plugin v0.18.0") and "nvidia-device-plugin v0.17.4" in seen[0]
    assert seen[1] == ("waiting for the GPU operator: 10s of 1200s, 1 of 1 node(s) pending: lab-node-1 (capacity[nvidia.com/gpu] expected 8, seen 4; "
                       "allocatable[nvidia.com/gpu] expected 8, seen 4) [settling: unchanged for 3s of 20.0s]")


def test_the_verdicts_message_names_node_resource_prediction_advertisement_and_version():
    want = _predict("lab-node-2")  # 7 x mig-1g.10gb predicted
    labels = dict(want["labels"], **{op.MIG_CONFIG_LABEL: want["mig_config"], op.MIG_STATE_LABEL: "success"})
    node = _node("lab-node-2", labels, {"nvidia.com/mig-1g.5gb": "7"})
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-2": node}, "daemonsets": _daemonsets("v0.17.4"), "pods": {}}, {"lab-node-2": want}, settle=5)
    assert result["elapsed"] == 5 and list(result["settled"]) == ["lab-node-2"]
    causes = {"lab-node-2": w.settled_causes(node, want, ["no operator answered: ..."], False, result["node_versions"]["lab-node-2"])}
    message = w.describe_failure(result, {"lab-node-2": want}, causes, 1200, settle=5)
    assert message.startswith("lab-node-2: the operator is done with the node (its MIG state, operand Pods and advertisement unchanged for 5s) "
                              "and it does not advertise what the config model predicts: ")
    assert ("resource nvidia.com/mig-1g.10gb: predicted 7, nvidia-device-plugin (v0.17.4, a version the model is not held to) advertises absent"
            in message)
    assert "resource nvidia.com/mig-1g.5gb: predicted absent, nvidia-device-plugin (v0.17.4, a version the model is not held to) advertises 7" in message
    assert "Likely cause: no operator answered" in message  # no change seen in the wait: the configuration's cause stays
    assert message.endswith("a prediction the model was not tested for.") and "after 1200s" not in message
    # a node that did change: the version is the cause the wait can name
    causes = w.settled_causes(node, want, ["no operator answered: ..."], True, result["node_versions"]["lab-node-2"])
    assert causes == ["node lab-node-2 runs nvidia-device-plugin v0.17.4, a release the config model is not held to (v0.18.0): it may advertise "
                      "otherwise"]
    # a MIG layout applied with none of its devices advertised: said first
    empty = _node("lab-node-2", labels, {})
    assert w.settled_causes(empty, want, [], True, {"nvidia-device-plugin": {"version": "v0.18.0", "tested": True}}) == [
        "the MIG manager reports success for layout 1g.10gb-x7-on-1-of-2, but node lab-node-2 advertises no MIG device: NVIDIA's mig-parted may "
        "have made none of it (it knows some profiles by another name than the config model: docs/nvidia-device-plugin.md, 'The one listed "
        "difference')"]
    assert w.settled_causes(node, want, [], True, {"nvidia-device-plugin": {"version": "v0.18.0", "tested": True}}) == [
        "NVIDIA's components and the config model disagree on this node (the operator is done with it): report it with this message"]


def test_a_difference_in_gfds_labels_is_named_with_gfds_version():
    want = _predict("lab-node-1")
    resources, labels = _shown(want)
    labels["nvidia.com/gpu.product"] = A100_80
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-1": _node("lab-node-1", labels, resources)}, "daemonsets": _daemonsets(), "pods": {}},
                          {"lab-node-1": want}, settle=3)
    message = w.describe_failure(result, {"lab-node-1": want}, {"lab-node-1": ["x"]}, 300, settle=3)
    assert ("gpu-feature-discovery (v0.18.0) labels: nvidia.com/gpu.product predicted NVIDIA-A100-SXM4-80GB-SHARED, written NVIDIA-A100-SXM4-80GB"
            in message)
    assert "not tested" not in message  # the cluster runs the model's version: nothing to say of it


def test_capacity_and_allocatable_that_differ_are_both_shown():
    want = _predict("lab-node-1")
    _resources, labels = _shown(want)
    node = _node("lab-node-1", labels, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "6"})
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-1": node}, "daemonsets": _daemonsets(), "pods": {}}, {"lab-node-1": want}, settle=1)
    message = w.describe_failure(result, {"lab-node-1": want}, {}, 300, settle=1)
    assert "resource nvidia.com/gpu: predicted 8, nvidia-device-plugin (v0.18.0) advertises 8 in capacity, 6 in allocatable" in message


# ---------------------------------------------------------------------------
# the operator's signals: no verdict while it works


def _pending_mig(state="pending"):
    want = _predict("lab-node-2")
    labels = {op.MIG_CONFIG_LABEL: want["mig_config"]}
    if state:
        labels[op.MIG_STATE_LABEL] = state
    return want, _node("lab-node-2", labels, {"nvidia.com/gpu": "2"})


@pytest.mark.parametrize("state", ["pending", "rebooting", None])
def test_no_verdict_while_the_mig_manager_works_or_has_not_answered(state):
    want, node = _pending_mig(state)
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-2": node}, "daemonsets": _daemonsets(), "pods": {}}, {"lab-node-2": want}, timeout=100)
    assert result["elapsed"] == 100 and not result["settled"] and not result["failed"]
    assert result["pending"]["lab-node-2"] == (["the MIG manager is at nvidia.com/mig.config.state=%s" % state] if state else
                                               ["no MIG manager has answered nvidia.com/mig.config=1g.10gb-x7-on-1-of-2 yet"])
    message = w.describe_failure(result, {"lab-node-2": want}, {"lab-node-2": ["the MIG manager has not finished"]}, 100)
    assert message.startswith("lab-node-2: after 100s the operator does not advertise what the config model predicts: "
                              "nvidia.com/mig.config.state expected success, seen %s;" % (state or "None"))
    assert "The wait was still waiting for: " in message and "Likely cause: the MIG manager has not finished." in message


@pytest.mark.parametrize("operands, why", [
    ({"daemonsets": _daemonsets(generation=3, observed=2), "pods": {}},
     "DaemonSet nvidia-device-plugin-daemonset: the DaemonSet controller has not yet seen its generation 3"),
    ({"daemonsets": _daemonsets(selector={"nvidia.com/gpu.deploy.device-plugin": "true"}), "pods": {PLUGIN_DS: [], GFD_DS: []}},
     "no Pod of DaemonSet nvidia-device-plugin-daemonset runs on the node yet"),
    ({"daemonsets": _daemonsets(selector={"nvidia.com/gpu.deploy.device-plugin": "true"}),
      "pods": {PLUGIN_DS: [_pod(PLUGIN_DS, "lab-node-1", ready=False)], GFD_DS: [_pod(GFD_DS, "lab-node-1")]}},
     "its Pod of DaemonSet nvidia-device-plugin-daemonset is not ready"),
    ({"daemonsets": _daemonsets(selector={"nvidia.com/gpu.deploy.device-plugin": "true"}),
      "pods": {PLUGIN_DS: [_pod(PLUGIN_DS, "lab-node-1", deleting=True)], GFD_DS: [_pod(GFD_DS, "lab-node-1")]}},
     "its Pod of DaemonSet nvidia-device-plugin-daemonset is terminating"),
    ({"daemonsets": _daemonsets(generation=4, observed=4, desired=3, updated=1, selector={"nvidia.com/gpu.deploy.device-plugin": "true"}),
      "pods": {PLUGIN_DS: [_pod(PLUGIN_DS, "lab-node-1", generation=3)], GFD_DS: [_pod(GFD_DS, "lab-node-1", generation=4)]}},
     "its Pod of DaemonSet nvidia-device-plugin-daemonset is from an earlier Pod template (rolling out: 1 of 3 Pods updated)"),
])
def test_no_verdict_while_the_operands_roll_out_or_their_pod_on_the_node_is_not_ready(operands, why):
    want = _predict("lab-node-1")
    _resources, labels = _shown(want)
    labels["nvidia.com/gpu.deploy.device-plugin"] = "true"
    node = _node("lab-node-1", labels, {"nvidia.com/gpu": "2"})
    result, _clock = _run(lambda _t: dict(operands, nodes={"lab-node-1": node}), {"lab-node-1": want}, timeout=60)
    assert result["elapsed"] == 60 and not result["settled"]
    assert why in result["pending"]["lab-node-1"], result["pending"]


def test_a_node_paused_for_a_mig_change_is_not_judged():
    want = _predict("lab-node-1")
    _resources, labels = _shown(want)
    labels["nvidia.com/gpu.deploy.device-plugin"] = w.PAUSED
    node = _node("lab-node-1", labels, {})
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-1": node}, "daemonsets": _daemonsets(selector={"nvidia.com/gpu.deploy.device-plugin": "true"}),
                                      "pods": {PLUGIN_DS: [], GFD_DS: []}}, {"lab-node-1": want}, timeout=60)
    assert result["pending"]["lab-node-1"] == ["the MIG manager has paused its GPU clients (nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change)"]


def test_the_verdict_waits_for_the_pod_and_counts_settle_from_its_last_change():
    """The plugin's Pod is replaced at 10 s and ready at 15 s: the node, unchanged in its advertisement, is judged 20 s later."""
    want = _predict("lab-node-1")
    _resources, labels = _shown(want)
    labels["nvidia.com/gpu.deploy.device-plugin"] = "true"
    node = _node("lab-node-1", labels, {"nvidia.com/gpu": "2"})
    daemonsets = _daemonsets(selector={"nvidia.com/gpu.deploy.device-plugin": "true"})

    def reads(t):
        plugin = _pod(PLUGIN_DS, "lab-node-1", uid="old") if t < 10 else _pod(PLUGIN_DS, "lab-node-1", uid="new", ready=t >= 15)
        return {"nodes": {"lab-node-1": node}, "daemonsets": daemonsets, "pods": {PLUGIN_DS: [plugin], GFD_DS: [_pod(GFD_DS, "lab-node-1")]}}

    result, _clock = _run(reads, {"lab-node-1": want}, timeout=300)
    assert result["elapsed"] == 35 and list(result["settled"]) == ["lab-node-1"]


def test_unreadable_pods_do_not_block_the_verdict():
    """A ServiceAccount that may not list Pods: the readiness is unknown (the module says so), the advertisement decides."""
    want = _predict("lab-node-1")
    _resources, labels = _shown(want)
    labels["nvidia.com/gpu.deploy.device-plugin"] = "true"
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-1": _node("lab-node-1", labels, {"nvidia.com/gpu": "2"})},
                                      "daemonsets": _daemonsets(selector={"nvidia.com/gpu.deploy.device-plugin": "true"}), "pods": None},
                          {"lab-node-1": want})
    assert result["elapsed"] == 20 and list(result["settled"]) == ["lab-node-1"]


def test_a_missing_node_is_never_a_verdict():
    want = _predict("lab-node-1")
    result, _clock = _run(lambda _t: {"nodes": {}, "daemonsets": _daemonsets(), "pods": {}}, {"lab-node-1": want}, timeout=40)
    assert result["elapsed"] == 40 and result["differences"] == {"lab-node-1": [("node", "exists", "absent")]}
    assert result["pending"] == {"lab-node-1": ["not in the cluster"]}


def test_the_first_verdict_ends_the_wait_and_names_the_nodes_still_pending():
    shared, mig = _predict("lab-node-1"), _predict("lab-node-2")
    _resources, labels = _shown(shared)
    _want, pending = _pending_mig()
    nodes = {"lab-node-1": _node("lab-node-1", labels, {"nvidia.com/gpu": "4"}), "lab-node-2": pending}
    result, _clock = _run(lambda _t: {"nodes": nodes, "daemonsets": _daemonsets(), "pods": {}}, {"lab-node-1": shared, "lab-node-2": mig}, timeout=1200)
    assert result["elapsed"] == 20 and list(result["settled"]) == ["lab-node-1"] and list(result["pending"]) == ["lab-node-2"]
    message = w.describe_failure(result, {"lab-node-1": shared, "lab-node-2": mig}, {}, 1200)
    assert "lab-node-2: still pending after 20s (nvidia.com/mig.config.state expected success, seen pending;" in message
    assert "): waiting for the MIG manager is at nvidia.com/mig.config.state=pending." in message


# ---------------------------------------------------------------------------
# the MIG manager's failure


def _failed(layout, record_layout=None, reason="selected mig-config not present: %s"):
    annotations = {}
    if record_layout:
        annotations[op.MIG_FAILURE_ANNOTATION] = '{"digest": "d", "layout": "%s", "reason": "%s"}' % (record_layout, reason % record_layout)
    return _node("lab-node-2", {op.MIG_CONFIG_LABEL: layout, op.MIG_STATE_LABEL: "failed"}, {"nvidia.com/gpu": "2"}, annotations=annotations)


def test_a_failure_that_comes_during_the_wait_ends_it_at_once_with_the_stand_ins_reason():
    want, pending = _pending_mig()
    failed = _failed(want["mig_config"], want["mig_config"])
    result, _clock = _run(lambda t: {"nodes": {"lab-node-2": pending if t < 3 else failed}, "daemonsets": _daemonsets(), "pods": {}},
                          {"lab-node-2": want}, timeout=1200)
    assert result["elapsed"] == 3
    assert result["failed"] == {"lab-node-2": {"layout": "1g.10gb-x7-on-1-of-2", "reason": "selected mig-config not present: 1g.10gb-x7-on-1-of-2"}}
    message = w.describe_failure(result, {"lab-node-2": want}, {"lab-node-2": ["node lab-node-2 is labelled ..."]}, 1200)
    assert message == ("lab-node-2: nvidia.com/mig.config.state=failed for layout 1g.10gb-x7-on-1-of-2: selected mig-config not present: "
                       "1g.10gb-x7-on-1-of-2. Likely cause: node lab-node-2 is labelled ....")


def test_a_failure_found_at_the_start_must_last_a_few_seconds():
    want, _pending = _pending_mig()
    failed = _failed(want["mig_config"], want["mig_config"])
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-2": failed}, "daemonsets": _daemonsets(), "pods": {}}, {"lab-node-2": want}, timeout=1200)
    assert result["elapsed"] == w.STALE_GRACE and list(result["failed"]) == ["lab-node-2"]


def test_a_stale_failure_that_gives_way_to_pending_does_not_end_the_wait():
    """A failed state left from an earlier layout: the MIG manager takes up the label at 2 s, and succeeds at 30 s."""
    want, pending = _pending_mig()
    resources, labels = _shown(want, **{op.MIG_CONFIG_LABEL: want["mig_config"], op.MIG_STATE_LABEL: "success"})
    done = _node("lab-node-2", labels, resources)
    stale = _failed(want["mig_config"], "all-1g.10gb")

    result, _clock = _run(lambda t: {"nodes": {"lab-node-2": stale if t < 2 else pending if t < 30 else done}, "daemonsets": _daemonsets(), "pods": {}},
                          {"lab-node-2": want}, timeout=1200)
    assert result["matched"] and result["elapsed"] == 30


def test_a_failed_layout_on_a_node_expecting_none_ends_the_wait_when_the_node_differs():
    """The issue's case: a node labelled with a layout the ClusterPolicy's mig-parted ConfigMap lacks, whose advertisement is
    not what is predicted; its MIG state is failed from the start."""
    want = _predict("lab-node-1")
    node = _failed("all-balanced", None)
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-1": dict(node, metadata=dict(node["metadata"], name="lab-node-1"))}, "daemonsets": _daemonsets(),
                                      "pods": {}}, {"lab-node-1": want}, timeout=300)
    assert result["elapsed"] == w.STALE_GRACE and result["failed"] == {"lab-node-1": {"layout": "all-balanced", "reason": None}}
    message = w.describe_failure(result, {"lab-node-1": want}, {}, 300)
    assert message.startswith("lab-node-1: nvidia.com/mig.config.state=failed for layout all-balanced: the MIG manager recorded no reason on the node; "
                              "it is in the log of the nvidia-mig-manager Pod on lab-node-1")


def test_a_failed_mig_state_on_a_node_that_matches_does_not_fail_the_wait():
    want = _predict("lab-node-1")
    resources, labels = _shown(want, **{op.MIG_CONFIG_LABEL: "all-balanced", op.MIG_STATE_LABEL: "failed"})
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-1": _node("lab-node-1", labels, resources)}, "daemonsets": _daemonsets(), "pods": {}},
                          {"lab-node-1": want})
    assert result["matched"] and not result["failed"]


def test_mig_failure_causes_name_the_layout_the_configmap_lacks():
    policy = {"spec": {"migManager": {"config": {"name": "gpushare-mig-parted-config"}}}}
    text = ("version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n"
            "  all-1g.10gb:\n    - devices: all\n      mig-enabled: true\n")
    node = _failed("all-balanced")
    [cause] = w.mig_failure_causes(node, policy, {"gpushare-mig-parted-config": {"config.yaml": text}}, NS)
    assert cause == ("node lab-node-2 is labelled nvidia.com/mig.config=all-balanced, a layout ConfigMap gpu-operator/gpushare-mig-parted-config "
                     "(spec.migManager.config.name) lacks (it has: all-1g.10gb, all-disabled): label the node with one of them or add the layout")
    assert w.mig_failure_causes(_failed("all-1g.10gb"), policy, {"gpushare-mig-parted-config": {"config.yaml": text}}, NS) == []
    assert "does not exist" in w.mig_failure_causes(node, policy, {}, NS)[0]
    assert "has no key config.yaml" in w.mig_failure_causes(node, policy, {"gpushare-mig-parted-config": {}}, NS)[0]
    assert "cannot be read" in w.mig_failure_causes(node, policy, {"gpushare-mig-parted-config": {"config.yaml": "version: v2\nmig-configs: {}\n"}}, NS)[0]
    assert w.mig_failure_causes(node, None, {}, NS) == []


def test_the_mig_managers_reason_is_its_last_error_lines():
    log = "\n".join([
        "Current value of 'nvidia.com/mig.config.state=success'",
        "Asserting that the requested configuration is present in the configuration file",
        'time="2026-12-01T00:00:00Z" level=error msg="selected mig-config not present: all-balanced"',
        'time="2026-12-01T00:00:00Z" level=fatal msg="Error validating MIG configuration: \\"all-balanced\\" is not present"',
        "Unable to validate the selected MIG configuration",
        "Changing the 'nvidia.com/mig.config.state' node label to 'failed'",
    ])
    assert w.mig_manager_reason(log) == ('selected mig-config not present: all-balanced; Error validating MIG configuration: "all-balanced" is not present; '
                                         "Unable to validate the selected MIG configuration")
    assert w.mig_manager_reason("one\ntwo\nthree\nfour") == "two; three; four"
    assert w.mig_manager_reason("") is None and w.mig_manager_reason(None) is None


# ---------------------------------------------------------------------------
# the timeout, progress lines and sleeps (as before the verdicts)


@pytest.mark.parametrize("timeout, interval, progress_interval, lines, first", [
    (100, 1, 30, 3, 30),      # 30, 60, 90
    (100, 7, 30, 3, 35),      # the polls at 35, 63, 91: one line each, none lost, none doubled
    (29, 1, 30, 0, None),     # the wait ends before the first line is due
    (100, 1, 0, 0, None),     # a zero interval prints none
    (1200, 5, 30, 39, 30),    # a MIG reconfiguration's 20 minutes: a line every 30 s
])
def test_a_pending_node_gets_a_progress_line_every_interval_until_the_timeout(timeout, interval, progress_interval, lines, first):
    want, node = _pending_mig()
    clock = _Clock()
    sleeps, seen = [], []

    def sleep(seconds):
        sleeps.append(seconds)
        clock.sleep(seconds)

    result = w.wait_for_nodes(lambda: {"nodes": {"lab-node-2": node}, "daemonsets": _daemonsets(), "pods": {}}, {"lab-node-2": want}, timeout=timeout,
                              interval=interval, clock=clock, sleep=sleep, progress=seen.append, progress_interval=progress_interval)
    assert not result["matched"] and result["elapsed"] == timeout  # never cut short, never overslept
    assert max(sleeps) <= interval
    assert len(seen) == lines
    if lines:
        assert seen[0].startswith("waiting for the GPU operator: %ds of %ss, 1 of 1 node(s) pending: lab-node-2 mig.config.state=pending ("
                                  % (first, timeout)), seen[0]
        assert seen[0].endswith("[the MIG manager is at nvidia.com/mig.config.state=pending]")


def test_describe_pending_names_each_pending_node_its_mig_state_what_differs_and_what_the_wait_waits_for():
    want, node = _pending_mig()
    shared = _predict("lab-node-1")
    expected = {"lab-node-1": shared, "lab-node-2": want, "lab-node-9": shared}
    nodes = {"lab-node-1": _node("lab-node-1", capacity={"nvidia.com/gpu": "2"}), "lab-node-2": node}
    differences = {name: op.compare(nodes[name], expected[name]) for name in nodes}
    differences["lab-node-9"] = [("node", "exists", "absent")]
    line = w.describe_pending(nodes, differences, expected, 61.7, 300, pending={"lab-node-1": ["settling: unchanged for 4s of 20.0s"]})
    assert line.startswith("waiting for the GPU operator: 61s of 300s, 3 of 3 node(s) pending: lab-node-1 (capacity[nvidia.com/gpu] "
                           "expected 8, seen 2; "), line
    assert "mig.config.state" not in line.split(", lab-node-2")[0]  # no MIG layout expected, no label: no MIG state
    assert "more) [settling: unchanged for 4s of 20.0s], lab-node-2 mig.config.state=pending (nvidia.com/mig.config.state expected success, " in line
    assert line.endswith(", lab-node-9 (not in the cluster)")
    unset = _node("lab-node-2", capacity={"nvidia.com/gpu": "2"})
    line = w.describe_pending({"lab-node-2": unset}, {"lab-node-2": op.compare(unset, want)}, {"lab-node-2": want}, 30, 1200)
    assert "lab-node-2 mig.config.state=- (" in line and line.endswith("more)")  # no reason given: none shown


def test_the_timeout_message_keeps_what_was_expected_and_seen_and_the_cause():
    want = _predict("lab-node-1")
    _resources, labels = _shown(want)
    node = _node("lab-node-1", labels, {"nvidia.com/gpu": "2"})
    result, _clock = _run(lambda _t: {"nodes": {"lab-node-1": node}, "daemonsets": None, "pods": None}, {"lab-node-1": want}, timeout=5)
    message = w.describe_failure(result, {"lab-node-1": want}, {"lab-node-1": ["no operator answered: ..."]}, 5)
    assert message == ("lab-node-1: after 5s the operator does not advertise what the config model predicts: capacity[nvidia.com/gpu] expected 8, "
                       "seen 2; allocatable[nvidia.com/gpu] expected 8, seen 2. The wait was still waiting for: settling: unchanged for 5s of 20.0s. "
                       "Likely cause: no operator answered: ....")


def test_check_mode_reads_once():
    want = _predict("lab-node-1")
    result, clock = _run(lambda _t: {"nodes": {"lab-node-1": _node("lab-node-1")}, "daemonsets": _daemonsets(), "pods": {}}, {"lab-node-1": want}, timeout=0)
    assert not result["matched"] and clock.now == 0 and result["elapsed"] == 0
