# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters for GPU requests by intent (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils.requests import intents as _intents
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.device_plugin import plain


def intent_lab_pools(nodes, config_label=_intents.CONFIG_LABEL):
    """The lab inventory's nodes as node pools: one per config, one per MIG profile."""
    try:
        return _intents.lab_pools(nodes, config_label=config_label)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def intent_dra_pools(nodes, product=None, node_labels=None, taints=None):
    """The DRA inventory's nodes as DRA pools: one per sharing kind, selected by label and hostname, tolerating the taints."""
    try:
        return _intents.dra_pools(plain(nodes), plain(product), plain(node_labels), plain(taints))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def intent_admission_objects(pools, configs, settings=None):
    """The MutatingAdmissionPolicy, the ValidatingAdmissionPolicy and their bindings, as data."""
    try:
        return _intents.intent_objects(_intents.intent_params(plain(pools), plain(configs)), plain(settings))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def intent_claim_templates(pools, configs, settings=None, existing=None):
    """The ResourceClaimTemplates of the intents DRA pools serve, and what to do with them: ``{create, keep, replace, delete}``."""
    try:
        desired = _intents.intent_templates(_intents.intent_params(plain(pools), plain(configs)), plain(settings))
        return _intents.template_plan(plain(existing) or [], desired)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """gpushare.k8s intent filters."""

    def filters(self):
        return {"intent_admission_objects": intent_admission_objects, "intent_claim_templates": intent_claim_templates,
                "intent_dra_pools": intent_dra_pools, "intent_lab_pools": intent_lab_pools}
