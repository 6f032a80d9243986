# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils import names as gpu_names
from ansible_collections.gpushare.k8s.plugins.module_utils.requests import gpu_requests
from ansible_collections.gpushare.k8s.plugins.module_utils.requests import check_request
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import manifest_yaml
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import quantity
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.check_request import main
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.gpu_requests import find_offenders
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_yaml import ManifestError, load_documents


def container(name="main", limits=None, requests=None):
    item = {"name": name, "image": "busybox"}
    resources = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    if resources:
        item["resources"] = resources
    return item


def pod_spec(*containers, init=(), ephemeral=()):
    spec = {"containers": list(containers) or [container()]}
    if init:
        spec["initContainers"] = list(init)
    if ephemeral:
        spec["ephemeralContainers"] = list(ephemeral)
    return spec


def gpus(count):
    return {"nvidia.com/gpu": count}


def workload(kind, spec, name="w"):
    """Wrap a Pod spec the way ``kind`` holds it."""
    template = {"metadata": {"labels": {"app": name}}, "spec": spec}
    bodies = {
        "Pod": {"spec": spec},
        "PodTemplate": {"template": template},
        "CronJob": {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}},
    }
    body = bodies.get(kind, {"spec": {"template": template}})
    result = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}
    result.update(body)
    return result


def dump(*documents):
    return yaml.safe_dump_all(documents, sort_keys=False)


def both_views(documents):
    """Check objects and their YAML text; both must agree."""
    from_objects = find_offenders(list(documents))
    from_text = find_offenders(dump(*documents))
    assert from_objects == from_text
    return from_text


def offender(kind, name, container_name, count, document=0, resource="nvidia.com/gpu"):
    return {"document": document, "kind": kind, "name": name, "container": container_name, "resource": resource, "count": count}


# ---------------------------------------------------------------------------
# what is counted


@pytest.mark.parametrize("kind", ["Pod", "PodTemplate", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job", "CronJob"])
def test_every_workload_kind(kind):
    assert kind in gpu_requests.WORKLOAD_KINDS
    documents = [workload(kind, pod_spec(container("trainer", limits=gpus(2))), name="gpu-%s" % kind.lower())]
    assert both_views(documents) == [offender(kind, "gpu-%s" % kind.lower(), "trainer", 2)]


def test_within_the_limit_passes():
    assert both_views([workload("Pod", pod_spec(container(limits=gpus(1), requests=gpus(1))))]) == []


def test_pod_without_gpu_passes():
    assert both_views([workload("Pod", pod_spec(container(limits={"cpu": "2", "memory": "1Gi"})))]) == []


def test_other_kinds_are_ignored():
    documents = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"containers": "x"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"template": {"spec": pod_spec(container(limits=gpus(5)))}}},
    ]
    assert both_views(documents) == []


def test_an_object_without_kind_is_refused_as_kubectl_refuses_it():
    # kubectl: 'Object 'Kind' is missing'; objects given as data are skipped (kubernetes.core refuses them too)
    document = {"metadata": {"name": "no-kind"}, "spec": pod_spec(container(limits=gpus(5)))}
    assert find_offenders([document]) == []
    with pytest.raises(ManifestError, match=r"^document 1, line 1: the document has no kind, and kubectl refuses it "
                                            r"\(\"Object 'Kind' is missing\"\)\. Fix: give the object its kind$"):
        find_offenders(dump(document))


def test_limits_and_requests_report_the_larger():
    documents = [
        workload("Pod", pod_spec(container("a", limits=gpus(1), requests=gpus(2))), name="p1"),
        workload("Pod", pod_spec(container("b", limits=gpus(3), requests=gpus(2))), name="p2"),
        workload("Pod", pod_spec(container("c", requests=gpus(2))), name="p3"),
    ]
    assert both_views(documents) == [offender("Pod", "p1", "a", 2), offender("Pod", "p2", "b", 3, document=1), offender("Pod", "p3", "c", 2, document=2)]


def test_init_and_ephemeral_containers():
    spec = pod_spec(
        container("main", limits=gpus(1)),
        init=[container("warmup", limits=gpus(2))],
        ephemeral=[container("debug", requests=gpus(4))],
    )
    assert both_views([workload("Deployment", spec, name="web")]) == [
        offender("Deployment", "web", "warmup", 2),
        offender("Deployment", "web", "debug", 4),
    ]


@pytest.mark.parametrize("value, count", [("2", 2), ("+3", 3), ("2.0", 2), (2, 2), (2.0, 2), ("1", None), ("0", None)])
def test_quantity_forms(value, count):
    expected = [offender("Pod", "w", "main", count)] if count else []
    assert find_offenders([workload("Pod", pod_spec(container(limits=gpus(value))))]) == expected
    assert find_offenders(dump(workload("Pod", pod_spec(container(limits=gpus(value)))))) == expected


def test_integer_string_in_yaml_text():
    text = 'kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n      resources:\n        limits:\n          nvidia.com/gpu: "2"\n'
    assert find_offenders(text) == [offender("Pod", "p", "c", 2)]


