# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""gpushare.k8s.gpu_operator_wait in the controller when the connection is local (plugin_utils/controller_action.py).

A wait on a real GPU Operator can last minutes (a MIG reconfiguration evicts the GPU clients, may reboot the node):
while it runs, the module's progress lines are shown in the run's output through ansible-core's display (a task's
worker sends them to the main process, which prints them under any callback).
"""

from __future__ import annotations

from ansible.utils.display import Display

from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import ControllerAction, preload

display = Display()
MODULE_FILE = preload("gpu_operator_wait")


class ActionModule(ControllerAction):
    MODULE = "gpu_operator_wait"

    def run(self, tmp=None, task_vars=None):
        host = (task_vars or {}).get("inventory_hostname") or self._play_context.remote_addr or "localhost"

        def show(line):
            display.display("[%s] %s" % (host, line))

        # Each task runs in its own forked worker: the hook is this task's only.
        MODULE_FILE.show_progress = show
        try:
            return super().run(tmp, task_vars)
        finally:
            MODULE_FILE.show_progress = None
