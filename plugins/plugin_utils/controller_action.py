# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Base of the collection's action plugins that do a module's work in the controller.

ansible-core imports an action plugin's Python module once per playbook run, in the controller,
before it forks the worker of each task; a task then costs a fork and the API calls (milliseconds)
instead of a new Python process that imports ``kubernetes`` (0.7-0.9 s). A subclass names its
module, the argument spec and the function that does the work (``module_utils``, shared with the
module file). When the task's connection is not local (a task delegated to a bastion that holds the
kubeconfig), the module runs on that host instead, with the same code.

Setting the variable ``gpushare_in_controller: false`` runs the module on every connection (the
benchmarks compare both ways).
"""

from __future__ import annotations

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

LOCAL_CONNECTIONS = frozenset(("local", "ansible.builtin.local"))


class ControllerAction(ActionBase):
    """Validate the task's arguments with the module's spec, then run the module's function here."""

    _supports_check_mode = True
    _supports_async = False

    MODULE = ""  # the module's FQCN, run instead on a host that is not the controller
    ARGUMENT_SPEC: dict = {}
    MUTUALLY_EXCLUSIVE: list = []
    REQUIRED_ONE_OF: list = []
    SUPPORTS_DIFF = True

    def work(self, params, check_mode, diff):
        """Return the task's result for validated ``params``."""
        raise NotImplementedError

    def _runs_here(self, task_vars):
        if not boolean(task_vars.get("gpushare_in_controller", True), strict=False):
            return False
        return getattr(self._connection, "transport", None) in LOCAL_CONNECTIONS

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        if not self._runs_here(task_vars):
            result.update(self._execute_module(module_name=self.MODULE, module_args=self._task.args, task_vars=task_vars))
            return result
        validator = ArgumentSpecValidator(
            self.ARGUMENT_SPEC,
            mutually_exclusive=self.MUTUALLY_EXCLUSIVE or None,
            required_one_of=self.REQUIRED_ONE_OF or None,
        )
        validated = validator.validate(self._task.args)
        if validated.error_messages:
            result.update(failed=True, msg="%s: %s" % (self.MODULE, "; ".join(validated.error_messages)))
            return result
        outcome = self.work(
            validated.validated_parameters,
            check_mode=bool(self._task.check_mode),
            diff=bool(self._task.diff) and self.SUPPORTS_DIFF,
        )
        result.update(remove_values(outcome, validated._no_log_values))
        return result
