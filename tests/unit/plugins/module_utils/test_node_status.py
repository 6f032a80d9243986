# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for module_utils/lab/node_status.py: planning, validation, executor."""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from decimal import Decimal

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.lab import node_status as ns
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.nodes import CoreNodeApi, NodeApiError
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.node_status import (
    NodeResourcesError,
    NodeWriteError,
    RetryPolicy,
    apply_node_resources,
    normalize_resources,
    parse_quantity,
    plan_node,
)

GPU = "example.com/gpu"
FOO = "example.com/foo"
BASE = {"cpu": "32", "memory": "256Gi", "pods": "110"}


def status(capacity=None, allocatable=None, **extra):
    out = {
        "capacity": dict(BASE, **(capacity or {})),
        "allocatable": dict(BASE, **(allocatable or {})),
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    out.update(extra)
    return out


# --------------------------------------------------------------------------
# plan_node
# --------------------------------------------------------------------------


def test_plan_sets_only_managed_keys_and_preserves_the_rest():
    st = status({FOO: "3"}, {FOO: "3"})
    patch, before, after = plan_node(st, {GPU: 8}, "present")
    assert patch == {"status": {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}}}
    assert before == {"capacity": {}, "allocatable": {}}
    assert after == {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}}
    # a merge patch leaves every key it does not name alone
    merged = merge_patch({"status": st}, patch)["status"]
    assert merged["capacity"] == dict(BASE, **{FOO: "3", GPU: "8"})
    assert merged["allocatable"] == dict(BASE, **{FOO: "3", GPU: "8"})
    assert merged["conditions"] == st["conditions"]


def test_plan_does_not_modify_its_input():
    st = status({GPU: "2"}, {GPU: "2"})
    snapshot = copy.deepcopy(st)
    plan_node(st, {GPU: 8}, "present")
    plan_node(st, [GPU], "absent")
    assert st == snapshot


def test_plan_changes_a_different_count():
    patch, before, after = plan_node(status({GPU: "4"}, {GPU: "4"}), {GPU: 8})
    assert patch == {"status": {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}}}
    assert before == {"capacity": {GPU: "4"}, "allocatable": {GPU: "4"}}
    assert after == {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}}


def test_plan_only_fixes_the_field_that_differs():
    patch, before, after = plan_node(status({GPU: "8"}, {}), {GPU: 8})
    assert patch == {"status": {"allocatable": {GPU: "8"}}}
    assert before == {"capacity": {GPU: "8"}, "allocatable": {}}
    assert after == {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}}


def test_plan_removal_uses_explicit_null():
    st = status({GPU: "8", FOO: "1"}, {GPU: "8", FOO: "1"})
    patch, before, after = plan_node(st, [GPU], "absent")
    assert patch == {"status": {"capacity": {GPU: None}, "allocatable": {GPU: None}}}
    assert json.dumps(patch) == '{"status": {"capacity": {"%s": null}, "allocatable": {"%s": null}}}' % (GPU, GPU)
    assert before == {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}}
    assert after == {"capacity": {}, "allocatable": {}}
    merged = merge_patch({"status": st}, patch)["status"]
    assert merged["capacity"] == dict(BASE, **{FOO: "1"})


def test_plan_removal_accepts_a_mapping_and_a_single_name():
    st = status({GPU: "8"}, {GPU: "8"})
    assert plan_node(st, {GPU: None}, "absent")[0] == plan_node(st, GPU, "absent")[0]


@pytest.mark.parametrize(
    "st, resources, state",
    [
        (status({GPU: "8"}, {GPU: "8"}), {GPU: 8}, "present"),
        (status({GPU: "1k"}, {GPU: "1000"}), {GPU: 1000}, "present"),
        (status({GPU: "0"}, {GPU: "0"}), {GPU: 0}, "present"),
        (status(), [GPU], "absent"),
        ({}, [GPU], "absent"),
        (None, [GPU], "absent"),
    ],
    ids=["same", "same-quantity", "zero", "absent-missing", "empty-status", "no-status"],
)
def test_plan_is_a_no_op_when_the_node_matches(st, resources, state):
    patch, before, after = plan_node(st, resources, state)
    assert patch is None
    assert before == after


def test_plan_honours_fields():
    patch, before, after = plan_node(status(), {GPU: 8}, "present", fields=["allocatable"])
    assert patch == {"status": {"allocatable": {GPU: "8"}}}
    assert before == {"allocatable": {}}
    assert after == {"allocatable": {GPU: "8"}}


def test_plan_on_a_node_without_status_creates_the_maps():
    patch, _before, after = plan_node({}, {GPU: 2, FOO: 0})
    assert patch == {"status": {"capacity": {GPU: "2", FOO: "0"}, "allocatable": {GPU: "2", FOO: "0"}}}
    assert after["capacity"] == {GPU: "2", FOO: "0"}


