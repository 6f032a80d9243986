# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU feature labels of simulated nodes (documentation: the sidecar ``gpu_feature_labels.yml``)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.gpushare import node_gpu_resources
from ansible_collections.gpushare.k8s.plugins.module_utils import device_plugin as _dp
from ansible_collections.gpushare.k8s.plugins.module_utils import gpu_features as _features


def gpu_feature_labels(node, configs=None, product=None, current=None):
    """The labels gpu-feature-discovery would set on one inventory node; with ``current``, a merge patch that also drops stale ones."""
    advertised = node_gpu_resources(node, configs)  # validates the node, its config name and its MIG layout
    try:
        config = None
        name = node.get("config")
        if name is not None:
            config = configs[name]
            if isinstance(config, (str, bytes)):
                config = _dp.parse_config(config, name=str(name))
        labels = _features.feature_labels(node, advertised, config, product)
        if current is None:
            return labels
        return _features.label_patch(labels, current)
    except (_dp.ConfigError, _features.FeatureError) as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """gpushare.k8s GPU feature label filters."""

    def filters(self):
        return {"gpu_feature_labels": gpu_feature_labels}
