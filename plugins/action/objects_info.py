# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""gpushare.k8s.objects_info in the controller (documentation: plugins/modules/objects_info.py)."""

from __future__ import annotations

# Imported here, once per playbook run in the controller (see plugins/action/objects.py).
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s_objects import (
    OBJECTS_INFO_ARG_SPEC,
    OBJECTS_INFO_MUTUALLY_EXCLUSIVE,
    OBJECTS_INFO_REQUIRED_ONE_OF,
    preload,
    run_objects_info,
)
from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import ControllerAction

preload()


class ActionModule(ControllerAction):
    MODULE = "gpushare.k8s.objects_info"
    ARGUMENT_SPEC = OBJECTS_INFO_ARG_SPEC
    MUTUALLY_EXCLUSIVE = OBJECTS_INFO_MUTUALLY_EXCLUSIVE
    REQUIRED_ONE_OF = OBJECTS_INFO_REQUIRED_ONE_OF
    SUPPORTS_DIFF = False

    def work(self, params, check_mode, diff):
        return run_objects_info(params, check_mode=check_mode)
