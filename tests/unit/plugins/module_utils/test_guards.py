# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.device_plugin import ConfigError
from ansible_collections.gpushare.k8s.plugins.module_utils.guards import (
    config_label_errors,
    guard_params,
    reachable_nodes,
    sliced_nodes,
    time_sliced_resources,
    unshared_configs,
)

# The table the live tests (tests/integration/test_admission_guard.py) send to the API server.
CASES_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "admission_guard_cases.yml")
with open(CASES_FILE, encoding="utf-8") as _handle:
    TABLE = yaml.safe_load(_handle)

DEFAULT = {"version": "v1", "flags": {"migStrategy": "none"}}
SHARED = {
    "version": "v1",
    "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
}
MPS = {"version": "v1", "sharing": {"mps": {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
LAB = {"default": DEFAULT, "shared": SHARED, "mps": MPS}


def sliced(fail=True, rename_by_default=False, **resource):
    item = {"name": "nvidia.com/gpu", "replicas": 2}
    item.update(resource)
    block = {"resources": [item]}
    if fail is not None:
        block["failRequestsGreaterThanOne"] = fail
    if rename_by_default:
        block["renameByDefault"] = True
    return {"version": "v1", "sharing": {"timeSlicing": block}}


def test_lab_configs():
    assert time_sliced_resources(LAB) == {"shared": ["nvidia.com/gpu"]}
    assert unshared_configs(LAB) == ["default"]


@pytest.mark.parametrize(
    "config, expected",
    [
        (sliced(), ["nvidia.com/gpu"]),
        (sliced(rename_by_default=True), ["nvidia.com/gpu.shared"]),
        (sliced(rename="nvidia.com/gpu-sliced"), ["nvidia.com/gpu-sliced"]),
        (sliced(name="gpu"), ["nvidia.com/gpu"]),  # prefix added, as upstream
        (sliced(name="nvidia.com/mig-1g.10gb"), ["nvidia.com/mig-1g.10gb"]),
    ],
)
def test_advertised_names_are_guarded(config, expected):
    assert time_sliced_resources({"ts": config}) == {"ts": expected}


@pytest.mark.parametrize("fail", [False, None])
def test_time_slicing_without_fail_requests_is_left_out_unless_asked(fail):
    assert time_sliced_resources({"ts": sliced(fail=fail)}) == {}
    assert time_sliced_resources({"ts": sliced(fail=fail)}, require_fail_requests=False) == {"ts": ["nvidia.com/gpu"]}


def test_several_resources_are_sorted_and_configs_given_as_text():
    config = {"version": "v1", "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [
        {"name": "nvidia.com/mig-1g.10gb", "replicas": 2}, {"name": "nvidia.com/gpu", "replicas": 2}]}}}
    text = "version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n    resources:\n      - {name: gpu, replicas: 3}\n"
    assert time_sliced_resources({"b": config, "a": text}) == {"a": ["nvidia.com/gpu"], "b": ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]}


def test_invalid_configs_are_refused_with_the_config_name():
    with pytest.raises(ConfigError, match=r"^broken: sharing.timeSlicing.resources\[0\].replicas: must be 2 or more"):
        time_sliced_resources({"broken": sliced(replicas=1)})
    with pytest.raises(ConfigError, match="mapping"):
        unshared_configs(["default"])


NODES = [{"name": "lab-node-0", "gpus": 2, "config": "default"}, {"name": "lab-node-1", "gpus": 2, "config": "shared"},
         {"name": "lab-node-2", "gpus": 2, "mig": {"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb"}}]


def test_labels_naming_existing_keys_pass():
    assert config_label_errors(NODES, ["default", "shared", "mps"]) == []
    assert config_label_errors([], None) == []