def test_several_containers_and_documents_with_empty_ones():
    text = "---\n---\n" + dump(
        workload("Pod", pod_spec(container("a", limits=gpus(2)), container("b", limits=gpus(1)), container("c", limits=gpus(3))), name="multi")
    )
    # the first "---" opens an empty document, the second starts the Pod: indexes count empty documents
    assert find_offenders(text) == [offender("Pod", "multi", "a", 2, document=1), offender("Pod", "multi", "c", 3, document=1)]


def test_resources_and_max_options():
    spec = pod_spec(container("a", limits={"nvidia.com/gpu": 2, "nvidia.com/gpu.shared": 3, "nvidia.com/mig-1g.10gb": 2}))
    documents = [workload("Pod", spec, name="p")]
    assert find_offenders(documents, resources=("nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb")) == [
        offender("Pod", "p", "a", 3, resource="nvidia.com/gpu.shared"),
        offender("Pod", "p", "a", 2, resource="nvidia.com/mig-1g.10gb"),
    ]
    assert find_offenders(documents, resources="nvidia.com/gpu", max_per_container=2) == []
    assert find_offenders(documents, max_per_container=0) == [offender("Pod", "p", "a", 2)]


@pytest.mark.parametrize(
    "resources, max_per_container, message",
    [
        ((), 1, "resources must be a non-empty list of resource names, e.g. ['nvidia.com/gpu']"),
        (("nvidia.com/gpu", 3), 1, "resources must be a non-empty list of resource names, e.g. ['nvidia.com/gpu']"),
        (("nvidia.com/gpu",), -1, "max_per_container must be a non-negative integer, got -1"),
        (("nvidia.com/gpu",), True, "max_per_container must be a non-negative integer, got True"),
    ],
)
def test_bad_options(resources, max_per_container, message):
    with pytest.raises(ValueError) as info:
        find_offenders([], resources=resources, max_per_container=max_per_container)
    assert str(info.value) == message


def test_unnamed_workload_and_container():
    documents = [{"kind": "Pod", "spec": {"containers": [{"resources": {"limits": gpus(2)}}]}}]
    assert both_views(documents) == [offender("Pod", "", "containers[0]", 2)]


def test_generate_name_is_used_when_there_is_no_name():
    documents = [{"kind": "Job", "metadata": {"generateName": "train-"}, "spec": {"template": {"spec": pod_spec(container(limits=gpus(2)))}}}]
    assert both_views(documents) == [offender("Job", "train-", "main", 2)]


def test_list_kinds():
    documents = [
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [workload("Pod", pod_spec(container("a", limits=gpus(2))), name="p"), {"apiVersion": "v1", "kind": "ConfigMap"}, None,
                      dict(workload("StatefulSet", pod_spec(container("db", limits=gpus(2))), name="db"), apiVersion="apps/v1")],
        },
        {"apiVersion": "v1", "kind": "PodList", "items": [{"metadata": {"name": "typed"}, "spec": pod_spec(container("t", limits=gpus(3)))}]},
        {"apiVersion": "apps/v1", "kind": "DeploymentList", "items": [workload("Deployment", pod_spec(container("d", limits=gpus(4))), name="dep")]},
    ]
    assert both_views(documents) == [
        offender("Pod", "p", "a", 2),
        offender("StatefulSet", "db", "db", 2),
        offender("Pod", "typed", "t", 3, document=1),
        offender("Deployment", "dep", "d", 4, document=2),
    ]


POD_ASKING_8 = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big"}, "spec": pod_spec(container("big", limits=gpus(8)))}


@pytest.mark.parametrize("kind, api_version", [("Pod", "v1"), ("ConfigMap", "v1"), ("Deployment", "apps/v1"), ("Job", "batch/v1"),
                                               ("Service", "v1"), ("List", "v1")])
def test_kubectl_sends_the_items_of_any_object_holding_items(kind, api_version):
    # kubectl create --dry-run=client: a Pod (or ConfigMap, ...) holding items is sent as its items, never as itself
    document = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "small"}, "spec": pod_spec(container("small", limits=gpus(1))),
                "items": [POD_ASKING_8]}
    assert find_offenders(dump(document)) == [offender("Pod", "big", "big", 8)]
    # as data, either may reach the API server (kubernetes.core sends the object unless its kind ends in List)
    assert find_offenders([document]) == [offender("Pod", "big", "big", 8)]


def test_kind_less_items_take_the_lists_kind_without_list():
    deployment = workload("Deployment", pod_spec(container("d", limits=gpus(8))), name="dd")
    del deployment["kind"], deployment["apiVersion"]
    document = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "items": [deployment]}
    assert find_offenders(dump(document)) == [offender("Deployment", "dd", "d", 8)]