@pytest.mark.parametrize(
    "text, value",
    [
        ("8", Decimal(8)),
        ("0", Decimal(0)),
        ("1k", Decimal(1000)),
        ("1Ki", Decimal(1024)),
        ("2Mi", Decimal(2 * 2 ** 20)),
        ("1500m", Decimal("1.5")),
        ("1e3", Decimal(1000)),
        ("1E", Decimal(10) ** 18),
        (" 7 ", Decimal(7)),
        ("abc", None),
        ("", None),
        ("1x", None),
        (None, None),
        (True, None),
    ],
)
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, message",
    [
        (-1, 'resources["example.com/gpu"]: -1 is negative; use a non-negative integer, e.g. 8 (0 advertises none)'),
        ("4", "resources[\"example.com/gpu\"]: '4' is a string, not a count; use an integer, e.g. 8"),
        (2.5, 'resources["example.com/gpu"]: 2.5 is a float, not a count; use an integer, e.g. 8'),
        (2.0, 'resources["example.com/gpu"]: 2.0 is a float, not a count; use an integer, e.g. 8'),
        (True, 'resources["example.com/gpu"]: True is a boolean, not a count; use an integer, e.g. 8'),
        (None, 'resources["example.com/gpu"]: no count given; use an integer, e.g. 8'),
        ([1], 'resources["example.com/gpu"]: [1] is a list, not a count; use an integer, e.g. 8'),
        (2 ** 63, 'resources["example.com/gpu"]: 9223372036854775808 is larger than a Kubernetes quantity '
                  "holds (9223372036854775807)"),
    ],
    ids=["negative", "string", "float", "integral-float", "bool", "none", "list", "too-large"],
)
def test_bad_counts_are_rejected_with_the_fix(value, message):
    with pytest.raises(NodeResourcesError) as err:
        plan_node(status(), {GPU: value})
    assert str(err.value) == message


NO_PREFIX = (
    'resources: "{0}" is not an extended resource name; cpu, memory, pods and other names without a '
    'domain prefix belong to the kubelet. Use a domain-prefixed name such as "nvidia.com/gpu"'
)
BAD_FORMAT = (
    'resources: "{0}" is not a valid extended resource name: the part before "/" must be a lowercase DNS '
    'subdomain (e.g. "nvidia.com") and the part after it 1-63 letters, digits, "-", "_" or ".", starting '
    'and ending with a letter or digit (e.g. "nvidia.com/gpu")'
)
RESERVED = 'resources: "{0}" is in the reserved kubernetes.io domain; use a domain you own, such as "example.com/{1}"'


@pytest.mark.parametrize(
    "name, message",
    [
        ("cpu", NO_PREFIX.format("cpu")),
        ("memory", NO_PREFIX.format("memory")),
        ("pods", NO_PREFIX.format("pods")),
        ("nvidia-gpu", NO_PREFIX.format("nvidia-gpu")),
        ("kubernetes.io/gpu", RESERVED.format("kubernetes.io/gpu", "gpu")),
        ("node.kubernetes.io/gpu", RESERVED.format("node.kubernetes.io/gpu", "gpu")),
        ("requests.nvidia.com/gpu", 'resources: "requests.nvidia.com/gpu" starts with "requests.", which '
                                    'resource quotas reserve; drop the prefix, e.g. "nvidia.com/gpu"'),
        ("Nvidia.com/gpu", BAD_FORMAT.format("Nvidia.com/gpu")),
        ("nvidia.com/", BAD_FORMAT.format("nvidia.com/")),
        ("/gpu", BAD_FORMAT.format("/gpu")),
        ("nvidia.com/-gpu", BAD_FORMAT.format("nvidia.com/-gpu")),
        ("nvidia.com/gpu/x", BAD_FORMAT.format("nvidia.com/gpu/x")),
        ("nvidia_com/gpu", BAD_FORMAT.format("nvidia_com/gpu")),
        ("nvidia.com/" + "g" * 64, BAD_FORMAT.format("nvidia.com/" + "g" * 64)),
        (5, 'resources: key 5 is not a string; use a resource name such as "nvidia.com/gpu"'),
    ],
)
@pytest.mark.parametrize("state", ["present", "absent"])
def test_bad_names_are_rejected_with_the_fix(name, message, state):
    with pytest.raises(NodeResourcesError) as err:
        plan_node(status(), {name: 1}, state)
    assert str(err.value) == message


@pytest.mark.parametrize(
    "name", ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "example.com/it-gpu", "a.b-c.d/X_y.z", "x/y"]
)
def test_good_names_pass(name):
    assert normalize_resources({name: 1}) == {name: 1}


def test_all_problems_are_reported_at_once():
    with pytest.raises(NodeResourcesError) as err:
        normalize_resources({"cpu": 1, GPU: -1, FOO: 2})
    assert str(err.value) == NO_PREFIX.format("cpu") + "; " + (
        'resources["example.com/gpu"]: -1 is negative; use a non-negative integer, e.g. 8 (0 advertises none)'
    )


@pytest.mark.parametrize(
    "resources, state, message",
    [
        ([GPU], "present", 'resources: state=present needs a mapping of resource name to count, '
                           'e.g. {"nvidia.com/gpu": 8}; got list'),
        ({}, "present", 'resources: is empty; name at least one resource, e.g. "nvidia.com/gpu"'),
        ([], "absent", 'resources: is empty; name at least one resource, e.g. "nvidia.com/gpu"'),
        (3, "absent", "resources: state=absent needs a list of resource names (or a mapping whose keys are "
                      "the names); got int"),
        ({GPU: 1}, "gone", "state: 'gone' is not one of present, absent"),
    ],
)
def test_bad_resources_shapes(resources, state, message):
    with pytest.raises(NodeResourcesError) as err:
        normalize_resources(resources, state)
    assert str(err.value) == message


