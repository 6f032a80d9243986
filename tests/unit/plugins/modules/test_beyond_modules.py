# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""quota_coverage and mig_migration_report as modules, with the cluster replaced by fixed objects."""

from __future__ import annotations

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.cluster_objects import ClusterReadError
from ansible_collections.gpushare.k8s.plugins.modules import mig_migration_report, quota_coverage

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"


class ModuleExit(Exception):
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


def node(name, labels=None, **allocatable):
    return {"kind": "Node", "metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {}))},
            "status": {"allocatable": allocatable}}


CLUSTER = {
    "Node": [node("lab-node-0", **{GPU: "2"}), node("lab-node-1", **{GPU: "8"}), node("lab-node-2", **{MIG: "7"})],
    "ResourceQuota": [{"kind": "ResourceQuota", "metadata": {"namespace": "team-a", "name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}],
    "Deployment": [
        {"kind": "Deployment", "metadata": {"namespace": "ml", "name": "pinned"},
         "spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": "lab-node-2"},
                                        "containers": [{"name": "server", "resources": {"limits": {GPU: 1}}}]}}}},
    ],
}


@pytest.fixture
def cluster(monkeypatch):
    calls = []

    class FakeLister:
        def __init__(self, api_client):
            pass

        def list(self, kind, namespaces=None):
            calls.append((kind, namespaces))
            return [obj for obj in CLUSTER.get(kind, []) if not namespaces or obj["metadata"].get("namespace") in namespaces]

    for module in (quota_coverage, mig_migration_report):
        monkeypatch.setattr(module, "ObjectLister", FakeLister)
        monkeypatch.setattr(module, "build_api_client", lambda params: None)
    return calls


def run(module, **args):
    with patch_module_args(args):
        with pytest.raises(ModuleExit) as info:
            module.main()
    return info.value


def test_quota_coverage_reports_the_bypass(cluster):
    outcome = run(quota_coverage)
    assert not outcome.failed and outcome.result["changed"] is False
    assert outcome.result["bypasses"] == [{"namespace": "team-a", "resource": MIG, "nodes": ["lab-node-2"]}]
    assert outcome.result["msg"].startswith("team-a (quota gpu-quota): BYPASS")


def test_quota_coverage_can_fail(cluster):
    outcome = run(quota_coverage, fail_on_bypass=True, namespaces=["team-a"])
    assert outcome.failed and outcome.result["ok"] is False
    assert ("ResourceQuota", ["team-a"]) in cluster


def test_quota_coverage_with_explicit_names(cluster):
    outcome = run(quota_coverage, resources=[GPU])
    assert outcome.result["ok"] is True and outcome.result["advertised"] == {GPU: ["lab-node-0", "lab-node-1"]}


def test_quota_coverage_bad_names_fail_cleanly(cluster):
    outcome = run(quota_coverage, resources=["requests.nvidia.com/gpu"])
    assert outcome.failed
    assert outcome.result["msg"].startswith("resources[0]: 'requests.nvidia.com/gpu' is a quota key, not a resource name.")


def test_quota_coverage_api_error_is_a_message(monkeypatch, cluster):
    def refuse(self, kind, namespaces=None):
        raise ClusterReadError("cannot list Node: HTTP 403: nodes is forbidden")

    monkeypatch.setattr(quota_coverage.ObjectLister, "list", refuse)
    outcome = run(quota_coverage)
    assert outcome.failed and outcome.result["msg"] == "cannot list Node: HTTP 403: nodes is forbidden"


def test_mig_migration_report_from_the_cluster(cluster):
    outcome = run(mig_migration_report)
    assert not outcome.failed
    [row] = outcome.result["workloads"]
    assert {key: row[key] for key in ("namespace", "kind", "name", "container", "resource")} == {
        "namespace": "ml", "kind": "Deployment", "name": "pinned", "container": "server", "resource": GPU}
    assert outcome.result["msg"].startswith("1 of 1 workload(s) asking for nvidia.com/gpu would have no node left:")


def test_mig_migration_report_from_a_file(cluster, tmp_path):
    manifest = tmp_path / "app.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: pinned-pod}\nspec:\n  nodeName: lab-node-2\n"
        "  containers: [{name: main, resources: {limits: {nvidia.com/gpu: 1}}}]\n"
    )
    outcome = run(mig_migration_report, cluster=False, path=[str(manifest)], default_namespace="apps", fail_on_stranded=True)
    assert outcome.failed
    assert [(row["namespace"], row["name"]) for row in outcome.result["workloads"]] == [("apps", "pinned-pod")]
    assert ("Deployment", None) not in cluster


def test_mig_migration_report_unreadable_file(cluster, tmp_path):
    outcome = run(mig_migration_report, cluster=False, path=[str(tmp_path / "missing.yaml")])
    assert outcome.failed and outcome.result["msg"] == "Cannot read %s: No such file or directory" % (tmp_path / "missing.yaml")


def test_mig_migration_report_bad_yaml(cluster):
    outcome = run(mig_migration_report, cluster=False, content="kind: Pod\nx: !!python/object/apply:os.system ['id']\n")
    assert outcome.failed and outcome.result["msg"].startswith("Cannot read the manifest content: document 1")


def test_mig_migration_report_unknown_node(cluster):
    outcome = run(mig_migration_report, advertised_after={"lab-node-9": {MIG: 7}})
    assert outcome.failed
    assert outcome.result["msg"] == "advertised_after['lab-node-9']: no such node (nodes: lab-node-0, lab-node-1, lab-node-2). Fix: name an existing node"
