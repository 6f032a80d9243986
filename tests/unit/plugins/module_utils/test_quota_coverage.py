# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.requests.quota_coverage import (
    CoverageError,
    advertised_by_nodes,
    coverage_message,
    inventory_names,
    quota_coverage,
    reachable_classes,
    reachable_names,
    resolve_quota_resources,
    team_coverage,
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
            "intended": [],
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
            "intended": [],
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


# --- The team's coverage quota. Expectations written by hand from inventory/group_vars/all/lab.yml: lab-node-0 and
# lab-node-1 advertise nvidia.com/gpu (2, and 2 x 4 slots), lab-node-2 seven 1g.10gb MIG instances; the configs default,
# shared and mps all advertise nvidia.com/gpu; the intents whole and shared ask for nvidia.com/gpu, isolated and 1g.10gb
# for nvidia.com/mig-1g.10gb.
LAB_INVENTORY = {"lab-node-0": {GPU: 2}, "lab-node-1": {GPU: 8}, "lab-node-2": {MIG: 7}}
TIME_SLICED = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": GPU, "replicas": 4}]}}}
LAB_CONFIGS = {"default": {"version": "v1", "flags": {"migStrategy": "none"}}, "shared": TIME_SLICED,
               "mps": {"version": "v1", "sharing": {"mps": {"resources": [{"name": GPU, "replicas": 4}]}}}}
LAB_INTENTS = {"intents": "1g.10gb,isolated,shared,whole", "intent.whole.resource": GPU, "intent.shared.resource": GPU,
               "intent.isolated.resource": MIG, "intent.1g.10gb.resource": MIG, "intent.whole.form": "resource"}
LAB_REACHABLE = {
    GPU: {"nodes": ["lab-node-0", "lab-node-1"], "configs": ["default", "mps", "shared"], "intents": ["shared", "whole"]},
    MIG: {"nodes": ["lab-node-2"], "configs": [], "intents": ["1g.10gb", "isolated"]},
}
OURS = {"app.kubernetes.io/managed-by": "gpushare.k8s"}


def test_reachable_names_of_the_lab():
    assert reachable_names(LAB_INVENTORY, LAB_CONFIGS, LAB_INTENTS) == LAB_REACHABLE


def test_a_config_no_node_uses_yet_is_reachable_with_its_rename():
    renamed = {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [{"name": GPU, "replicas": 2}]}}}
    mig_sliced = {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [{"name": MIG, "replicas": 2}]}}}
    reachable = reachable_names({"a": {GPU: 1}}, {"renamed": renamed, "mig-sliced": mig_sliced, "text": "version: v1\n"})
    # a node relabelled to `renamed` advertises only the .shared slots; `mig-sliced` replicates a MIG name, whole GPUs stay
    assert reachable == {GPU: {"nodes": ["a"], "configs": ["mig-sliced", "text"], "intents": []},
                         SHARED: {"nodes": [], "configs": ["renamed"], "intents": []},
                         MIG + ".shared": {"nodes": [], "configs": ["mig-sliced"], "intents": []}}


def test_an_intent_served_by_a_claim_names_a_device_class_not_a_resource():
    intents = {"intents": "whole", "intent.whole.form": "claim", "intent.whole.resource": "gpu.nvidia.com"}
    assert reachable_names({}, {}, intents) == {}


def test_the_labs_coverage_quota_limits_the_mig_slices_beside_gpu_quota():
    coverage = team_coverage(LAB_REACHABLE, [GPU], 2, "team-a", "gpu-quota")
    assert coverage["object"] == {
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "gpushare-gpu-coverage", "namespace": "team-a", "labels": OURS,
                     "annotations": {"gpushare.k8s/covers": "the GPU resources quota gpu-quota does not limit: nvidia.com/mig-1g.10gb"}},
        "spec": {"hard": {"requests.nvidia.com/mig-1g.10gb": "2"}},
    }
    assert coverage["hard"] == {"requests.nvidia.com/mig-1g.10gb": "2"}
    assert coverage["intended"] == []
    assert coverage["msg"] == ("Quota gpu-quota limits nvidia.com/gpu. Quota gpushare-gpu-coverage limits every other GPU resource the team "
                               "can reach: nvidia.com/mig-1g.10gb to 2 (node lab-node-2, intents 1g.10gb and isolated).")


def test_limits_and_names_left_uncovered_on_purpose():
    reachable = dict(LAB_REACHABLE, **{SHARED: {"nodes": [], "configs": ["renamed"], "intents": []}})
    coverage = team_coverage(reachable, [GPU], 2, "team-a", "gpu-quota", name="gpu-extra",
                             limits={MIG: 0, "nvidia.com/mig-3g.40gb": "1"}, uncovered=[SHARED])
    # 0 refuses every Pod asking for it; a name nothing reaches yet is limited too; the rename is left out on purpose
    assert coverage["hard"] == {"requests.nvidia.com/mig-1g.10gb": "0", "requests.nvidia.com/mig-3g.40gb": "1"}
    assert coverage["object"]["metadata"]["name"] == "gpu-extra"
    assert coverage["intended"] == [{"resource": SHARED, "sources": "config renamed"}]
    assert coverage["msg"].endswith("Left uncovered as team_quota_coverage_uncovered says: nvidia.com/gpu.shared (config renamed).")


