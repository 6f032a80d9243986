# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from decimal import Decimal

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_yaml import ManifestError
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.mig_migration import (
    MigrationError,
    apply_change,
    gpu_workloads,
    migration_report,
    node_states,
    report_summary,
    selection_matches,
)

GPU, MIG = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
HOST = "kubernetes.io/hostname"


def node(name, labels=None, taints=None, unschedulable=False, **allocatable):
    return {
        "metadata": {"name": name, "labels": dict({HOST: name}, **(labels or {}))},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": dict({"cpu": "32", "pods": "110"}, **allocatable)},
    }


# lab-node-2 still unsplit: the report is asked before turning it MIG.
NODES = [
    node("lab-node-0", {"nvidia.com/device-plugin.config": "default"}, **{GPU: "2"}),
    node("lab-node-1", {"nvidia.com/device-plugin.config": "shared"}, **{GPU: "8"}),
    node("lab-node-2", **{GPU: "2"}),
]
TO_MIG = {"lab-node-2": {MIG: 7}}


def container(name="main", limits=None, requests=None):
    resources = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": name, "image": "pause", "resources": resources}


def pod_spec(containers=None, init=None, **extra):
    spec = {"containers": containers or [container(limits={GPU: 1})]}
    if init:
        spec["initContainers"] = init
    spec.update(extra)
    return spec


def deployment(name, namespace="ml", **spec):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": pod_spec(**spec)}}}


