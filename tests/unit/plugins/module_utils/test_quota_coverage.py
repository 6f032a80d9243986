# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.quota_coverage import (
    CoverageError,
    advertised_by_nodes,
    coverage_message,
    inventory_names,
    quota_coverage,
    resolve_quota_resources,
)

GPU, MIG, SHARED = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"


def node(name, **allocatable):
    return {"metadata": {"name": name}, "status": {"allocatable": dict({"cpu": "32", "pods": "110"}, **allocatable)}}


NODES = [node("lab-node-0", **{GPU: "2"}), node("lab-node-1", **{GPU: "8"}), node("lab-node-2", **{MIG: "7", GPU: "0"}), node("cpu-only")]
ADVERTISED = {GPU: ["lab-node-0", "lab-node-1"], MIG: ["lab-node-2"]}
PREFIX_ERROR = "resource_prefixes: must be a non-empty list of domain prefixes ending in '/', got %s. Fix: use e.g. ['nvidia.com/']"


def quota(namespace, name, hard, **spec):
    return {"metadata": {"namespace": namespace, "name": name}, "spec": dict({"hard": hard}, **spec)}


def test_advertised_by_nodes_reads_positive_gpu_allocatable():
    assert advertised_by_nodes(NODES) == ADVERTISED
    assert advertised_by_nodes([node("n", **{"example.com/fpga": "1k", GPU: "1"})], ["example.com/"]) == {"example.com/fpga": ["n"]}


def test_inventory_names_put_gpu_first():
    inventory = {"a": {MIG: 7}, "b": {SHARED: 8, GPU: 0}, "c": {GPU: 2}}
    assert inventory_names(inventory) == [GPU, SHARED, MIG]
    assert inventory_names({"a": {MIG: 7}}) == [MIG]


def test_resolve_auto_and_lists():
    inventory = {"lab-node-0": {GPU: 2}, "lab-node-1": {GPU: 8}, "lab-node-2": {MIG: 7}}
    assert resolve_quota_resources("auto", inventory) == [GPU, MIG]
    assert resolve_quota_resources([GPU, MIG, GPU]) == [GPU, MIG]
    assert resolve_quota_resources(["example.com/fpga"]) == ["example.com/fpga"]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("auto", {}),
            "resources: auto found no advertised GPU resource (the inventory is empty). Fix: give the inventory nodes and configs, or list the names",
        ),
        (("auto", ["lab-node-0"]), "inventory: must be a mapping of node name to {resource: count}. Fix: pass the result of the gpu_inventory filter"),
        (("auto", {"n": {GPU: "2"}}), "inventory['n']['nvidia.com/gpu']: must be an integer count, got '2'. Fix: pass the result of the gpu_inventory filter"),
        (("auto", {"n": [GPU]}), "inventory['n']: must be a mapping of resource name to count. Fix: pass the result of the gpu_inventory filter"),
        (("nvidia.com/gpu",), "resources: must be 'auto' or a non-empty list of resource names, got 'nvidia.com/gpu'. Fix: use auto or e.g. [nvidia.com/gpu]"),
        (([],), "resources: must be 'auto' or a non-empty list of resource names, got []. Fix: use auto or e.g. [nvidia.com/gpu]"),
        (
            (["requests.nvidia.com/gpu"],),
            "resources[0]: 'requests.nvidia.com/gpu' is a quota key, not a resource name. Fix: write nvidia.com/gpu (the role adds "
            "the requests. prefix; limits. keys never count extended resources)",
        ),
        (
            ([GPU, "limits.nvidia.com/mig-1g.10gb"],),
            "resources[1]: 'limits.nvidia.com/mig-1g.10gb' is a quota key, not a resource name. Fix: write nvidia.com/mig-1g.10gb "
            "(the role adds the requests. prefix; limits. keys never count extended resources)",
        ),
        ((["gpu"],), "resources[0]: 'gpu' is not an extended resource name. Fix: write <domain>/<name>, e.g. nvidia.com/mig-1g.10gb"),
        (([2],), "resources[0]: must be a resource name, got 2. Fix: write e.g. nvidia.com/gpu"),
    ],
    ids=["auto-empty", "inventory-list", "count-string", "node-not-mapping", "bare-string", "empty-list", "requests-key", "limits-key", "no-domain",
         "not-string"],
)
def test_resolve_bad_input(args, message):
    with pytest.raises(CoverageError) as info:
        resolve_quota_resources(*args)
    assert str(info.value) == message


def test_gpu_only_quota_is_bypassed_by_mig():
    report = quota_coverage([quota("team-a", "gpu-quota", {"requests.nvidia.com/gpu": "2"})], ADVERTISED)
    assert report["ok"] is False
    assert report["bypasses"] == [{"namespace": "team-a", "resource": MIG, "nodes": ["lab-node-2"]}]
    assert report["namespaces"] == [
        {
            "namespace": "team-a",
            "quotas": ["gpu-quota"],
            "covered": [GPU],
            "uncovered": [{"resource": MIG, "nodes": ["lab-node-2"]}],
            "ineffective_keys": [],
            "scoped_quotas": [],
        }
    ]
    assert coverage_message(report) == (
        "team-a (quota gpu-quota): BYPASS - Pods asking for nvidia.com/mig-1g.10gb (on lab-node-2) are not counted; add requests.<name> for each"
    )


