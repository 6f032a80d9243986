# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab's end-of-run summary (documentation: one sidecar ``<filter>.yml`` per filter)."""

from __future__ import annotations

from ansible_collections.gpushare.k8s.plugins.module_utils.lab import report as _lab_report


def lab_summary(nodes, pods=None, files=None, lab_root="", kubeconfig=None, context=None, node_names=None, labels=None):
    """Short lines: one per node (config, advertised GPUs, key labels), one per Pod with its node, the files, the export line."""
    return _lab_report.lab_summary(nodes, pods or [], files or [], lab_root, kubeconfig, context, node_names,
                                   _lab_report.DEFAULT_LABELS if labels is None else labels)


class FilterModule:
    """gpushare.k8s lab report filters."""

    def filters(self):
        return {"lab_summary": lab_summary}
