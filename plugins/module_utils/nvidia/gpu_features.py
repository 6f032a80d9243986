# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The node labels gpu-feature-discovery (GFD) would put on a simulated GPU node.

Computed from one inventory node, what it advertises (``node_gpu_resources``) and its
device-plugin config, following NVIDIA/k8s-device-plugin v0.18.0 ``internal/lm`` (the version tools/nvidia/go.mod pins):

* ``resource.go`` ``baseLabeler``: ``nvidia.com/gpu.{product,count,replicas,sharing-strategy}``;
  ``product`` gets ``-SHARED`` when the resource is replicated (replicas > 1) and not renamed by
  ``renameByDefault`` (GFD ignores a resource's own ``rename``); ``sharing-strategy`` is ``none`` unless replicated.
  ``gpu.memory`` is the device's total memory in MiB.
* ``mig-strategy.go`` ``newGPULabelers``: MIG-enabled GPUs are labelled *without sharing*
  (a nil config), so ``gpu.replicas`` is ``0`` and ``gpu.sharing-strategy`` ``none`` on a MIG
  node; ``gpu.count`` counts every physical GPU of the product.
* ``mig-strategy.go`` ``newMigLabeler``: ``nvidia.com/mig.strategy`` only when the strategy is not
  ``none``; for ``mixed`` one label set per profile ``nvidia.com/mig-<profile>.{count,replicas,
  sharing-strategy,product,memory}`` (product ``<model>-MIG-<profile>``, ``+me`` written ``.me``) and the MIG
  device's attributes (``resource.go`` ``newMigAttributeLabels``: ``multiprocessors``, ``slices.{gi,ci}``,
  ``engines.{copy,decoder,encoder,jpeg,ofa}``, :data:`MIG_ATTRIBUTES`).
* ``resource.go`` ``newArchitectureLabels``: ``nvidia.com/gpu.{family,compute.major,compute.minor}`` from the
  product's CUDA compute capability (:mod:`gpu_tables`), the family by ``getArchFamily`` (:data:`FAMILIES`), on
  MIG-enabled GPUs too.
* ``nvml.go`` ``newSharingLabeler``: ``nvidia.com/mps.capable`` is ``true`` when the config's sharing strategy is MPS
  (a resource with replicas > 1 under ``sharing.mps``), ``false`` otherwise.
* ``nvidia.com/mig.capable``: whether the product can be partitioned at all.
* ``gpu.product`` of a node without MIG is GFD's spelling of the NVML name (``NVIDIA-`` + the canonical name of
  :mod:`gpu_products`), whatever alias the inventory used; a MIG node's is ``mig.product`` verbatim (lab step 3).

tests/integration/test_nvidia_gfd.py holds these rules to NVIDIA's unmodified gpu-feature-discovery run over our mock
NVML (docs/nvidia-gfd.md). Left out on purpose, as environment facts rather than the node's model: the driver and
CUDA version labels, ``gpu.machine``, ``gpu.mode`` and ``vgpu.present``. Pure Python, no Ansible import.
"""

from __future__ import annotations

import re

from . import device_plugin as _dp
from .. import names as _names
from ..hardware import node as _node
from ..hardware import products as _products
from ..hardware import mig as _mig
from ..errors import InputError, is_int as _is_int


__all__ = [
    "FAMILIES",
    "FeatureError",
    "MANAGED_LABELS",
    "family",
    "feature_labels",
    "gpu_memory_mib",
    "is_managed_label",
    "label_patch",
    "memory_products",
]

GPU = "nvidia.com/gpu."
MIG_STRATEGY_LABEL = _names.MIG_STRATEGY_LABEL
MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"
MPS_CAPABLE_LABEL = "nvidia.com/mps.capable"
SHARED_SUFFIX = "-SHARED"
MIXED = "mixed"

# A MIG device's attribute labels (GFD's newMigAttributeLabels, from nvmlDeviceGetAttributes): label suffix -> where the
# tables hold it, on the GPU-instance profile ("gi") or the compute-instance profile spanning it ("ci").
MIG_ATTRIBUTES = (
    ("multiprocessors", "ci", "multiprocessors"), ("slices.gi", "gi", "slices"), ("slices.ci", "ci", "slices"),
    ("engines.copy", "gi", "copy_engines"), ("engines.decoder", "gi", "decoders"), ("engines.encoder", "gi", "encoders"),
    ("engines.jpeg", "gi", "jpeg_engines"), ("engines.ofa", "gi", "ofa_engines"),
)
# nvidia.com/gpu.<suffix>: a GPU's, and under the single MIG strategy a MIG device's attributes too.
_GPU_SUFFIXES = ("count", "product", "replicas", "sharing-strategy", "memory", "family", "compute.major", "compute.minor") + tuple(
    suffix for suffix, _where, _key in MIG_ATTRIBUTES)
MANAGED_LABELS = tuple(GPU + suffix for suffix in _GPU_SUFFIXES) + (MIG_STRATEGY_LABEL, MIG_CAPABLE_LABEL, MPS_CAPABLE_LABEL)
# gpu.family by CUDA compute capability major (and minor where it splits one), as GFD's getArchFamily names them.
FAMILIES = {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 7: ("volta", 5, "turing"), 8: ("ampere", 9, "ada-lovelace"),
            9: "hopper", 10: "blackwell", 12: "blackwell"}
_MIG_SUFFIXES = ("count", "replicas", "sharing-strategy", "product", "memory") + tuple(suffix for suffix, _where, _key in MIG_ATTRIBUTES)
_MIG_LABEL_RE = re.compile(r"^nvidia\.com/mig-[0-9]+g\.[0-9]+gb(\.me)?\.(%s)$" % "|".join(re.escape(suffix) for suffix in _MIG_SUFFIXES))


class FeatureError(InputError):
    """Labels that cannot be computed. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def memory_products():
    """Products whose memory size is known (canonical names, without ``NVIDIA-``): every product of the tables."""
    return _products.products()


