# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run a program and compare its exit code and output with what is expected (module gpushare.k8s.command_check).

No shell: the arguments are passed as they are. The program runs in a process group of its own, stopped whole (the
programs it started too) when it runs longer than its timeout. No Ansible import: pytest calls it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess

__all__ = ["DEFAULT_TIMEOUT", "run_check"]

# Seconds a check program may run before it is stopped (the module's default).
DEFAULT_TIMEOUT = 120


def _stop(proc):
    """Kill ``proc``'s process group (it leads one of its own) and collect what it printed until then."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        return proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a process that left the group still holds the output open: give up on it
        return "", ""


def run_check(argv, expect_rc=0, expect_stdout=None, timeout=DEFAULT_TIMEOUT):
    """Run ``argv``; return ``{rc, stdout, stderr, failed, msg}`` (stdout and stderr without their last newline).

    The program is stopped after ``timeout`` seconds (None: no limit), and the check fails naming it.
    """
    if not argv:
        return dict(failed=True, msg="argv: empty; give the program and its arguments, e.g. [/path/to/check.sh, file.yaml]")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        return dict(failed=True, msg="timeout: %r is not a number of seconds; give a positive number, e.g. %d" % (timeout, DEFAULT_TIMEOUT))
    command = " ".join(shlex.quote(str(arg)) for arg in argv)
    try:
        # not AnsibleModule.run_command: the program's own session, stopped after timeout (run_command has no timeout),
        # and the controller path has no AnsibleModule (plugin_utils/controller_action.py)
        proc = subprocess.Popen([str(arg) for arg in argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # pylint: disable=ansible-bad-function
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    except FileNotFoundError:
        return dict(failed=True, rc=None, stdout="", stderr="", msg="%s: no such program; install it first" % argv[0])
    except PermissionError:
        return dict(failed=True, rc=None, stdout="", stderr="", msg="%s: not executable; give it mode 0755" % argv[0])
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = _stop(proc)
        return dict(failed=True, rc=None, stdout=(out or "").rstrip("\n"), stderr=(err or "").rstrip("\n"), cmd=command,
                    msg="%s did not finish within %s s and was stopped; find out what it waits for (run it by hand), or give "
                        "it longer with timeout" % (command, timeout))
    stdout, stderr = out.rstrip("\n"), err.rstrip("\n")
    result = dict(rc=proc.returncode, stdout=stdout, stderr=stderr, cmd=command)
    if proc.returncode != expect_rc or (expect_stdout is not None and stdout != expect_stdout):
        want = "exit %d" % expect_rc + ("" if expect_stdout is None else " and print %s" % json.dumps(expect_stdout))
        result.update(failed=True, msg="%s should %s, but exited %d with stdout %s and stderr %s."
                      % (command, want, proc.returncode, json.dumps(stdout), json.dumps(stderr)))
    else:
        result.update(failed=False, msg="%s exited %d%s" % (command, proc.returncode, "" if expect_stdout is None else " and printed %s" % json.dumps(stdout)))
    return result
