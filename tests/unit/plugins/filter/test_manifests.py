# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.manifests import gpu_pods


def test_gpu_pods_renders_limits_selector_and_is_deterministic():
    pods = [{"name": "notebook", "resource": "nvidia.com/gpu", "node_selector": {"nvidia.com/device-plugin.config": "shared"}},
            {"name": "mig-job", "resource": "nvidia.com/mig-1g.10gb"}]
    text = gpu_pods(pods, "img", "gpu-share")
    assert text == gpu_pods([dict(p) for p in pods], "img", "gpu-share")
    docs = list(yaml.safe_load_all(text))
    assert [d["metadata"]["name"] for d in docs] == ["notebook", "mig-job"]
    assert docs[0]["metadata"]["namespace"] == "gpu-share"
    assert docs[0]["spec"]["nodeSelector"] == {"nvidia.com/device-plugin.config": "shared"}
    assert docs[0]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert "nodeSelector" not in docs[1]["spec"] and "affinity" not in docs[1]["spec"] and "nodeName" not in docs[1]["spec"]


@pytest.mark.parametrize("pods, message", [
    ([{"name": "a"}], "gpu_pods[0]: each Pod needs 'name' and 'resource'"),
    ([{"name": "a", "resource": "nvidia.com/gpu", "count": 0}], "gpu_pods[0].count: 0 is not a positive integer"),
    ([{"name": "a", "resource": "nvidia.com/gpu", "count": "2"}], "gpu_pods[0].count: '2' is not a positive integer"),
    ([{"name": "a", "resource": "nvidia.com/gpu", "nodeSelector": {}}], "gpu_pods[0]: unknown key(s) nodeSelector"),
    ({"name": "a"}, "gpu_pods: expected a list"),
])
def test_gpu_pods_rejects_bad_input(pods, message):
    with pytest.raises(AnsibleFilterError) as err:
        gpu_pods(pods, "img")
    assert message in str(err.value)


LAB_NODES = [
    {"name": "lab-node-0", "gpus": 2, "config": "default"},
    {"name": "lab-node-1", "gpus": 2, "config": "shared"},
    {"name": "lab-node-2", "gpus": 2, "mig": {"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 1}},
]
LAB_CONFIGS = {
    "default": {"version": "v1"},
    "shared": {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
}


def test_gpu_inventory_and_nodes_advertising_follow_the_lab():
    from ansible_collections.gpushare.k8s.plugins.filter.manifests import gpu_inventory, nodes_advertising

    inventory = gpu_inventory(LAB_NODES, LAB_CONFIGS)
    assert inventory == {"lab-node-0": {"nvidia.com/gpu": 2}, "lab-node-1": {"nvidia.com/gpu": 8},
                         "lab-node-2": {"nvidia.com/mig-1g.10gb": 7}}
    assert nodes_advertising(inventory, "nvidia.com/mig-1g.10gb") == ["lab-node-2"]
    assert nodes_advertising(inventory, "nvidia.com/gpu") == ["lab-node-0", "lab-node-1"]


def test_placement_pods_choose_by_labels_and_resource():
    from ansible_collections.gpushare.k8s.plugins.filter.manifests import placement_fits, placement_pods

    pods = placement_pods([{"name": "prod-inference", "place_on": "mig"}, {"name": "notebook", "place_on": "shared"},
                           {"name": "batch-train", "place_on": "default"}], LAB_NODES, LAB_CONFIGS)
    assert pods == [
        {"name": "prod-inference", "resource": "nvidia.com/mig-1g.10gb", "node_selector": {"nvidia.com/mig.strategy": "mixed"}},
        {"name": "notebook", "resource": "nvidia.com/gpu", "node_selector": {"nvidia.com/device-plugin.config": "shared"}},
        {"name": "batch-train", "resource": "nvidia.com/gpu", "node_selector": {"nvidia.com/device-plugin.config": "default"}},
    ]
    assert placement_fits([{"name": "prod-inference", "place_on": "mig"}, {"name": "notebook", "place_on": "shared"}],
                          LAB_NODES, LAB_CONFIGS) == {"prod-inference": ["lab-node-2"], "notebook": ["lab-node-1"]}
    with pytest.raises(AnsibleFilterError, match=r"placement\[0\].place_on: no node uses 'mps'; use one of default, mig, shared"):
        placement_pods([{"name": "x", "place_on": "mps"}], LAB_NODES, LAB_CONFIGS)
