# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.guards import FilterModule
from ansible_collections.gpushare.k8s.plugins.module_utils.requests import guards as _guards

FILTERS = FilterModule().filters()
FILTER_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "filter")
LAB_VARS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "inventory", "group_vars", "all", "lab.yml")


def lab():
    with open(LAB_VARS, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_every_filter_has_documentation(name):
    with open(os.path.join(FILTER_DIR, name + ".yml"), encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    assert doc["DOCUMENTATION"]["name"] == name
    assert "_input" in doc["DOCUMENTATION"]["options"]
    yaml.safe_load(doc["EXAMPLES"])


def test_lab_inventory():
    data = lab()
    configs, nodes = data["gpushare_device_plugin_configs"], data["gpushare_nodes"]
    assert FILTERS["time_sliced_resources"](configs) == {"shared": ["nvidia.com/gpu"]}
    assert FILTERS["unshared_configs"](configs) == ["default"]
    assert FILTERS["config_label_errors"](nodes, list(configs)) == []
    assert len(FILTERS["config_label_errors"](nodes, ["default"])) == 1


def test_errors_become_filter_errors():
    with pytest.raises(AnsibleFilterError, match="replicas"):
        FILTERS["time_sliced_resources"]({"x": {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "gpu", "replicas": 1}]}}}})
    with pytest.raises(AnsibleFilterError, match="config name"):
        FILTERS["unshared_configs"]({"bad name!": {"version": "v1"}})
    with pytest.raises(AnsibleFilterError, match=r"^nodes: must be a list of nodes\. Fix: give the inventory's node entries"):
        FILTERS["config_label_errors"]("lab-node-0", [])


def test_admission_guard_params_on_the_lab_nodes_as_labelled_by_step_2():
    data = lab()
    configs = data["gpushare_device_plugin_configs"]
    nodes = [{"metadata": {"name": node["name"], "labels": {"nvidia.com/device-plugin.config": node["config"]} if "config" in node else {}}}
             for node in data["gpushare_nodes"]]
    params = FILTERS["admission_guard_params"](configs, nodes)
    assert [node["name"] for node in params["nodes"]] == ["lab-node-1"]
    assert params["names"] == ["nvidia.com/gpu"]
    assert FILTERS["admission_guard_params"](configs, nodes, label="example.com/config")["nodes"] == []
    assert FILTERS["admission_guard_params"](configs, None)["nodes"] == []


def test_admission_guard_params_errors_become_filter_errors():
    with pytest.raises(AnsibleFilterError, match="default_config"):
        FILTERS["admission_guard_params"](lab()["gpushare_device_plugin_configs"], [], default_config="missing")
    with pytest.raises(AnsibleFilterError, match="every node needs a name"):
        FILTERS["admission_guard_params"](lab()["gpushare_device_plugin_configs"], [{"labels": {}}])


ROLE_DEFAULTS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "admission_guard", "defaults", "main.yml")


def test_the_settings_filter_defaults_are_the_roles():
    with open(ROLE_DEFAULTS, encoding="utf-8") as handle:
        defaults = yaml.safe_load(handle)
    expected = {key[len("admission_guard_"):]: value for key, value in defaults.items()
                if key[len("admission_guard_"):] in FILTERS["admission_guard_settings"]({})}
    assert FILTERS["admission_guard_settings"]({}) == expected
    assert len(expected) == 6


def test_admission_guard_objects_and_manifest_on_the_lab_nodes():
    data = lab()
    nodes = [{"metadata": {"name": node["name"], "labels": {"nvidia.com/device-plugin.config": node["config"]} if "config" in node else {}}}
             for node in data["gpushare_nodes"]]
    params = FILTERS["admission_guard_params"](data["gpushare_device_plugin_configs"], nodes)
    objects = FILTERS["admission_guard_objects"](params, {"name": "lab-guard"})
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [("ValidatingAdmissionPolicy", "lab-guard"),
                                                                     ("ValidatingAdmissionPolicyBinding", "lab-guard")]
    assert list(yaml.safe_load_all(FILTERS["admission_guard_manifest"](params, {"name": "lab-guard"}))) == objects


@pytest.mark.parametrize("name", ["admission_guard_settings", "admission_guard_objects", "admission_guard_manifest"])
def test_a_bad_guard_name_becomes_a_filter_error_naming_the_variable(name):
    args = ({"name": "guard\n---\nkind: ClusterRoleBinding"},) if name == "admission_guard_settings" else (
        {}, {"name": "guard\n---\nkind: ClusterRoleBinding"})
    with pytest.raises(AnsibleFilterError, match=r"^admission_guard_name: 'guard\\n---\\nkind: ClusterRoleBinding' is not a DNS-1123 "
                                                 r"subdomain .*\. Fix: use a name such as gpushare-time-slicing-guard$"):
        FILTERS[name](*args)


PLAYBOOKS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "playbooks")


def test_the_lab_and_the_administrator_pass_the_guard_the_lab_default_config():
    """Both playbooks name the config the ClusterPolicy gives nodes without a label; the lab's is `default`."""
    assert lab()["gpushare_operator_default_config"] == "default"
    with open(os.path.join(PLAYBOOKS, "lab.yml"), encoding="utf-8") as handle:
        [lab_play] = yaml.safe_load(handle)
    with open(os.path.join(PLAYBOOKS, "rbac.yml"), encoding="utf-8") as handle:
        [rbac_play] = yaml.safe_load(handle)
    [rbac_entry] = [role for role in rbac_play["roles"] if role["role"] == "gpushare.k8s.admission_guard"]
    expected = "{{ gpushare_operator_default_config | default('default') }}"
    assert lab_play["vars"]["admission_guard_default_config"] == expected
    assert rbac_entry["admission_guard_default_config"] == expected


def test_a_node_without_a_config_label_is_judged_by_the_default_config():
    """lab-node-2 (MIG) carries no nvidia.com/device-plugin.config label: it runs whatever the default config is."""
    configs = lab()["gpushare_device_plugin_configs"]
    nodes = [{"name": "lab-node-0", "labels": {"nvidia.com/device-plugin.config": "default"}},
             {"name": "lab-node-1", "labels": {"nvidia.com/device-plugin.config": "shared"}},
             {"name": "lab-node-2", "labels": {"kubernetes.io/hostname": "lab-node-2"}}]
    pinned = {"spec": {"nodeName": "lab-node-2"}}
    # The lab's default config gives whole GPUs: lab-node-2 is not time-sliced, 2 GPUs pinned there pass.
    params = FILTERS["admission_guard_params"](configs, nodes, default_config="default")
    assert [(node["name"], node["config"]) for node in params["nodes"]] == [("lab-node-1", "shared")]
    assert _guards.reachable_nodes(pinned, params["nodes"]) == []
    # Were the default `shared`, the unlabelled node would slice nvidia.com/gpu, and a Pod pinned to it would reach it.
    params = FILTERS["admission_guard_params"](configs, nodes, default_config="shared")
    assert [(node["name"], node["config"]) for node in params["nodes"]] == [("lab-node-1", "shared"), ("lab-node-2", "shared")]
    assert _guards.reachable_nodes(pinned, params["nodes"]) == ["lab-node-2"]
    # Labelled nodes keep their own config whatever the default.
    assert "lab-node-0" not in [node["name"] for node in params["nodes"]]