def _canonical(product, where):
    """Canonical product name, read as the node model reads a node's product (:func:`gpu_node.product_name`)."""
    return _node.product_name(product, where)


def gpu_memory_mib(product, where="product"):
    """Total memory of one GPU of ``product`` in MiB, as NVML reports it (the ``nvidia.com/gpu.memory`` label)."""
    return _products.memory_mib(_canonical(product, where))


def family(major, minor):
    """GFD's ``gpu.family`` of a CUDA compute capability: ``(8, 0)`` -> ``ampere``, ``(8, 9)`` -> ``ada-lovelace``."""
    entry = FAMILIES.get(major, "undefined")
    if isinstance(entry, tuple):
        below, split, above = entry
        return below if minor < split else above
    return entry


def _architecture_labels(product):
    """``gpu.family``, ``gpu.compute.major`` and ``gpu.compute.minor`` of a product, from the tables."""
    major, minor = _products.cuda_compute_capability(product)
    return {GPU + "family": family(major, minor), GPU + "compute.major": major, GPU + "compute.minor": minor}


def _mps_capable(config):
    """GFD's ``mps.capable``: whether the config's sharing strategy is MPS (some resource under ``sharing.mps`` replicated)."""
    strategy, resources = _dp.sharing_of(config)
    return strategy == _dp.STRATEGY_MPS and any(resource["replicas"] > 1 for resource in resources)


def _mig_attribute_labels(product, profile):
    """``{suffix: value}`` of GFD's memory and attribute labels of a MIG device of ``profile`` (the tables' name).

    What nvmlDeviceGetAttributes says of a MIG device: its GPU instance's memory, slices and engines (shared by the
    instance's compute instances) and the SMs and slices of the compute instance spanning the GPU instance. Every
    profile of the tables, media-extension ones (``+me``) included.
    """
    for entry in _products.mig_profiles(product):
        if entry["name"] == profile:
            compute = min((c for c in entry["compute_profiles"] if c["slices"] == entry["slices"]), key=lambda c: c["id"])
            sources = {"gi": entry, "ci": compute}
            return dict({"memory": entry["memory_mib"]}, **{suffix: sources[where][key] for suffix, where, key in MIG_ATTRIBUTES})
    return {}


def _single_strategy_labels(product, mig_single, mig_strategy, config, where):
    """GFD's ``nvidia.com/gpu.*`` labels of MIG devices under the single strategy (see :func:`feature_labels`)."""
    try:
        profile, devices = mig_single
    except (TypeError, ValueError):
        raise FeatureError("%s: mig_single" % where, "must be (profile, MIG devices), got %r" % (mig_single,), "pass e.g. ('1g.10gb', 14)") from None
    if mig_strategy != "single":
        raise FeatureError("%s: mig_single" % where, "MIG devices are labelled as nvidia.com/gpu under the single strategy only, not %r" % mig_strategy,
                           "pass mig_strategy='single'")
    attributes = _mig_attribute_labels(product, profile)
    if not attributes or not _is_int(devices) or devices <= 0:
        raise FeatureError("%s: mig_single" % where, "%r x %r is not a MIG layout of %s" % (devices, profile, product),
                           "give a profile of the product and a positive device count")
    if _mps_capable(config):
        raise FeatureError("%s: config" % where, "MPS cannot share MIG devices (GFD fails on it)", "use time-slicing or no sharing on a MIG node")
    strategy, replicas, renamed = _replicated_gpu(config)
    shared = replicas > 1
    name = "%s-MIG-%s" % (product, profile.replace("+", "."))
    labels = {GPU + "product": _label_value(name + SHARED_SUFFIX if shared and not renamed else name, "%s: mig_single" % where),
              GPU + "count": devices, GPU + "replicas": replicas, GPU + "sharing-strategy": strategy if shared else _dp.STRATEGY_NONE}
    labels.update((GPU + suffix, value) for suffix, value in attributes.items())
    return labels


