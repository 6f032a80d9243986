# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters of issue 5 ("Beyond the lab"): gpu_feature_labels, quota_resource_names; the product key of inventory nodes."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.gpu_features import FilterModule as FeatureFilters
from ansible_collections.gpushare.k8s.plugins.filter.gpushare import FilterModule as GpushareFilters
from ansible_collections.gpushare.k8s.plugins.filter.manifests import gpu_inventory
from ansible_collections.gpushare.k8s.plugins.filter.quota import FilterModule as QuotaFilters

FILTERS = dict(FeatureFilters().filters(), **QuotaFilters().filters())
FILTER_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "filter")
LAB_VARS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "inventory", "group_vars", "all", "lab.yml")
A100 = "NVIDIA-A100-SXM4-80GB"
# gpu-feature-discovery's labels for the lab's three nodes (inventory/group_vars/all/lab.yml), written out by hand:
# two A100 80GB (81920 MiB) each; lab-node-1 time-sliced 4 ways (product -SHARED); lab-node-2 in MIG mixed strategy,
# one GPU split into seven 1g.10gb instances (9856 MiB each), its GPUs labelled without sharing (replicas 0); every node
# with the Ampere architecture labels of compute capability 8.0 and mps.capable=false (no MPS config).
LAB_LABELS = {
    "lab-node-0": {
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.product": A100,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
    },
    "lab-node-1": {
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.product": A100 + "-SHARED",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
    },
    "lab-node-2": {
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.product": A100,
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig-1g.10gb.count": "7",
        "nvidia.com/mig-1g.10gb.memory": "9856",
        "nvidia.com/mig-1g.10gb.product": A100 + "-MIG-1g.10gb",
        "nvidia.com/mig-1g.10gb.replicas": "1",
        "nvidia.com/mig-1g.10gb.sharing-strategy": "none",
        "nvidia.com/mig-1g.10gb.multiprocessors": "14",  # the MIG device's attributes, from the tables (GFD's newMigAttributeLabels)
        "nvidia.com/mig-1g.10gb.slices.gi": "1",
        "nvidia.com/mig-1g.10gb.slices.ci": "1",
        "nvidia.com/mig-1g.10gb.engines.copy": "1",
        "nvidia.com/mig-1g.10gb.engines.decoder": "0",  # the MIG User Guide's (go-nvml's mock says 1)
        "nvidia.com/mig-1g.10gb.engines.encoder": "0",
        "nvidia.com/mig-1g.10gb.engines.jpeg": "0",
        "nvidia.com/mig-1g.10gb.engines.ofa": "0",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mps.capable": "false",
    },
}


