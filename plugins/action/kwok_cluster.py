# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""gpushare.k8s.kwok_cluster in the controller when the connection is local (plugin_utils/controller_action.py)."""

from __future__ import annotations

from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import ControllerAction, preload

preload("kwok_cluster", kubernetes=False)


class ActionModule(ControllerAction):
    MODULE = "kwok_cluster"
