# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one node model: the lab's nodes, the DRA track's and the node pools' (resolved) are read by one reader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.dra import devices as dra
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import node as gpu_node
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import node_pools
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware.node import DEVICE_PLUGIN, DRA, NodeError, read_node, read_nodes

REPO = Path(__file__).resolve().parents[4]
A100 = "NVIDIA-A100-SXM4-80GB"


def _inventory():
    found = {}
    for path in sorted((REPO / "inventory" / "group_vars" / "all").glob("*.yml")):
        found.update(yaml.safe_load(path.read_text()) or {})
    return found


def refused(call):
    with pytest.raises(NodeError) as caught:
        call()
    return str(caught.value)


def test_the_inventorys_nodes_of_both_tracks_read_into_one_shape():
    settings = _inventory()
    lab = read_nodes(settings["gpushare_nodes"], DEVICE_PLUGIN, settings["gpushare_device_plugin_configs"], field="gpushare_nodes")
    dra_side = read_nodes(settings["gpushare_dra_nodes"], DRA, default_product=settings["gpushare_gpu_product"], field="gpushare_dra_nodes")
    assert {node.sharing for node in lab} == {"config", "mig"}
    assert {node.sharing for node in dra_side} == {"whole", "shared", "mig"}
    for node in lab + dra_side:
        assert set(node._fields) == set(gpu_node.GpuNode._fields) and node.gpus >= 1
    # The MIG nodes of both tracks name the same product of NVIDIA's tables the same way, with the same memory.
    [lab_mig] = [node for node in lab if node.sharing == "mig"]
    [dra_mig] = [node for node in dra_side if node.sharing == "mig"]
    assert (lab_mig.canonical, lab_mig.memory_mib) == (dra_mig.canonical, dra_mig.memory_mib) == ("A100-SXM4-80GB", 81920)


@pytest.mark.parametrize("gpus", [-1, True, "2", None])
def test_one_gpus_reader_for_both_tracks(gpus):
    lab = refused(lambda: read_node({"name": "n", "gpus": gpus, "config": "c"}, DEVICE_PLUGIN, {"c": {}}))
    dra_message = refused(lambda: read_node({"name": "n", "gpus": gpus}, DRA, default_product=A100))
    assert lab.startswith("n.gpus: must be") and dra_message.startswith("n.gpus: must be") and "Fix: " in lab and "Fix: " in dra_message


@pytest.mark.parametrize("product", ["T4", "NVIDIA A100-SXM4-80GB", 80])
def test_one_product_reader_for_both_tracks(product):
    lab = refused(lambda: read_node({"name": "n", "gpus": 1, "product": product}, DEVICE_PLUGIN))
    dra_message = refused(lambda: read_node({"name": "n", "gpus": 1, "product": product}, DRA))
    assert lab == dra_message and lab.startswith("n.product: ")


@pytest.mark.parametrize("node, track, message", [
    ({"name": "n", "gpus": 1, "shared": {"replicas": 4}}, DEVICE_PLUGIN,
     "n.shared: is the DRA track's form. Fix: share a device-plugin node's GPUs with config: <a device-plugin config>"),
    ({"name": "n", "gpus": 1, "mig": True}, DEVICE_PLUGIN, "n.mig: true is the DRA track's form (every profile on demand). Fix: give the layout"),
    ({"name": "n", "gpus": 1, "config": "c"}, DRA, "n.config: is the device-plugin track's form. Fix: share a DRA node's GPUs with shared: {replicas: n}"),
    ({"name": "n", "gpus": 1, "mig": {"product": A100, "profile": "1g.10gb"}}, DRA,
     "n.mig: a layout is the device-plugin track's form. Fix: write mig: true"),
])
def test_the_other_tracks_form_is_refused_naming_this_tracks(node, track, message):
    assert refused(lambda: read_node(node, track, {"c": {}}, default_product=A100)).startswith(message)


def test_a_resolved_node_pool_is_a_device_plugin_node_of_the_same_model():
    cluster = [{"metadata": {"name": "gpu-a", "labels": {"pool": "train"},
                             "annotations": {"gpushare.k8s/gpus": "4", "gpushare.k8s/gpu-product": "NVIDIA-H100-80GB-HBM3"}}},
               {"metadata": {"name": "gpu-b", "labels": {"pool": "share"}, "annotations": {"gpushare.k8s/gpus": "2"}}}]
    pools = [{"name": "train", "selector": {"matchLabels": {"pool": "train"}}, "mig": {"layout": "all-1g.10gb"}},
             {"name": "share", "selector": {"matchLabels": {"pool": "share"}}, "config": "c"}]
    resolved = node_pools.resolve_pools(pools, cluster, {"c": {}})
    assert resolved["errors"] == []
    nodes = {node.name: node for node in read_nodes(resolved["nodes"], DEVICE_PLUGIN, {"c": {}})}
    assert (nodes["gpu-a"].sharing, nodes["gpu-a"].canonical, nodes["gpu-a"].mig["count"]) == ("mig", "H100-80GB-HBM3", 7)
    assert (nodes["gpu-b"].sharing, nodes["gpu-b"].config, nodes["gpu-b"].gpus) == ("config", "c", 2)


def test_the_views_read_the_model():
    node = {"name": "n", "gpus": 2, "mig": {"product": A100, "profile": "3g.40gb"}}
    assert inventory.node_gpu_resources(node) == {"nvidia.com/mig-3g.40gb": 4}
    [entry] = dra.normalize_nodes([{"name": "n", "gpus": 2, "shared": {"replicas": 4}}], A100)
    assert (entry["sharing"], entry["replicas"], entry["memory_mib"]) == ("shared", 4, 81920)
    with pytest.raises(InputError, match=r"^n: is listed twice"):
        dra.normalize_nodes([{"name": "n", "gpus": 1}, {"name": "n", "gpus": 1}], A100)