@pytest.mark.parametrize(
    "fields, message",
    [
        ([], "fields: is empty; use capacity, allocatable or both (the default)"),
        (["capacity", "limits"], "fields: 'limits' not one of capacity, allocatable"),
    ],
)
def test_bad_fields(fields, message):
    with pytest.raises(NodeResourcesError) as err:
        plan_node(status(), {GPU: 1}, fields=fields)
    assert str(err.value) == message


# --------------------------------------------------------------------------
# executor, against an in-memory API
# --------------------------------------------------------------------------


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (what the API server does for application/merge-patch+json)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def make_node(name, kwok=True, capacity=None, allocatable=None, labels=None):
    annotations = {ns.KWOK_ANNOTATION: "fake"} if kwok else {}
    return {
        "metadata": {"name": name, "resourceVersion": "1", "annotations": annotations, "labels": labels or {}},
        "status": status(capacity, allocatable),
    }


class FakeApi:
    """Nodes in memory; merge patches with resourceVersion preconditions; injectable failures."""

    def __init__(self, nodes, patch_delay=0.0):
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}
        self.calls = []
        self.patch_failures = {}  # name -> list of NodeApiError raised before succeeding
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.patch_delay = patch_delay

    def get_node(self, name):
        with self.lock:
            self.calls.append(("get", name))
            if name not in self.nodes:
                raise NodeApiError(404, 'nodes "{0}" not found'.format(name))
            return copy.deepcopy(self.nodes[name])

    def list_nodes(self, label_selector=None):
        with self.lock:
            self.calls.append(("list", label_selector))
            selected = []
            for node in self.nodes.values():
                labels = node["metadata"]["labels"]
                if label_selector:
                    key, _sep, value = label_selector.partition("=")
                    if labels.get(key) != value:
                        continue
                selected.append(copy.deepcopy(node))
            return selected

    def patch_node_status(self, name, patch):
        with self.lock:
            self.calls.append(("patch", name, copy.deepcopy(patch)))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.patch_delay:
                time.sleep(self.patch_delay)
            with self.lock:
                failures = self.patch_failures.get(name)
                if failures:
                    raise failures.pop(0)
                node = self.nodes[name]
                wanted = (patch.get("metadata") or {}).get("resourceVersion")
                if wanted and wanted != node["metadata"]["resourceVersion"]:
                    raise NodeApiError(409, "the object has been modified; please apply your changes to the "
                                            "latest version and try again")
                assert set(patch) <= {"metadata", "status"}, patch
                node["status"] = merge_patch(node["status"], patch["status"])
                node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
                return copy.deepcopy(node)
        finally:
            with self.lock:
                self.in_flight -= 1

    def patch_node(self, name, patch):
        with self.lock:
            self.calls.append(("patch-labels", name, copy.deepcopy(patch)))
            node = self.nodes[name]
            wanted = patch["metadata"].get("resourceVersion")
            if wanted and wanted != node["metadata"]["resourceVersion"]:
                raise NodeApiError(409, "the object has been modified")
            assert set(patch) == {"metadata"} and set(patch["metadata"]) <= {"labels", "resourceVersion"}, patch
            node["metadata"]["labels"] = merge_patch(node["metadata"]["labels"], patch["metadata"]["labels"])
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
            return copy.deepcopy(node)

    def bump(self, name, capacity=None):
        """Simulate another writer (kwok heartbeat or a second caller)."""
        node = self.nodes[name]
        if capacity:
            node["status"]["capacity"].update(capacity)
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)

    def kinds(self):
        return [c[0] for c in self.calls]


NO_SLEEP = RetryPolicy(sleep=lambda _s: None)


def run(api, resources, **kwargs):
    kwargs.setdefault("policy", NO_SLEEP)
    return apply_node_resources(api, resources, **kwargs)


def lab(n=3, **kwargs):
    return FakeApi([make_node("lab-node-{0}".format(i), labels={"lab": "yes"}) for i in range(n)], **kwargs)


def test_apply_writes_changed_nodes_and_reports_before_after():
    api = lab()
    api.nodes["lab-node-1"]["status"]["capacity"][GPU] = "8"
    api.nodes["lab-node-1"]["status"]["allocatable"][GPU] = "8"
    results = run(api, {GPU: 8}, label_selector="lab=yes")
    assert [r["name"] for r in results] == ["lab-node-0", "lab-node-1", "lab-node-2"]
    assert [r["changed"] for r in results] == [True, False, True]
    assert results[0]["before"] == {"capacity": {}, "allocatable": {}}
    assert results[0]["after"] == {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}}
    assert api.kinds().count("list") == 1
    assert api.kinds().count("get") == 0
    patched = sorted(c[1] for c in api.calls if c[0] == "patch")
    assert patched == ["lab-node-0", "lab-node-2"]
    for name in ("lab-node-0", "lab-node-2"):
        st = api.nodes[name]["status"]
        assert st["capacity"] == dict(BASE, **{GPU: "8"})
        assert st["allocatable"] == dict(BASE, **{GPU: "8"})
        assert st["conditions"] == [{"type": "Ready", "status": "True"}]


