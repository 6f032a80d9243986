# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os
import re

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.gpushare import FilterModule

FILTERS = FilterModule().filters()
FILTER_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "filter")
LAB_VARS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "inventory", "group_vars", "all", "lab.yml")

CONFIGS = {
    "shared": {
        "version": "v1",
        "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
    },
    "default": {"version": "v1"},
    "mps": {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
}
SHARED_TEXT = "version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 4"
LAB_NODES = [
    {"name": "lab-node-0", "gpus": 2, "config": "default"},
    {"name": "lab-node-1", "gpus": 2, "config": "shared"},
    {"name": "lab-node-2", "gpus": 2, "mig": {"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 1}},
]


def test_filter_names():
    assert sorted(FILTERS) == [
        "advertised_resources",
        "device_plugin_config",
        "device_plugin_configs",
        "device_plugin_sharing",
        "gpu_offenders",
        "mig_resources",
        "node_entries",
        "node_gpu_resources",
        "shared_resource_names",
    ]


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_every_filter_has_sidecar_documentation(name):
    with open(os.path.join(FILTER_DIR, name + ".yml"), encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    assert doc["DOCUMENTATION"]["name"] == name
    assert "_input" in doc["DOCUMENTATION"]["options"]
    assert "_value" in doc["RETURN"]
    yaml.safe_load(doc["EXAMPLES"])


def test_device_plugin_config():
    assert FILTERS["device_plugin_config"](CONFIGS["shared"]) == SHARED_TEXT
    assert FILTERS["device_plugin_config"](SHARED_TEXT + "\n", "shared") == SHARED_TEXT


def test_device_plugin_configs_sorted_and_deterministic():
    rendered = FILTERS["device_plugin_configs"](CONFIGS)
    assert list(rendered) == ["default", "mps", "shared"]
    assert rendered["default"] == "version: v1"
    assert rendered["shared"] == SHARED_TEXT
    assert FILTERS["device_plugin_configs"](dict(reversed(list(CONFIGS.items())))) == rendered


def test_device_plugin_sharing():
    assert FILTERS["device_plugin_sharing"](CONFIGS["default"]) == {"strategy": "none", "resources": []}
    renamed = {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [{"name": "gpu", "replicas": 2}]}}}
    assert FILTERS["device_plugin_sharing"](renamed) == {
        "strategy": "time-slicing",
        "resources": [{"name": "nvidia.com/gpu", "replicas": 2, "advertised": "nvidia.com/gpu.shared"}],
    }
    assert FILTERS["device_plugin_sharing"](CONFIGS["mps"])["strategy"] == "mps"


def test_advertised_resources():
    assert FILTERS["advertised_resources"](CONFIGS["shared"], 2) == {"nvidia.com/gpu": 8}
    assert FILTERS["advertised_resources"](CONFIGS["default"], 2) == {"nvidia.com/gpu": 2}
    assert FILTERS["advertised_resources"](SHARED_TEXT, 3) == {"nvidia.com/gpu": 12}


def test_mig_resources():
    assert FILTERS["mig_resources"]({"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 1}) == {"nvidia.com/mig-1g.10gb": 7}
    assert FILTERS["mig_resources"]({"product": "A100-SXM4-40GB", "profile": "1g.10gb", "gpus": 1}) == {"nvidia.com/mig-1g.10gb": 4}
    assert FILTERS["mig_resources"]({"product": "A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 2, "count": 3}) == {"nvidia.com/mig-1g.10gb": 6}
    # several profiles per GPU: one entry each; a layout one GPU cannot hold is refused naming what it needs
    assert FILTERS["mig_resources"]({"product": "NVIDIA-H100-80GB-HBM3", "devices": {"1g.20gb": 2, "3g.40gb": 1}, "gpus": 2}) == {
        "nvidia.com/mig-1g.20gb": 4, "nvidia.com/mig-3g.40gb": 2}
    with pytest.raises(AnsibleFilterError, match=re.escape("mig.devices: 4 x 1g.20gb + 1 x 3g.40gb do not fit one H100-80GB-HBM3: they need 12 of its 8")):
        FILTERS["mig_resources"]({"product": "NVIDIA-H100-80GB-HBM3", "devices": {"1g.20gb": 4, "3g.40gb": 1}, "gpus": 1})


@pytest.mark.parametrize(
    "node, expected",
    [
        pytest.param(LAB_NODES[0], {"nvidia.com/gpu": 2}, id="lab-node-0-default"),
        pytest.param(LAB_NODES[1], {"nvidia.com/gpu": 8}, id="lab-node-1-shared"),
        pytest.param(LAB_NODES[2], {"nvidia.com/mig-1g.10gb": 7}, id="lab-node-2-mig"),
        pytest.param({"name": "plain", "gpus": 4}, {"nvidia.com/gpu": 4}, id="no-config"),
        pytest.param({"name": "m", "gpus": 2, "mig": {"product": "A30-24GB", "profile": "1g.6gb"}}, {"nvidia.com/mig-1g.6gb": 8}, id="mig-gpus-default"),
    ],
)
def test_node_gpu_resources(node, expected):
    result = FILTERS["node_gpu_resources"](node, CONFIGS)
    assert result == expected
    if "mig" in node:
        assert "nvidia.com/gpu" not in result


def test_node_gpu_resources_accepts_rendered_configs():
    rendered = FILTERS["device_plugin_configs"](CONFIGS)
    assert FILTERS["node_gpu_resources"](LAB_NODES[1], rendered) == {"nvidia.com/gpu": 8}


def test_lab_inventory_nodes_advertise_the_lab_numbers():
    with open(LAB_VARS, encoding="utf-8") as handle:
        nodes = {node["name"]: node for node in yaml.safe_load(handle)["gpushare_nodes"]}
    assert FILTERS["node_gpu_resources"](nodes["lab-node-0"], CONFIGS) == {"nvidia.com/gpu": 2}
    assert FILTERS["node_gpu_resources"](nodes["lab-node-1"], CONFIGS) == {"nvidia.com/gpu": 8}
    assert FILTERS["node_gpu_resources"](nodes["lab-node-2"], CONFIGS) == {"nvidia.com/mig-1g.10gb": 7}


def test_node_entries_label_and_advertise_the_lab_nodes():
    entries = FILTERS["node_entries"](LAB_NODES, CONFIGS)
    assert entries == [
        {"name": "lab-node-0", "labels": {"nvidia.com/device-plugin.config": "default"}, "resources": {"nvidia.com/gpu": 2}},
        {"name": "lab-node-1", "labels": {"nvidia.com/device-plugin.config": "shared"}, "resources": {"nvidia.com/gpu": 8}},
        {"name": "lab-node-2", "labels": {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
         "resources": {"nvidia.com/mig-1g.10gb": 7}, "remove_resources": ["nvidia.com/gpu"]},
    ]


def test_node_entries_in_operator_mode_only_label():
    entries = FILTERS["node_entries"](LAB_NODES, CONFIGS, mode="operator")
    assert [sorted(e) for e in entries] == [["labels", "name"]] * 3
    assert entries[1]["labels"] == {"nvidia.com/device-plugin.config": "shared"}
    assert list(entries[2]["labels"]) == ["nvidia.com/mig.config"]


def test_node_entries_validate_every_node_first():
    with pytest.raises(AnsibleFilterError, match="lab-node-1.config: names config 'nope'"):
        FILTERS["node_entries"]([LAB_NODES[0], dict(LAB_NODES[1], config="nope")], CONFIGS)


def test_gpu_offenders():
    text = "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    resources: {limits: {nvidia.com/gpu: 2}}\n"
    expected = [{"document": 0, "kind": "Pod", "name": "p", "container": "a", "resource": "nvidia.com/gpu", "count": 2}]
    assert FILTERS["gpu_offenders"](text) == expected
    assert FILTERS["gpu_offenders"](text, ["nvidia.com/gpu"], 2) == []
    assert (
        FILTERS["gpu_offenders"](
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}
        )
        == expected
    )


@pytest.mark.parametrize(
    "name, args, message",
    [
        pytest.param(
            "device_plugin_config",
            ({"version": "v1", "flags": {"renameByDefault": True}}, "shared"),
            "shared: flags.renameByDefault: misplaced key (upstream silently ignores it here). "
            "Fix: move it to sharing.timeSlicing.renameByDefault or sharing.mps.renameByDefault",
            id="misplaced-key",
        ),
        pytest.param(
            "device_plugin_configs",
            ({"bad name": {"version": "v1"}},),
            "configs['bad name']: a config name must be a valid ConfigMap key and label value (1-63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit). Fix: rename the config, e.g. shared or time-sliced-4",
            id="config-name",
        ),
        pytest.param(
            "device_plugin_configs",
            ({},),
            "configs: must be a non-empty mapping of config name to config. Fix: give e.g. {default: {version: v1}}",
            id="no-configs",
        ),
        pytest.param(
            "device_plugin_configs",
            ({"shared": {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "gpu", "replicas": "4"}]}}}},),
            "shared: sharing.timeSlicing.resources[0].replicas: must be an integer, got string '4'. Fix: write replicas: 4 without quotes",
            id="named-config-error",
        ),
        pytest.param(
            "advertised_resources",
            ({"version": "v1"}, -2),
            "gpus: must be a non-negative integer, got integer -2. Fix: give the number of physical GPUs on the node, e.g. 2",
            id="negative-gpus",
        ),
        pytest.param(
            "mig_resources",
            ({"product": "A100-SXM4-40GB", "profile": "1g.10gb", "gpus": 1, "count": 7},),
            "mig.count: 7 instances of 1g.10gb do not fit: one A100-SXM4-40GB holds at most 4. "
            "Fix: use 1 to 4 per GPU, or another profile (1g.5gb x7, 1g.10gb x4, 2g.10gb x3, 3g.20gb x2, 4g.20gb x1, 7g.40gb x1)",
            id="mig-count",
        ),
        pytest.param(
            "mig_resources",
            ({"product": "A100-SXM4-80GB", "profile": "1g.10gb"},),
            "mig.gpus: missing. Fix: add the number of MIG-partitioned GPUs, e.g. gpus: 1",
            id="mig-no-gpus",
        ),
        pytest.param(
            "mig_resources",
            ({"product": "A100-SXM4-80GB", "profil": "1g.10gb", "gpus": 1},),
            "mig.profil: unknown key. Fix: use only product, profile, gpus, count, devices",
            id="mig-unknown-key",
        ),
        pytest.param(
            "node_gpu_resources",
            ({"name": "lab-node-1", "gpus": 2, "config": "sliced"}, CONFIGS),
            "lab-node-1.config: names config 'sliced', which is not among the device-plugin configs (default, mps, shared); "
            "the plugin's config manager crash-loops on such a label. Fix: use one of the configured names or add the config",
            id="missing-config",
        ),
        pytest.param(
            "node_gpu_resources",
            ({"name": "lab-node-2", "gpus": 2, "config": "shared", "mig": LAB_NODES[2]["mig"]}, CONFIGS),
            "lab-node-2: sets both config and mig. Fix: drop config for a MIG mixed-strategy node (it advertises nvidia.com/mig-* resources), or drop mig",
            id="config-and-mig",
        ),
        pytest.param(
            "node_gpu_resources",
            ({"name": "lab-node-2", "gpus": 1, "mig": {"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 2}}, CONFIGS),
            "lab-node-2.mig.gpus: 2 MIG GPUs but the node has only 1 physical GPU. Fix: use at most 1",
            id="more-mig-gpus-than-gpus",
        ),
        pytest.param(
            "node_gpu_resources",
            ({"name": "lab-node-2", "gpus": 2, "mig": {"product": "NVIDIA-A100-SXM4-40GB", "profile": "1g.20gb"}}, CONFIGS),
            "lab-node-2.mig.profile: '1g.20gb' is not a MIG profile of A100-SXM4-40GB. Fix: use one of the A100-SXM4-40GB profiles (max instances per GPU): "
            "1g.5gb x7, 1g.10gb x4, 2g.10gb x3, 3g.20gb x2, 4g.20gb x1, 7g.40gb x1",
            id="mig-profile",
        ),
        pytest.param(
            "node_gpu_resources",
            ({"name": "n", "gpus": "2"}, CONFIGS),
            "n.gpus: must be a non-negative integer, got '2'. Fix: give the node's physical GPU count, e.g. gpus: 2",
            id="gpus-string",
        ),
        pytest.param(
            "node_gpu_resources",
            ({"name": "n", "gpus": 2, "labels": {}}, CONFIGS),
            "n.labels: unknown key. Fix: use only name, gpus, config, mig, product",
            id="node-unknown-key",
        ),
        pytest.param(
            "gpu_offenders",
            ("kind: Pod\nx: !!python/object/apply:os.system ['id']\n",),
            "document 1, line 2: the YAML tag '!!python/object/apply:os.system' is not allowed: kubectl decodes some tags (!!binary) "
            "and sends others as plain text, so what it sends is not what is written. Fix: remove the tag and write the plain value",
            id="unsafe-tag",
        ),
        pytest.param("gpu_offenders", ("kind: Pod\n", [], 1), "resources must be a non-empty list of resource names, e.g. ['nvidia.com/gpu']", id="bad-option"),
    ],
)
def test_filter_errors_keep_the_message(name, args, message):
    with pytest.raises(AnsibleFilterError) as info:
        FILTERS[name](*args)
    assert info.value.message == message
