# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The DRA lab's workloads, their verification and its report, computed from the DRA nodes (pure Python).

:func:`workload_stages` gives the workloads in the order they are applied (each stage is applied and
its Pods waited for before the next, since the MIG demonstration depends on what is already
allocated): a claim shared by several Pods, per-Pod claims from a template (shares of the shared
node), a ``firstAvailable`` claim that takes a MIG slice, the MIG profiles that then fill that GPU
exactly (computed from the product's geometry), a second ``firstAvailable`` claim that gets a share
because the GPU is full, one more MIG claim that stays Pending, and an unchanged extended-resource
Pod served through the DeviceClass bridge.

:func:`workload_errors` reads back what the scheduler did (Pods, and ResourceClaim status) and says
what is not as the lab shows it; :func:`placement_report` writes, per DRA node, each device and who
holds it; :func:`sharing_table` is the side-by-side table (device plugin vs DRA).
"""

from __future__ import annotations

from ..dra import devices as _dra
from ..hardware import mig as _mig
from ..errors import InputError


__all__ = ["demo_nodes", "mig_fill", "placement_report", "sharing_table", "workload_errors", "workload_stages"]

SHARED_CLAIM = "one-gpu"
SHARED_CLAIM_PODS = 3
SHARE_TEMPLATE = "gpu-share"
FALLBACK_TEMPLATE = "mig-or-share"
MIG_NEXT = "mig-next"
BRIDGE_POD = "bridge-gpu"
UNSCHEDULABLE = "Unschedulable"
DEFAULT_TOLERATIONS = [{"key": "node.kubernetes.io/%s" % condition, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                       for condition in ("not-ready", "unreachable")]


def demo_nodes(nodes):
    """``(whole, shared, mig)``: the first DRA node of each kind; the lab shows every model, so each must exist."""
    found = {}
    for node in nodes:
        found.setdefault(node["sharing"], node)
    missing = [kind for kind in _dra.SHARINGS if kind not in found]
    if missing:
        raise InputError("gpushare_dra_nodes", "has no %s node" % " and no ".join(missing),
                         "list at least one node of each kind: whole GPUs (no key), mig: true, and shared: {replicas: n}")
    return found["whole"], found["shared"], found["mig"]


def mig_fill(product):
    """``(first, fill)``: the smallest profile a first claim takes, then the profiles that fill the rest of the GPU exactly.

    Simulates the scheduler's first fit in the order the slices list the devices (profiles in table
    order, placements ascending): the first claim takes the smallest profile at placement 0, then the
    largest profile that still fits is added until every compute slice is taken. Raises when the
    product's geometry cannot be filled exactly that way.
    """
    geometry = _mig.partition_geometry(product)
    profiles = geometry["profiles"]
    first = next(iter(profiles))
    used = set(range(profiles[first]["memory"]))
    compute = profiles[first]["compute"]
    fill = []
    order = sorted(profiles, key=lambda name: (-profiles[name]["compute"], profiles[name]["memory"]))
    progress = True
    while progress and compute < geometry["compute_slices"]:
        progress = False
        for name in order:
            shape = profiles[name]
            if compute + shape["compute"] > geometry["compute_slices"]:
                continue
            start = next((s for s in shape["placements"] if not used & set(range(s, s + shape["memory"]))), None)
            if start is None:
                continue
            used |= set(range(start, start + shape["memory"]))
            compute += shape["compute"]
            fill.append(name)
            progress = True
            break
    if compute != geometry["compute_slices"]:  # pragma: no cover - every product of the table fills exactly
        raise InputError("mig", "the MIG profiles of %s cannot fill a GPU after a %s claim" % (product, first), "use another product")
    return first, fill


def _claim_name(profile):
    return "mig-" + profile.replace(".", "-").replace("+", "-")


def _pod(name, namespace, image, tolerations, claims=None, limits=None, node_selector=None):
    container = {"name": name, "image": image}
    if claims:
        container["resources"] = {"claims": [{"name": claim["name"]} for claim in claims]}
    if limits:
        container["resources"] = {"limits": dict(limits)}
    spec = {"containers": [container]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [{"key": item["key"], "operator": "Equal" if item.get("value") else "Exists", "value": item.get("value"),
                                "effect": item.get("effect")} for item in tolerations]
        for toleration in spec["tolerations"]:
            for key in ("value", "effect"):
                if not toleration[key]:
                    del toleration[key]
        # The API server adds these two to every Pod (admission plugin DefaultTolerationSeconds) and a Pod's
        # tolerations are one list: written out, a second apply of the manifest is a no-op instead of a rewrite.
        spec["tolerations"] += DEFAULT_TOLERATIONS
    if claims:
        spec["resourceClaims"] = claims
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _exactly(device_class, expression=None):
    request = {"deviceClassName": device_class}
    if expression:
        request["selectors"] = [{"cel": {"expression": expression}}]
    return request


def _claim(kind, name, namespace, requests):
    spec = {"devices": {"requests": requests}}
    if kind == "ResourceClaimTemplate":
        spec = {"spec": spec}
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def workload_stages(nodes, namespace, image, taints=(), node_labels=None, driver=_dra.DRIVER, bridge_resource=_dra.BRIDGE_RESOURCE):
    """The DRA lab's workloads as stages ``[{name, objects, pods, pending, model}]``, in the order they are applied.

    ``nodes`` are :func:`dra.normalize_nodes` entries; ``taints`` the DRA nodes' taints (the Pods tolerate
    them); ``node_labels`` the DRA nodes' labels (the bridged Pod selects them: with the toleration alone it
    could be served by a device-plugin node instead).
    """
    whole, shared, mig_node = demo_nodes(nodes)
    parent = _dra.gpu_uuid(mig_node["name"], 0)
    first, fill = mig_fill(mig_node["product"])
    attr = "device.attributes['%s']" % driver

    def on_demo_gpu(profile):
        return "%s.profile == '%s' && %s.parentUUID == '%s'" % (attr, profile, attr, parent)

    def pod(name, **kwargs):
        return _pod(name, namespace, image, taints, **kwargs)

    stages = []
    claim = _claim("ResourceClaim", SHARED_CLAIM, namespace, [{"name": "gpu", "exactly": _exactly(_dra.CLASS_GPU)}])
    pods = ["shared-claim-%d" % index for index in range(SHARED_CLAIM_PODS)]
    stages.append({"name": "shared-claim", "model": "shared-claim", "pending": False, "pods": pods,
                   "objects": [claim] + [pod(name, claims=[{"name": "gpu", "resourceClaimName": SHARED_CLAIM}]) for name in pods]})
    template = _claim("ResourceClaimTemplate", SHARE_TEMPLATE, namespace, [{"name": "share", "exactly": _exactly(_dra.CLASS_SHARED)}])
    # One GPU's shares and one more: the scheduler counts shares and spills onto the next GPU.
    pods = ["share-%d" % index for index in range(shared["replicas"] + (1 if shared["gpus"] > 1 else 0))]
    stages.append({"name": "shares", "model": "per-pod-claims", "pending": False, "pods": pods,
                   "objects": [template] + [pod(name, claims=[{"name": "share", "resourceClaimTemplateName": SHARE_TEMPLATE}]) for name in pods]})
    fallback = _claim("ResourceClaimTemplate", FALLBACK_TEMPLATE, namespace, [{"name": "gpu", "firstAvailable": [
        dict({"name": "mig"}, **_exactly(_dra.CLASS_MIG, on_demo_gpu(first))),
        dict({"name": "shared"}, **_exactly(_dra.CLASS_SHARED)),
    ]}])
    stages.append({"name": "fallback-0", "model": "first-available", "pending": False, "pods": ["fallback-0"], "expect_request": "gpu/mig",
                   "objects": [fallback, pod("fallback-0", claims=[{"name": "gpu", "resourceClaimTemplateName": FALLBACK_TEMPLATE}])]})
    for profile in fill:
        name = _claim_name(profile)
        stages.append({"name": name, "model": "mig", "pending": False, "pods": [name], "profile": profile, "objects": [
            _claim("ResourceClaim", name, namespace, [{"name": "mig", "exactly": _exactly(_dra.CLASS_MIG, on_demo_gpu(profile))}]),
            pod(name, claims=[{"name": "mig", "resourceClaimName": name}])]})
    stages.append({"name": "fallback-1", "model": "first-available", "pending": False, "pods": ["fallback-1"], "expect_request": "gpu/shared",
                   "objects": [pod("fallback-1", claims=[{"name": "gpu", "resourceClaimTemplateName": FALLBACK_TEMPLATE}])]})
    stages.append({"name": MIG_NEXT, "model": "mig", "pending": True, "pods": [MIG_NEXT], "profile": first, "objects": [
        _claim("ResourceClaim", MIG_NEXT, namespace, [{"name": "mig", "exactly": _exactly(_dra.CLASS_MIG, on_demo_gpu(first))}]),
        pod(MIG_NEXT, claims=[{"name": "mig", "resourceClaimName": MIG_NEXT}])]})
    if bridge_resource:
        stages.append({"name": BRIDGE_POD, "model": "bridge", "pending": False, "pods": [BRIDGE_POD],
                       "objects": [pod(BRIDGE_POD, limits={bridge_resource: 1}, node_selector=node_labels)]})
    for stage in stages:
        stage["file"] = "dra-%s.yaml" % stage["name"]
    return stages


def team_claims(namespace, device_class, devices):
    """The team's claims under quota: ``devices`` that fit, and one more the API server must refuse."""
    claims = [_claim("ResourceClaim", "team-claim-%d" % (index + 1), namespace,
                     [{"name": "gpu", "exactly": _exactly(device_class)}]) for index in range(devices)]
    over = _claim("ResourceClaim", "team-claim-over", namespace, [{"name": "gpu", "exactly": _exactly(device_class)}])
    return claims, over


