# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The per-node state file of our mock NVML library (``tools/nvml-mock``), written from NVIDIA's hardware tables.

NVIDIA's unmodified binaries (gpu-feature-discovery first) load ``libnvidia-ml.so.1`` through ``LD_LIBRARY_PATH``;
ours answers their NVML calls from the file :data:`ENV` names. Every product fact in it (name, memory, architecture,
brand, CUDA compute capability, PCI device id, whether MIG exists) comes from :mod:`gpu_tables` (names resolved by
:mod:`gpu_products`); the driver, NVML and CUDA versions are those of the mock's DGX server of the product (the
``dgxa100`` one when none has it). Nothing here types a product fact.

The format is line-oriented so C reads it with ``fgets``: ``<key> <value>``, the value being the rest of the line;
``#`` starts a comment. Global keys ``format``, ``driver_version``, ``nvml_version``, ``cuda_driver_version``,
``device_count``; per GPU ``device.<index>.<field>`` with the fields of :data:`DEVICE_FIELDS`, and ``device.<index>.xid
<code>`` for a GPU given an XID (:data:`EVENT_FIELDS`: the mock reports that XID critical error as an NVML event). NVML's enums are
written as numbers (:data:`ARCHITECTURES`, :data:`BRANDS`: the public NVML ABI). Pure Python, no Ansible import.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid

from . import products as _products
from ..errors import InputError, is_int
from .tables import PRODUCTS as _PRODUCTS
from .tables import SERVERS as _SERVERS


__all__ = [
    "ARCHITECTURES",
    "BRANDS",
    "DEVICE_FIELDS",
    "ENV",
    "EVENT_FIELDS",
    "FORMAT",
    "NvmlStateError",
    "device_count",
    "mig_minors",
    "node_state",
    "parse",
    "place",
    "render",
    "write",
]

# The environment variable naming the state file, read by the library at nvmlInit.
ENV = "GPUSHARE_NVML_STATE"
FORMAT = 1
# Supported by tools/nvml-mock/nvml_mock.c: at most this many GPUs per node.
MAX_DEVICES = 64
# nvmlDeviceArchitecture_t by the names go-nvlib gives them (the tables' ``architecture``).
ARCHITECTURES = {
    "Kepler": 2, "Maxwell": 3, "Pascal": 4, "Volta": 5, "Turing": 6, "Ampere": 7, "Ada Lovelace": 8, "Hopper": 9, "Blackwell": 10,
}
# nvmlBrandType_t by the names go-nvlib gives them (the tables' ``brand``).
BRANDS = {
    "Quadro": 1, "Tesla": 2, "NVS": 3, "Grid": 4, "GeForce": 5, "Titan": 6, "NvidiaVApps": 7, "NvidiaVPC": 8, "NvidiaVCS": 9,
    "NvidiaVWS": 10, "NvidiaCloudGaming": 11, "QuadroRTX": 12, "NvidiaRTX": 13, "Nvidia": 14, "GeForceRTX": 15, "TitanRTX": 16,
}
DEVICE_FIELDS = (
    "name", "uuid", "memory_mib", "architecture", "brand", "cuda_compute_capability", "pci_bus_id", "pci_device_id", "minor", "mig_mode",
)
# Written only for a GPU node_state's ``xids`` names: an XID critical error the mock reports as an NVML event, once
# per event set the GPU is registered with (what NVIDIA's device plugin's health check waits for).
EVENT_FIELDS = ("xid",)
_GLOBAL_KEYS = ("format", "driver_version", "nvml_version", "cuda_driver_version", "device_count")
# A MIG-capable GPU's tables: device.<i>.gi_profile.<id>, device.<i>.gi_placements.<id>, device.<i>.ci_profile.<gi id>.<ci id>,
# device.<i>.mig.<slot> (a GPU instance with its compute instance: a MIG device) and device.<i>.gi.<slot> (a GPU instance
# without one, which only the mock writes back while NVIDIA's mig-parted builds a layout).
DEVICE_TABLES = ("gi_profile", "gi_placements", "ci_profile", "mig", "gi")
_DEVICE_KEY_RE = re.compile(
    r"device\.[0-9]+\.(%s|gi_profile\.[0-9]+|gi_placements\.[0-9]+|ci_profile\.[0-9]+\.[0-9]+|mig\.[0-9]+|gi\.[0-9]+)" % "|".join(DEVICE_FIELDS + EVENT_FIELDS))
