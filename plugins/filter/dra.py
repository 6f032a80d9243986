# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters of the DRA track, thin wrappers over module_utils/dra/devices.py and lab/dra.py (one sidecar ``<filter>.yml`` each)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.gpushare import node_gpu_resources
from ansible_collections.gpushare.k8s.plugins.module_utils.dra import devices as _dra
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import dra as _lab
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.device_plugin import dump_yaml, plain
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.names import GPU_RESOURCE


def _filter_errors(func):
    """Report input errors as AnsibleFilterError with the same message (field, problem, fix)."""

    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except InputError as exc:
            raise AnsibleFilterError(str(exc)) from None

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


def _documents(objects):
    """Objects as a multi-document manifest (stable key order, block style)."""
    return "".join("---\n%s\n" % dump_yaml(obj) for obj in objects)


@_filter_errors
def dra_nodes(nodes, default_product=None):
    """The inventory's DRA nodes validated and normalised: ``[{name, gpus, product, sharing, replicas, ...}]``."""
    return _dra.normalize_nodes(plain(nodes), plain(default_product), where="gpushare_dra_nodes")


@_filter_errors
def dra_device_classes(driver=_dra.DRIVER, bridge_resource=_dra.BRIDGE_RESOURCE):
    """The DeviceClasses manifest: gpu.nvidia.com (with the extended-resource bridge), mig.nvidia.com, shared.gpu.nvidia.com."""
    return _documents(_dra.device_classes(_dra.check_driver(plain(driver)), plain(bridge_resource) or None))


@_filter_errors
def dra_workloads(nodes, namespace, image, taints=None, node_labels=None, driver=_dra.DRIVER, bridge_resource=_dra.BRIDGE_RESOURCE):
    """The DRA lab's workloads in the order they are applied: ``[{name, file, content, pods, pending, model}]``."""
    stages = _lab.workload_stages(plain(nodes), plain(namespace), plain(image), plain(taints or []), plain(node_labels or {}),
                                  plain(driver), plain(bridge_resource) or None)
    for stage in stages:
        stage["content"] = _documents(stage.pop("objects"))
    return stages


@_filter_errors
def dra_team(quota, namespace, extended_resource=""):
    """The team's manifests: ``{quota, claims, over, over_name, resources}`` (the ResourceQuota, the claims within it,
    the claim beyond it, its name, and the extended resources the quota limits beside its device class: the one the
    whole-GPU class serves, ``extended_resource``, when the quota's class is that class)."""
    quota = plain(quota)
    if not isinstance(quota, dict) or not quota.get("name") or not quota.get("device_class"):
        raise InputError("gpushare_dra_team_quota", "must be {name, device_class, devices}, got %r" % (quota,),
                         "write e.g. {name: dra-quota, device_class: gpu.nvidia.com, devices: 2}")
    devices = quota.get("devices")
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
        raise InputError("gpushare_dra_team_quota.devices", "must be a positive integer, got %r" % (devices,), "give the team's device count, e.g. 2")
    claims, over = _lab.team_claims(plain(namespace), quota["device_class"], devices)
    bridged = _lab.team_bridged(quota["device_class"], plain(extended_resource))
    return {"quota": _documents([_lab.quota_object(quota["name"], plain(namespace), quota["device_class"], devices, bridged)]),
            "claims": _documents(claims), "over": _documents([over]), "over_name": over["metadata"]["name"],
            "resources": [bridged] if bridged else []}


@_filter_errors
def dra_workload_errors(stages, nodes, pods, claims, slices, driver=_dra.DRIVER):
    """What the scheduler's allocations (read back from the cluster) show that is not as the lab expects; ``[]`` when all is."""
    return _lab.workload_errors(plain(stages), plain(nodes), plain(pods), plain(claims), plain(slices), plain(driver))


@_filter_errors
def dra_placement_report(nodes, pods, claims, slices, driver=_dra.DRIVER):
    """The text of out/dra-placement.txt: per DRA node, each device and the Pods holding it, then the Pending Pods."""
    return _lab.placement_report(plain(nodes), plain(pods), plain(claims), plain(slices), plain(driver))


@_filter_errors
def dra_sharing_table(nodes, lab_nodes, configs=None):
    """The side-by-side table (Markdown), with the lab's numbers: the shared node's replicas, the MIG node's profile."""
    replicas = None
    mig_profile = mig_product = None
    for node in plain(lab_nodes):
        if node.get("mig"):
            mig_profile, mig_product = node["mig"].get("profile"), node["mig"].get("product")
            continue
        resources = node_gpu_resources(node, plain(configs))
        if replicas is None and node.get("gpus") and resources.get(GPU_RESOURCE, 0) > node["gpus"]:
            replicas = resources[GPU_RESOURCE] // node["gpus"]
    if replicas is None or mig_profile is None:
        raise InputError("gpushare_nodes", "has no time-sliced node or no MIG node to compare with", "keep the lab's shared and MIG nodes")
    return _lab.sharing_table(plain(nodes), replicas, mig_profile, mig_product)


@_filter_errors
def dra_share_limits(nodes):
    """``{class: {capacity: quantity}}``: what one claim request may take from a shared class (the request check's limit)."""
    return _dra.share_limits(plain(nodes))


class FilterModule:
    """gpushare.k8s DRA filters."""

    def filters(self):
        return {
            "dra_device_classes": dra_device_classes,
            "dra_nodes": dra_nodes,
            "dra_placement_report": dra_placement_report,
            "dra_share_limits": dra_share_limits,
            "dra_sharing_table": dra_sharing_table,
            "dra_team": dra_team,
            "dra_workload_errors": dra_workload_errors,
            "dra_workloads": dra_workloads,
        }
