#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: command_check
short_description: Run a check program and require its exit code and output
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - Runs O(argv) (no shell, no C(~) expansion) and fails, naming the command, its exit code, its output and its errors, unless it exits
    O(expect_rc) and, when O(expect_stdout) is set, prints exactly that (without the last newline).
  - What M(ansible.builtin.command) and an M(ansible.builtin.assert) on its result do together, in one task. The lab
    self-tests its installed C(bin/check-request.sh) with it. Runs in the controller when the task's connection is local
    (a fork and the program, instead of a module process), and as a module on any other connection.
  - The program runs in a process group of its own, with no standard input.
  - A check program changes nothing, so the task never reports a change. It is skipped in check mode (the program
    may not be installed yet).
extends_documentation_fragment:
  - gpushare.k8s.attributes
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
options:
  argv:
    description: The program and its arguments.
    type: list
    elements: str
    required: true
  expect_rc:
    description: The exit code the program must return.
    type: int
    default: 0
  expect_stdout:
    description: What the program must print on standard output (without its last newline); not checked when unset.
    type: str
  timeout:
    description:
      - Seconds the program may run. Then it is stopped, with every process it started in its process group, and the
        task fails naming the command and showing what it printed until then.
    type: int
    default: 120
seealso:
  - module: ansible.builtin.command
"""

EXAMPLES = r"""
- name: The installed script passes a manifest that asks for one unit per container
  gpushare.k8s.command_check:
    argv: [/home/lab/gpushare/bin/check-request.sh, /home/lab/gpushare/k8s/mig-job.yaml]
    expect_stdout: OK
"""

RETURN = r"""
rc:
  description: The program's exit code.
  returned: when it ran
  type: int
stdout:
  description: What it printed on standard output, without the last newline.
  returned: always
  type: str
stderr:
  description: What it printed on standard error, without the last newline.
  returned: always
  type: str
cmd:
  description: The command, quoted as a shell would need it.
  returned: when it ran
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpushare.k8s.plugins.module_utils.lab.command_check import DEFAULT_TIMEOUT, run_check


def main(module_class=AnsibleModule):
    module = module_class(
        argument_spec=dict(
            argv=dict(type="list", elements="str", required=True),
            expect_rc=dict(type="int", default=0),
            expect_stdout=dict(type="str"),
            timeout=dict(type="int", default=DEFAULT_TIMEOUT),
        ),
        supports_check_mode=False,
    )
    result = run_check(module.params["argv"], module.params["expect_rc"], module.params["expect_stdout"], module.params["timeout"])
    if result.pop("failed"):
        module.fail_json(changed=False, **result)
    # failed=False said outright: ansible-core takes a result with a non-zero rc and no "failed" key for a failure,
    # and expect_rc may be non-zero.
    module.exit_json(changed=False, failed=False, **result)


if __name__ == "__main__":
    main()
