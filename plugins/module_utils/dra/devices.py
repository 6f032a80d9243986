# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The DRA track: the lab's simulated GPUs as ResourceSlices, DeviceClasses and share limits.

What a DRA driver publishes for a node is computed here from the node's inventory entry, with the
names of NVIDIA's DRA driver (k8s-dra-driver-gpu): driver ``gpu.nvidia.com``, device classes
``gpu.nvidia.com`` and ``mig.nvidia.com``, devices ``gpu-<i>`` and ``gpu-<i>-mig-<profile>-<start>``,
attributes ``type``, ``uuid``, ``productName``, ``architecture``, ``cudaComputeCapability``,
``driverVersion``, ``profile``, ``parentUUID``, capacity ``memory``, counter sets
``gpu-<i>-counter-set`` with ``memory-slice-<n>`` counters. Three kinds of node:

- ``whole``: one device per GPU, allocated to one claim at a time;
- ``mig``: partitionable devices. Every MIG profile the product supports, at every placement
  (:func:`mig.partition_geometry`), consumes the GPU's shared counters: its compute slices and the
  memory slices it covers. The scheduler never allocates devices whose counters together exceed the
  GPU, so it enforces the product's geometry itself (never an eighth 1g.10gb on an A100);
- ``shared``: one device per GPU that allows multiple allocations (consumable capacity); its
  ``memory`` capacity carries a request policy of one share (memory / replicas), so each claim takes
  exactly one share and ``replicas`` claims fit on a GPU, the time-slicing/MPS picture with the
  scheduler counting the shares.

A pool per node (named after the node, as the kubelet plugin names it), in as many slices as the
API's limits ask (devices and counter sets never share a slice). :func:`plan_pool` compares a pool
with what the cluster holds and :func:`apply_resource_slices` writes only pools that differ, under a
new pool generation, and deletes the pool's stale slices; slices of other drivers and of other pools
are never read for writing. No Ansible import.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from .. import names as _names
from ..hardware import node as _node
from ..hardware import products as _products
from ..hardware import mig as _mig
from ..errors import ApiCallError, GpushareError, InputError, is_int as _is_int
from ..k8s.quantity import parse_quantity


__all__ = [
    "CLASS_GPU",
    "CLASS_MIG",
    "CLASS_SHARED",
    "DRIVER",
    "DraError",
    "DraWriteError",
    "ResourceSliceApi",
    "apply_resource_slices",
    "device_classes",
    "node_slices",
    "normalize_nodes",
    "plan_pool",
    "share_limits",
]

DRIVER = "gpu.nvidia.com"
CLASS_GPU = "gpu.nvidia.com"
CLASS_MIG = "mig.nvidia.com"
CLASS_SHARED = "shared.gpu.nvidia.com"
# The extended resource the whole-GPU class serves (NVIDIA's chart sets the same on gpu.nvidia.com).
BRIDGE_RESOURCE = _names.GPU_RESOURCE
SHARINGS = ("whole", "mig", "shared")
STATES = ("present", "absent")
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpushare.k8s"
KWOK_ANNOTATION = _names.KWOK_NODE_ANNOTATION
DEFAULT_PARALLELISM = 16
MAX_PARALLELISM = 256
ATTEMPTS = 5
RETRYABLE_STATUS = frozenset((409, 429, 500, 502, 503, 504))

# API limits (k8s.io/api/resource/v1): devices per slice, with counters; counter sets per slice.
MAX_DEVICES = 128
MAX_DEVICES_WITH_COUNTERS = 64
MAX_COUNTER_SETS = 8

# What NVML would report on the simulated GPUs (the lab has no driver; these are the attribute values
# a claim may select on): brand, architecture and CUDA compute capability come from NVIDIA's hardware
# tables (gpu_products); the driver and CUDA versions are the lab's.
SIMULATED_DRIVER_VERSION = "580.82.7"
SIMULATED_CUDA_DRIVER_VERSION = "13.0.0"

_DNS_SUBDOMAIN_RE = _names.DNS_SUBDOMAIN_RE
_QUANTITY_KEYS = frozenset(("value", "default", "min", "max", "step"))
_BINARY = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


class DraError(InputError):
    """Input that cannot be published. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``; nothing was written."""


class DraApiError(ApiCallError):
    """An API call failed (``status`` is the HTTP status, ``None`` for a network error)."""

    @property
    def retryable(self):
        return not self.timed_out and (self.status is None or self.status in RETRYABLE_STATUS)


