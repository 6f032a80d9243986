# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.device_plugin import ConfigError
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.guards import (
    config_label_errors,
    guard_manifest,
    guard_objects,
    guard_params,
    guard_settings,
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
        (sliced(rename="nvidia.com/gpu-sliced"), ["nvidia.com/gpu"]),  # NVIDIA's plugin v0.18.0 ignores rename
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


ROUTES = TABLE["routes"]
LAB_VARS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "inventory", "group_vars", "all", "lab.yml")


def route_pod(case):
    """A route of the table as a Pod (tests/integration/test_admission_guard.py sends the same to the API server)."""
    pod = case_pod(case["placement"])
    containers = case.get("containers") or [{"name": "cuda", "gpus": 2}]
    spec = pod["spec"]
    spec["containers"], init = [], []
    for container in containers:
        entry = {"name": container["name"], "resources": {"limits": {"nvidia.com/gpu": str(container["gpus"])}}}
        if container.get("sidecar"):
            entry["restartPolicy"] = "Always"
        (init if container.get("init") or container.get("sidecar") else spec["containers"]).append(entry)
    if init:
        spec["initContainers"] = init
    return pod


def test_the_route_table_is_the_lab_layout():
    """The routes' nodes and configs are the inventory's (their labels and outcomes are written by hand)."""
    with open(LAB_VARS, encoding="utf-8") as handle:
        lab = yaml.safe_load(handle)
    assert ROUTES["configs"] == lab["gpushare_device_plugin_configs"]
    assert ROUTES["default_config"] == lab["gpushare_operator_default_config"]
    assert [(node["name"], node["labels"].get("nvidia.com/device-plugin.config")) for node in ROUTES["nodes"]] == [
        (node["name"], node.get("config")) for node in lab["gpushare_nodes"]]


def test_on_the_lab_layout_only_lab_node_1_is_time_sliced():
    params = guard_params(ROUTES["configs"], ROUTES["nodes"], default_config=ROUTES["default_config"])
    assert [(node["name"], node["config"], node["resources"]) for node in params["nodes"]] == [("lab-node-1", "shared", ["nvidia.com/gpu"])]


@pytest.mark.parametrize("case", ROUTES["cases"], ids=[case["id"] for case in ROUTES["cases"]])
def test_route_reaches_exactly_the_listed_sliced_nodes(case):
    sliced = guard_params(ROUTES["configs"], ROUTES["nodes"], default_config=ROUTES["default_config"])["nodes"]
    assert reachable_nodes(route_pod(case), sliced) == case["reaches"]