def test_items_null_at_the_top_sends_nothing_and_elsewhere_is_a_field():
    pod = dict(POD_ASKING_8, items=None)
    assert find_offenders(dump(pod)) == []  # kubectl: "no objects passed to create"
    listed = {"apiVersion": "v1", "kind": "List", "items": [pod]}
    assert find_offenders(dump(listed)) == [offender("Pod", "big", "big", 8)]  # kubectl sends the Pod, items and all


@pytest.mark.parametrize(
    "document, message",
    [
        pytest.param({"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "List", "items": [POD_ASKING_8]}]},
                     "document 1, line 7: items[0].items: a list inside a list's items, which kubectl refuses; put the objects in one list",
                     id="list-in-list"),
        pytest.param({"apiVersion": "v1", "kind": "List", "items": [{"metadata": {"name": "x"}}]},
                     "document 1, line 4: items[0] has no kind, and kubectl refuses it (\"Object 'Kind' is missing\"). Fix: give the object "
                     "its kind (an item without kind and apiVersion takes the list's kind without 'List')", id="kind-less-item-of-a-list"),
        pytest.param({"apiVersion": "v1", "kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "x"}}]},
                     "document 1, line 4: items[0] has no apiVersion, and kubectl refuses it (\"Object 'apiVersion' is missing\"). Fix: give "
                     "the object its apiVersion (an item without kind and apiVersion takes the list's kind without 'List')", id="item-without-apiversion"),
        pytest.param({"apiVersion": "v1", "kind": "Pod", "items": "abc"},
                     "document 1, line 3: items must be a list (kubectl reads any object holding items as a list of objects)", id="items-string"),
    ],
)
def test_lists_kubectl_refuses_are_refused(document, message):
    with pytest.raises(ManifestError) as info:
        find_offenders(dump(document))
    assert str(info.value) == message


def test_builtin_kind_names_in_other_groups_are_searched():
    # a Volcano Job holds its Pods under spec.tasks[].template, not at batch/v1 Job's spec.template
    volcano = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "vc"},
               "spec": {"tasks": [{"name": "worker", "replicas": 2, "template": {"spec": pod_spec(container("w", limits=gpus(4)))}}]}}
    wrong_group = {"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": "odd"}, "spec": {"x": pod_spec(container("o", limits=gpus(3)))}}
    assert both_views([volcano, wrong_group]) == [offender("Job", "vc", "w", 4), offender("Pod", "odd", "o", 3, document=1)]


def test_lists_nested_too_deep():
    document = {"kind": "List", "items": []}
    current = document
    for _level in range(gpu_requests.MAX_LIST_DEPTH):
        child = {"kind": "List", "items": []}
        current["items"].append(child)
        current = child
    with pytest.raises(ManifestError) as info:
        find_offenders([document])
    assert str(info.value) == "document 1: Lists nested deeper than 10 levels"


@pytest.mark.parametrize(
    "text, problem",
    [
        pytest.param(
            # !!binary is decoded by kubectl: the key is nvidia.com/gpu, the value 2.
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits: {!!binary bnZpZGlhLmNvbS9ncHU=: 2}\n",
            "line 6: the YAML tag '!!binary' is not allowed: kubectl decodes some tags (!!binary) and sends others as plain text, so what "
            "it sends is not what is written. Fix: remove the tag and write the plain value",
            id="binary-key",
        ),
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits: {nvidia.com/gpu: !!binary Mg==}\n",
            "line 6: the YAML tag '!!binary' is not allowed: kubectl decodes some tags (!!binary) and sends others as plain text, so what "
            "it sends is not what is written. Fix: remove the tag and write the plain value",
            id="binary-value",
        ),
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits: {nvidia.com/gpu: !!str 2}\n",
            "line 6: the YAML tag '!!str' is not allowed: kubectl decodes some tags (!!binary) and sends others as plain text, so what "
            "it sends is not what is written. Fix: remove the tag and write the plain value",
            id="core-tag",
        ),
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits: {nvidia.com/gpu: ! 2}\n",
            "line 6: the YAML tag '!' is not allowed: kubectl decodes some tags (!!binary) and sends others as plain text, so what "
            "it sends is not what is written. Fix: remove the tag and write the plain value",
            id="non-specific-tag",
        ),
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits: {nvidia.com/gpu: 1, nvidia.com/gpu: 2}\n",
            "line 6: the repeated key 'nvidia.com/gpu' is not allowed: YAML readers disagree on which value wins. Fix: keep one "
            "'nvidia.com/gpu' key per mapping",
            id="repeated-key",
        ),
        pytest.param(
            # 10 and "10" are one key once kubectl turns keys into JSON strings
            "kind: Pod\nmetadata:\n  labels: {10: a, '10': b}\n",
            "line 3: the repeated key '10' is not allowed: YAML readers disagree on which value wins. Fix: keep one '10' key per mapping",
            id="repeated-key-after-conversion",
        ),
        pytest.param(
            "kind: Pod\nmetadata: {? [a]: b}\n",
            "line 2: a mapping or list used as a key is not allowed: kubectl refuses it. Fix: use a string key",
            id="list-key",
        ),
        pytest.param("kind: Pod\nmetadata: {~: b}\n", "line 2: a null key ('~') is not allowed: kubectl refuses it. Fix: use a string key", id="null-key"),
        pytest.param(
            "kind: Pod\nmetadata: {annotations: {a: .nan}}\n",
            "line 2: the value .nan (not a number JSON can carry) is not allowed: kubectl cannot send it as JSON. Fix: quote it, or write a number",
            id="nan",
        ),
    ],
)
def test_constructs_kubectl_reads_differently_are_refused(text, problem):
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert str(info.value) == "document 1, " + problem