def test_patch_body_is_a_merge_patch_with_a_resource_version_precondition():
    api = lab(1)
    run(api, {GPU: 2}, names=["lab-node-0"])
    patches = [c[2] for c in api.calls if c[0] == "patch"]
    assert patches == [
        {"metadata": {"resourceVersion": "1"}, "status": {"capacity": {GPU: "2"}, "allocatable": {GPU: "2"}}}
    ]


def test_one_name_is_one_get_many_names_one_list():
    api = lab()
    run(api, {GPU: 1}, names=["lab-node-2"], check_mode=True)
    assert api.calls == [("get", "lab-node-2")]
    api.calls.clear()
    results = run(api, {GPU: 1}, names=["lab-node-2", "lab-node-0", "lab-node-2"], check_mode=True)
    assert api.calls == [("list", None)]
    assert [r["name"] for r in results] == ["lab-node-2", "lab-node-0"]


def test_second_run_is_idempotent():
    api = lab()
    first = run(api, {GPU: 8, FOO: 1}, label_selector="lab=yes")
    assert all(r["changed"] for r in first)
    api.calls.clear()
    second = run(api, {GPU: 8, FOO: 1}, label_selector="lab=yes")
    assert not any(r["changed"] for r in second)
    assert "patch" not in api.kinds()
    assert [r["after"] for r in second] == [r["after"] for r in first]


def test_check_mode_predicts_without_writing():
    api = lab()
    api.nodes["lab-node-0"]["status"]["capacity"][GPU] = "8"
    api.nodes["lab-node-0"]["status"]["allocatable"][GPU] = "8"
    before = copy.deepcopy(api.nodes)
    predicted = run(api, {GPU: 8}, label_selector="lab=yes", check_mode=True)
    assert api.nodes == before
    assert "patch" not in api.kinds()
    applied = run(api, {GPU: 8}, label_selector="lab=yes")
    assert [(r["changed"], r["before"], r["after"]) for r in predicted] == [
        (r["changed"], r["before"], r["after"]) for r in applied
    ]
    again = run(api, {GPU: 8}, label_selector="lab=yes", check_mode=True)
    assert not any(r["changed"] for r in again)


def test_removal_and_its_idempotence():
    api = lab(2)
    run(api, {GPU: 4, FOO: 1}, label_selector="lab=yes")
    results = run(api, [GPU], state="absent", label_selector="lab=yes")
    assert all(r["changed"] for r in results)
    assert results[0]["before"] == {"capacity": {GPU: "4"}, "allocatable": {GPU: "4"}}
    assert results[0]["after"] == {"capacity": {}, "allocatable": {}}
    for node in api.nodes.values():
        assert GPU not in node["status"]["capacity"]
        assert GPU not in node["status"]["allocatable"]
        assert node["status"]["capacity"][FOO] == "1"
        assert node["status"]["capacity"]["cpu"] == "32"
    again = run(api, [GPU], state="absent", label_selector="lab=yes")
    assert not any(r["changed"] for r in again)


def test_missing_nodes_are_all_listed_and_nothing_is_written():
    api = lab()
    with pytest.raises(NodeResourcesError) as err:
        run(api, {GPU: 1}, names=["lab-node-0", "ghost-a", "lab-node-1", "ghost-b"])
    assert str(err.value) == (
        "name: node(s) not found: ghost-a, ghost-b. Fix: correct the names (see `kubectl get nodes`) or create the nodes; nothing was changed"
    )
    assert "patch" not in api.kinds()


def test_a_single_missing_node():
    api = lab()
    with pytest.raises(NodeResourcesError) as err:
        run(api, {GPU: 1}, names=["ghost"])
    assert str(err.value).startswith("name: node(s) not found: ghost.")


def test_selector_without_match_fails_unless_allowed():
    api = lab()
    with pytest.raises(NodeResourcesError) as err:
        run(api, {GPU: 1}, label_selector="lab=no")
    assert str(err.value) == (
        "label_selector: 'lab=no' matches no node. Check it with `kubectl get nodes -l 'lab=no'`, "
        "or set allow_no_match: true if an empty match is expected"
    )
    assert run(api, {GPU: 1}, label_selector="lab=no", allow_no_match=True) == []


REFUSED = (
    "refusing to change node(s) {0}: they lack the annotation kwok.x-k8s.io/node=fake, so they are not kwok "
    "nodes. On a real cluster the device plugin owns these numbers and overwrites them; set "
    "allow_real_nodes: true to write anyway"
)


def test_real_nodes_are_refused_before_any_write():
    api = FakeApi([make_node("kwok-0"), make_node("real-0", kwok=False), make_node("real-1", kwok=False)])
    with pytest.raises(NodeResourcesError) as err:
        run(api, {GPU: 1}, names=["kwok-0", "real-0", "real-1"])
    assert str(err.value) == REFUSED.format("real-0, real-1")
    assert "patch" not in api.kinds()
    # in check mode too: the prediction would be a lie
    with pytest.raises(NodeResourcesError, match="^%s$" % re.escape(REFUSED.format("real-0"))):
        run(api, {GPU: 1}, names=["real-0"], check_mode=True)


