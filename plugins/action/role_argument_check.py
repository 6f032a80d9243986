# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""gpushare.k8s.role_argument_check: several roles' argument specs checked in one task, in the controller."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.plugin_utils import role_arguments
from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import plain, warm_template_plugins

# The arguments it checks are templated with the collection's filters: load them in the controller, before the forks,
# so this task's worker and every later one inherit them (the first task of a play that is the collection's own).
warm_template_plugins()

ARGUMENT_SPEC = dict(
    roles=dict(type="list", elements="str", required=True),
    entry_point=dict(type="str", default="main"),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _validated, args = self.validate_argument_spec(ARGUMENT_SPEC)
        lines = []
        checked = []
        for name in args["roles"]:
            try:
                options = role_arguments.options(name, args["entry_point"])
            except InputError as error:
                return dict(result, failed=True, msg=str(error))
            # the values as a module process would receive them (plain types, not ansible-core's tagged ones)
            raw = {variable: task_vars[variable] for variable in options if variable in task_vars}
            sources = {variable: value.strip() for variable, value in raw.items() if isinstance(value, str) and "{{" in value}
            lines.extend(role_arguments.errors(name, plain(self._templar.template(raw)), sources, args["entry_point"]))
            checked.append(role_arguments.role_name(name))
        result.update(changed=False, roles=checked)
        if lines:
            result.update(failed=True, argument_errors=lines, msg=(
                "The arguments of %d role(s) do not match their argument specs:\n%s\n"
                "Fix: correct these variables (ansible-doc -t role %s.<role> describes each)"
                % (len({line.split(":", 1)[0] for line in lines}), "\n".join(lines), role_arguments.COLLECTION)))
        else:
            result["msg"] = "The arguments of %d role(s) match their argument specs" % len(checked)
        return result