def test_label_naming_a_missing_key_names_node_value_keys_and_fix():
    errors = config_label_errors(NODES, ["mps", "default"], configmap="cm", namespace="ns")
    assert errors == [
        "node lab-node-1: label nvidia.com/device-plugin.config=shared names no key of ConfigMap ns/cm (its keys: default, mps); "
        "the device plugin's config manager would crash-loop on it. Fix: add key 'shared' to the ConfigMap before labelling "
        "(role gpushare.k8s.device_plugin_config), or set the node's config to one of its keys."
    ]


def test_a_close_key_is_suggested_and_every_offender_reported():
    errors = config_label_errors(NODES, ["sharde"], label="example.com/config")
    assert len(errors) == 2
    assert errors[0].startswith("node lab-node-0: label example.com/config=default")
    assert errors[1].endswith("(did you mean 'sharde'?).")
    assert "(its keys: no keys at all)" in config_label_errors(NODES[:1], [])[0]


def test_a_missing_configmap_is_one_error_listing_every_label():
    (error,) = config_label_errors(NODES, None)
    assert error.startswith("ConfigMap gpu-share/device-plugin-configs does not exist")
    assert "would label: lab-node-0=default, lab-node-1=shared" in error
    assert "node_sharing_check_config_labels: false" in error


def test_bad_node_lists_are_refused():
    with pytest.raises(ConfigError, match=r"^nodes: must be a list of nodes\. Fix: give the inventory's node entries"):
        config_label_errors({"name": "x"}, [])
    with pytest.raises(ConfigError, match=r"^nodes: each node must be a mapping with at least name and config\. Fix: write e\.g\."):
        config_label_errors([{"config": "default"}], [])


# --- The admission guard: which nodes are time-sliced, and which of them a Pod reaches ---------------------------


def case_pod(placement):
    """A Pod with the placement of a table case (the live tests build theirs the same way)."""
    spec = {"containers": [{"name": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    spec.update({key: value for key, value in placement.items() if key != "terms"})
    if "terms" in placement:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": placement["terms"]}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "case"}, "spec": spec}


def test_the_table_slices_two_nodes_and_leaves_the_whole_and_cpu_nodes_out():
    params = guard_params(TABLE["configs"], TABLE["nodes"], ignored_labels=TABLE["ignored_labels"])
    assert [(n["name"], n["config"], n["resources"]) for n in params["nodes"]] == [
        ("guard-busy", "busy", ["nvidia.com/gpu"]), ("guard-shared", "shared", ["nvidia.com/gpu"])]
    # every label, for selection by any of them, but those whose values change on their own
    assert params["nodes"][1]["labels"] == {k: v for k, v in TABLE["nodes"][0]["labels"].items() if k != "nvidia.com/gfd.timestamp"}
    assert params["ignored"] == ["nvidia.com/gfd.timestamp"]
    assert params["names"] == ["nvidia.com/gpu"]
    assert params["unshared"] == ["default"] and params["unknown"] == []


@pytest.mark.parametrize("case", TABLE["cases"], ids=[case["id"] for case in TABLE["cases"]])
def test_table_case_reaches_exactly_the_listed_sliced_nodes(case):
    sliced = guard_params(TABLE["configs"], TABLE["nodes"], ignored_labels=TABLE["ignored_labels"])["nodes"]
    assert reachable_nodes(case_pod(case["placement"]), sliced, ignored_labels=TABLE["ignored_labels"]) == case["reaches"]


def test_without_ignoring_it_a_volatile_label_pins_like_any_other():
    sliced = guard_params(TABLE["configs"], TABLE["nodes"])["nodes"]
    assert reachable_nodes(case_pod({"nodeSelector": {"nvidia.com/gfd.timestamp": "1"}}), sliced) == []
    with pytest.raises(ConfigError, match="ignored_labels: must be a list of label keys"):
        guard_params(TABLE["configs"], TABLE["nodes"], ignored_labels="nvidia.com/gfd.timestamp")


def test_reachability_counts_every_node_not_only_sliced_ones():
    assert reachable_nodes(case_pod({"nodeSelector": {"nvidia.com/gpu.replicas": "1"}}), TABLE["nodes"]) == ["guard-whole"]
    assert reachable_nodes({"spec": {}}, TABLE["nodes"]) == [node["name"] for node in TABLE["nodes"]]
    # An empty term matches no node (as the scheduler reads it), so a Pod made only of one reaches nothing.
    assert reachable_nodes(case_pod({"terms": [{}]}), TABLE["nodes"]) == []


def test_node_objects_as_the_api_returns_them():
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"nvidia.com/device-plugin.config": "shared"}},
              "status": {}}, {"metadata": {"name": "n0"}}]
    assert sliced_nodes(nodes, TABLE["configs"]) == [
        {"name": "n1", "config": "shared", "labels": {"nvidia.com/device-plugin.config": "shared"}, "resources": ["nvidia.com/gpu"], "known": True}]


