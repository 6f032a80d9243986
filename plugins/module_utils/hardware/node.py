# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One GPU node model for every track of the collection: the one reader of an inventory node.

A node is what an inventory says about one Kubernetes node with NVIDIA GPUs: its name, its physical GPU count, its
GPU product and how its GPUs are shared. The lab's device-plugin nodes (``gpushare_nodes``; the node pools of
``gpushare_node_pools`` once resolved against the cluster are such nodes too) and the DRA track's nodes
(``gpushare_dra_nodes``) are read here, by :func:`read_node`, into one shape, :class:`GpuNode`. The fields every
track shares (``name``, ``gpus``, ``product``) are read by one function each; each track accepts the sharing forms
that its way of handing out GPUs can serve, and refuses the other track's form with the one it takes:

=================  =======================================  ======================================
sharing            device-plugin track                      DRA track
=================  =======================================  ======================================
whole GPUs         neither ``config`` nor ``mig``           neither ``mig`` nor ``shared``
time-slicing, MPS  ``config: <device-plugin config name>``  ``shared: {replicas: n}``
MIG                ``mig: {product, profile, gpus, count}``  ``mig: true`` (every profile, on demand)
=================  =======================================  ======================================

What a node advertises, the labels GFD gives it and the DRA devices it publishes are views of a :class:`GpuNode`
(``inventory.node_gpu_resources``, ``gpu_features.feature_labels``, ``dra.node_slices``). Pure Python, no Ansible
import.
"""

from __future__ import annotations

from collections import namedtuple

from . import products as _products
from . import mig as _mig
from ..errors import InputError, is_int as _is_int
from ..names import DNS_SUBDOMAIN_RE, LABEL_VALUE_RE


__all__ = ["DEVICE_PLUGIN", "DRA", "KEYS", "GpuNode", "NodeError", "product_label", "product_name", "read_gpus", "read_node", "read_nodes", "read_product"]

DEVICE_PLUGIN = "device-plugin"
DRA = "dra"
# The keys a node of each track may have.
KEYS = {DEVICE_PLUGIN: ("name", "gpus", "config", "mig", "product"), DRA: ("name", "gpus", "product", "mig", "shared")}
# The physical GPUs of a DRA node: at least one (a DRA node publishes its GPUs), at most what one ResourceSlice pool
# of this model holds.
DRA_GPUS = (1, 64)
# Claims sharing one GPU of a DRA node.
DRA_REPLICAS = (2, 64)


class NodeError(InputError):
    """An inventory node the model cannot read. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


GpuNode = namedtuple("GpuNode", "name gpus product canonical memory_mib sharing config replicas mig")
GpuNode.__doc__ = """One node, read by :func:`read_node`.

``name``; ``gpus`` the physical GPU count; ``product`` the GPU product as written (or the default), ``None`` when the
node names none and no default is given; ``canonical`` its name in NVIDIA's tables and ``memory_mib`` one GPU's
memory (``None`` without a product); ``sharing`` one of ``whole``, ``config`` (a device-plugin config: time-slicing or
MPS), ``shared`` (DRA claims sharing each GPU), ``mig``; ``config`` the device-plugin config's name; ``replicas`` the
claims sharing one GPU of a ``shared`` DRA node; ``mig`` a device-plugin node's layout ``{product, profile, gpus,
count}`` (:func:`mig.node_mig`), or ``True`` on a DRA node whose GPUs are partitionable into every profile."""


def _path(where, field):
    return "%s.%s" % (where, field) if where else field


def read_gpus(node, where, minimum=0, maximum=None):
    """A node's ``gpus``, its physical GPU count, from ``minimum`` (0: a node without GPUs) to ``maximum``."""
    gpus = node.get("gpus")
    if maximum is None:
        if not _is_int(gpus) or gpus < minimum:
            raise NodeError(_path(where, "gpus"), "must be a non-negative integer, got %r" % (gpus,), "give the node's physical GPU count, e.g. gpus: 2")
    elif not _is_int(gpus) or not minimum <= gpus <= maximum:
        raise NodeError(_path(where, "gpus"), "must be the node's physical GPU count (%d to %d), got %r" % (minimum, maximum, gpus),
                        "give the GPU count, e.g. 2")
    return gpus


def product_name(product, where):
    """``product``'s name in NVIDIA's tables (:func:`gpu_products.canonical`), or :class:`NodeError` naming the known products."""
    fix = "use one of %s (the NVIDIA- prefix is optional), e.g. NVIDIA-A100-SXM4-80GB" % ", ".join(_products.products())
    if not isinstance(product, str) or not product.strip():
        raise NodeError(where, "must be a GPU product name, got %r" % (product,), fix)
    name = _products.canonical(product)
    if name is None:
        raise NodeError(where, "no memory size known for product %r" % (product,), fix)
    return name


