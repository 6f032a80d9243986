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
should cover (``auto``: every name the inventory advertises).

The team's coverage quota: :func:`reachable_names` computes every GPU resource a team's Pod can be given on the
inventory (what its nodes advertise, what each device-plugin config makes a node advertise, what each GPU intent is
rewritten to), and :func:`team_coverage` the second ResourceQuota of the collection's (:data:`COVERAGE_QUOTA`) that
limits each of them the team's own quota does not name, beside it, so a lab's quota object stays as written. Pure
Python, no Ansible import.
"""

from __future__ import annotations

import re

from ..k8s.quantity import parse_quantity
from ..nvidia import device_plugin as _dp
from ..dra import devices as _dra
from ..errors import InputError, is_int
from ..names import DNS_SUBDOMAIN_RE, GPU_RESOURCE, LABEL_NAME_RE


__all__ = [
    "AUTO",
    "COVERAGE_QUOTA",
    "CoverageError",
    "DEFAULT_PREFIXES",
    "advertised_by_nodes",
    "coverage_message",
    "inventory_names",
    "quota_coverage",
    "reachable_classes",
    "reachable_names",
    "resolve_quota_resources",
    "team_coverage",
]

AUTO = "auto"
DEFAULT_PREFIXES = ("nvidia.com/",)
GPU = GPU_RESOURCE
REQUESTS = "requests."
LIMITS = "limits."
# The collection's second quota in a team's namespace: every GPU resource the team's own quota does not name.
COVERAGE_QUOTA = "gpushare-gpu-coverage"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpushare.k8s"
COVERS_ANNOTATION = "gpushare.k8s/covers"
# What a ResourceQuota counts of a device class: the devices a namespace's ResourceClaims ask for through it.
DEVICE_CLASS_KEY = "%s.deviceclass.resource.k8s.io/devices"
# The role's variables each part of the coverage comes from, for the messages (the lab's preflight passes its own).
COVERAGE_FIELDS = {
    "name": "team_quota_coverage_name",
    "limits": "team_quota_coverage_limits",
    "uncovered": "team_quota_coverage_uncovered",
    "units": "team_quota_gpus",
    "resources": "team_quota_resources",
    "allow_shrink": "team_quota_allow_shrink",
}

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


def quota_coverage(quotas, advertised, namespaces=None, prefixes=DEFAULT_PREFIXES, uncovered=None):
    """Per namespace with a GPU quota (or named in ``namespaces``), the advertised names its quotas leave uncovered.

    ``quotas`` are ResourceQuota objects; ``advertised`` is ``{resource: [nodes]}`` (``advertised_by_nodes``).
    A name counts as covered only by a ``requests.<name>`` key of a quota without scopes: a scoped quota
    (``scopes``/``scopeSelector``) counts only the Pods in its scope, so the others bypass it
    (a Pod with GPU limits only is BestEffort). A name of ``uncovered`` is left uncovered on purpose: listed as
    ``intended``, not a bypass. Returns ``{"ok", "advertised", "namespaces", "bypasses"}``.
    """
    prefixes = _check_prefixes(prefixes)
    if uncovered is None:
        uncovered = []
    if isinstance(uncovered, str) or not isinstance(uncovered, (list, tuple)):
        raise CoverageError("uncovered", "must be a list of resource names, got %r" % (uncovered,), "use e.g. [nvidia.com/mig-1g.10gb]")
    intended = set(_resource(name, "uncovered[%d]" % index) for index, name in enumerate(uncovered))
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
        gaps = [{"resource": resource, "nodes": list(advertised[resource])} for resource in sorted(advertised) if resource not in entry["covered"]]
        bypassed = [item for item in gaps if item["resource"] not in intended]
        for item in bypassed:
            bypasses.append({"namespace": namespace, "resource": item["resource"], "nodes": item["nodes"]})
        entries.append(
            {
                "namespace": namespace,
                "quotas": sorted(entry["quotas"]),
                "covered": sorted(entry["covered"]),
                "uncovered": bypassed,
                "intended": [item for item in gaps if item["resource"] in intended],
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
        elif entry.get("intended"):
            line = "%s: covers every advertised GPU resource but those left uncovered on purpose" % head
        else:
            line = "%s: covers every advertised GPU resource (%s)" % (head, ", ".join(advertised) or "none advertised")
        if entry.get("intended"):
            line += "; left uncovered on purpose: %s" % "; ".join(
                "%s (on %s)" % (item["resource"], ", ".join(item["nodes"]) or "no node") for item in entry["intended"])
        if entry["scoped_quotas"]:
            line += "; scoped quotas %s count only Pods in their scope" % ", ".join(entry["scoped_quotas"])
        if entry["ineffective_keys"]:
            line += "; keys that never limit extended resources: %s" % ", ".join(entry["ineffective_keys"])
        lines.append(line)
    return "\n".join(lines)


# --- The team's coverage quota -------------------------------------------------------------------------------------


def _config(value, name):
    if isinstance(value, (str, bytes)):
        return _dp.parse_config(value, name=name)
    return _dp.validate_config(value, name=name)


def _config_names(config):
    """The GPU resource names a node labelled with ``config`` advertises (the config model's names): a replicated
    resource under its advertised name (``<name>.shared`` with ``renameByDefault``), whole GPUs unless replicated."""
    strategy, resources, block = _dp.sharing_block(config)
    if strategy == _dp.STRATEGY_NONE:
        return [GPU]
    names = [_dp.advertised_name(resource, block["renameByDefault"]) for resource in resources]
    if GPU not in [resource["name"] for resource in resources]:
        names.append(GPU)
    return names


def reachable_names(inventory, configs=None, intents=None):
    """Every GPU resource a Pod can be given on this inventory: ``{resource: {"nodes", "configs", "intents"}}``, the
    inventory's nodes advertising it, the device-plugin configs that make a node advertise it, the GPU intents that a
    Pod is rewritten to ask for it; ``nvidia.com/gpu`` first.

    ``inventory`` is ``gpu_inventory``'s ``{node: {resource: count}}`` (every MIG layout's ``nvidia.com/mig-*`` is
    there), ``configs`` the named device-plugin configs (every one: a node relabelled to any of them advertises its
    names, a ``.shared`` rename included), ``intents`` the intent policies' params (``intent_check_params``; intents
    served by a resource claim name a device class, not a resource, and are left out).
    """
    reachable = {}

    def add(resource, kind, source):
        entry = reachable.setdefault(str(resource), {"nodes": [], "configs": [], "intents": []})
        if source not in entry[kind]:
            entry[kind].append(source)

    names = set(inventory_names(inventory if inventory is not None else {}))
    for node in sorted(inventory or {}, key=str):
        for resource, count in sorted(inventory[node].items()):
            if count > 0 and resource in names:
                add(resource, "nodes", str(node))
    if configs is not None and not isinstance(configs, dict):
        raise CoverageError("configs", "must be a mapping of config name to device-plugin config, got %r" % (configs,),
                            "pass the named device-plugin configs (gpushare_device_plugin_configs)")
    for name in sorted(configs or {}, key=str):
        for resource in _config_names(_config(configs[name], str(name))):
            add(resource, "configs", str(name))
    if intents is not None and not isinstance(intents, dict):
        raise CoverageError("intents", "must be the intent policies' params (a mapping), got %r" % (intents,),
                            "pass the result of the intent_check_params filter")
    served = [intent for intent in str((intents or {}).get("intents") or "").split(",") if intent]
    for intent in served:
        key = "intent." + intent.replace("+", "_")
        resource = intents.get(key + ".resource")
        if intents.get(key + ".form", "resource") == "resource" and isinstance(resource, str) and resource:
            add(resource, "intents", intent)
    return {name: reachable[name] for name in sorted(reachable, key=lambda name: (name != GPU, name))}


def _sources(entry):
    """``node lab-node-2, intents 1g.10gb and isolated``: where a reachable name comes from."""
    parts = []
    for kind, one in (("nodes", "node"), ("configs", "config"), ("intents", "intent"), ("classes", "device class")):
        values = sorted((entry or {}).get(kind) or [])
        if values:
            many = kind if kind != "classes" else "device classes"
            parts.append("%s %s" % (one if len(values) == 1 else many, " and ".join(values) if len(values) < 3 else ", ".join(values)))
    return ", ".join(parts) or "named in the limits"


def _units(value, where, fix):
    if isinstance(value, str) and value.isdigit() and value.isascii():
        value = int(value)
    if not is_int(value) or value < 0:
        raise CoverageError(where, "%r is not a whole number of 0 or more" % (value,), fix)
    return value


def _resource(name, where):
    """A resource name as a coverage setting names it (not a quota key), checked; the error names ``where``."""
    try:
        return resolve_quota_resources([name])[0]
    except CoverageError as exc:
        raise CoverageError(where, exc.problem, exc.fix) from None


def _named(name, where, classes):
    """``(quota key, name)`` of a name a coverage setting gives: a device class (a DNS subdomain without ``/``) when
    ``classes`` are in play, else an extended resource name."""
    if classes is not None and isinstance(name, str) and "/" not in name and len(name) <= 253 and DNS_SUBDOMAIN_RE.fullmatch(name):
        return DEVICE_CLASS_KEY % name, name
    resource = _resource(name, where)
    return REQUESTS + resource, resource


def _label(key):
    """A quota key as a message names it: the resource name, or ``devices of class <class>``."""
    if key.startswith(REQUESTS):
        return key[len(REQUESTS):]
    suffix = DEVICE_CLASS_KEY % ""
    return "devices of class " + key[:-len(suffix)] if key.endswith(suffix) else key


def reachable_classes(nodes, bridge_resource=None):
    """The DRA track's share of what a team can be given: ``(classes, bridged)``. ``classes`` is ``{device class:
    {"nodes": [...]}}`` for every class the DRA nodes' devices fall in (``nodes`` as :func:`dra.normalize_nodes` gives
    them: whole GPUs in ``gpu.nvidia.com``, shared ones in ``shared.gpu.nvidia.com``, MIG devices in ``mig.nvidia.com``);
    ``bridged`` is :func:`reachable_names`' shape for the extended resource the whole-GPU class serves
    (``extendedResourceName``, ``bridge_resource``), ``{}`` without one."""
    by_kind = {"whole": _dra.CLASS_GPU, "shared": _dra.CLASS_SHARED, "mig": _dra.CLASS_MIG}
    classes = {}
    if not isinstance(nodes, (list, tuple)):
        raise CoverageError("dra_nodes", "must be a list of DRA nodes, got %r" % (nodes,), "pass the result of the dra_nodes filter")
    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or not node.get("name") or node.get("sharing") not in by_kind:
            raise CoverageError("dra_nodes[%d]" % index, "is not a normalised DRA node ({name, sharing: whole|shared|mig}), got %r" % (node,),
                                "pass the result of the dra_nodes filter")
        entry = classes.setdefault(by_kind[node["sharing"]], {"nodes": []})
        if node["name"] not in entry["nodes"]:
            entry["nodes"].append(node["name"])
    bridged = {}
    if bridge_resource and _dra.CLASS_GPU in classes:
        bridged[_resource(bridge_resource, "extended_resource")] = {"nodes": sorted(classes[_dra.CLASS_GPU]["nodes"]), "configs": [],
                                                                    "intents": [], "classes": [_dra.CLASS_GPU]}
    return {name: {"nodes": sorted(classes[name]["nodes"])} for name in sorted(classes)}, bridged


def team_coverage(reachable, team_resources, units, namespace, team_quota, name=COVERAGE_QUOTA, limits=None, uncovered=None,
                  existing=None, fields=None, classes=None, team_classes=None):
    """The team's coverage quota: a ResourceQuota ``name`` beside the team's own quota ``team_quota`` (which limits
    ``team_resources``), limiting ``requests.<name>`` of every other name of ``reachable`` (:func:`reachable_names`).

    On the DRA track, ``classes`` (:func:`reachable_classes`) are the device classes a team's claims can be allocated
    from, each limited as ``<class>.deviceclass.resource.k8s.io/devices`` unless the team's quota names it
    (``team_classes``); ``limits`` and ``uncovered`` may then name device classes too.

    Each name gets ``limits[name]`` units, else ``units`` (the team's own quota's units: the same share of every name,
    as ``auto`` gives); ``0`` refuses every Pod asking for it. A name of ``limits`` the inventory does not reach is
    limited too (a name the cluster may advertise later). A name of ``uncovered`` is left out on purpose: reported as
    ``intended``, never limited. ``existing`` is the live object of that name (``None``/``{}`` when absent): one without
    this collection's label :data:`MANAGED_BY_LABEL` is refused (never clobbered); keys it holds that are no longer
    wanted are removed (``None``, a strategic merge patch's deletion). ``fields`` names the settings in messages
    (:data:`COVERAGE_FIELDS`).

    Returns ``{"object", "hard", "covers", "intended", "msg"}``: the ResourceQuota to apply (``None`` when nothing is to
    be limited and none exists), its limits, ``[{resource, units, sources}]``, ``[{resource, sources}]`` and a summary.
    """
    fields = dict(COVERAGE_FIELDS, **(fields or {}))
    if not isinstance(reachable, dict):
        raise CoverageError("reachable", "must be a mapping of resource name to where it comes from", "pass the result of reachable_names")
    if classes is not None and not isinstance(classes, dict):
        raise CoverageError("classes", "must be a mapping of device class to where it comes from", "pass the result of reachable_classes")
    if not isinstance(name, str) or len(name) > 253 or not DNS_SUBDOMAIN_RE.fullmatch(name):
        raise CoverageError(fields["name"], "%r is not a DNS-1123 subdomain (a ResourceQuota's name)" % (name,), "use e.g. %s" % COVERAGE_QUOTA)
    if name == team_quota:
        raise CoverageError(fields["name"], "%r is the team's own quota (%s): the coverage quota would overwrite it" % (name, team_quota),
                            "give the coverage quota a name of its own, e.g. %s" % COVERAGE_QUOTA)
    units = _units(units, fields["units"], "give the GPU units the team may request, e.g. 2")
    # every name by its quota key: what the team's quota limits, what can be reached (with where it comes from)
    team = set(REQUESTS + resource for resource in (resolve_quota_resources(team_resources) if team_resources else []))
    team |= set(DEVICE_CLASS_KEY % item for item in (team_classes or []))
    reach = {REQUESTS + resource: (resource, entry) for resource, entry in reachable.items()}
    reach.update({DEVICE_CLASS_KEY % item: (item, entry) for item, entry in (classes or {}).items()})
    if limits is None:
        limits = {}
    if not isinstance(limits, dict):
        raise CoverageError(fields["limits"], "must be a mapping of resource name to units, got %r" % (limits,), "write e.g. {nvidia.com/mig-1g.10gb: 1}")
    checked = {}
    for given in sorted(limits, key=str):
        where = "%s[%r]" % (fields["limits"], given)
        key, shown = _named(given, where, classes)
        if key in team:
            raise CoverageError(where, "%s is limited by quota %s already (%s units)" % (shown, team_quota, fields["units"]),
                                "remove it from %s, or from %s to limit it here" % (fields["limits"], fields["resources"]))
        checked[key] = (shown, _units(limits[given], where, "give the units of %s the team may request, e.g. 1 (0: none)" % shown))
    if uncovered is None:
        uncovered = []
    if isinstance(uncovered, str) or not isinstance(uncovered, (list, tuple)):
        raise CoverageError(fields["uncovered"], "must be a list of resource names, got %r" % (uncovered,), "write e.g. [nvidia.com/mig-1g.10gb]")
    intended = {}
    for index, given in enumerate(uncovered):
        where = "%s[%d]" % (fields["uncovered"], index)
        key, shown = _named(given, where, classes)
        if key in team:
            raise CoverageError(where, "%s is limited by quota %s, so it cannot be left uncovered" % (shown, team_quota),
                                "remove it from %s, or from %s" % (fields["uncovered"], fields["resources"]))
        if key in checked:
            raise CoverageError(where, "%s is also given a limit in %s" % (shown, fields["limits"]), "keep it in one of the two")
        intended.setdefault(key, shown)
    wanted = {key: (shown, units) for key, (shown, _entry) in reach.items() if key not in team and key not in intended}
    wanted.update(checked)
    hard = {key: str(wanted[key][1]) for key in sorted(wanted)}
    current = {}
    if existing:
        meta = existing.get("metadata") or {}
        if (meta.get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY:
            raise CoverageError(
                fields["name"],
                "ResourceQuota %s/%s exists and is not this collection's (no label %s=%s): it is left as it is"
                % (namespace, name, MANAGED_BY_LABEL, MANAGED_BY),
                "give the coverage quota another name in %s, or delete that ResourceQuota if nothing needs it" % fields["name"])
        current = (existing.get("spec") or {}).get("hard") or {}
    shown_names = sorted(wanted[key][0] for key in wanted)
    quota = None
    if hard or current:
        covers = ", ".join(shown_names) or "nothing (quota %s limits every GPU resource the team can reach)" % team_quota
        spec_hard = dict(hard)
        spec_hard.update({key: None for key in sorted(current) if key not in hard})
        quota = {"apiVersion": "v1", "kind": "ResourceQuota",
                 "metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY},
                              "annotations": {COVERS_ANNOTATION: "the GPU resources quota %s does not limit: %s" % (team_quota, covers)}},
                 "spec": {"hard": spec_hard}}

    def described(key):
        shown, entry = reach.get(key, (None, None))
        return _sources(entry)

    covers = [{"resource": wanted[key][0], "units": wanted[key][1], "sources": described(key)} for key in sorted(wanted, key=lambda k: wanted[k][0])]
    left = [{"resource": shown, "sources": described(key)} for key, shown in intended.items()]
    lines = ["Quota %s limits %s." % (team_quota, ", ".join(sorted(_label(key) for key in team)) or "no GPU resource")]
    if covers:
        lines.append("Quota %s limits every other GPU resource the team can reach: %s." % (
            name, "; ".join("%s to %d (%s)" % (_label(key), wanted[key][1], described(key)) for key in sorted(wanted, key=lambda k: wanted[k][0]))))
    if left:
        lines.append("Left uncovered as %s says: %s." % (fields["uncovered"], "; ".join("%s (%s)" % (item["resource"], item["sources"]) for item in left)))
    return {"object": quota, "hard": hard, "covers": covers, "intended": left, "msg": " ".join(lines)}
