# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Which workloads a MIG migration strands: they ask for ``nvidia.com/gpu`` and no node can run them afterwards.

On a MIG mixed-strategy node the resource name becomes the profile (``nvidia.com/mig-1g.10gb``),
so a workload that asks for ``nvidia.com/gpu`` and may only run on that node (a nodeSelector,
a required node affinity, a nodeName) silently never schedules again. Given the nodes as they
are and what they advertise after the change, this file lists, per container and resource,
every workload left without a node, with the reason.

Containers and their requests are found by the walker of :mod:`gpu_requests` (Pods, workload
templates, Lists), never by a second walk. A node fits a workload when it matches its
``nodeName``, ``nodeSelector`` and required node affinity, its taints are tolerated, and it
advertises at least what the Pod asks (containers summed, an init container alone).
Pure Python, no Ansible import.
"""

from __future__ import annotations

import copy

from . import gpu_requests as _requests
from ..k8s.quantity import parse_quantity
from ..errors import InputError


__all__ = [
    "MigrationError",
    "DEFAULT_PREFIXES",
    "apply_change",
    "gpu_workloads",
    "migration_report",
    "node_states",
    "report_summary",
    "selection_matches",
    "stranded_workloads",
]

DEFAULT_PREFIXES = ("nvidia.com/",)
_SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")
_DONE_PHASES = ("Succeeded", "Failed")


class MigrationError(InputError):
    """Bad input. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def _meta(obj, field, default=None):
    value = (obj.get("metadata") or {}).get(field) if isinstance(obj, dict) else None
    return default if value is None else value


# ---------------------------------------------------------------------------
# nodes


def node_states(nodes):
    """``{name: {"labels", "allocatable" (Decimal), "taints", "unschedulable"}}`` from Node objects."""
    if not isinstance(nodes, (list, tuple)):
        raise MigrationError("nodes", "must be a list of Node objects, got %s" % type(nodes).__name__, "pass the items of a Node LIST")
    states = {}
    for index, node in enumerate(nodes):
        name = _meta(node, "name")
        if not isinstance(name, str) or not name:
            raise MigrationError("nodes[%d]" % index, "is not a Node object (no metadata.name)", "pass the items of a Node LIST")
        status = node.get("status") or {}
        spec = node.get("spec") or {}
        allocatable = {}
        for resource, value in (status.get("allocatable") or {}).items():
            quantity = parse_quantity(value)
            if quantity is not None:
                allocatable[resource] = quantity
        states[name] = {
            "labels": dict(_meta(node, "labels", {})),
            "allocatable": allocatable,
            "taints": list(spec.get("taints") or []),
            "unschedulable": bool(spec.get("unschedulable")),
        }
    return states


def apply_change(states, advertised_after=None, labels_after=None, prefixes=DEFAULT_PREFIXES):
    """The nodes after the change: for each node in ``advertised_after`` its GPU resources (names under
    ``prefixes``) are replaced by the given ``{resource: count}``; ``labels_after`` merges labels (``None`` removes one).
    """
    after = copy.deepcopy(states)
    for field, value in (("advertised_after", advertised_after), ("labels_after", labels_after)):
        if value is None:
            continue
        if not isinstance(value, dict):
            raise MigrationError(field, "must be a mapping of node name to a mapping, got %s" % type(value).__name__, "write e.g. {lab-node-2: {...}}")
        for node, change in value.items():
            where = "%s[%r]" % (field, node)
            if node not in after:
                raise MigrationError(where, "no such node (nodes: %s)" % ", ".join(sorted(after)), "name an existing node")
            if not isinstance(change, dict):
                example = "{nvidia.com/mig-1g.10gb: 7}" if field == "advertised_after" else "{nvidia.com/mig.strategy: mixed}"
                raise MigrationError(where, "must be a mapping, got %s" % type(change).__name__, "write e.g. %s" % example)
    for node, resources in (advertised_after or {}).items():
        allocatable = after[node]["allocatable"]
        for resource in [name for name in allocatable if any(name.startswith(prefix) for prefix in prefixes)]:
            del allocatable[resource]
        for resource, count in resources.items():
            quantity = parse_quantity(count)
            if quantity is None or quantity < 0:
                raise MigrationError("advertised_after[%r][%r]" % (node, resource), "must be a non-negative count, got %r" % (count,), "write e.g. 7")
            allocatable[str(resource)] = quantity
    for node, labels in (labels_after or {}).items():
        for key, value in labels.items():
            if value is None:
                after[node]["labels"].pop(key, None)
            else:
                after[node]["labels"][str(key)] = str(value)
    return after


# ---------------------------------------------------------------------------
# placement rules (the subset of the scheduler's filters that decide where a GPU workload may go)


