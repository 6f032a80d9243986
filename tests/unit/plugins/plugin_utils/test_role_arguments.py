# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one-task role argument check (gpushare.k8s.role_argument_check) and the lab playbook that relies on it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.plugin_utils import role_arguments

REPO = Path(__file__).resolve().parents[4]
LAB = yaml.safe_load((REPO / "playbooks" / "lab.yml").read_text())[0]


def lab_tasks():
    return [task for block in LAB["tasks"] for task in block["block"]]


def test_every_role_with_an_argument_spec_has_a_main_entry_point():
    roles = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/meta/argument_specs.yml"))
    assert "placement" in roles and len(roles) > 10
    for role in roles:
        assert role_arguments.options(role), role
    assert role_arguments.options("gpushare.k8s.placement") is role_arguments.options("placement")


@pytest.mark.parametrize("name", ["nope", "kubernetes.core.k8s", "../placement", "other.collection.placement", ""])
def test_an_unknown_role_is_refused_naming_the_known_ones(name):
    with pytest.raises(InputError) as error:
        role_arguments.role_name(name)
    assert error.value.path == "roles"
    assert "is not a role of gpushare.k8s with an argument spec" in error.value.problem
    assert "placement" in error.value.fix


def test_an_unknown_entry_point_is_refused():
    with pytest.raises(InputError, match="role gpushare.k8s.placement has no entry point 'nope'. Fix: name one of main"):
        role_arguments.options("placement", "nope")


def test_a_wrong_type_names_the_role_the_variable_and_where_its_value_came_from():
    lines = role_arguments.errors("quota_coverage", {"quota_coverage_namespaces": {"team-a": 1}},
                                  {"quota_coverage_namespaces": "{{ gpushare_quota_coverage_namespaces }}"})
    assert lines == ["gpushare.k8s.quota_coverage: argument 'quota_coverage_namespaces' is of type dict and we were unable "
                     "to convert to list: <class 'dict'> cannot be converted to a list"
                     " (quota_coverage_namespaces is {{ gpushare_quota_coverage_namespaces }})"]


def test_a_value_outside_the_choices_names_where_it_came_from_too():
    lines = role_arguments.errors("gpu_sharing", {"gpu_sharing_mig_strategy": "bogus", "gpu_sharing_mig_timeout": 1200,
                                                  "gpu_sharing_configs": {"default": {"version": "v1"}}},
                                  {"gpu_sharing_mig_strategy": "{{ gpushare_operator_mig_strategy | default('mixed') }}",
                                   "gpu_sharing_mig_timeout": "{{ gpushare_operator_mig_timeout | default(1200) }}"})
    assert lines == ["gpushare.k8s.gpu_sharing: value of gpu_sharing_mig_strategy must be one of: single, mixed, got: bogus"
                     " (gpu_sharing_mig_strategy is {{ gpushare_operator_mig_strategy | default('mixed') }})"]


def test_every_error_of_a_role_is_reported_and_good_values_pass():
    assert role_arguments.errors("team_quota", {"team_quota_gpus": 2, "team_quota_name": "gpu-quota"}) == []
    lines = role_arguments.errors("team_quota", {"team_quota_gpus": "four", "team_quota_pods": "not a list of dicts"})
    assert all(line.startswith("gpushare.k8s.team_quota: ") for line in lines), lines
    assert any("argument 'team_quota_gpus' is of type str" in line for line in lines), lines
    assert any("option 'team_quota_pods' is of type str" in line for line in lines), lines


def test_the_lab_checks_exactly_the_roles_it_imports_unchecked():
    tasks = lab_tasks()
    check = [task for task in tasks if "gpushare.k8s.role_argument_check" in task]
    assert len(check) == 1
    checked = check[0]["gpushare.k8s.role_argument_check"]["roles"]
    unchecked = [task["ansible.builtin.import_role"]["name"].split(".")[-1] for task in tasks
                 if task.get("ansible.builtin.import_role", {}).get("rolespec_validate") is False]
    assert sorted(set(unchecked)) == sorted(checked)
    # before every role it checks: right after the preflight (whose messages name the inventory's variables)
    names = [task["name"] for task in tasks]
    assert names.index(check[0]["name"]) == 1 and "lab_preflight" in names[0]


def test_every_role_variable_the_lab_sets_is_an_option_of_its_role():
    """A misspelt variable would be read by neither the check nor the role: refuse it here."""
    checked = lab_tasks()[1]["gpushare.k8s.role_argument_check"]["roles"]
    for variable in LAB["vars"]:
        role = next((name for name in sorted(checked, key=len, reverse=True) if variable.startswith(name + "_")), None)
        assert role is not None, "%s belongs to none of the checked roles" % variable
        assert variable in role_arguments.options(role), "%s is not an option of role %s" % (variable, role)
    for task in lab_tasks():
        role = task.get("ansible.builtin.import_role", {})
        if role.get("rolespec_validate") is False:
            for variable in task.get("vars", {}):
                assert variable in role_arguments.options(role["name"]), variable
