# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live tests start ansible-playbook warm (warm_start.py): a warm run must be the script's run, output and exit."""
from __future__ import annotations

import json
import subprocess

import pytest

import warm_start
from conftest import REPO, VENV_BIN, subprocess_env


def both(*args, timeout=600):
    """The same ansible-playbook run started cold (the script, a new process) and warm; (cold, warm)."""
    argv = [str(VENV_BIN / "ansible-playbook"), *args]
    env = subprocess_env()
    cold = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    warm = warm_start.run(argv, env=env, cwd=str(REPO), timeout=timeout)
    return cold, warm


@pytest.mark.parametrize("args", [
    pytest.param(("playbooks/lab.yml", "--check", "--diff"), id="lab-check-diff"),
    pytest.param(("playbooks/lab.yml", "-e", json.dumps({"gpushare_mode": "bogus"})), id="bad-input"),
])
def test_a_warm_run_prints_and_exits_as_the_script_does(kubeconfig, args):
    cold, warm = both(*args)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_a_warm_run_past_its_timeout_is_killed_and_the_next_run_starts(tmp_path):
    slow = tmp_path / "slow.yml"
    slow.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.pause:\n        seconds: 30\n"
                    "    - ansible.builtin.debug:\n        msg: after the pause\n")
    argv = [str(VENV_BIN / "ansible-playbook"), str(slow)]
    run = {"env": subprocess_env(), "cwd": str(REPO)}
    with pytest.raises(subprocess.TimeoutExpired):
        warm_start.run(argv, timeout=3, **run)
    quick = tmp_path / "quick.yml"
    quick.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                     "    - ansible.builtin.debug:\n        msg: the next run\n")
    done = warm_start.run([argv[0], str(quick)], timeout=120, **run)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the next run" in done.stdout


def test_a_warm_run_sees_its_own_environment(tmp_path):
    # PYTEST_CURRENT_TEST changes with every test and does not start a server of its own (warm_start.PER_RUN): the
    # child must still see the run's value, not the one the server started with.
    show = tmp_path / "show.yml"
    show.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.debug:\n        msg: \"seen={{ lookup('ansible.builtin.env', 'PYTEST_CURRENT_TEST') }}\"\n")
    argv = [str(VENV_BIN / "ansible-playbook"), str(show)]
    for value in ("first value", "second value"):
        env = dict(subprocess_env(), PYTEST_CURRENT_TEST=value)
        done = warm_start.run(argv, env=env, cwd=str(REPO), timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"seen={value}" in done.stdout, done.stdout
