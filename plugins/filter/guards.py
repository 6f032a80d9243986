# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters for the admission guard and the config-label check (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import device_plugin as _dp
from ansible_collections.gpushare.k8s.plugins.module_utils.requests import guards as _guards
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory as _inv


def _checked_names(configs):
    if isinstance(configs, dict):
        for name in configs:
            _inv.check_config_name(name)
    return configs


def time_sliced_resources(configs, require_fail_requests=True):
    """``{config name: [resource names]}`` of the configs that time-slice (with failRequestsGreaterThanOne by default)."""
    try:
        return _guards.time_sliced_resources(_checked_names(configs), require_fail_requests=bool(require_fail_requests))
    except (_dp.ConfigError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from None


def unshared_configs(configs):
    """Names of the configs that give whole GPUs (no sharing section)."""
    try:
        return _guards.unshared_configs(_checked_names(configs))
    except (_dp.ConfigError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from None


def admission_guard_params(configs, nodes, label=_guards.CONFIG_LABEL, default_config=None, ignored_labels=()):
    """The time-sliced nodes (name, config, labels, resources), their names and the fix per name, for the admission policy."""
    try:
        return _guards.guard_params(_checked_names(configs), list(nodes or []), label=label, default_config=default_config or None,
                                    ignored_labels=ignored_labels or ())
    except (_dp.ConfigError, ValueError, TypeError) as exc:
        raise AnsibleFilterError(str(exc)) from None


def admission_guard_settings(settings):
    """The admission guard's settings, each checked (the policy's name a DNS-1123 subdomain, ...), defaults filled in."""
    try:
        return _guards.guard_settings(settings)
    except (_dp.ConfigError, ValueError, TypeError) as exc:
        raise AnsibleFilterError(str(exc)) from None


def admission_guard_objects(params, settings):
    """The ValidatingAdmissionPolicy and its binding, as objects (dicts), from admission_guard_params' result."""
    try:
        return _guards.guard_objects(params, settings)
    except (_dp.ConfigError, ValueError, TypeError) as exc:
        raise AnsibleFilterError(str(exc)) from None


def admission_guard_manifest(params, settings):
    """The objects of admission_guard_objects as commented YAML, for the file the lab keeps."""
    try:
        return _guards.guard_manifest(params, settings)
    except (_dp.ConfigError, ValueError, TypeError) as exc:
        raise AnsibleFilterError(str(exc)) from None


def config_label_errors(nodes, keys, configmap="device-plugin-configs", namespace="gpu-share", label=_guards.CONFIG_LABEL):
    """One message per node whose config label names a key the ConfigMap lacks (``keys`` None: the ConfigMap is missing)."""
    try:
        return _guards.config_label_errors(nodes, None if keys is None else list(keys), configmap=configmap, namespace=namespace, label=label)
    except (_dp.ConfigError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """gpushare.k8s guard filters."""

    def filters(self):
        return {
            "admission_guard_manifest": admission_guard_manifest,
            "admission_guard_objects": admission_guard_objects,
            "admission_guard_params": admission_guard_params,
            "admission_guard_settings": admission_guard_settings,
            "config_label_errors": config_label_errors,
            "time_sliced_resources": time_sliced_resources,
            "unshared_configs": unshared_configs,
        }