@pytest.mark.parametrize("annotations", [{}, {ns.KWOK_ANNOTATION: "true"}, {"other": "fake"}])
def test_only_the_fake_annotation_counts_as_kwok(annotations):
    node = make_node("n")
    node["metadata"]["annotations"] = annotations
    with pytest.raises(NodeResourcesError, match="refusing to change node"):
        run(FakeApi([node]), {GPU: 1}, names=["n"])


def test_real_nodes_allowed_on_request():
    api = FakeApi([make_node("real-0", kwok=False)])
    results = run(api, {GPU: 1}, names=["real-0"], allow_real_nodes=True)
    assert results[0]["changed"] is True
    assert api.nodes["real-0"]["status"]["capacity"][GPU] == "1"


def test_validation_happens_before_the_api_is_touched():
    api = lab()
    with pytest.raises(NodeResourcesError, match=r'^resources: "cpu" is not an extended resource name; .* Use a domain-prefixed '
                                                 r'name such as "nvidia\.com/gpu"$'):
        run(api, {"cpu": 1}, names=["lab-node-0"])
    with pytest.raises(NodeResourcesError, match=r"^parallelism: 0 is out of range; use an integer from 1 to 256 \(default 16\)$"):
        run(api, {GPU: 1}, names=["lab-node-0"], parallelism=0)
    with pytest.raises(NodeResourcesError, match="^give exactly one of name, label_selector and nodes$"):
        run(api, {GPU: 1}, names=["lab-node-0"], label_selector="x=y")
    with pytest.raises(NodeResourcesError, match="^give exactly one of name, label_selector and nodes$"):
        run(api, {GPU: 1})
    assert api.calls == []


@pytest.mark.parametrize("parallelism", [0, 257, -1, True, "4"])
def test_parallelism_range(parallelism):
    with pytest.raises(NodeResourcesError) as err:
        run(lab(), {GPU: 1}, names=["lab-node-0"], parallelism=parallelism)
    assert str(err.value) == "parallelism: {0!r} is out of range; use an integer from 1 to 256 (default 16)".format(
        parallelism
    )


def test_conflict_is_retried_on_a_fresh_read():
    api = lab(1)
    # another writer changes the node between our read and our write
    original_list = api.list_nodes

    def list_then_bump(label_selector=None):
        nodes = original_list(label_selector)
        api.bump("lab-node-0", capacity={FOO: "5"})
        return nodes

    api.list_nodes = list_then_bump
    results = run(api, {GPU: 3}, label_selector="lab=yes")
    assert results[0]["changed"] is True
    assert results[0]["after"] == {"capacity": {GPU: "3"}, "allocatable": {GPU: "3"}}
    assert api.nodes["lab-node-0"]["status"]["capacity"][FOO] == "5"  # the other writer's key survived
    assert api.kinds() == ["list", "patch", "get", "patch"]


def test_conflict_resolved_by_someone_else_is_not_an_error():
    api = lab(1)
    original_list = api.list_nodes

    def list_then_set(label_selector=None):
        nodes = original_list(label_selector)
        api.nodes["lab-node-0"]["status"]["capacity"][GPU] = "3"
        api.nodes["lab-node-0"]["status"]["allocatable"][GPU] = "3"
        api.bump("lab-node-0")
        return nodes

    api.list_nodes = list_then_set
    results = run(api, {GPU: 3}, label_selector="lab=yes")
    assert "error" not in results[0]
    assert results[0]["after"] == {"capacity": {GPU: "3"}, "allocatable": {GPU: "3"}}
    assert api.kinds() == ["list", "patch", "get"]


def test_conflicts_are_retried_on_a_fresh_read_not_reported():
    api = lab(2)
    api.patch_failures["lab-node-1"] = [NodeApiError(409, "conflict"), NodeApiError(409, "conflict")]
    sleeps = []
    results = run(api, {GPU: 1}, label_selector="lab=yes", policy=RetryPolicy(sleep=sleeps.append))
    assert all(r["changed"] and "error" not in r for r in results)
    assert api.nodes["lab-node-1"]["status"]["allocatable"][GPU] == "1"
    assert len(sleeps) == 2
    assert [c[0] for c in api.calls if c[1] == "lab-node-1"] == ["patch", "get", "patch", "get", "patch"]


@pytest.mark.parametrize(
    "failure",
    [
        NodeApiError(429, "too many requests", retry_after=1),
        NodeApiError(500, "internal error"),
        NodeApiError(503, "unavailable"),
        NodeApiError(None, "cannot reach the API server: connection reset by peer"),
    ],
    ids=["429", "500", "503", "reset"],
)
def test_transient_errors_reaching_the_executor_fail_that_node_once(failure):
    """The client retried them already (k8s_auth.api_retry, tests/unit/plugins/module_utils/test_api_retry.py)."""
    api = lab(2)
    api.patch_failures["lab-node-1"] = [failure]
    sleeps = []
    with pytest.raises(NodeWriteError) as err:
        run(api, {GPU: 1}, label_selector="lab=yes", policy=RetryPolicy(sleep=sleeps.append))
    assert sleeps == []
    assert [c[0] for c in api.calls if c[1] == "lab-node-1"] == ["patch"]
    by_name = {r["name"]: r for r in err.value.results}
    assert by_name["lab-node-0"]["changed"] and "error" not in by_name["lab-node-0"]
    assert by_name["lab-node-1"]["error"] == str(failure)


