# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Guards against two upstream failure modes, computed from the device-plugin config model.

- A Pod asking for more than one unit of a resource that a ``timeSlicing`` config with
  ``failRequestsGreaterThanOne`` replicates is only refused by the kubelet's ``Allocate``
  call (``UnexpectedAdmissionError``), after scheduling, and the failed Pod stays around.
  :func:`time_sliced_resources` tells an API-side admission policy which configs and
  resource names to guard.
- A node label ``nvidia.com/device-plugin.config=<name>`` naming a key the ConfigMap lacks
  crash-loops the plugin's config-manager sidecar. :func:`config_label_errors` finds such
  labels before any node is labelled.

Pure Python, so it runs (and is unit-tested) outside Ansible.
"""

from __future__ import annotations

import difflib

try:
    from .device_plugin import STRATEGY_NONE, STRATEGY_TIME_SLICING, ConfigError, advertised_name, parse_config, sharing_of, validate_config
except ImportError:  # loaded as a plain module, next to device_plugin.py
    from device_plugin import (  # type: ignore[no-redef]
        STRATEGY_NONE,
        STRATEGY_TIME_SLICING,
        ConfigError,
        advertised_name,
        parse_config,
        sharing_of,
        validate_config,
    )

__all__ = ["CONFIG_LABEL", "config_label_errors", "time_sliced_resources", "unshared_configs"]

# The node label the GPU Operator's config manager watches.
CONFIG_LABEL = "nvidia.com/device-plugin.config"


def _configs(configs):
    """Validate a mapping of config name -> config (mapping or YAML text); yield ``(name, normalised config)`` sorted by name."""
    if not isinstance(configs, dict):
        raise ConfigError("configs", "must be a mapping of config name to device-plugin config", "give e.g. {shared: {version: v1, sharing: ...}}")
    for name in sorted(configs, key=str):
        value = configs[name]
        if isinstance(value, (str, bytes)):
            yield str(name), parse_config(value, name=str(name))
        else:
            yield str(name), validate_config(value, name=str(name))


def time_sliced_resources(configs, require_fail_requests=True):
    """``{config name: [advertised resource names]}`` for the configs that time-slice GPUs.

    Only ``sharing.timeSlicing`` configs count (MPS and unshared configs are left out), and, unless
    ``require_fail_requests`` is false, only those with ``failRequestsGreaterThanOne: true`` (the ones whose
    multi-slice requests the kubelet refuses). Names are the advertised ones (``rename``, ``<name>.shared`` with
    ``renameByDefault``, else ``name``), sorted.
    """
    result = {}
    for name, config in _configs(configs):
        strategy, resources = sharing_of(config)
        if strategy != STRATEGY_TIME_SLICING:
            continue
        block = config["sharing"]["timeSlicing"]
        if require_fail_requests and not block.get("failRequestsGreaterThanOne", False):
            continue
        rename_by_default = block.get("renameByDefault", False)
        result[name] = sorted({advertised_name(resource, rename_by_default) for resource in resources})
    return result


def unshared_configs(configs):
    """Names (sorted) of the configs without a ``sharing`` section: nodes labelled with them give whole GPUs."""
    return [name for name, config in _configs(configs) if sharing_of(config)[0] == STRATEGY_NONE]


def _node_config(node):
    if not isinstance(node, dict) or not node.get("name"):
        raise ConfigError("nodes", "each node must be a mapping with at least name and config", "write e.g. {name: lab-node-1, gpus: 2, config: shared}")
    return str(node["name"]), node.get("config")


def config_label_errors(nodes, keys, configmap="device-plugin-configs", namespace="gpu-share", label=CONFIG_LABEL):
    """Messages for every node whose config label would name a key the ConfigMap lacks (empty list: all labels are fine).

    ``nodes`` are inventory entries (``{name, config, ...}``; entries without ``config`` are skipped), ``keys`` the
    ConfigMap's data keys, or ``None`` when the ConfigMap does not exist. Each message names the node, the label value,
    the keys the ConfigMap has and the fix.
    """
    if not isinstance(nodes, (list, tuple)):
        raise ConfigError("nodes", "must be a list of nodes", "give the inventory's node entries, e.g. [{name: lab-node-1, config: shared}]")
    where = "ConfigMap %s/%s" % (namespace, configmap)
    labelled = [(name, value) for name, value in map(_node_config, nodes) if value is not None]
    if keys is None:
        if not labelled:
            return []
        wanted = ", ".join("%s=%s" % (name, value) for name, value in labelled)
        return [
            "%s does not exist, so no %s label can name a config in it (would label: %s); the device plugin's config manager "
            "crash-loops on a label naming a missing config. Fix: create the ConfigMap first (role gpushare.k8s.device_plugin_config, "
            "lab step 1), point node_sharing_configmap and node_sharing_configmap_namespace at the ConfigMap the plugin reads, "
            "or turn the check off with node_sharing_check_config_labels: false." % (where, label, wanted)
        ]
    keys = sorted(str(key) for key in keys)
    shown = ", ".join(keys) if keys else "no keys at all"
    errors = []
    for name, value in labelled:
        value = str(value)
        if value in keys:
            continue
        close = difflib.get_close_matches(value, keys, n=1, cutoff=0.6)
        hint = " (did you mean %r?)" % close[0] if close else ""
        errors.append(
            "node %s: label %s=%s names no key of %s (its keys: %s); the device plugin's config manager would crash-loop on it. "
            "Fix: add key %r to the ConfigMap before labelling (role gpushare.k8s.device_plugin_config), or set the node's config "
            "to one of its keys%s." % (name, label, value, where, shown, value, hint)
        )
    return errors
