# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""MIG geometry: which profiles a GPU product offers, how many instances fit, what a node advertises.

Only products and numbers from the collection's reference table are known; memory sizes
are given where the table gives them and are ``None`` otherwise. Pure Python.
"""

from __future__ import annotations

import re

try:
    from .errors import InputError
except ImportError:  # loaded as a plain module, next to errors.py
    from errors import InputError  # type: ignore[no-redef]


__all__ = [
    "MigError",
    "canonical_product",
    "max_instances",
    "mig_resources",
    "partition_geometry",
    "products",
    "profiles",
    "resource_name",
    "validate_layout",
]

RESOURCE_PREFIX = "nvidia.com/mig-"
PRODUCT_PREFIX = "NVIDIA-"

# product -> ((profile, max instances per GPU, memory MiB or None), ...)
_A100_80GB = (
    ("1g.10gb", 7, 9856),
    ("1g.20gb", 4, 19968),
    ("2g.20gb", 3, None),
    ("3g.40gb", 2, None),
    ("4g.40gb", 1, None),
    ("7g.80gb", 1, None),
)
_GEOMETRY = {
    "A100-SXM4-40GB": (
        ("1g.5gb", 7, 4864),
        ("1g.10gb", 4, 9856),
        ("2g.10gb", 3, None),
        ("3g.20gb", 2, None),
        ("4g.20gb", 1, None),
        ("7g.40gb", 1, None),
    ),
    "A100-SXM4-80GB": _A100_80GB,
    # Same profile names and counts as the 80 GB A100; the table gives no memory sizes for it.
    "H100-80GB": tuple((name, count, None) for name, count, _memory in _A100_80GB),
    "H200-141GB": (
        ("1g.18gb", 7, None),
        ("1g.35gb", 4, None),
        ("2g.35gb", 3, None),
        ("3g.71gb", 2, None),
        ("4g.71gb", 1, None),
        ("7g.141gb", 1, None),
    ),
    "A30-24GB": (
        ("1g.6gb", 4, None),
        ("2g.12gb", 2, None),
        ("4g.24gb", 1, None),
    ),
}
_ALIASES = {
    "H100-SXM5-80GB": "H100-80GB",
    "H100-80GB-HBM3": "H100-80GB",
}
_PROFILE_RE = re.compile(r"^[1-9][0-9]*g\.[1-9][0-9]*gb(\+me)?$")
_SIZES_RE = re.compile(r"^([1-9][0-9]*)g\.([1-9][0-9]*)gb")


class MigError(InputError):
    """An invalid MIG product, profile or count. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def _path(where, field):
    return "%s.%s" % (where, field) if where else field


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value):
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, (int, float)) else type(value).__name__


def products():
    """The known products (canonical names, without the ``NVIDIA-`` prefix)."""
    return sorted(_GEOMETRY)


def canonical_product(product, where=None):
    """``NVIDIA-A100-SXM4-80GB`` -> ``A100-SXM4-80GB``; accepts the H100 spellings. Raises :class:`MigError`."""
    fix = "use one of %s (the NVIDIA- prefix of the gpu.product label is optional)" % ", ".join(products())
    if not isinstance(product, str) or not product:
        raise MigError(_path(where, "product"), "must be a GPU product name, got %s" % _show(product), fix)
    name = product.strip().upper()
    if name.startswith(PRODUCT_PREFIX):
        prefix_length = len(PRODUCT_PREFIX)
        name = name[prefix_length:]
    name = _ALIASES.get(name, name)
    if name not in _GEOMETRY:
        raise MigError(_path(where, "product"), "no MIG geometry known for product %s" % _show(product), fix)
    return name


def _table(product, where):
    return _GEOMETRY[canonical_product(product, where)]


def _profile_list(product):
    return ", ".join("%s x%d" % (name, count) for name, count, _memory in _GEOMETRY[product])


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
    """``{profile: {"max": n, "memory_mib": MiB or None, "resource": name}}`` for ``product``, in table order."""
    return {name: {"max": count, "memory_mib": memory, "resource": resource_name(name)} for name, count, memory in _table(product, None)}


def max_instances(product, profile, where=None):
    """How many ``profile`` instances fit on one GPU of ``product``. Raises :class:`MigError`."""
    canonical = canonical_product(product, where)
    for name, count, _memory in _GEOMETRY[canonical]:
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
    """One GPU of ``product`` as the slices its MIG profiles share, derived from the geometry table.

    Returns ``{"compute_slices": n, "memory_slices": m, "profiles": {profile: {"compute": c, "memory":
    k, "placements": (start, ...), "max": n, "memory_mib": MiB or None}}}`` in table order:

    - a profile ``<c>g.<size>gb`` takes ``c`` compute slices; the GPU has as many as its largest profile;
    - it takes ``size / smallest size`` memory slices (rounded: 141 GB over 18 GB slices is 8), the GPU
      as many as its largest profile;
    - its instances start on a multiple of its memory slices, the first ``max`` such starts (the table's
      instance count): 1g.10gb at 0..6, 2g.20gb at 0, 2 and 4, 3g.40gb at 0 and 4, 7g.80gb at 0, as
      ``nvidia-smi mig -lgipp`` lists them on an A100.

    A DRA driver publishes these as counters shared by every profile's devices, so the scheduler never
    over-commits the GPU: the table's counts and nothing beyond follow from the counters alone.
    """
    table = _table(product, where)
    sizes = {}
    for name, _count, _memory in table:
        match = _SIZES_RE.match(name)
        sizes[name] = (int(match.group(1)), int(match.group(2)))
    smallest = min(memory for _compute, memory in sizes.values())
    compute_slices = max(compute for compute, _memory in sizes.values())
    memory_slices = max(int(round(memory / float(smallest))) for _compute, memory in sizes.values())
    result = {}
    for name, count, memory_mib in table:
        compute, memory = sizes[name]
        size = int(round(memory / float(smallest)))
        starts = tuple(range(0, memory_slices - size + 1, size))[:count]
        result[name] = {"compute": compute, "memory": size, "placements": starts, "max": count, "memory_mib": memory_mib}
    return {"compute_slices": compute_slices, "memory_slices": memory_slices, "profiles": result}