def pod(name, namespace="ml", owner=None, phase=None, **spec):
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": pod_spec(**spec)}
    if owner:
        obj["metadata"]["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True}]
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def report(documents, nodes=None, after=None, **kwargs):
    return migration_report(NODES if nodes is None else nodes, documents, advertised_after=TO_MIG if after is None else after, **kwargs)


def test_pinned_deployment_is_stranded_and_free_one_is_not():
    pinned = deployment("pinned", nodeSelector={HOST: "lab-node-2"})
    free = deployment("free")
    result = report([pinned, free])
    assert result["checked"] == 2 and result["ok"] is False
    assert result["workloads"] == [
        {
            "namespace": "ml",
            "kind": "Deployment",
            "name": "pinned",
            "container": "main",
            "resource": GPU,
            "count": 1,
            "reason": "the nodes it may use advertise no room for 1 nvidia.com/gpu after the change: lab-node-2 (nvidia.com/mig-1g.10gb: 7); "
            "before the change it fits lab-node-2",
            "nodes_before": ["lab-node-2"],
            "stranded_by_change": True,
        }
    ]
    assert report_summary(result) == (
        "1 of 2 workload(s) asking for nvidia.com/gpu would have no node left:\n"
        "- ml/Deployment pinned (nvidia.com/gpu): the nodes it may use advertise no room for 1 nvidia.com/gpu after the change: "
        "lab-node-2 (nvidia.com/mig-1g.10gb: 7); before the change it fits lab-node-2"
    )


def test_no_change_reports_the_cluster_as_it_is():
    after_mig = [NODES[0], NODES[1], node("lab-node-2", **{MIG: "7"})]
    result = migration_report(after_mig, [deployment("pinned", nodeSelector={HOST: "lab-node-2"}), deployment("free")])
    assert [row["name"] for row in result["workloads"]] == ["pinned"]
    assert result["workloads"][0]["stranded_by_change"] is False
    assert result["workloads"][0]["reason"].endswith("; it has no node before the change either")
    summary = report_summary(migration_report(after_mig, [deployment("free")]))
    assert summary == "1 workload(s) ask for nvidia.com/gpu; every one still has a node that can run it."


def test_every_kind_and_list_is_walked_by_gpu_requests():
    selector = {"nodeSelector": {HOST: "lab-node-2"}}
    template = {"template": {"spec": pod_spec(**selector)}}
    documents = [
        {"kind": "StatefulSet", "metadata": {"name": "sts", "namespace": "a"}, "spec": template},
        {"kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "a"}, "spec": template},
        {"kind": "Job", "metadata": {"name": "job", "namespace": "a"}, "spec": template},
        {"kind": "CronJob", "metadata": {"name": "cron", "namespace": "a"}, "spec": {"jobTemplate": {"spec": template}}},
        {"kind": "List", "items": [pod("listed", namespace="b", **selector), {"kind": "ConfigMap", "metadata": {"name": "cm"}}]},
        {"kind": "PodList", "items": [{"metadata": {"name": "typed"}, "spec": pod_spec(**selector)}]},
        None,
    ]
    result = report(documents, default_namespace="fallback")
    assert [(row["namespace"], row["kind"], row["name"]) for row in result["workloads"]] == [
        ("a", "CronJob", "cron"),
        ("a", "DaemonSet", "ds"),
        ("a", "Job", "job"),
        ("a", "StatefulSet", "sts"),
        ("b", "Pod", "listed"),
        ("fallback", "Pod", "typed"),
    ]


def test_controlled_and_finished_objects_are_left_to_their_owner():
    selector = {"nodeSelector": {HOST: "lab-node-2"}}
    documents = [
        pod("web-abc", owner="ReplicaSet", **selector),
        {"kind": "ReplicaSet", "metadata": {"name": "web-1", "namespace": "ml", "ownerReferences": [{"kind": "Deployment", "controller": True}]},
         "spec": {"template": {"spec": pod_spec(**selector)}}},
        pod("done", phase="Succeeded", **selector),
        pod("crd-owned", owner="NotebookServer", **selector),
    ]
    assert [row["name"] for row in report(documents)["workloads"]] == ["crd-owned"]
    assert len(gpu_workloads(documents, skip_controlled=False)) == 4


def test_pod_request_sums_containers_and_takes_the_largest_init():
    spec = {"containers": [container("a", limits={GPU: 1}), container("b", limits={GPU: "1"}, requests={GPU: "1"})],
            "init": [container("prep", limits={GPU: 2})]}
    [workload] = gpu_workloads([pod("p", **spec)])
    assert workload["requests"] == {GPU: 2}
    assert [(item["container"], item["count"], item["init"]) for item in workload["containers"]] == [("a", 1, False), ("b", 1, False), ("prep", 2, True)]
    spec["init"] = [container("prep", limits={GPU: 3})]
    [workload] = gpu_workloads([pod("p", **spec)])
    assert workload["requests"] == {GPU: 3}


def test_node_too_small_for_the_pod():
    big = deployment("big", containers=[container(limits={GPU: 4})], nodeSelector={"nvidia.com/device-plugin.config": "default"})
    [row] = report([big])["workloads"]
    assert row["reason"] == (
        "the nodes it may use advertise no room for 4 nvidia.com/gpu after the change: lab-node-0 (nvidia.com/gpu: 2); "
        "it has no node before the change either"
    )


def test_no_matching_node_reason():
    lost = deployment("lost", nodeSelector={"zone": "b"})
    [row] = report([lost])["workloads"]
    assert row["reason"] == "no node matches its placement (nodeSelector zone=b does not match); it has no node before the change either"


def test_manifest_text_via_gpu_requests_loader():
    from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_yaml import load_documents

    text = yaml.safe_dump_all([deployment("pinned", nodeSelector={HOST: "lab-node-2"}), deployment("free")])
    assert [row["name"] for row in report(load_documents(text))["workloads"]] == ["pinned"]


def test_labels_after_change_the_selection():
    labelled = deployment("by-label", nodeSelector={"nvidia.com/mig.strategy": "mixed"})
    result = report([labelled], labels_after={"lab-node-2": {"nvidia.com/mig.strategy": "mixed"}})
    [row] = result["workloads"]
    assert row["reason"].startswith("the nodes it may use advertise no room for 1 nvidia.com/gpu after the change: lab-node-2 (nvidia.com/mig-1g.10gb: 7)")
    assert row["nodes_before"] == []


# ---------------------------------------------------------------------------
# placement rules

TAINTS = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}, {"key": "soft", "effect": "PreferNoSchedule"}]
STATE = node_states([node("n1", {"zone": "a", "gpus": "2"}, taints=TAINTS, **{GPU: "2"})])["n1"]
TOLERATE = [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]


