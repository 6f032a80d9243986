# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU feature labels of simulated nodes (documentation: the sidecar ``gpu_feature_labels.yml``)."""

from __future__ import annotations

from ansible_collections.gpushare.k8s.plugins.filter.gpushare import _filter_errors
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_features as _features
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory as _inv


@_filter_errors
def gpu_feature_labels(node, configs=None, product=None, current=None):
    """The labels gpu-feature-discovery would set on one inventory node; with ``current``, a merge patch that also drops stale ones."""
    labels = _inv.feature_labels(node, configs, product)  # validates the node, its config name and its MIG layout
    return labels if current is None else _features.label_patch(labels, current)


@_filter_errors
def gpu_feature_label_entries(nodes, configs=None, product=None):
    """node_resources ``nodes`` entries setting every node's GFD labels and removing stale ones this model sets."""
    return _inv.feature_label_entries(nodes, configs, product)


class FilterModule:
    """gpushare.k8s GPU feature label filters."""

    def filters(self):
        return {"gpu_feature_labels": gpu_feature_labels, "gpu_feature_label_entries": gpu_feature_label_entries}