def test_nothing_to_limit_writes_nothing_and_empties_the_collections_own_quota():
    assert team_coverage(LAB_REACHABLE, [GPU, MIG], 2, "team-a", "gpu-quota")["object"] is None
    live = {"metadata": {"name": "gpushare-gpu-coverage", "namespace": "team-a", "labels": OURS},
            "spec": {"hard": {"requests.nvidia.com/mig-1g.10gb": "2"}}}
    emptied = team_coverage(LAB_REACHABLE, [GPU, MIG], 2, "team-a", "gpu-quota", existing=live)["object"]
    assert emptied["spec"]["hard"] == {"requests.nvidia.com/mig-1g.10gb": None}  # a strategic merge patch removes it
    # a key no longer wanted goes, the wanted one stays
    live["spec"]["hard"]["requests.nvidia.com/gpu.shared"] = "2"
    kept = team_coverage(LAB_REACHABLE, [GPU], 2, "team-a", "gpu-quota", existing=live)["object"]
    assert kept["spec"]["hard"] == {"requests.nvidia.com/mig-1g.10gb": "2", "requests.nvidia.com/gpu.shared": None}


@pytest.mark.parametrize("changes, message", [
    ({"existing": {"metadata": {"name": "gpushare-gpu-coverage", "labels": {"team": "a"}}, "spec": {"hard": {"pods": "10"}}}},
     "team_quota_coverage_name: ResourceQuota team-a/gpushare-gpu-coverage exists and is not this collection's (no label "
     "app.kubernetes.io/managed-by=gpushare.k8s): it is left as it is. Fix: give the coverage quota another name in team_quota_coverage_name, "
     "or delete that ResourceQuota if nothing needs it"),
    ({"name": "gpu-quota"}, "team_quota_coverage_name: 'gpu-quota' is the team's own quota (gpu-quota): the coverage quota would overwrite it. "
                            "Fix: give the coverage quota a name of its own, e.g. gpushare-gpu-coverage"),
    ({"name": "GPU"}, "team_quota_coverage_name: 'GPU' is not a DNS-1123 subdomain (a ResourceQuota's name). Fix: use e.g. gpushare-gpu-coverage"),
    ({"limits": {"requests.nvidia.com/mig-1g.10gb": 1}},
     "team_quota_coverage_limits['requests.nvidia.com/mig-1g.10gb']: 'requests.nvidia.com/mig-1g.10gb' is a quota key, not a resource name. "
     "Fix: write nvidia.com/mig-1g.10gb (the role adds the requests. prefix; limits. keys never count extended resources)"),
    ({"limits": {GPU: 1}}, "team_quota_coverage_limits['nvidia.com/gpu']: nvidia.com/gpu is limited by quota gpu-quota already "
                           "(team_quota_gpus units). Fix: remove it from team_quota_coverage_limits, or from team_quota_resources to limit it here"),
    ({"limits": {MIG: -1}}, "team_quota_coverage_limits['nvidia.com/mig-1g.10gb']: -1 is not a whole number of 0 or more. "
                            "Fix: give the units of nvidia.com/mig-1g.10gb the team may request, e.g. 1 (0: none)"),
    ({"limits": [MIG]}, "team_quota_coverage_limits: must be a mapping of resource name to units, got ['nvidia.com/mig-1g.10gb']. "
                        "Fix: write e.g. {nvidia.com/mig-1g.10gb: 1}"),
    ({"uncovered": [GPU]}, "team_quota_coverage_uncovered[0]: nvidia.com/gpu is limited by quota gpu-quota, so it cannot be left uncovered. "
                           "Fix: remove it from team_quota_coverage_uncovered, or from team_quota_resources"),
    ({"uncovered": [MIG], "limits": {MIG: 1}}, "team_quota_coverage_uncovered[0]: nvidia.com/mig-1g.10gb is also given a limit in "
                                               "team_quota_coverage_limits. Fix: keep it in one of the two"),
    ({"uncovered": "nvidia.com/mig-1g.10gb"}, "team_quota_coverage_uncovered: must be a list of resource names, got 'nvidia.com/mig-1g.10gb'. "
                                              "Fix: write e.g. [nvidia.com/mig-1g.10gb]"),
    ({"uncovered": ["mig-1g.10gb"]}, "team_quota_coverage_uncovered[0]: 'mig-1g.10gb' is not an extended resource name. "
                                     "Fix: write <domain>/<name>, e.g. nvidia.com/mig-1g.10gb"),
], ids=["not-ours", "the-team-quota", "bad-name", "quota-key", "limited-twice", "negative", "limits-list", "uncover-gpu-quota",
        "limited-and-uncovered", "uncovered-string", "no-domain"])
