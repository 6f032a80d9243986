# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The intent placement check: each Pod read back as the API server and the scheduler left it, judged against where
the isolation table puts its intent. The lab's nodes and the expected verdicts are written by hand."""
from __future__ import annotations

import pytest

import copy
import json

from ansible_collections.gpushare.k8s.plugins.module_utils.lab.intent_placement import intent_pods, placement_report, verdict

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


# ------------------------------------------------------------------ the verdict a re-run reuses

def node_read(name, uid, labels=None, allocatable=None, taints=None):
    status = {"allocatable": allocatable or {"nvidia.com/gpu": "2"}, "conditions": [{"type": "Ready", "lastHeartbeatTime": "t0"}]}
    return {"kind": "Node", "metadata": {"name": name, "uid": uid, "resourceVersion": "1", "labels": labels or {}},
            "spec": {"taints": taints} if taints else {}, "status": status}


def policy_read(kind, uid="p-1", generation=1):
    return {"kind": kind, "metadata": {"name": "gpushare-gpu-intent", "uid": uid, "generation": generation, "resourceVersion": "7"}}


def reads():
    return [[node_read("n-whole", "u-0", {"nvidia.com/device-plugin.config": "default", "nvidia.com/gfd.timestamp": "100"}),
             node_read("n-sliced", "u-1", {"nvidia.com/device-plugin.config": "shared"}, {"nvidia.com/gpu": "8"})],
            [{"kind": "Namespace", "metadata": {"name": "ns", "uid": "ns-1", "labels": {"kubernetes.io/metadata.name": "ns"}}}],
            [policy_read("MutatingAdmissionPolicy")], [policy_read("MutatingAdmissionPolicyBinding", "b-1")],
            [policy_read("ValidatingAdmissionPolicy", "v-1")], [policy_read("ValidatingAdmissionPolicyBinding", "vb-1")]]


PASSED = {"done": True, "errors": [], "rows": ["i-whole (gpushare.k8s/gpu: whole) -> nvidia.com/gpu: 1 -> n-whole",
                                               "i-shared (gpushare.k8s/gpu: shared) -> nvidia.com/gpu: 1 -> n-sliced"]}


def stored_record():
    return verdict(intent_pods(ENTRIES[:2], "pause", "ns"), reads(), "", PASSED)["record"]


def test_a_stored_verdict_is_reused_while_nothing_that_decides_placement_changed():
    record = stored_record()
    again = reads()
    # what does not decide where a Pod lands: heartbeats, resourceVersions, status of the policies, GFD's timestamp
    again[0][0]["status"]["conditions"][0]["lastHeartbeatTime"] = "t1"
    again[0][0]["metadata"]["resourceVersion"] = "2"
    again[0][0]["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "160"
    again[2][0]["metadata"]["resourceVersion"] = "8"
    again[0].reverse()  # the list's order
    got = verdict(intent_pods(ENTRIES[:2], "pause", "ns"), again, record.rstrip("\n"))  # the file lookup strips the newline
    assert got["reuse"] is True, got["reason"]
    assert got["report"] == {"done": True, "errors": [], "rows": PASSED["rows"]}


def _changed(what):
    read, entries, image = reads(), ENTRIES[:2], "pause"
    if what == "node label":
        read[0][1]["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "default"
    elif what == "node allocatable":
        read[0][1]["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    elif what == "node taint":
        read[0][0]["spec"]["taints"] = [{"key": "gpu", "effect": "NoSchedule"}]
    elif what == "node cordoned":
        read[0][0]["spec"]["unschedulable"] = True
    elif what == "node added":
        read[0].append(node_read("n-new", "u-9"))
    elif what == "node replaced":
        read[0][0]["metadata"]["uid"] = "u-0b"
    elif what == "namespace label":
        read[1][0]["metadata"]["labels"]["team"] = "a"
    elif what == "namespace gone":
        read[1] = []
    elif what == "policy edited":
        read[2][0]["metadata"]["generation"] = 2
    elif what == "binding recreated":
        read[3][0]["metadata"]["uid"] = "b-2"
    elif what == "policy gone":
        read[4] = []
    elif what == "intent changed":
        entries = [dict(ENTRIES[0]), dict(ENTRIES[1], intent="whole")]
    elif what == "image changed":
        image = "pause:2"
    return entries, image, read


@pytest.mark.parametrize("what", ["node label", "node allocatable", "node taint", "node cordoned", "node added", "node replaced",
                                  "namespace label", "namespace gone", "policy edited", "binding recreated", "policy gone",
                                  "intent changed", "image changed"])
def test_a_change_of_what_decides_placement_makes_the_check_run_again(what):
    entries, image, read = _changed(what)
    got = verdict(intent_pods(entries, image, "ns"), read, stored_record())
    assert got["reuse"] is False and got["report"] is None
    assert got["reason"] == "the nodes, the namespace, the intent policies or the intents changed since the stored verdict"


@pytest.mark.parametrize("text, reason", [
    ("", "no earlier verdict is stored"),
    ("{not json", "the stored verdict is not JSON"),
    ('["a"]', "the stored verdict is not one this collection writes (keys version, key, rows)"),
    ('{"version": 1, "key": "x", "rows": [], "extra": 1}', "the stored verdict is not one this collection writes"),
    ('{"version": 2, "key": "%s", "rows": ["a", "b"]}' % ("0" * 64), "the stored verdict has version 2, this collection writes 1"),
    ('{"version": 1, "key": "../../etc", "rows": ["a", "b"]}', "the stored verdict's key is not a sha256 digest"),
    ('{"version": 1, "key": "%s", "rows": ["only one"]}' % ("0" * 64), "the stored verdict's rows are not 2 lines of text"),
    ('{"version": 1, "key": "%s", "rows": ["a", 3]}' % ("0" * 64), "the stored verdict's rows are not 2 lines of text"),
])
def test_a_stored_verdict_is_read_back_as_untrusted_input(text, reason):
    got = verdict(intent_pods(ENTRIES[:2], "pause", "ns"), reads(), text)
    assert got["reuse"] is False and got["reason"].startswith(reason), got["reason"]


def test_a_record_is_kept_only_for_a_finished_check_that_passed():
    record = json.loads(stored_record())
    assert set(record) == {"version", "key", "rows"} and record["rows"] == PASSED["rows"]
    failed = dict(copy.deepcopy(PASSED), errors=["i-whole: landed on n-sliced"])
    with pytest.raises(ValueError, match="only a finished check that passed is kept"):
        verdict(intent_pods(ENTRIES[:2], "pause", "ns"), reads(), "", failed)
    with pytest.raises(ValueError, match="only a finished check that passed is kept"):
        verdict(intent_pods(ENTRIES[:2], "pause", "ns"), reads(), "", dict(PASSED, done=False))
    with pytest.raises(ValueError, match=r"expected the resources read, \[nodes, namespace, policy, ...\]"):
        verdict(intent_pods(ENTRIES[:2], "pause", "ns"), [[]], "")
