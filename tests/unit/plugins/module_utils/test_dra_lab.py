# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA lab's workloads, their check and its report, from the DRA nodes (no cluster)."""

from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.dra import devices as dra
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import dra as dra_lab
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError

A100 = "NVIDIA-A100-SXM4-80GB"
NODES = dra.normalize_nodes([
    {"name": "dra-node-0", "gpus": 2},
    {"name": "dra-node-1", "gpus": 2, "shared": {"replicas": 4}},
    {"name": "dra-node-2", "gpus": 1, "mig": True},
], A100)
TAINT = {"key": "gpushare.k8s/gpu-manager", "value": "dra", "effect": "NoSchedule"}
LABELS = {"gpushare.k8s/gpu-manager": "dra"}


@pytest.mark.parametrize("product", mig.products())
def test_the_fill_takes_every_compute_slice_after_the_first_claim(product):
    first, fill = dra_lab.mig_fill(product)
    geometry = mig.partition_geometry(product)
    assert first == next(iter(geometry["profiles"]))
    assert geometry["profiles"][first]["compute"] + sum(geometry["profiles"][p]["compute"] for p in fill) == geometry["compute_slices"]


def test_stages_in_order():
    stages = dra_lab.workload_stages(NODES, "gpu-dra", "pause", [TAINT], LABELS)
    assert [(s["name"], s["pending"]) for s in stages] == [
        ("shared-claim", False), ("shares", False), ("fallback-0", False), ("mig-3g-40gb", False), ("mig-2g-20gb", False),
        ("mig-1g-10gb", False), ("fallback-1", False), ("mig-next", True), ("bridge-gpu", False)]
    assert stages[1]["pods"] == ["share-0", "share-1", "share-2", "share-3", "share-4"]  # one GPU's shares and one more
    assert all(s["file"] == "dra-%s.yaml" % s["name"] for s in stages)