# The server whose driver a product without a server of its own gets.
_DEFAULT_SERVER = "dgxa100"
# UUIDs are stable per node name and GPU index (uuid5 in a namespace of ours).
_UUID_NAMESPACE = uuid.UUID("8c5b1f52-6f0e-4bb3-9a35-2f1b8d0c6a11")


class NvmlStateError(InputError):
    """A node the mock cannot describe, or a state file it cannot read. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def _server_of(product):
    """The mock's DGX server of ``product`` (canonical name), else the default one: where the driver versions come from."""
    for name in sorted(_SERVERS):
        if _SERVERS[name]["product"] == product:
            return _SERVERS[name]
    return _SERVERS[_DEFAULT_SERVER]


def _gpu_uuid(node, index):
    return "GPU-%s" % uuid.uuid5(_UUID_NAMESPACE, "%s/%d" % (node, index))


def _mig_uuid(node, index, mig):
    return "MIG-%s" % uuid.uuid5(_UUID_NAMESPACE, "%s/%d/%d" % (node, index, mig))


def _full_compute_profile(profile):
    """The compute-instance profile spanning the whole GPU instance (the one a MIG device of that profile runs)."""
    return min((c for c in profile["compute_profiles"] if c["slices"] == profile["slices"]), key=lambda c: c["id"])


def place(product, names, where="mig"):
    """Where the GPU instances ``names`` (profile names as the tables write them) go on one GPU of ``product``.

    Returns ``[(profile, start, size)]`` in placement order: each instance at one of its possible placements (NVIDIA's,
    from the tables) on memory slices no other holds, the first such assignment taking the largest profile first and
    each at its earliest placement that leaves room for the rest. NvmlStateError when a profile is unknown, or the
    instances exceed the profile's instance count, the GPU's compute slices or its one media extension (``+me``), or no
    assignment exists: what real hardware refuses (and what NVIDIA's mig-parted, which tries every order, cannot apply).
    """
    canonical = _products.canonical(product)
    table = {p["name"]: p for p in _PRODUCTS[canonical]["mig_profiles"]} if canonical else {}
    if not table:
        raise NvmlStateError(where, "%r has no MIG" % (product,), "use a product of %s" % ", ".join(_products.mig_products()))
    unknown = sorted(set(name for name in names if name not in table), key=str)
    if unknown:
        raise NvmlStateError(where, "%s: no such MIG profile of %s" % (", ".join(map(repr, unknown)), canonical), "use %s" % ", ".join(table))
    compute = max(p["slices"] for p in table.values())
    order = sorted(names, key=lambda n: (-table[n]["slices"], -table[n]["memory_mib"], n))
    for name in set(order):
        if names.count(name) > table[name]["instances"]:
            raise NvmlStateError(where, "%s do not fit one %s" % (", ".join(names), canonical), "use fewer or smaller instances")
    if sum(table[name]["slices"] for name in order) > compute:
        raise NvmlStateError(where, "%s do not fit one %s" % (", ".join(names), canonical), "use fewer or smaller instances")
    if sum("+me" in name for name in order) > 1:
        raise NvmlStateError(where, "%s do not fit one %s (a GPU has one media extension: one +me instance at most)" % (", ".join(names), canonical),
                             "use one +me instance per GPU")
    placed = _placements(order, table, 0, set())
    if placed is None:
        raise NvmlStateError(where, "%s do not fit one %s (no free placements for all of them)" % (", ".join(names), canonical),
                             "use fewer or smaller instances")
    return sorted(placed, key=lambda entry: entry[1])


def _placements(order, table, index, used):
    """The first assignment of placements to ``order[index:]`` (each at one of its profile's possible placements, in
    the tables' order, on memory slices no other instance holds), or ``None``: a search, as NVIDIA's mig-parted tries
    other orders when an instance finds no free placement."""
    if index == len(order):
        return []
    profile = table[order[index]]
    for start, size in profile["placements"]:
        taken = set(range(start, start + size))
        if taken & used:
            continue
        rest = _placements(order, table, index + 1, used | taken)
        if rest is not None:
            return [(profile, start, size)] + rest
    return None


