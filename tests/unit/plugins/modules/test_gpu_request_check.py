# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpushare.k8s.plugins.modules import gpu_request_check


class ModuleExit(Exception):
    """Raised instead of exiting: ``result`` is what the module returned, ``failed`` whether through fail_json."""

    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result = result
        self.failed = failed


@pytest.fixture(autouse=True)
def no_exit(monkeypatch):
    def exit_json(self, **result):
        raise ModuleExit(result, failed=False)

    def fail_json(self, msg, **result):
        result["msg"] = msg
        raise ModuleExit(result, failed=True)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run(**args):
    with patch_module_args(args):
        with pytest.raises(ModuleExit) as info:
            gpu_request_check.main()
    return info.value


TWO_SLICES = """apiVersion: v1
kind: Pod
metadata:
  name: team-over
spec:
  containers:
    - name: trainer
      image: busybox
      resources:
        limits:
          nvidia.com/gpu: 2
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      initContainers:
        - name: warmup
          resources:
            requests:
              nvidia.com/gpu: "3"
      containers:
        - name: web
"""
ONE_SLICE = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ok\nspec:\n  containers:\n    - name: main\n      resources:\n        limits:\n          nvidia.com/gpu: 1\n"
)
OFFENDERS = [
    {"document": 0, "kind": "Pod", "name": "team-over", "container": "trainer", "resource": "nvidia.com/gpu", "count": 2},
    {"document": 1, "kind": "Deployment", "name": "web", "container": "warmup", "resource": "nvidia.com/gpu", "count": 3},
]
OFFENDERS_MSG = (
    "2 container(s) ask for more than 1 of nvidia.com/gpu: Pod/team-over container trainer asks for 2 nvidia.com/gpu; "
    "Deployment/web container warmup asks for 3 nvidia.com/gpu"
)


def test_path_with_offenders_fails(tmp_path):
    manifest = tmp_path / "team-over.yaml"
    manifest.write_text(TWO_SLICES, encoding="utf-8")
    outcome = run(path=str(manifest))
    assert outcome.failed
    assert outcome.result == {"msg": OFFENDERS_MSG, "changed": False, "ok": False, "offenders": OFFENDERS}


def test_report_without_failing():
    outcome = run(content=TWO_SLICES, fail_on_offenders=False)
    assert not outcome.failed
    assert outcome.result == {"changed": False, "ok": False, "offenders": OFFENDERS}


def test_content_within_the_limit():
    outcome = run(content=ONE_SLICE)
    assert not outcome.failed
    assert outcome.result == {"changed": False, "ok": True, "offenders": []}


def test_check_mode_runs_the_same_check():
    outcome = run(content=TWO_SLICES, fail_on_offenders=False, _ansible_check_mode=True)
    assert not outcome.failed
    assert outcome.result["offenders"] == OFFENDERS


@pytest.mark.parametrize(
    "definition",
    [
        pytest.param(
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}, id="object"
        ),
        pytest.param(
            [{"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}], id="list"
        ),
        pytest.param("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]}\n", id="text"),
    ],
)
def test_definition_forms(definition):
    outcome = run(definition=definition, fail_on_offenders=False)
    assert outcome.result["offenders"] == [{"document": 0, "kind": "Pod", "name": "p", "container": "c", "resource": "nvidia.com/gpu", "count": 2}]


def test_resources_and_max_per_container():
    definition = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu.shared": 2}}}]}}
    assert run(definition=definition).result["ok"] is True
    outcome = run(definition=definition, resources=["nvidia.com/gpu", "nvidia.com/gpu.shared"])
    assert outcome.failed
    assert outcome.result["msg"] == (
        "1 container(s) ask for more than 1 of nvidia.com/gpu, nvidia.com/gpu.shared: Pod/p container c asks for 2 nvidia.com/gpu.shared"
    )
    assert run(definition=definition, resources=["nvidia.com/gpu.shared"], max_per_container=2).result["ok"] is True


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param({}, "one of the following is required: path, content, definition", id="nothing"),
        pytest.param({"content": "a: 1", "definition": {}}, "parameters are mutually exclusive: path|content|definition", id="two-sources"),
        pytest.param(
            {"content": "kind: Pod\nspec: [\n"},
            "Cannot check the manifest: document 1, line 3: invalid YAML: while parsing a flow node did not find expected node content. "
            "Fix: correct the YAML syntax at that line",
            id="invalid-yaml",
        ),
        pytest.param(
            {"content": "kind: Pod\nx: !!python/object/apply:os.system ['id']\n"},
            "Cannot check the manifest: document 1, line 2: the YAML tag '!!python/object/apply:os.system' is not allowed: kubectl decodes "
            "some tags (!!binary) and sends others as plain text, so what it sends is not what is written. Fix: remove the tag and write "
            "the plain value.",
            id="unsafe-tag",
        ),
        pytest.param({"definition": 42}, "definition must be an object, a list of objects or YAML text, got int", id="definition-number"),
        pytest.param({"content": ONE_SLICE, "max_per_container": -1}, "max_per_container must be a non-negative integer, got -1", id="negative-max"),
    ],
)
def test_failures(args, message):
    outcome = run(**args)
    assert outcome.failed
    assert outcome.result["msg"] == message


def test_missing_file(tmp_path):
    missing = tmp_path / "missing.yaml"
    outcome = run(path=str(missing))
    assert outcome.failed
    assert outcome.result == {"msg": "Cannot read %s: No such file or directory" % missing, "offenders": []}


def pod_with(quantity, key="nvidia.com/gpu"):
    return (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources:\n      limits:\n        %s: %s\n" % (key, quantity)
    )


@pytest.mark.parametrize("quantity, count", [("2000m", 2), ("2e0", 2), ("1k", 1000), ('"2"', 2), ("0x2", 2)])
def test_quantities_the_api_server_accepts_are_counted(quantity, count):
    outcome = run(content=pod_with(quantity), fail_on_offenders=False)
    assert not outcome.failed
    assert outcome.result["offenders"] == [{"document": 0, "kind": "Pod", "name": "p", "container": "c", "resource": "nvidia.com/gpu", "count": count}]
    assert run(content=pod_with("1000m")).result["ok"] is True


@pytest.mark.parametrize(
    "content, construct",
    [
        pytest.param(pod_with("2", key="!!binary bnZpZGlhLmNvbS9ncHU="), "the YAML tag '!!binary' is not allowed", id="binary-key"),
        pytest.param(pod_with("{<<: ~}"), "map merge requires map or sequence of maps as the value", id="merge-of-null"),
        pytest.param(pod_with("1500m"), "is '1500m', not a whole number", id="fraction"),
        pytest.param(pod_with("9" * 5000), "longer than 64 characters", id="huge-digits"),
    ],
)
def test_constructs_read_differently_and_invalid_counts_fail_the_module(content, construct):
    outcome = run(content=content, fail_on_offenders=False)
    assert outcome.failed
    assert outcome.result["msg"].startswith("Cannot check the manifest: document 1, line ")
    assert construct in outcome.result["msg"]


def test_custom_resources_with_pod_templates_are_checked():
    jobset = (
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\nspec:\n  replicatedJobs:\n  - name: workers\n"
        "    template:\n      spec:\n        template:\n          spec:\n            containers:\n            - name: trainer\n"
        "              resources: {limits: {nvidia.com/gpu: 4}}\n"
    )
    outcome = run(content=jobset)
    assert outcome.failed
    assert outcome.result["offenders"] == [
        {"document": 0, "kind": "JobSet", "name": "js", "container": "trainer", "resource": "nvidia.com/gpu", "count": 4}
    ]
