# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""run_check: a program's exit code and output against what is expected, with a message that names both."""

from __future__ import annotations

import inspect
import os
import time

from ansible_collections.gpushare.k8s.plugins.module_utils.lab.command_check import run_check


def script(tmp_path, body, mode=0o755):
    path = tmp_path / "check.sh"
    path.write_text("#!/bin/sh\n" + body)
    os.chmod(path, mode)
    return str(path)


def test_a_program_that_exits_and_prints_what_is_expected_passes(tmp_path):
    result = run_check([script(tmp_path, 'echo OK\n'), "a file.yaml"], 0, "OK")
    assert result["failed"] is False and result["rc"] == 0 and result["stdout"] == "OK"
    assert result["cmd"].endswith("check.sh 'a file.yaml'")


def test_another_exit_code_fails_naming_the_command_the_code_and_both_outputs(tmp_path):
    path = script(tmp_path, 'echo OVER=trainer=2\necho two units >&2\nexit 1\n')
    result = run_check([path, "pod.yaml"], 0, "OK")
    assert result["failed"] and result["rc"] == 1
    assert result["msg"] == '%s pod.yaml should exit 0 and print "OK", but exited 1 with stdout "OVER=trainer=2" and stderr "two units".' % path


def test_the_right_exit_code_with_other_output_fails(tmp_path):
    assert run_check([script(tmp_path, 'echo ok\n')], 0, "OK")["failed"]
    assert not run_check([script(tmp_path, 'echo anything\n')], 0, None)["failed"]  # output not checked when unset


def test_a_missing_or_non_executable_program_is_named_with_the_fix(tmp_path):
    missing = run_check([str(tmp_path / "nowhere.sh")])
    assert missing["failed"] and "no such program" in missing["msg"]
    blocked = run_check([script(tmp_path, 'echo OK\n', mode=0o644)])
    assert blocked["failed"] and "not executable; give it mode 0755" in blocked["msg"]
    assert run_check([])["msg"].startswith("argv: empty")


def test_a_program_that_runs_too_long_is_stopped_with_what_it_started_and_the_command_named(tmp_path):
    marker = tmp_path / "left-running"
    path = script(tmp_path, 'echo started\n(sleep 3; touch %s) &\nsleep 30\n' % marker)
    started = time.monotonic()
    result = run_check([path, "pod.yaml"], 0, "OK", timeout=1)
    assert time.monotonic() - started < 10
    assert result == {"failed": True, "rc": None, "stdout": "started", "stderr": "", "cmd": "%s pod.yaml" % path,
                      "msg": "%s pod.yaml did not finish within 1 s and was stopped; find out what it waits for (run it by hand), "
                             "or give it longer with timeout" % path}
    time.sleep(4)
    assert not marker.exists(), "a process the program started outlived the timeout"


def test_the_timeout_is_two_minutes_unless_given_and_must_be_positive(tmp_path):
    assert inspect.signature(run_check).parameters["timeout"].default == 120
    path = script(tmp_path, 'echo OK\n')
    assert run_check([path], 0, "OK", timeout=None)["failed"] is False  # None: no limit
    assert run_check([path], 0, "OK", timeout=0) == {
        "failed": True, "msg": "timeout: 0 is not a number of seconds; give a positive number, e.g. 120"}


def test_the_program_reads_no_standard_input(tmp_path):
    result = run_check([script(tmp_path, 'cat\necho done\n')], 0, "done", timeout=10)
    assert result["failed"] is False, result