@pytest.mark.parametrize(
    "text, line, problem",
    [
        pytest.param(
            "--- {kind: Pod}\n", 1,
            "a line starting with '---' followed by '{kind: Pod}': kubectl splits documents at every line starting with '---' and refuses "
            "text after it. Fix: put the document on the lines after '---'",
            id="text-after-separator",
        ),
        pytest.param(
            "kind: ConfigMap\n---#x\nkind: Pod\n", 2,
            "a line starting with '---' followed by '#x': kubectl splits documents at every line starting with '---' and refuses text "
            "after it. Fix: put the document on the lines after '---'",
            id="comment-glued-to-separator",
        ),
        pytest.param(
            "kind: ConfigMap\n...\nkind: Pod\n", 2,
            "a '...' document end is not allowed: kubectl reads only the first document of each '---' section and ignores the rest. "
            "Fix: separate documents with '---' lines only",
            id="document-end",
        ),
        pytest.param(
            "%YAML 1.1\n---\nkind: Pod\n", 1,
            "a YAML directive ('%' at the start of a line) is not allowed: kubectl reads only the first document of each '---' section "
            "and ignores the rest. Fix: separate documents with '---' lines only",
            id="directive",
        ),
    ],
)
def test_document_boundaries_kubectl_reads_differently_are_refused(text, line, problem):
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert str(info.value) == "line %d: %s" % (line, problem)


def test_json_followed_by_more_is_refused_and_one_json_object_is_read():
    pod = '{"kind": "Pod", "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}'
    assert find_offenders(pod) == [offender("Pod", "", "a", 2)]
    with pytest.raises(ManifestError) as info:
        find_offenders(pod + "\n---\nkind: Pod\n")
    assert str(info.value).startswith("document 1: a JSON object followed by more input: kubectl reads it as a stream of JSON objects")


# ---------------------------------------------------------------------------
# malformed input


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits:\n        nvidia.com/gpu: 1.5\n",
            "document 1, line 7: spec.containers[0].resources.limits[nvidia.com/gpu] is '1.5', not a whole "
            "number (extended resources are requested in whole units)",
            id="fraction",
        ),
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      requests:\n        nvidia.com/gpu: 500m\n",
            "document 1, line 7: spec.containers[0].resources.requests[nvidia.com/gpu] is '500m', not a whole "
            "number (extended resources are requested in whole units)",
            id="milli",
        ),
        pytest.param(
            "---\nkind: Service\n---\nkind: Deployment\nspec:\n  template:\n    spec:\n      initContainers:\n   "
            "   - name: a\n        resources:\n          limits:\n            nvidia.com/gpu: -1\n",
            "document 2, line 12: spec.template.spec.initContainers[0].resources.limits[nvidia.com/gpu] is '-1', negative (the API server refuses it)",
            id="negative",
        ),
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits:\n        nvidia.com/gpu: [2]\n",
            "document 1, line 7: spec.containers[0].resources.limits[nvidia.com/gpu] is a list, not a quantity (the API server refuses it)",
            id="list",
        ),
        pytest.param("kind: Pod\nspec:\n  containers: {name: a}\n", "document 1, line 3: spec.containers must be a list", id="containers-mapping"),
        pytest.param("kind: Pod\nspec:\n  containers: [a]\n", "document 1, line 3: spec.containers[0] must be a mapping", id="container-string"),
        pytest.param("kind: Pod\nspec: [1]\n", "document 1, line 2: spec must be a mapping", id="spec-list"),
        pytest.param(
            "kind: Pod\n---\n- a\n- b\n",
            "document 2, line 3: the document is not a Kubernetes object (expected a mapping with kind, metadata, spec)",
            id="list-document",
        ),
        pytest.param("kind: List\nitems: {a: b}\n", "document 1, line 2: items must be a list (kubectl reads any object holding items as a list of "
                     "objects)", id="items-mapping"),
    ],
)
def test_malformed_manifests(text, message):
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert str(info.value) == message


POD_LIMITS = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n%sspec:\n  containers:\n  - {name: c, image: x, resources: {limits: %s}}\n"