def team_bridged(device_class, bridge_resource):
    """The extended resource the team's quota limits beside its device class: ``bridge_resource`` when the class is the
    whole-GPU class that serves it (its ``extendedResourceName``), else ``None``. The quota system charges every claim
    of that class to ``requests.<bridge_resource>`` too, and a Pod asking for the resource to it at admission, so one
    quota limiting both keeps whole GPUs one share however the team asks, and a claim beyond it is refused by that
    quota alone (two quotas limiting the same claim would each be named, in no fixed order)."""
    return bridge_resource if bridge_resource and device_class == _dra.CLASS_GPU else None


def quota_object(name, namespace, device_class, devices, bridged=None):
    hard = {"%s.deviceclass.resource.k8s.io/devices" % device_class: str(devices)}
    if bridged:
        hard["requests.%s" % bridged] = str(devices)
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": namespace}, "spec": {"hard": hard}}


# --------------------------------------------------------------------------
# Reading back what the scheduler did
# --------------------------------------------------------------------------


def _name(obj):
    return (obj.get("metadata") or {}).get("name")


def pod_claims(pod):
    """``[(claim name in the Pod, ResourceClaim name or None)]`` of a Pod, the bridge's implicit claim included."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    generated = {item.get("name"): item.get("resourceClaimName") for item in status.get("resourceClaimStatuses") or []}
    result = []
    for item in spec.get("resourceClaims") or []:
        result.append((item.get("name"), item.get("resourceClaimName") or generated.get(item.get("name"))))
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        result.append(("extended-resources", extended))
    return result


def _results(claim):
    return (((claim or {}).get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []


def _scheduled(pod):
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition
    return {}


def _devices(slices, driver):
    """``{(pool, device): (node, device dict)}`` of the driver's published devices."""
    found = {}
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != driver:
            continue
        for device in spec.get("devices") or []:
            found[(spec["pool"]["name"], device["name"])] = (spec.get("nodeName"), device)
    return found