class DraWriteError(GpushareError):
    """Some pools could not be written. ``results`` holds every pool's outcome."""

    def __init__(self, message, results):
        super().__init__(message)
        self.results = results


# --------------------------------------------------------------------------
# Input
# --------------------------------------------------------------------------


def _path(where, field):
    return "%s.%s" % (where, field) if where else field


def normalize_nodes(nodes, default_product=None, where="nodes"):
    """The DRA nodes of the inventory, read by the one node model (:func:`gpu_node.read_nodes`, the DRA track), as
    ``[{name, gpus, product, canonical, memory_mib, sharing, replicas}]``.

    Each entry is ``{name, gpus, product?, mig?: true, shared?: {replicas: n}}``: ``mig`` makes every GPU
    partitionable into the product's MIG profiles, ``shared`` lets ``replicas`` claims share each GPU,
    neither gives whole GPUs. ``product`` defaults to ``default_product``. Every problem names its field.
    """
    return [{"name": node.name, "gpus": node.gpus, "product": node.product, "canonical": node.canonical, "memory_mib": node.memory_mib,
             "sharing": node.sharing, "replicas": node.replicas}
            for node in _node.read_nodes(nodes, _node.DRA, default_product=default_product, field=where)]


def check_driver(driver):
    if not isinstance(driver, str) or len(driver) > 63 or not _DNS_SUBDOMAIN_RE.fullmatch(driver):
        raise DraError("driver", "%r is not a DRA driver name" % (driver,), "use a DNS subdomain of at most 63 characters, e.g. gpu.nvidia.com")
    return driver


def check_parallelism(parallelism):
    if not _is_int(parallelism) or not 1 <= parallelism <= MAX_PARALLELISM:
        raise DraError("parallelism", "%r is out of range" % (parallelism,), "use an integer from 1 to %d" % MAX_PARALLELISM)
    return parallelism


# --------------------------------------------------------------------------
# Devices and slices
# --------------------------------------------------------------------------


def binary_quantity(value):
    """A byte count as Kubernetes writes it canonically: the largest binary suffix it is a whole multiple of."""
    for suffix, shift in _BINARY:
        if value and value % (1 << shift) == 0:
            return "%d%s" % (value >> shift, suffix)
    return str(value)


