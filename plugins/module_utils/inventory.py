# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The inventory's GPU model: what each node advertises, which Pods the lab places where.

One home for the rules every role, filter and module applies to ``gpushare_nodes``,
``gpushare_device_plugin_configs`` and the lab's workloads: a node advertises its config's
replicated resources, or its MIG layout's instances (mixed strategy), or ``nvidia.com/gpu``.
The filters of the same names are adapters that turn these errors into filter errors.
Every error is a ``ValueError`` whose text names the field and the fix. No Ansible import.
"""

from __future__ import annotations

import re

try:
    from . import device_plugin as _dp
    from . import gpu_features as _features
    from . import gpu_operator as _operator
    from . import mig as _mig
    from .guards import CONFIG_LABEL
except ImportError:  # loaded as plain modules, side by side
    import device_plugin as _dp  # type: ignore[no-redef]
    import gpu_features as _features  # type: ignore[no-redef]
    import gpu_operator as _operator  # type: ignore[no-redef]
    import mig as _mig  # type: ignore[no-redef]
    from guards import CONFIG_LABEL  # type: ignore[no-redef]


__all__ = [
    "CONFIG_LABEL",
    "MIG_STRATEGY_LABEL",
    "check_config_name",
    "config",
    "gpu_inventory",
    "mig_spec",
    "node_gpu_resources",
    "nodes_advertising",
    "place",
    "pod_objects",
    "render_configs",
]

# Node labels the lab places workloads by (steps 2 and 3), from their homes.
MIG_STRATEGY_LABEL = _features.MIG_STRATEGY_LABEL
PRODUCT_LABEL = _features.GPU + "product"

# A config name is both a ConfigMap key and the value of the node label nvidia.com/device-plugin.config.
_CONFIG_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_NODE_KEYS = ("name", "gpus", "config", "mig", "product")
_MIG_KEYS = ("product", "profile", "gpus", "count")
_POD_KEYS = {"name", "resource", "count", "node_selector", "labels"}


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def config(value, name=None):
    """A config given as a mapping or as YAML text, validated and normalised."""
    if isinstance(value, (str, bytes)):
        return _dp.parse_config(value, name=name)
    return _dp.validate_config(value, name=name)


def check_config_name(name):
    """``name`` as a config name (a ConfigMap key and a label value), or ConfigError."""
    if not isinstance(name, str) or len(name) > 63 or not _CONFIG_NAME_RE.match(name):
        raise _dp.ConfigError(
            "configs[%r]" % (name,),
            "a config name must be a valid ConfigMap key and label value (1-63 letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit)",
            "rename the config, e.g. shared or time-sliced-4",
        )
    return str(name)


def render_configs(configs):
    """A mapping of config name -> config as name -> YAML text (ConfigMap data), names sorted."""
    if not isinstance(configs, dict) or not configs:
        raise _dp.ConfigError("configs", "must be a non-empty mapping of config name to config", "give e.g. {default: {version: v1}}")
    result = {}
    for name in sorted(configs, key=str):
        checked = check_config_name(name)
        result[checked] = _dp.render_config(config(configs[name], checked), name=checked)
    return result


def mig_spec(mig, where, node_gpus=None):
    """``{nvidia.com/mig-<profile>: gpus x count}`` of a ``{product, profile, gpus?, count?}`` layout at ``where``."""
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
        return mig_spec(node["mig"], "%s.mig" % where, node_gpus=gpus)
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
    return _dp.advertised_resources(config(configs[name], str(name)), gpus)


def gpu_inventory(nodes, configs=None):
    """``{node name: {resource: count}}``: what every inventory node advertises."""
    if not isinstance(nodes, (list, tuple)):
        raise ValueError("gpu_inventory: expected the list of inventory nodes ({name, gpus, config|mig})")
    inventory = {}
    for node in nodes:
        resources = node_gpu_resources(node, configs)  # first: it says what is wrong with a node that is not a mapping
        inventory[str(node.get("name"))] = resources
    return inventory


def node_entries(nodes, configs=None, config_label=CONFIG_LABEL, mig_strategy="mixed", mode="advertise"):
    """The ``nodes`` entries of ``gpushare.k8s.node_resources`` that label, and advertise, inventory nodes as the lab does.

    ``mode`` ``advertise`` (kwok nodes): a node with ``config`` (or neither config nor mig) gets ``config_label`` set to
    its config (removed when it has none) and advertises what ``node_gpu_resources`` computes; a MIG node gets the MIG
    strategy and GPU product labels, its MIG resources, and loses ``nvidia.com/gpu`` (the mixed strategy exposes only
    its MIG profiles). ``operator`` (the GPU Operator advertises): labels only, the config label, or on a MIG node the
    MIG manager's layout label. Every node is validated first.
    """
    if not isinstance(nodes, (list, tuple)):
        raise ValueError("node_entries: expected the list of inventory nodes ({name, gpus, config|mig})")
    if mode not in ("advertise", "operator"):
        raise ValueError("node_entries: mode must be advertise or operator, got %r" % (mode,))
    entries = []
    for node in nodes:
        resources = node_gpu_resources(node, configs)
        mig = node.get("mig") is not None
        if mode == "operator":
            labels = {_operator.MIG_CONFIG_LABEL: _operator.node_layout(node)[0]} if mig else {config_label: node.get("config")}
            entries.append({"name": node["name"], "labels": labels})
        elif mig:
            entries.append({"name": node["name"], "labels": {MIG_STRATEGY_LABEL: mig_strategy, PRODUCT_LABEL: node["mig"]["product"]},
                            "resources": resources, "remove_resources": [_dp.DEFAULT_RESOURCE]})
        else:
            entries.append({"name": node["name"], "labels": {config_label: node.get("config")}, "resources": resources})
    return entries


def feature_labels(node, configs=None, product=None):
    """The labels gpu-feature-discovery would set on one inventory node (validates the node, its config and MIG layout).

    ``product`` is the GPU product of a node without ``mig`` that names none.
    """
    advertised = node_gpu_resources(node, configs)
    name = node.get("config")
    node_config = config(configs[name], str(name)) if name is not None else None
    return _features.feature_labels(node, advertised, node_config, product)


def feature_label_entries(nodes, configs=None, product=None):
    """``gpushare.k8s.node_resources`` ``nodes`` entries giving every inventory node its gpu-feature-discovery labels.

    Each entry also removes every other label this model may set (``gpu_features.prunable_labels``), so a label an
    earlier layout or config left goes. Every node is validated before the list is returned.
    """
    if not isinstance(nodes, (list, tuple)):
        raise ValueError("feature_label_entries: expected the list of inventory nodes ({name, gpus, config|mig, product?})")
    prune = dict.fromkeys(_features.prunable_labels())
    return [{"name": node["name"], "labels": dict(prune, **feature_labels(node, configs, product))} for node in nodes]


def nodes_advertising(inventory, resource):
    """Names of the nodes of a gpu_inventory result that advertise ``resource`` (sorted)."""
    return sorted(name for name, resources in inventory.items() if int(resources.get(resource, 0)) > 0)


def place(workloads, nodes, configs):
    """[(Pod entry, names of the inventory nodes it fits)] for ``[{name, place_on: mig|<config name>}]``.

    ``mig`` selects the MIG mixed-strategy nodes and asks for their profile's resource; a config name selects the
    nodes labelled with that config and asks for the resource that config advertises. One unit each.
    """
    inventory = gpu_inventory(nodes, configs)
    placed = []
    for index, workload in enumerate(workloads or []):
        where = f"placement[{index}]"
        if not isinstance(workload, dict) or not workload.get("name") or not workload.get("place_on"):
            raise ValueError(f"{where}: each workload needs 'name' and 'place_on' (mig or a device-plugin config name)")
        target = str(workload["place_on"])
        if target == "mig":
            targets = [str(n["name"]) for n in nodes if n.get("mig")]
            selector = {MIG_STRATEGY_LABEL: "mixed"}
        else:
            targets = [str(n["name"]) for n in nodes if n.get("config") == target]
            selector = {CONFIG_LABEL: target}
        if not targets:
            choices = sorted({str(n["config"]) for n in nodes if n.get("config")} | ({"mig"} if any(n.get("mig") for n in nodes) else set()))
            raise ValueError(f"{where}.place_on: no node uses {target!r}; use one of {', '.join(choices)}")
        resource = sorted(inventory[targets[0]])[0]
        pod = {"name": str(workload["name"]), "resource": resource, "node_selector": selector}
        placed.append((pod, sorted(n for n in targets if int(inventory[n].get(resource, 0)) > 0)))
    return placed


def pod_objects(pods, image, namespace=None, labels=None):
    """Pods that each ask for GPU units: ``[{name, resource, count?, node_selector?, labels?}]`` as Pod objects."""
    if not isinstance(pods, (list, tuple)):
        raise ValueError("gpu_pods: expected a list of {name, resource, count, node_selector, labels}")
    docs = []
    for index, pod in enumerate(pods):
        where = f"gpu_pods[{index}]"
        if not isinstance(pod, dict) or not pod.get("name") or not pod.get("resource"):
            raise ValueError(f"{where}: each Pod needs 'name' and 'resource' (e.g. {{name: notebook, resource: nvidia.com/gpu}})")
        unknown = sorted(set(pod) - _POD_KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_POD_KEYS))}")
        count = pod.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"{where}.count: {count!r} is not a positive integer; extended resources are whole units, e.g. 1")
        metadata = {"name": str(pod["name"])}
        if namespace:
            metadata["namespace"] = str(namespace)
        merged_labels = dict(labels or {}, **(pod.get("labels") or {}))
        if merged_labels:
            metadata["labels"] = {str(k): str(v) for k, v in sorted(merged_labels.items())}
        spec = {}
        if pod.get("node_selector"):
            spec["nodeSelector"] = {str(k): str(v) for k, v in sorted(pod["node_selector"].items())}
        spec["containers"] = [{
            "name": str(pod["name"]),
            "image": str(image),
            # Extended resources go in limits; requests default to the same value.
            "resources": {"limits": {str(pod["resource"]): count}},
        }]
        docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    return docs