def test_full_coverage_across_two_quotas_is_clean():
    quotas = [quota("team-b", "gpu", {"requests.nvidia.com/gpu": "2", "pods": "10"}), quota("team-b", "mig", {"requests.nvidia.com/mig-1g.10gb": "1"})]
    report = quota_coverage(quotas, ADVERTISED)
    assert report["ok"] is True
    assert report["namespaces"][0]["covered"] == [GPU, MIG]
    assert coverage_message(report) == "team-b (quota gpu, mig): covers every advertised GPU resource (nvidia.com/gpu, nvidia.com/mig-1g.10gb)"


def test_limits_and_bare_keys_are_ineffective():
    report = quota_coverage([quota("t", "q", {"limits.nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "1"})], ADVERTISED)
    entry = report["namespaces"][0]
    assert entry["covered"] == []
    assert entry["ineffective_keys"] == ["q: limits.nvidia.com/gpu", "q: nvidia.com/mig-1g.10gb"]
    assert [item["resource"] for item in entry["uncovered"]] == [GPU, MIG]
    assert "keys that never limit extended resources: q: limits.nvidia.com/gpu, q: nvidia.com/mig-1g.10gb" in coverage_message(report)


def test_scoped_quota_is_listed_but_not_coverage():
    scoped = quota("t", "scoped", {"requests.nvidia.com/gpu": "1", "requests.nvidia.com/mig-1g.10gb": "1"}, scopes=["NotBestEffort"])
    report = quota_coverage([scoped, quota("t", "plain", {"requests.nvidia.com/gpu": "1"})], ADVERTISED)
    entry = report["namespaces"][0]
    assert entry["scoped_quotas"] == ["scoped"] and entry["covered"] == [GPU]
    assert [item["resource"] for item in entry["uncovered"]] == [MIG]


def test_namespaces_without_gpu_quota_are_skipped_unless_named():
    quotas = [quota("cpu-team", "cpu", {"requests.cpu": "4"}), quota("team-a", "gpu-quota", {"requests.nvidia.com/gpu": "2"})]
    assert [entry["namespace"] for entry in quota_coverage(quotas, ADVERTISED)["namespaces"]] == ["team-a"]
    report = quota_coverage(quotas, ADVERTISED, namespaces=["cpu-team"])
    assert report["namespaces"] == [
        {
            "namespace": "cpu-team",
            "quotas": [],
            "covered": [],
            "uncovered": [{"resource": GPU, "nodes": ["lab-node-0", "lab-node-1"]}, {"resource": MIG, "nodes": ["lab-node-2"]}],
            "ineffective_keys": [],
            "scoped_quotas": [],
        }
    ]
    assert coverage_message(report).startswith("cpu-team (no GPU quota): BYPASS")


def test_nothing_to_check():
    report = quota_coverage([], {})
    assert report == {"ok": True, "advertised": {}, "namespaces": [], "bypasses": []}
    assert coverage_message(report) == "No namespace has a GPU quota (advertised: nothing)."


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: advertised_by_nodes({"items": []}), "nodes: must be a list of Node objects, got dict. Fix: pass the items of a Node LIST"),
        (lambda: advertised_by_nodes([{"status": {}}]), "nodes[0]: is not a Node object (no metadata.name). Fix: pass the items of a Node LIST"),
        (lambda: advertised_by_nodes([], "nvidia.com"), PREFIX_ERROR % "['nvidia.com']"),
        (lambda: quota_coverage({}, ADVERTISED), "quotas: must be a list of ResourceQuota objects, got dict. Fix: pass the items of a ResourceQuota LIST"),
        (lambda: quota_coverage([], ["nvidia.com/gpu"]),
         "advertised: must be a mapping of resource name to node names. Fix: pass the result of advertised_by_nodes"),
        (lambda: quota_coverage([{"spec": {}}], ADVERTISED),
         "quotas[0]: is not a ResourceQuota object (no metadata.namespace or metadata.name). Fix: pass the items of a ResourceQuota LIST"),
        (lambda: quota_coverage([], ADVERTISED, "team-a"), "namespaces: must be a list of namespace names, got 'team-a'. Fix: use e.g. [team-a]"),
        (lambda: quota_coverage([], ADVERTISED, prefixes=[]), PREFIX_ERROR % "[]"),
    ],
    ids=["nodes-dict", "node-without-name", "prefix-without-slash", "quotas-dict", "advertised-list", "quota-without-meta", "namespaces-string",
         "empty-prefixes"],
)
def test_bad_input(call, message):
    with pytest.raises(CoverageError) as info:
        call()
    assert str(info.value) == message
