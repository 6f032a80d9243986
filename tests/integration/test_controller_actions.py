# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""objects, objects_info and files on the lab cluster: the controller path returns what the module path returns.

The same playbook runs twice, in the controller (the default for a local connection) and as modules
(gpushare_in_controller=false, the path of a task delegated to another host); the results are the API
server's answers, compared between the two runs and against what the cluster holds afterwards.
"""
from __future__ import annotations

import json

import pytest

PLAYBOOK = "tests/integration/playbooks/controller_actions.yml"


@pytest.fixture(scope="module")
def runs(run_playbook, core_v1, kubeconfig, tmp_path_factory):
    out = {}
    for in_controller in (True, False):
        namespace = "it-actions-%s" % ("controller" if in_controller else "module")
        path = tmp_path_factory.mktemp("actions") / "results.json"
        proc = run_playbook(PLAYBOOK, extra_vars={"it_namespace": namespace, "it_out": str(path), "gpushare_kubeconfig": kubeconfig,
                                                  "gpushare_in_controller": in_controller})
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        out[in_controller] = json.loads(path.read_text())
        core_v1.delete_namespace(namespace)
    return out


def test_both_paths_return_the_same(runs):
    controller, module = (json.loads(json.dumps(runs[each]).replace("it-actions-controller" if each else "it-actions-module", "NS"))
                          for each in (True, False))
    assert controller == module


def test_objects_create_then_leave_alone_and_predict_with_a_diff(runs):
    result = runs[True]
    assert result["create"] == {"changed": True, "methods": ["create", "create"]}
    assert result["again"] == {"changed": False}
    assert result["predicted"]["changed"] and result["predicted"]["method"] == "update"
    assert "b" not in result["predicted"]["before"] and result["predicted"]["after"]["b"] == "2"  # kubernetes.core's diff


def test_check_mode_left_the_configmap_as_it_was_and_absent_deleted_it(runs):
    result = runs[True]
    assert result["config_data"] == {"a": "1"}  # read after the check-mode task
    assert result["deleted"] == {"changed": True, "method": "delete"}


def test_queries_return_one_entry_per_read_in_order(runs):
    assert runs[True]["read"] == [["it-actions-controller"], ["it-config"], []]
    assert runs[False]["read"] == [["it-actions-module"], ["it-config"], []]


def test_names_return_one_entry_per_name_in_order_as_a_loop_would(runs):
    assert runs[True]["named"] == [["it-missing", []], ["it-config", ["it-config"]]]
    assert runs[False]["named"] == runs[True]["named"]


def test_an_unknown_kind_fails_with_kubernetes_cores_message(runs):
    assert runs[True]["unknown"]["failed"]
    assert "Failed to find exact match for example.com/v1.Nothing" in runs[True]["unknown"]["msg"]


def test_an_async_task_runs_as_a_module_and_reports_its_change(runs):
    assert runs[True]["async"] == {"changed": True, "finished": 1}


def test_manifests_predict_objects_for_a_namespace_a_run_would_create(runs):
    predicted = runs[True]["manifest_predicted"]
    assert predicted["changed"]
    assert predicted["missing"] == ["it-actions-controller-later"]
    assert predicted["msg"] == "Would create ConfigMap it-later in namespace it-actions-controller-later, which does not exist yet."


def test_manifests_refuse_bad_input_before_writing_anything(runs):
    bad = runs[True]["manifest_bad"]
    assert bad["failed"]
    assert bad["msg"].startswith("manifests[1].content: manifest: ")
    assert "is not allowed" in bad["msg"]
    # first.yaml (the good manifest before the bad one) was never written, and check mode wrote nothing
    assert runs[True]["files"]["exists"] == [True, False]
    assert runs[True]["files"]["found"][0] == ["manifest.yaml"]


def test_manifests_write_the_file_apply_it_then_leave_both_alone(runs):
    applied = runs[True]["manifest"]
    assert applied["changed"] and applied["file_changed"]
    assert applied["objects"] == [{"kind": "ConfigMap", "name": "it-manifest", "namespace": "it-actions-controller",
                                   "method": "create", "changed": True}]
    assert runs[True]["manifest_again"] == {"changed": False, "file_changed": False}
    assert runs[True]["read_manifest"] == [{"a": "1"}]
