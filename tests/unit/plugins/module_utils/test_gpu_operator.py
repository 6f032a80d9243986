# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.filter.gpushare import node_gpu_resources
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator as op

INVENTORY = yaml.safe_load((Path(__file__).resolve().parents[4] / "inventory" / "group_vars" / "all" / "lab.yml").read_text())
NODES = INVENTORY["gpushare_nodes"]
CONFIGS = INVENTORY["gpushare_device_plugin_configs"]
A100_80 = "NVIDIA-A100-SXM4-80GB"


def _predict(node, strategy="mixed"):
    return op.predict(node, CONFIGS, strategy, A100_80, "default")


def test_lab_end_state_in_operator_mode():
    expected = {node["name"]: _predict(node) for node in NODES}
    assert expected["lab-node-0"]["resources"] == {"nvidia.com/gpu": 2}
    assert expected["lab-node-1"]["resources"] == {"nvidia.com/gpu": 8}
    assert expected["lab-node-2"]["resources"] == {"nvidia.com/mig-1g.10gb": 7}
    assert "nvidia.com/gpu" not in expected["lab-node-2"]["resources"]
    assert expected["lab-node-1"]["labels"]["nvidia.com/gpu.product"] == A100_80 + "-SHARED"
    assert expected["lab-node-2"]["mig_config"] == "1g.10gb-x7-on-1-of-2"
    assert expected["lab-node-2"]["config"] is None and expected["lab-node-1"]["config"] == "shared"


@pytest.mark.parametrize("node", NODES, ids=lambda node: node["name"])
def test_operator_prediction_equals_advertise_mode(node):
    """One model: what the stand-in/operator path predicts is what advertise mode writes."""
    assert _predict(node)["resources"] == node_gpu_resources(node, CONFIGS)


def test_mps_under_the_mixed_strategy_is_refused_as_nvidias_device_plugin_refuses_it():
    """NVIDIA's device plugin v0.18.0 exits at start with MPS and MIG_STRATEGY=mixed (what spec.mig.strategy mixed sets on
    every node): the prediction refuses it, naming the node's config (or the ClusterPolicy default) and the way out."""
    node = {"name": "lab-node-0", "gpus": 2, "product": A100_80, "config": "mps"}
    with pytest.raises(op.OperatorError, match=r"lab-node-0\.config: NVIDIA's device plugin refuses MPS under the mixed MIG strategy"
                                               r".*Fix: give this node a layout and config"):
        op.predict(node, CONFIGS, "mixed", A100_80)
    with pytest.raises(op.OperatorError, match="gpushare_operator_default_config: NVIDIA's device plugin refuses MPS"):
        op.predict(dict(node, config=None), CONFIGS, "mixed", A100_80, "mps")
    assert op.predict(node, CONFIGS, "single", A100_80)["resources"] == node_gpu_resources(node, CONFIGS)


def test_mig_parted_config_holds_the_layouts():
    config = yaml.safe_load(op.render_mig_parted(NODES))
    assert config["version"] == "v1"
    assert config["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert config["mig-configs"]["1g.10gb-x7-on-1-of-2"] == [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {}},
    ]
    full = {"name": "n", "gpus": 2, "mig": {"product": A100_80, "profile": "3g.40gb"}}
    assert op.node_layout(full) == ("all-3g.40gb", [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}])
    assert op.parse_mig_parted(op.render_mig_parted(NODES)) == config["mig-configs"]