@pytest.fixture(scope="module")
def lab():
    with open(LAB_VARS, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_filter_names():
    assert sorted(FILTERS) == ["gpu_feature_label_entries", "gpu_feature_labels", "quota_resource_names", "team_coverage_quota"]


def test_gpu_feature_label_entries_set_the_labels_and_remove_stale_ones(lab):
    nodes, configs = lab["gpushare_nodes"], lab["gpushare_device_plugin_configs"]
    entries = FILTERS["gpu_feature_label_entries"](nodes, configs, lab["gpushare_gpu_product"])
    assert [entry["name"] for entry in entries] == ["lab-node-0", "lab-node-1", "lab-node-2"]
    assert {entry["name"]: {key: value for key, value in entry["labels"].items() if value is not None} for entry in entries} == LAB_LABELS
    # what the MIG node had under another layout goes, what the time-sliced node never had is removed if present
    assert entries[2]["labels"]["nvidia.com/mig-2g.20gb.count"] is None
    assert entries[1]["labels"]["nvidia.com/mig.strategy"] is None
    # the same removals as a patch against labels that hold every one of them
    stale = {key: "x" for key in entries[1]["labels"]}
    assert FILTERS["gpu_feature_labels"](nodes[1], configs, lab["gpushare_gpu_product"], current=stale) == entries[1]["labels"]


def test_gpu_feature_label_entries_validate_every_node_first(lab):
    nodes = [lab["gpushare_nodes"][0], dict(lab["gpushare_nodes"][1], config="nope")]
    with pytest.raises(AnsibleFilterError, match="lab-node-1.config"):
        FILTERS["gpu_feature_label_entries"](nodes, lab["gpushare_device_plugin_configs"], A100)


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_every_filter_has_sidecar_documentation(name):
    with open(os.path.join(FILTER_DIR, name + ".yml"), encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    assert doc["DOCUMENTATION"]["name"] == name
    assert "_input" in doc["DOCUMENTATION"]["options"]
    yaml.safe_load(doc["EXAMPLES"])


def test_lab_inventory_labels(lab):
    nodes, configs = lab["gpushare_nodes"], lab["gpushare_device_plugin_configs"]
    labels = {node["name"]: FILTERS["gpu_feature_labels"](node, configs, lab["gpushare_gpu_product"]) for node in nodes}
    assert labels["lab-node-0"]["nvidia.com/gpu.product"] == A100
    assert labels["lab-node-1"]["nvidia.com/gpu.product"] == A100 + "-SHARED"
    assert labels["lab-node-1"]["nvidia.com/gpu.replicas"] == "4"
    # Step 3 of the spec: the MIG node's product label is exactly mig.product.
    assert labels["lab-node-2"]["nvidia.com/gpu.product"] == nodes[2]["mig"]["product"]
    assert labels["lab-node-2"]["nvidia.com/mig-1g.10gb.count"] == "7"
    assert labels["lab-node-2"]["nvidia.com/mig.strategy"] == "mixed"


def test_config_as_yaml_text_and_current_labels():
    node = {"name": "n", "gpus": 1, "config": "shared"}
    configs = {"shared": "version: v1\nsharing:\n  mps:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 2\n"}
    patch = FILTERS["gpu_feature_labels"](node, configs, A100, current={"nvidia.com/mig.strategy": "mixed", "team": "a"})
    assert patch["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert patch["nvidia.com/mig.strategy"] is None and "team" not in patch


def test_quota_resource_names_auto(lab):
    inventory = gpu_inventory(lab["gpushare_nodes"], lab["gpushare_device_plugin_configs"])
    assert FILTERS["quota_resource_names"]("auto", inventory) == ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]
    assert FILTERS["quota_resource_names"](lab["gpushare_team_quota"]["resources"], inventory) == ["nvidia.com/gpu"]


def test_team_coverage_quota_of_the_lab(lab):
    """The lab's inventory: gpu-quota limits nvidia.com/gpu only, so the coverage quota limits the MIG slices the nodes
    advertise (2 of them, the team's share); an intent rewritten to a name no node advertises is covered too."""
    inventory = gpu_inventory(lab["gpushare_nodes"], lab["gpushare_device_plugin_configs"])
    settings = {"units": 2, "namespace": "team-a", "team_quota": "gpu-quota"}
    coverage = FILTERS["team_coverage_quota"](["nvidia.com/gpu"], inventory, lab["gpushare_device_plugin_configs"], {}, settings)
    assert coverage["object"]["spec"]["hard"] == {"requests.nvidia.com/mig-1g.10gb": "2"}
    intents = {"intents": "isolated", "intent.isolated.resource": "nvidia.com/mig-3g.40gb"}
    coverage = FILTERS["team_coverage_quota"](["nvidia.com/gpu"], inventory, lab["gpushare_device_plugin_configs"], intents, settings)
    assert coverage["hard"] == {"requests.nvidia.com/mig-1g.10gb": "2", "requests.nvidia.com/mig-3g.40gb": "2"}
    with pytest.raises(AnsibleFilterError, match="^team_coverage_quota: unknown setting limit; use units, namespace"):
        FILTERS["team_coverage_quota"](["nvidia.com/gpu"], inventory, {}, {}, dict(settings, limit={}))
    with pytest.raises(AnsibleFilterError, match=r"^shared: sharing.timeSlicing.resources\[0\].replicas: "):
        FILTERS["team_coverage_quota"](["nvidia.com/gpu"], inventory, {"shared": {"version": "v1", "sharing": {"timeSlicing": {
            "resources": [{"name": "nvidia.com/gpu", "replicas": 0}]}}}}, {}, settings)


def test_node_gpu_resources_accepts_a_product():
    node_gpu_resources = GpushareFilters().filters()["node_gpu_resources"]
    assert node_gpu_resources({"name": "n", "gpus": 2, "product": "NVIDIA-H100-80GB-HBM3"}) == {"nvidia.com/gpu": 2}


@pytest.mark.parametrize(
    "name, args, message",
    [
        (
            "gpu_feature_labels",
            ({"name": "n", "gpus": 2, "labels": {}}, {}, A100),
            "n.labels: unknown key. Fix: use only name, gpus, config, mig, product",
        ),
        (
            "gpu_feature_labels",
            ({"name": "n", "gpus": 2, "config": "sliced"}, {"shared": {"version": "v1"}}, A100),
            "n.config: names config 'sliced', which is not among the device-plugin configs (shared); the plugin's config manager "
            "crash-loops on such a label. Fix: use one of the configured names or add the config",
        ),
        (
            "gpu_feature_labels",
            ({"name": "n", "gpus": 2}, {}, None),
            "n.product: missing: a node without mig needs a GPU product for nvidia.com/gpu.product and nvidia.com/gpu.memory. "
            "Fix: set product on the node or a lab-wide default product, e.g. NVIDIA-A100-SXM4-80GB",
        ),
        (
            "gpu_feature_labels",
            ({"name": "m", "gpus": 1, "product": "A30-24GB", "mig": {"product": A100, "profile": "1g.10gb"}}, {}, None),
            "m.product: 'A30-24GB' differs from mig.product 'NVIDIA-A100-SXM4-80GB' (a MIG node's GPUs are the product it "
            "partitions). Fix: drop product on a MIG node, or make it the same as mig.product",
        ),
        (
            "quota_resource_names",
            (["requests.nvidia.com/gpu"], {}),
            "resources[0]: 'requests.nvidia.com/gpu' is a quota key, not a resource name. Fix: write nvidia.com/gpu (the role adds "
            "the requests. prefix; limits. keys never count extended resources)",
        ),
    ],
    ids=["unknown-node-key", "missing-config", "no-product", "product-mismatch", "quota-key"],
)
def test_filter_errors_keep_the_message(name, args, message):
    with pytest.raises(AnsibleFilterError) as info:
        FILTERS[name](*args)
    assert info.value.message == message