def share_bytes(node):
    """Memory of one share of a shared node's GPU, in bytes, rounded down to a MiB."""
    return (node["memory_mib"] * 2 ** 20 // node["replicas"]) // 2 ** 20 * 2 ** 20


def gpu_uuid(node_name, index):
    """A stable made-up GPU UUID (NVML's ``GPU-<uuid>`` form), the same on every run."""
    return "GPU-%s" % uuid.uuid5(uuid.NAMESPACE_URL, "https://gpushare.k8s/%s/gpu-%d" % (node_name, index))


def _attributes(node, kind):
    facts = node["canonical"]
    return {
        "type": {"string": kind},
        "productName": {"string": node["product"]},
        "brand": {"string": _products.brand(facts)},
        "architecture": {"string": _products.architecture(facts)},
        "cudaComputeCapability": {"version": "%d.%d.0" % _products.cuda_compute_capability(facts)},
        "driverVersion": {"version": SIMULATED_DRIVER_VERSION},
        "cudaDriverVersion": {"version": SIMULATED_CUDA_DRIVER_VERSION},
    }


def counter_set_name(index):
    return "gpu-%d-counter-set" % index


def mig_device_name(index, profile, start):
    return "gpu-%d-mig-%s-%d" % (index, re.sub(r"[^a-z0-9-]", "", profile.replace("+", "-").lower()), start)


def _gpu_devices(node):
    devices = []
    memory = binary_quantity(node["memory_mib"] * 2 ** 20)
    for index in range(node["gpus"]):
        attributes = _attributes(node, "gpu")
        attributes["uuid"] = {"string": gpu_uuid(node["name"], index)}
        device = {"name": "gpu-%d" % index, "attributes": attributes, "capacity": {"memory": {"value": memory}}}
        if node["sharing"] == "shared":
            share = binary_quantity(share_bytes(node))
            device["allowMultipleAllocations"] = True
            device["capacity"]["memory"]["requestPolicy"] = {"default": share, "validValues": [share]}
        devices.append(device)
    return devices


def _mig_parts(node):
    geometry = _mig.partition_geometry(node["product"], node["name"])
    counter_sets = []
    devices = []
    for index in range(node["gpus"]):
        counters = {"compute-slices": {"value": str(geometry["compute_slices"])}}
        for slice_index in range(geometry["memory_slices"]):
            counters["memory-slice-%d" % slice_index] = {"value": "1"}
        counter_sets.append({"name": counter_set_name(index), "counters": counters})
        parent = gpu_uuid(node["name"], index)
        for profile, shape in geometry["profiles"].items():
            for start in shape["placements"]:
                attributes = _attributes(node, "mig")
                attributes["profile"] = {"string": profile}
                attributes["parentUUID"] = {"string": parent}
                consumed = {"compute-slices": {"value": str(shape["compute"])}}
                for slice_index in range(start, start + shape["memory"]):
                    consumed["memory-slice-%d" % slice_index] = {"value": "1"}
                device = {"name": mig_device_name(index, profile, start), "attributes": attributes,
                          "consumesCounters": [{"counterSet": counter_set_name(index), "counters": consumed}]}
                if shape["memory_mib"]:
                    device["capacity"] = {"memory": {"value": binary_quantity(shape["memory_mib"] * 2 ** 20)}}
                devices.append(device)
    return counter_sets, devices


def _chunks(items, size):
    return [items[start:start + size] for start in range(0, len(items), size)]


def slice_name(node_name, driver, index):
    return "%s-%s-%d" % (node_name, driver, index)


def node_slices(node, driver=DRIVER, generation=1, owner_uid=None):
    """The ResourceSlice objects of one normalized node's pool (names ``<node>-<driver>-<n>``), at ``generation``."""
    if node["sharing"] == "mig":
        counter_sets, devices = _mig_parts(node)
        parts = [{"sharedCounters": chunk} for chunk in _chunks(counter_sets, MAX_COUNTER_SETS)]
        parts += [{"devices": chunk} for chunk in _chunks(devices, MAX_DEVICES_WITH_COUNTERS)]
    else:
        parts = [{"devices": chunk} for chunk in _chunks(_gpu_devices(node), MAX_DEVICES)]
    slices = []
    for index, part in enumerate(parts):
        name = slice_name(node["name"], driver, index)
        if len(name) > 253:
            raise DraError(_path(node["name"], "name"), "is too long for its slices' names (%s)" % name, "use a node name of at most 230 characters")
        metadata = {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}
        if owner_uid:
            metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node["name"], "uid": owner_uid}]
        spec = {"driver": driver, "pool": {"name": node["name"], "generation": generation, "resourceSliceCount": len(parts)},
                "nodeName": node["name"]}
        spec.update(part)
        slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": metadata, "spec": spec})
    return slices


def share_limits(nodes):
    """``{class: {capacity: quantity}}``: what one claim request may take from a shared class (one share).

    The request check reads claims with it: a request for more (a larger capacity, or several devices)
    asks for more than one share, as a container asking for 2 time-sliced GPUs does.
    """
    shares = sorted(set(share_bytes(node) for node in nodes if node["sharing"] == "shared"))
    if not shares:
        return {}
    return {CLASS_SHARED: {"memory": binary_quantity(shares[0])}}


def device_classes(driver=DRIVER, bridge_resource=BRIDGE_RESOURCE):
    """The DeviceClasses of the track (whole GPU with the extended-resource bridge, MIG, shared), as objects."""
    base = "device.driver == '%s' && device.attributes['%s'].type == " % (driver, driver)
    whole = {"selectors": [{"cel": {"expression": base + "'gpu' && !device.allowMultipleAllocations"}}]}
    if bridge_resource:
        whole["extendedResourceName"] = bridge_resource
    specs = (
        (CLASS_GPU, whole),
        (CLASS_MIG, {"selectors": [{"cel": {"expression": base + "'mig'"}}]}),
        (CLASS_SHARED, {"selectors": [{"cel": {"expression": base + "'gpu' && device.allowMultipleAllocations"}}]}),
    )
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec} for name, spec in specs]


# --------------------------------------------------------------------------
# Planning (pure)
# --------------------------------------------------------------------------