def test_layout_the_product_cannot_hold_fails_with_the_reason():
    with pytest.raises(op.LayoutError, match="7 instances of 1g.10gb do not fit: one A100-SXM4-40GB holds at most 4"):
        op.apply_layout("NVIDIA-A100-SXM4-40GB", 2, [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}])
    with pytest.raises(op.LayoutError, match="names GPU 2, but the node has 2 GPUs"):
        op.apply_layout(A100_80, 2, [{"devices": [2], "mig-enabled": True, "mig-devices": {}}])
    # several profiles on one GPU: what NVIDIA's placements hold together, else what the layout needs
    assert op.apply_layout(A100_80, 1, [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 3, "2g.20gb": 1}}]) == [
        {"mig": True, "devices": {"1g.10gb": 3, "2g.20gb": 1}}]
    beyond = "entry 0: 4 x 1g.20gb + 1 x 3g.40gb do not fit one A100-SXM4-80GB: they need 12 of its 8 memory slices"
    with pytest.raises(op.LayoutError, match=re.escape(beyond)):
        op.apply_layout(A100_80, 1, [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.20gb": 4, "3g.40gb": 1}}])
    with pytest.raises(op.LayoutError, match="MIG disabled"):
        op.apply_layout(A100_80, 1, [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.10gb": 1}}])


def test_strategies():
    state = op.apply_layout(A100_80, 2, [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}])
    assert op.node_state("n", A100_80, state, None, "mixed")[0] == {"nvidia.com/mig-1g.10gb": 14}
    assert op.node_state("n", A100_80, state, None, "single")[0] == {"nvidia.com/gpu": 14}
    assert op.node_state("n", A100_80, state, None, "none")[0] == {"nvidia.com/gpu": 2}
    half = op.apply_layout(A100_80, 2, [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}])
    assert op.node_state("n", A100_80, half, CONFIGS["shared"], "mixed")[0] == {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 7}
    with pytest.raises(op.LayoutError, match="single strategy"):
        op.node_state("n", A100_80, half, None, "single")


def test_single_strategy_shares_the_mig_devices_as_the_config_shares_nvidia_com_gpu():
    """NVIDIA's plugin v0.18.0: under single, each MIG device is one nvidia.com/gpu, time-sliced like a GPU
    (tests/integration/test_nvidia_device_plugin.py)."""
    state = op.apply_layout(A100_80, 2, [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}])
    sliced = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    assert op.node_state("n", A100_80, state, sliced, "single")[0] == {"nvidia.com/gpu": 28}
    sliced["sharing"]["timeSlicing"]["renameByDefault"] = True
    assert op.node_state("n", A100_80, state, sliced, "single")[0] == {"nvidia.com/gpu.shared": 28}


def test_cluster_policy_patch_and_bad_input():
    patch = op.cluster_policy_patch("device-plugin-configs", "default", "mixed", "gpushare-mig-parted-config")
    assert patch == {"spec": {
        "devicePlugin": {"config": {"name": "device-plugin-configs", "default": "default"}},
        "mig": {"strategy": "mixed"},
        "migManager": {"config": {"name": "gpushare-mig-parted-config", "default": "all-disabled"}},
    }}
    with pytest.raises(op.OperatorError, match="gpushare_operator_default_layout: must be all-disabled or empty"):
        op.cluster_policy_patch("device-plugin-configs", "default", "mixed", "x", "all-1g.10gb")
    assert op.cluster_policy_patch("device-plugin-configs", "default", "mixed", "x", "")["spec"]["migManager"]["config"]["default"] == ""
    with pytest.raises(op.OperatorError, match="gpushare_operator_mig_strategy: must be single or mixed"):
        op.cluster_policy_patch("device-plugin-configs", "default", "none", "x")
    with pytest.raises(op.OperatorError, match="gpushare_operator_default_config"):
        op.cluster_policy_patch("device-plugin-configs", "bad name", "mixed", "x")
    with pytest.raises(op.OperatorError, match="gpushare_operator_default_config: names config 'nope'"):
        op.predict(NODES[2], CONFIGS, "mixed", A100_80, "nope")


def _node(name, labels=None, capacity=None, allocatable=None, annotations=None):
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "status": {"capacity": capacity or {}, "allocatable": allocatable if allocatable is not None else capacity or {}}}


