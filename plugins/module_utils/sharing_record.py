# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the configure-only role found before it first changed a cluster, kept on that cluster, and how to put it back.
No Ansible import.

The record is a JSON document in a ConfigMap of the collection's own (``gpushare-sharing-record`` in the operator's
namespace). Every run of the role extends it *before* its first write, and only with what it has not recorded yet, so
the values it holds are always those from before the collection touched them:

- ``policy``: the ClusterPolicy fields the role sets, each with its earlier value, or ``null`` at the highest level
  that was absent (``devicePlugin: null`` when the ClusterPolicy had no ``devicePlugin`` at all), so that the undo
  removes what was added and nothing else. ``via`` says where they were changed: ``patch`` (the object) or ``helm``
  (the values of the Helm release the ClusterPolicy belongs to; then the paths are paths in the release's
  user-supplied values).
- ``configmaps``: each ConfigMap the role writes: ``created`` when it did not exist (the undo deletes it), else the
  earlier value of each key the role writes (``null``: the key was absent).
- ``nodes``: at the first run every GPU node (the ClusterPolicy it changes reaches them all), later each node a run
  configures that the cluster did not have then: the earlier value of the labels the role writes (``null``: absent),
  its GPUs and product, and what it advertised (its ``nvidia.com/*`` allocatable and the GPU labels the operator
  manages), which the undo waits for where it is known (``baseline``: recorded before the first run's writes).

:func:`undo_plan` turns a record and the cluster's current objects into the writes that put the earlier state back.
"""

from __future__ import annotations

import copy
import json

from ansible_collections.gpushare.k8s.plugins.module_utils import gpu_names as _names
from ansible_collections.gpushare.k8s.plugins.module_utils import node_pools as _pools
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError

__all__ = ["RecordError", "RECORD_KEY", "OWNED_LABELS", "load", "dump", "extend", "undo_plan", "helm_release", "merged_values",
           "chart_version"]

RECORD_KEY = "record.json"
RECORD_VERSION = 1
# The labels the role writes, and the MIG manager's answer to one of them: each is put back as it was.
OWNED_LABELS = _names.OPERATOR_OWNED_LABELS
MIG_CONFIG_LABEL = _names.MIG_CONFIG_LABEL
ALL_DISABLED = "all-disabled"
HELM_RELEASE_ANNOTATION = "meta.helm.sh/release-name"
HELM_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"


class RecordError(InputError):
    """A record that cannot be read or used. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def load(data, where="the record ConfigMap"):
    """The record in a ConfigMap's ``data`` (``None`` or no key: an empty record)."""
    text = (data or {}).get(RECORD_KEY)
    if text is None:
        return _empty()
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise RecordError("%s %s" % (where, RECORD_KEY), "is not JSON (%s)" % exc,
                          "restore it from a backup, or delete it (then undo can no longer put back the earlier values)") from None
    if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
        raise RecordError("%s %s" % (where, RECORD_KEY), "is not a version %d record" % RECORD_VERSION,
                          "use the collection version that wrote it")
    for key, default in _empty().items():
        record.setdefault(key, default)
    return record


def dump(record):
    """The record as the ConfigMap's text (stable: sorted keys, so an unchanged record is an unchanged ConfigMap)."""
    return json.dumps(record, sort_keys=True, indent=1)


def _empty():
    return {"version": RECORD_VERSION, "policy": None, "configmaps": {}, "nodes": {}}


def _leaf_paths(tree, prefix=()):
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from _leaf_paths(value, prefix + (key,))
        else:
            yield prefix + (key,)


def _earlier(tree, path):
    """``(path, value)``: ``path``'s value in ``tree``, or the shortest prefix of ``path`` that is absent, with ``None``."""
    node = tree
    for depth, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            return path[:depth + 1], None
        node = node[key]
    return path, copy.deepcopy(node)


def _fields(tree, patch):
    """The earlier values of every field ``patch`` sets in ``tree``, each at the level that existed (see :func:`_earlier`)."""
    fields = []
    for path in _leaf_paths(patch):
        entry = _earlier(tree or {}, path)
        if entry[0] not in [tuple(field[0]) for field in fields]:
            fields.append((list(entry[0]), entry[1]))
    return [list(field) for field in fields]


def helm_release(policy):
    """``{name, namespace}`` of the Helm release a ClusterPolicy object belongs to (its ``meta.helm.sh`` annotations), else ``None``."""
    annotations = ((policy or {}).get("metadata") or {}).get("annotations") or {}
    name, namespace = annotations.get(HELM_RELEASE_ANNOTATION), annotations.get(HELM_NAMESPACE_ANNOTATION)
    return {"name": name, "namespace": namespace} if name and namespace else None


def chart_version(chart, chart_ref):
    """The chart version of a release whose chart is ``chart`` (Helm's ``<name>-<version>``), for an upgrade from ``chart_ref``.

    ``None`` for a chart directory or archive (Helm takes the version from the chart itself). A release made from
    another chart than ``chart_ref`` names is refused: upgrading it from that chart would replace the operator.
    """
    if chart_ref.startswith(("/", "./", "../", "~")) or chart_ref.endswith(".tgz"):
        return None
    name = chart_ref.rstrip("/").rsplit("/", 1)[-1]
    if not chart or not chart.startswith(name + "-"):
        raise RecordError("gpushare_operator_helm_chart", "%r names chart %s, but the release was installed from %s" % (chart_ref, name, chart),
                          "name the chart the GPU Operator's release was installed from (e.g. nvidia/gpu-operator)")
    return chart[len(name) + 1:]


def _set_path(tree, path, value):
    """Set ``path`` in ``tree`` to ``value``; ``None`` removes it (and the parents it leaves empty are kept as they were)."""
    node = tree
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            if value is None:
                return
            node[key] = {}
        node = node[key]
    if value is None:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = copy.deepcopy(value)


def merged_values(values, patch):
    """A release's user-supplied ``values`` with ``patch`` merged in (mappings merged, anything else replaced)."""
    merged = copy.deepcopy(values or {})

    def merge(into, update):
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = copy.deepcopy(value)

    merge(merged, patch)
    return merged


def _advertised(node, managed_label):
    labels = (node.get("metadata") or {}).get("labels") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {
        "resources": {key: value for key, value in sorted(allocatable.items()) if key.startswith("nvidia.com/")},
        "labels": {key: value for key, value in sorted(labels.items()) if managed_label(key)},
    }


def _node_entry(node, managed_label, gpus, product, baseline):
    labels = (node.get("metadata") or {}).get("labels") or {}
    return dict(_advertised(node, managed_label), owned={key: labels.get(key) for key in OWNED_LABELS}, gpus=gpus, product=product,
                baseline=baseline)


def extend(record, policy, patch, via, configmaps, nodes, entries, managed_label, values=None, release=None):
    """The record extended with what it lacks, before the role writes (``record`` itself is not changed).

    ``policy`` is the ClusterPolicy object and ``patch`` the ``{"spec": ...}`` merge patch the role applies; ``via`` is
    ``patch`` or ``helm`` (then ``values`` are the release's user-supplied values and ``release`` its ``{name,
    namespace}``). ``configmaps`` maps each ConfigMap the role writes to ``(data or None when absent, keys written)``;
    ``nodes`` are the cluster's Node objects and ``entries`` the node entries this run configures (``{name, gpus,
    product | mig: {product}}``).
    """
    record = copy.deepcopy(record) if record else _empty()
    first = record["policy"] is None
    if first:
        if via == "helm":
            record["policy"] = {"via": "helm", "release": dict(release), "fields": _fields(values or {}, patch.get("spec") or {})}
        else:
            record["policy"] = {"via": "patch", "fields": _fields((policy or {}).get("spec") or {}, patch.get("spec") or {})}
    for name, (data, keys) in sorted(configmaps.items()):
        entry = record["configmaps"].get(name)
        if entry is None:
            entry = record["configmaps"][name] = {"created": True} if data is None else {"created": False, "keys": {}}
        if not entry["created"]:
            for key in keys:
                entry["keys"].setdefault(key, (data or {}).get(key))
    by_name = {(node.get("metadata") or {}).get("name"): node for node in nodes}
    if first:
        # The first run changes the ClusterPolicy, which every GPU node follows: each is recorded as it is now, in the
        # pools or not, so that a node that joins a pool later is put back as it was before the first run.
        for name, node in sorted(by_name.items()):
            gpus, product = _pools.node_gpus(node)
            if gpus or _advertised(node, managed_label)["resources"]:
                record["nodes"][name] = _node_entry(node, managed_label, gpus, product, baseline=True)
    for entry in sorted(entries, key=lambda item: str(item["name"])):
        name = str(entry["name"])
        if name not in by_name:
            continue
        product = entry.get("product") or (entry.get("mig") or {}).get("product")
        if name in record["nodes"]:
            record["nodes"][name]["gpus"], record["nodes"][name]["product"] = entry["gpus"], product
            continue
        # a node the cluster did not have at the first run: what it shows now already follows the collection's
        # ClusterPolicy, so its labels are put back but what it advertised before cannot be known (no wait for it)
        record["nodes"][name] = _node_entry(by_name[name], managed_label, entry["gpus"], product, baseline=first)
    return record


def undo_plan(record, policy, values, configmaps, nodes):
    """The writes that put back what ``record`` holds, against the cluster's current objects.

    Returns ``{policy_patch, values, release, mig_reset, configmaps_delete, configmaps_patch, node_labels, expected}``:
    the ClusterPolicy merge patch (``None`` unless ``via`` is ``patch``), the release's full user-supplied values with
    every recorded path put back (``None`` unless ``via`` is ``helm``), the nodes whose MIG layout the collection set
    where none (or ``all-disabled``) was (``[{name, gpus, product}]``: a MIG manager changes a GPU only when its label
    names a layout, so they are asked for ``all-disabled`` before the label goes), the ConfigMaps to delete (the role created them),
    ``{name: {key: earlier or None}}`` for the others, ``{node: {label: earlier or None}}`` for the nodes that still exist,
    and ``{node: {resources, labels}}``: what each of them advertised before (for the wait).
    """
    plan = {"policy_patch": None, "values": None, "release": None, "mig_reset": [], "configmaps_delete": [], "configmaps_patch": {},
            "node_labels": {}, "expected": {}}
    recorded = record.get("policy")
    if recorded:
        if recorded["via"] == "helm":
            restored = copy.deepcopy(values or {})
            for path, value in recorded["fields"]:
                _set_path(restored, path, value)
            plan["values"], plan["release"] = restored, recorded["release"]
        elif policy is not None:
            spec_patch = {}
            for path, value in recorded["fields"]:
                node = spec_patch
                for key in path[:-1]:
                    node = node.setdefault(key, {})
                node[path[-1]] = value
            plan["policy_patch"] = {"spec": spec_patch}
    for name, entry in sorted(record.get("configmaps", {}).items()):
        if name not in configmaps:
            continue
        if entry["created"]:
            plan["configmaps_delete"].append(name)
        elif entry.get("keys"):
            plan["configmaps_patch"][name] = dict(entry["keys"])
    present = {(node.get("metadata") or {}).get("name"): node for node in nodes}
    for name, entry in sorted(record.get("nodes", {}).items()):
        if name not in present:
            continue
        layout = ((present[name].get("metadata") or {}).get("labels") or {}).get(MIG_CONFIG_LABEL)
        earlier = entry["owned"].get(MIG_CONFIG_LABEL)
        if layout and layout != earlier and earlier in (None, ALL_DISABLED):
            plan["mig_reset"].append({"name": name, "gpus": entry["gpus"], "product": entry["product"]})
        plan["node_labels"][name] = dict(entry["owned"])
        if entry.get("baseline", True):
            plan["expected"][name] = {"resources": entry["resources"], "labels": entry["labels"]}
    return plan
