# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Does a team's GPU quota cover every GPU resource name the cluster advertises?

Only ``requests.<extended-resource>`` quota keys count extended resources, and each name
(``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, each ``nvidia.com/mig-*``) is counted on its own:
a namespace whose quota limits ``requests.nvidia.com/gpu`` but not ``requests.nvidia.com/mig-1g.10gb``
can run as many MIG Pods as the nodes hold. This file computes, per namespace with a GPU quota,
the advertised names its quotas leave uncovered (a bypass), plus keys that look like GPU quota but
never limit anything (``limits.<gpu>``, a bare ``<gpu>`` key). It also resolves the names a quota
should cover (``auto``: every name the inventory advertises). Pure Python, no Ansible import.
"""

from __future__ import annotations

import re

try:
    from .quantity import parse_quantity
    from .errors import InputError, is_int
    from .gpu_names import DNS_SUBDOMAIN_RE, GPU_RESOURCE, LABEL_NAME_RE
except ImportError:  # loaded as a plain module, next to node_status.py
    from quantity import parse_quantity  # type: ignore[no-redef]
    from errors import InputError, is_int  # type: ignore[no-redef]
    from gpu_names import DNS_SUBDOMAIN_RE, GPU_RESOURCE, LABEL_NAME_RE  # type: ignore[no-redef]


__all__ = [
    "AUTO",
    "CoverageError",
    "DEFAULT_PREFIXES",
    "advertised_by_nodes",
    "coverage_message",
    "inventory_names",
    "quota_coverage",
    "resolve_quota_resources",
]

AUTO = "auto"
DEFAULT_PREFIXES = ("nvidia.com/",)
GPU = GPU_RESOURCE
REQUESTS = "requests."
LIMITS = "limits."

_NAME_RE = re.compile(r"(%s)/(%s)" % (DNS_SUBDOMAIN_RE.pattern, LABEL_NAME_RE.pattern))  # an extended resource name


class CoverageError(InputError):
    """Bad input. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def _check_prefixes(prefixes):
    if isinstance(prefixes, str):
        prefixes = [prefixes]
    if not isinstance(prefixes, (list, tuple)) or not prefixes or not all(isinstance(item, str) and item.endswith("/") for item in prefixes):
        raise CoverageError("resource_prefixes", "must be a non-empty list of domain prefixes ending in '/', got %r" % (prefixes,), "use e.g. ['nvidia.com/']")
    return tuple(prefixes)


def _is_gpu(name, prefixes):
    return any(name.startswith(prefix) for prefix in prefixes)


def _meta(obj, field):
    return (obj.get("metadata") or {}).get(field) if isinstance(obj, dict) else None


def advertised_by_nodes(nodes, prefixes=DEFAULT_PREFIXES):
    """``{resource: [node names]}`` for every GPU resource some node has a positive allocatable of."""
    prefixes = _check_prefixes(prefixes)
    if not isinstance(nodes, (list, tuple)):
        raise CoverageError("nodes", "must be a list of Node objects, got %s" % type(nodes).__name__, "pass the items of a Node LIST")
    advertised = {}
    for index, node in enumerate(nodes):
        name = _meta(node, "name")
        if not isinstance(name, str) or not name:
            raise CoverageError("nodes[%d]" % index, "is not a Node object (no metadata.name)", "pass the items of a Node LIST")
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for resource, value in allocatable.items():
            quantity = parse_quantity(value)
            if _is_gpu(resource, prefixes) and quantity is not None and quantity > 0:
                advertised.setdefault(resource, []).append(name)
    return {resource: sorted(names) for resource, names in sorted(advertised.items())}


