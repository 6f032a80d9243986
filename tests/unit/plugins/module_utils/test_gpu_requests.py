# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils import gpu_requests
from ansible_collections.gpushare.k8s.plugins.module_utils.gpu_requests import ManifestError, find_offenders, load_documents, main


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
        {"metadata": {"name": "no-kind"}, "spec": pod_spec(container(limits=gpus(5)))},
    ]
    assert both_views(documents) == []


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
    inner = {"apiVersion": "v1", "kind": "List", "items": [workload("StatefulSet", pod_spec(container("db", limits=gpus(2))), name="db")]}
    documents = [
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [workload("Pod", pod_spec(container("a", limits=gpus(2))), name="p"), {"kind": "ConfigMap"}, None, inner],
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


def test_merge_keys_are_honoured():
    text = """kind: Pod
metadata: {name: merged}
spec:
  containers:
    - &base {name: a, resources: {limits: {nvidia.com/gpu: 2}}}
    - <<: *base
      name: b
    - <<: *base
      name: c
      resources: {limits: {nvidia.com/gpu: 1}}
"""
    expected = [offender("Pod", "merged", "a", 2), offender("Pod", "merged", "b", 2)]
    assert find_offenders(text) == expected
    assert find_offenders(load_documents(text)) == expected


def test_aliased_list_items_are_reported_once():
    text = """kind: List
items:
  - &p {kind: Pod, metadata: {name: p}, spec: {containers: [{name: a, resources: {limits: {nvidia.com/gpu: 2}}}]}}
  - *p
  - *p
"""
    assert find_offenders(text) == [offender("Pod", "p", "a", 2)]


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
            "document 2, line 12: spec.template.spec.initContainers[0].resources.limits[nvidia.com/gpu] is '-1', not a whole number "
            "(extended resources are requested in whole units)",
            id="negative",
        ),
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits:\n        nvidia.com/gpu:\n",
            "document 1, line 7: spec.containers[0].resources.limits[nvidia.com/gpu] is null, not a whole number "
            "(extended resources are requested in whole units)",
            id="null",
        ),
        pytest.param("kind: Pod\nspec:\n  containers: {name: a}\n", "document 1, line 3: spec.containers must be a list", id="containers-mapping"),
        pytest.param("kind: Pod\nspec:\n  containers: [a]\n", "document 1, line 3: spec.containers[0] must be a mapping", id="container-string"),
        pytest.param("kind: Pod\nspec: [1]\n", "document 1, line 2: spec must be a mapping", id="spec-list"),
        pytest.param(
            "kind: Pod\n---\n- a\n- b\n",
            "document 2, line 3: the document is not a Kubernetes object (expected a mapping with kind, metadata, spec)",
            id="list-document",
        ),
        pytest.param("kind: List\nitems: {a: b}\n", "document 1, line 2: items must be a list", id="items-mapping"),
    ],
)
def test_malformed_manifests(text, message):
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert str(info.value) == message


def test_malformed_objects_have_no_line():
    with pytest.raises(ManifestError) as info:
        find_offenders([{"kind": "Pod", "spec": {"containers": [{"name": "a", "resources": {"limits": gpus(True)}}]}}])
    assert str(info.value) == (
        "document 1: spec.containers[0].resources.limits[nvidia.com/gpu] is true, not a whole number (extended resources are requested in whole units)"
    )
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
        pytest.param(
            "kind: Pod\nx: !!python/object/apply:os.system ['echo hi']\n",
            "document 1, line 2: YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed (only "
            "plain YAML is read; tags that build objects are refused)",
            id="python-tag",
        ),
        pytest.param(
            "kind: Pod\n---\nx: !Ref foo\n",
            "document 2, line 3: YAML tag '!Ref' is not allowed (only plain YAML is read; tags that build objects are refused)",
            id="custom-tag",
        ),
        pytest.param(b"kind: Pod\n\xff\n", "not UTF-8 text (byte 10: invalid start byte)", id="not-utf8"),
    ],
)
def test_unreadable_yaml(text, message):
    for read in (find_offenders, load_documents):
        with pytest.raises(ManifestError) as info:
            read(text)
        assert str(info.value) == message


def test_safe_tags_are_accepted():
    text = "kind: !!str Pod\nspec:\n  containers:\n  - name: a\n    resources: {limits: {nvidia.com/gpu: !!int 2}}\n"
    assert find_offenders(text) == [offender("Pod", "", "a", 2)]


def test_load_documents_keeps_empty_documents_and_reads_streams():
    assert load_documents("---\n---\nkind: Pod\n---\n") == [None, {"kind": "Pod"}, None]
    assert load_documents(io.BytesIO(b"a: 1\n")) == [{"a": 1}]
    assert find_offenders(io.StringIO(dump(workload("Pod", pod_spec(container(limits=gpus(2))))))) == [offender("Pod", "w", "main", 2)]