def _mig_entries(canonical, index, node, names, where):
    """The MIG tables of GPU ``index``: every GPU- and compute-instance profile, then its MIG devices (``names``)."""
    prefix = "device.%d." % index
    entries = []
    for profile in _PRODUCTS[canonical]["mig_profiles"]:
        entries.append((prefix + "gi_profile.%d" % profile["id"], " ".join(str(value) for value in (
            profile["slices"], profile["instances"], profile["memory_mib"], profile["multiprocessors"], profile["copy_engines"],
            profile["decoders"], profile["encoders"], profile["jpeg_engines"], profile["ofa_engines"], profile["p2p"], profile["name"]))))
        entries.append((prefix + "gi_placements.%d" % profile["id"], " ".join("%d:%d" % (start, size) for start, size in profile["placements"])))
        for compute in profile["compute_profiles"]:
            entries.append((prefix + "ci_profile.%d.%d" % (profile["id"], compute["id"]), " ".join(str(value) for value in (
                compute["slices"], compute["instances"], compute["multiprocessors"], compute["shared_copy_engines"],
                compute["shared_decoders"], compute["shared_encoders"], compute["shared_jpeg_engines"], compute["shared_ofa_engines"]))))
    for number, (profile, start, size) in enumerate(place(canonical, list(names), where)):
        entries.append((prefix + "mig.%d" % number, "%d %d %d %d 0 %d %s" % (
            number + 1, profile["id"], start, size, _full_compute_profile(profile)["id"], _mig_uuid(node, index, number))))
    return entries


def node_state(product, gpus, node="node", mig_enabled=False, mig_devices=None, xids=None):
    """The state of one node with ``gpus`` GPUs of ``product``, as ``[(key, value)]`` in file order (values are strings).

    ``product`` is any spelling :mod:`gpu_products` accepts (``NVIDIA-A100-SXM4-80GB``, ``H100-SXM5-80GB``, ...);
    ``node`` names the node (its GPUs' UUIDs derive from it); ``mig_enabled`` turns MIG mode on for every GPU of a
    product that has MIG (a product without MIG answers NVML_ERROR_NOT_SUPPORTED either way). ``mig_devices``, one
    list per GPU of the MIG profiles it is partitioned into (``[["1g.10gb"] * 7, []]``), implies ``mig_enabled``; each
    GPU's instances are placed by :func:`place`. ``None`` in place of a GPU's list leaves MIG mode off on that GPU alone
    (``[["1g.10gb"] * 7, None]``: what a layout enabling MIG on some GPUs only leaves). A MIG-capable GPU carries its
    product's profiles either way. ``xids`` maps a GPU's index to an XID code (``{1: 79}``): the mock reports that XID
    critical error on that GPU as an NVML event (``device.<index>.xid``).
    """
    canonical = _products.canonical(product)
    if canonical is None:
        raise NvmlStateError(
            "product", "unknown GPU product %r" % (product,), "use one of %s (the NVIDIA- prefix is optional)" % ", ".join(_products.products())
        )
    if not is_int(gpus) or not 0 <= gpus <= MAX_DEVICES:
        raise NvmlStateError("gpus", "must be an integer from 0 to %d, got %r" % (MAX_DEVICES, gpus), "give the node's GPU count, e.g. 2")
    if not isinstance(node, str) or not node or any(ch.isspace() for ch in node):
        raise NvmlStateError("node", "must be a node name without spaces, got %r" % (node,), "give the node's name, e.g. lab-node-0")
    has_mig = canonical in _products.mig_products()
    if mig_devices is not None:
        if not isinstance(mig_devices, (list, tuple)) or len(mig_devices) != gpus or not all(
                d is None or isinstance(d, (list, tuple)) for d in mig_devices):
            raise NvmlStateError("mig_devices", "must be one list of MIG profiles per GPU (%d), or None for MIG off, got %r" % (gpus, mig_devices),
                                 "give e.g. [[1g.10gb, 1g.10gb], [], None]")
        mig_enabled = any(d is not None for d in mig_devices)
    xids = dict(xids or {})
    for index, code in xids.items():
        if not is_int(index) or not 0 <= index < gpus or not is_int(code) or not 0 < code <= 0xFFFFFFFF:
            raise NvmlStateError("xids", "must map a GPU index (0 to %d) to an XID code (1 to 4294967295), got %r: %r" % (gpus - 1, index, code),
                                 "give e.g. {0: 79}")
    if mig_enabled and not has_mig:
        raise NvmlStateError("mig_enabled", "%s has no MIG" % canonical, "use a product of %s" % ", ".join(_products.mig_products()))
    facts = _PRODUCTS[canonical]
    server = _server_of(canonical)
    major, minor = facts["cuda_compute_capability"].split(".")
    entries = [
        ("format", str(FORMAT)),
        ("driver_version", server["driver_version"]),
        ("nvml_version", server["nvml_version"]),
        ("cuda_driver_version", str(server["cuda_driver_version"])),
        ("device_count", str(gpus)),
    ]
    for index in range(gpus):
        fields = {
            "name": facts["name"],
            "uuid": _gpu_uuid(node, index),
            "memory_mib": str(facts["memory_mib"]),
            "architecture": str(ARCHITECTURES[facts["architecture"]]),
            "brand": str(BRANDS[facts["brand"]]),
            "cuda_compute_capability": "%s %s" % (major, minor),
            # One GPU per PCI bus, as on a DGX board (domain 0, device 0, function 0).
            "pci_bus_id": "%08X:%02X:00.0" % (0, index + 1),
            "pci_device_id": facts["pci_device_id"],
            "minor": str(index),
            "mig_mode": ("1" if mig_enabled and (mig_devices is None or mig_devices[index] is not None) else "0") if has_mig else "none",
        }
        entries.extend(("device.%d.%s" % (index, field), fields[field]) for field in DEVICE_FIELDS)
        if index in xids:
            entries.append(("device.%d.xid" % index, str(xids[index])))
        if has_mig:
            entries.extend(_mig_entries(canonical, index, node, (mig_devices[index] or ()) if mig_devices else (), "mig_devices[%d]" % index))
    return entries


