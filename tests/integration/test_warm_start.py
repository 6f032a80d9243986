# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live tests start ansible-playbook warm (warm_start.py): a warm run must be the script's run, output and exit."""
from __future__ import annotations

import json
import subprocess

import pytest

import warm_start
from conftest import REPO, VENV_BIN, subprocess_env

SCRIPT = str(VENV_BIN / "ansible-playbook")


def local_playbook(path, *tasks):
    """A playbook on localhost running `tasks` (YAML task texts, each a mapping's lines); its path."""
    path.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    + "".join("    - " + "\n      ".join(task.splitlines()) + "\n" for task in tasks))
    return str(path)


def warm(*args, env=None, timeout=120):
    return warm_start.run([SCRIPT, *args], env=env or subprocess_env(), cwd=str(REPO), timeout=timeout)


@pytest.mark.parametrize("args", [
    pytest.param(("playbooks/lab.yml", "--check", "--diff"), id="lab-check-diff"),
    pytest.param(("playbooks/lab.yml", "-e", json.dumps({"gpushare_mode": "bogus"})), id="bad-input"),
])
def test_a_warm_run_prints_and_exits_as_the_script_does(kubeconfig, args):
    cold = warm_start.cold([SCRIPT, *args], env=subprocess_env(), cwd=str(REPO), timeout=600)
    started_warm = warm(*args, timeout=600)
    assert (started_warm.returncode, started_warm.stdout, started_warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_a_warm_run_past_its_timeout_is_killed_and_the_next_run_starts(tmp_path):
    slow = local_playbook(tmp_path / "slow.yml", "ansible.builtin.pause:\n  seconds: 30",
                          "ansible.builtin.debug:\n  msg: after the pause")
    with pytest.raises(subprocess.TimeoutExpired):
        warm(slow, timeout=3)
    done = warm(local_playbook(tmp_path / "quick.yml", "ansible.builtin.debug:\n  msg: the next run"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the next run" in done.stdout


def test_a_warm_run_sees_its_own_environment(tmp_path):
    # PYTEST_CURRENT_TEST changes with every test and does not start a server of its own (warm_start.PER_RUN): the
    # child must still see the run's value, not the one the server started with.
    show = local_playbook(tmp_path / "show.yml",
                          "ansible.builtin.debug:\n  msg: \"seen={{ lookup('ansible.builtin.env', 'PYTEST_CURRENT_TEST') }}\"")
    for value in ("first value", "second value"):
        done = warm(show, env=dict(subprocess_env(), PYTEST_CURRENT_TEST=value))
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"seen={value}" in done.stdout, done.stdout
