# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The GPU products the collection knows, and their hardware facts: one home for product names.

Every fact comes from NVIDIA's hardware tables (:mod:`gpu_tables`, generated from go-nvml's mock NVML
by ``make tables``): a product is named as gpu-feature-discovery labels it (``nvidia.com/gpu.product``)
without the ``NVIDIA-`` prefix, e.g. ``A100-SXM4-80GB`` or ``H100-80GB-HBM3``. The only names of ours
are :data:`ALIASES`, other spellings of the same boards. Pure Python, no Ansible import.
"""

from __future__ import annotations

from .tables import PRODUCTS as _PRODUCTS


__all__ = [
    "ALIASES",
    "PREFIX",
    "architecture",
    "brand",
    "canonical",
    "cuda_compute_capability",
    "memory_mib",
    "mig_products",
    "mig_profiles",
    "pci_device_id",
    "products",
]

# gpu.product labels start with it; the inventory may leave it out.
PREFIX = "NVIDIA-"

# Other spellings of a product of the tables: the board's form factor (go-nvml's mock calls its H100 config
# H100_SXM5_80GB), or the name without the memory technology.
ALIASES = {
    "A30-24GB": "A30-PCIE-24GB",
    "H100-80GB": "H100-80GB-HBM3",
    "H100-SXM5-80GB": "H100-80GB-HBM3",
    "H200-141GB": "H200-141GB-HBM3e",
    "H200-SXM5-141GB": "H200-141GB-HBM3e",
    "B200-180GB": "B200-180GB-HBM3e",
    "B200-SXM5-180GB": "B200-180GB-HBM3e",
}
# Upper-case spelling -> canonical name, for a case-insensitive lookup.
_NAMES = dict((name.upper(), name) for name in _PRODUCTS)
_NAMES.update((alias.upper(), name) for alias, name in ALIASES.items())


def products():
    """Every product of the tables (canonical names, without ``NVIDIA-``), sorted."""
    return sorted(_PRODUCTS)


def canonical(product):
    """``NVIDIA-H100-SXM5-80GB`` -> ``H100-80GB-HBM3``: the canonical name of ``product``, or ``None`` if unknown.

    Case does not matter; the ``NVIDIA-`` prefix and surrounding spaces are optional.
    """
    if not isinstance(product, str):
        return None
    name = product.strip().upper()
    if name.startswith(PREFIX.upper()):
        name = name[len(PREFIX):]
    return _NAMES.get(name)


def _facts(product):
    name = canonical(product)
    if name is None:
        raise KeyError(product)
    return _PRODUCTS[name]


def memory_mib(product):
    """Total memory of one GPU in MiB, as NVML reports it (GFD's ``nvidia.com/gpu.memory``). KeyError if unknown."""
    return _facts(product)["memory_mib"]


def architecture(product):
    """The GPU's architecture as go-nvlib names it (``Ampere``, ``Hopper``, ``Blackwell``). KeyError if unknown."""
    return _facts(product)["architecture"]


def brand(product):
    """The GPU's brand as go-nvlib names it (``Nvidia``). KeyError if unknown."""
    return _facts(product)["brand"]


def cuda_compute_capability(product):
    """``(major, minor)`` of the GPU's CUDA compute capability. KeyError if unknown."""
    major, minor = _facts(product)["cuda_compute_capability"].split(".")
    return int(major), int(minor)


def pci_device_id(product):
    """The GPU's PCI device id as NVML reports it (``0x20b210de``: device, then vendor), what mig-parted's ``device-filter``
    matches. KeyError if unknown."""
    return _facts(product)["pci_device_id"]


def mig_products():
    """The products that offer MIG profiles (canonical names), sorted."""
    return sorted(name for name, facts in _PRODUCTS.items() if facts["mig_profiles"])


def mig_profiles(product):
    """The MIG GPU-instance profiles of ``product`` (the tables' entries), smallest first. KeyError if unknown.

    Ordered by compute slices, then memory, then name: ``1g.10gb``, ``1g.10gb+me``, ``1g.20gb``, ``2g.20gb``, ...
    """
    return tuple(sorted(_facts(product)["mig_profiles"], key=lambda p: (p["slices"], p["memory_mib"], p["name"])))
