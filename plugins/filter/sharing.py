# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The configure-only role's record of earlier values and its undo: thin wrappers over module_utils/nvidia/sharing_record.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.gpu_operator import gpu_operator_expected
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_features as _features
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator as _op
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import sharing_record as _record
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError


def _data(configmaps, name):
    """The ``data`` of ConfigMap ``name`` among ``configmaps`` (objects_info resources), or ``None`` when it does not exist."""
    for item in configmaps or []:
        if (item.get("metadata") or {}).get("name") == name:
            return item.get("data") or {}
    return None


def _owned(writes):
    """``{ConfigMap name: keys the role writes there (None: any)}`` from the role's ``writes`` or a list of names."""
    if isinstance(writes, dict):
        return {str(name): (list(keys) if keys is not None else None) for name, keys in writes.items()}
    return {str(name): None for name in writes or []}


def sharing_record(configmaps, record_name, policy, patch, via, writes, nodes, entries, values=None, release=None):
    """The record ConfigMap's text: the one on the cluster (among ``configmaps``) extended with what this run changes first.

    ``writes`` maps each ConfigMap name the run writes to the keys it writes. The record on the cluster must carry the
    ClusterPolicy's seal and hold only what the collection writes (sharing_record.load).
    """
    try:
        record = _record.load(_data(configmaps, record_name), "ConfigMap %s" % record_name, policy or {}, _owned_record_scope(writes))
        written = {name: (_data(configmaps, name), list(keys)) for name, keys in (writes or {}).items()}
        return _record.dump(_record.extend(record, policy, patch, via, written, nodes, entries, _features.is_managed_label, values, release))
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def _owned_record_scope(writes):
    # the device-plugin ConfigMap's keys are the configs' names, which an inventory may change between runs: any key
    # (validated as a key) is accepted there; the other ConfigMaps' keys are fixed.
    return {name: (keys if keys == ["config.yaml"] else None) for name, keys in _owned(writes).items()}


def sharing_record_seal(configmaps, record_name, policy, text):
    """The value of the ClusterPolicy's seal annotation for record ``text`` (the one it has when the text is unchanged)."""
    try:
        return _record.seal(_record.record_text(_data(configmaps, record_name)), text, policy)
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def sharing_undo_plan(configmaps, record_name, policy, values, nodes, owned=None):
    """What to write to put back the record's earlier values (``None`` when the cluster holds no record).

    ``owned`` names the ConfigMaps the role writes (``None``: the record's names are not limited; the role passes them).
    Everything the undo's writes and waits need is computed here from the cluster's objects, before the first write:
    ``mig_reset_expected`` is what each node asked back to ``all-disabled`` shows with every GPU whole, under the
    device-plugin config, default and MIG strategy the ClusterPolicy names now.
    """
    data = _data(configmaps, record_name)
    if data is None:
        return None
    try:
        if not policy:
            raise InputError("ClusterPolicy", "is gone, so the seal of ConfigMap %s cannot be checked" % record_name,
                             "restore the ClusterPolicy (the GPU Operator's release), then undo; nothing was written")
        record = _record.load(data, "ConfigMap %s" % record_name, policy, _owned_record_scope(owned) if owned is not None else None)
        current = {item["metadata"]["name"]: item.get("data") or {} for item in configmaps or []}
        plan = _record.undo_plan(record, policy, values, current, nodes)
        plan["mig_reset_expected"] = _mig_reset_expected(plan["mig_reset"], policy, current) if plan["mig_reset"] else {}
        return dict(plan, via=(record.get("policy") or {}).get("via"))
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def _mig_reset_expected(entries, policy, configmaps):
    spec = (policy or {}).get("spec") or {}
    plugin = (spec.get("devicePlugin") or {}).get("config") or {}
    name, default = plugin.get("name"), plugin.get("default")
    strategy = (spec.get("mig") or {}).get("strategy") or "single"
    if not name:  # no device-plugin config named: the plugin runs its own defaults (whole GPUs, no sharing)
        return sharing_mig_reset_expected(entries, {}, strategy, None)
    if name not in configmaps:
        raise InputError("ClusterPolicy spec.devicePlugin.config.name", "names ConfigMap %r, which the operator's namespace lacks" % (name,),
                         "put the ClusterPolicy's device-plugin config back in place before the undo; nothing was written")
    configs = dict(configmaps[name])
    return sharing_mig_reset_expected(entries, configs, strategy, default or None)


def sharing_mig_reset_expected(entries, configs, strategy, default_config):
    """``{node: expected}`` for nodes asked for ``all-disabled``: every GPU whole again, under the current config and strategy."""
    nodes = [{"name": entry["name"], "gpus": entry["gpus"], "product": entry["product"]} for entry in entries]
    expected = gpu_operator_expected(nodes, configs, strategy, None, default_config)
    return {name: dict(want, mig_config=_op.ALL_DISABLED) for name, want in expected.items()}


def sharing_fragment_differences(policy, patch):
    """``[{field, wanted, found}]``: the fields of the values fragment the ClusterPolicy does not hold yet."""
    return [{"field": field, "wanted": wanted, "found": found} for field, wanted, found in _record.fragment_differences(policy, patch)]


def sharing_helm_owned(configmaps, names):
    """``["<name> (Helm release <ns>/<release>)"]``: the ConfigMaps of ``names`` among ``configmaps`` that a Helm release owns."""
    owned = []
    for item in configmaps or []:
        name = (item.get("metadata") or {}).get("name")
        owner = _record.helm_owner(item)
        if name in (names or []) and owner is not None:
            owned.append("%s (Helm release %s)" % (name, "%s/%s" % (owner["namespace"], owner["name"]) if owner else "unnamed"))
    return owned


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
            "sharing_record_seal": sharing_record_seal,
            "sharing_undo_plan": sharing_undo_plan,
            "sharing_mig_reset_expected": sharing_mig_reset_expected,
            "sharing_chart_version": sharing_chart_version,
            "sharing_fragment_differences": sharing_fragment_differences,
            "sharing_helm_owned": sharing_helm_owned,
        }