def test_retries_are_bounded():
    api = lab(1)
    api.patch_failures["lab-node-0"] = [NodeApiError(409, "the object has been modified")] * 10
    with pytest.raises(NodeWriteError) as err:
        run(api, {GPU: 1}, names=["lab-node-0"], policy=RetryPolicy(attempts=3, sleep=lambda _s: None))
    assert str(err.value) == "could not update 1 of 1 node(s): lab-node-0: HTTP 409: gave up after 3 attempts: the object has been modified"
    assert err.value.results[0]["changed"] is False


def test_a_permanent_error_fails_that_node_only():
    api = lab(3)
    api.patch_failures["lab-node-1"] = [NodeApiError(403, 'nodes "lab-node-1" is forbidden')]
    with pytest.raises(NodeWriteError) as err:
        run(api, {GPU: 1}, label_selector="lab=yes")
    assert str(err.value) == 'could not update 1 of 3 node(s): lab-node-1: HTTP 403: nodes "lab-node-1" is forbidden'
    by_name = {r["name"]: r for r in err.value.results}
    assert by_name["lab-node-0"]["changed"] and by_name["lab-node-2"]["changed"]
    assert by_name["lab-node-1"]["changed"] is False
    assert by_name["lab-node-1"]["error"] == 'HTTP 403: nodes "lab-node-1" is forbidden'
    assert len([c for c in api.calls if c[0] == "patch" and c[1] == "lab-node-1"]) == 1


def test_read_errors_become_a_clear_message():
    api = lab()
    api.patch_failures = {}

    def forbidden(label_selector=None):
        raise NodeApiError(403, "nodes is forbidden: User \"x\" cannot list resource \"nodes\"")

    api.list_nodes = forbidden
    with pytest.raises(NodeResourcesError) as err:
        run(api, {GPU: 1}, label_selector="lab=yes")
    assert str(err.value) == 'cannot read nodes: HTTP 403: nodes is forbidden: User "x" cannot list resource "nodes"'


def test_patches_run_concurrently_within_the_bound():
    api = FakeApi([make_node("n{0:02d}".format(i), labels={"lab": "yes"}) for i in range(24)], patch_delay=0.05)
    results = run(api, {GPU: 1}, label_selector="lab=yes", parallelism=4)
    assert len(results) == 24 and all(r["changed"] for r in results)
    assert 1 < api.max_in_flight <= 4


def test_parallelism_one_is_sequential():
    api = FakeApi([make_node("n{0}".format(i), labels={"lab": "yes"}) for i in range(5)], patch_delay=0.01)
    run(api, {GPU: 1}, label_selector="lab=yes", parallelism=1)
    assert api.max_in_flight == 1


def test_two_concurrent_callers_on_one_node_both_converge():
    api = lab(1)
    barrier = threading.Barrier(2)
    original_list = api.list_nodes

    def synchronized_list(label_selector=None):
        nodes = original_list(label_selector)
        barrier.wait(timeout=5)  # both callers read the same resourceVersion
        return nodes

    api.list_nodes = synchronized_list
    errors = []

    def caller(resource):
        try:
            run(api, {resource: 2}, label_selector="lab=yes")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(r,)) for r in (GPU, FOO)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == []
    capacity = api.nodes["lab-node-0"]["status"]["capacity"]
    assert capacity[GPU] == "2" and capacity[FOO] == "2"
    assert api.kinds().count("get") == 1  # the loser of the race re-read once


def test_retry_delay_grows_and_is_capped():
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    delays = [policy.delay(a) for a in range(1, 10)]
    assert all(0.05 <= d <= 1.0 for d in delays)
    assert max(delays[5:]) >= 0.5


# --------------------------------------------------------------------------
# CoreNodeApi against the real kubernetes client, network stubbed at urllib3
# --------------------------------------------------------------------------


class _Response:
    def __init__(self, status, body, headers=None):
        self.status = status
        self.reason = {200: "OK", 409: "Conflict", 404: "Not Found"}.get(status, "Error")
        self.data = json.dumps(body).encode()
        self.headers = headers or {"content-type": "application/json"}
        self.released = False

    def release_conn(self):
        self.released = True

    def getheaders(self):
        return self.headers

    def getheader(self, name, default=None):
        return self.headers.get(name, default)


@pytest.fixture
def wire():
    from kubernetes import client

    api_client = client.ApiClient(client.Configuration(host="http://127.0.0.1:1"))
    sent = []
    replies = []

    def request(method, url, **kwargs):
        sent.append({"method": method, "url": url, **kwargs})
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    api_client.rest_client.pool_manager.request = request
    return CoreNodeApi(api_client), sent, replies


def test_patch_sends_a_json_merge_patch_to_the_status_subresource(wire):
    api, sent, replies = wire
    node = make_node("lab-node-0", capacity={GPU: "8"})
    replies.append(_Response(200, node))
    patch = {"metadata": {"resourceVersion": "1"}, "status": {"capacity": {GPU: "8", FOO: None}}}
    assert api.patch_node_status("lab-node-0", patch) == node
    (req,) = sent
    assert req["method"] == "PATCH"
    assert req["url"] == "http://127.0.0.1:1/api/v1/nodes/lab-node-0/status"
    assert req["headers"]["Content-Type"] == "application/merge-patch+json"
    assert json.loads(req["body"]) == patch  # null survives serialisation
    assert '"example.com/foo": null' in req["body"]


