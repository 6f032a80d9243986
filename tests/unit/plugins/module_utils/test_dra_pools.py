# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA track's pure parts: MIG partition geometry, slices per node, pool planning, the writer on a fake API."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.dra import devices as dra
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig
from ansible_collections.gpushare.k8s.plugins.module_utils.dra.devices import DraApiError, DraError
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from dra_fake_api import FakeApi

A100 = "NVIDIA-A100-SXM4-80GB"
NODES = [
    {"name": "dra-node-0", "gpus": 2},
    {"name": "dra-node-1", "gpus": 2, "shared": {"replicas": 4}},
    {"name": "dra-node-2", "gpus": 1, "mig": True},
]


# --------------------------------------------------------------------------- geometry


def _fits(geometry, chosen):
    """Whether the (profile, start) placements fit one GPU's counters together."""
    compute = sum(geometry["profiles"][profile]["compute"] for profile, _start in chosen)
    slices = [s for profile, start in chosen for s in range(start, start + geometry["profiles"][profile]["memory"])]
    return compute <= geometry["compute_slices"] and len(slices) == len(set(slices)) and max(slices + [0]) < geometry["memory_slices"]


@pytest.mark.parametrize("product", mig.products())
def test_counters_allow_exactly_the_table_count_of_each_profile(product):
    geometry = mig.partition_geometry(product)
    for profile, count, _memory in ((p, mig.profiles(product)[p]["max"], None) for p in mig.profiles(product)):
        placements = [(profile, start) for start in geometry["profiles"][profile]["placements"]]
        most = max(n for n in range(len(placements) + 1) for combo in itertools.combinations(placements, n) if _fits(geometry, combo))
        assert most == count, (product, profile)


def test_a100_placements_are_nvidia_smis():
    profiles = mig.partition_geometry(A100)["profiles"]
    assert {name: shape["placements"] for name, shape in profiles.items()} == {
        "1g.10gb": (0, 1, 2, 3, 4, 5, 6), "1g.20gb": (0, 2, 4, 6), "2g.20gb": (0, 2, 4),
        "3g.40gb": (0, 4), "4g.40gb": (0,), "7g.80gb": (0,),
    }
    assert mig.partition_geometry(A100)["compute_slices"] == 7 and mig.partition_geometry(A100)["memory_slices"] == 8


def test_no_mix_of_profiles_exceeds_the_gpu():
    geometry = mig.partition_geometry(A100)
    every = [(p, s) for p, shape in geometry["profiles"].items() for s in shape["placements"]]
    best = 0
    for size in range(1, 8):
        for combo in itertools.combinations(every, size):
            if _fits(geometry, combo):
                best = max(best, sum(geometry["profiles"][p]["compute"] for p, _s in combo))
    assert best == 7
    # 4g.40gb + 3g.40gb fill it; the 3g.40gb + 3g.40gb pair leaves a compute slice no memory slice can serve.
    assert _fits(geometry, [("4g.40gb", 0), ("3g.40gb", 4)])
    assert not any(_fits(geometry, [("3g.40gb", 0), ("3g.40gb", 4), ("1g.10gb", s)]) for s in range(7))


# --------------------------------------------------------------------------- nodes and slices


def test_normalize_nodes_reads_each_kind():
    nodes = dra.normalize_nodes(NODES, A100)
    assert [(n["name"], n["sharing"], n["replicas"], n["memory_mib"]) for n in nodes] == [
        ("dra-node-0", "whole", None, 81920), ("dra-node-1", "shared", 4, 81920), ("dra-node-2", "mig", None, 81920)]


@pytest.mark.parametrize("nodes, message", [
    ("x", "nodes: must be a list of nodes"),
    ([{"name": "Bad_Name", "gpus": 1}], "nodes[0].name: 'Bad_Name' is not a node name"),
    ([{"name": "n", "gpus": 0}], "n.gpus: must be the node's physical GPU count (1 to 64), got 0"),
    ([{"name": "n", "gpus": 1, "mig": True, "shared": {"replicas": 2}}], "n: sets both mig and shared"),
    ([{"name": "n", "gpus": 1, "shared": {"replicas": 1}}], "n.shared.replicas: must be an integer from 2 to 64, got 1"),
    ([{"name": "n", "gpus": 1, "shared": 4}], "n.shared: must be {replicas: n}"),
    ([{"name": "n", "gpus": 1, "product": "T4"}], "n.product: no memory size known for product 'T4'"),
    ([{"name": "n", "gpus": 1, "color": "red"}], "n: unknown key(s) color"),
    ([{"name": "n", "gpus": 1}, {"name": "n", "gpus": 2}], "n: is listed twice"),
])
def test_normalize_nodes_names_the_field_and_the_fix(nodes, message):
    with pytest.raises(InputError) as caught:
        dra.normalize_nodes(nodes, A100)
    assert str(caught.value).startswith(message) and "Fix: " in str(caught.value)


