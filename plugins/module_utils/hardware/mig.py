# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""MIG geometry: which profiles a GPU product offers, how many instances fit, what a node advertises.

Every product, profile, instance count, memory size and placement is NVIDIA's, read from the hardware
tables (:mod:`gpu_products` over :mod:`gpu_tables`, generated from go-nvml's mock NVML and NVIDIA's documented
MIG geometry, whose instance counts, placements and engines win where the two disagree). Pure Python.
"""

from __future__ import annotations

import re

from . import nvml_state as _nvml
from . import products as _products
from ..errors import InputError, is_int as _is_int


__all__ = [
    "NODE_MIG_KEYS",
    "MigError",
    "canonical_product",
    "fit_devices",
    "layout_resources",
    "max_instances",
    "node_mig",
    "mig_resources",
    "partition_geometry",
    "products",
    "profiles",
    "resource_name",
    "validate_layout",
]

RESOURCE_PREFIX = "nvidia.com/mig-"
PRODUCT_PREFIX = _products.PREFIX

_PROFILE_RE = re.compile(r"^[1-9][0-9]*g\.[1-9][0-9]*gb(\+me)?$")


class MigError(InputError):
    """An invalid MIG product, profile or count. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def _path(where, field):
    return "%s.%s" % (where, field) if where else field


def _show(value):
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, (int, float)) else type(value).__name__


def products():
    """The products with MIG profiles (canonical names, without the ``NVIDIA-`` prefix)."""
    return _products.mig_products()


def canonical_product(product, where=None):
    """``NVIDIA-A100-SXM4-80GB`` -> ``A100-SXM4-80GB``; accepts the aliases of :mod:`gpu_products`. Raises :class:`MigError`."""
    fix = ("use one of %s (the NVIDIA- prefix of the gpu.product label is optional); another GPU needs its row in the collection's "
           "source, tools/gpu-tables/mig-geometry.yaml (NVIDIA's documented MIG profiles and placements), and make tables" % ", ".join(products()))
    if not isinstance(product, str) or not product:
        raise MigError(_path(where, "product"), "must be a GPU product name, got %s" % _show(product), fix)
    name = _products.canonical(product)
    if name not in products():
        raise MigError(_path(where, "product"), "no MIG geometry known for product %s" % _show(product), fix)
    return name


def _mig_profiles(product):
    """The tables' MIG profiles of a canonical product an inventory may lay out, smallest first.

    Media-extension profiles (``+me``, one instance per GPU) stay in the tables only: they take the GPU's one
    set of JPEG and OFA engines, which neither the layouts nor the DRA counters of this model hold yet.
    """
    return tuple(p for p in _products.mig_profiles(product) if "+" not in p["name"])


def _geometry(product):
    """``((profile, max instances, memory MiB), ...)`` of a canonical product, smallest profile first."""
    return tuple((p["name"], p["instances"], p["memory_mib"]) for p in _mig_profiles(product))


def _table(product, where):
    return _geometry(canonical_product(product, where))


def _profile_list(product):
    return ", ".join("%s x%d" % (name, count) for name, count, _memory in _geometry(product))


def resource_name(profile, where=None):
    """The extended resource a mixed-strategy node advertises for ``profile``: ``nvidia.com/mig-<profile>`` (``+me`` -> ``.me``)."""
    if not isinstance(profile, str) or not _PROFILE_RE.fullmatch(profile):
        raise MigError(
            _path(where, "profile"),
            "%s is not a MIG profile name" % _show(profile),
            "write a profile as <slices>g.<memory>gb, e.g. 1g.10gb (optionally with +me)",
        )
    return RESOURCE_PREFIX + profile.replace("+me", ".me")


def profiles(product):
    """``{profile: {"max": n, "memory_mib": MiB, "resource": name}}`` for ``product``, smallest profile first."""
    return {name: {"max": count, "memory_mib": memory, "resource": resource_name(name)} for name, count, memory in _table(product, None)}


def max_instances(product, profile, where=None):
    """How many ``profile`` instances fit on one GPU of ``product``. Raises :class:`MigError`."""
    canonical = canonical_product(product, where)
    for name, count, _memory in _geometry(canonical):
        if name == profile:
            return count
    raise MigError(
        _path(where, "profile"),
        "%s is not a MIG profile of %s" % (_show(profile), canonical),
        "use one of the %s profiles (max instances per GPU): %s" % (canonical, _profile_list(canonical)),
    )


def validate_layout(product, profile, count, where=None):
    """Check that ``count`` instances of ``profile`` fit on one GPU of ``product``; return ``count``."""
    most = max_instances(product, profile, where)
    canonical = canonical_product(product, where)
    if not _is_int(count):
        raise MigError(_path(where, "count"), "must be an integer number of instances per GPU, got %s" % _show(count), "use a whole number from 1 to %d" % most)
    if count < 1:
        raise MigError(_path(where, "count"), "must be at least 1, got %d" % count, "use a whole number from 1 to %d" % most)
    if count > most:
        raise MigError(
            _path(where, "count"),
            "%d instances of %s do not fit: one %s holds at most %d" % (count, profile, canonical, most),
            "use 1 to %d per GPU, or another profile (%s)" % (most, _profile_list(canonical)),
        )
    return count