def product_label(value, where, error=NodeError):
    """``value``, a product as GFD's labels carry it (``gpu.product``, ``mig-<profile>.product``), or ``error`` if it is
    not a label value."""
    if len(value) > 63 or not LABEL_VALUE_RE.fullmatch(value):
        raise error(
            where,
            "%r is not a valid label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)" % value,
            "write the product as gpu-feature-discovery does, spaces replaced by '-', e.g. NVIDIA-A100-SXM4-80GB",
        )
    return value


def read_product(node, where, default=None):
    """``(product, canonical)`` of a node: its ``product`` (else ``default``) as written and its name in NVIDIA's tables,
    ``(None, None)`` when neither is given. A product is a valid label value (GFD's ``gpu.product`` carries it) and a
    product of the tables; on a device-plugin MIG node it is the one ``mig.product`` partitions."""
    product = node.get("product")
    if product is None:
        if default is None:
            return None, None
        return str(default), product_name(default, _path(where, "product"))
    if isinstance(product, str):
        product_label(product, _path(where, "product"))
    canonical = product_name(product, _path(where, "product"))
    mig = node.get("mig")
    if isinstance(mig, dict) and mig.get("product") is not None:
        try:
            mig_canonical = _mig.canonical_product(mig["product"])
        except _mig.MigError:
            mig_canonical = None
        if mig_canonical != canonical:
            raise NodeError(
                _path(where, "product"),
                "%r differs from mig.product %r (a MIG node's GPUs are the product it partitions)" % (product, mig["product"]),
                "drop product on a MIG node, or make it the same as mig.product",
            )
    return str(product), canonical


def _read_name(node, where, example):
    name = node.get("name")
    if not isinstance(name, str) or len(name) > 253 or not DNS_SUBDOMAIN_RE.fullmatch(name):
        raise NodeError(_path(where, "name"), "%r is not a node name" % (name,), "use the kwok node's name, a DNS subdomain such as %s" % example)
    return name


def _device_plugin_sharing(node, where, gpus, configs):
    """``(sharing, config, mig)`` of a device-plugin node."""
    has_config = node.get("config") is not None
    if has_config and node.get("mig") is not None:
        raise NodeError(where, "sets both config and mig",
                        "drop config for a MIG mixed-strategy node (it advertises nvidia.com/mig-* resources), or drop mig")
    if node.get("mig") is not None:
        if node["mig"] is True:
            raise NodeError(_path(where, "mig"), "true is the DRA track's form (every profile on demand)",
                            "give the layout the device plugin advertises, e.g. mig: {product: NVIDIA-A100-SXM4-80GB, profile: 1g.10gb}")
        return "mig", None, _mig.node_mig(node["mig"], _path(where, "mig"), gpus)
    if not has_config:
        return "whole", None, None
    name = node["config"]
    if configs is not None and (not isinstance(configs, dict) or name not in configs):
        known = ", ".join(sorted(str(key) for key in configs)) if isinstance(configs, dict) else ""
        raise NodeError(
            _path(where, "config"),
            "names config %r, which is not among the device-plugin configs (%s); the plugin's config manager crash-loops on such a label"
            % (name, known or "none given"),
            "use one of the configured names or add the config",
        )
    return "config", name, None


def _dra_sharing(node, where, memory_mib):
    """``(sharing, replicas, mig)`` of a DRA node."""
    mig = node.get("mig", False)
    shared = node.get("shared")
    if isinstance(mig, dict):
        raise NodeError(_path(where, "mig"), "a layout is the device-plugin track's form",
                        "write mig: true (the DRA driver publishes every profile and the scheduler picks)")
    if not isinstance(mig, bool):
        raise NodeError(_path(where, "mig"), "must be true or false, got %r" % (mig,), "write mig: true for a MIG node")
    if mig and shared is not None:
        raise NodeError(where, "sets both mig and shared", "keep one: a GPU is either partitioned (mig) or shared by several claims (shared)")
    if mig:
        return "mig", None, True
    if shared is None:
        return "whole", None, None
    if not isinstance(shared, dict) or set(shared) != {"replicas"}:
        raise NodeError(_path(where, "shared"), "must be {replicas: n}, got %r" % (shared,), "write shared: {replicas: 4}")
    replicas = shared["replicas"]
    if not _is_int(replicas) or not DRA_REPLICAS[0] <= replicas <= DRA_REPLICAS[1]:
        raise NodeError(_path(where, "shared.replicas"), "must be an integer from %d to %d, got %r" % (DRA_REPLICAS + (replicas,)),
                        "give how many claims share one GPU, e.g. 4 (the time-slicing config's replicas)")
    if (memory_mib * 2 ** 20) // replicas < 2 ** 20:
        raise NodeError(_path(where, "shared.replicas"), "%d shares leave less than 1Mi of memory each" % replicas, "use fewer replicas")
    return "shared", replicas, None


