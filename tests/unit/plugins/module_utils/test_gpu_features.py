# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import re

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware.node import read_product
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.gpu_features import (
    MANAGED_LABELS,
    FeatureError,
    feature_labels,
    gpu_memory_mib,
    family as gpu_family,
    is_managed_label,
    label_patch,
    memory_products,
)

A100 = "NVIDIA-A100-SXM4-80GB"
SHARED = {
    "version": "v1",
    "flags": {"migStrategy": "none"},
    "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
}
MPS = {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
MIG_NODE = {"name": "lab-node-2", "gpus": 2, "mig": {"product": A100, "profile": "1g.10gb", "gpus": 1}}


def test_memory_table():
    assert memory_products() == [
        "A100-PCIE-40GB", "A100-PCIE-80GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "A30-PCIE-24GB", "B200", "GH200-480GB",
        "H100-80GB-HBM3", "H100-NVL", "H200", "H200-NVL",
    ]


@pytest.mark.parametrize(
    "product, mib",
    [
        ("NVIDIA-A100-SXM4-40GB", 40960),
        ("A100-SXM4-80GB", 81920),
        ("NVIDIA-H100-80GB-HBM3", 81920),
        ("H100-SXM5-80GB", 81920),
        ("NVIDIA-H200-141GB", 143771),
        ("NVIDIA-H200-141GB-HBM3e", 143771),
        ("b200-180gb-hbm3e", 183359),
        ("a30-24gb", 24576),
        ("A100-PCIE-80GB", 81920),
    ],
)
def test_gpu_memory_mib(product, mib):
    assert gpu_memory_mib(product) == mib


def test_unshared_node():
    default = {"version": "v1", "flags": {"migStrategy": "none"}}
    labels = feature_labels({"name": "lab-node-0", "gpus": 2, "config": "default"}, {"nvidia.com/gpu": 2}, default, A100)
    assert labels == {
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.product": A100,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
    }


def test_time_sliced_node_gets_shared_product():
    labels = feature_labels({"name": "lab-node-1", "gpus": 2, "config": "shared"}, {"nvidia.com/gpu": 8}, SHARED, A100)
    assert labels["nvidia.com/gpu.product"] == A100 + "-SHARED"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert labels["nvidia.com/gpu.count"] == "2"  # physical GPUs, not slots
    assert "nvidia.com/mig.strategy" not in labels
    assert labels["nvidia.com/mps.capable"] == "false"  # time-slicing is not MPS


def test_mps_node():
    # GFD spells the product from the NVML name (NVIDIA H100 80GB HBM3), whatever alias the inventory used, and says
    # mps.capable=true under an MPS config (checked against GFD itself by tests/integration/test_nvidia_gfd.py).
    labels = feature_labels({"name": "n", "gpus": 1, "config": "mps"}, {"nvidia.com/gpu": 4}, MPS, "H100-80GB")
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert labels["nvidia.com/gpu.memory"] == "81920"
    assert labels["nvidia.com/mps.capable"] == "true"
    assert (labels["nvidia.com/gpu.family"], labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == ("hopper", "9", "0")


@pytest.mark.parametrize(
    "capability, family",
    [((8, 0), "ampere"), ((8, 6), "ampere"), ((8, 9), "ada-lovelace"), ((7, 0), "volta"), ((7, 5), "turing"), ((9, 0), "hopper"),
     ((10, 0), "blackwell"), ((12, 0), "blackwell"), ((4, 0), "undefined")],
)
def test_family_by_compute_capability(capability, family):
    assert gpu_family(*capability) == family


def test_rename_by_default_keeps_plain_product():
    config = {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    labels = feature_labels({"name": "n", "gpus": 2, "config": "c"}, {}, config, A100)
    assert labels["nvidia.com/gpu.product"] == A100
    assert labels["nvidia.com/gpu.replicas"] == "2"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"


def test_a_resource_rename_is_ignored_as_gfd_ignores_it():
    # GFD v0.18.0 drops sharing.*.resources[].rename ("not yet supported in the config. Ignoring...") before labelling,
    # so the product is -SHARED (found by tests/integration/test_nvidia_gfd.py; the model used to drop the suffix).
    config = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2, "rename": "nvidia.com/gpu-sliced"}]}}}
    labels = feature_labels({"name": "n", "gpus": 2, "config": "c"}, {}, config, A100)
    assert labels["nvidia.com/gpu.product"] == A100 + "-SHARED"
    assert labels["nvidia.com/gpu.replicas"] == "2"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"


