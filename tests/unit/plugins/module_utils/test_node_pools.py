# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Node pools by label selector: Kubernetes selector semantics (hand-written cases), pool checks, resolution."""

from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.node_pools import (
    PoolError, node_gpus, resolve_pools, selector_matches, validate_pools, validate_selector)

INFERENCE = {"pool": "inference", "zone": "a"}
TRAINING = {"pool": "training", "zone": "b", "spot": ""}
NONE = {}


# (selector, labels, matches): each read by hand from the LabelSelector semantics of the Kubernetes API
# (k8s.io/apimachinery labels.Selector from metav1.LabelSelectorAsSelector).
CASES = [
    ({}, INFERENCE, True),                                      # empty selector: everything
    ({}, NONE, True),
    ({"matchLabels": {}}, NONE, True),
    ({"matchExpressions": []}, NONE, True),
    ({"matchLabels": {"pool": "inference"}}, INFERENCE, True),
    ({"matchLabels": {"pool": "inference"}}, TRAINING, False),
    ({"matchLabels": {"pool": "inference"}}, NONE, False),
    ({"matchLabels": {"pool": "inference", "zone": "a"}}, INFERENCE, True),   # every pair must hold
    ({"matchLabels": {"pool": "inference", "zone": "b"}}, INFERENCE, False),
    ({"matchLabels": {"spot": ""}}, TRAINING, True),            # an empty value matches an empty value only
    ({"matchLabels": {"spot": ""}}, NONE, False),
    # In: the key present with one of the values
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["inference", "batch"]}]}, INFERENCE, True),
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}, INFERENCE, False),
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["inference"]}]}, NONE, False),
    # NotIn: absent, or present with none of the values
    ({"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["inference"]}]}, INFERENCE, False),
    ({"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["inference"]}]}, TRAINING, True),
    ({"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["inference"]}]}, NONE, True),
    # Exists: the key present, whatever its value (even empty)
    ({"matchExpressions": [{"key": "spot", "operator": "Exists"}]}, TRAINING, True),
    ({"matchExpressions": [{"key": "spot", "operator": "Exists", "values": []}]}, TRAINING, True),
    ({"matchExpressions": [{"key": "spot", "operator": "Exists"}]}, INFERENCE, False),
    # DoesNotExist: the key absent
    ({"matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]}, INFERENCE, True),
    ({"matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]}, TRAINING, False),
    # several expressions: ANDed
    ({"matchExpressions": [{"key": "pool", "operator": "Exists"}, {"key": "zone", "operator": "In", "values": ["b"]}]}, INFERENCE, False),
    ({"matchExpressions": [{"key": "pool", "operator": "Exists"}, {"key": "zone", "operator": "In", "values": ["b"]}]}, TRAINING, True),
    # matchLabels AND matchExpressions
    ({"matchLabels": {"zone": "a"}, "matchExpressions": [{"key": "pool", "operator": "In", "values": ["inference"]}]}, INFERENCE, True),
    ({"matchLabels": {"zone": "a"}, "matchExpressions": [{"key": "pool", "operator": "In", "values": ["training"]}]}, INFERENCE, False),
    ({"matchLabels": {"zone": "b"}, "matchExpressions": [{"key": "pool", "operator": "In", "values": ["inference"]}]}, INFERENCE, False),
    ({"matchLabels": {"zone": "b"}, "matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]}, TRAINING, False),
    # prefixed keys
    ({"matchLabels": {"example.com/pool": "x"}}, {"example.com/pool": "x"}, True),
    ({"matchLabels": {"example.com/pool": "x"}}, {"pool": "x"}, False),
]


@pytest.mark.parametrize("selector, labels, matches", CASES)
def test_selector_semantics(selector, labels, matches):
    assert selector_matches(selector, labels) is matches


@pytest.mark.parametrize("selector, path, words", [
    ([], "selector", "label selector"),
    ({"matchLabel": {"a": "b"}}, "selector", "unknown field matchLabel"),
    ({"matchLabels": {"a": 1}}, "selector.matchLabels", "quote it"),
    ({"matchLabels": {"bad key!": "x"}}, "selector.matchLabels", "not a label key"),
    ({"matchLabels": {"Example.com/a": "x"}}, "selector.matchLabels", "prefix"),
    ({"matchLabels": {"a": "-x"}}, "selector.matchLabels", "not a label value"),
    ({"matchExpressions": {"key": "a"}}, "selector.matchExpressions", "list"),
    ({"matchExpressions": [{"key": "a", "operator": "in", "values": ["x"]}]}, "selector.matchExpressions[0].operator", "case matters"),
    ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "selector.matchExpressions[0].values", "must not be empty"),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}, "selector.matchExpressions[0].values", "must not be empty"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "selector.matchExpressions[0].values", "must be empty"),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]}, "selector.matchExpressions[0].values", "must be empty"),
    ({"matchExpressions": [{"operator": "Exists"}]}, "selector.matchExpressions[0].key", "label key"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "value": []}]}, "selector.matchExpressions[0]", "unknown field value"),
])
def test_bad_selectors_name_the_field(selector, path, words):
    with pytest.raises(PoolError) as info:
        validate_selector(selector)
    assert info.value.path == path
    assert words in str(info.value)
    assert "Fix:" in str(info.value)


CONFIGS = {"default": {}, "shared": {}}


@pytest.mark.parametrize("pools, path, words", [
    ({"name": "a"}, "gpushare_node_pools", "must be a list"),
    (["a"], "gpushare_node_pools[0]", "must be a mapping"),
    ([{"name": "A_b", "selector": {}, "config": "shared"}], "gpushare_node_pools[0].name", "not a pool name"),
    ([{"name": "a", "config": "shared"}], "gpushare_node_pools[0] (a).selector", "missing"),
    ([{"name": "a", "selector": {}, "config": "shared"}, {"name": "a", "selector": {}, "config": "shared"}],
     "gpushare_node_pools[1] (a).name", "named twice"),
    ([{"name": "a", "selector": {}}], "gpushare_node_pools[0] (a)", "exactly one of config and mig"),
    ([{"name": "a", "selector": {}, "config": "shared", "mig": {"profile": "1g.10gb"}}], "gpushare_node_pools[0] (a)", "exactly one"),
    ([{"name": "a", "selector": {}, "config": "mps"}], "gpushare_node_pools[0] (a).config", "not among the device-plugin configs (default, shared)"),
    ([{"name": "a", "selector": {}, "config": "shared", "nodes": []}], "gpushare_node_pools[0] (a)", "unknown field nodes"),
    ([{"name": "a", "selector": {}, "mig": {}}], "gpushare_node_pools[0] (a).mig", "exactly one of profile, devices and layout"),
    ([{"name": "a", "selector": {}, "mig": {"profile": "1g.10gb", "product": "x"}}], "gpushare_node_pools[0] (a).mig", "unknown field product"),
    ([{"name": "a", "selector": {}, "mig": {"profile": "1g.10gb", "gpus": 0}}], "gpushare_node_pools[0] (a).mig.gpus", "at least 1"),
    ([{"name": "a", "selector": {}, "mig": {"layout": "lab-one"}}], "gpushare_node_pools[0] (a).mig.layout", "all-<profile>"),
    ([{"name": "a", "selector": {}, "mig": {"layout": "all-1g.10gb", "gpus": 1}}], "gpushare_node_pools[0] (a).mig.gpus", "goes with profile"),
    ([{"name": "a", "selector": {"matchLabels": {"p": 1}}, "config": "shared"}], "gpushare_node_pools[0] (a).selector.matchLabels", "quote"),
    ([{"name": "a", "selector": {}, "mig": {"devices": {"1g.10gb": 1}, "profile": "1g.10gb"}}], "gpushare_node_pools[0] (a).mig",
     "exactly one of profile, devices and layout"),
    ([{"name": "a", "selector": {}, "mig": {"devices": {}}}], "gpushare_node_pools[0] (a).mig.devices", "non-empty mapping"),
    ([{"name": "a", "selector": {}, "mig": {"devices": ["1g.10gb"]}}], "gpushare_node_pools[0] (a).mig.devices", "non-empty mapping"),
    ([{"name": "a", "selector": {}, "mig": {"devices": {"1g.10gb": "2"}}}], "gpushare_node_pools[0] (a).mig.devices.1g.10gb", "whole number"),
    ([{"name": "a", "selector": {}, "mig": {"devices": {"1g.10gb": 1}, "layout": "all-1g.10gb"}}], "gpushare_node_pools[0] (a).mig",
     "exactly one of profile, devices and layout"),
])
def test_bad_pools_name_the_field(pools, path, words):
    with pytest.raises(PoolError) as info:
        validate_pools(pools, CONFIGS)
    assert info.value.path == path
    assert words in str(info.value)


def node(name, labels=None, annotations=None):
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}}


