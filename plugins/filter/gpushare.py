# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters over the collection's GPU-sharing model (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import device_plugin as _dp
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_features as _features
from ansible_collections.gpushare.k8s.plugins.module_utils.requests import gpu_requests as _requests
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory as _inv
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig as _mig


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
    return _dp.render_config(_inv.config(config, name), name=name)


@_filter_errors
def device_plugin_configs(configs):
    """Render a mapping of config name -> config into name -> YAML text (ConfigMap data), names sorted."""
    return _inv.render_configs(configs)


@_filter_errors
def device_plugin_sharing(config):
    """Sharing summary of one config: strategy and the replicated resources with their advertised names."""
    normalised = _inv.config(config)
    strategy, resources, block = _dp.sharing_block(normalised)
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
    return _dp.advertised_resources(_inv.config(config), gpus)


@_filter_errors
def mig_resources(mig):
    """``{nvidia.com/mig-<profile>: gpus x count}`` from ``{product, profile, gpus, count?}`` (count defaults to the full layout)."""
    return _inv.mig_spec(mig, "mig")


@_filter_errors
def node_gpu_resources(node, configs=None):
    """Everything one inventory node (``{name, gpus, config?|mig?}``) advertises; a MIG node advertises only MIG resources."""
    return _inv.node_gpu_resources(node, configs)


@_filter_errors
def node_entries(nodes, configs=None, config_label=_inv.CONFIG_LABEL, mig_strategy="mixed", mode="advertise"):
    """gpushare.k8s.node_resources ``nodes`` entries that label (and in ``advertise`` mode advertise) inventory nodes."""
    return _inv.node_entries(nodes, configs, config_label=config_label, mig_strategy=mig_strategy, mode=mode)


@_filter_errors
def shared_resource_names(configs):
    """Every resource name the configs (name -> config, mapping or YAML text) advertise as shares of a GPU, sorted."""
    if not isinstance(configs, dict):
        raise AnsibleFilterError("shared_resource_names expects a mapping of config name to config, got %s" % type(configs).__name__)
    return _dp.shared_names({name: _inv.config(value, name) for name, value in configs.items()})


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
            "node_entries": node_entries,
            "node_gpu_resources": node_gpu_resources,
            "shared_resource_names": shared_resource_names,
        }