def test_every_pod_tolerates_the_dra_taint_and_only_the_bridged_one_selects_dra_nodes():
    stages = dra_lab.workload_stages(NODES, "gpu-dra", "pause", [TAINT], LABELS)
    pods = [o for s in stages for o in s["objects"] if o["kind"] == "Pod"]
    assert all(p["spec"]["tolerations"] == [dict(TAINT, operator="Equal")] + dra_lab.DEFAULT_TOLERATIONS for p in pods)
    assert [p["metadata"]["name"] for p in pods if "nodeSelector" in p["spec"]] == ["bridge-gpu"]
    bridge = pods[-1]["spec"]
    assert bridge["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}} and "resourceClaims" not in bridge


def test_mig_claims_select_the_demonstration_gpu():
    stages = dra_lab.workload_stages(NODES, "gpu-dra", "pause")
    parent = dra.gpu_uuid("dra-node-2", 0)
    mig_claim = next(o for s in stages if s["name"] == "mig-3g-40gb" for o in s["objects"] if o["kind"] == "ResourceClaim")
    expression = mig_claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    assert "profile == '3g.40gb'" in expression and parent in expression
    template = next(o for s in stages if s["name"] == "fallback-0" for o in s["objects"] if o["kind"] == "ResourceClaimTemplate")
    alternatives = template["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
    assert [(a["name"], a["deviceClassName"]) for a in alternatives] == [("mig", "mig.nvidia.com"), ("shared", "shared.gpu.nvidia.com")]


def test_no_bridge_leaves_the_bridged_pod_out():
    assert "bridge-gpu" not in [s["name"] for s in dra_lab.workload_stages(NODES, "gpu-dra", "pause", bridge_resource=None)]


def test_each_kind_of_node_is_needed():
    with pytest.raises(InputError, match="gpushare_dra_nodes: has no mig node"):
        dra_lab.workload_stages(NODES[:2], "gpu-dra", "pause")


# --------------------------------------------------------------------------- reading back


def _pod(name, node=None, claims=(), reason=None, generated=None):
    status = {"conditions": [{"type": "PodScheduled", "status": "True" if node else "False", "reason": reason}]}
    if generated:
        status["resourceClaimStatuses"] = [{"name": local, "resourceClaimName": claim} for local, claim in generated.items()]
    return {"metadata": {"name": name, "namespace": "gpu-dra"}, "spec": dict({"resourceClaims": list(claims)}, **({"nodeName": node} if node else {})),
            "status": status}


def _claim(name, pool=None, device=None, request="gpu", holders=()):
    claim = {"metadata": {"name": name, "namespace": "gpu-dra"}, "status": {"reservedFor": [{"name": h} for h in holders]}}
    if pool:
        claim["status"]["allocation"] = {"devices": {"results": [{"request": request, "driver": "gpu.nvidia.com", "pool": pool, "device": device}]}}
    return claim


def test_errors_name_each_pod_that_is_not_as_expected():
    stages = [s for s in dra_lab.workload_stages(NODES, "gpu-dra", "pause") if s["name"] in ("shared-claim", "mig-next")]
    slices = [s for node in NODES for s in dra.node_slices(node)]
    pods = [_pod("shared-claim-%d" % i, "dra-node-0", [{"name": "gpu", "resourceClaimName": "one-gpu"}]) for i in range(2)]
    pods.append(_pod("shared-claim-2", "dra-node-1", [{"name": "gpu", "resourceClaimName": "one-gpu"}]))
    pods.append(_pod("mig-next", None, [{"name": "mig", "resourceClaimName": "mig-next"}], reason="Unschedulable"))
    claims = [_claim("one-gpu", "dra-node-0", "gpu-0", holders=["shared-claim-0", "shared-claim-1"]), _claim("mig-next")]
    errors = dra_lab.workload_errors(stages, NODES, pods, claims, slices)
    assert "shared-claim-2: runs on dra-node-1 but its claim one-gpu holds dra-node-0/gpu-0" in errors
    assert any(e.startswith("shared-claim: claim one-gpu is reserved for shared-claim-0, shared-claim-1") for e in errors)
    assert not [e for e in errors if e.startswith("mig-next")]
    pods[-1] = _pod("mig-next", "dra-node-2", [{"name": "mig", "resourceClaimName": "mig-next"}])
    assert any(e.startswith("mig-next: expected Pending") for e in dra_lab.workload_errors(stages, NODES, pods, claims, slices))


def test_the_report_lists_devices_holders_and_pending_pods():
    slices = [s for node in NODES for s in dra.node_slices(node)]
    pods = [_pod("a", "dra-node-0", [{"name": "gpu", "resourceClaimName": "one-gpu"}]),
            _pod("b", "dra-node-1", [{"name": "share", "resourceClaimTemplateName": "t"}], generated={"share": "b-share-x1"}),
            _pod("m", "dra-node-2", [{"name": "mig", "resourceClaimName": "mig-3g"}]),
            _pod("p", None, [{"name": "mig", "resourceClaimName": "mig-next"}], reason="Unschedulable")]
    pods[-1]["status"]["conditions"][0]["message"] = "0/6 nodes are available: cannot allocate all claims."
    claims = [_claim("one-gpu", "dra-node-0", "gpu-0"), _claim("b-share-x1", "dra-node-1", "gpu-1"),
              _claim("mig-3g", "dra-node-2", "gpu-0-mig-3g40gb-4"), _claim("mig-next")]
    report = dra_lab.placement_report(NODES, pods, claims, slices).splitlines()
    assert report[1:] == [
        "dra-node-0 (2 x NVIDIA-A100-SXM4-80GB, whole GPUs)", "  gpu-0 = gpu-dra/a", "  gpu-1 = free",
        "dra-node-1 (2 x NVIDIA-A100-SXM4-80GB, shared, 4 shares per GPU)", "  gpu-0 = free (0 of 4 shares)", "  gpu-1 = gpu-dra/b (1 of 4 shares)",
        "dra-node-2 (1 x NVIDIA-A100-SXM4-80GB, MIG, partitionable)", "  gpu-0: 3 of 7 compute slices allocated", "  gpu-0-mig-3g40gb-4 = gpu-dra/m",
        "Pending gpu-dra/p: 0/6 nodes are available: cannot allocate all claims."]


def test_the_sharing_table_carries_the_labs_numbers():
    table = dra_lab.sharing_table(NODES, 4, "1g.10gb", A100)
    assert "time-slicing `replicas: 4`" in table and "4 claims of 20Gi `memory` per GPU" in table
    assert "7 x `nvidia.com/mig-1g.10gb` per GPU" in table and "all 6 profiles" in table
    assert table.count("\n") == 10