def _attribute(device, name):
    value = ((device or {}).get("attributes") or {}).get(name) or {}
    return value.get("string") or value.get("version")


def workload_errors(stages, nodes, pods, claims, slices, driver=_dra.DRIVER):
    """What is not as the lab shows it, one message per problem (``[]`` when every workload is as expected)."""
    errors = []
    pods = {_name(pod): pod for pod in pods}
    claims = {_name(claim): claim for claim in claims}
    devices = _devices(slices, driver)
    by_name = {node["name"]: node for node in nodes}
    for stage in stages:
        for name in stage["pods"]:
            pod = pods.get(name)
            if pod is None:
                errors.append("%s: no such Pod" % name)
                continue
            node = (pod.get("spec") or {}).get("nodeName")
            condition = _scheduled(pod)
            if stage["pending"]:
                if node or condition.get("reason") != UNSCHEDULABLE:
                    errors.append("%s: expected Pending (no device left on the GPU), found on %s, PodScheduled reason %s"
                                  % (name, node or "no node", condition.get("reason")))
                for _local, claim_name in pod_claims(pod):
                    if _results(claims.get(claim_name)):
                        errors.append("%s: its claim %s is allocated although the Pod is Pending" % (name, claim_name))
                continue
            if not node:
                errors.append("%s: not scheduled (%s)" % (name, condition.get("message") or condition.get("reason") or "no PodScheduled condition"))
                continue
            refs = pod_claims(pod)
            if not refs:
                errors.append("%s: holds no ResourceClaim" % name)
            for _local, claim_name in refs:
                results = _results(claims.get(claim_name))
                if not results:
                    errors.append("%s: its claim %s is not allocated" % (name, claim_name))
                for result in results:
                    if result.get("pool") != node:
                        errors.append("%s: runs on %s but its claim %s holds %s/%s" % (name, node, claim_name, result.get("pool"), result.get("device")))
                    if stage.get("expect_request") and result.get("request") != stage["expect_request"]:
                        errors.append("%s: the claim was served by %s, expected %s" % (name, result.get("request"), stage["expect_request"]))
                    kind = (by_name.get(result.get("pool")) or {}).get("sharing")
                    wanted = {"shared-claim": "whole", "bridge": "whole", "per-pod-claims": "shared", "mig": "mig"}.get(stage["model"])
                    if wanted and kind != wanted:
                        errors.append("%s: got %s on %s, a %s node; expected a %s node" % (name, result.get("device"), result.get("pool"), kind, wanted))
        if stage["model"] == "shared-claim":
            holders = set(ref.get("name") for ref in (claims.get(SHARED_CLAIM, {}).get("status") or {}).get("reservedFor") or [])
            if not set(stage["pods"]) <= holders:
                errors.append("%s: claim %s is reserved for %s, expected every one of %s" % (
                    stage["name"], SHARED_CLAIM, ", ".join(sorted(holders)) or "no Pod", ", ".join(stage["pods"])))
    mig_stage = [stage for stage in stages if stage["model"] == "mig" and not stage["pending"]]
    if mig_stage:
        _whole, _shared, mig_node = demo_nodes(nodes)
        geometry = _mig.partition_geometry(mig_node["product"])
        parent = _dra.gpu_uuid(mig_node["name"], 0)
        used = 0
        for claim in claims.values():
            for result in _results(claim):
                _node, device = devices.get((result.get("pool"), result.get("device")), (None, None))
                if device and _attribute(device, "parentUUID") == parent:
                    used += geometry["profiles"][_attribute(device, "profile")]["compute"]
        if used != geometry["compute_slices"]:
            errors.append("the MIG GPU %s/gpu-0 has %d of %d compute slices allocated; the lab's claims fill it exactly"
                          % (mig_node["name"], used, geometry["compute_slices"]))
    return errors