def _comparable(value, key=None):
    """A slice's managed content with quantities read as numbers (``80Gi`` equals ``81920Mi``)."""
    if isinstance(value, dict):
        return {k: _comparable(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(item, key) for item in value]
    if key in _QUANTITY_KEYS or key == "validValues":
        parsed = parse_quantity(value)
        return ("quantity", str(parsed)) if parsed is not None else value
    return value


def _managed(obj):
    """The parts of a ResourceSlice this collection writes: labels, owner references and spec (generation aside)."""
    metadata = obj.get("metadata") or {}
    spec = json.loads(json.dumps(obj.get("spec") or {}))
    spec.get("pool", {}).pop("generation", None)
    owners = [{key: owner.get(key) for key in ("apiVersion", "kind", "name", "uid")} for owner in metadata.get("ownerReferences") or []]
    return _comparable({"labels": {MANAGED_BY_LABEL: (metadata.get("labels") or {}).get(MANAGED_BY_LABEL)}, "owners": owners, "spec": spec})


def _generation(obj):
    value = ((obj.get("spec") or {}).get("pool") or {}).get("generation")
    return value if _is_int(value) else 0


def plan_pool(existing, desired):
    """Plan one pool: ``existing`` are the cluster's slices of that driver and pool, ``desired`` from :func:`node_slices`.

    Returns ``{"changed", "generation", "create": [obj], "replace": [obj], "delete": [name]}``. An
    unchanged pool keeps its generation. A changed one is written whole at the next generation
    (the scheduler only trusts a pool whose slices all carry the newest generation and whose count
    matches), then its stale slices are deleted.
    """
    if not existing and not desired:
        return {"changed": False, "generation": None, "create": [], "replace": [], "delete": []}
    by_name = {(item.get("metadata") or {}).get("name"): item for item in existing}
    generations = set(_generation(item) for item in existing)
    same = (
        len(generations) == 1
        and set(by_name) == set((item["metadata"]["name"]) for item in desired)
        and all(_managed(by_name[item["metadata"]["name"]]) == _managed(item) for item in desired)
    )
    if same:
        return {"changed": False, "generation": generations.pop(), "create": [], "replace": [], "delete": []}
    generation = max(generations or {0}) + 1
    create = []
    replace = []
    for item in desired:
        item = json.loads(json.dumps(item))
        item["spec"]["pool"]["generation"] = generation
        current = by_name.get(item["metadata"]["name"])
        if current is None:
            create.append(item)
        else:
            item["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            replace.append(item)
    wanted = set(item["metadata"]["name"] for item in desired)
    delete = sorted(name for name in by_name if name not in wanted)
    return {"changed": True, "generation": generation, "create": create, "replace": replace, "delete": delete}


def _view(slices):
    """What a diff shows of a pool: each slice's spec by name."""
    return {(item.get("metadata") or {}).get("name"): item.get("spec") for item in sorted(slices, key=lambda s: (s.get("metadata") or {}).get("name") or "")}


# --------------------------------------------------------------------------
# The API
# --------------------------------------------------------------------------


def _client_calls():
    """The calls of cluster_objects, imported on first use: the filters of the DRA track read this file, and a filter
    must not cost the import of the Kubernetes client."""
    from ..k8s import cluster_objects
    return cluster_objects


def list_pages(*args, **kwargs):
    return _client_calls().list_pages(*args, **kwargs)


def call_json(*args, **kwargs):
    return _client_calls().call_json(*args, **kwargs)


class ResourceSliceApi:
    """The calls :func:`apply_resource_slices` makes, on a ``kubernetes.client.ApiClient`` (tests pass a fake)."""

    def __init__(self, api_client, request_timeout=None):
        self._api_client = api_client
        self._timeout = request_timeout

    def _route(self, verb, plural="resourceslices", name=None, api_version="resource.k8s.io/v1"):
        calls = _client_calls()
        return calls.Route(self._api_client, verb, calls.api_path(api_version, plural, name=name))

    def list_slices(self, driver):
        return list_pages(self._route("GET"), field_selector="spec.driver=%s" % driver, timeout=self._timeout, error=DraApiError)

    def list_pool(self, driver, pool):
        return [item for item in self.list_slices(driver) if ((item.get("spec") or {}).get("pool") or {}).get("name") == pool]

    def list_nodes(self):
        return list_pages(self._route("GET", "nodes", api_version="v1"), timeout=self._timeout, error=DraApiError)

    def create(self, body):
        return call_json(self._route("POST"), body, timeout=self._timeout, error=DraApiError)

    def replace(self, body):
        return call_json(self._route("PUT", name=body["metadata"]["name"]), body, timeout=self._timeout, error=DraApiError)

    def delete(self, name):
        try:
            call_json(self._route("DELETE", name=name), timeout=self._timeout, error=DraApiError)
        except DraApiError as exc:
            if exc.status != 404:
                raise


def _write_pool(api, driver, plan, desired, pool):
    """Carry out ``plan``; on a conflict or a transient error re-read the pool and plan again. Returns the plan carried out."""
    for attempt in range(ATTEMPTS):
        try:
            for item in plan["create"]:
                api.create(item)
            for item in plan["replace"]:
                api.replace(item)
            for name in plan["delete"]:
                api.delete(name)
            return plan
        except DraApiError as exc:
            if not exc.retryable or attempt == ATTEMPTS - 1:
                raise
            time.sleep(min(0.1 * 2 ** attempt, 2.0))
            plan = plan_pool(api.list_pool(driver, pool), desired)
    return plan  # pragma: no cover - the loop returns or raises


def apply_resource_slices(api, nodes, driver=DRIVER, state="present", prune=False, check_mode=False,
                          allow_real_nodes=False, parallelism=DEFAULT_PARALLELISM, default_product=None):
    """Publish (``present``) or remove (``absent``) each node's pool; return one result per pool.

    Validation and every read happen before the first write. ``prune`` also removes this driver's
    pools that this collection published (label ``app.kubernetes.io/managed-by=gpushare.k8s``) for
    nodes no longer listed. Slices of other drivers are never listed; other pools of this driver
    are never written unless pruned.
    """
    check_driver(driver)
    check_parallelism(parallelism)
    if state not in STATES:
        raise DraError("state", "%r is not one of %s" % (state, ", ".join(STATES)), "use present or absent")
    nodes = normalize_nodes(nodes, default_product)
    cluster_nodes = {(item.get("metadata") or {}).get("name"): item for item in api.list_nodes()}
    if state == "present":
        missing = [node["name"] for node in nodes if node["name"] not in cluster_nodes]
        if missing:
            raise DraError("nodes", "node(s) %s do not exist in the cluster" % ", ".join(missing),
                           "create them first (playbooks/cluster.yml creates the lab's DRA nodes) or remove them from the list; nothing was written")
        if not allow_real_nodes:
            real = [node["name"] for node in nodes
                    if ((cluster_nodes[node["name"]].get("metadata") or {}).get("annotations") or {}).get(KWOK_ANNOTATION) != "fake"]
            if real:
                raise DraError("nodes", "node(s) %s are not kwok nodes (no annotation %s=fake): a real DRA driver publishes their devices"
                               % (", ".join(real), KWOK_ANNOTATION), "set allow_real_nodes=true only on a cluster with no GPU driver; nothing was written")
    slices = api.list_slices(driver)
    pools = {}
    for item in slices:
        pools.setdefault(((item.get("spec") or {}).get("pool") or {}).get("name"), []).append(item)
    work = []
    for node in nodes:
        existing = pools.pop(node["name"], [])
        owner = ((cluster_nodes.get(node["name"]) or {}).get("metadata") or {}).get("uid")
        desired = node_slices(node, driver, owner_uid=owner) if state == "present" else []
        work.append((node["name"], existing, desired))
    if prune:
        for pool, existing in sorted(pools.items()):
            if all(((item.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY for item in existing):
                work.append((pool, existing, []))

    def run(entry):
        pool, existing, desired = entry
        plan = plan_pool(existing, desired)
        result = {"name": pool, "changed": plan["changed"], "generation": plan["generation"] if desired else None,
                  "slices": sorted(item["metadata"]["name"] for item in desired),
                  "devices": sum(len(item["spec"].get("devices") or []) for item in desired),
                  "created": [item["metadata"]["name"] for item in plan["create"]],
                  "updated": [item["metadata"]["name"] for item in plan["replace"]],
                  "deleted": list(plan["delete"]),
                  "before": _view(existing), "after": _view(plan["create"] + plan["replace"]) if plan["changed"] else _view(existing)}
        if plan["changed"] and not check_mode:
            try:
                done = _write_pool(api, driver, plan, desired, pool)
                result["generation"] = done["generation"] if desired else None
            except DraApiError as exc:
                result["error"] = str(exc)
        return result

    if len(work) > 1 and parallelism > 1:
        with ThreadPoolExecutor(max_workers=min(parallelism, len(work))) as pool_executor:
            results = list(pool_executor.map(run, work))
    else:
        results = [run(entry) for entry in work]
    failed = [result for result in results if "error" in result]
    if failed:
        raise DraWriteError("cannot write the ResourceSlices of %s: %s" % (
            ", ".join(result["name"] for result in failed), "; ".join("%s: %s" % (r["name"], r["error"]) for r in failed[:3])), results)
    return results
