# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Node pools by label selector: thin wrappers over module_utils/nvidia/node_pools.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import node_pools as _pools


def node_pools(pools, cluster_nodes, configs=None, named=None, field="gpushare_node_pools"):
    """``{nodes, pools, warnings, errors}``: the pools matched against the cluster's Node objects."""
    try:
        return _pools.resolve_pools(pools, cluster_nodes, configs, named or (), field)
    except _pools.PoolError as exc:
        raise AnsibleFilterError(str(exc)) from None


def node_pool_errors(pools, configs=None, field="gpushare_node_pools"):
    """The first problem of the pools' own shape (names, selectors, config or MIG layout) as a one-item list, else ``[]``."""
    try:
        _pools.validate_pools(pools, configs, field)
    except _pools.PoolError as exc:
        return [str(exc)]
    return []


class FilterModule:
    """gpushare.k8s node pool filters."""

    def filters(self):
        return {"node_pools": node_pools, "node_pool_errors": node_pool_errors}
