# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import time

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_yaml import ManifestError
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_checks import manifest_fix, manifest_objects
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.preflight import (
    missing_node_errors,
    quota_shrink_errors,
    team_fill_errors,
)

POD = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: team-a\nspec:\n  containers: [{name: c, image: pause}]\n"
PLAIN_FIX = "Fix: write the manifest as plain YAML Kubernetes objects (no tags, no anchors or aliases that multiply content)"


def billion_laughs(levels=9):
    lines = ['  l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append("  l%d: &l%d [%s]" % (level, level, ", ".join(["*l%d" % (level - 1)] * 9)))
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n" + "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# manifest_objects


def test_objects_in_file_order_without_empty_documents():
    text = "---\n" + POD + "---\n---\napiVersion: v1\nkind: Namespace\nmetadata: {generateName: ns-}\n"
    objects = manifest_objects(text)
    assert [obj["kind"] for obj in objects] == ["Pod", "Namespace"]
    assert objects[0]["spec"]["containers"][0]["name"] == "c"
    assert manifest_objects("") == [] and manifest_objects(b"---\n") == []


def test_small_aliases_are_fine():
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: &l {x: y}, annotations: *l}\n"
    assert manifest_objects(text)[0]["metadata"]["annotations"] == {"x": "y"}


def test_the_lab_configmap_passes():
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: device-plugin-configs\n  namespace: gpu-share\ndata:\n  shared: |-\n    version: v1\n"
    assert manifest_objects(text)[0]["data"] == {"shared": "version: v1"}


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param(POD + "---\napiVersion: v1\nkind: Pod\nspec: [\n",
                     "document 2, line 12: invalid YAML: while parsing a flow node did not find expected node content. Fix: correct the YAML "
                     "syntax at that line", id="malformed"),
        pytest.param(POD + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: !!python/object/apply:os.system ['id']\n",
                     "document 2, line 12: YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed (only plain YAML is read; "
                     "tags that build objects are refused). Fix: remove the tag and write a plain value", id="python-tag"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: !Ref x\n",
                     "document 1, line 3: YAML tag '!Ref' is not allowed (only plain YAML is read; tags that build objects are refused). "
                     "Fix: remove the tag and write a plain value", id="custom-tag"),
        pytest.param(POD + "---\n" + billion_laughs(),
                     "document 2, line 9: YAML aliases expand the manifest to more than 1000000 values (an alias bomb?); refusing to write or "
                     "apply it. " + PLAIN_FIX, id="billion-laughs"),
        pytest.param("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: &d {x: *d}\n",
                     "document 1, line 1: a YAML alias refers to its own anchor (a recursive structure cannot be sent to the API server). "
                     + PLAIN_FIX, id="recursive-alias"),
        pytest.param("a: " + "[" * 300 + "]" * 300, "document 1, line 1: nested deeper than 200 levels; refusing to read it. " + PLAIN_FIX, id="deep"),
        pytest.param(b"kind: Pod\n\xff\n", "not UTF-8 text (byte 10: invalid start byte). Fix: save the manifest as UTF-8 text", id="not-utf8"),
        pytest.param(POD + "---\n- a\n- b\n",
                     "document 2: the document is a list, not a Kubernetes object. Fix: write a mapping with apiVersion, kind and metadata.name",
                     id="list-document"),
        pytest.param("just text\n",
                     "document 1: the document is a str, not a Kubernetes object. Fix: write a mapping with apiVersion, kind and metadata.name",
                     id="scalar-document"),
        pytest.param("kind: Pod\nmetadata: {name: p}\n",
                     "document 1: apiVersion is missing or not a string. Fix: give every object apiVersion and kind, e.g. apiVersion: v1, kind: Pod",
                     id="no-api-version"),
        pytest.param("apiVersion: v1\nkind: 3\nmetadata: {name: p}\n",
                     "document 1: kind is missing or not a string. Fix: give every object apiVersion and kind, e.g. apiVersion: v1, kind: Pod",
                     id="kind-number"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: [p]\n",
                     "document 1: metadata is missing or not a mapping. Fix: add a metadata mapping holding the object's name (metadata.name)",
                     id="metadata-list"),
        pytest.param(POD + "---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: team-a}\n",
                     "document 2: metadata.name is missing. Fix: name every Pod (metadata.name)", id="no-name"),
    ],
)
def test_bad_manifests_are_refused_with_the_fix(text, message):
    with pytest.raises(ManifestError) as info:
        manifest_objects(text)
    assert str(info.value) == message