def _label_value(value, where):
    return _node.product_label(value, where, FeatureError)


def _profile_of(resource):
    """``nvidia.com/mig-1g.10gb`` -> ``1g.10gb``; ``nvidia.com/mig-1g.10gb.me`` -> ``1g.10gb+me``."""
    profile = resource[len(_mig.RESOURCE_PREFIX):]
    return profile[: -len(".me")] + "+me" if profile.endswith(".me") else profile


def _replicated_gpu(config):
    """``(strategy, replicas, renamed)`` of ``nvidia.com/gpu`` under ``config`` (validated).

    Renamed only by ``renameByDefault``: GFD v0.18.0 drops a resource's own ``rename`` before labelling
    (``DisableResourceNamingInConfig``, "not yet supported ... Ignoring"), so a renamed resource still gets ``-SHARED``.
    """
    strategy, resources, block = _dp.sharing_block(config)
    if strategy == _dp.STRATEGY_NONE:
        return _dp.STRATEGY_NONE, 1, False
    for resource in resources:
        if resource["name"] == _dp.DEFAULT_RESOURCE:
            return strategy, resource["replicas"], block["renameByDefault"]
    return _dp.STRATEGY_NONE, 1, False


def _check_node(node):
    if not isinstance(node, dict):
        raise FeatureError("node", "must be a mapping with name and gpus", "write e.g. {name: lab-node-0, gpus: 2, config: default}")
    # The node's keys, config and MIG layout are validated by node_gpu_resources (gpushare filters).
    where = str(node.get("name") or "node")
    return where, _node.read_gpus(node, where)


