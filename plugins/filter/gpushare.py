# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters over the collection's GPU-sharing model (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils import device_plugin as _dp
from ansible_collections.gpushare.k8s.plugins.module_utils import gpu_features as _features
from ansible_collections.gpushare.k8s.plugins.module_utils import gpu_requests as _requests
from ansible_collections.gpushare.k8s.plugins.module_utils import mig as _mig

# A config name is both a ConfigMap key and the value of the node label nvidia.com/device-plugin.config.
_CONFIG_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_NODE_KEYS = ("name", "gpus", "config", "mig", "product")
_MIG_KEYS = ("product", "profile", "gpus", "count")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _config(value, name=None):
    """A config given as a mapping or as YAML text, validated and normalised."""
    if isinstance(value, (str, bytes)):
        return _dp.parse_config(value, name=name)
    return _dp.validate_config(value, name=name)


def _check_config_name(name):
    if not isinstance(name, str) or len(name) > 63 or not _CONFIG_NAME_RE.match(name):
        raise _dp.ConfigError(
            "configs[%r]" % (name,),
            "a config name must be a valid ConfigMap key and label value (1-63 letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit)",
            "rename the config, e.g. shared or time-sliced-4",
        )
    return str(name)


def _filter_errors(func):
    """Report model errors as AnsibleFilterError with the same message."""

    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (_dp.ConfigError, _mig.MigError, _features.FeatureError, _requests.ManifestError, ValueError) as exc:
            raise AnsibleFilterError(str(exc)) from None

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


@_filter_errors
def device_plugin_config(config, name=None):
    """Validate one device-plugin config (mapping or YAML text) and render it as deterministic YAML text."""
    return _dp.render_config(_config(config, name), name=name)


@_filter_errors
def device_plugin_configs(configs):
    """Render a mapping of config name -> config into name -> YAML text (ConfigMap data), names sorted."""
    if not isinstance(configs, dict) or not configs:
        raise _dp.ConfigError("configs", "must be a non-empty mapping of config name to config", "give e.g. {default: {version: v1}}")
    result = {}
    for name in sorted(configs, key=str):
        checked = _check_config_name(name)
        result[checked] = _dp.render_config(_config(configs[name], checked), name=checked)
    return result


@_filter_errors
def device_plugin_sharing(config):
    """Sharing summary of one config: strategy and the replicated resources with their advertised names."""
    normalised = _config(config)
    strategy, resources = _dp.sharing_of(normalised)
    rename_by_default = False
    if strategy != _dp.STRATEGY_NONE:
        block = normalised["sharing"]["timeSlicing" if strategy == _dp.STRATEGY_TIME_SLICING else "mps"]
        rename_by_default = block.get("renameByDefault", False)
    shown = []
    for resource in resources:
        item = dict(resource)
        item["advertised"] = _dp.advertised_name(resource, rename_by_default)
        shown.append(item)
    return {"strategy": strategy, "resources": shown}


@_filter_errors
def advertised_resources(config, gpus):
    """Resources a node with ``gpus`` physical GPUs advertises under ``config``."""
    return _dp.advertised_resources(_config(config), gpus)


def _mig_spec(mig, where, node_gpus=None):
    if not isinstance(mig, dict):
        raise _mig.MigError(where, "must be a mapping with product, profile and gpus", "write e.g. {product: NVIDIA-A100-SXM4-80GB, profile: 1g.10gb, gpus: 1}")
    for key in mig:
        if key not in _MIG_KEYS:
            raise _mig.MigError("%s.%s" % (where, key), "unknown key", "use only %s" % ", ".join(_MIG_KEYS))
    for key in ("product", "profile"):
        if key not in mig:
            raise _mig.MigError(
                "%s.%s" % (where, key), "missing", "add the GPU %s, e.g. %s" % (key, "NVIDIA-A100-SXM4-80GB" if key == "product" else "1g.10gb")
            )
    gpus = mig.get("gpus", node_gpus)
    if gpus is None:
        raise _mig.MigError("%s.gpus" % where, "missing", "add the number of MIG-partitioned GPUs, e.g. gpus: 1")
    if node_gpus is not None and _is_int(gpus) and gpus > node_gpus:
        raise _mig.MigError(
            "%s.gpus" % where,
            "%d MIG GPUs but the node has only %d physical GPU%s" % (gpus, node_gpus, "" if node_gpus == 1 else "s"),
            "use at most %d" % node_gpus,
        )
    return _mig.mig_resources(mig["product"], mig["profile"], gpus, mig.get("count"), where=where)


@_filter_errors
def mig_resources(mig):
    """``{nvidia.com/mig-<profile>: gpus x count}`` from ``{product, profile, gpus, count?}`` (count defaults to the full layout)."""
    return _mig_spec(mig, "mig")


@_filter_errors
def node_gpu_resources(node, configs=None):
    """Everything one inventory node (``{name, gpus, config?|mig?}``) advertises; a MIG node advertises only MIG resources."""
    if not isinstance(node, dict):
        raise _dp.ConfigError("node", "must be a mapping with name and gpus", "write e.g. {name: lab-node-0, gpus: 2, config: default}")
    where = str(node.get("name") or "node")
    for key in node:
        if key not in _NODE_KEYS:
            raise _dp.ConfigError("%s.%s" % (where, key), "unknown key", "use only %s" % ", ".join(_NODE_KEYS))
    _features.check_product(node, where)  # optional GPU product (gpu_feature_labels), same as mig.product on a MIG node
    gpus = node.get("gpus")
    if not _is_int(gpus) or gpus < 0:
        raise _dp.ConfigError("%s.gpus" % where, "must be a non-negative integer, got %r" % (gpus,), "give the node's physical GPU count, e.g. gpus: 2")
    has_config = node.get("config") is not None
    if has_config and node.get("mig") is not None:
        raise _dp.ConfigError(
            where,
            "sets both config and mig",
            "drop config for a MIG mixed-strategy node (it advertises nvidia.com/mig-* resources), or drop mig",
        )
    if node.get("mig") is not None:
        return _mig_spec(node["mig"], "%s.mig" % where, node_gpus=gpus)
    if not has_config:
        return {_dp.DEFAULT_RESOURCE: gpus}
    name = node["config"]
    configs = configs or {}
    if not isinstance(configs, dict) or name not in configs:
        known = ", ".join(sorted(str(key) for key in configs)) if isinstance(configs, dict) else ""
        raise _dp.ConfigError(
            "%s.config" % where,
            "names config %r, which is not among the device-plugin configs (%s); the plugin's config manager crash-loops on such a label"
            % (name, known or "none given"),
            "use one of the configured names or add the config",
        )
    return _dp.advertised_resources(_config(configs[name], str(name)), gpus)


@_filter_errors
def gpu_offenders(data, resources=_requests.DEFAULT_RESOURCES, max_per_container=1):
    """Containers asking for more than ``max_per_container`` of ``resources`` in YAML text, an object or a list of objects."""
    return _requests.find_offenders(data, resources=resources, max_per_container=max_per_container)


class FilterModule:
    """gpushare.k8s filters."""

    def filters(self):
        return {
            "advertised_resources": advertised_resources,
            "device_plugin_config": device_plugin_config,
            "device_plugin_configs": device_plugin_configs,
            "device_plugin_sharing": device_plugin_sharing,
            "gpu_offenders": gpu_offenders,
            "mig_resources": mig_resources,
            "node_gpu_resources": node_gpu_resources,
        }