def placement_report(nodes, pods, claims, slices, driver=_dra.DRIVER):
    """``out/dra-placement.txt``: per DRA node, each device and who holds it, then the Pending Pods and why."""
    holders = {}
    for pod in sorted(pods, key=lambda p: ((p.get("metadata") or {}).get("namespace") or "", _name(p))):
        label = "%s/%s" % (pod["metadata"].get("namespace"), _name(pod))
        for _local, claim_name in pod_claims(pod):
            claim = next((c for c in claims if _name(c) == claim_name and c["metadata"].get("namespace") == pod["metadata"].get("namespace")), None)
            for result in _results(claim):
                if result.get("driver") == driver:
                    holders.setdefault((result.get("pool"), result.get("device")), []).append(label)
    devices = _devices(slices, driver)
    lines = ["# DRA placement, read from ResourceClaim status: <node> <device> = the Pods holding it"]
    for node in nodes:
        detail = {"whole": "whole GPUs", "mig": "MIG, partitionable", "shared": "shared, %d shares per GPU" % (node["replicas"] or 0)}[node["sharing"]]
        lines.append("%s (%d x %s, %s)" % (node["name"], node["gpus"], node["product"], detail))
        names = sorted((device for pool, device in devices if pool == node["name"]), key=_device_order)
        if node["sharing"] == "mig":
            geometry = _mig.partition_geometry(node["product"])
            for index in range(node["gpus"]):
                taken = [name for name in names if name.startswith("gpu-%d-mig-" % index) and holders.get((node["name"], name))]
                compute = sum(geometry["profiles"][_attribute(devices[(node["name"], name)][1], "profile")]["compute"] for name in taken)
                lines.append("  gpu-%d: %d of %d compute slices allocated" % (index, compute, geometry["compute_slices"]))
                lines.extend("  %s = %s" % (name, ", ".join(holders[(node["name"], name)])) for name in taken)
            continue
        for name in names:
            held = holders.get((node["name"], name), [])
            share = " (%d of %d shares)" % (len(held), node["replicas"]) if node["sharing"] == "shared" else ""
            lines.append("  %s = %s%s" % (name, ", ".join(held) or "free", share))
    pending = [pod for pod in pods if not (pod.get("spec") or {}).get("nodeName")]
    for pod in sorted(pending, key=_name):
        condition = _scheduled(pod)
        why = condition.get("message") or condition.get("reason") or "not scheduled yet"
        lines.append("Pending %s/%s: %s" % (pod["metadata"].get("namespace"), _name(pod), why))
    return "\n".join(lines) + "\n"