def test_alias_bomb_is_refused_quickly():
    start = time.monotonic()
    with pytest.raises(ManifestError):
        manifest_objects(billion_laughs(levels=30))
    assert time.monotonic() - start < 5


def test_the_value_budget_is_an_option():
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: '1', b: '2'}\n"
    assert manifest_objects(text, max_values=20)
    with pytest.raises(ManifestError) as info:
        manifest_objects(text, max_values=5)
    assert "more than 5 values" in str(info.value)


@pytest.mark.parametrize(
    "problem, fix",
    [
        ("invalid YAML: x", "Fix: correct the YAML syntax at that line"),
        ("YAML tag '!x' is not allowed", "Fix: remove the tag and write a plain value"),
        ("not UTF-8 text", "Fix: save the manifest as UTF-8 text"),
        ("spec.containers[0] must be a mapping", PLAIN_FIX),
    ],
)
def test_manifest_fix(problem, fix):
    assert manifest_fix(problem) == fix


# ---------------------------------------------------------------------------
# missing_node_errors

CLUSTER = [{"metadata": {"name": "lab-node-%d" % index}} for index in range(3)]


def test_every_node_exists():
    assert missing_node_errors([{"name": "lab-node-0"}, "lab-node-2"], CLUSTER) == []
    assert missing_node_errors([], []) == []


@pytest.mark.parametrize(
    "wanted, existing, message",
    [
        pytest.param(
            [{"name": "lab-node-0"}, {"name": "lab-node-9"}],
            CLUSTER,
            "gpushare_nodes: node lab-node-9 does not exist in the cluster (it has lab-node-0, lab-node-1, lab-node-2). Fix: create it "
            "(playbooks/cluster.yml creates the lab cluster's nodes) or remove it from gpushare_nodes; nothing was written",
            id="one",
        ),
        pytest.param(
            ["lab-node-8", "lab-node-9", "lab-node-8"],
            ["lab-node-0"],
            "gpushare_nodes: nodes lab-node-8, lab-node-9 do not exist in the cluster (it has lab-node-0). Fix: create them "
            "(playbooks/cluster.yml creates the lab cluster's nodes) or remove them from gpushare_nodes; nothing was written",
            id="several-once-each",
        ),
        pytest.param(
            ["lab-node-0"],
            [],
            "gpushare_nodes: node lab-node-0 does not exist in the cluster (it has no nodes). Fix: create it "
            "(playbooks/cluster.yml creates the lab cluster's nodes) or remove it from gpushare_nodes; nothing was written",
            id="empty-cluster",
        ),
    ],
)
def test_missing_nodes_are_named(wanted, existing, message):
    assert missing_node_errors(wanted, existing, "gpushare_nodes") == [message]


# ---------------------------------------------------------------------------
# quota_shrink_errors


def quota(used, hard="2"):
    return {
        "metadata": {"name": "gpu-quota", "namespace": "team-a"},
        "spec": {"hard": {"requests.nvidia.com/gpu": hard}},
        "status": {"hard": {"requests.nvidia.com/gpu": hard}, "used": used},
    }