def _expression_matches(expression, value_of):
    key = expression.get("key")
    operator = expression.get("operator")
    values = [str(value) for value in expression.get("values") or []]
    present, value = value_of(key)
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        try:
            number, bound = int(value), int(values[0])
        except (TypeError, ValueError, IndexError):
            return False
        return present and (number > bound if operator == "Gt" else number < bound)
    return False


def _term_matches(term, name, labels):
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches nothing

    def label_of(key):
        return key in labels, labels.get(key)

    def field_of(key):
        return key == "metadata.name", (name if key == "metadata.name" else None)

    return all(_expression_matches(item, label_of) for item in expressions) and all(_expression_matches(item, field_of) for item in fields)


def _tolerated(taint, tolerations):
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        operator = toleration.get("operator") or "Equal"
        key = toleration.get("key")
        if operator == "Exists" and (not key or key == taint.get("key")):
            return True
        if operator == "Equal" and key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def selection_matches(pod_spec, name, state):
    """``None`` when a Pod with ``pod_spec`` may be placed on node ``name`` (``state`` from ``node_states``), else why not."""
    if pod_spec.get("nodeName") and pod_spec["nodeName"] != name:
        return "bound to %s" % pod_spec["nodeName"]
    labels = state["labels"]
    selector = pod_spec.get("nodeSelector") or {}
    misses = ["%s=%s" % (key, value) for key, value in sorted(selector.items()) if labels.get(key) != str(value)]
    if misses:
        return "nodeSelector %s does not match" % ", ".join(misses)
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms")
    if terms is not None and not any(_term_matches(term or {}, name, labels) for term in terms):
        return "required node affinity does not match"
    tolerations = pod_spec.get("tolerations") or []
    taints = list(state["taints"])
    if state["unschedulable"]:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    for taint in taints:
        if taint.get("effect") in _SCHEDULING_EFFECTS and not _tolerated(taint, tolerations):
            return "taint %s:%s not tolerated" % (taint.get("key"), taint.get("effect"))
    return None


# ---------------------------------------------------------------------------
# workloads


def _controller(obj):
    for owner in _meta(obj, "ownerReferences", []) or []:
        if isinstance(owner, dict) and owner.get("controller"):
            return owner.get("kind")
    return None


def gpu_workloads(documents, resources=_requests.DEFAULT_RESOURCES, default_namespace="", skip_controlled=True):
    """Every workload asking for one of ``resources``: ``[{namespace, kind, name, object, pod_spec, containers, requests}]``.

    ``documents`` are objects (dicts, Lists allowed). ``containers`` is ``[{container, resource, count, init}]``;
    ``requests`` the Pod's effective request per resource (regular containers summed, or the largest init
    container if larger). With ``skip_controlled``, objects whose controller is itself a workload kind (a
    Deployment's ReplicaSet and Pods) and finished Pods are left out: their owner is what gets reported.
    """
    workloads = {}
    for finding in _requests.container_requests(list(documents), tuple(resources)):
        if finding["field"] == "ephemeralContainers" or finding["count"] <= 0:
            continue  # ephemeral containers take no resources
        if finding["pod_spec"] is None:
            continue  # found outside a Pod spec (an Argo template's container, a Tekton step): no placement to read
        obj = finding["object"]
        if skip_controlled and _controller(obj) in _requests.WORKLOAD_KINDS:
            continue
        if skip_controlled and finding["kind"] == "Pod" and (obj.get("status") or {}).get("phase") in _DONE_PHASES:
            continue
        entry = workloads.get(id(obj))
        if entry is None:
            entry = workloads[id(obj)] = {
                "namespace": _meta(obj, "namespace") or default_namespace,
                "kind": finding["kind"],
                "name": finding["name"],
                "object": obj,
                "pod_spec": finding["pod_spec"],
                "containers": [],
            }
        entry["containers"].append(
            {"container": finding["container"], "resource": finding["resource"], "count": finding["count"], "init": finding["field"] == "initContainers"}
        )
    result = []
    for entry in workloads.values():
        requests = {}
        for resource in resources:
            regular = sum(item["count"] for item in entry["containers"] if item["resource"] == resource and not item["init"])
            init = max([item["count"] for item in entry["containers"] if item["resource"] == resource and item["init"]] or [0])
            if max(regular, init) > 0:
                requests[resource] = max(regular, init)
        entry["requests"] = requests
        result.append(entry)
    return sorted(result, key=lambda item: (item["namespace"], item["kind"], item["name"]))