def test_config_mig_strategy_is_labelled_unless_none():
    config = {"version": "v1", "flags": {"migStrategy": "single"}}
    assert feature_labels({"name": "n", "gpus": 1, "config": "c"}, {}, config, A100)["nvidia.com/mig.strategy"] == "single"


def test_node_product_wins_over_default():
    labels = feature_labels({"name": "n", "gpus": 1, "product": "NVIDIA-A30-24GB"}, {"nvidia.com/gpu": 1}, None, A100)
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A30-PCIE-24GB"  # the alias written as GFD spells the NVML name
    assert labels["nvidia.com/gpu.memory"] == "24576"


def test_mig_node():
    labels = feature_labels(MIG_NODE, {"nvidia.com/mig-1g.10gb": 7})
    assert labels == {
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.product": A100,  # exactly mig.product: no -SHARED, no -MIG suffix
        "nvidia.com/gpu.replicas": "0",  # MIG-enabled GPUs are labelled without sharing upstream
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.family": "ampere",  # MIG-enabled GPUs get the architecture labels too
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/mig-1g.10gb.count": "7",
        "nvidia.com/mig-1g.10gb.memory": "9856",
        "nvidia.com/mig-1g.10gb.product": A100 + "-MIG-1g.10gb",
        "nvidia.com/mig-1g.10gb.replicas": "1",
        "nvidia.com/mig-1g.10gb.sharing-strategy": "none",
        "nvidia.com/mig-1g.10gb.multiprocessors": "14",  # the MIG device's attributes, from the tables (GFD's newMigAttributeLabels)
        "nvidia.com/mig-1g.10gb.slices.gi": "1",
        "nvidia.com/mig-1g.10gb.slices.ci": "1",
        "nvidia.com/mig-1g.10gb.engines.copy": "1",
        "nvidia.com/mig-1g.10gb.engines.decoder": "0",  # the MIG User Guide's (go-nvml's mock says 1)
        "nvidia.com/mig-1g.10gb.engines.encoder": "0",
        "nvidia.com/mig-1g.10gb.engines.jpeg": "0",
        "nvidia.com/mig-1g.10gb.engines.ofa": "0",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mps.capable": "false",
    }


def test_every_mig_profile_gets_its_memory_label_from_the_tables():
    node = {"name": "m", "gpus": 1, "mig": {"product": "A30-24GB", "profile": "2g.12gb"}}
    labels = feature_labels(node, {"nvidia.com/mig-2g.12gb": 2})
    assert labels["nvidia.com/mig-2g.12gb.count"] == "2"
    assert labels["nvidia.com/mig-2g.12gb.memory"] == "11672"
    assert (labels["nvidia.com/mig-2g.12gb.multiprocessors"], labels["nvidia.com/mig-2g.12gb.engines.decoder"]) == ("28", "2")


SINGLE = {"version": "v1", "flags": {"migStrategy": "single"}}


def test_single_strategy_labels_the_mig_devices_as_the_gpu():
    node = {"name": "n", "gpus": 2, "product": A100, "config": "single"}
    labels = feature_labels(node, {"nvidia.com/gpu": 14}, SINGLE, mig_single=("1g.10gb", 14))
    assert labels == {
        "nvidia.com/gpu.product": A100 + "-MIG-1g.10gb",
        "nvidia.com/gpu.count": "14",  # MIG devices, not GPUs
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.memory": "9856",  # one MIG device's
        "nvidia.com/gpu.multiprocessors": "14",
        "nvidia.com/gpu.slices.gi": "1",
        "nvidia.com/gpu.slices.ci": "1",
        "nvidia.com/gpu.engines.copy": "1",
        "nvidia.com/gpu.engines.decoder": "0",  # the MIG User Guide's (go-nvml's mock says 1)
        "nvidia.com/gpu.engines.encoder": "0",
        "nvidia.com/gpu.engines.jpeg": "0",
        "nvidia.com/gpu.engines.ofa": "0",
        "nvidia.com/gpu.family": "ampere",  # the GPUs' architecture
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mps.capable": "false",
    }


