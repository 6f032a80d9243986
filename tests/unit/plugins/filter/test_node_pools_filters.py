# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The node pool filters: thin wrappers, errors as Ansible filter errors or as messages."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.node_pools import FilterModule, node_pool_errors, node_pools

NODE = {"metadata": {"name": "n1", "labels": {"pool": "a"}, "annotations": {"gpushare.k8s/gpus": "2", "gpushare.k8s/gpu-product": "NVIDIA-A100-SXM4-80GB"}}}
POOLS = [{"name": "a", "selector": {"matchLabels": {"pool": "a"}}, "config": "shared"}]


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {"node_pools", "node_pool_errors"}


def test_node_pools_resolves():
    assert node_pools(POOLS, [NODE], {"shared": {}})["nodes"] == [
        {"name": "n1", "gpus": 2, "product": "NVIDIA-A100-SXM4-80GB", "config": "shared"}]


def test_node_pools_raises_a_filter_error_naming_the_field():
    with pytest.raises(AnsibleFilterError, match=r"^gpu_sharing_node_pools\[0\] \(a\)\.config: .*Fix:"):
        node_pools(POOLS, [NODE], {"default": {}}, field="gpu_sharing_node_pools")


def test_node_pool_errors_returns_messages():
    assert node_pool_errors(POOLS, {"shared": {}}) == []
    assert node_pool_errors([{"name": "a", "selector": {"matchExpressions": [{"key": "pool", "operator": "Equals"}]}, "config": "shared"}],
                            {"shared": {}}) == [
        "gpushare_node_pools[0] (a).selector.matchExpressions[0].operator: 'Equals' is not an operator. "
        "Fix: use one of In, NotIn, Exists, DoesNotExist (case matters)"]