def test_whole_and_shared_devices():
    whole, shared, _mig = dra.normalize_nodes(NODES, A100)
    [whole_slice] = dra.node_slices(whole)
    assert whole_slice["metadata"]["name"] == "dra-node-0-gpu.nvidia.com-0"
    assert whole_slice["spec"]["pool"] == {"name": "dra-node-0", "generation": 1, "resourceSliceCount": 1}
    devices = whole_slice["spec"]["devices"]
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    assert devices[0]["capacity"] == {"memory": {"value": "80Gi"}} and "allowMultipleAllocations" not in devices[0]
    assert devices[0]["attributes"]["type"] == {"string": "gpu"} and devices[0]["attributes"]["uuid"] != devices[1]["attributes"]["uuid"]
    [shared_slice] = dra.node_slices(shared)
    device = shared_slice["spec"]["devices"][0]
    assert device["allowMultipleAllocations"] is True
    assert device["capacity"]["memory"] == {"value": "80Gi", "requestPolicy": {"default": "20Gi", "validValues": ["20Gi"]}}
    assert dra.share_limits(dra.normalize_nodes(NODES, A100)) == {"shared.gpu.nvidia.com": {"memory": "20Gi"}}


def test_mig_pool_has_a_counter_slice_and_a_device_slice():
    node = dra.normalize_nodes([{"name": "m", "gpus": 2, "mig": True}], A100)[0]
    counters, devices = dra.node_slices(node)
    assert [s["spec"]["pool"]["resourceSliceCount"] for s in (counters, devices)] == [2, 2]
    assert "devices" not in counters["spec"] and "sharedCounters" not in devices["spec"]
    assert [c["name"] for c in counters["spec"]["sharedCounters"]] == ["gpu-0-counter-set", "gpu-1-counter-set"]
    assert counters["spec"]["sharedCounters"][0]["counters"]["compute-slices"] == {"value": "7"}
    assert len(devices["spec"]["devices"]) == 2 * 18
    by_name = {d["name"]: d for d in devices["spec"]["devices"]}
    big = by_name["gpu-1-mig-3g40gb-4"]
    assert big["attributes"]["profile"] == {"string": "3g.40gb"}
    assert big["consumesCounters"] == [{"counterSet": "gpu-1-counter-set", "counters": {
        "compute-slices": {"value": "3"}, "memory-slice-4": {"value": "1"}, "memory-slice-5": {"value": "1"},
        "memory-slice-6": {"value": "1"}, "memory-slice-7": {"value": "1"}}}]
    assert by_name["gpu-0-mig-1g10gb-6"]["capacity"] == {"memory": {"value": "9856Mi"}}


def test_large_pools_split_at_the_api_limits():
    node = dra.normalize_nodes([{"name": "m", "gpus": 9, "mig": True}], A100)[0]
    slices = dra.node_slices(node)
    counter_sets = [len(s["spec"]["sharedCounters"]) for s in slices if "sharedCounters" in s["spec"]]
    devices = [len(s["spec"]["devices"]) for s in slices if "devices" in s["spec"]]
    assert counter_sets == [8, 1] and devices == [64, 64, 34]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {5}


