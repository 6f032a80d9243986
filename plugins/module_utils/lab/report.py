# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab's end-of-run summary as short lines, readable under any callback and result format.

:func:`lab_summary` takes the Nodes and Pods as the API returns them and the files of the lab root, and returns a
list of lines: one per node (its device-plugin config, the GPU resources it advertises, the few labels that tell
what kind of GPU node it is), one per Pod with its node and phase, the lab root's files by folder, and the
``export KUBECONFIG=...`` line to use next. A debug task that prints the list shows each line on its own line.
No Ansible import.
"""

from __future__ import annotations

import os

from .. import names as _names

__all__ = ["CONFIG_LABEL", "DEFAULT_LABELS", "lab_summary"]

CONFIG_LABEL = _names.CONFIG_LABEL
# The labels that tell a GPU node's kind: its product (-SHARED when time-sliced) and MIG strategy, and in operator
# mode the MIG layout asked of the MIG manager and how far it got.
DEFAULT_LABELS = (_names.PRODUCT_LABEL, _names.MIG_STRATEGY_LABEL, _names.MIG_CONFIG_LABEL, _names.MIG_STATE_LABEL)
DEFAULT_PREFIX = _names.PREFIX
# Where a folder's list of files wraps (the other lines are as long as the names they show).
WIDTH = 100


def _metadata(obj):
    return (obj or {}).get("metadata") or {}


def _short(key, prefix):
    return key[len(prefix):] if prefix and key.startswith(prefix) else key


def _advertised(node, prefix):
    allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
    shown = ["%s=%s" % (key, allocatable[key]) for key in sorted(allocatable)
             if key.startswith(prefix) and str(allocatable[key]) not in ("0", "")]
    return " ".join(shown) or "no GPU"


def _table(rows):
    """Rows of cells as lines, every column but the last padded to its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)] if rows else []
    return ["  ".join([cell.ljust(width) for cell, width in zip(row, widths)] + [row[-1]]).rstrip() for row in rows]


def _files(lab_root, files, width):
    """A line naming the lab root, then per folder its files, wrapped to ``width``.

    Hidden files and folders (the step's own records, such as ``.gpushare/intent-verdict.json``) are not the lab's
    files: left out."""
    by_folder = {}
    root = str(lab_root or "").rstrip("/")
    for path in sorted(str(f) for f in files or []):
        relative = path[len(root) + 1:] if root and path.startswith(root + "/") else path
        if any(part.startswith(".") for part in relative.split("/")):
            continue
        folder, name = os.path.split(relative)
        by_folder.setdefault(folder + "/" if folder else "", []).append(name)
    if not by_folder:
        return ["files: none in %s" % root] if root else []
    lines = ["files in %s:" % root] if root else ["files:"]
    for folder in sorted(by_folder):
        line = folder + ":" if folder else "-:"
        for index, name in enumerate(by_folder[folder]):
            piece = (" " if index == 0 else ", ") + name
            if index and len(line) + len(piece) > width:
                lines.append(line + ",")
                line = " " * len(folder + ":") + " " + name
            else:
                line += piece
        lines.append(line)
    return lines


def lab_summary(nodes, pods=(), files=(), lab_root="", kubeconfig=None, context=None, node_names=None, labels=DEFAULT_LABELS,
                prefix=DEFAULT_PREFIX, width=WIDTH):
    """The summary's lines (see the module's docstring).

    ``nodes`` and ``pods`` are API objects; ``node_names`` limits the nodes shown (all when ``None``); ``files`` are
    paths, shown relative to ``lab_root`` grouped by folder (a folder's list wraps at ``width`` characters);
    ``kubeconfig`` is the path to export (nothing is said for a kubeconfig given as a dict) and ``context`` its
    context, when not the current one. ``labels`` are the label
    keys shown (``prefix`` is left out of their names, and picks the advertised resources).
    """
    wanted = None if node_names is None else set(node_names)
    shown = sorted((n for n in nodes or [] if wanted is None or _metadata(n).get("name") in wanted),
                   key=lambda n: _metadata(n).get("name") or "")
    rows = []
    for node in shown:
        node_labels = _metadata(node).get("labels") or {}
        picked = " ".join("%s=%s" % (_short(key, prefix), node_labels[key]) for key in labels or () if key in node_labels)
        rows.append(["node " + (_metadata(node).get("name") or "?"), "config " + (node_labels.get(CONFIG_LABEL) or "-"),
                     _advertised(node, prefix), picked])
    lines = _table(rows) if rows else ["nodes: none of %s found" % ", ".join(sorted(wanted)) if wanted else "nodes: none"]
    pod_rows = []
    for pod in sorted(pods or [], key=lambda p: (_metadata(p).get("namespace") or "", _metadata(p).get("name") or "")):
        meta = _metadata(pod)
        pod_rows.append(["pod %s/%s" % (meta.get("namespace") or "-", meta.get("name") or "?"),
                         "on " + (((pod.get("spec") or {}).get("nodeName")) or "(not scheduled)"),
                         ((pod.get("status") or {}).get("phase")) or "?"])
    lines += _table(pod_rows) if pod_rows else ["pods: none"]
    lines += _files(lab_root, files, width)
    if isinstance(kubeconfig, str) and kubeconfig:
        lines.append("next: export KUBECONFIG=%s%s" % (kubeconfig, " and pass kubectl --context %s" % context if context else ""))
    return lines