def test_compare_names_expected_and_seen():
    want = _predict(NODES[2])
    seen = _node("lab-node-2", labels=dict(want["labels"], **{op.MIG_STATE_LABEL: "success"}),
                 capacity={"cpu": "32", "nvidia.com/mig-1g.10gb": "7"})
    assert op.compare(seen, want) == []
    stale = _node("lab-node-2", labels=dict(want["labels"], **{op.MIG_STATE_LABEL: "pending"}),
                  capacity={"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "7"})
    assert op.compare(stale, want) == [
        (op.MIG_STATE_LABEL, "success", "pending"),
        ("capacity[nvidia.com/gpu]", "absent", "2"),
        ("allocatable[nvidia.com/gpu]", "absent", "2"),
    ]
    extra = _node("lab-node-2", labels=dict(want["labels"], **{op.MIG_STATE_LABEL: "success", "nvidia.com/gpu.sharing-strategy": "time-slicing"}),
                  capacity={"nvidia.com/mig-1g.10gb": "7"})
    assert op.compare(extra, want) == [("label nvidia.com/gpu.sharing-strategy", "none", "time-slicing")]


def test_likely_causes():
    want = dict(_predict(NODES[1]), configmap="device-plugin-configs")
    node = _node("lab-node-1", labels={op.DEVICE_PLUGIN_CONFIG_LABEL: "shared"})
    policy = {"spec": {"devicePlugin": {"config": {"name": "other", "default": "default"}}}}
    causes = op.likely_causes(node, want, policy, {"other": {"default": "x"}}, "gpu-operator")
    assert "spec.devicePlugin.config.name is 'other', not 'device-plugin-configs'" in causes[0]
    assert "selects config 'shared'" in causes[1] and "lacks (it has: default)" in causes[1]
    assert op.likely_causes(node, want, None, {}, "gpu-operator")[0].startswith("no ClusterPolicy")
    policy = {"spec": {"devicePlugin": {"config": {"name": "device-plugin-configs", "default": "default"}}}}
    causes = op.likely_causes(node, want, policy, {"device-plugin-configs": {"default": "", "shared": ""}}, "gpu-operator")
    assert causes[0].startswith("no operator answered")


def _cluster_node(name, kwok=True):
    return {"metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"} if kwok else {}}}


def test_mode_errors_name_the_mode_to_use():
    nodes = [{"name": "lab-node-0"}, {"name": "gpu-a"}]
    cluster = [_cluster_node("lab-node-0"), _cluster_node("gpu-a", kwok=False), _cluster_node("other", kwok=False)]
    policy = [{"metadata": {"name": "cluster-policy"}}]
    assert op.mode_errors("operator", nodes, cluster, policy, "cluster-policy") == []
    [error] = op.mode_errors("operator", nodes, cluster, [], "cluster-policy")
    assert error.startswith("gpushare_mode: operator, but the cluster has no ClusterPolicy cluster-policy") and "gpushare_mode: advertise" in error
    errors = op.mode_errors("advertise", nodes, cluster, policy, "cluster-policy")
    assert "ClusterPolicy cluster-policy exists" in errors[0] and "Fix: set gpushare_mode: operator" in errors[0]
    assert "but gpu-a lacks the annotation kwok.x-k8s.io/node=fake" in errors[1]  # only inventory nodes count
    assert op.mode_errors("advertise", nodes[:1], cluster, [], "cluster-policy") == []
    assert "is not a mode" in op.mode_errors("both", nodes, cluster, [], "cluster-policy")[0]


def test_node_hardware():
    assert op.node_hardware(NODES, A100_80) == {name: {"gpus": 2, "product": A100_80} for name in ("lab-node-0", "lab-node-1", "lab-node-2")}
    with pytest.raises(op.OperatorError, match="lab-node-0.product: missing"):
        op.node_hardware([{"name": "lab-node-0", "gpus": 1}])


