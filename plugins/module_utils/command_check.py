# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run a program and compare its exit code and output with what is expected (module gpushare.k8s.command_check).

No shell: the arguments are passed as they are. No Ansible import: pytest calls it.
"""

from __future__ import annotations

import json
import shlex
import subprocess

__all__ = ["run_check"]


def run_check(argv, expect_rc=0, expect_stdout=None, timeout=None):
    """Run ``argv``; return ``{rc, stdout, stderr, failed, msg}`` (stdout and stderr without their last newline)."""
    if not argv:
        return dict(failed=True, msg="argv: empty; give the program and its arguments, e.g. [/path/to/check.sh, file.yaml]")
    command = " ".join(shlex.quote(str(arg)) for arg in argv)
    try:
        proc = subprocess.run([str(arg) for arg in argv], capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return dict(failed=True, rc=None, stdout="", stderr="", msg="%s: no such program; install it first" % argv[0])
    except PermissionError:
        return dict(failed=True, rc=None, stdout="", stderr="", msg="%s: not executable; give it mode 0755" % argv[0])
    except subprocess.TimeoutExpired:
        return dict(failed=True, rc=None, stdout="", stderr="", msg="%s did not finish within %s s" % (command, timeout))
    stdout, stderr = proc.stdout.rstrip("\n"), proc.stderr.rstrip("\n")
    result = dict(rc=proc.returncode, stdout=stdout, stderr=stderr, cmd=command)
    if proc.returncode != expect_rc or (expect_stdout is not None and stdout != expect_stdout):
        want = "exit %d" % expect_rc + ("" if expect_stdout is None else " and print %s" % json.dumps(expect_stdout))
        result.update(failed=True, msg="%s should %s, but exited %d with stdout %s and stderr %s."
                      % (command, want, proc.returncode, json.dumps(stdout), json.dumps(stderr)))
    else:
        result.update(failed=False, msg="%s exited %d%s" % (command, proc.returncode, "" if expect_stdout is None else " and printed %s" % json.dumps(stdout)))
    return result