def inventory_names(inventory):
    """Every resource name an inventory (``gpu_inventory``: ``{node: {resource: count}}``) advertises, ``nvidia.com/gpu`` first."""
    if not isinstance(inventory, dict):
        raise CoverageError("inventory", "must be a mapping of node name to {resource: count}", "pass the result of the gpu_inventory filter")
    names = set()
    for node, resources in inventory.items():
        if not isinstance(resources, dict):
            raise CoverageError("inventory[%r]" % (node,), "must be a mapping of resource name to count", "pass the result of the gpu_inventory filter")
        for resource, count in resources.items():
            if not is_int(count):
                raise CoverageError(
                    "inventory[%r][%r]" % (node, resource), "must be an integer count, got %r" % (count,), "pass the result of the gpu_inventory filter"
                )
            if count > 0:
                names.add(str(resource))
    return sorted(names, key=lambda name: (name != GPU, name))


def resolve_quota_resources(resources, inventory=None):
    """The resource names a quota limits: ``auto`` (every name ``inventory`` advertises) or an explicit list, checked."""
    if resources == AUTO:
        names = inventory_names(inventory if inventory is not None else {})
        if not names:
            raise CoverageError(
                "resources", "auto found no advertised GPU resource (the inventory is empty)", "give the inventory nodes and configs, or list the names"
            )
        return names
    if isinstance(resources, str) or not isinstance(resources, (list, tuple)) or not resources:
        raise CoverageError("resources", "must be 'auto' or a non-empty list of resource names, got %r" % (resources,), "use auto or e.g. [nvidia.com/gpu]")
    result = []
    for index, name in enumerate(resources):
        where = "resources[%d]" % index
        if not isinstance(name, str):
            raise CoverageError(where, "must be a resource name, got %r" % (name,), "write e.g. nvidia.com/gpu")
        for prefix in (REQUESTS, LIMITS):
            if name.startswith(prefix):
                raise CoverageError(
                    where,
                    "%r is a quota key, not a resource name" % name,
                    "write %s (the role adds the requests. prefix; limits. keys never count extended resources)" % name[len(prefix):],
                )
        if not _NAME_RE.fullmatch(name) or len(name.split("/", 1)[1]) > 63:
            raise CoverageError(where, "%r is not an extended resource name" % name, "write <domain>/<name>, e.g. nvidia.com/mig-1g.10gb")
        if name not in result:
            result.append(name)
    return result


def _quota_gpu_keys(hard, prefixes, advertised):
    """Split a quota's ``spec.hard`` keys into (covered names, ineffective keys) for GPU resources."""
    covered = set()
    ineffective = []
    for key in hard:
        if key.startswith(REQUESTS):
            name = key[len(REQUESTS):]
            if _is_gpu(name, prefixes) or name in advertised:
                covered.add(name)
        elif key.startswith(LIMITS):
            name = key[len(LIMITS):]
            if _is_gpu(name, prefixes) or name in advertised:
                ineffective.append(key)
        elif _is_gpu(key, prefixes) or key in advertised:
            ineffective.append(key)
    return covered, ineffective


def _scoped(quota):
    spec = quota.get("spec") or {}
    return bool(spec.get("scopes") or (spec.get("scopeSelector") or {}).get("matchExpressions"))