def test_coverage_bad_input_names_the_setting_and_the_fix(changes, message):
    args = dict({"name": "gpushare-gpu-coverage", "limits": None, "uncovered": None, "existing": None}, **changes)
    with pytest.raises(CoverageError) as info:
        team_coverage(LAB_REACHABLE, [GPU], 2, "team-a", "gpu-quota", **args)
    assert str(info.value) == message


def test_a_name_left_uncovered_on_purpose_is_no_bypass():
    quotas = [quota("team-a", "gpu-quota", {"requests.nvidia.com/gpu": "2"})]
    report = quota_coverage(quotas, ADVERTISED, uncovered=[MIG])
    assert report["ok"] is True and report["bypasses"] == []
    assert report["namespaces"][0]["uncovered"] == [] and report["namespaces"][0]["intended"] == [{"resource": MIG, "nodes": ["lab-node-2"]}]
    assert coverage_message(report) == ("team-a (quota gpu-quota): covers every advertised GPU resource but those left uncovered on purpose; "
                                        "left uncovered on purpose: nvidia.com/mig-1g.10gb (on lab-node-2)")
    # both quotas of the lab: clean
    both = quotas + [quota("team-a", "gpushare-gpu-coverage", {"requests.nvidia.com/mig-1g.10gb": "2"})]
    assert coverage_message(quota_coverage(both, ADVERTISED)) == (
        "team-a (quota gpu-quota, gpushare-gpu-coverage): covers every advertised GPU resource (nvidia.com/gpu, nvidia.com/mig-1g.10gb)")
    with pytest.raises(CoverageError) as info:
        quota_coverage(quotas, ADVERTISED, uncovered=["requests.nvidia.com/mig-1g.10gb"])
    assert str(info.value).startswith("uncovered[0]: 'requests.nvidia.com/mig-1g.10gb' is a quota key")


def test_the_dra_teams_coverage_quota_counts_every_other_device_class_and_the_bridged_resource():
    """The DRA track's team quota counts devices of class gpu.nvidia.com; the coverage quota beside it counts the other
    classes the nodes' devices fall in (written by hand from inventory/group_vars/all/dra.yml: whole GPUs on dra-node-0,
    shared ones on dra-node-1, MIG on dra-node-2) and nvidia.com/gpu, which the whole-GPU class serves."""
    nodes = [{"name": "dra-node-0", "sharing": "whole"}, {"name": "dra-node-1", "sharing": "shared"}, {"name": "dra-node-2", "sharing": "mig"}]
    classes, bridged = reachable_classes(nodes, GPU)
    assert classes == {"gpu.nvidia.com": {"nodes": ["dra-node-0"]}, "mig.nvidia.com": {"nodes": ["dra-node-2"]},
                       "shared.gpu.nvidia.com": {"nodes": ["dra-node-1"]}}
    assert bridged == {GPU: {"nodes": ["dra-node-0"], "configs": [], "intents": [], "classes": ["gpu.nvidia.com"]}}
    coverage = team_coverage(bridged, [], 2, "team-dra", "dra-quota", classes=classes, team_classes=["gpu.nvidia.com"],
                             limits={"mig.nvidia.com": 1})
    assert coverage["hard"] == {"mig.nvidia.com.deviceclass.resource.k8s.io/devices": "1", "requests.nvidia.com/gpu": "2",
                                "shared.gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2"}
    assert coverage["msg"] == (
        "Quota dra-quota limits devices of class gpu.nvidia.com. Quota gpushare-gpu-coverage limits every other GPU resource the team can "
        "reach: devices of class mig.nvidia.com to 1 (node dra-node-2); nvidia.com/gpu to 2 (node dra-node-0, device class gpu.nvidia.com); "
        "devices of class shared.gpu.nvidia.com to 2 (node dra-node-1).")
    left = team_coverage(bridged, [], 2, "team-dra", "dra-quota", classes=classes, team_classes=["gpu.nvidia.com"], uncovered=["shared.gpu.nvidia.com"])
    assert "shared.gpu.nvidia.com.deviceclass.resource.k8s.io/devices" not in left["hard"]
    assert left["intended"] == [{"resource": "shared.gpu.nvidia.com", "sources": "node dra-node-1"}]
    with pytest.raises(CoverageError) as info:
        team_coverage(bridged, [], 2, "team-dra", "dra-quota", classes=classes, team_classes=["gpu.nvidia.com"], limits={"gpu.nvidia.com": 1})
    assert str(info.value).startswith("team_quota_coverage_limits['gpu.nvidia.com']: gpu.nvidia.com is limited by quota dra-quota already")
    # no bridge, no whole GPUs: nothing bridged
    assert reachable_classes(nodes[1:], GPU)[1] == {}
    with pytest.raises(CoverageError) as info:
        reachable_classes([{"name": "n"}])
    assert str(info.value).startswith("dra_nodes[0]: is not a normalised DRA node")
