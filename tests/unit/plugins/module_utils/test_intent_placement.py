# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The intent placement check: each Pod read back as the API server and the scheduler left it, judged against where
the isolation table puts its intent. The lab's nodes and the expected verdicts are written by hand."""
from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.lab.intent_placement import intent_pods, placement_report

NODES = [
    {"name": "n-whole", "gpus": 2, "config": "default"},
    {"name": "n-sliced", "gpus": 2, "config": "shared"},
    {"name": "n-mig", "gpus": 1, "mig": {"gpus": 1, "product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb"}},
]
CONFIGS = {
    "default": {"version": "v1", "flags": {"migStrategy": "none"}},
    "shared": {"version": "v1", "flags": {"migStrategy": "none"},
               "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
}
ENTRIES = [
    {"name": "i-whole", "intent": "whole", "place_on": "default"},
    {"name": "i-shared", "intent": "shared", "place_on": "shared"},
    {"name": "i-isolated", "intent": "isolated", "place_on": "mig"},
]


def pod(name, resource=None, node=None, condition=None):
    container = {"name": name, "image": "pause"}
    if resource:
        container["resources"] = {"limits": {resource: "1"}}
    status = {"conditions": [condition]} if condition else {}
    return {"metadata": {"name": name}, "spec": {"containers": [container], **({"nodeName": node} if node else {})}, "status": status}


BOUND = {"type": "PodScheduled", "status": "True"}


def unschedulable(message):
    return {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}


def test_pods_ask_by_intent_only():
    assert intent_pods(ENTRIES[:1], "pause", "gpu-share") == [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "i-whole", "namespace": "gpu-share", "annotations": {"gpushare.k8s/gpu": "whole"}},
        "spec": {"containers": [{"name": "i-whole", "image": "pause"}]}}]


def test_each_pod_on_its_pool():
    pods = [pod("i-whole", "nvidia.com/gpu", "n-whole", BOUND), pod("i-shared", "nvidia.com/gpu", "n-sliced", BOUND),
            pod("i-isolated", "nvidia.com/mig-1g.10gb", "n-mig", BOUND)]
    report = placement_report(ENTRIES, pods, NODES, CONFIGS)
    assert report == {"done": True, "errors": [], "rows": [
        "i-whole (gpushare.k8s/gpu: whole) -> nvidia.com/gpu: 1 -> n-whole",
        "i-shared (gpushare.k8s/gpu: shared) -> nvidia.com/gpu: 1 -> n-sliced",
        "i-isolated (gpushare.k8s/gpu: isolated) -> nvidia.com/mig-1g.10gb: 1 -> n-mig"]}


def test_a_whole_gpu_on_the_time_sliced_node_is_an_error():
    report = placement_report(ENTRIES[:1], [pod("i-whole", "nvidia.com/gpu", "n-sliced", BOUND)], NODES, CONFIGS)
    assert report["errors"] == ["i-whole (gpushare.k8s/gpu: whole): nvidia.com/gpu: 1 landed on n-sliced; the table (default) puts it on n-whole"]


@pytest.mark.parametrize("limits", [None, "nvidia.com/mig-1g.10gb"])
def test_the_wrong_resource_or_none_is_an_error(limits):
    report = placement_report(ENTRIES[1:2], [pod("i-shared", limits, "n-mig" if limits else "n-sliced", BOUND)], NODES, CONFIGS)
    asked = "%s: 1" % limits if limits else "no GPU"
    assert report["errors"] == ["i-shared (gpushare.k8s/gpu: shared): admission wrote %s; the table puts it on shared, which gives nvidia.com/gpu: 1" % asked]


def test_pending_passes_only_when_its_pool_is_full():
    full = unschedulable("0/6 nodes are available: 1 Insufficient nvidia.com/gpu, 5 node(s) didn't match Pod's node affinity/selector.")
    report = placement_report(ENTRIES[:1], [pod("i-whole", "nvidia.com/gpu", None, full)], NODES, CONFIGS)
    assert report["errors"] == []
    assert report["rows"][0].startswith("i-whole (gpushare.k8s/gpu: whole) -> nvidia.com/gpu: 1 -> pending: its pool (n-whole) is full: 0/6")
    nowhere = unschedulable("0/6 nodes are available: 6 node(s) didn't match Pod's node affinity/selector.")
    report = placement_report(ENTRIES[:1], [pod("i-whole", "nvidia.com/gpu", None, nowhere)], NODES, CONFIGS)
    assert report["rows"] == [] and report["errors"][0].startswith("i-whole (gpushare.k8s/gpu: whole): nvidia.com/gpu: 1 fits no node, though n-whole")


def test_not_done_until_bound_or_unschedulable_and_missing_pods_named():
    assert placement_report(ENTRIES[:1], [pod("i-whole", "nvidia.com/gpu")], NODES, CONFIGS)["done"] is False
    assert placement_report(ENTRIES[:1], [], NODES, CONFIGS)["errors"] == ["i-whole (gpushare.k8s/gpu: whole): not found"]


def test_bad_entries_name_the_field():
    with pytest.raises(ValueError, match=r"placement_intents\[0\]: each entry needs name, intent and place_on"):
        intent_pods([{"name": "x", "intent": "shared"}], "pause", "ns")