def feature_labels(node, advertised, config=None, default_product=None, mig_strategy=None, mig_single=None):
    """The GFD labels of one node, as ``{label: value}`` (values are strings).

    ``node`` is an inventory entry ``{name, gpus, config?|mig?, product?}``; ``advertised`` what it
    advertises (``{resource: count}``, from ``node_gpu_resources``); ``config`` its device-plugin
    config (a mapping; ``None`` for the plugin's defaults); ``default_product`` the product of a
    non-MIG node that names none. A MIG node's product is ``mig.product``, kept verbatim.
    ``mig_strategy`` is the strategy the plugin runs with when something other than the config sets it
    (the GPU Operator passes ``ClusterPolicy`` ``spec.mig.strategy``, which overrides the config file).
    ``mig_single`` is ``(profile, devices)`` for a node without ``mig`` whose GPUs are all MIG-enabled with
    ``devices`` MIG devices of one profile in all, under the single strategy: GFD then labels the MIG devices as
    ``nvidia.com/gpu`` (``mig-strategy.go`` ``newMigStrategySingleLabeler``): product ``<model>-MIG-<profile>``
    (``-SHARED`` when the config replicates ``nvidia.com/gpu``), count the MIG devices, memory and the attribute
    labels of one device, replicas and sharing strategy from the config.
    A node with no GPU gets no label.
    """
    where, gpus = _check_node(node)
    _node.read_product(node, where)
    if not isinstance(advertised, dict):
        raise FeatureError("%s: advertised" % where, "must be a mapping of resource name to count", "pass what node_gpu_resources returns for the node")
    if gpus == 0:
        return {}
    mig = node.get("mig")
    labels = {}
    if mig is not None:
        if not isinstance(mig, dict) or not mig.get("product"):
            raise FeatureError("%s.mig.product" % where, "missing", "add the GPU product, e.g. product: NVIDIA-A100-SXM4-80GB")
        product = _label_value(str(mig["product"]), "%s.mig.product" % where)
        memory = gpu_memory_mib(product, "%s.mig.product" % where)
        # MIG-enabled GPUs are labelled without sharing: replicas 0, strategy none (newGPULabelers).
        labels.update({GPU + "product": product, GPU + "count": gpus, GPU + "replicas": 0, GPU + "sharing-strategy": _dp.STRATEGY_NONE})
        labels[GPU + "memory"] = memory
        labels.update(_architecture_labels(product))
        labels[MPS_CAPABLE_LABEL] = "false"  # the node's GPUs run no device-plugin config with sharing
        labels[MIG_STRATEGY_LABEL] = MIXED
        for resource in sorted(advertised):
            count = advertised[resource]
            if not resource.startswith(_mig.RESOURCE_PREFIX) or not _is_int(count) or count <= 0:
                continue
            profile = _profile_of(resource)
            labels[resource + ".count"] = count
            labels[resource + ".replicas"] = 1
            labels[resource + ".sharing-strategy"] = _dp.STRATEGY_NONE
            # GFD names the device's profile with '+' as '.' (go-nvlib's 1g.10gb+me is 1g.10gb.me), as the resource does.
            labels[resource + ".product"] = _label_value("%s-MIG-%s" % (product, profile.replace("+", ".")), "%s.mig.profile" % where)
            for suffix, value in _mig_attribute_labels(product, profile).items():
                labels["%s.%s" % (resource, suffix)] = value
    else:
        product = node.get("product") or default_product
        if product is None or product == "":
            raise FeatureError(
                "%s.product" % where,
                "missing: a node without mig needs a GPU product for nvidia.com/gpu.product and nvidia.com/gpu.memory",
                "set product on the node or a lab-wide default product, e.g. NVIDIA-A100-SXM4-80GB",
            )
        _label_value(str(product), "%s.product" % where)
        memory = gpu_memory_mib(product, "%s.product" % where)
        # GFD labels the NVML name with spaces as '-': the tables' name, whatever alias the inventory used.
        product = _products.PREFIX + _products.canonical(product)
        try:
            normalised = _dp.validate_config(config if config is not None else {"version": "v1"}, name=node.get("config"))
            strategy, replicas, renamed = _replicated_gpu(normalised)
        except _dp.ConfigError as exc:
            raise FeatureError("%s: config %s: %s" % (where, node.get("config"), exc.path), exc.problem, exc.fix) from None
        shared = replicas > 1
        name = product + SHARED_SUFFIX if shared and not renamed else product
        labels[GPU + "product"] = _label_value(name, "%s.product" % where)
        labels[GPU + "count"] = gpus
        labels[GPU + "replicas"] = replicas
        labels[GPU + "sharing-strategy"] = strategy if shared else _dp.STRATEGY_NONE
        labels[GPU + "memory"] = memory
        labels.update(_architecture_labels(product))
        labels[MPS_CAPABLE_LABEL] = "true" if _mps_capable(normalised) else "false"
        if mig_strategy is None:
            mig_strategy = normalised.get("flags", {}).get("migStrategy", "none")
        if mig_strategy != "none":
            labels[MIG_STRATEGY_LABEL] = mig_strategy
        if mig_single is not None:
            labels.update(_single_strategy_labels(product, mig_single, mig_strategy, normalised, where))
    labels[MIG_CAPABLE_LABEL] = "true" if _products.canonical(product) in _mig.products() else "false"
    return {key: str(value) for key, value in sorted(labels.items())}


def prunable_labels():
    """Every label key this model may set: the fixed ones, and each MIG profile's labels for every known product.

    Removing the ones a node should not have (a ``null`` in a labels merge patch) drops what an earlier layout left,
    without reading the node first.
    """
    keys = list(MANAGED_LABELS)
    for resource in sorted({_mig.resource_name(p) for product in _mig.products() for p in _mig.profiles(product)}):
        keys.extend("%s.%s" % (resource, suffix) for suffix in _MIG_SUFFIXES)
    return keys


def is_managed_label(key):
    """Whether ``key`` is one of the GFD labels this model sets (and so may remove when stale)."""
    return key in MANAGED_LABELS or bool(_MIG_LABEL_RE.fullmatch(key))


def label_patch(desired, current=None):
    """The label part of a merge patch: ``desired``, plus ``None`` for every managed label in ``current`` not desired.

    Labels this model does not manage are never touched.
    """
    if not isinstance(desired, dict):
        raise FeatureError("labels", "must be a mapping of label to value", "pass what feature_labels returns")
    if current is not None and not isinstance(current, dict):
        raise FeatureError("current", "must be the node's labels (a mapping), got %s" % type(current).__name__, "pass node.metadata.labels")
    patch = dict(desired)
    for key in sorted(current or {}):
        if key not in desired and is_managed_label(key):
            patch[key] = None
    return patch