def test_device_classes_use_nvidias_names_and_bridge_whole_gpus():
    classes = {c["metadata"]["name"]: c["spec"] for c in dra.device_classes()}
    assert set(classes) == {"gpu.nvidia.com", "mig.nvidia.com", "shared.gpu.nvidia.com"}
    assert classes["gpu.nvidia.com"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "!device.allowMultipleAllocations" in classes["gpu.nvidia.com"]["selectors"][0]["cel"]["expression"]
    assert "extendedResourceName" not in classes["mig.nvidia.com"]
    assert "extendedResourceName" not in dra.device_classes(bridge_resource="")[0]["spec"]


# --------------------------------------------------------------------------- planning


def _published(node, generation=1, owner="uid-1"):
    slices = dra.node_slices(dra.normalize_nodes([node], A100)[0], owner_uid=owner)
    for item in slices:
        item["spec"]["pool"]["generation"] = generation
        item["metadata"]["resourceVersion"] = "7"
    return slices


def test_plan_keeps_an_equal_pool_even_with_other_quantity_spellings():
    existing = _published(NODES[1], generation=3)
    existing[0]["spec"]["devices"][0]["capacity"]["memory"]["value"] = "81920Mi"
    desired = dra.node_slices(dra.normalize_nodes([NODES[1]], A100)[0], owner_uid="uid-1")
    assert dra.plan_pool(existing, desired) == {"changed": False, "generation": 3, "create": [], "replace": [], "delete": []}


def test_plan_rewrites_a_changed_pool_at_the_next_generation_and_drops_stale_slices():
    existing = _published({"name": "dra-node-1", "gpus": 2, "mig": True}, generation=4)
    desired = dra.node_slices(dra.normalize_nodes([NODES[1]], A100)[0], owner_uid="uid-1")
    plan = dra.plan_pool(existing, desired)
    assert plan["changed"] and plan["generation"] == 5
    assert [s["metadata"]["name"] for s in plan["replace"]] == ["dra-node-1-gpu.nvidia.com-0"]
    assert plan["replace"][0]["metadata"]["resourceVersion"] == "7" and plan["replace"][0]["spec"]["pool"]["generation"] == 5
    assert plan["delete"] == ["dra-node-1-gpu.nvidia.com-1"] and plan["create"] == []


def test_plan_rewrites_a_pool_of_mixed_generations():
    existing = _published(NODES[2], generation=2)
    existing[1]["spec"]["pool"]["generation"] = 1
    plan = dra.plan_pool(existing, dra.node_slices(dra.normalize_nodes([NODES[2]], A100)[0], owner_uid="uid-1"))
    assert plan["changed"] and plan["generation"] == 3 and len(plan["replace"]) == 2


# --------------------------------------------------------------------------- the writer


def test_first_run_publishes_second_changes_nothing():
    api = FakeApi()
    first = dra.apply_resource_slices(api, NODES, default_product=A100)
    assert [r["changed"] for r in first] == [True, True, True] and [r["generation"] for r in first] == [1, 1, 1]
    assert sorted(api.slices) == ["dra-node-0-gpu.nvidia.com-0", "dra-node-1-gpu.nvidia.com-0",
                                  "dra-node-2-gpu.nvidia.com-0", "dra-node-2-gpu.nvidia.com-1"]
    assert api.slices["dra-node-0-gpu.nvidia.com-0"]["metadata"]["ownerReferences"][0]["uid"] == "uid-dra-node-0"
    api.writes.clear()
    second = dra.apply_resource_slices(api, NODES, default_product=A100)
    assert not any(r["changed"] for r in second) and api.writes == []


def test_check_mode_predicts_without_writing():
    api = FakeApi()
    results = dra.apply_resource_slices(api, NODES, default_product=A100, check_mode=True)
    assert all(r["changed"] for r in results) and api.writes == [] and api.slices == {}
    assert results[2]["after"]["dra-node-2-gpu.nvidia.com-1"]["devices"][0]["name"] == "gpu-0-mig-1g10gb-0"


def test_other_drivers_and_unmanaged_pools_are_untouched_even_when_pruning():
    other = _published({"name": "dra-node-0", "gpus": 1})[0]
    other["spec"]["driver"] = "example.com/other"
    other["metadata"]["name"] = "dra-node-0-other-0"
    foreign = _published({"name": "elsewhere", "gpus": 1})[0]
    foreign["metadata"]["name"] = "elsewhere-gpu.nvidia.com-0"
    foreign["metadata"]["labels"] = {}
    ours = _published({"name": "gone", "gpus": 1})[0]
    ours["metadata"]["name"] = "gone-gpu.nvidia.com-0"
    api = FakeApi(slices=[other, foreign, ours])
    results = dra.apply_resource_slices(api, NODES, default_product=A100, prune=True)
    assert {"dra-node-0-other-0", "elsewhere-gpu.nvidia.com-0"} <= set(api.slices) and "gone-gpu.nvidia.com-0" not in api.slices
    assert [r["name"] for r in results][-1] == "gone" and results[-1]["deleted"] == ["gone-gpu.nvidia.com-0"]


def test_absent_deletes_the_pool():
    api = FakeApi()
    dra.apply_resource_slices(api, NODES, default_product=A100)
    results = dra.apply_resource_slices(api, NODES[2:], default_product=A100, state="absent")
    assert results[0]["changed"] and results[0]["generation"] is None and not any(k.startswith("dra-node-2") for k in api.slices)
    assert not dra.apply_resource_slices(api, NODES[2:], default_product=A100, state="absent")[0]["changed"]


def test_missing_and_real_nodes_are_refused_before_any_write():
    api = FakeApi(nodes=("dra-node-0",), real=("dra-node-1",))
    with pytest.raises(DraError, match="node\\(s\\) dra-node-2 do not exist in the cluster"):
        dra.apply_resource_slices(api, NODES, default_product=A100)
    with pytest.raises(DraError, match="dra-node-1 are not kwok nodes"):
        dra.apply_resource_slices(api, NODES[:2], default_product=A100)
    assert api.writes == []
    assert dra.apply_resource_slices(api, NODES[:2], default_product=A100, allow_real_nodes=True)[1]["changed"]


def test_a_conflict_is_retried_on_a_fresh_read():
    api = FakeApi()
    dra.apply_resource_slices(api, NODES, default_product=A100)
    api.fail_next = [DraApiError(409, "conflict")]
    results = dra.apply_resource_slices(api, [dict(NODES[1], shared={"replicas": 2})], default_product=A100)
    assert results[0]["generation"] == 2 and api.writes.count(("replace", "dra-node-1-gpu.nvidia.com-0")) == 2
    memory = api.slices["dra-node-1-gpu.nvidia.com-0"]["spec"]["devices"][0]["capacity"]["memory"]
    assert memory["requestPolicy"]["default"] == "40Gi"


def test_a_refused_write_fails_with_every_pools_outcome():
    api = FakeApi()
    api.fail_next = [DraApiError(403, "forbidden")]
    with pytest.raises(dra.DraWriteError) as caught:
        dra.apply_resource_slices(api, NODES[:1], default_product=A100)
    assert "HTTP 403: forbidden" in str(caught.value) and caught.value.results[0]["error"]