def test_default_config_applies_to_unlabelled_nodes_only():
    nodes = [{"name": "bare"}, {"name": "whole", "labels": {"cfg": "default"}}]
    assert [n["name"] for n in sliced_nodes(nodes, TABLE["configs"], label="cfg", default_config="shared")] == ["bare"]
    assert sliced_nodes(nodes, TABLE["configs"], label="cfg") == []
    with pytest.raises(ConfigError, match="default_config: names config 'missing'"):
        sliced_nodes(nodes, TABLE["configs"], default_config="missing")


def test_a_node_naming_an_unknown_config_counts_as_slicing_every_name():
    configs = {"default": DEFAULT, "a": sliced(), "b": sliced(name="nvidia.com/mig-1g.10gb")}
    params = guard_params(configs, [{"name": "odd", "labels": {"nvidia.com/device-plugin.config": "typo"}}])
    assert params["nodes"][0]["resources"] == ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]
    assert params["unknown"] == ["odd"]
    # Nothing is time-sliced anywhere: nothing to guard, even on that node.
    assert guard_params({"default": DEFAULT}, [{"name": "odd", "labels": {"nvidia.com/device-plugin.config": "typo"}}])["nodes"] == []


def test_mps_and_time_slicing_without_fail_requests_are_not_guarded():
    nodes = [{"name": "m", "labels": {"nvidia.com/device-plugin.config": "mps"}},
             {"name": "t", "labels": {"nvidia.com/device-plugin.config": "ts"}}]
    assert guard_params({"mps": MPS, "ts": sliced(fail=False)}, nodes)["nodes"] == []


def test_fix_names_the_unshared_configs_and_renameByDefault():
    fix = guard_params(LAB, [{"name": "n", "labels": {"nvidia.com/device-plugin.config": "shared"}}])["fixes"]["nvidia.com/gpu"]
    assert "nodeSelector nvidia.com/device-plugin.config: default" in fix
    assert "set renameByDefault: true in the timeSlicing section of config shared" in fix
    assert "advertised as nvidia.com/gpu.shared" in fix


def test_fix_for_renamed_slices_and_without_unshared_configs():
    configs = {"renamed": sliced(rename_by_default=True)}
    fix = guard_params(configs, [{"name": "n", "labels": {"nvidia.com/device-plugin.config": "renamed"}}])["fixes"]["nvidia.com/gpu.shared"]
    assert "renameByDefault does not help" in fix
    assert "label them with a config that has no sharing section" in fix


@pytest.mark.parametrize("nodes, match", [
    (["lab-node-0"], "each node must be a mapping"),
    ([{"labels": {}}], "every node needs a name"),
    ([{"name": "a", "labels": ["x"]}], "labels must be a mapping"),
    ([{"name": "a"}, {"metadata": {"name": "a"}}], "node a is listed twice"),
])
def test_bad_node_entries_are_refused(nodes, match):
    with pytest.raises(ConfigError, match=match):
        sliced_nodes(nodes, LAB)