def quota_coverage(quotas, advertised, namespaces=None, prefixes=DEFAULT_PREFIXES):
    """Per namespace with a GPU quota (or named in ``namespaces``), the advertised names its quotas leave uncovered.

    ``quotas`` are ResourceQuota objects; ``advertised`` is ``{resource: [nodes]}`` (``advertised_by_nodes``).
    A name counts as covered only by a ``requests.<name>`` key of a quota without scopes: a scoped quota
    (``scopes``/``scopeSelector``) counts only the Pods in its scope, so the others bypass it
    (a Pod with GPU limits only is BestEffort). Returns ``{"ok", "advertised", "namespaces", "bypasses"}``.
    """
    prefixes = _check_prefixes(prefixes)
    if not isinstance(advertised, dict):
        raise CoverageError("advertised", "must be a mapping of resource name to node names", "pass the result of advertised_by_nodes")
    if not isinstance(quotas, (list, tuple)):
        raise CoverageError("quotas", "must be a list of ResourceQuota objects, got %s" % type(quotas).__name__, "pass the items of a ResourceQuota LIST")
    if namespaces is not None and (isinstance(namespaces, str) or not isinstance(namespaces, (list, tuple))):
        raise CoverageError("namespaces", "must be a list of namespace names, got %r" % (namespaces,), "use e.g. [team-a]")
    wanted = set(namespaces or [])
    per_namespace = {}
    for index, quota in enumerate(quotas):
        namespace, name = _meta(quota, "namespace"), _meta(quota, "name")
        if not isinstance(namespace, str) or not isinstance(name, str):
            raise CoverageError(
                "quotas[%d]" % index, "is not a ResourceQuota object (no metadata.namespace or metadata.name)", "pass the items of a ResourceQuota LIST"
            )
        if wanted and namespace not in wanted:
            continue
        hard = (quota.get("spec") or {}).get("hard") or {}
        covered, ineffective = _quota_gpu_keys(hard, prefixes, advertised)
        if not covered and not ineffective and namespace not in wanted:
            continue
        entry = per_namespace.setdefault(namespace, {"covered": set(), "ineffective_keys": [], "quotas": [], "scoped_quotas": []})
        if not covered and not ineffective:
            continue
        entry["quotas"].append(name)
        entry["ineffective_keys"].extend("%s: %s" % (name, key) for key in sorted(ineffective))
        if _scoped(quota):
            entry["scoped_quotas"].append(name)
        else:
            entry["covered"] |= covered
    for namespace in wanted:
        per_namespace.setdefault(namespace, {"covered": set(), "ineffective_keys": [], "quotas": [], "scoped_quotas": []})
    entries = []
    bypasses = []
    for namespace in sorted(per_namespace):
        entry = per_namespace[namespace]
        uncovered = [{"resource": resource, "nodes": list(advertised[resource])} for resource in sorted(advertised) if resource not in entry["covered"]]
        for item in uncovered:
            bypasses.append({"namespace": namespace, "resource": item["resource"], "nodes": item["nodes"]})
        entries.append(
            {
                "namespace": namespace,
                "quotas": sorted(entry["quotas"]),
                "covered": sorted(entry["covered"]),
                "uncovered": uncovered,
                "ineffective_keys": sorted(entry["ineffective_keys"]),
                "scoped_quotas": sorted(entry["scoped_quotas"]),
            }
        )
    return {
        "ok": not bypasses,
        "advertised": {resource: list(nodes) for resource, nodes in sorted(advertised.items())},
        "namespaces": entries,
        "bypasses": bypasses,
    }


def coverage_message(report):
    """A short readable summary of a ``quota_coverage`` report (one line per namespace)."""
    advertised = report["advertised"]
    if not report["namespaces"]:
        return "No namespace has a GPU quota (advertised: %s)." % (", ".join(advertised) or "nothing")
    lines = []
    for entry in report["namespaces"]:
        head = "%s (quota %s)" % (entry["namespace"], ", ".join(entry["quotas"])) if entry["quotas"] else "%s (no GPU quota)" % entry["namespace"]
        if entry["uncovered"]:
            gaps = "; ".join("%s (on %s)" % (item["resource"], ", ".join(item["nodes"])) for item in entry["uncovered"])
            line = "%s: BYPASS - Pods asking for %s are not counted; add requests.<name> for each" % (head, gaps)
        else:
            line = "%s: covers every advertised GPU resource (%s)" % (head, ", ".join(advertised) or "none advertised")
        if entry["scoped_quotas"]:
            line += "; scoped quotas %s count only Pods in their scope" % ", ".join(entry["scoped_quotas"])
        if entry["ineffective_keys"]:
            line += "; keys that never limit extended resources: %s" % ", ".join(entry["ineffective_keys"])
        lines.append(line)
    return "\n".join(lines)
