# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab's preflight rules (module_utils/lab/cluster_preflight.py) on the lab's own inventory and on broken copies of it."""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.lab.cluster_preflight import (
    PREFLIGHT_ARG_SPEC,
    cluster_errors,
    input_errors,
    run_preflight,
)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
LAB = yaml.safe_load(open(os.path.join(ROOT, "inventory", "group_vars", "all", "lab.yml"), encoding="utf-8"))


def params(**changes):
    out = {key: copy.deepcopy(spec.get("default")) for key, spec in PREFLIGHT_ARG_SPEC.items()}
    out.update(
        nodes=copy.deepcopy(LAB["gpushare_nodes"]),
        configs=copy.deepcopy(LAB["gpushare_device_plugin_configs"]),
        initial_configs=list(LAB["gpushare_device_plugin_initial_configs"]),
        split_pods=copy.deepcopy(LAB["gpushare_split_pods"]),
        placement=copy.deepcopy(LAB["gpushare_placement"]),
        team_quota=copy.deepcopy(LAB["gpushare_team_quota"]),
        team_pods=copy.deepcopy(LAB["gpushare_team_pods"]),
    )
    out.update(changes)
    return out


def cluster_node(name):
    return {"metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}}}


def test_the_lab_as_written_passes_and_its_inventory_is_computed():
    errors, inventory, names = input_errors(params())
    assert errors == []
    assert inventory["lab-node-1"] == {"nvidia.com/gpu": 8}
    assert names == ["nvidia.com/gpu"]


def test_a_team_that_does_not_fill_its_quota_names_both_fields_and_the_fix():
    errors = input_errors(params(team_pods=[{"name": "team-a-job-1"}]))[0]
    assert errors == ["gpushare_team_pods: 1 Pods of one unit each, but gpushare_team_quota.gpus is 2: the team must fill its quota "
                      "exactly so that team-over is the Pod it refuses (with fewer Pods it would be admitted, with more a team Pod would be refused). "
                      "Fix: list 2 team Pods, or set gpus: 1."]


@pytest.mark.parametrize("gpus, shown", [("2", '"2"'), (0, "0"), (True, "true"), (None, "null")])
def test_quota_gpus_that_are_not_a_whole_number_are_refused(gpus, shown):
    errors = input_errors(params(team_quota={"name": "gpu-quota", "gpus": gpus}))[0]
    assert errors == ["gpushare_team_quota.gpus: %s is not a whole number of 1 or more. Fix: set the GPU slots the team may "
                      "request, e.g. gpus: 2." % shown]


def test_every_disagreement_is_reported_at_once():
    broken = params(initial_configs=["default", "nope"], split_pods=[{"name": "x", "resource": "example.com/none"}])
    broken["nodes"].append({"name": "lab-node-9", "gpus": 1})
    errors = input_errors(broken)[0]
    assert [error.split(":")[0] for error in errors] == ["gpushare_device_plugin_initial_configs", "gpushare_nodes", "gpushare_split_pods"]
    assert "lab-node-9 set neither config nor mig" in errors[1]


def test_a_node_that_is_not_a_mapping_is_a_model_error_not_a_crash():
    with pytest.raises(ValueError, match="must be a mapping with name and gpus"):
        input_errors(params(nodes=["lab-node-0"]))


def test_a_quota_that_is_not_a_mapping_is_refused_with_an_example():
    result = run_preflight(params(checks=["input"], team_quota=2))
    assert result["failed"] and result["msg"].startswith("gpushare_team_quota: must be a mapping, got 2. Fix: write e.g.")


def test_input_only_needs_no_cluster():
    result = run_preflight(params(checks=["input"], kubeconfig="/nonexistent/kubeconfig"))
    assert not result.get("failed"), result
    assert result["msg"] == "The lab's parameters agree with each other."


def test_names_are_checked_first_and_alone_need_no_cluster():
    names = {"gpushare_namespace": "Bad_Name", "gpushare_team_pods": [{"name": "team-a-job-1"}]}
    # checked before the input: a team that does not fill its quota is not reported yet
    result = run_preflight(params(checks=["names", "input"], names=names, team_pods=[]))
    assert result["failed"] and result["msg"].startswith("gpushare_namespace: 'Bad_Name' is not a DNS-1123 label"), result
    assert "Fix: use a name such as gpu-share." in result["msg"]
    result = run_preflight(params(checks=["names"], names=dict(names, gpushare_namespace="gpu-share"), kubeconfig="/nonexistent"))
    assert not result.get("failed"), result
    assert result["msg"] == "Every name the lab writes is one Kubernetes accepts."
    result = run_preflight(params(checks=["names"], names={"gpushare_namespce": "gpu-share"}))
    assert result["failed"] and "gpushare_namespce is not a field holding a name; use gpushare_device_plugin_configmap" in result["msg"]


def test_cluster_errors_name_missing_nodes_unknown_config_labels_and_a_quota_shrink():
    p = params(initial_configs=[])
    quota = {"status": {"hard": {"requests.nvidia.com/gpu": "4"}, "used": {"requests.nvidia.com/gpu": "3"}}}
    errors = cluster_errors(p, ["nvidia.com/gpu"], [cluster_node("lab-node-0"), cluster_node("lab-node-2")], {"data": {"default": ""}}, quota)
    assert any("lab-node-1" in error and "gpushare_nodes" in error for error in errors), errors
    assert any("shared" in error and "device-plugin-configs" in error for error in errors), errors
    assert any("team_quota_allow_shrink" in error for error in errors), errors
    assert cluster_errors(dict(p, allow_quota_shrink=True, initial_configs=["default", "shared"]), ["nvidia.com/gpu"],
                          [cluster_node(n["name"]) for n in p["nodes"]], None, quota) == []


def test_a_node_listed_twice_is_refused_not_collapsed_into_its_last_entry():
    nodes = copy.deepcopy(LAB["gpushare_nodes"])
    nodes.append(dict(nodes[0], config=nodes[1]["config"]))
    result = run_preflight(params(checks=["input"], nodes=nodes))
    assert result["failed"] and result["msg"] == "%s: is listed twice. Fix: list each node once" % nodes[0]["name"]


def test_a_bad_coverage_setting_is_refused_before_step_1_naming_the_inventory_field():
    quota = dict(copy.deepcopy(LAB["gpushare_team_quota"]), coverage={"limits": {"nvidia.com/gpu": 1}})
    result = run_preflight(params(checks=["input"], team_quota=quota))
    assert result["failed"] and result["msg"] == (
        "gpushare_team_quota.coverage.limits['nvidia.com/gpu']: nvidia.com/gpu is limited by quota gpu-quota already "
        "(gpushare_team_quota.gpus units). Fix: remove it from gpushare_team_quota.coverage.limits, or from gpushare_team_quota.resources "
        "to limit it here")
    quota["coverage"] = {"name": "gpu-quota"}
    assert run_preflight(params(checks=["input"], team_quota=quota))["msg"].startswith(
        "gpushare_team_quota.coverage.name: 'gpu-quota' is the team's own quota (gpu-quota)")
    quota["coverage"] = {"uncoverd": []}
    assert run_preflight(params(checks=["input"], team_quota=quota))["msg"] == (
        "gpushare_team_quota.coverage: unknown key uncoverd. Fix: use name, limits, uncovered")


def test_cluster_errors_refuse_a_coverage_quota_name_another_holds_and_its_shrink():
    p = params(initial_configs=["default", "shared"])
    nodes = [cluster_node(n["name"]) for n in p["nodes"]]
    foreign = {"metadata": {"name": "gpushare-gpu-coverage", "namespace": "team-a"}, "spec": {"hard": {"pods": "10"}}}
    assert cluster_errors(p, ["nvidia.com/gpu"], nodes, None, None, foreign) == [
        "gpushare_team_quota.coverage.name: ResourceQuota team-a/gpushare-gpu-coverage exists and is not this collection's (no label "
        "app.kubernetes.io/managed-by=gpushare.k8s): it is left as it is. Fix: give the coverage quota another name in "
        "gpushare_team_quota.coverage.name, or delete that ResourceQuota if nothing needs it."]
    ours = {"metadata": {"name": "gpushare-gpu-coverage", "namespace": "team-a", "labels": {"app.kubernetes.io/managed-by": "gpushare.k8s"}},
            "spec": {"hard": {"requests.nvidia.com/mig-1g.10gb": "3"}},
            "status": {"hard": {"requests.nvidia.com/mig-1g.10gb": "3"}, "used": {"requests.nvidia.com/mig-1g.10gb": "3"}}}
    [error] = cluster_errors(p, ["nvidia.com/gpu"], nodes, None, None, ours)
    assert error.startswith("gpushare_team_quota.coverage.limits: quota team-a/gpushare-gpu-coverage would limit requests.nvidia.com/mig-1g.10gb "
                            "to 2, but 3 are already in use"), error
    assert cluster_errors(dict(p, allow_quota_shrink=True), ["nvidia.com/gpu"], nodes, None, None, ours) == []