# A node's ``mig`` block: the product, then the profile (and instances per GPU, default the full layout) or several
# profiles at once (``devices``: ``{profile: instances per GPU}``, mig-parted's ``mig-devices``), and how many of its GPUs
# (default all) carry them.
NODE_MIG_KEYS = ("product", "profile", "gpus", "count", "devices")


def _describe_devices(devices, geometry, unit):
    """``4 x 1g.20gb at 2 each + 3g.40gb at 4``: what each profile of ``devices`` takes of ``unit`` (compute or memory)."""
    parts = []
    for profile, count in devices.items():
        size = geometry["profiles"][profile][unit]
        parts.append("%s at %d" % (profile, size) if count == 1 else "%d x %s at %d each" % (count, profile, size))
    return " + ".join(parts)


def _costs(geometry, unit):
    return ", ".join("%s %d" % (name, profile[unit]) for name, profile in geometry["profiles"].items())


def fit_devices(product, devices, where=None):
    """Check that the MIG devices ``devices`` (``{profile: instances}``) fit one GPU of ``product`` together, as the GPU
    places them; return them as ``{profile: instances}`` in the tables' order (smallest profile first).

    A GPU instance takes its profile's compute slices and memory slices at one of NVIDIA's placements (``nvidia-smi mig
    -lgipp``; :func:`partition_geometry`). Refused, naming the field and what the layout needs: a profile the product
    lacks, more memory or compute slices than the GPU has (the memory in MiB beside the slices), or no placement holding
    them all at once (more instances of one profile than one GPU holds ends in one of these). Raises :class:`MigError`.
    """
    canonical = canonical_product(product, where)
    path = _path(where, "devices")
    example = "write {profile: instances per GPU}, e.g. {1g.10gb: 4, 3g.40gb: 1}"
    if not isinstance(devices, dict) or not devices:
        raise MigError(path, "must be a non-empty mapping of MIG profile to instances per GPU, got %s" % _show(devices), example)
    geometry = partition_geometry(canonical)
    table = geometry["profiles"]
    for profile, count in devices.items():
        if profile not in table:
            raise MigError(_path(path, str(profile)), "%s is not a MIG profile of %s" % (_show(profile), canonical),
                           "use profiles of %s (max instances per GPU): %s" % (canonical, _profile_list(canonical)))
        if not _is_int(count) or count < 1:
            raise MigError(_path(path, profile), "must be a whole number of instances of at least 1, got %s" % _show(count),
                           "give the instances per GPU, or leave the profile out")
    ordered = {name: devices[name] for name in table if name in devices}
    shown = " + ".join("%d x %s" % (count, name) for name, count in ordered.items())
    gpu_mib = _products.memory_mib(canonical)
    for unit, have in (("memory", geometry["memory_slices"]), ("compute", geometry["compute_slices"])):
        need = sum(count * table[name][unit] for name, count in ordered.items())
        if need > have:
            memory = ""
            if unit == "memory":
                memory = ": %d MiB of memory, the GPU has %d MiB" % (sum(count * table[name]["memory_mib"] for name, count in ordered.items()), gpu_mib)
            raise MigError(path, "%s do not fit one %s: they need %d of its %d %s slices (%s)%s"
                           % (shown, canonical, need, have, unit, _describe_devices(ordered, geometry, unit), memory),
                           "use at most %d %s slices per GPU (per instance: %s), or spread the layout over more GPUs"
                           % (have, unit, _costs(geometry, unit)))
    try:
        _nvml.place(canonical, [name for name, count in ordered.items() for _index in range(count)], path)
    except _nvml.NvmlStateError:
        where_each = "; ".join("%s at %s" % (name, ", ".join("%d-%d" % (start, start + table[name]["memory"] - 1) for start in table[name]["placements"]))
                               for name in ordered)
        raise MigError(path, "%s do not fit one %s: no placement holds them all at once (NVIDIA's placements, in memory slices: %s)"
                       % (shown, canonical, where_each), "choose instances whose placements leave room for each other, or fewer of them")
    return ordered


