# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Operator-mode filters (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.gpushare import node_gpu_resources
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import device_plugin as _dp
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator as _op
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import operator_layouts as _layouts
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import sharing_record as _record
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError

# The collection's own refusals (bad input: the node model's, a config's, a MIG layout's; a layout mig-parted lacks).
_ERRORS = (InputError, _op.LayoutError)


def _configs(configs):
    parsed = {}
    for name, config in (configs or {}).items():
        parsed[name] = _dp.parse_config(config, name=str(name)) if isinstance(config, (str, bytes)) else _dp.validate_config(config, name=str(name))
    return parsed


def gpu_operator_expected(nodes, configs=None, strategy="mixed", product=None, default_config=None):
    """``{node: {resources, labels, config, mig_config}}``: what the operator should make of each inventory node."""
    for node in nodes:
        node_gpu_resources(node, configs)  # the inventory's own validation first: same errors as advertise mode
    try:
        parsed = _configs(configs)
        return {str(node["name"]): _op.predict(node, parsed, strategy, product, default_config) for node in nodes}
    except _ERRORS as exc:
        raise AnsibleFilterError(str(exc)) from None


def gpu_operator_mig_parted(nodes, source=None):
    """The mig-parted config text (``config.yaml``): every layout of ``source`` (a ``gpu_operator_mig_parted_source``) and
    the MIG nodes' layouts and ``all-disabled`` it lacks; a layout of the same name doing something else on a node fails."""
    try:
        return _layouts.render(nodes, source or None)
    except _ERRORS as exc:
        raise AnsibleFilterError(str(exc)) from None


def gpu_operator_mig_parted_source(configmaps, policy, configmap, namespace, record=None):
    """The mig-parted config the ClusterPolicy named before the collection's ConfigMap ``configmap`` (``{name, namespace,
    target, text}``; ``{}``: none), read from ``configmaps`` (objects_info resources); on a re-run the earlier name comes from
    ``record``, the undo record's text as the sharing_record filter returns it, else from ``configmap``'s annotation."""
    try:
        fields = None
        if record:
            loaded = _record.load({_record.RECORD_KEY: record if isinstance(record, str) else _record.dump(record)}, "the undo record")
            fields = (loaded.get("policy") or {}).get("fields")
        data = {(item.get("metadata") or {}).get("name"): item.get("data") or {} for item in configmaps or []}
        remembered = next((((item.get("metadata") or {}).get("annotations") or {}).get(_layouts.SOURCE_ANNOTATION)
                           for item in configmaps or [] if (item.get("metadata") or {}).get("name") == configmap), None)
        return _layouts.source(policy, data, configmap, namespace, fields, remembered) or {}
    except _ERRORS as exc:
        raise AnsibleFilterError(str(exc)) from None


def gpu_operator_policy_patch(configmap, default_config, strategy, mig_parted_configmap, default_layout=_op.ALL_DISABLED):
    """The ClusterPolicy merge patch pointing the operator at the collection's ConfigMaps."""
    try:
        return _op.cluster_policy_patch(configmap, default_config, strategy, mig_parted_configmap, default_layout)
    except _ERRORS as exc:
        raise AnsibleFilterError(str(exc)) from None


def gpu_operator_config_restarts(daemonsets, configmap, before=None, after=None):
    """The DaemonSet patches that restart the operator's Pods mounting ``configmap`` when a config they loaded changed."""
    return _op.config_restarts(daemonsets, configmap, before, after)


def gpu_operator_hardware(nodes, product=None):
    """``{node: {gpus, product}}``: the physical GPUs of each inventory node (its own product, its MIG product, or ``product``)."""
    try:
        return _op.node_hardware(nodes, product)
    except _ERRORS as exc:
        raise AnsibleFilterError(str(exc)) from None


def gpu_operator_mode_errors(mode, nodes, cluster_nodes, policies, policy_name, field="gpushare_mode"):
    """Messages for a mode that does not fit the cluster (operator without a ClusterPolicy; advertise with one, or on real nodes)."""
    return _op.mode_errors(mode, nodes, cluster_nodes, policies, policy_name, field=field)


class FilterModule:
    """gpushare.k8s operator-mode filters."""

    def filters(self):
        return {
            "gpu_operator_config_restarts": gpu_operator_config_restarts,
            "gpu_operator_expected": gpu_operator_expected,
            "gpu_operator_hardware": gpu_operator_hardware,
            "gpu_operator_mig_parted": gpu_operator_mig_parted,
            "gpu_operator_mig_parted_source": gpu_operator_mig_parted_source,
            "gpu_operator_mode_errors": gpu_operator_mode_errors,
            "gpu_operator_policy_patch": gpu_operator_policy_patch,
        }
