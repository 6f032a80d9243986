# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The configure-only role's record of earlier values and its undo: thin wrappers over module_utils/sharing_record.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.gpu_operator import gpu_operator_expected
from ansible_collections.gpushare.k8s.plugins.module_utils import gpu_features as _features
from ansible_collections.gpushare.k8s.plugins.module_utils import gpu_operator as _op
from ansible_collections.gpushare.k8s.plugins.module_utils import sharing_record as _record
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError


def _data(configmaps, name):
    """The ``data`` of ConfigMap ``name`` among ``configmaps`` (objects_info resources), or ``None`` when it does not exist."""
    for item in configmaps or []:
        if (item.get("metadata") or {}).get("name") == name:
            return item.get("data") or {}
    return None


def sharing_record(configmaps, record_name, policy, patch, via, writes, nodes, entries, values=None, release=None):
    """The record ConfigMap's text: the one on the cluster (among ``configmaps``) extended with what this run changes first.

    ``writes`` maps each ConfigMap name the run writes to the keys it writes.
    """
    try:
        record = _record.load(_data(configmaps, record_name), "ConfigMap %s" % record_name)
        written = {name: (_data(configmaps, name), list(keys)) for name, keys in (writes or {}).items()}
        return _record.dump(_record.extend(record, policy, patch, via, written, nodes, entries, _features.is_managed_label, values, release))
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def sharing_undo_plan(configmaps, record_name, policy, values, nodes):
    """What to write to put back the record's earlier values (``None`` when the cluster holds no record)."""
    data = _data(configmaps, record_name)
    if data is None:
        return None
    try:
        record = _record.load(data, "ConfigMap %s" % record_name)
        return dict(_record.undo_plan(record, policy, values, {item["metadata"]["name"]: item.get("data") or {} for item in configmaps or []}, nodes),
                    via=(record.get("policy") or {}).get("via"))
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def sharing_mig_reset_expected(entries, configs, strategy, default_config):
    """``{node: expected}`` for nodes asked for ``all-disabled``: every GPU whole again, under the current config and strategy."""
    nodes = [{"name": entry["name"], "gpus": entry["gpus"], "product": entry["product"]} for entry in entries]
    expected = gpu_operator_expected(nodes, configs, strategy, None, default_config)
    return {name: dict(want, mig_config=_op.ALL_DISABLED) for name, want in expected.items()}


def sharing_chart_version(chart, chart_ref):
    """The release's chart version for an upgrade from ``chart_ref`` (``None`` for a chart directory or archive)."""
    try:
        return _record.chart_version(chart, chart_ref)
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """gpushare.k8s configure-only record and undo filters."""

    def filters(self):
        return {
            "sharing_record": sharing_record,
            "sharing_undo_plan": sharing_undo_plan,
            "sharing_mig_reset_expected": sharing_mig_reset_expected,
            "sharing_chart_version": sharing_chart_version,
        }