# What kubectl create --dry-run=client sends for each (checked with the lab cluster's kubectl v1.36.3).
@pytest.mark.parametrize(
    "text, counts",
    [
        pytest.param(POD_LIMITS % ("", "{nvidia.com/gpu: 1, <<: {nvidia.com/gpu: 2}}"), [2], id="merge-after-key-overrides"),
        pytest.param(POD_LIMITS % ("", "{<<: {nvidia.com/gpu: 2}, nvidia.com/gpu: 1}"), [1], id="key-after-merge-overrides"),
        pytest.param(POD_LIMITS % ("x: &x {nvidia.com/gpu: 2}\ny: &y {nvidia.com/gpu: 3}\n", "{<<: [*x, *y]}"), [2], id="earlier-merge-wins"),
        pytest.param(POD_LIMITS % ("", "{<<: {nvidia.com/gpu: 2}, <<: {nvidia.com/gpu: 5}}"), [5], id="two-merge-keys"),
        pytest.param(POD_LIMITS % ("a: &a {nvidia.com/gpu: 1}\nb: &b {<<: *a, nvidia.com/gpu: 3}\n", "{<<: *b}"), [3], id="merge-of-a-merge"),
        pytest.param(POD_LIMITS % ("", "{<<: [], nvidia.com/gpu: 1}"), [1], id="empty-merge-list"),
        pytest.param(POD_LIMITS % ("x: &x 1\ny: &x 4\n", "{nvidia.com/gpu: *x}"), [4], id="anchor-defined-again"),
        pytest.param(POD_LIMITS % ("k: &k nvidia.com/gpu\n", "{*k : 5}"), [5], id="alias-key"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [&c {name: c, image: x, resources: {limits: "
                     "{nvidia.com/gpu: 2}}}, *c]}\n", [2, 2], id="aliased-container"),
    ],
)
def test_anchors_aliases_and_merges_are_read_as_kubectl_reads_them(text, counts):
    assert [item["count"] for item in gpu_requests.container_requests(text)] == counts


@pytest.mark.parametrize(
    "text, problem",
    [
        pytest.param(POD_LIMITS % ("x: &x [{nvidia.com/gpu: 2}]\n", "{<<: *x}"), "map merge requires map or sequence of maps", id="alias-of-a-list"),
        pytest.param(POD_LIMITS % ("", "{<<: ~}"), "map merge requires map or sequence of maps", id="merge-null"),
        pytest.param(POD_LIMITS % ("", "{<<: [{nvidia.com/gpu: 2}, 3]}"), "map merge requires map or sequence of maps", id="merge-list-with-a-scalar"),
        pytest.param(POD_LIMITS % ("a: &a {nvidia.com/gpu: 6}\nb: &b [*a]\n", "{<<: *b}"), "map merge requires map or sequence of maps",
                     id="alias-of-a-list-of-aliases"),
        pytest.param(POD_LIMITS % ("x: &x [*x]\n", "{}"), "anchor 'x' value contains itself", id="self-reference"),
        pytest.param(POD_LIMITS % ("", "{nvidia.com/gpu: *nowhere}"), "unknown anchor 'nowhere' referenced", id="unknown-anchor"),
    ],
)
def test_anchors_and_merges_kubectl_refuses_are_refused(text, problem):
    with pytest.raises(ManifestError, match=re.escape(problem)):
        find_offenders(text)


def test_malformed_objects_have_no_line():
    with pytest.raises(ManifestError) as info:
        find_offenders([{"kind": "Pod", "spec": {"containers": [{"name": "a", "resources": {"limits": gpus(True)}}]}}])
    assert str(info.value) == "document 1: spec.containers[0].resources.limits[nvidia.com/gpu] is true, not a quantity (the API server refuses it)"
    with pytest.raises(ManifestError) as info:
        find_offenders(42)
    assert str(info.value) == "expected YAML text, an object or a list of objects, got int"


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("kind: Pod\nspec: [\n", "document 1, line 3: invalid YAML: while parsing a flow node did not find expected node content", id="unclosed"),
        pytest.param(
            "---\nkind: Pod\n---\na: b: c\n", "document 2, line 4: invalid YAML: mapping values are not allowed in this context", id="second-document"
        ),
        pytest.param(b"kind: Pod\n\xff\n", "not UTF-8 text (byte 10: invalid start byte)", id="not-utf8"),
    ],
)
def test_unreadable_yaml(text, message):
    for read in (find_offenders, load_documents):
        with pytest.raises(ManifestError) as info:
            read(text)
        assert str(info.value) == message


@pytest.mark.parametrize(
    "text, message, check_message",
    [
        pytest.param(
            "kind: Pod\nx: !!python/object/apply:os.system ['echo hi']\n",
            "document 1, line 2: YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed (only "
            "plain YAML is read; tags that build objects are refused)",
            "document 1, line 2: the YAML tag '!!python/object/apply:os.system' is not allowed",
            id="python-tag",
        ),
        pytest.param(
            "kind: Pod\n---\nx: !Ref foo\n",
            "document 2, line 3: YAML tag '!Ref' is not allowed (only plain YAML is read; tags that build objects are refused)",
            "document 2, line 3: the YAML tag '!Ref' is not allowed",
            id="custom-tag",
        ),
    ],
)
def test_tags_that_build_objects(text, message, check_message):
    with pytest.raises(ManifestError) as info:
        load_documents(text)
    assert str(info.value) == message
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert str(info.value).startswith(check_message)


def test_core_tags_are_read_by_load_documents_and_refused_by_the_check():
    text = "kind: !!str Pod\nspec:\n  containers:\n  - name: a\n    resources: {limits: {nvidia.com/gpu: !!int 2}}\n"
    assert load_documents(text)[0]["kind"] == "Pod"
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert str(info.value).startswith("document 1, line 1: the YAML tag '!!str' is not allowed")  # the first tag written


def test_load_documents_keeps_empty_documents_and_reads_streams():
    assert load_documents("---\n---\nkind: Pod\n---\n") == [None, {"kind": "Pod"}, None]
    assert load_documents(io.BytesIO(b"a: 1\n")) == [{"a": 1}]
    assert find_offenders(io.StringIO(dump(workload("Pod", pod_spec(container(limits=gpus(2))))))) == [offender("Pod", "w", "main", 2)]


def test_input_too_large():
    with pytest.raises(ManifestError) as info:
        find_offenders("#" * (manifest_yaml.MAX_INPUT_BYTES + 1))
    assert str(info.value) == "larger than 32 MiB; refusing to read it"


# ---------------------------------------------------------------------------
# hostile input: must finish (these tests would hang or exhaust memory otherwise)


def billion_laughs(levels=9):
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append("l%d: &l%d [%s]" % (level, level, ", ".join(["*l%d" % (level - 1)] * 9)))
    return lines


def test_billion_laughs_is_refused_without_expanding_it():
    # kubectl refuses it too ("document contains excessive aliasing"); the check must not say OK.
    text = "kind: Pod\nmetadata:\n  name: lol\n  annotations:\n" + "\n".join("    " + line for line in billion_laughs()) + "\nspec:\n  containers: []\n"
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert "kubectl refuses a document whose YAML aliases expand to more than it allows (\"document contains excessive aliasing\")" in str(info.value)
    assert find_offenders(load_documents(text)) == []  # the permissive reading shares nodes, never expands them


@pytest.mark.parametrize("levels", [9, 40])
def test_alias_and_merge_bombs_are_refused_at_once(levels):
    lines = ["  m0: &m0 {k0: 1, k1: 2}"]
    for level in range(1, levels):
        lines.append("  m%d: &m%d {<<: [*m%d, *m%d, *m%d, *m%d], k%d: 1}" % (level, level, level - 1, level - 1, level - 1, level - 1, level + 1))
    text = "kind: Pod\nx:\n%s\nspec:\n  containers:\n  - name: c\n    resources: {<<: *m1, limits: {nvidia.com/gpu: 3}}\n" % "\n".join(lines)
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert "is not allowed" in str(info.value)
    loaded = load_documents(text)
    assert len(loaded[0]["x"]["m%d" % (levels - 1)]) == levels + 1


def test_alias_amplification_is_refused():
    text = (
        "kind: List\n"
        "c: &c {name: c, resources: {limits: {nvidia.com/gpu: 1}}}\n"
        "big: &big [%s]\n"
        "items: [%s]\n" % (", ".join(["*c"] * 3000), ", ".join(["{kind: Pod, spec: {containers: *big}}"] * 3000))
    )
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert "(\"document contains excessive aliasing\")" in str(info.value)


def test_walk_budget_bounds_objects_given_as_data():
    shared = [container("c", limits=gpus(1))] * 3000
    documents = [{"kind": "List", "items": [{"kind": "Pod", "spec": {"containers": shared}} for _item in range(3000)]}]
    with pytest.raises(ManifestError) as info:
        find_offenders(documents)
    assert "containers, items or keys to visit" in str(info.value)


@pytest.mark.parametrize(
    "text, line",
    [
        pytest.param("a: " + "[" * 100000 + "]" * 100000, 1, id="flow"),
        pytest.param("- " * 100000 + "x", 1, id="compact-sequences"),
        pytest.param("a:\n" + "".join(" " * level + "- \n" for level in range(1000)), 201, id="block"),
        pytest.param("---\na: 1\n---\nb: " + "{a: " * 300 + "1" + "}" * 300, 4, id="second-document"),
    ],
)
def test_deep_nesting_is_refused_before_parsing(text, line):
    for read in (find_offenders, load_documents):
        with pytest.raises(ManifestError) as info:
            read(text)
        assert str(info.value).endswith("line %d: nested deeper than 200 levels; refusing to read it" % line)


def test_moderate_nesting_is_fine():
    assert load_documents("a: " + "[" * 150 + "]" * 150)[0]["a"]


def test_too_many_documents():
    with pytest.raises(ManifestError) as info:
        find_offenders("---\n" * (manifest_yaml.MAX_DOCUMENTS + 2))
    assert str(info.value) == "more than 100000 documents; split the manifest"


def test_ten_thousand_pods():
    docs = []
    for index in range(10000):
        docs.append(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p%d\nspec:\n  containers:\n    - name: c%d\n      image: busybox\n"
            "      resources:\n        limits:\n          nvidia.com/gpu: %d\n" % (index, index, 2 if index % 1000 == 0 else 1)
        )
    result = find_offenders("".join(docs))
    assert [item["container"] for item in result] == ["c%d" % index for index in range(0, 10000, 1000)]


# ---------------------------------------------------------------------------
# the command line (lab step 6: bin/check-request.sh <pod-manifest>)


@pytest.fixture
def manifest(tmp_path):
    def write(text, name="pod.yaml"):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write


TWO_SLICES = dump(
    workload("Pod", pod_spec(container("trainer", limits=gpus(2)), container("sidecar")), name="two"),
    workload("Deployment", pod_spec(container("web", requests=gpus("3"))), name="web"),
)


def test_cli_prints_over_lines_and_exits_1(manifest, capsys):
    assert main([manifest(TWO_SLICES)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "OVER=trainer=2\nOVER=web=3\n"
    assert captured.err == ""


@pytest.mark.parametrize(
    "text",
    [
        dump(workload("Pod", pod_spec(container("one", limits=gpus(1))), name="team-over")),
        dump(workload("Pod", pod_spec(container("cpu-only", limits={"cpu": 1})))),
        "",
    ],
)
def test_cli_prints_ok(manifest, capsys, text):
    assert main([manifest(text)]) == 0
    assert capsys.readouterr().out == "OK\n"


def test_cli_options(manifest, capsys):
    path = manifest(dump(workload("Pod", pod_spec(container("a", limits={"nvidia.com/gpu.shared": 2})))))
    assert main([path]) == 0
    assert main([path, "--resource", "nvidia.com/gpu", "--resource", "nvidia.com/gpu.shared"]) == 1
    assert main([path, "--resource", "nvidia.com/gpu.shared", "--max", "2"]) == 0
    assert capsys.readouterr().out == "OK\nOVER=a=2\nOK\n"


def test_cli_reads_standard_input(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TWO_SLICES.encode("utf-8"))))
    assert main(["-"]) == 1
    assert capsys.readouterr().out == "OVER=trainer=2\nOVER=web=3\n"


@pytest.mark.parametrize(
    "text, error",
    [
        pytest.param(
            "kind: Pod\nspec: [\n", "document 1, line 3: invalid YAML: while parsing a flow node did not find expected node content", id="invalid-yaml"
        ),
        pytest.param(
            "kind: Pod\nmetadata: !!python/object/apply:os.system ['touch /tmp/pwned']\n",
            "document 1, line 2: the YAML tag '!!python/object/apply:os.system' is not allowed: kubectl decodes some tags (!!binary) "
            "and sends others as plain text, so what it sends is not what is written. Fix: remove the tag and write the plain value",
            id="unsafe-tag",
        ),
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources: {limits: {nvidia.com/gpu: half}}\n",
            "document 1, line 5: spec.containers[0].resources.limits[nvidia.com/gpu] is 'half', not a quantity (the API server refuses it)",
            id="not-a-number",
        ),
    ],
)
def test_cli_exit_2_on_bad_manifests(manifest, capsys, text, error):
    path = manifest(text)
    assert main([path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "check-request: %s: %s\n" % (path, error)


def test_cli_exit_2_on_missing_file_and_directory(tmp_path, capsys):
    missing = str(tmp_path / "missing.yaml")
    assert main([missing]) == 2
    assert main([str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "check-request: cannot read %s: No such file or directory\ncheck-request: cannot read %s: Is a directory\n" % (missing, tmp_path)


def test_cli_exit_2_on_usage_errors(manifest, capsys):
    path = manifest("kind: Pod\n")
    assert main([]) == 2
    assert main([path, "--max", "many"]) == 2
    assert main([path, "--max", "-1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.endswith("check-request: max_per_container must be a non-negative integer, got -1\n")


def test_cli_alias_bomb_is_refused_at_once(manifest, capsys):
    text = "kind: Pod\nmetadata:\n  name: lol\n  annotations:\n" + "\n".join("    " + line for line in billion_laughs()) + "\n"
    assert main([manifest(text)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "(\"document contains excessive aliasing\")" in captured.err


def test_cli_help_exits_2_and_documents_the_exit_codes(capsys):
    assert main(["--help"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: check-request [-h] [--resource NAME] [--max N]")
    assert "[--claim-limit CLASS[:CAPACITY=QUANTITY]]" in captured.err
    for words in ("(exit 1)", "OK (exit 0)", "Exit 2"):
        assert words in captured.err


@pytest.mark.parametrize(
    "text, out, code",
    [
        pytest.param("2000m", "OVER=c=2\n", 1, id="milli"),
        pytest.param("2e0", "OVER=c=2\n", 1, id="exponent"),
        pytest.param("1k", "OVER=c=1000\n", 1, id="kilo"),
        pytest.param('"1"', "OK\n", 0, id="quoted-one"),
        pytest.param("1000m", "OK\n", 0, id="one-in-milli"),
        pytest.param("1500m", "", 2, id="fraction"),
        pytest.param("9" * 5000, "", 2, id="huge-digits"),
        pytest.param('"%s"' % ("9" * 5000), "", 2, id="huge-digits-quoted"),
        pytest.param("1" + "0" * 30, "", 2, id="beyond-int64"),
    ],
)
def test_cli_quantities_as_kubernetes_reads_them(manifest, capsys, text, out, code):
    pod = "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources:\n      limits:\n        nvidia.com/gpu: %s\n" % text
    assert main([manifest(pod)]) == code
    captured = capsys.readouterr()
    assert captured.out == out
    assert (captured.err == "") == (code != 2)
    assert "Traceback" not in captured.err


def test_script_runs_standalone_next_to_the_shell_wrapper(tmp_path):
    """The file is copied next to bin/check-request.sh and run by a plain python3: no collection imports."""
    for module in (quantity, manifest_yaml, gpu_requests, check_request):
        shutil.copy(module.__file__, tmp_path)
    script = tmp_path / "check_request.py"
    manifest_path = tmp_path / "pod.yaml"
    manifest_path.write_text(TWO_SLICES, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-E", "-s", str(script), str(manifest_path)], capture_output=True, text=True, env=env, cwd=str(tmp_path), check=False)
    assert (run.returncode, run.stdout, run.stderr) == (1, "OVER=trainer=2\nOVER=web=3\n", "")
    run = subprocess.run([sys.executable, "-E", "-s", str(script), str(tmp_path / "nope.yaml")], capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 2 and run.stdout == ""


# ---------------------------------------------------------------------------
# kinds this file does not know: every Pod spec in a custom resource is checked

TRAINER = {"containers": [container("trainer", limits=gpus(2))]}


def template(spec):
    return {"metadata": {"labels": {"app": "x"}}, "spec": spec}


@pytest.mark.parametrize(
    "api_version, kind, spec, path",
    [
        pytest.param("argoproj.io/v1alpha1", "Rollout", {"replicas": 2, "template": template(TRAINER)}, "spec.template.spec", id="argo-rollout"),
        pytest.param(
            "jobset.x-k8s.io/v1alpha2", "JobSet",
            {"replicatedJobs": [{"name": "ok", "template": {"spec": {"template": template(pod_spec(container("one", limits=gpus(1))))}}},
                                {"name": "w", "template": {"spec": {"template": template(TRAINER)}}}]},
            "spec.replicatedJobs[1].template.spec.template.spec", id="jobset",
        ),
        pytest.param(
            "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet",
            {
                "leaderWorkerTemplate": {
                    "size": 4, "leaderTemplate": template(pod_spec(container("leader", limits=gpus(1)))), "workerTemplate": template(TRAINER),
                }
            },
            "spec.leaderWorkerTemplate.workerTemplate.spec", id="leaderworkerset",
        ),
        pytest.param(
            "kubeflow.org/v1", "PyTorchJob",
            {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": template(pod_spec(container("master")))},
                    "Worker": {"replicas": 3, "template": template(TRAINER)},
                }
            },
            "spec.pytorchReplicaSpecs.Worker.template.spec", id="training-operator",
        ),
        pytest.param(
            "example.com/v1", "Scheduled", {"jobTemplate": {"spec": {"template": template(TRAINER)}}}, "spec.jobTemplate.spec.template.spec", id="job-template"
        ),
        pytest.param("serving.kserve.io/v1beta1", "InferenceService", {"predictor": TRAINER}, "spec.predictor", id="pod-spec-inline"),
        pytest.param(None, "Mystery", {"template": template(TRAINER)}, "spec.template.spec", id="no-api-version"),
    ],
)
def test_custom_resources_with_pod_specs_are_checked(api_version, kind, spec, path):
    document = {"kind": kind, "metadata": {"name": "w"}, "spec": spec}
    if api_version:
        document["apiVersion"] = api_version
    assert both_views([document]) == [offender(kind, "w", "trainer", 2)]
    found = [item for item in gpu_requests.container_requests([document]) if item["container"] == "trainer"]
    assert [item["path"] for item in found] == [path + ".containers[0]"]


def test_kubernetes_own_kinds_without_pods_are_skipped():
    spec = {"template": template(TRAINER)}
    documents = [
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": spec}
        for api_version, kind in (("v1", "Service"), ("networking.k8s.io/v1", "Ingress"), ("autoscaling/v2", "HorizontalPodAutoscaler"))
    ]
    assert both_views(documents) == []
    # a custom resource's metadata and status are never taken for a Pod spec
    status = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "status": {"template": template(TRAINER)}}
    assert both_views([status]) == []


def test_the_standalone_default_resource_is_the_names_module_s():
    # gpu_requests runs alone in bin/check-request.sh, so it spells the name out; it must be the one home's.
    assert gpu_requests.DEFAULT_RESOURCES == (gpu_names.GPU_RESOURCE,)