def test_single_strategy_time_sliced_mig_devices_are_shared():
    config = dict(SHARED, flags={"migStrategy": "single"})
    labels = feature_labels({"name": "n", "gpus": 1, "config": "s"}, {}, config, A100, mig_single=("3g.40gb", 2))
    assert labels["nvidia.com/gpu.product"] == A100 + "-MIG-3g.40gb-SHARED"
    assert (labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.sharing-strategy"]) == ("4", "time-slicing")


@pytest.mark.parametrize(
    "config, mig_single, message",
    [
        ({"version": "v1"}, ("1g.10gb", 7), "under the single strategy only, not 'none'"),
        (SINGLE, ("1g.11gb", 7), "7 x '1g.11gb' is not a MIG layout of NVIDIA-A100-SXM4-80GB"),
        (SINGLE, ("1g.10gb", 0), "0 x '1g.10gb' is not a MIG layout"),
        (SINGLE, "1g.10gb", "must be (profile, MIG devices)"),
        (dict(MPS, flags={"migStrategy": "single"}), ("1g.10gb", 7), "MPS cannot share MIG devices"),
    ],
)
def test_single_strategy_refusals(config, mig_single, message):
    with pytest.raises(FeatureError, match=re.escape(message)):
        feature_labels({"name": "n", "gpus": 1, "config": "c"}, {}, config, A100, mig_single=mig_single)


def test_a_media_extension_profile_is_named_as_gfd_names_it():
    # go-nvlib's 1g.10gb+me is the device 1g.10gb.me to GFD: resource nvidia.com/mig-1g.10gb.me, product ...-MIG-1g.10gb.me
    node = {"name": "m", "gpus": 1, "mig": {"product": A100, "profile": "1g.10gb"}}
    labels = feature_labels(node, {"nvidia.com/mig-1g.10gb.me": 1})
    assert labels["nvidia.com/mig-1g.10gb.me.product"] == A100 + "-MIG-1g.10gb.me"
    assert labels["nvidia.com/mig-1g.10gb.me.memory"] == "9856"
    assert (labels["nvidia.com/mig-1g.10gb.me.engines.jpeg"], labels["nvidia.com/mig-1g.10gb.me.engines.ofa"]) == ("1", "1")


def test_node_without_gpus_gets_no_label():
    assert feature_labels({"name": "n", "gpus": 0}, {"nvidia.com/gpu": 0}, None, A100) == {}


def test_matching_product_on_mig_node_is_accepted():
    assert read_product(dict(MIG_NODE, product="A100-SXM4-80GB"), "n") == ("A100-SXM4-80GB", "A100-SXM4-80GB")
    assert read_product({"name": "n", "gpus": 1}, "n") == (None, None)


# The labels gpu-feature-discovery sets that this model writes, listed by hand from GFD's documentation (and held to
# GFD's own output by tests/integration/test_nvidia_gfd.py).
GFD_LABELS = (
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.family",
    "nvidia.com/gpu.compute.major",
    "nvidia.com/gpu.compute.minor",
    # a MIG device's attributes, labelled on nvidia.com/gpu under the single MIG strategy
    "nvidia.com/gpu.multiprocessors",
    "nvidia.com/gpu.slices.gi",
    "nvidia.com/gpu.slices.ci",
    "nvidia.com/gpu.engines.copy",
    "nvidia.com/gpu.engines.decoder",
    "nvidia.com/gpu.engines.encoder",
    "nvidia.com/gpu.engines.jpeg",
    "nvidia.com/gpu.engines.ofa",
    "nvidia.com/mig.strategy",
    "nvidia.com/mig.capable",
    "nvidia.com/mps.capable",
)


def test_managed_label_list():
    assert sorted(MANAGED_LABELS) == sorted(GFD_LABELS)


@pytest.mark.parametrize(
    "key",
    GFD_LABELS + (
        "nvidia.com/mig-1g.10gb.count",
        "nvidia.com/mig-3g.40gb.memory",
        "nvidia.com/mig-1g.10gb.me.product",
        "nvidia.com/mig-7g.80gb.replicas",
        "nvidia.com/mig-2g.20gb.sharing-strategy",
        "nvidia.com/mig-1g.10gb.slices.gi",
        "nvidia.com/mig-1g.10gb.me.engines.ofa",
    ),
)
def test_managed_labels(key):
    assert is_managed_label(key)


@pytest.mark.parametrize(
    "key", ["nvidia.com/device-plugin.config", "nvidia.com/mig.config", "nvidia.com/mig.config.state", "nvidia.com/gpu.machine", "kubernetes.io/hostname"]
)
def test_labels_of_others_are_not_managed(key):
    assert not is_managed_label(key)


def test_label_patch_removes_stale_managed_labels_only():
    desired = {"nvidia.com/gpu.product": A100, "nvidia.com/gpu.count": "2"}
    current = {
        "nvidia.com/gpu.product": A100 + "-SHARED",
        "nvidia.com/mig-1g.10gb.count": "7",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/device-plugin.config": "default",
        "example.com/rack": "r42",
    }
    assert label_patch(desired, current) == {
        "nvidia.com/gpu.product": A100,
        "nvidia.com/gpu.count": "2",
        "nvidia.com/mig-1g.10gb.count": None,
        "nvidia.com/mig.strategy": None,
    }
    assert label_patch(desired) == desired


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ({"name": "n", "gpus": 2}, {}, None, None),
            "n.product: missing: a node without mig needs a GPU product for nvidia.com/gpu.product and nvidia.com/gpu.memory. "
            "Fix: set product on the node or a lab-wide default product, e.g. NVIDIA-A100-SXM4-80GB",
        ),
        (
            ({"name": "n", "gpus": 2}, {}, None, "Tesla-T4"),
            "n.product: no memory size known for product 'Tesla-T4'. Fix: use one of A100-PCIE-40GB, A100-PCIE-80GB, A100-SXM4-40GB, "
            "A100-SXM4-80GB, A30-PCIE-24GB, B200, GH200-480GB, H100-80GB-HBM3, H100-NVL, H200, H200-NVL (the NVIDIA- prefix is optional), "
            "e.g. NVIDIA-A100-SXM4-80GB",
        ),
        (
            ({"name": "n", "gpus": 2, "product": 80}, {}, None, None),
            "n.product: must be a GPU product name, got 80. Fix: use one of A100-PCIE-40GB, A100-PCIE-80GB, A100-SXM4-40GB, "
            "A100-SXM4-80GB, A30-PCIE-24GB, B200, GH200-480GB, H100-80GB-HBM3, H100-NVL, H200, H200-NVL (the NVIDIA- prefix is optional), "
            "e.g. NVIDIA-A100-SXM4-80GB",
        ),
        (
            ({"name": "n", "gpus": 2, "product": "NVIDIA A100-SXM4-80GB"}, {}, None, None),
            "n.product: 'NVIDIA A100-SXM4-80GB' is not a valid label value (at most 63 letters, digits, '-', '_' or '.', starting "
            "and ending with a letter or digit). Fix: write the product as gpu-feature-discovery does, spaces replaced by '-', "
            "e.g. NVIDIA-A100-SXM4-80GB",
        ),
        (
            (dict(MIG_NODE, product="NVIDIA-A100-SXM4-40GB"), {"nvidia.com/mig-1g.10gb": 7}, None, None),
            "lab-node-2.product: 'NVIDIA-A100-SXM4-40GB' differs from mig.product 'NVIDIA-A100-SXM4-80GB' (a MIG node's GPUs are "
            "the product it partitions). Fix: drop product on a MIG node, or make it the same as mig.product",
        ),
        (
            ({"name": "n", "gpus": -1}, {}, None, A100),
            "n.gpus: must be a non-negative integer, got -1. Fix: give the node's physical GPU count, e.g. gpus: 2",
        ),
        (
            ({"name": "n", "gpus": True}, {}, None, A100),
            "n.gpus: must be a non-negative integer, got True. Fix: give the node's physical GPU count, e.g. gpus: 2",
        ),
        (
            ("lab-node-0", {}, None, A100),
            "node: must be a mapping with name and gpus. Fix: write e.g. {name: lab-node-0, gpus: 2, config: default}",
        ),
        (
            ({"name": "n", "gpus": 1}, ["nvidia.com/gpu"], None, A100),
            "n: advertised: must be a mapping of resource name to count. Fix: pass what node_gpu_resources returns for the node",
        ),
        (
            ({"name": "n", "gpus": 1, "config": "c"}, {}, {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "gpu", "replicas": 1}]}}}, A100),
            "n: config c: sharing.timeSlicing.resources[0].replicas: must be 2 or more, got 1 (upstream rejects it: one replica is no "
            "sharing). Fix: use 2 or more, or drop the sharing section for a node that does not share",
        ),
        (
            ({"name": "m", "gpus": 1, "mig": {"profile": "1g.10gb"}}, {}, None, None),
            "m.mig.product: missing. Fix: add the GPU product, e.g. product: NVIDIA-A100-SXM4-80GB",
        ),
    ],
    ids=["no-product", "unknown-product", "product-not-string", "product-with-space", "mig-product-mismatch", "negative-gpus",
         "bool-gpus", "node-not-mapping", "advertised-not-mapping", "bad-config", "mig-without-product"],
)
def test_bad_input(args, message):
    with pytest.raises(InputError) as info:  # FeatureError, or the node model's NodeError for the node's own fields
        feature_labels(*args)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "args, message",
    [
        (("x", {}), "labels: must be a mapping of label to value. Fix: pass what feature_labels returns"),
        (({}, ["a"]), "current: must be the node's labels (a mapping), got list. Fix: pass node.metadata.labels"),
    ],
)
def test_label_patch_bad_input(args, message):
    with pytest.raises(FeatureError) as info:
        label_patch(*args)
    assert str(info.value) == message