def read_node(node, track=DEVICE_PLUGIN, configs=None, default_product=None, where=None):
    """Read one inventory node of ``track`` into a :class:`GpuNode`; :class:`NodeError` names the field and the fix.

    ``configs`` (device-plugin track) are the device-plugin configs a ``config`` must name (``None``: not checked);
    ``default_product`` the product of a node that names none (the DRA track needs one: its devices carry the
    product's memory). ``where`` is the node's path in errors (default: its name). A device-plugin node's name is
    checked by the lab's names check (``inventory.lab_name_errors``) and may be absent here; a DRA node must have one.
    """
    if track not in KEYS:
        raise ValueError("read_node: track must be %s or %s, got %r" % (DEVICE_PLUGIN, DRA, track))
    if not isinstance(node, dict):
        raise NodeError(where or "node", "must be a mapping with name and gpus, got %s" % type(node).__name__,
                        "write e.g. {name: lab-node-0, gpus: 2, config: default}" if track == DEVICE_PLUGIN else "write e.g. {name: dra-node-0, gpus: 2}")
    if track == DRA:
        name = where = _read_name(node, where, "dra-node-0")
    else:
        name = node.get("name")
        where = str(name) if name else (where or "node")
    other = {DEVICE_PLUGIN: ("shared", "the DRA track's form", "share a device-plugin node's GPUs with config: <a device-plugin config>"),
             DRA: ("config", "the device-plugin track's form", "share a DRA node's GPUs with shared: {replicas: n}")}[track]
    if node.get(other[0]) is not None:
        raise NodeError(_path(where, other[0]), "is %s" % other[1], other[2])
    unknown = [str(key) for key in node if key not in KEYS[track]]
    if unknown and track == DEVICE_PLUGIN:
        raise NodeError(_path(where, unknown[0]), "unknown key", "use only %s" % ", ".join(KEYS[track]))
    if unknown:
        raise NodeError(where, "unknown key(s) %s" % ", ".join(sorted(unknown)), "use only %s" % ", ".join(KEYS[track]))
    if track == DEVICE_PLUGIN:
        product, canonical = read_product(node, where)
        gpus = read_gpus(node, where)
        sharing, config, mig = _device_plugin_sharing(node, where, gpus, configs)
        if mig is not None and canonical is None:
            canonical = _mig.canonical_product(mig["product"], _path(where, "mig"))
        memory_mib = _products.memory_mib(canonical) if canonical else None
        return GpuNode(name, gpus, product, canonical, memory_mib, sharing, config, None, mig)
    gpus = read_gpus(node, where, *DRA_GPUS)
    product, canonical = read_product(node, where, default_product)
    if canonical is None:
        raise NodeError(_path(where, "product"), "must be a GPU product name, got None",
                        "give the node's product, or a default product (gpushare_gpu_product)")
    memory_mib = _products.memory_mib(canonical)
    sharing, replicas, mig = _dra_sharing(node, where, memory_mib)
    if mig:
        _mig.canonical_product(product, where)  # a product with MIG profiles
    return GpuNode(name, gpus, product, canonical, memory_mib, sharing, None, replicas, mig)


def read_nodes(nodes, track=DEVICE_PLUGIN, configs=None, default_product=None, field="nodes"):
    """Every node of the list ``field`` read by :func:`read_node`; a node listed twice is refused."""
    if not isinstance(nodes, (list, tuple)):
        raise NodeError(field, "must be a list of nodes, got %s" % type(nodes).__name__, "write e.g. [{name: %s-node-0, gpus: 2}]"
                        % ("lab" if track == DEVICE_PLUGIN else "dra"))
    result, seen = [], set()
    for index, entry in enumerate(nodes):
        node = read_node(entry, track, configs, default_product, where="%s[%d]" % (field, index))
        if node.name is not None and node.name in seen:
            raise NodeError(node.name, "is listed twice", "list each node once")
        seen.add(node.name)
        result.append(node)
    return result
