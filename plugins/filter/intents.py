# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters for GPU requests by intent (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils import intents as _intents


def intent_lab_pools(nodes, config_label=_intents.CONFIG_LABEL):
    """The lab inventory's nodes as node pools: one per config, one per MIG profile."""
    try:
        return _intents.lab_pools(nodes, config_label=config_label)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def intent_admission_objects(pools, configs, settings=None):
    """The MutatingAdmissionPolicy, the ValidatingAdmissionPolicy and their bindings, as data."""
    try:
        return _intents.intent_objects(_intents.intent_params(pools, configs), settings)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """gpushare.k8s intent filters."""

    def filters(self):
        return {"intent_admission_objects": intent_admission_objects, "intent_lab_pools": intent_lab_pools}
