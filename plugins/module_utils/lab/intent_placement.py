# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Where Pods that asked for a GPU by intent landed, checked against the isolation table's rule of thumb.

The lab's placement step creates one Pod per intent (``gpushare.k8s/gpu: whole | shared | isolated | <profile>``) with
no resource and no placement of its own: admission (role intent_admission) writes both. Each entry says where the table
puts that intent (``place_on``: ``mig`` or a device-plugin config, as the lab's workloads do), and the inventory model
(:func:`inventory.place`, which knows nothing of intents) says which resource such a workload asks for and which nodes
it fits. :func:`placement_report` reads the Pods as the API server stored and the scheduler bound them, and says for
each whether admission wrote that resource and the scheduler chose one of those nodes. A Pod the scheduler could not
place counts as placed right only when the scheduler says every node of its pool lacks room for that resource (the
pool is full) and it wrote the resource the pool gives. Pure Python, no Ansible import.
"""

from __future__ import annotations

import re

from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory as _inv
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.gpu_requests import INTENT_ANNOTATION

__all__ = ["INTENT_ANNOTATION", "intent_pods", "placement_report"]

_INSUFFICIENT_RE = r"(\d+) Insufficient %s\b"


def _entries(entries):
    if not isinstance(entries, (list, tuple)):
        raise ValueError("placement_intents: expected a list of {name, intent, place_on}")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not all(isinstance(entry.get(key), str) and entry.get(key) for key in ("name", "intent", "place_on")):
            raise ValueError("placement_intents[%d]: each entry needs name, intent and place_on (strings), e.g. "
                             "{name: intent-shared, intent: shared, place_on: shared}; got %r" % (index, entry))
    return entries


def intent_pods(entries, image, namespace):
    """The Pods of ``entries``: each asks by its intent only (annotation), one container, no resources."""
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": entry["name"], "namespace": namespace, "annotations": {INTENT_ANNOTATION: entry["intent"]}},
             "spec": {"containers": [{"name": entry["name"], "image": image}]}}
            for entry in _entries(entries)]


def _limits(pod):
    limits = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("limits") or {}).items():
            if name.startswith("nvidia.com/"):
                limits[name] = str(value)
    return limits


def _scheduled(pod):
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition
    return None


def placement_report(entries, pods, nodes, configs=None):
    """``{"done", "rows", "errors"}`` for the intent Pods ``pods`` (as read from the API server).

    ``done`` is false while a Pod is neither bound nor reported unschedulable. ``rows`` are one line per entry for the
    output; ``errors`` name each Pod that is not where the table says, and why.
    """
    entries = _entries(entries)
    expected = {pod["name"]: (pod, fits) for pod, fits in _inv.place(entries, nodes, configs)}
    by_name = {(pod.get("metadata") or {}).get("name"): pod for pod in pods or [] if isinstance(pod, dict)}
    done, rows, errors = True, [], []
    for entry in entries:
        name = entry["name"]
        want, fits = expected[name]
        where = "%s (%s: %s)" % (name, INTENT_ANNOTATION, entry["intent"])
        pod = by_name.get(name)
        if pod is None:
            errors.append("%s: not found" % where)
            continue
        limits = _limits(pod)
        asked = ", ".join("%s: %s" % item for item in sorted(limits.items())) or "no GPU"
        if limits != {want["resource"]: "1"}:
            errors.append("%s: admission wrote %s; the table puts it on %s, which gives %s: 1" % (where, asked, entry["place_on"], want["resource"]))
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        condition = _scheduled(pod) or {}
        if node:
            if node in fits:
                rows.append("%s -> %s -> %s" % (where, asked, node))
            else:
                errors.append("%s: %s landed on %s; the table (%s) puts it on %s" % (where, asked, node, entry["place_on"], ", ".join(fits) or "no node"))
        elif condition.get("status") == "False" and condition.get("reason") == "Unschedulable":
            message = str(condition.get("message") or "")
            full = re.search(_INSUFFICIENT_RE % re.escape(want["resource"]), message)
            if full and int(full.group(1)) == len(fits):
                rows.append("%s -> %s -> pending: its pool (%s) is full: %s" % (where, asked, ", ".join(fits), message))
            else:
                errors.append("%s: %s fits no node, though %s should give it: %s" % (where, asked, ", ".join(fits) or "no node", message))
        else:
            done = False
    return {"done": done, "rows": rows, "errors": errors}