def _fits(workload, resource, states):
    """``(fitting node names, {node: why not})`` for ``resource`` of ``workload``."""
    fits = []
    why = {}
    need = workload["requests"][resource]
    for name in sorted(states):
        state = states[name]
        reason = selection_matches(workload["pod_spec"], name, state)
        if reason is None:
            have = state["allocatable"].get(resource)
            if have is None or have <= 0:
                reason = "advertises no %s" % resource
            elif have < need:
                reason = "advertises %s %s, the Pod asks %d" % (_show(have), resource, need)
        if reason is None:
            fits.append(name)
        else:
            why[name] = reason
    return fits, why


def _show(quantity):
    return str(int(quantity)) if quantity == quantity.to_integral_value() else str(quantity)


def _gpu_view(state, prefixes):
    shown = ["%s: %s" % (name, _show(value)) for name, value in sorted(state["allocatable"].items()) if any(name.startswith(p) for p in prefixes) and value > 0]
    return ", ".join(shown) or "no GPU resource"


def stranded_workloads(workloads, before, after, resources=_requests.DEFAULT_RESOURCES, prefixes=DEFAULT_PREFIXES):
    """One row per container and resource of every workload that no node can run after the change.

    Row: ``{namespace, kind, name, container, resource, count, reason, nodes_before, stranded_by_change}``.
    """
    rows = []
    for workload in workloads:
        for resource in resources:
            if resource not in workload["requests"]:
                continue
            fits_after, why_after = _fits(workload, resource, after)
            if fits_after:
                continue
            fits_before, _why_before = _fits(workload, resource, before)
            selected = [name for name in sorted(after) if selection_matches(workload["pod_spec"], name, after[name]) is None]
            if not selected:
                reasons = sorted(set(why_after.values()))
                reason = "no node matches its placement (%s)" % "; ".join(reasons) if reasons else "there are no nodes"
            else:
                reason = "the nodes it may use advertise no room for %d %s after the change: %s" % (
                    workload["requests"][resource],
                    resource,
                    "; ".join("%s (%s)" % (name, _gpu_view(after[name], prefixes)) for name in selected),
                )
            if fits_before:
                reason += "; before the change it fits %s" % ", ".join(fits_before)
            else:
                reason += "; it has no node before the change either"
            for container in workload["containers"]:
                if container["resource"] != resource:
                    continue
                rows.append(
                    {
                        "namespace": workload["namespace"],
                        "kind": workload["kind"],
                        "name": workload["name"],
                        "container": container["container"],
                        "resource": resource,
                        "count": container["count"],
                        "reason": reason,
                        "nodes_before": fits_before,
                        "stranded_by_change": bool(fits_before),
                    }
                )
    return rows


def migration_report(
    nodes, documents, advertised_after=None, labels_after=None, resources=_requests.DEFAULT_RESOURCES, prefixes=DEFAULT_PREFIXES, default_namespace=""
):
    """Everything in one call: ``{"workloads": rows, "checked": n, "ok": bool}`` (see :func:`stranded_workloads`)."""
    if isinstance(resources, str) or not isinstance(resources, (list, tuple)) or not resources:
        raise MigrationError("resources", "must be a non-empty list of resource names, got %r" % (resources,), "use e.g. [nvidia.com/gpu]")
    if isinstance(prefixes, str) or not isinstance(prefixes, (list, tuple)) or not prefixes:
        raise MigrationError("resource_prefixes", "must be a non-empty list of domain prefixes, got %r" % (prefixes,), "use e.g. ['nvidia.com/']")
    if not isinstance(documents, (list, tuple)):
        raise MigrationError("documents", "must be a list of objects, got %s" % type(documents).__name__, "pass Kubernetes objects or loaded manifests")
    before = node_states(nodes)
    after = apply_change(before, advertised_after, labels_after, tuple(prefixes))
    workloads = gpu_workloads([doc for doc in documents if doc is not None], tuple(resources), default_namespace)
    rows = stranded_workloads(workloads, before, after, tuple(resources), tuple(prefixes))
    return {"workloads": rows, "checked": len(workloads), "ok": not rows}


def report_summary(report, resources=_requests.DEFAULT_RESOURCES):
    """A short human summary: one line overall, then one line per stranded workload."""
    rows = report["workloads"]
    names = ", ".join(resources)
    if not rows:
        return "%d workload(s) ask for %s; every one still has a node that can run it." % (report["checked"], names)
    workloads = []
    for row in rows:
        key = (row["namespace"], row["kind"], row["name"], row["resource"], row["reason"])
        if key not in workloads:
            workloads.append(key)
    lines = ["%d of %d workload(s) asking for %s would have no node left:" % (len({key[:3] for key in workloads}), report["checked"], names)]
    for namespace, kind, name, resource, reason in workloads:
        lines.append("- %s/%s %s (%s): %s" % (namespace or "(no namespace)", kind, name, resource, reason))
    return "\n".join(lines)
