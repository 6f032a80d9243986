# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters that render the lab's manifests (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible_collections.gpushare.k8s.plugins.filter.gpushare import _filter_errors
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import intent_placement as _intent_placement
from ansible_collections.gpushare.k8s.plugins.module_utils.requests import intents as _intents
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory as _inv

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None


class _Dumper(getattr(yaml, "SafeDumper", object)):
    """Block style, indented sequences, stable output."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


@_filter_errors
def gpu_pods(pods, image, namespace=None, labels=None):
    """Render Pods that each ask for GPU units, as multi-document YAML (same input, same bytes)."""
    docs = _inv.pod_objects(pods, image, namespace=namespace, labels=labels)
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False, explicit_start=True)


@_filter_errors
def gpu_inventory(nodes, configs=None):
    """``{node name: {resource: count}}``: what every inventory node advertises."""
    return _inv.gpu_inventory(nodes, configs)


def nodes_advertising(inventory, resource):
    """Names of the nodes of a gpu_inventory result that advertise ``resource`` (sorted)."""
    return _inv.nodes_advertising(inventory, resource)


@_filter_errors
def placement_pods(workloads, nodes, configs=None):
    """Turn ``[{name, place_on: mig|<config name>}]`` into gpu_pods entries chosen by node labels.

    ``mig`` selects the MIG mixed-strategy nodes and asks for their profile's resource; a config name selects the
    nodes labelled with that config and asks for the resource that config advertises. One unit each.
    """
    return [pod for pod, _fits in _inv.place(workloads, nodes, configs)]


@_filter_errors
def placement_fits(workloads, nodes, configs=None):
    """``{workload name: [nodes it may land on]}``: nodes matching its labels that advertise its resource."""
    return {pod["name"]: fits for pod, fits in _inv.place(workloads, nodes, configs)}


@_filter_errors
def intent_pods(entries, image, namespace):
    """One Pod per ``{name, intent, place_on}`` that asks for a GPU by its intent only."""
    return _intent_placement.intent_pods(entries, image, namespace)


@_filter_errors
def intent_placement_report(entries, pods, nodes, configs=None):
    """``{done, rows, errors}``: whether each intent Pod got the resource and node the table says."""
    return _intent_placement.placement_report(entries, pods, nodes, configs)


@_filter_errors
def intent_verdict(pods, reads, stored="", report=None):
    """``{key, reuse, reason, report, record}``: whether the last passing intent check still holds, and what to keep."""
    return _intent_placement.verdict(pods, reads, stored or "", report)


@_filter_errors
def intent_check_params(pools, configs):
    """What each GPU intent becomes over ``pools``: the map the intent policies carry, for the request check."""
    return _intents.params_data(_intents.intent_params(pools, configs))


class FilterModule:
    """gpushare.k8s manifest filters."""

    def filters(self):
        return {
            "gpu_inventory": gpu_inventory,
            "gpu_pods": gpu_pods,
            "intent_check_params": intent_check_params,
            "intent_placement_report": intent_placement_report,
            "intent_pods": intent_pods,
            "intent_verdict": intent_verdict,
            "nodes_advertising": nodes_advertising,
            "placement_fits": placement_fits,
            "placement_pods": placement_pods,
        }