@pytest.mark.parametrize(
    "live, hard",
    [
        pytest.param(None, {"requests.nvidia.com/gpu": 1}, id="no-quota-yet"),
        pytest.param({}, {"requests.nvidia.com/gpu": 0}, id="empty"),
        pytest.param(quota({"requests.nvidia.com/gpu": "2"}), {"requests.nvidia.com/gpu": 2}, id="equal"),
        pytest.param(quota({"requests.nvidia.com/gpu": "1"}), {"requests.nvidia.com/gpu": "1"}, id="string-limit"),
        pytest.param(quota({"requests.nvidia.com/gpu": "2"}), {"requests.nvidia.com/gpu": 4}, id="growing"),
        pytest.param(quota({}), {"requests.nvidia.com/gpu": 1}, id="no-status-yet"),
        pytest.param(quota({"requests.nvidia.com/gpu": "2"}), {"requests.nvidia.com/mig-1g.10gb": 1}, id="other-key"),
    ],
)
def test_quota_that_holds_what_is_in_use(live, hard):
    assert quota_shrink_errors(live, hard) == []


def test_quota_below_use_is_refused_with_the_fix():
    assert quota_shrink_errors(quota({"requests.nvidia.com/gpu": "2"}), {"requests.nvidia.com/gpu": 1}, "team_quota_gpus", "team_quota_allow_shrink") == [
        "team_quota_gpus: quota team-a/gpu-quota would limit requests.nvidia.com/gpu to 1, but 2 are already in use (now hard 2): the API "
        "server keeps the admitted Pods and refuses every new one until usage drops. Fix: delete Pods until at most 1 is in use, set "
        "team_quota_gpus to 2 or more, or set team_quota_allow_shrink: true to lower it anyway"
    ]


def test_every_key_below_use_is_reported_and_quantities_compare_by_value():
    live = quota({"requests.nvidia.com/gpu": "1k", "requests.nvidia.com/mig-1g.10gb": "1"}, hard="2k")
    errors = quota_shrink_errors(live, {"requests.nvidia.com/gpu": 999, "requests.nvidia.com/mig-1g.10gb": 0})
    assert len(errors) == 2
    assert errors[0].startswith("hard: quota team-a/gpu-quota would limit requests.nvidia.com/gpu to 999, but 1000 are already in use (now hard 2k)")
    assert "requests.nvidia.com/mig-1g.10gb to 0, but 1 is already in use" in errors[1] and "set allow_shrink: true" in errors[1]


@pytest.mark.parametrize("hard, message", [
    (["requests.nvidia.com/gpu"], r"^hard must be a mapping of quota key to limit, e\.g\. \{'requests\.nvidia\.com/gpu': 2\}$"),
    ({"requests.nvidia.com/gpu": "four"}, r"^hard\['requests\.nvidia\.com/gpu'\]: 'four' is not a quantity$"),
])
def test_bad_limits_are_programming_errors(hard, message):
    with pytest.raises(ValueError, match=message):
        quota_shrink_errors(quota({}), hard)


# team_fill_errors: one rule for the team_quota role and the lab's preflight


@pytest.mark.parametrize("gpus, pods, message", [
    (2, [{"name": "a"}, {"name": "b"}], None),
    (2, [], "team_quota_pods: 0 Pods of one unit each, but team_quota_gpus is 2: the team must fill its quota exactly so that "
            "team-over is the Pod it refuses (with fewer Pods it would be admitted, with more a team Pod would be refused). "
            "Fix: list 2 team Pods, or set team_quota_gpus: 0."),
    (1, [{"name": "a"}, {"name": "b"}], "team_quota_pods: 2 Pods of one unit each, but team_quota_gpus is 1"),
    (0, [], "team_quota_gpus: 0 is not a whole number of 1 or more. Fix: set the GPU slots the team may request, e.g. team_quota_gpus: 2."),
    ("2", [], 'team_quota_gpus: "2" is not a whole number of 1 or more.'),
    (True, [], "team_quota_gpus: true is not a whole number"),
])
def test_team_fill_errors(gpus, pods, message):
    errors = team_fill_errors(gpus, pods, "team-over", "team_quota_gpus", "team_quota_pods", "team_quota_gpus")
    if message is None:
        assert errors == []
    else:
        assert len(errors) == 1 and errors[0].startswith(message)


def test_team_fill_errors_refuses_pods_that_are_not_a_list():
    with pytest.raises(ValueError, match="pods: must be a list of Pods"):
        team_fill_errors(2, "team-a-job-1", "team-over")