def test_a_route_sends_json_with_the_bearer_token_and_raises_the_api_servers_refusal(wire):
    """cluster_objects.Route, the REST call under CoreNodeApi: no typed API class (their models cost 1.3 s to import)."""
    from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.cluster_objects import ApiCallError, Route, call_json

    api, sent, replies = wire
    api._api_client.configuration.api_key = {"BearerToken": "Bearer t0ken"}
    replies.append(_Response(200, {"kind": "Status"}))
    replies.append(_Response(404, {"kind": "Status", "message": 'nodes "gone" not found'}))
    assert call_json(Route(api._api_client, "POST", "/api/v1/nodes"), {"metadata": {"name": "n"}}) == {"kind": "Status"}
    assert sent[0]["headers"]["Content-Type"] == "application/json"
    assert sent[0]["headers"]["authorization"] == "Bearer t0ken"
    assert json.loads(sent[0]["body"]) == {"metadata": {"name": "n"}}
    with pytest.raises(ApiCallError) as refused:
        call_json(Route(api._api_client, "GET", "/api/v1/nodes/gone"))
    assert refused.value.status == 404 and refused.value.message == 'nodes "gone" not found'


@pytest.mark.parametrize("args, path", [
    (("v1", "nodes"), "/api/v1/nodes"),
    (("v1", "nodes", None, "lab-node-0", "status"), "/api/v1/nodes/lab-node-0/status"),
    (("apps/v1", "deployments", "team-a"), "/apis/apps/v1/namespaces/team-a/deployments"),
    (("resource.k8s.io/v1", "resourceslices", None, "a/b"), "/apis/resource.k8s.io/v1/resourceslices/a%2Fb"),
])
def test_api_path_spells_core_and_group_paths_as_the_api_server_serves_them(args, path):
    from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.cluster_objects import api_path

    assert api_path(*args) == path


def test_get_and_list_decode_raw_json_and_follow_pages(wire):
    api, sent, replies = wire
    replies.append(_Response(200, {"items": [make_node("a")], "metadata": {"continue": "tok"}}))
    replies.append(_Response(200, {"items": [make_node("b")], "metadata": {}}))
    nodes = api.list_nodes("lab=yes")
    assert [n["metadata"]["name"] for n in nodes] == ["a", "b"]
    assert "labelSelector=lab%3Dyes" in sent[0]["url"] and "limit=500" in sent[0]["url"]
    assert "continue=tok" in sent[1]["url"]
    replies.append(_Response(200, make_node("a", capacity={GPU: "1k"})))
    assert api.get_node("a")["status"]["capacity"][GPU] == "1k"  # spelling kept as sent
    assert sent[2]["method"] == "GET" and sent[2]["url"].endswith("/api/v1/nodes/a")


def test_api_errors_are_translated(wire):
    api, _sent, replies = wire
    replies.append(_Response(409, {"kind": "Status", "message": "the object has been modified", "code": 409}))
    with pytest.raises(NodeApiError) as err:
        api.patch_node_status("a", {"status": {}})
    assert (err.value.status, err.value.message, err.value.retryable) == (409, "the object has been modified", True)

    replies.append(_Response(404, {"kind": "Status", "message": 'nodes "a" not found', "code": 404}))
    with pytest.raises(NodeApiError) as err:
        api.get_node("a")
    assert (err.value.status, err.value.retryable) == (404, False)

    replies.append(_Response(429, {"message": "slow down"}, headers={"Retry-After": "2"}))
    with pytest.raises(NodeApiError) as err:
        api.get_node("a")
    assert (err.value.status, err.value.retry_after, err.value.retryable) == (429, 2.0, False)


