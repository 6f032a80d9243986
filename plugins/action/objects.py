# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""gpushare.k8s.objects in the controller (documentation: plugins/modules/objects.py)."""

from __future__ import annotations

# Imported here, once per playbook run in the controller, so that the workers forked for each task inherit
# kubernetes and kubernetes.core's service instead of importing them again.
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s_objects import (
    OBJECTS_ARG_SPEC,
    OBJECTS_MUTUALLY_EXCLUSIVE,
    preload,
    run_objects,
)
from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import ControllerAction

preload()


class ActionModule(ControllerAction):
    MODULE = "gpushare.k8s.objects"
    ARGUMENT_SPEC = OBJECTS_ARG_SPEC
    MUTUALLY_EXCLUSIVE = OBJECTS_MUTUALLY_EXCLUSIVE

    def work(self, params, check_mode, diff):
        return run_objects(params, check_mode=check_mode, diff=diff)