# The driver's MIG capability minors (/proc/driver/nvidia-caps/mig-minors): after config and monitor, each GPU has 15
# GPU-instance slots of 9 minors each (the GI's access, then its 8 compute instances'), numbered from 3.
_GI_SLOTS = 15
_CI_SLOTS = 8


def device_count(entries):
    """The number of GPUs a :func:`node_state` list describes."""
    return int(dict(entries).get("device_count", 0))


def mig_minors(gpus):
    """The text of ``/proc/driver/nvidia-caps/mig-minors`` for ``gpus`` GPUs, as NVIDIA's driver lays it out.

    NVIDIA's device plugin maps each MIG device's GPU and compute instance to its capability device from this file.
    """
    lines = ["config 1", "monitor 2"]
    minor = 3
    for gpu in range(gpus):
        for gi in range(_GI_SLOTS):
            lines.append("gpu%d/gi%d/access %d" % (gpu, gi, minor))
            minor += 1
            for ci in range(_CI_SLOTS):
                lines.append("gpu%d/gi%d/ci%d/access %d" % (gpu, gi, ci, minor))
                minor += 1
    return "\n".join(lines) + "\n"


def render(entries, comment=None):
    """The state file's text for ``entries`` (what :func:`node_state` returns), with an optional first comment line."""
    lines = ["# %s" % line for line in (comment or "").splitlines()]
    for key, value in entries:
        if not key or any(ch.isspace() for ch in key) or "\n" in value or "\r" in value:
            raise NvmlStateError(key or "key", "cannot be written on one line: %r %r" % (key, value), "keep keys without spaces and values on one line")
        lines.append("%s %s" % (key, value))
    return "\n".join(lines) + "\n"


def parse(text):
    """``[(key, value)]`` of a state file's text, as the C library reads it (comments and blank lines skipped)."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, value = (line.split(None, 1) + [""])[:2]
        if key not in _GLOBAL_KEYS and not _DEVICE_KEY_RE.fullmatch(key):
            raise NvmlStateError("line %d" % number, "unknown key %r" % key, "use the keys node_state writes")
        entries.append((key, value.strip()))
    return entries


def write(path, entries, comment=None):
    """Write the state file at ``path`` atomically (a reader never sees half a file); return whether it changed."""
    text = render(entries, comment)
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False
    except FileNotFoundError:
        pass
    directory = os.path.dirname(os.path.abspath(path))
    handle, tmp = tempfile.mkstemp(prefix=".nvml-state.", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True
