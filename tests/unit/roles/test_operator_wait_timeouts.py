# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator waits of roles node_sharing and mig_node: a timeout per step, sized for a real operator, and no
task cap shorter than the wait.

Each role's wait task and its vars are rendered by ansible-core's own templating: the wait's ``timeout`` argument, and
the task's ``timeout`` keyword, which must stay above it so that neither the lab's play cap (``gpushare_task_timeout``,
180 s) nor any other cuts a wait short (tests/integration/test_gpu_operator_mode.py runs one under a 4 s play cap).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = Path(__file__).resolve().parents[3]
WAIT = "gpushare.k8s.gpu_operator_wait"
ROLES = {"node_sharing": ("tasks/main.yml", "device_plugin_timeout", 300), "mig_node": ("tasks/operator.yml", "mig_timeout", 1200)}


def _trusted(value):
    """What ansible-core's loader makes of a role's YAML: strings that may be templates."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: _trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


def _load(path):
    return _trusted(yaml.safe_load((ROOT / path).read_text()))


def _rendered(role, operator):
    """(the wait's timeout, the wait task's timeout keyword, its progress_interval) with ``<role>_operator: operator``."""
    tasks_file, _step, _default = ROLES[role]
    task = next(task for task in _load("roles/%s/%s" % (role, tasks_file)) if WAIT in task)
    templar = Templar(loader=DataLoader(), variables=dict(_load("roles/%s/vars/main.yml" % role), **{role + "_operator": operator}))
    args = task[WAIT]
    return templar.template(args["timeout"]), templar.template(task["timeout"]), templar.template(args["progress_interval"])


@pytest.mark.parametrize("role", sorted(ROLES))
def test_each_step_has_its_own_timeout_sized_for_a_real_operator(role):
    _tasks, step, default = ROLES[role]
    wait, cap, progress = _rendered(role, {})
    assert (wait, progress) == (default, 30.0)
    assert cap == wait + 60 and cap > 180  # above the lab's play cap
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"][role + "_operator"]["options"]
    assert options[step]["default"] == default
    assert options["device_plugin_timeout"]["default"] == 300 and options["mig_timeout"]["default"] == 1200
    assert "default" not in options["timeout"] and options["progress_interval"]["default"] == 30.0
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    assert defaults[role + "_operator"] == {}


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("operator, wait", [
    ({"device_plugin_timeout": 7, "mig_timeout": 9}, None),  # the role's own step
    ({"timeout": 5, "device_plugin_timeout": 7, "mig_timeout": 9}, 5),  # one timeout for every step wins
    ({"timeout": None, "mig_timeout": 3600, "device_plugin_timeout": 3600}, 3600),  # an hour: the task cap follows
])
def test_the_task_cap_is_always_above_the_wait_asked_for(role, operator, wait):
    expected = wait if wait is not None else operator[ROLES[role][1]]
    got, cap, _progress = _rendered(role, operator)
    assert (got, cap) == (expected, expected + 60)


def test_the_lab_sizes_each_step_for_a_real_operator():
    lab = yaml.safe_load((ROOT / "inventory" / "group_vars" / "all" / "lab.yml").read_text())
    assert lab["gpushare_operator_device_plugin_timeout"] == 300 and lab["gpushare_operator_mig_timeout"] == 1200
    assert lab["gpushare_operator_progress_interval"] == 30 and "gpushare_operator_timeout" not in lab
