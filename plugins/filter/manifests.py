# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters that render the lab's manifests (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.gpushare import node_gpu_resources

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

_POD_KEYS = {"name", "resource", "count", "node_selector", "labels"}


class _Dumper(getattr(yaml, "SafeDumper", object)):
    """Block style, indented sequences, stable output."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def gpu_pods(pods, image, namespace=None, labels=None):
    """Render Pods that each ask for GPU units, as multi-document YAML (same input, same bytes)."""
    if not isinstance(pods, (list, tuple)):
        raise AnsibleFilterError("gpu_pods: expected a list of {name, resource, count, node_selector, labels}")
    docs = []
    for index, pod in enumerate(pods):
        where = f"gpu_pods[{index}]"
        if not isinstance(pod, dict) or not pod.get("name") or not pod.get("resource"):
            raise AnsibleFilterError(f"{where}: each Pod needs 'name' and 'resource' (e.g. {{name: notebook, resource: nvidia.com/gpu}})")
        unknown = sorted(set(pod) - _POD_KEYS)
        if unknown:
            raise AnsibleFilterError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_POD_KEYS))}")
        count = pod.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise AnsibleFilterError(f"{where}.count: {count!r} is not a positive integer; extended resources are whole units, e.g. 1")
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
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False, explicit_start=True)


def gpu_inventory(nodes, configs=None):
    """``{node name: {resource: count}}``: what every inventory node advertises."""
    if not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError("gpu_inventory: expected the list of inventory nodes ({name, gpus, config|mig})")
    return {str(node.get("name")): node_gpu_resources(node, configs) for node in nodes}


def nodes_advertising(inventory, resource):
    """Names of the nodes of a gpu_inventory result that advertise ``resource`` (sorted)."""
    return sorted(name for name, resources in inventory.items() if int(resources.get(resource, 0)) > 0)


# Node labels the lab places workloads by (steps 2 and 3).
CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"


def _place(workloads, nodes, configs):
    """[(gpu_pods entry, names of the inventory nodes it fits)] for ``[{name, place_on: mig|<config name>}]``."""
    inventory = gpu_inventory(nodes, configs)
    placed = []
    for index, workload in enumerate(workloads or []):
        where = f"placement[{index}]"
        if not isinstance(workload, dict) or not workload.get("name") or not workload.get("place_on"):
            raise AnsibleFilterError(f"{where}: each workload needs 'name' and 'place_on' (mig or a device-plugin config name)")
        target = str(workload["place_on"])
        if target == "mig":
            targets = [str(n["name"]) for n in nodes if n.get("mig")]
            selector = {MIG_STRATEGY_LABEL: "mixed"}
        else:
            targets = [str(n["name"]) for n in nodes if n.get("config") == target]
            selector = {CONFIG_LABEL: target}
        if not targets:
            choices = sorted({str(n["config"]) for n in nodes if n.get("config")} | ({"mig"} if any(n.get("mig") for n in nodes) else set()))
            raise AnsibleFilterError(f"{where}.place_on: no node uses {target!r}; use one of {', '.join(choices)}")
        resource = sorted(inventory[targets[0]])[0]
        pod = {"name": str(workload["name"]), "resource": resource, "node_selector": selector}
        placed.append((pod, sorted(n for n in targets if int(inventory[n].get(resource, 0)) > 0)))
    return placed


def placement_pods(workloads, nodes, configs=None):
    """Turn ``[{name, place_on: mig|<config name>}]`` into gpu_pods entries chosen by node labels.

    ``mig`` selects the MIG mixed-strategy nodes and asks for their profile's resource; a config name selects the
    nodes labelled with that config and asks for the resource that config advertises. One unit each.
    """
    return [pod for pod, _fits in _place(workloads, nodes, configs)]


def placement_fits(workloads, nodes, configs=None):
    """``{workload name: [nodes it may land on]}``: nodes matching its labels that advertise its resource."""
    return {pod["name"]: fits for pod, fits in _place(workloads, nodes, configs)}


class FilterModule:
    """gpushare.k8s manifest filters."""

    def filters(self):
        return {
            "gpu_inventory": gpu_inventory,
            "gpu_pods": gpu_pods,
            "nodes_advertising": nodes_advertising,
            "placement_fits": placement_fits,
            "placement_pods": placement_pods,
        }