def affinity(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(
    "spec, expected",
    [
        ({"tolerations": TOLERATE}, None),
        ({"tolerations": [{"operator": "Exists"}]}, None),
        ({"tolerations": [{"key": "gpu", "operator": "Exists"}]}, None),
        ({}, "taint gpu:NoSchedule not tolerated"),
        ({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "no"}]}, "taint gpu:NoSchedule not tolerated"),
        ({"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}]}, "taint gpu:NoSchedule not tolerated"),
        ({"tolerations": TOLERATE, "nodeName": "n2"}, "bound to n2"),
        ({"tolerations": TOLERATE, "nodeName": "n1"}, None),
        ({"tolerations": TOLERATE, "nodeSelector": {"zone": "b", "gpus": "2"}}, "nodeSelector zone=b does not match"),
        ({"tolerations": TOLERATE, "affinity": affinity({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]})}, None),
        ({"tolerations": TOLERATE, "affinity": affinity({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]})},
         "required node affinity does not match"),
        ({"tolerations": TOLERATE, "affinity": affinity({"matchExpressions": [{"key": "nvidia.com/mig-1g.10gb.count", "operator": "Exists"}]})},
         "required node affinity does not match"),
        ({"tolerations": TOLERATE, "affinity": affinity({"matchExpressions": [{"key": "rack", "operator": "DoesNotExist"}]})}, None),
        ({"tolerations": TOLERATE, "affinity": affinity({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["1"]}]})}, None),
        ({"tolerations": TOLERATE, "affinity": affinity({"matchExpressions": [{"key": "gpus", "operator": "Lt", "values": ["2"]}]})},
         "required node affinity does not match"),
        ({"tolerations": TOLERATE, "affinity": affinity({"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]})},
         "required node affinity does not match"),
        ({"tolerations": TOLERATE, "affinity": affinity({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})}, None),
        ({"tolerations": TOLERATE, "affinity": affinity(
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        )}, None),
        ({"tolerations": TOLERATE, "affinity": affinity({})}, "required node affinity does not match"),
    ],
)
def test_selection_matches(spec, expected):
    assert selection_matches(spec, "n1", STATE) == expected


def test_cordoned_node_is_not_a_candidate():
    state = node_states([node("n", unschedulable=True, **{GPU: "1"})])["n"]
    assert selection_matches({}, "n", state) == "taint node.kubernetes.io/unschedulable:NoSchedule not tolerated"


def test_apply_change_replaces_only_gpu_resources_and_merges_labels():
    before = node_states([node("n", {"keep": "1", "drop": "x"}, **{GPU: "2", "example.com/fpga": "1", "nvidia.com/gpu.shared": "8"})])
    after = apply_change(before, {"n": {MIG: 7}}, {"n": {"drop": None, "new": "y"}})
    assert after["n"]["allocatable"] == {"cpu": Decimal(32), "pods": Decimal(110), "example.com/fpga": Decimal(1), MIG: Decimal(7)}
    assert after["n"]["labels"] == {HOST: "n", "keep": "1", "new": "y"}
    assert before["n"]["allocatable"][GPU] == Decimal(2)  # the input is not modified


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: report([], after={"lab-node-9": {MIG: 7}}),
         "advertised_after['lab-node-9']: no such node (nodes: lab-node-0, lab-node-1, lab-node-2). Fix: name an existing node"),
        (lambda: report([], after=["lab-node-2"]),
         "advertised_after: must be a mapping of node name to a mapping, got list. Fix: write e.g. {lab-node-2: {...}}"),
        (lambda: report([], after={"lab-node-2": 7}),
         "advertised_after['lab-node-2']: must be a mapping, got int. Fix: write e.g. {nvidia.com/mig-1g.10gb: 7}"),
        (lambda: report([], after={"lab-node-2": {MIG: -1}}),
         "advertised_after['lab-node-2']['nvidia.com/mig-1g.10gb']: must be a non-negative count, got -1. Fix: write e.g. 7"),
        (lambda: report([], after={"lab-node-2": {MIG: "seven"}}),
         "advertised_after['lab-node-2']['nvidia.com/mig-1g.10gb']: must be a non-negative count, got 'seven'. Fix: write e.g. 7"),
        (lambda: report([], labels_after={"lab-node-2": "mixed"}),
         "labels_after['lab-node-2']: must be a mapping, got str. Fix: write e.g. {nvidia.com/mig.strategy: mixed}"),
        (lambda: report([], resources="nvidia.com/gpu"),
         "resources: must be a non-empty list of resource names, got 'nvidia.com/gpu'. Fix: use e.g. [nvidia.com/gpu]"),
        (lambda: report([], prefixes=[]),
         "resource_prefixes: must be a non-empty list of domain prefixes, got []. Fix: use e.g. ['nvidia.com/']"),
        (lambda: report({"kind": "Pod"}),
         "documents: must be a list of objects, got dict. Fix: pass Kubernetes objects or loaded manifests"),
        (lambda: node_states({"items": []}), "nodes: must be a list of Node objects, got dict. Fix: pass the items of a Node LIST"),
        (lambda: node_states([{"status": {}}]), "nodes[0]: is not a Node object (no metadata.name). Fix: pass the items of a Node LIST"),
    ],
    ids=["unknown-node", "after-list", "after-count", "negative-count", "count-text", "labels-string", "resources-string", "no-prefixes",
         "documents-dict", "nodes-dict", "node-without-name"],
)
def test_bad_input(call, message):
    with pytest.raises(MigrationError) as info:
        call()
    assert str(info.value) == message


def test_malformed_workload_is_reported_by_the_walker():
    bad = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [container(limits={GPU: "1.5"})]}}}}
    with pytest.raises(ManifestError) as info:
        report([bad])
    assert str(info.value) == (
        "document 1: spec.template.spec.containers[0].resources.limits[nvidia.com/gpu] is '1.5', not a whole number "
        "(extended resources are requested in whole units)"
    )