def test_input_too_large():
    with pytest.raises(ManifestError) as info:
        find_offenders("#" * (gpu_requests.MAX_INPUT_BYTES + 1))
    assert str(info.value) == "larger than 32 MiB; refusing to read it"


# ---------------------------------------------------------------------------
# hostile input: must finish (these tests would hang or exhaust memory otherwise)


def billion_laughs(levels=9):
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append("l%d: &l%d [%s]" % (level, level, ", ".join(["*l%d" % (level - 1)] * 9)))
    return lines


def test_billion_laughs_is_not_expanded():
    text = "kind: Pod\nmetadata:\n  name: lol\n  annotations:\n" + "\n".join("    " + line for line in billion_laughs()) + "\nspec:\n  containers: []\n"
    assert find_offenders(text) == []
    assert find_offenders(load_documents(text)) == []


def test_billion_laughs_as_containers_is_rejected():
    text = "x:\n" + "\n".join("  " + line for line in billion_laughs()) + "\nkind: Pod\nspec:\n  containers: *l8\n"
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    # the line is where the aliased node was defined (l7)
    assert str(info.value) == "document 1, line 9: spec.containers[0] must be a mapping"


def test_list_bomb_is_visited_once_per_object():
    lines = [
        "kind: List",
        "x0: &x0 {kind: List, items: [{kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]}}]}",
    ]
    for level in range(1, 9):
        lines.append("x%d: &x%d {kind: List, items: [%s]}" % (level, level, ", ".join(["*x%d" % (level - 1)] * 9)))
    lines.append("items: [*x8, *x8]")
    assert find_offenders("\n".join(lines)) == [offender("Pod", "p", "c", 2)]


def test_merge_key_bomb_stays_small():
    lines = ["  m0: &m0 {k0: 1, k1: 2}"]
    for level in range(1, 40):
        lines.append("  m%d: &m%d {<<: [*m%d, *m%d, *m%d, *m%d], k%d: 1}" % (level, level, level - 1, level - 1, level - 1, level - 1, level + 1))
    text = "kind: Pod\nx:\n%s\nspec:\n  containers:\n  - name: c\n    resources: {<<: *m39, limits: {<<: *m39, nvidia.com/gpu: 3}}\n" % "\n".join(lines)
    assert find_offenders(text) == [offender("Pod", "", "c", 3)]
    loaded = load_documents(text)
    assert len(loaded[0]["x"]["m39"]) == 41


def test_alias_amplification_hits_the_budget():
    text = (
        "kind: List\n"
        "c: &c {name: c, resources: {limits: {nvidia.com/gpu: 1}}}\n"
        "big: &big [%s]\n"
        "items: [%s]\n" % (", ".join(["*c"] * 3000), ", ".join(["{kind: Pod, spec: {containers: *big}}"] * 3000))
    )
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert "containers, items or keys to visit (YAML aliases multiplying content?); split the manifest" in str(info.value)


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
        find_offenders("---\n" * (gpu_requests.MAX_DOCUMENTS + 2))
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
            "document 1, line 2: YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed (only "
            "plain YAML is read; tags that build objects are refused)",
            id="unsafe-tag",
        ),
        pytest.param(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources: {limits: {nvidia.com/gpu: half}}\n",
            "document 1, line 5: spec.containers[0].resources.limits[nvidia.com/gpu] is 'half', not a whole "
            "number (extended resources are requested in whole units)",
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


def test_cli_alias_bomb_returns(manifest, capsys):
    text = "kind: Pod\nmetadata:\n  name: lol\n  annotations:\n" + "\n".join("    " + line for line in billion_laughs()) + "\n"
    assert main([manifest(text)]) == 0
    assert capsys.readouterr().out == "OK\n"


def test_script_runs_standalone_next_to_the_shell_wrapper(tmp_path):
    """The file is copied next to bin/check-request.sh and run by a plain python3: no collection imports."""
    script = tmp_path / "check_request.py"
    shutil.copy(gpu_requests.__file__, script)
    manifest_path = tmp_path / "pod.yaml"
    manifest_path.write_text(TWO_SLICES, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-I", str(script), str(manifest_path)], capture_output=True, text=True, env=env, cwd=str(tmp_path), check=False)
    assert (run.returncode, run.stdout, run.stderr) == (1, "OVER=trainer=2\nOVER=web=3\n", "")
    run = subprocess.run([sys.executable, "-I", str(script), str(tmp_path / "nope.yaml")], capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 2 and run.stdout == ""
