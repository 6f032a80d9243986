# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every name and label check matches the whole value: ``re.match`` with ``$`` let a trailing newline through.

Each check gets a good value (accepted) and the same value with a trailing newline (refused), with the message the
user sees written out by hand.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import device_plugin
from ansible_collections.gpushare.k8s.plugins.module_utils.dra import devices as dra
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_features
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import node_status
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import node as gpu_node
from ansible_collections.gpushare.k8s.plugins.module_utils.requests import quota_coverage
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.inventory import check_config_name


def refused(call, error=ValueError):
    with pytest.raises(error) as caught:
        call()
    return str(caught.value)


def test_extended_resource_names_of_a_quota():
    assert quota_coverage.resolve_quota_resources(["nvidia.com/gpu"]) == ["nvidia.com/gpu"]
    assert refused(lambda: quota_coverage.resolve_quota_resources(["nvidia.com/gpu\n"])) == (
        "resources[0]: 'nvidia.com/gpu\\n' is not an extended resource name. Fix: write <domain>/<name>, e.g. "
        "nvidia.com/mig-1g.10gb")


def test_gpu_feature_label_values_and_managed_label_keys():
    assert gpu_node.read_product({"name": "n", "product": "NVIDIA-A100-SXM4-80GB"}, "n") == ("NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB")
    assert refused(lambda: gpu_node.read_product({"name": "n", "product": "NVIDIA-A100-SXM4-80GB\n"}, "n")) == (
        "n.product: 'NVIDIA-A100-SXM4-80GB\\n' is not a valid label value (at most 63 letters, digits, '-', '_' or '.', starting "
        "and ending with a letter or digit). Fix: write the product as gpu-feature-discovery does, spaces replaced by '-', e.g. "
        "NVIDIA-A100-SXM4-80GB")
    assert gpu_features.is_managed_label("nvidia.com/mig-1g.10gb.count") is True
    assert gpu_features.is_managed_label("nvidia.com/mig-1g.10gb.count\n") is False


def test_mig_profile_names():
    assert mig.resource_name("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert refused(lambda: mig.resource_name("1g.10gb\n")).startswith("profile: '1g.10gb\\n' is not a MIG profile name")


def test_dra_node_and_driver_names():
    assert dra.check_driver("gpu.nvidia.com") == "gpu.nvidia.com"
    assert refused(lambda: dra.check_driver("gpu.nvidia.com\n")) == (
        "driver: 'gpu.nvidia.com\\n' is not a DRA driver name. Fix: use a DNS subdomain of at most 63 characters, e.g. gpu.nvidia.com")
    assert refused(lambda: dra.normalize_nodes([{"name": "dra-node-0\n", "gpus": 2}], "NVIDIA-A100-SXM4-80GB")) == (
        "nodes[0].name: 'dra-node-0\\n' is not a node name. Fix: use the kwok node's name, a DNS subdomain such as dra-node-0")


def test_node_status_resource_names_and_labels():
    assert node_status.resource_name_error("nvidia.com/gpu") is None
    assert node_status.resource_name_error("nvidia.com/gpu\n").startswith('resources: "nvidia.com/gpu\n" is not a valid extended resource name')
    assert node_status.resource_name_error("nvidia.com\n/gpu").startswith('resources: "nvidia.com\n/gpu" is not a valid extended resource name')
    assert node_status.label_error("nvidia.com/gpu.product", "A100", "labels") is None
    assert node_status.label_error("nvidia.com/gpu.product\n", "A100", "labels").startswith(
        'labels: "nvidia.com/gpu.product\n" is not a valid label key')
    assert node_status.label_error("nvidia.com\n/gpu.product", "A100", "labels").startswith(
        'labels: "nvidia.com\n/gpu.product" is not a valid label key')
    assert node_status.label_error("nvidia.com/gpu.product", "A100\n", "labels") == (
        'labels["nvidia.com/gpu.product"]: \'A100\\n\' is not a valid label value: at most 63 letters, digits, "-", "_" or ".", '
        "starting and ending with a letter or digit")


def test_the_operators_configmap_names():
    assert gpu_operator.cluster_policy_patch("device-plugin-configs", "default", "mixed", "mig-parted")
    assert refused(lambda: gpu_operator.cluster_policy_patch("device-plugin-configs\n", "default", "mixed", "mig-parted")) == (
        "gpushare_device_plugin_configmap: 'device-plugin-configs\\n' is not a valid name (letters, digits, '-', '_', '.'; at most 63). "
        "Fix: set a ConfigMap key or name")


def test_device_plugin_resource_names():
    config = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    assert device_plugin.validate_config(config)["sharing"]["timeSlicing"]["resources"][0]["name"] == "nvidia.com/gpu"
    for name, problem in (("nvidia.com/gpu\n", "'nvidia.com/gpu\\n' is not a valid extended resource name: 'gpu\\n' must be 1-63"),
                          ("nvidia.com\n/gpu", "'nvidia.com\\n/gpu' is not a valid extended resource name: prefix 'nvidia.com\\n' "
                                               "is not a DNS-1123 subdomain")):
        bad = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": name, "replicas": 2}]}}}
        assert problem in refused(lambda bad=bad: device_plugin.validate_config(bad))


def test_config_names():
    assert check_config_name("time-sliced-4") == "time-sliced-4"
    assert refused(lambda: check_config_name("shared\n")) == (
        "configs['shared\\n']: a config name must be a valid ConfigMap key and label value (1-63 letters, digits, '-', '_' or '.', "
        "starting and ending with a letter or digit). Fix: rename the config, e.g. shared or time-sliced-4")
