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

A passing check is kept for the next run (:func:`verdict`): its key is a digest of what decides where the Pods land
(the Pods as built, every Node's name, uid, labels, taints, schedulability and allocatable resources, the namespace's
uid and labels, the intent policies' and bindings' uid and generation). While the key is the same, the Pods would get
the same resources and the same pools: a re-run reuses the verdict and creates no Pod. What the key leaves out: the
Pods already running (they decide only whether a pool has room, which the check accepts either way), other admission
policies and webhooks, the scheduler's own configuration, and GPU feature discovery's timestamp label (rewritten on
every pass, selected by nothing).
"""

from __future__ import annotations

import hashlib
import json
import re

from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory as _inv
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.gpu_requests import INTENT_ANNOTATION

__all__ = ["INTENT_ANNOTATION", "VERDICT_VERSION", "intent_pods", "placement_report", "verdict", "verdict_key"]

# The stored verdict's format; a file of another version is not read (the check runs again).
VERDICT_VERSION = 1
# Labels that change without a change of where a Pod may land: GFD stamps every relabelling pass.
_VOLATILE_LABELS = frozenset(["nvidia.com/gfd.timestamp"])
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
_ROW_MAX = 2000

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


def _meta(obj):
    return (obj.get("metadata") or {}) if isinstance(obj, dict) else {}


def _node_facts(node):
    meta, spec, status = _meta(node), node.get("spec") or {}, node.get("status") or {}
    labels = {key: value for key, value in (meta.get("labels") or {}).items() if key not in _VOLATILE_LABELS}
    return {"name": meta.get("name"), "uid": meta.get("uid"), "labels": labels, "taints": spec.get("taints") or [],
            "unschedulable": bool(spec.get("unschedulable")), "allocatable": status.get("allocatable") or {}}


def verdict_key(pods, nodes, namespace, policies):
    """The digest of what decides where the intent Pods land (hex sha256).

    ``pods``: the intent Pods as built; ``nodes``: every Node as read; ``namespace``: the Pods' Namespace as read (or
    None); ``policies``: the intent policies and bindings as read, each an object or None when absent.
    """
    facts = {
        "pods": pods,
        "nodes": sorted((_node_facts(node) for node in nodes or [] if isinstance(node, dict)), key=lambda facts: str(facts["name"])),
        "namespace": None if not namespace else {"uid": _meta(namespace).get("uid"), "labels": _meta(namespace).get("labels") or {}},
        "policies": [None if not policy else {"kind": policy.get("kind"), "name": _meta(policy).get("name"), "uid": _meta(policy).get("uid"),
                                              "generation": _meta(policy).get("generation")} for policy in policies or []],
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")).hexdigest()


def _stored_rows(text, key, count):
    """The rows of a stored verdict for ``key``, or ``(None, why not)``. The file is read back: checked as input."""
    if not text:
        return None, "no earlier verdict is stored"
    try:
        stored = json.loads(text)
    except ValueError as exc:
        return None, "the stored verdict is not JSON (%s)" % exc
    if not isinstance(stored, dict) or set(stored) != {"version", "key", "rows"}:
        return None, "the stored verdict is not one this collection writes (keys version, key, rows)"
    if stored["version"] != VERDICT_VERSION:
        return None, "the stored verdict has version %r, this collection writes %d" % (stored["version"], VERDICT_VERSION)
    if not isinstance(stored["key"], str) or not _KEY_RE.match(stored["key"]):
        return None, "the stored verdict's key is not a sha256 digest"
    rows = stored["rows"]
    if not isinstance(rows, list) or len(rows) != count or not all(isinstance(row, str) and 0 < len(row) <= _ROW_MAX for row in rows):
        return None, "the stored verdict's rows are not %d lines of text" % count
    if stored["key"] != key:
        return None, "the nodes, the namespace, the intent policies or the intents changed since the stored verdict"
    return rows, None


def verdict(pods, reads, stored="", report=None):
    """Whether the last passing intent check still holds, and the record to keep.

    ``pods``: the intent Pods as :func:`intent_pods` builds them. ``reads``: the resources read, in order: every Node,
    the Pods' Namespace (0 or 1), then each intent policy and binding (0 or 1 each). ``stored``: the text of the stored
    verdict ('' when none). ``report``: a fresh :func:`placement_report` that passed, to build the record from.
    Returns ``{key, reuse, reason, report, record}``: ``reuse`` is true when ``stored`` is a verdict for the same key;
    ``report`` is then the stored rows (no errors); ``record`` is the JSON text to store for ``report`` (None without).
    """
    if not isinstance(pods, (list, tuple)) or not all(isinstance(pod, dict) for pod in pods):
        raise ValueError("intent verdict: expected the intent Pods (intent_pods); got %r" % (pods,))
    if not isinstance(reads, (list, tuple)) or len(reads) < 2 or not all(isinstance(found, (list, tuple)) for found in reads):
        raise ValueError("intent verdict: expected the resources read, [nodes, namespace, policy, ...]; got %r" % (reads,))
    singles = [found[0] if found else None for found in reads[1:]]
    key = verdict_key(pods, reads[0], singles[0], singles[1:])
    if report is not None:
        if report.get("errors") or not report.get("done"):
            raise ValueError("intent verdict: only a finished check that passed is kept; got %r" % (report,))
        record = json.dumps({"version": VERDICT_VERSION, "key": key, "rows": list(report["rows"])}, indent=1, sort_keys=True) + "\n"
        return {"key": key, "reuse": False, "reason": "checked now", "report": report, "record": record}
    rows, why = _stored_rows(stored, key, len(pods))
    if rows is None:
        return {"key": key, "reuse": False, "reason": why, "report": None, "record": None}
    return {"key": key, "reuse": True, "reason": "nothing that decides where the intent Pods land changed since the stored verdict",
            "report": {"done": True, "rows": rows, "errors": []}, "record": None}