def test_node_name_decides_whatever_the_selector_or_affinity_say():
    """Hand-written: a Pod with nodeName runs on that node's kubelet, which allocates devices before it checks the rest."""
    nodes = ROUTES["nodes"]
    contradicting = {"nodeSelector": {"kubernetes.io/hostname": "lab-node-0"}}
    assert reachable_nodes(case_pod({"nodeName": "lab-node-1", **contradicting}), nodes) == ["lab-node-1"]
    assert reachable_nodes(case_pod({"nodeName": "lab-node-1", "terms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["lab-node-0"]}]}]}), nodes) == ["lab-node-1"]
    assert reachable_nodes(case_pod({"nodeName": "lab-node-1", "terms": [{}]}), nodes) == ["lab-node-1"]
    assert reachable_nodes(case_pod({"nodeName": "lab-node-2", "nodeSelector": {"kubernetes.io/hostname": "lab-node-1"}}), nodes) == ["lab-node-2"]
    assert reachable_nodes(case_pod({"nodeName": "not-a-node", **contradicting}), nodes) == []
    # Without nodeName the selector decides.
    assert reachable_nodes(case_pod(contradicting), nodes) == ["lab-node-0"]


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


# --- The policy and its binding, built as data ---------------------------------------------------------------------


LAB_SLICED = [{"name": "lab-node-0", "labels": {"nvidia.com/device-plugin.config": "default"}},
              {"name": "lab-node-1", "labels": {"nvidia.com/device-plugin.config": "shared", "kubernetes.io/hostname": "lab-node-1"}}]


def variables_of(policy):
    return {variable["name"]: variable["expression"] for variable in policy["spec"]["variables"]}


def test_the_guard_objects_carry_the_snapshot_as_cel_literals():
    policy, binding = guard_objects(guard_params(LAB, LAB_SLICED), {})
    assert (policy["apiVersion"], policy["kind"], policy["metadata"]) == (
        "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", {"name": "gpushare-time-slicing-guard"})
    variables = variables_of(policy)
    assert variables["nodes"] == '["lab-node-1"]'
    assert variables["nodeLabels"] == '{"lab-node-1": {"kubernetes.io/hostname": "lab-node-1", "nvidia.com/device-plugin.config": "shared"}}'
    assert variables["nodeConfigs"] == '{"lab-node-1": "shared"}'
    assert variables["nodeResources"] == '{"lab-node-1": ["nvidia.com/gpu"]}'
    assert variables["names"] == '["nvidia.com/gpu"]'
    assert variables["configLabel"] == '"nvidia.com/device-plugin.config"'
    assert variables["ignoredLabels"] == "[''].filter(x, false)"
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}
    assert binding == {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                       "metadata": {"name": "gpushare-time-slicing-guard"},
                       "spec": {"policyName": "gpushare-time-slicing-guard", "validationActions": ["Deny"]}}


def test_reachable_starts_from_node_name_alone():
    reachable = variables_of(guard_objects({}, {})[0])["reachable"]
    assert reachable.startswith("variables.nodes.filter(n,\n  variables.nodeName != '' ? variables.nodeName == n\n  : (")


def test_without_sliced_nodes_the_lists_stay_typed_and_settings_shape_the_objects():
    settings = {"name": "my.guard", "config_label": "example.com/config", "failure_policy": "Ignore", "excluded_namespaces": [],
                "validation_actions": ["Warn", "Audit"], "namespace_selector": {"matchLabels": {"example.com/guarded": "yes"}}}
    policy, binding = guard_objects(guard_params(LAB, []), settings)
    variables = variables_of(policy)
    assert (variables["nodes"], variables["nodeLabels"], variables["names"]) == ("[''].filter(x, false)", "{}", "[''].filter(x, false)")
    assert variables["configLabel"] == '"example.com/config"'
    assert "namespaceSelector" not in policy["spec"]["matchConstraints"]
    assert policy["spec"]["failurePolicy"] == "Ignore"
    assert binding["spec"] == {"policyName": "my.guard", "validationActions": ["Warn", "Audit"],
                               "matchResources": {"namespaceSelector": {"matchLabels": {"example.com/guarded": "yes"}}}}


def test_the_manifest_loads_to_exactly_the_objects():
    params = guard_params(LAB, LAB_SLICED)
    text = guard_manifest(params, {})
    assert list(yaml.safe_load_all(text)) == guard_objects(params, {})
    assert text.startswith("# Refuse Pods asking for more than one slice of a time-sliced GPU at the API")
    assert "# Time-sliced nodes: lab-node-1.\n" in text
    assert "    # The sliced nodes this Pod may land on. With nodeName, that node and no other" in text


def test_a_hostile_label_stays_a_string_inside_the_policy():
    """Labels come from the cluster's (or an inventory's) Nodes: whatever they hold, it is data in a CEL literal."""
    hostile = "x'\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding"
    nodes = [{"name": "n", "labels": {"nvidia.com/device-plugin.config": "shared", "evil": hostile}}]
    params = guard_params(LAB, nodes)
    documents = list(yaml.safe_load_all(guard_manifest(params, {})))
    assert [document["kind"] for document in documents] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert yaml.safe_load(variables_of(documents[0])["nodeLabels"]) == {"n": {"evil": hostile, "nvidia.com/device-plugin.config": "shared"}}


@pytest.mark.parametrize("name", [
    "guard\n---\napiVersion: v1\nkind: Namespace",
    "guard\n",  # re.match(...$) lets this one pass
    "Guard", "-guard", "guard-", "guard..x", "guard_x", "", "g" * 254, None, 7,
])
def test_a_bad_guard_name_is_refused_with_the_variable_and_the_fix(name):
    with pytest.raises(ConfigError, match=r"^admission_guard_name: .* is not a DNS-1123 subdomain .*\. Fix: use a name such as "
                                          r"gpushare-time-slicing-guard$"):
        guard_objects({}, {"name": name})
    with pytest.raises(ConfigError, match=r"^admission_guard_name: "):
        guard_manifest({}, {"name": name})


@pytest.mark.parametrize("name", ["gpushare-time-slicing-guard", "a", "guard.example.com", "0-guard", "g" * 253])
def test_dns_subdomain_names_are_accepted(name):
    assert guard_settings({"name": name})["name"] == name


@pytest.mark.parametrize("settings, match", [
    ({"validation_actions": ["Deny", "Warn"]}, r"^admission_guard_validation_actions: is \['Deny', 'Warn'\]; the API server needs at least "
                                               r"one of Deny, Warn and Audit, each once, and refuses Deny together with Warn\. Fix: use \[Deny\]"),
    ({"validation_actions": []}, r"^admission_guard_validation_actions: is \[\]"),
    ({"validation_actions": ["Deny", "Deny"]}, r"^admission_guard_validation_actions: is \['Deny', 'Deny'\]"),
    ({"failure_policy": "fail"}, r"^admission_guard_failure_policy: must be Fail or Ignore, got 'fail'"),
    ({"config_label": "a b"}, r"^admission_guard_config_label: 'a b' is not a label key"),
    ({"excluded_namespaces": "kube-system"}, r"^admission_guard_excluded_namespaces: must be a list of namespace names"),
    ({"excluded_namespaces": ["kube-system\n"]}, r"^admission_guard_excluded_namespaces: must be a list of namespace names"),
    ({"namespace_selector": {"labels": {}}}, r"^admission_guard_namespace_selector: must be a label selector"),
    ({"nmae": "x"}, r"^admission_guard_nmae: is not a setting of the admission guard\. Fix: use one of admission_guard_name, "),
    ("guard", r"^admission_guard_settings: must be a mapping, got str"),
])
def test_bad_settings_are_refused_with_the_variable_and_the_fix(settings, match):
    with pytest.raises(ConfigError, match=match):
        guard_settings(settings)


def test_settings_take_the_role_defaults():
    assert guard_settings({}) == {"name": "gpushare-time-slicing-guard", "config_label": "nvidia.com/device-plugin.config",
                                  "failure_policy": "Fail", "excluded_namespaces": ["kube-system"], "validation_actions": ["Deny"],
                                  "namespace_selector": {}}