def standin(name, gpus, labels=None, product="NVIDIA-A100-SXM4-80GB"):
    return node(name, labels, {"gpushare.k8s/gpus": str(gpus), "gpushare.k8s/gpu-product": product})


@pytest.mark.parametrize("obj, expected", [
    (standin("a", 2), (2, "NVIDIA-A100-SXM4-80GB")),
    (node("b", {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}), (8, "NVIDIA-H100-80GB-HBM3")),
    (node("c", {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}), (2, "NVIDIA-A100-SXM4-80GB")),
    (node("d"), (None, None)),
    (node("e", {"nvidia.com/gpu.count": "two"}), (None, None)),
])
def test_node_gpus_come_from_the_cluster(obj, expected):
    assert node_gpus(obj) == expected


POOLS = [
    {"name": "inference", "selector": {"matchLabels": {"pool": "inference"}}, "config": "shared"},
    {"name": "training", "selector": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["training"]}]},
     "mig": {"profile": "1g.10gb"}},
]


def test_resolve_gives_node_entries_and_reports():
    nodes = [standin("n1", 2, {"pool": "inference"}), standin("n2", 2, {"pool": "training"}), standin("n0", 2),
             node("cpu-only", {"pool": "cpu"})]
    result = resolve_pools(POOLS + [{"name": "batch", "selector": {"matchLabels": {"pool": "batch"}}, "config": "default"}], nodes, CONFIGS)
    assert result["errors"] == []
    assert result["nodes"] == [
        {"name": "n1", "gpus": 2, "product": "NVIDIA-A100-SXM4-80GB", "config": "shared"},
        {"name": "n2", "gpus": 2, "product": "NVIDIA-A100-SXM4-80GB",
         "mig": {"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 2}},
    ]
    assert result["pools"] == {"inference": ["n1"], "training": ["n2"], "batch": []}
    assert len(result["warnings"]) == 2
    assert "pool batch matches no node (selector pool=batch)" in result["warnings"][0]
    assert "GPU node n0 is in no pool" in result["warnings"][1]   # the node without GPUs is not reported


def test_a_pool_of_several_profiles_per_gpu_gives_each_node_that_layout():
    """``mig.devices`` goes to each node with the node's own product; whether it fits that product is decided per node by
    the MIG model (mig.node_mig) before anything is written."""
    pools = [{"name": "mixed", "selector": {"matchLabels": {"pool": "mixed"}}, "mig": {"devices": {"3g.40gb": 1, "1g.20gb": 2}, "gpus": 1}}]
    result = resolve_pools(pools, [standin("h", 2, {"pool": "mixed"}, product="NVIDIA-H100-80GB-HBM3")], CONFIGS)
    assert result["errors"] == []
    assert result["nodes"] == [{"name": "h", "gpus": 2, "product": "NVIDIA-H100-80GB-HBM3",
                                "mig": {"product": "NVIDIA-H100-80GB-HBM3", "gpus": 1, "devices": {"3g.40gb": 1, "1g.20gb": 2}}}]


def test_a_node_that_joins_a_pool_is_resolved_on_the_next_read():
    before = resolve_pools(POOLS, [standin("n0", 2)], CONFIGS)
    after = resolve_pools(POOLS, [standin("n0", 2, {"pool": "inference"})], CONFIGS)
    assert before["nodes"] == [] and after["nodes"][0]["config"] == "shared"


def test_two_pools_on_one_node_is_an_error():
    pools = POOLS + [{"name": "zone-a", "selector": {"matchLabels": {"zone": "a"}}, "config": "default"}]
    result = resolve_pools(pools, [standin("n1", 2, {"pool": "inference", "zone": "a"})], CONFIGS)
    assert result["nodes"] == []
    assert result["errors"] == ["gpushare_node_pools: node n1 is matched by pools inference and zone-a. "
                                "Fix: make the selectors disjoint (a node belongs to one pool)."]


def test_a_pool_node_also_named_is_an_error_and_a_named_node_is_covered():
    result = resolve_pools(POOLS, [standin("n1", 2, {"pool": "inference"}), standin("n9", 2)], CONFIGS, named=["n1", "n9"])
    assert len(result["errors"]) == 1 and "also listed by name" in result["errors"][0]
    assert not any("n9" in warning for warning in result["warnings"])   # named: covered


def test_a_matched_node_without_gpus_is_an_error():
    result = resolve_pools(POOLS, [node("n1", {"pool": "inference"})], CONFIGS, field="gpu_sharing_node_pools")
    assert result["errors"][0].startswith("gpu_sharing_node_pools: node n1 (pool inference) reports no GPU count")


def test_layout_and_gpus():
    pools = [{"name": "t", "selector": {}, "mig": {"layout": "all-3g.40gb"}}]
    assert resolve_pools(pools, [standin("n", 4)])["nodes"][0]["mig"] == {"product": "NVIDIA-A100-SXM4-80GB", "profile": "3g.40gb", "gpus": 4}
    pools = [{"name": "t", "selector": {}, "mig": {"profile": "1g.10gb", "gpus": 1}}]
    assert resolve_pools(pools, [standin("n", 4)])["nodes"][0]["mig"]["gpus"] == 1


def test_no_pools():
    assert resolve_pools(None, [standin("n", 2)]) == {"nodes": [], "pools": {}, "warnings": [
        "gpushare_node_pools: GPU node n is in no pool; it keeps the operator's default config."], "errors": []}


def test_options_an_argument_spec_filled_with_none_are_absent():
    pool = {"name": "t", "config": None, "selector": {"matchLabels": None, "matchExpressions": [
        {"key": "pool", "operator": "Exists", "values": None}]}, "mig": {"profile": "1g.10gb", "gpus": None, "layout": None}}
    result = resolve_pools([pool], [standin("n", 2, {"pool": "x"})])
    assert result["nodes"][0]["mig"] == {"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 2}