def test_connection_errors_are_named_and_final_at_this_layer(wire):
    import urllib3

    api, _sent, replies = wire
    replies.append(urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")))
    with pytest.raises(NodeApiError) as err:
        api.get_node("a")
    assert err.value.status is None and not err.value.retryable
    assert str(err.value).startswith("cannot reach the API server (kube-apiserver) at http://127.0.0.1:1: ")


# --------------------------------------------------------------------------
# nodes: per-node resources, removals and labels in one call
# --------------------------------------------------------------------------

CONFIG = "nvidia.com/device-plugin.config"


def test_nodes_entries_label_advertise_and_remove_in_one_call():
    api = FakeApi([make_node("a", capacity={GPU: "1"}, labels={"keep": "me", "old": "x"}), make_node("b")])
    entries = [
        {"name": "a", "resources": {FOO: 7}, "remove_resources": [GPU], "labels": {CONFIG: "shared", "old": None}},
        {"name": "b", "labels": {CONFIG: "mps"}},
    ]
    results = apply_node_resources(api, nodes=entries, policy=NO_SLEEP)
    # a: labels, then status; b: labels only (the two nodes are written concurrently)
    assert [c[:2] for c in api.calls if c[0] != "list"].count(("patch-labels", "a")) == 1
    assert [c[1] for c in api.calls if c[1] == "a"] == ["a", "a"] and [c[0] for c in api.calls if c[1] == "a"] == ["patch-labels", "patch"]
    assert sorted(api.kinds()) == ["list", "patch", "patch-labels", "patch-labels"]
    assert api.nodes["a"]["metadata"]["labels"] == {"keep": "me", CONFIG: "shared"}
    assert api.nodes["a"]["status"]["capacity"] == dict(BASE, **{FOO: "7"})
    assert results[0]["before"] == {"capacity": {GPU: "1"}, "allocatable": {}, "labels": {"old": "x"}}
    assert results[0]["after"] == {"capacity": {FOO: "7"}, "allocatable": {FOO: "7"}, "labels": {CONFIG: "shared"}}
    assert results[1] == {"name": "b", "changed": True, "before": {"capacity": {}, "allocatable": {}, "labels": {}},
                          "after": {"capacity": {}, "allocatable": {}, "labels": {CONFIG: "mps"}}}
    again = apply_node_resources(api, nodes=entries, policy=NO_SLEEP)
    assert [r["changed"] for r in again] == [False, False]
    assert api.kinds()[4:] == ["list"]


def test_nodes_check_mode_predicts_labels_without_writing():
    api = FakeApi([make_node("a", labels={CONFIG: "none"})])
    results = apply_node_resources(api, nodes=[{"name": "a", "labels": {CONFIG: "shared"}}], check_mode=True)
    assert results[0]["changed"] and results[0]["after"]["labels"] == {CONFIG: "shared"}
    assert api.kinds() == ["get"] and api.nodes["a"]["metadata"]["labels"] == {CONFIG: "none"}


def test_nodes_label_real_nodes_but_refuse_their_resources():
    api = FakeApi([make_node("real", kwok=False), make_node("fake")])
    apply_node_resources(api, nodes=[{"name": "real", "labels": {CONFIG: "shared"}}, {"name": "fake", "resources": {GPU: 2}}])
    assert api.nodes["real"]["metadata"]["labels"] == {CONFIG: "shared"}
    with pytest.raises(NodeResourcesError, match="refusing to change node\\(s\\) real"):
        apply_node_resources(api, nodes=[{"name": "real", "labels": {CONFIG: "x"}, "resources": {GPU: 2}}, {"name": "fake", "labels": {CONFIG: "x"}}])
    assert api.nodes["fake"]["metadata"]["labels"] == {}, "nothing is written when one entry is refused"


def test_nodes_missing_node_names_the_option_and_writes_nothing():
    api = FakeApi([make_node("a")])
    with pytest.raises(NodeResourcesError) as err:
        apply_node_resources(api, nodes=[{"name": "a", "labels": {CONFIG: "x"}}, {"name": "ghost", "labels": {CONFIG: "x"}}])
    assert str(err.value).startswith("nodes: node(s) not found: ghost.")
    assert "patch-labels" not in api.kinds()


def test_nodes_label_conflict_is_retried_on_fresh_data():
    api = FakeApi([make_node("a")])
    original = api.patch_node
    state = {"first": True}

    def racing(name, patch):
        if state.pop("first", False):
            api.bump(name)
        return original(name, patch)

    api.patch_node = racing
    results = apply_node_resources(api, nodes=[{"name": "a", "labels": {CONFIG: "x"}, "resources": {GPU: 1}}], policy=NO_SLEEP)
    assert results[0]["changed"] and api.nodes["a"]["metadata"]["labels"] == {CONFIG: "x"}
    assert api.kinds() == ["get", "patch-labels", "get", "patch-labels", "patch"]


@pytest.mark.parametrize("entries, message", [
    ([], "nodes: needs a non-empty list"),
    (["a"], "nodes[0]: 'a' is not a mapping"),
    ([{"name": "a"}], "nodes[0]: names no change"),
    ([{"name": "a", "labels": {CONFIG: "x"}}, {"name": "a", "labels": {CONFIG: "y"}}], "nodes[1].name: a is listed twice"),
    ([{"name": "a", "labels": {CONFIG: 2}}], 'nodes[0].labels["nvidia.com/device-plugin.config"]: 2 is a int, not a string; quote it'),
    ([{"name": "a", "labels": {CONFIG: "a b"}}], "is not a valid label value"),
    ([{"name": "a", "labels": {"Bad/key": "x"}}], 'nodes[0].labels: "Bad/key" is not a valid label key'),
    ([{"name": "a", "remove_resources": ["cpu"]}], 'nodes[0].remove_resources: "cpu" is not an extended resource name'),
    ([{"name": "a", "resources": {GPU: "8"}}], 'nodes[0].resources["example.com/gpu"]: \'8\' is a string'),
    ([{"name": "a", "resources": {GPU: 1}, "remove_resources": [GPU]}], "example.com/gpu is both in resources and in remove_resources"),
    ([{"name": "a", "colour": "red", "labels": {CONFIG: "x"}}], "nodes[0]: unknown key(s) colour"),
])
def test_nodes_entries_are_validated_before_any_read(entries, message):
    api = FakeApi([make_node("a")])
    with pytest.raises(NodeResourcesError) as err:
        apply_node_resources(api, nodes=entries)
    assert message in str(err.value)
    assert api.calls == []


def test_nodes_exclude_resources_and_state():
    with pytest.raises(NodeResourcesError, match="resources and state apply to name and label_selector only"):
        apply_node_resources(FakeApi([]), resources={GPU: 1}, nodes=[{"name": "a", "labels": {CONFIG: "x"}}])