def _device_order(name):
    return [int(part) if part.isdigit() else part for part in name.split("-")]


def sharing_table(nodes, lab_shared_replicas, lab_mig_profile, lab_mig_product):
    """The side-by-side table (Markdown): what each sharing model gives with the device plugin and with DRA."""
    _whole, shared, mig_node = demo_nodes(nodes)
    share = _dra.binary_quantity(_dra.share_bytes(shared))
    profiles = _mig.partition_geometry(mig_node["product"])["profiles"]
    most = _mig.max_instances(lab_mig_product, lab_mig_profile)
    rows = [
        ("Whole GPU", "`nvidia.com/gpu: 1`: a count on the node; which GPU is the kubelet's choice",
         "claim of class `gpu.nvidia.com`: the scheduler picks a named device (`gpu-0`) and writes it in the claim's status"),
        ("One GPU, several Pods", "time-slicing `replicas: %d`: the GPU is advertised %d times; Pods cannot say they share"
         % (lab_shared_replicas, lab_shared_replicas),
         "one ResourceClaim referenced by several Pods: they share that device, listed in `status.reservedFor`"),
        ("Shares of a GPU", "time-slicing or MPS slots; memory is one pool (MPS: a cooperative limit); "
         "`failRequestsGreaterThanOne` refuses 2 slots at run time",
         "consumable capacity: `allowMultipleAllocations`, %d claims of %s `memory` per GPU (request policy); "
         "the scheduler counts the shares and refuses a claim for more" % (shared["replicas"], share)),
        ("MIG", "a fixed layout (`mixed`: %d x `nvidia.com/mig-%s` per GPU) set before scheduling; "
         "another mix needs a relabel and a reconfiguration" % (most, lab_mig_profile),
         "partitionable devices: all %d profiles (%s) at every placement, sharing counters; the scheduler "
         "picks any mix that fits and never over-commits" % (len(profiles), ", ".join(profiles))),
        ("Fallback", "none: a Pod names one resource", "`firstAvailable`: a MIG slice while there is one, else a share"),
        ("Old manifests", "`nvidia.com/gpu: 1` as written", "the same Pod, served from DRA devices through "
         "`extendedResourceName` on `gpu.nvidia.com` (it tolerates the DRA nodes' taint)"),
        ("Team quota", "`requests.nvidia.com/gpu` counts extended resources",
         "`<class>.deviceclass.resource.k8s.io/devices` counts devices per class; the API server refuses the claim"),
        ("Placement record", "node status counts; who holds which GPU is not in the API",
         "ResourceClaim status: pool, device, share and consumed capacity per claim"),
    ]
    lines = ["| | Device plugin (the lab) | DRA (the DRA lab) |", "|---|---|---|"]
    lines.extend("| %s | %s | %s |" % row for row in rows)
    return "\n".join(lines) + "\n"
