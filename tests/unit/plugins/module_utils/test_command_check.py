# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""run_check: a program's exit code and output against what is expected, with a message that names both."""

from __future__ import annotations

import os

from ansible_collections.gpushare.k8s.plugins.module_utils.command_check import run_check


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
