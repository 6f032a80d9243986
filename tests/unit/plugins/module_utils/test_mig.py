# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.hardware.mig import (
    MigError,
    canonical_product,
    max_instances,
    mig_resources,
    products,
    profiles,
    resource_name,
    validate_layout,
)

A100_80_PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]


def test_products():
    assert products() == [
        "A100-PCIE-40GB", "A100-PCIE-80GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "A30-PCIE-24GB", "B200", "GH200-480GB",
        "H100-80GB-HBM3", "H100-NVL", "H200", "H200-NVL",
    ]


@pytest.mark.parametrize(
    "product, canonical",
    [
        ("NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA-A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("H100-80GB", "H100-80GB-HBM3"),
        ("NVIDIA-H100-SXM5-80GB", "H100-80GB-HBM3"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB-HBM3"),
        ("nvidia-h100-80gb-hbm3", "H100-80GB-HBM3"),
        ("H200-141GB", "H200"),
        ("NVIDIA-H200-141GB-HBM3e", "H200"),
        ("NVIDIA-A30-24GB", "A30-PCIE-24GB"),
        ("NVIDIA-A30-PCIE-24GB", "A30-PCIE-24GB"),
        ("NVIDIA-B200-180GB-HBM3e", "B200"),
        ("A100-PCIE-40GB", "A100-PCIE-40GB"),
    ],
)
def test_canonical_product(product, canonical):
    assert canonical_product(product) == canonical


@pytest.mark.parametrize(
    "product, profile, count",
    [
        ("NVIDIA-A100-SXM4-80GB", "1g.10gb", 7),
        ("A100-SXM4-80GB", "1g.20gb", 4),
        ("A100-SXM4-80GB", "7g.80gb", 1),
        ("A100-SXM4-40GB", "1g.5gb", 7),
        ("A100-SXM4-40GB", "1g.10gb", 4),
        ("A100-SXM4-40GB", "2g.10gb", 3),
        ("NVIDIA-H100-80GB-HBM3", "1g.10gb", 7),
        ("H100-SXM5-80GB", "3g.40gb", 2),
        ("H200-141GB", "1g.18gb", 7),
        ("H200-141GB", "1g.35gb", 4),
        ("A30-24GB", "1g.6gb", 4),
        ("A30-24GB", "2g.12gb", 2),
        ("NVIDIA-B200-180GB-HBM3e", "1g.23gb", 7),
        ("NVIDIA-B200-180GB-HBM3e", "1g.45gb", 4),
        ("NVIDIA-A100-PCIE-80GB", "1g.10gb", 7),
    ],
)
def test_max_instances(product, profile, count):
    assert max_instances(product, profile) == count


def test_profiles_table_with_nvidias_memory_sizes():
    table = profiles("NVIDIA-A100-SXM4-80GB")
    assert list(table) == A100_80_PROFILES
    assert table["1g.10gb"] == {"max": 7, "memory_mib": 9856, "resource": "nvidia.com/mig-1g.10gb"}
    assert [item["memory_mib"] for item in table.values()] == [9856, 19968, 19968, 40192, 40192, 80384]
    assert profiles("A100-SXM4-40GB")["1g.5gb"] == {"max": 7, "memory_mib": 4864, "resource": "nvidia.com/mig-1g.5gb"}
    h100 = profiles("H100-80GB")
    assert list(h100) == A100_80_PROFILES
    assert [item["memory_mib"] for item in h100.values()] == [10240, 20480, 20480, 40960, 40960, 81920]
    assert [item["max"] for item in h100.values()] == [item["max"] for item in table.values()]


def test_media_extension_profiles_stay_in_the_tables():
    assert "1g.10gb+me" not in profiles("A100-SXM4-80GB")
    with pytest.raises(MigError, match=r"^profile: '1g\.10gb\+me' is not a MIG profile of A100-SXM4-80GB\. Fix: "):
        max_instances("A100-SXM4-80GB", "1g.10gb+me")


def test_profiles_returns_a_fresh_copy():
    profiles("A30-24GB")["1g.6gb"]["max"] = 99
    assert max_instances("A30-24GB", "1g.6gb") == 4


@pytest.mark.parametrize(
    "profile, resource",
    [("1g.10gb", "nvidia.com/mig-1g.10gb"), ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"), ("7g.141gb", "nvidia.com/mig-7g.141gb")],
)
def test_resource_name(profile, resource):
    assert resource_name(profile) == resource


@pytest.mark.parametrize(
    "product, profile, gpus, count, expected",
    [
        pytest.param("NVIDIA-A100-SXM4-80GB", "1g.10gb", 1, None, {"nvidia.com/mig-1g.10gb": 7}, id="lab-node-2"),
        pytest.param("A100-SXM4-40GB", "1g.10gb", 1, None, {"nvidia.com/mig-1g.10gb": 4}, id="40gb-1g.10gb"),
        pytest.param("A100-SXM4-40GB", "1g.5gb", 1, None, {"nvidia.com/mig-1g.5gb": 7}, id="40gb-1g.5gb"),
        pytest.param("A100-SXM4-80GB", "1g.10gb", 2, None, {"nvidia.com/mig-1g.10gb": 14}, id="two-gpus"),
        pytest.param("A100-SXM4-80GB", "1g.10gb", 2, 3, {"nvidia.com/mig-1g.10gb": 6}, id="partial-layout"),
        pytest.param("A100-SXM4-80GB", "1g.10gb", 0, None, {"nvidia.com/mig-1g.10gb": 0}, id="no-gpus"),
    ],
)
def test_mig_resources(product, profile, gpus, count, expected):
    assert mig_resources(product, profile, gpus, count) == expected


def test_validate_layout_returns_count():
    assert validate_layout("A100-SXM4-40GB", "1g.10gb", 4) == 4


A100_40_LIST = "1g.5gb x7, 1g.10gb x4, 2g.10gb x3, 3g.20gb x2, 4g.20gb x1, 7g.40gb x1"
PRODUCTS_FIX = (
    "use one of A100-PCIE-40GB, A100-PCIE-80GB, A100-SXM4-40GB, A100-SXM4-80GB, A30-PCIE-24GB, B200, GH200-480GB, H100-80GB-HBM3, "
    "H100-NVL, H200, H200-NVL "
    "(the NVIDIA- prefix of the gpu.product label is optional); another GPU needs its row in the collection's source, "
    "tools/gpu-tables/mig-geometry.yaml (NVIDIA's documented MIG profiles and placements), and make tables"
)


@pytest.mark.parametrize(
    "call, path, message",
    [
        pytest.param(
            lambda: max_instances("T4", "1g.5gb"), "product", "product: no MIG geometry known for product 'T4'. Fix: " + PRODUCTS_FIX, id="unknown-product"
        ),
        pytest.param(lambda: max_instances(None, "1g.5gb"), "product", "product: must be a GPU product name, got null. Fix: " + PRODUCTS_FIX, id="no-product"),
        pytest.param(
            lambda: max_instances("A100-SXM4-80GB", "1g.5gb"),
            "profile",
            "profile: '1g.5gb' is not a MIG profile of A100-SXM4-80GB. Fix: use one of the A100-SXM4-80GB profiles (max instances per GPU): "
            "1g.10gb x7, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g.40gb x1, 7g.80gb x1",
            id="profile-of-another-product",
        ),
        pytest.param(
            lambda: validate_layout("A100-SXM4-40GB", "1g.10gb", 7),
            "count",
            "count: 7 instances of 1g.10gb do not fit: one A100-SXM4-40GB holds at most 4. Fix: use 1 to 4 per GPU, or another profile (%s)" % A100_40_LIST,
            id="seven-1g.10gb-on-40gb",
        ),
        pytest.param(
            lambda: validate_layout("A100-SXM4-40GB", "1g.10gb", 0),
            "count",
            "count: must be at least 1, got 0. Fix: use a whole number from 1 to 4",
            id="zero-instances",
        ),
        pytest.param(
            lambda: validate_layout("A100-SXM4-40GB", "1g.10gb", True),
            "count",
            "count: must be an integer number of instances per GPU, got true. Fix: use a whole number from 1 to 4",
            id="bool-count",
        ),
        pytest.param(
            lambda: validate_layout("A100-SXM4-40GB", "1g.10gb", "4"),
            "count",
            "count: must be an integer number of instances per GPU, got '4'. Fix: use a whole number from 1 to 4",
            id="string-count",
        ),
        pytest.param(
            lambda: mig_resources("A100-SXM4-40GB", "1g.10gb", 1, 7, where="lab-node-2.mig"),
            "lab-node-2.mig.count",
            "lab-node-2.mig.count: 7 instances of 1g.10gb do not fit: one A100-SXM4-40GB holds at most 4. "
            "Fix: use 1 to 4 per GPU, or another profile (%s)" % A100_40_LIST,
            id="where-prefix",
        ),
        pytest.param(
            lambda: mig_resources("A100-SXM4-80GB", "1g.10gb", -1),
            "gpus",
            "gpus: must be a non-negative integer number of MIG-enabled GPUs, got -1. Fix: give the GPU count, e.g. 1",
            id="negative-gpus",
        ),
        pytest.param(
            lambda: resource_name("1g"),
            "profile",
            "profile: '1g' is not a MIG profile name. Fix: write a profile as <slices>g.<memory>gb, e.g. 1g.10gb (optionally with +me)",
            id="bad-profile-name",
        ),
    ],
)
def test_mig_errors(call, path, message):
    with pytest.raises(MigError) as info:
        call()
    assert info.value.path == path
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("mig, node_gpus, path, problem", [
    pytest.param({"product": "A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 0}, 2, "n.mig.gpus", "must be a whole number of 1 or more", id="zero"),
    pytest.param({"product": "A100-SXM4-80GB", "profile": "1g.10gb", "gpus": True}, 2, "n.mig.gpus", "got true", id="bool"),
    pytest.param({"product": "A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 3}, 2, "n.mig.gpus", "only 2 physical GPUs", id="more-than-the-node"),
    pytest.param({"product": "A100-SXM4-80GB", "profile": "1g.10gb", "count": 8}, 2, "n.mig.count", "do not fit", id="count"),
    pytest.param({"product": "A100-SXM4-80GB", "profile": "9g.99gb"}, 2, "n.mig.profile", "is not a MIG profile", id="profile"),
    pytest.param({"product": "A100-SXM4-80GB", "profile": "1g.10gb", "size": 1}, 2, "n.mig.size", "unknown key", id="unknown-key"),
    pytest.param({"product": "H100-80GB-HBM3", "devices": {"1g.20gb": 4, "3g.40gb": 1}}, 1, "n.mig.devices",
                 "they need 12 of its 8 memory slices (4 x 1g.20gb at 2 each + 3g.40gb at 4): 122880 MiB of memory, the GPU has 81920 MiB",
                 id="devices-beyond-memory"),
    pytest.param({"product": "A100-SXM4-80GB", "devices": {"4g.40gb": 1, "2g.20gb": 2}}, 2, "n.mig.devices",
                 "they need 8 of its 7 compute slices (2 x 2g.20gb at 2 each + 4g.40gb at 4)", id="devices-beyond-compute"),
    pytest.param({"product": "A100-SXM4-80GB", "devices": {"1g.10gb": 8}}, 2, "n.mig.devices", "8 of its 7 compute slices", id="devices-one-too-many"),
    pytest.param({"product": "A100-SXM4-80GB", "devices": {"1g.20gb": 1}, "profile": "1g.10gb"}, 2, "n.mig.devices", "goes without profile",
                 id="devices-and-profile"),
    pytest.param({"product": "A100-SXM4-80GB", "devices": {"9g.99gb": 1}}, 2, "n.mig.devices.9g.99gb", "is not a MIG profile of A100-SXM4-80GB",
                 id="devices-unknown-profile"),
    pytest.param({"product": "A100-SXM4-80GB", "devices": {"1g.10gb": 0}}, 2, "n.mig.devices.1g.10gb", "at least 1", id="devices-zero"),
    pytest.param({"product": "A100-SXM4-80GB", "devices": {}}, 2, "n.mig.devices", "non-empty mapping", id="devices-empty"),
    pytest.param({"product": "A100-SXM4-80GB"}, 2, "n.mig.profile", "missing", id="no-profile"),
])
def test_one_reading_of_a_nodes_mig_block_for_the_lab_and_the_operator(mig, node_gpus, path, problem):
    """The advertised resources (inventory.mig_spec) and the operator's mig-parted layout (gpu_operator.node_layout)
    read a node's mig block through mig.node_mig: the same input fails the same way on both paths."""
    from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator
    from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory

    errors = []
    for read in (lambda: inventory.mig_spec(mig, "n.mig", node_gpus=node_gpus),
                 lambda: gpu_operator.node_layout({"name": "n", "gpus": node_gpus, "mig": mig})):
        with pytest.raises(MigError) as info:
            read()
        errors.append(str(info.value))
    assert errors[0] == errors[1] and errors[0].startswith(path + ": ") and problem in errors[0], errors


def test_a_nodes_mig_block_defaults_to_every_gpu_and_the_full_layout():
    from ansible_collections.gpushare.k8s.plugins.module_utils.hardware.mig import node_mig

    assert node_mig({"product": "A30-24GB", "profile": "1g.6gb"}, "n.mig", 2) == {
        "product": "A30-24GB", "profile": "1g.6gb", "gpus": 2, "count": 4, "devices": {"1g.6gb": 4}}
    assert node_mig({"product": "A30-24GB", "profile": "1g.6gb", "gpus": 1, "count": 2}, "n.mig", 2)["count"] == 2


def test_a_layout_of_several_profiles_is_one_mig_parted_entry_and_advertises_each_profile():
    """``mig.devices`` (mig-parted's ``mig-devices``): the layout the operator's MIG manager applies, its name a valid
    label value, and what the node advertises under the mixed strategy on both paths (the lab's and the operator's)."""
    from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator
    from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory

    node = {"name": "n", "gpus": 2, "mig": {"product": "NVIDIA-H100-80GB-HBM3", "devices": {"3g.40gb": 1, "1g.20gb": 2}}}
    assert gpu_operator.node_layout(node) == ("1g.20gb-x2-3g.40gb-x1-on-2-of-2", [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.20gb": 2, "3g.40gb": 1}}])
    advertised = {"nvidia.com/mig-1g.20gb": 4, "nvidia.com/mig-3g.40gb": 2}
    assert gpu_operator.predict(node, {})["resources"] == advertised
    assert inventory.mig_spec(node["mig"], "n.mig", node_gpus=2) == advertised
    one = dict(node, mig=dict(node["mig"], gpus=1))
    assert gpu_operator.node_layout(one)[0] == "1g.20gb-x2-3g.40gb-x1-on-1-of-2"
    assert gpu_operator.predict(one, {})["resources"] == {"nvidia.com/mig-1g.20gb": 2, "nvidia.com/mig-3g.40gb": 1}
    # one profile written as devices is the profile form: the stock layout's name when it is the full layout
    assert gpu_operator.node_layout(dict(node, mig={"product": "NVIDIA-H100-80GB-HBM3", "devices": {"1g.10gb": 7}}))[0] == "all-1g.10gb"