def node_mig(mig, where, node_gpus=None):
    """A node's ``mig`` block (:data:`NODE_MIG_KEYS`) read once, for every use: the lab's advertised resources, the
    operator's mig-parted layout and the node pools resolved to nodes. Returns ``{"product", "gpus", "devices",
    "profile", "count"}``: ``gpus`` (default ``node_gpus``) from 1 to the node's GPUs; ``devices`` the instances per GPU
    of each profile (:func:`fit_devices`); ``profile`` and ``count`` the one profile and its instances (``count``
    defaults to the product's full layout), both ``None`` for a layout of several profiles. A key whose value is
    ``None`` is absent (an argument spec fills them in). Raises :class:`MigError` naming the field (``where`` is the
    block's path)."""
    if not isinstance(mig, dict):
        raise MigError(where, "must be a mapping with product, profile and gpus", "write e.g. {product: NVIDIA-A100-SXM4-80GB, profile: 1g.10gb, gpus: 1}")
    for key in mig:
        if key not in NODE_MIG_KEYS:
            raise MigError(_path(where, key), "unknown key", "use only %s" % ", ".join(NODE_MIG_KEYS))
    mig = {key: value for key, value in mig.items() if value is not None}
    if "product" not in mig:
        raise MigError(_path(where, "product"), "missing", "add the GPU product, e.g. NVIDIA-A100-SXM4-80GB")
    if "devices" in mig and ("profile" in mig or "count" in mig):
        raise MigError(_path(where, "devices"), "goes without profile and count", "give one profile (profile, count) or several (devices)")
    if "devices" not in mig and "profile" not in mig:
        raise MigError(_path(where, "profile"), "missing", "add the MIG profile, e.g. 1g.10gb, or several as devices: {1g.10gb: 4, 3g.40gb: 1}")
    gpus = mig.get("gpus", node_gpus)
    if gpus is None:
        raise MigError(_path(where, "gpus"), "missing", "add the number of MIG-partitioned GPUs, e.g. gpus: 1")
    if node_gpus is not None and _is_int(gpus) and gpus > node_gpus:
        raise MigError(
            _path(where, "gpus"),
            "%d MIG GPUs but the node has only %d physical GPU%s" % (gpus, node_gpus, "" if node_gpus == 1 else "s"),
            "use at most %d" % node_gpus,
        )
    if "devices" in mig:
        devices = fit_devices(mig["product"], mig["devices"], where)
    else:
        most = max_instances(mig["product"], mig["profile"], where)
        count = most if mig.get("count") is None else validate_layout(mig["product"], mig["profile"], mig["count"], where)
        devices = {mig["profile"]: count}
    if not _is_int(gpus) or gpus < 1:
        raise MigError(_path(where, "gpus"), "must be a whole number of 1 or more MIG-partitioned GPUs, got %s" % _show(gpus),
                       "give how many of the node's GPUs to partition, e.g. gpus: 1, or remove the mig block")
    profile, count = next(iter(devices.items())) if len(devices) == 1 else (None, None)
    return {"product": mig["product"], "profile": profile, "gpus": gpus, "count": count, "devices": devices}


def layout_resources(spec, where=None):
    """``{nvidia.com/mig-<profile>: gpus x instances}`` for every profile of a layout :func:`node_mig` read."""
    return {resource_name(profile, where): spec["gpus"] * count for profile, count in spec["devices"].items()}


def mig_resources(product, profile, gpus, count_per_gpu=None, where=None):
    """``{"nvidia.com/mig-<profile>": gpus * count}`` for ``gpus`` GPUs partitioned into ``count_per_gpu`` instances each.

    ``count_per_gpu`` defaults to the full layout (the product's maximum for the profile).
    """
    most = max_instances(product, profile, where)
    count = most if count_per_gpu is None else validate_layout(product, profile, count_per_gpu, where)
    if not _is_int(gpus) or gpus < 0:
        raise MigError(_path(where, "gpus"), "must be a non-negative integer number of MIG-enabled GPUs, got %s" % _show(gpus), "give the GPU count, e.g. 1")
    return {resource_name(profile, where): gpus * count}


def partition_geometry(product, where=None):
    """One GPU of ``product`` as the slices its MIG profiles share, from NVIDIA's placements.

    Returns ``{"compute_slices": n, "memory_slices": m, "profiles": {profile: {"compute": c, "memory":
    k, "placements": (start, ...), "max": n, "memory_mib": MiB}}}``, smallest profile first:

    - a profile takes its NVML slice count of compute slices; the GPU has as many as its largest profile;
    - it takes the size of its NVML placements in memory slices; the GPU has as many as the placements
      reach (8 on an A100, H100, H200 and B200: the documented placements; go-nvml's mock made them 7 on the
      last three, placing by compute slices);
    - its instances start at the first ``max`` (the profile's instance count) of its possible placements:
      1g.10gb at 0..6, 2g.20gb at 0, 2 and 4, 3g.40gb at 0 and 4, 7g.80gb at 0 on an A100, as
      ``nvidia-smi mig -lgipp`` lists them.

    A DRA driver publishes these as counters shared by every profile's devices, so the scheduler never
    over-commits the GPU: the table's counts and nothing beyond follow from the counters alone.
    """
    canonical = canonical_product(product, where)
    table = _mig_profiles(canonical)
    compute_slices = max(p["slices"] for p in table)
    memory_slices = max(start + size for p in table for start, size in p["placements"])
    result = {}
    for profile in table:
        sizes = set(size for _start, size in profile["placements"])
        if len(sizes) != 1:  # pragma: no cover - NVML gives one size per profile
            raise MigError(_path(where, "product"), "%s of %s has placements of several sizes" % (profile["name"], canonical), "regenerate the tables")
        starts = tuple(start for start, _size in profile["placements"])[:profile["instances"]]
        result[profile["name"]] = {"compute": profile["slices"], "memory": sizes.pop(), "placements": starts,
                                   "max": profile["instances"], "memory_mib": profile["memory_mib"]}
    return {"compute_slices": compute_slices, "memory_slices": memory_slices, "profiles": result}