def test_mps_where_nvidia_s_plugin_refuses_it():
    """NVIDIA's plugin v0.18.0 exits at start on MPS under mixed, and on MPS for MIG devices under single."""
    mps = {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    whole = op.apply_layout(A100_80, 2, [{"devices": "all", "mig-enabled": False}])
    migged = op.apply_layout(A100_80, 2, [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}])
    assert op.node_state("n", A100_80, whole, mps, "single")[0] == {"nvidia.com/gpu": 4}
    assert op.node_state("n", A100_80, migged, mps, "none")[0] == {"nvidia.com/gpu": 4}
    with pytest.raises(op.LayoutError, match="mixed is not supported with MPS"):
        op.node_state("n", A100_80, whole, mps, "mixed")
    with pytest.raises(op.LayoutError, match="MPS is not supported for MIG devices"):
        op.node_state("n", A100_80, migged, mps, "single")
    node = {"name": "m", "gpus": 2, "mig": {"product": A100_80, "profile": "1g.10gb"}}
    with pytest.raises(op.OperatorError, match="m.mig: .*MPS for MIG devices"):
        op.predict(node, {"mps": mps}, "single", A100_80, "mps")


def _daemonset(name, configmap, recorded=None):
    annotations = {op.CONFIG_DIGESTS_ANNOTATION: recorded} if recorded is not None else {}
    volumes = [{"name": "available-configs", "configMap": {"name": configmap}}] if configmap else []
    return {"metadata": {"name": name, "namespace": "gpu-operator"},
            "spec": {"template": {"metadata": {"annotations": annotations}, "spec": {"volumes": volumes}}}}


def test_config_restarts_only_the_daemonsets_mounting_the_configmap_and_only_for_a_changed_config():
    daemonsets = [_daemonset("nvidia-device-plugin-daemonset", "cfg"), _daemonset("gpu-feature-discovery", "cfg"),
                  _daemonset("nvidia-dcgm", None), _daemonset("other", "another")]
    before = {"default": "version: v1", "shared": "replicas: 4"}
    # an edited config: both Pods that mount the ConfigMap restart, with the new digests in their Pod template
    patches = op.config_restarts(daemonsets, "cfg", before, {"default": "version: v1", "shared": "replicas: 2"})
    assert [(p["name"], p["changed"]) for p in patches] == [("nvidia-device-plugin-daemonset", ["shared"]), ("gpu-feature-discovery", ["shared"])]
    annotation = patches[0]["definition"]["spec"]["template"]["metadata"]["annotations"][op.CONFIG_DIGESTS_ANNOTATION]
    assert sorted(json.loads(annotation)) == ["default", "shared"]
    assert patches[0]["definition"]["metadata"] == {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-operator"}
    # nothing changed, or a config only added: no restart; a config removed (null in a merge patch) or gone: a restart
    assert op.config_restarts(daemonsets, "cfg", before, before) == []
    assert op.config_restarts(daemonsets, "cfg", before, dict(before, mps="version: v1")) == []
    assert op.config_restarts(daemonsets, "cfg", None, before) == []
    assert [p["changed"] for p in op.config_restarts(daemonsets[:1], "cfg", before, dict(before, shared=None))] == [["shared"]]
    # the digests the last restart recorded: a run stopped between the ConfigMap write and the restart restarts next time
    recorded = annotation
    stale = [_daemonset("nvidia-device-plugin-daemonset", "cfg", recorded)]
    after = {"default": "version: v1", "shared": "replicas: 2"}
    assert op.config_restarts(stale, "cfg", after, after) == []
    old = op.config_restarts(daemonsets[:1], "cfg", after, before)[0]["definition"]["spec"]["template"]["metadata"]["annotations"]
    stale = [_daemonset("nvidia-device-plugin-daemonset", "cfg", old[op.CONFIG_DIGESTS_ANNOTATION])]
    assert [p["changed"] for p in op.config_restarts(stale, "cfg", after, after)] == [["shared"]]
    # an unreadable annotation counts as none
    assert op.config_restarts([_daemonset("x", "cfg", "not json")], "cfg", after, after) == []
