# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU requests by intent: the vocabulary, what each node pool gives, and the admission objects built from it.

A Pod (or a Pod template) says what kind of GPU it needs with the annotation :data:`INTENT_ANNOTATION`, in the
isolation table's terms:

- ``whole``: a whole physical GPU, unshared (a pool whose device-plugin config has no ``sharing`` section and
  ``migStrategy: none``): full memory, full fault isolation.
- ``shared``: a time-slice (or an MPS share) of a GPU (a pool whose config replicates it): no memory or fault
  isolation between the Pods on one GPU; under ``failRequestsGreaterThanOne`` at most one per container.
- ``isolated``: a MIG instance (a pool with a MIG layout): its own memory and compute slices, faults contained;
  the smallest profile any pool offers.
- a MIG profile (``1g.10gb``, ``3g.40gb``...): that MIG instance exactly.

The same intents on DRA nodes (Dynamic Resource Allocation, NVIDIA's DRA driver's device classes): a pool
``{name, selector, dra: {class, profile?, product?}, tolerations?}`` gives ``whole`` as a claim on ``gpu.nvidia.com``,
``shared`` as a claim on ``shared.gpu.nvidia.com`` (one share of a GPU that allows several allocations), ``isolated``
and its profile as a claim on ``mig.nvidia.com`` for that profile (``profile``, else the smallest of ``product``'s).
Such an intent becomes a claim: the Pod gets ``spec.resourceClaims: [{name: gpushare-gpu, resourceClaimTemplateName:
<policy>-<intent>}]`` (one ResourceClaimTemplate per intent in each covered namespace, :func:`intent_templates`),
each wanted container ``resources.claims: [{name: gpushare-gpu}]`` (they share the claim's device), the pools'
tolerations and node affinity. A template's claim asks for one device, so a count of N becomes N claims from it
(``gpushare-gpu``, ``gpushare-gpu-1``... ``gpushare-gpu-<N-1>``; each wanted container names them all): N whole GPUs,
N MIG instances; ``shared`` gives one share (a second claim could take a second share of the same GPU, which gives
nothing more, as ``failRequestsGreaterThanOne`` says for time-slices). An intent that device-plugin pools also give
keeps the device-plugin form (a resource name in ``limits``).

:data:`COUNT_ANNOTATION` (default 1) is how many each container gets; :data:`CONTAINERS_ANNOTATION` (comma-separated
names; default every container of ``spec.containers``) which containers get them. A Pod that already names a GPU
resource (``nvidia.com/...`` in any container's limits or requests) or a resource claim is never changed.

:func:`intent_params` computes, from the pools (``{name, selector, config | mig | dra}``, the node pools' shape) and the
device-plugin configs, which resource name and which node selector terms give each intent; :func:`params_data` encodes
that as flat strings, the policies' one variable ``params``. The node affinity selects pools by their labels, so a
relabelled node changes pools at once; a changed config changes ``params`` only. :func:`intent_objects` builds the
MutatingAdmissionPolicy (rewrites the containers, adds the node affinity), the ValidatingAdmissionPolicy (refuses an
intent no pool serves or a count it cannot give, naming the pools and what they give) and their bindings, as data.

Why no params object (``paramKind``): on Kubernetes v1.36 the API server stops the informer of a built-in paramKind
(a ConfigMap) for good once no binding names it for a moment, and from then on every Pod the policy matches is refused
with "no params found" (or judged by a stale copy) until the API server restarts (kubernetes/kubernetes#130887, fix
proposed in #141015). Removing and reinstalling the policies (state absent, then present) triggers it. Pure Python,
no Ansible import.
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import device_plugin as _dp
from ansible_collections.gpushare.k8s.plugins.module_utils.dra import devices as _dra
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig as _mig
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import node_pools as _pools
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.names import DNS_SUBDOMAIN_RE
# The annotation names' one home is gpu_requests (it stands alone in bin/check-request.sh, which reads them too).
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.gpu_requests import CONTAINERS_ANNOTATION, COUNT_ANNOTATION, INTENT_ANNOTATION
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.guards import CONFIG_LABEL

__all__ = [
    "ADMISSION_API_VERSION", "CONTAINERS_ANNOTATION", "COUNT_ANNOTATION", "INTENT_ANNOTATION", "INTENTS", "IntentError",
    "dra_pools", "intent_objects", "intent_params", "intent_settings", "intent_templates", "lab_pools", "params_data", "template_plan",
]

WHOLE, SHARED, ISOLATED = "whole", "shared", "isolated"
INTENTS = (WHOLE, SHARED, ISOLATED)
GPU_PREFIX = "nvidia.com/"
ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MIG_STRATEGY_NONE = "none"
# A count a container may ask for: 1-999 (the API server's own limit on an extended resource is far higher;
# no node gives more than this).
_COUNT_RE = "^[1-9][0-9]{0,2}$"
_NAME_RE = DNS_SUBDOMAIN_RE
_PROFILE_SIZE_RE = re.compile(r"^([0-9]+)g\.([0-9]+)gb")
# The DRA form: the claim's name in the Pod, the request's name in the template, how a pool names its class.
CLAIM_NAME = "gpushare-gpu"
REQUEST_NAME = "gpu"
FORM_RESOURCE, FORM_CLAIM = "resource", "claim"
DRA_CLASSES = {_dra.CLASS_GPU: WHOLE, _dra.CLASS_SHARED: SHARED, _dra.CLASS_MIG: ISOLATED}
DRA_KEYS = ("class", "profile", "product")
DRA_POOL_KEYS = ("name", "selector", "dra", "tolerations")
TOLERATION_KEYS = ("key", "operator", "value", "effect")
TOLERATION_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
POLICY_LABEL = "gpushare.k8s/intent-policy"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpushare.k8s"
_LABEL_PART_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class IntentError(InputError):
    """A bad pool, config or setting for the intent policies. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def _config(value, name):
    if isinstance(value, (str, bytes)):
        return _dp.parse_config(value, name=name)
    return _dp.validate_config(value, name=name)


def _gives(pool, configs, path):
    """``[(intent, resource, max or None, note)]``: what one pool gives, from the config model or the MIG model."""
    if "mig" in pool:
        mig = pool["mig"]
        if "profile" not in mig and "devices" not in mig:
            raise IntentError(path + ".mig", "names a layout (%s), not a profile" % mig.get("layout"),
                              "give the pool's MIG profile ({profile: 1g.10gb}) so its resource name is known")
        gives = []
        for profile in [mig["profile"]] if "profile" in mig else list(mig["devices"]):
            resource = _mig.resource_name(profile, where=path + ".mig")
            gives += [(ISOLATED, resource, None, "MIG " + profile), (profile, resource, None, "MIG " + profile)]
        return gives
    name = pool["config"]
    config = _config(configs[name], name)
    strategy, resources, block = _dp.sharing_block(config)
    if strategy == _dp.STRATEGY_NONE:
        if config.get("flags", {}).get("migStrategy", MIG_STRATEGY_NONE) != MIG_STRATEGY_NONE:
            return []  # a MIG strategy on a config pool: what nvidia.com/gpu means there depends on the GPUs' layout
        return [(WHOLE, _dp.DEFAULT_RESOURCE, None, "unshared")]
    one = block["failRequestsGreaterThanOne"]
    gives = []
    for resource in resources:
        advertised = _dp.advertised_name(resource, block["renameByDefault"])
        note = "%s x%d%s" % (strategy, resource["replicas"], ", failRequestsGreaterThanOne" if one else "")
        gives.append((SHARED, advertised, 1 if one else None, note))
    return gives[:1]


def _tolerations(value, path):
    """A DRA pool's tolerations, checked: ``[[key, operator, value, effect], ...]`` (empty strings for what is unset)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise IntentError(path, "must be a list of tolerations, got %r" % (value,),
                          "write e.g. [{key: gpushare.k8s/gpu-manager, value: dra, effect: NoSchedule}]")
    result = []
    for index, item in enumerate(value):
        here = "%s[%d]" % (path, index)
        item = {k: v for k, v in item.items() if v is not None} if isinstance(item, dict) else item
        if not isinstance(item, dict) or not item:
            raise IntentError(here, "must be a toleration {key, operator, value, effect}, got %r" % (item,),
                              "write e.g. {key: k, value: v, effect: NoSchedule}")
        unknown = sorted(str(k) for k in item if k not in TOLERATION_KEYS)
        if unknown:
            raise IntentError(here, "unknown field%s %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)),
                              "a toleration here has key, operator, value and effect (tolerationSeconds is not supported)")
        key, val, effect = (str(item.get(k, "")) for k in ("key", "value", "effect"))
        operator = item.get("operator") or ("Equal" if val else "Exists")
        if operator not in ("Equal", "Exists"):
            raise IntentError(here + ".operator", "must be Equal or Exists, got %r" % (operator,), "use Equal (with a value) or Exists")
        if operator == "Exists" and val:
            raise IntentError(here + ".value", "is given with operator Exists", "drop the value, or use operator Equal")
        if not key and operator != "Exists":
            raise IntentError(here + ".key", "is empty with operator Equal", "give the taint's key")
        if effect not in TOLERATION_EFFECTS:
            raise IntentError(here + ".effect", "must be one of NoSchedule, PreferNoSchedule, NoExecute, got %r" % (effect,), "use the taint's effect")
        name = key.split("/")[-1]
        if " " in key or "|" in key or ";" in key or len(name) > 63 or not _LABEL_PART_RE.fullmatch(name):
            raise IntentError(here + ".key", "%r is not a taint key" % (key,), "copy the node's taint")
        if len(val) > 63 or not _LABEL_PART_RE.fullmatch(val):
            raise IntentError(here + ".value", "%r is not a taint value" % (val,), "copy the node's taint")
        entry = [key, operator, val, effect]
        if entry not in result:
            result.append(entry)
    return result


def _validate_dra_pool(pool, path):
    """A DRA pool ``{name, selector, dra: {class, profile?, product?}, tolerations?}``, checked past its name and selector."""
    unknown = sorted(str(k) for k in pool if k not in DRA_POOL_KEYS)
    if unknown:
        raise IntentError(path, "unknown field%s %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)),
                          "a DRA pool has name, selector, dra and tolerations")
    dra = {k: v for k, v in pool["dra"].items() if v is not None} if isinstance(pool["dra"], dict) else pool["dra"]
    if not isinstance(dra, dict):
        raise IntentError(path + ".dra", "must be a mapping {class, profile, product}, got %r" % (dra,), "write e.g. {class: shared.gpu.nvidia.com}")
    unknown = sorted(str(k) for k in dra if k not in DRA_KEYS)
    if unknown:
        raise IntentError(path + ".dra", "unknown field%s %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)),
                          "a pool's dra has class, and for mig.nvidia.com profile or product")
    if dra.get("class") not in DRA_CLASSES:
        raise IntentError(path + ".dra.class", "%r is not a device class this collection knows" % (dra.get("class"),),
                          "use one of %s" % ", ".join(sorted(DRA_CLASSES)))
    if dra["class"] != _dra.CLASS_MIG:
        for key in ("profile", "product"):
            if key in dra:
                raise IntentError(path + ".dra." + key, "goes with class %s only" % _dra.CLASS_MIG, "drop it from a %s pool" % dra["class"])
        return dict(dra), _tolerations(pool.get("tolerations"), path + ".tolerations")
    if "profile" in dra:
        _mig.resource_name(dra["profile"], where=path + ".dra")
        if "product" in dra and dra["profile"] not in _mig.partition_geometry(dra["product"], path + ".dra")["profiles"]:
            raise IntentError(path + ".dra.profile", "%s is not a MIG profile of %s" % (dra["profile"], dra["product"]),
                              "use one of %s" % ", ".join(_mig.partition_geometry(dra["product"])["profiles"]))
        profile = dra["profile"]
    elif "product" in dra:
        profile = next(iter(_mig.partition_geometry(dra["product"], path + ".dra")["profiles"]))  # smallest first
    else:
        raise IntentError(path + ".dra", "class %s names neither a profile nor a product" % _dra.CLASS_MIG,
                          "give the MIG profile the pool's claims ask for ({profile: 1g.10gb}), or the GPU product (its smallest profile)")
    return dict(dra, profile=profile), _tolerations(pool.get("tolerations"), path + ".tolerations")


def _dra_gives(dra):
    """``[(intent, device class, max, note, profile)]``: what a DRA pool gives, as claims for one device each (``shared``:
    one share at most, like a time-slice under ``failRequestsGreaterThanOne``; else as many as the count)."""
    intent = DRA_CLASSES[dra["class"]]
    if intent != ISOLATED:
        return [(intent, dra["class"], 1 if intent == SHARED else None, "a claim", None)]
    note = "a claim for " + dra["profile"]
    return [(ISOLATED, dra["class"], None, note, dra["profile"]), (dra["profile"], dra["class"], None, note, dra["profile"])]


def _terms(selector):
    """A label selector as one node selector term: ``[[key, operator, "v1,v2"], ...]``, an expression without values
    as ``[key, operator]`` (so that ``values: [""]``, one empty value, stays apart from no values at all)."""
    expressions = [[key, "In", value] for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        values = expression.get("values") or []
        expressions.append([expression["key"], expression["operator"]] + ([",".join(values)] if values else []))
    return expressions


def _profile_order(resource):
    match = _PROFILE_SIZE_RE.match(resource[len(_mig.RESOURCE_PREFIX):]) if resource.startswith(_mig.RESOURCE_PREFIX) else None
    return (int(match.group(1)), int(match.group(2)), resource) if match else (0, 0, resource)


def _choose(intent, by_name, order):
    """The offer (of one form) an intent's containers ask for: isolated the smallest profile, else the one most pools give."""
    if intent == ISOLATED:
        return min(by_name, key=order)
    return sorted(by_name, key=lambda name: (-len(by_name[name]), name))[0]


def intent_params(pools, configs, field="intent_admission_pools"):
    """What each intent becomes on this cluster: ``{"intents": {intent: {form, resource, max, pools, terms, ...}}, "pools": [...]}``.

    ``pools`` are node pools (``{name, selector, config}``, ``{name, selector, mig: {profile}}`` or the DRA kind
    ``{name, selector, dra: {class, profile?, product?}, tolerations?}``), ``configs`` the named device-plugin configs.
    An intent is served by the pools that give it; when they give it under different resource names, the name most
    pools give wins (``isolated``: the smallest MIG profile), since a container asks for one name. When device-plugin
    pools give it, its form is ``resource`` and DRA pools are left out of it; else, when DRA pools give it, ``claim``
    (``resource`` is then the device class, ``profile`` the MIG profile or ``None``, ``tolerations`` the pools').
    ``max`` is the most one container may ask for (``None``: no limit of the model's; a shared claim: 1), ``terms`` one node
    selector term per pool (the pool's selector). ``pools`` lists every pool and what it gives, for messages.
    """
    if isinstance(pools, list):
        # node_pools checks names, selectors and the device-plugin kinds; a DRA pool stands in as a MIG one there
        stand_ins = [{k: v for k, v in pool.items() if k in ("name", "selector")} if isinstance(pool, dict) and "dra" in pool else pool
                     for pool in pools]
        stand_ins = [dict(p, mig={"profile": "dra"}) if isinstance(pool, dict) and "dra" in pool else p for p, pool in zip(stand_ins, pools)]
    else:
        stand_ins = pools
    try:
        _pools.validate_pools(stand_ins, configs if isinstance(configs, dict) else {}, field=field)
    except _pools.PoolError as exc:
        raise IntentError(exc.path, exc.problem, exc.fix) from None
    if not pools:
        raise IntentError(field, "no pools given", "give the pools the policy places Pods on, e.g. lab_pools(gpushare_nodes)")
    offers, listed, tolerations = {}, [], {}
    for index, pool in enumerate(pools):
        path = "%s[%d] (%s)" % (field, index, pool["name"])
        if not pool["selector"].get("matchLabels") and not pool["selector"].get("matchExpressions"):
            raise IntentError(path + ".selector", "is empty: it would place every Pod on every node",
                              "select the pool's nodes by a label, e.g. {matchLabels: {pool: %s}}" % pool["name"])
        if "dra" in pool:
            dra, tolerations[pool["name"]] = _validate_dra_pool(pool, path)
            gives = [(FORM_CLAIM,) + give for give in _dra_gives(dra)]
        else:
            gives = [(FORM_RESOURCE,) + give + (None,) for give in _gives(pool, configs, path)]
        listed.append({"name": pool["name"], "gives": [{"intent": i, "form": f, "resource": r, "max": m, "note": n, "profile": p}
                                                       for f, i, r, m, n, p in gives]})
        for form, intent, resource, most, _note, profile in gives:
            offers.setdefault(intent, {}).setdefault(form, {}).setdefault((resource, profile), []).append((pool, most))
    intents = {}
    for intent in sorted(offers):
        form = FORM_RESOURCE if FORM_RESOURCE in offers[intent] else FORM_CLAIM
        by_name = offers[intent][form]
        if form == FORM_RESOURCE:
            resource, profile = _choose(intent, by_name, lambda key: _profile_order(key[0]))
        else:
            resource, profile = _choose(intent, by_name, lambda key: _profile_order(_mig.RESOURCE_PREFIX + (key[1] or "")))
        chosen = by_name[(resource, profile)]
        limits = [most for _pool, most in chosen if most is not None]
        entry = {"form": form, "resource": resource, "max": min(limits) if limits else None,
                 "pools": [pool["name"] for pool, _most in chosen], "terms": [_terms(pool["selector"]) for pool, _most in chosen]}
        if form == FORM_CLAIM:
            entry["profile"] = profile
            entry["tolerations"] = []
            for pool, _most in chosen:
                entry["tolerations"] += [t for t in tolerations[pool["name"]] if t not in entry["tolerations"]]
        intents[intent] = entry
    return {"intents": intents, "pools": listed}


def _offer(give):
    if give["form"] == FORM_CLAIM:
        return "a %s claim%s" % (give["resource"], " for " + give["profile"] if give["profile"] else "")
    return give["resource"]


def _summary(params):
    parts = []
    for pool in params["pools"]:
        gives = ", ".join("%s as %s%s" % (g["intent"], _offer(g), " (at most %d per container)" % g["max"] if g["max"] else "")
                          for g in pool["gives"]) or "no intent (a MIG strategy on a config pool)"
        parts.append("%s gives %s" % (pool["name"], gives))
    return "pools: " + "; ".join(parts)


def _key(intent):
    """The ConfigMap key prefix of an intent (keys allow ``[-._a-zA-Z0-9]``; a ``+me`` profile's ``+`` becomes ``_``)."""
    return "intent." + intent.replace("+", "_")


def template_name(name, intent):
    """The ResourceClaimTemplate of an intent served by a claim: ``<policy name>-<intent>``, ``.`` and ``+`` as ``-``."""
    return "%s-%s" % (name, intent.lower().replace(".", "-").replace("+", "-"))


def params_data(params, name=None):
    """The policies' ``params``: per intent ``<key>.form`` (``resource``: a name in the containers' limits; ``claim``:
    a resource claim), ``<key>.resource`` (the resource name, or a claim's device class), ``<key>.max`` ("" for none)
    and ``<key>.terms`` (terms joined by ``|``, a term's expressions by ``;``, an expression ``key operator v1,v2``, or
    ``key operator`` without values: none of these characters can occur in a label key or value; one empty value is
    ``key operator `` with its trailing space); for a claim also ``<key>.template`` (the
    ResourceClaimTemplate's name, from the policy's ``name``) and ``<key>.tolerations`` (joined by ``|``, each
    ``key operator value effect`` with empty parts left empty); plus ``summary`` (the pools and what they give) and
    ``intents``."""
    name = name or INTENT_DEFAULTS["name"]
    data = {"intents": ",".join(sorted(params["intents"])), "summary": _summary(params)}
    for intent, entry in params["intents"].items():
        data[_key(intent) + ".form"] = entry.get("form", FORM_RESOURCE)
        data[_key(intent) + ".resource"] = entry["resource"]
        data[_key(intent) + ".max"] = "" if entry["max"] is None else str(entry["max"])
        data[_key(intent) + ".terms"] = "|".join(";".join(" ".join(e) for e in term) for term in entry["terms"])
        if entry.get("form") == FORM_CLAIM:
            data[_key(intent) + ".template"] = template_name(name, intent)
            data[_key(intent) + ".tolerations"] = "|".join(" ".join(t) for t in entry["tolerations"])
    return data


def dra_pools(nodes, default_product=None, node_labels=None, taints=None):
    """The DRA inventory (``gpushare_dra_nodes``, the DRA nodes' labels and taints) as DRA pools: one per sharing kind
    (whole GPUs, shared GPUs, MIG), selected by the nodes' labels and their hostnames, tolerating their taints; a MIG
    pool per product, asking for its smallest profile."""
    normal = _dra.normalize_nodes(nodes, default_product, where="gpushare_dra_nodes")
    labels = node_labels or {}
    if not isinstance(labels, dict):
        raise IntentError("gpushare_dra_node_labels", "must be a mapping of labels, got %r" % (labels,), "write e.g. {gpushare.k8s/gpu-manager: dra}")
    tolerations = [{"key": t.get("key"), "operator": "Equal" if t.get("value") else "Exists", "value": t.get("value"), "effect": t.get("effect")}
                   for t in (taints or []) if isinstance(t, dict)]
    tolerations = [{k: v for k, v in t.items() if v} for t in tolerations]
    _tolerations(tolerations, "gpushare_dra_node_taints")
    groups = {}
    for node in normal:
        kind = node["sharing"]
        groups.setdefault((kind, node["product"] if kind == "mig" else None), []).append(node["name"])
    pools = []
    for (kind, product), names in sorted(groups.items(), key=lambda item: (("whole", "shared", "mig").index(item[0][0]), item[0][1] or "")):
        pool_name = "dra-" + kind
        if kind == "mig" and len([k for k in groups if k[0] == "mig"]) > 1:
            pool_name += "-" + re.sub(r"[^a-z0-9]+", "-", product.lower()).strip("-")
        selector = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": sorted(names)}]}
        if labels:
            selector["matchLabels"] = {str(k): str(v) for k, v in sorted(labels.items())}
        dra = {"class": {"whole": _dra.CLASS_GPU, "shared": _dra.CLASS_SHARED, "mig": _dra.CLASS_MIG}[kind]}
        if kind == "mig":
            dra["profile"] = next(iter(_mig.partition_geometry(product)["profiles"]))
        pool = {"name": pool_name[:63].rstrip("-"), "selector": selector, "dra": dra}
        if tolerations:
            pool["tolerations"] = [dict(t) for t in tolerations]
        pools.append(pool)
    return pools


def lab_pools(nodes, config_label=CONFIG_LABEL):
    """The lab inventory's nodes (``gpushare_nodes``) as pools: one per config (selected by ``config_label``), one per
    MIG profile or set of profiles (selected by the nodes' hostnames: the lab's MIG nodes carry no config label)."""
    if not isinstance(nodes, (list, tuple)):
        raise IntentError("nodes", "must be the list of inventory nodes", "give gpushare_nodes")
    configs, migs = {}, {}
    for node in nodes:
        if not isinstance(node, dict) or not node.get("name"):
            raise IntentError("nodes", "each node needs a name, got %r" % (node,), "give gpushare_nodes")
        if node.get("mig"):
            mig = node["mig"]
            devices = mig.get("devices") if isinstance(mig.get("devices"), dict) and mig.get("devices") else None
            key = tuple(sorted(str(profile) for profile in devices)) if devices else mig.get("profile")
            migs.setdefault(key, ({"devices": dict(devices)} if devices else {"profile": key}, []))[1].append(str(node["name"]))
        elif node.get("config"):
            configs.setdefault(str(node["config"]), []).append(str(node["name"]))
    pools = [{"name": name.lower().replace("_", "-").replace(".", "-"), "selector": {"matchLabels": {config_label: name}}, "config": name}
             for name in sorted(configs)]
    for key in sorted(migs, key=str):
        mig, names = migs[key]
        name = "-".join(key) if isinstance(key, tuple) else str(key)
        pools.append({"name": "mig-" + name.replace(".", "-").replace("+", "-"),
                      "selector": {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": sorted(names)}]},
                      "mig": mig})
    return pools


# --- The admission objects ------------------------------------------------------------------------------------------

INTENT_DEFAULTS = {
    "name": "gpushare-gpu-intent",
    "namespace_selector": {},
    "namespaces": [],
    "failure_policy": "Fail",
}


def intent_settings(settings, prefix="intent_admission_"):
    """The settings with defaults filled in, each checked; ``IntentError`` names the variable and the fix."""
    s = dict(INTENT_DEFAULTS)
    s.update({key: value for key, value in (settings or {}).items() if value is not None and key in INTENT_DEFAULTS})
    for key in ("name",):
        if not isinstance(s[key], str) or len(s[key]) > 253 or not _NAME_RE.fullmatch(s[key]):
            raise IntentError(prefix + key, "%r is not a DNS-1123 subdomain" % (s[key],), "use lower-case letters, digits, '-' and '.'")
    if s["failure_policy"] not in ("Fail", "Ignore"):
        raise IntentError(prefix + "failure_policy", "must be Fail or Ignore, got %r" % (s["failure_policy"],), "use Fail")
    if not isinstance(s["namespaces"], list) or not all(isinstance(n, str) and _NAME_RE.fullmatch(n) for n in s["namespaces"]):
        raise IntentError(prefix + "namespaces", "must be a list of namespace names, got %r" % (s["namespaces"],), "write e.g. [team-a]")
    if not isinstance(s["namespace_selector"], dict):
        raise IntentError(prefix + "namespace_selector", "must be a label selector", "write e.g. {matchLabels: {gpu: 'yes'}}")
    if s["namespace_selector"]:
        try:
            _pools.validate_selector(s["namespace_selector"], prefix + "namespace_selector")
        except _pools.PoolError as exc:
            raise IntentError(exc.path, exc.problem, exc.fix) from None
    if s["namespaces"] and s["namespace_selector"]:
        raise IntentError(prefix + "namespaces", "is given with a namespace_selector", "give one of them")
    if not s["namespaces"] and not s["namespace_selector"]:
        raise IntentError(prefix + "namespaces", "neither namespaces nor a namespace_selector is given",
                          "name the namespaces the policies cover, or select them by label ({matchExpressions: [...]} covers many)")
    return s


_ANN = 'has(object.metadata.annotations) && "%s" in object.metadata.annotations'
_INTENT = '(%s ? object.metadata.annotations["%s"] : "")' % (_ANN % INTENT_ANNOTATION, INTENT_ANNOTATION)
_COUNT = '(%s ? object.metadata.annotations["%s"] : "1")' % (_ANN % COUNT_ANNOTATION, COUNT_ANNOTATION)
_KEY = '"intent." + %s.replace("+", "_")' % _INTENT
_NAMES_GPU = ("object.spec.containers.exists(c, has(c.resources) && ("
              "(has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith(\"%s\"))) || "
              "(has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith(\"%s\"))))) || "
              "(has(object.spec.initContainers) && object.spec.initContainers.exists(c, has(c.resources) && ("
              "(has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith(\"%s\"))) || "
              "(has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith(\"%s\")))))) || "
              "(has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0)") % ((GPU_PREFIX,) * 4)


def _literal(text):
    """``text`` as a CEL string literal (double-quoted, backslash escapes: JSON's form is valid CEL)."""
    return json.dumps(str(text))


_REQ = "Object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
_BUILT_TERMS = (
    'variables.terms.map(t, %(r)s.nodeSelectorTerms{'
    'matchExpressions: t[0].map(e, %(r)s.nodeSelectorTerms.matchExpressions{'
    'key: e[0], operator: e[1], values: e[2] == "" ? [] : e[2].substring(1).split(",").map(v, v)}), '
    'matchFields: t[1].map(e, %(r)s.nodeSelectorTerms.matchFields{'
    'key: e[0], operator: e[1], values: e[2] == "" ? [] : e[2].substring(1).split(",").map(v, v)})})') % {"r": _REQ}


def _match_constraints():
    return {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}


def _binding(kind, s, extra):
    spec = {"policyName": s["name"]}
    spec.update(extra)
    if s["namespaces"]:
        selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(s["namespaces"])}]}
    else:
        selector = s["namespace_selector"]
    spec["matchResources"] = {"namespaceSelector": selector}
    return {"apiVersion": ADMISSION_API_VERSION, "kind": kind, "metadata": {"name": s["name"]}, "spec": spec}


def _claimed(params, s, prefix="intent_admission_"):
    """The intents served by a claim; refused when the bindings select namespaces by label (the templates are
    namespaced: the role must know every namespace to write them) or the name cannot be a label value."""
    claimed = sorted(intent for intent, entry in params["intents"].items() if entry.get("form") == FORM_CLAIM)
    if claimed and not s["namespaces"]:
        raise IntentError(prefix + "namespaces", "is empty, and DRA pools (%s) give %s as a claim from a ResourceClaimTemplate, "
                          "which must exist in each namespace a Pod asks from" % (
                              ", ".join(sorted(set(p for i in claimed for p in params["intents"][i]["pools"]))), ", ".join(claimed)),
                          "name the namespaces (intent_admission_namespaces) instead of selecting them by label, "
                          "or install the DRA pools in a role instance of their own that names its namespaces")
    if claimed and len(s["name"]) > 63:
        raise IntentError(prefix + "name", "%r is longer than 63 characters, the most a label value holds: the role finds "
                          "its ResourceClaimTemplates by a label with its name" % s["name"], "use a shorter name")
    return claimed


def intent_templates(params, settings=None):
    """One ResourceClaimTemplate per intent served by a claim, in each namespace of the settings, as data: a request
    ``gpu`` for exactly one device of the intent's class (a MIG profile's: selected by the ``profile`` attribute),
    labelled with the policy's name (label :data:`POLICY_LABEL`) so that the role finds the ones it wrote."""
    s = intent_settings(settings)
    templates = []
    for intent in _claimed(params, s):
        entry = params["intents"][intent]
        name = template_name(s["name"], intent)
        if len(name) > 253:
            raise IntentError("intent_admission_name", "makes the template name %s longer than 253 characters" % name, "use a shorter name")
        exactly = {"deviceClassName": entry["resource"], "allocationMode": "ExactCount", "count": 1}
        if entry.get("profile"):
            exactly["selectors"] = [{"cel": {"expression": "device.attributes['%s'].profile == '%s'" % (_dra.DRIVER, entry["profile"])}}]
        for namespace in sorted(s["namespaces"]):
            templates.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY, POLICY_LABEL: s["name"]},
                             "annotations": {INTENT_ANNOTATION: intent}},
                "spec": {"spec": {"devices": {"requests": [{"name": REQUEST_NAME, "exactly": exactly}]}}},
            })
    return templates


def template_plan(existing, desired):
    """What the role does to the ResourceClaimTemplates: ``{create, keep, replace, delete}``.

    ``existing`` are the templates the cluster holds with this policy's label, ``desired`` those of
    :func:`intent_templates`. A template's spec is immutable: one whose claim spec differs is replaced (deleted, then
    created); one no intent needs any more (a namespace or an intent gone) is deleted; the others are applied as they are.
    """
    def ident(obj):
        meta = obj.get("metadata") or {}
        return (meta.get("namespace"), meta.get("name"))

    def claim_spec(obj):
        return json.dumps(((obj.get("spec") or {}).get("spec") or {}).get("devices"), sort_keys=True)

    held = {ident(obj): obj for obj in existing or []}
    plan = {"create": [], "keep": [], "replace": [], "delete": []}
    for obj in desired:
        current = held.get(ident(obj))
        plan["create" if current is None else "keep" if claim_spec(current) == claim_spec(obj) else "replace"].append(obj)
    wanted = set(ident(obj) for obj in desired)
    plan["delete"] = [{"apiVersion": obj.get("apiVersion", "resource.k8s.io/v1"), "kind": "ResourceClaimTemplate",
                       "metadata": {"name": ident(obj)[1], "namespace": ident(obj)[0]}}
                      for key, obj in sorted(held.items(), key=lambda item: (item[0][0] or "", item[0][1] or "")) if key not in wanted]
    return plan


def intent_objects(params, settings=None):
    """``[MutatingAdmissionPolicy, its binding, ValidatingAdmissionPolicy, its binding]`` as data."""
    s = intent_settings(settings)
    _claimed(params, s)
    data = params_data(params, s["name"])
    variables = [
        # what each intent becomes on this cluster (params_data), the one part that changes with the configs
        {"name": "params", "expression": "{%s}" % ", ".join("%s: %s" % (_literal(key), _literal(data[key])) for key in sorted(data))},
        {"name": "intent", "expression": _INTENT},
        {"name": "key", "expression": _KEY},
        {"name": "count", "expression": _COUNT},
        {"name": "resource", "expression": 'variables.params[variables.key + ".resource"]'},
        {"name": "wanted", "expression": ('%s ? object.metadata.annotations["%s"].split(",").map(n, n.trim()) : '
                                          'object.spec.containers.map(c, c.name)') % (_ANN % CONTAINERS_ANNOTATION, CONTAINERS_ANNOTATION)},
        # the pools' terms: [[key, operator, values], ...] per pool, values "" for none, else "=v1,v2" ("=" alone: one
        # empty value, which a NotIn or In may name and the API server requires to stay)
        {"name": "ours", "expression": ('variables.params[variables.key + ".terms"].split("|").map(t, t.split(";").map(x, x.split(" ")))'
                                        '.map(t, t.map(x, [x[0], x[1], size(x) > 2 ? "=" + x[2] : ""]))')},
        # the Pod's own required terms, each [expressions, fields], values as in ours; none: one empty term
        {"name": "existing", "expression": (
            "has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && "
            "has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? "
            "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.map(x, ["
            'has(x.matchExpressions) ? x.matchExpressions.map(e, [string(e.key), string(e.operator), %(values)s]) : [], '
            'has(x.matchFields) ? x.matchFields.map(e, [string(e.key), string(e.operator), %(values)s]) : []]) '
            ": [[[], []]]") % {"values": 'has(e.values) && size(e.values) > 0 ? "=" + e.values.join(",") : ""'}},
        # every term of the Pod AND every pool's term: the Pod keeps its own placement and gains the pools'
        {"name": "terms", "expression": "variables.existing.map(x, variables.ours.map(t, [x[0] + t, x[1]])).flatten()"},
        # resource: a name in the containers' limits; claim: a claim from the intent's ResourceClaimTemplate
        {"name": "form", "expression": '(variables.key + ".form") in variables.params ? variables.params[variables.key + ".form"] : "%s"' % FORM_RESOURCE},
        # a claim's tolerations: [key, operator, value, effect] per toleration
        {"name": "tolerations", "expression": (
            '(variables.key + ".tolerations") in variables.params && variables.params[variables.key + ".tolerations"] != "" ? '
            'variables.params[variables.key + ".tolerations"].split("|").map(t, t.split(" ")) : []')},
        # a claim's names in the Pod, one per device counted: gpushare-gpu, gpushare-gpu-1, ... (used once the count is valid)
        {"name": "claims", "expression": 'lists.range(int(variables.count)).map(i, i == 0 ? "%(n)s" : "%(n)s-" + string(i))' % {"n": CLAIM_NAME}},
    ]
    # an intent this cluster gives, with a count it can give (else the ValidatingAdmissionPolicy refuses the Pod)
    gives = ('(variables.key + ".resource") in variables.params && variables.count.matches("%s") && '
             '(variables.params[variables.key + ".max"] == "" || int(variables.count) <= int(variables.params[variables.key + ".max"]))') % _COUNT_RE
    mutating = {
        "apiVersion": ADMISSION_API_VERSION, "kind": "MutatingAdmissionPolicy", "metadata": {"name": s["name"]},
        "spec": {
            "matchConstraints": _match_constraints(),
            "failurePolicy": s["failure_policy"],
            "reinvocationPolicy": "Never",
            # only Pods that ask by an intent and name no GPU themselves
            "matchConditions": [
                {"name": "asks-by-intent", "expression": _ANN % INTENT_ANNOTATION},
                {"name": "names-no-gpu", "expression": "!(%s)" % _NAMES_GPU},
            ],
            "variables": variables,
            "mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": (
                    "!(" + gives + ") ? Object{} : "
                    # a claim: the Pod's claim from the intent's template, each wanted container naming it
                    'variables.form == "%(claim)s" ? Object{spec: Object.spec{'
                    'resourceClaims: variables.claims.map(n, Object.spec.resourceClaims{name: n, '
                    'resourceClaimTemplateName: variables.params[variables.key + ".template"]}), '
                    "containers: object.spec.containers.filter(c, c.name in variables.wanted).map(c, "
                    'Object.spec.containers{name: c.name, resources: Object.spec.containers.resources{'
                    'claims: variables.claims.map(n, Object.spec.containers.resources.claims{name: n})}})}} : '
                    "Object{spec: Object.spec{containers: object.spec.containers.filter(c, c.name in variables.wanted).map(c, "
                    "Object.spec.containers{name: c.name, resources: Object.spec.containers.resources{"
                    "limits: {variables.resource: variables.count}}})}}") % {"claim": FORM_CLAIM}}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression": "!(" + gives + ") ? [] : " + (
                    '!has(object.spec.affinity) ? [JSONPatch{op: "add", path: "/spec/affinity", value: Object.spec.affinity{'
                    "nodeAffinity: Object.spec.affinity.nodeAffinity{requiredDuringSchedulingIgnoredDuringExecution: %(r)s{nodeSelectorTerms: %(t)s}}}}] "
                    ': !has(object.spec.affinity.nodeAffinity) ? [JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity", '
                    "value: Object.spec.affinity.nodeAffinity{requiredDuringSchedulingIgnoredDuringExecution: %(r)s{nodeSelectorTerms: %(t)s}}}] "
                    ': [JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", '
                    "value: %(r)s{nodeSelectorTerms: %(t)s}}]") % {"r": _REQ, "t": _BUILT_TERMS}}},
                # a claim's pools are tainted: add their tolerations the Pod does not have (a Pod's tolerations are one
                # atomic list to an apply configuration, so a JSON patch appends them)
                {"patchType": "JSONPatch", "jsonPatch": {"expression": (
                    "!(" + gives + ') || variables.form != "%(claim)s" ? [] : '
                    "!has(object.spec.tolerations) ? (size(variables.tolerations) == 0 ? [] : "
                    '[JSONPatch{op: "add", path: "/spec/tolerations", value: variables.tolerations.map(t, %(tol)s)}]) : '
                    "variables.tolerations.filter(t, !object.spec.tolerations.exists(x, "
                    '(has(x.key) ? x.key : "") == t[0] && (has(x.operator) ? x.operator : "Equal") == t[1] && '
                    '(has(x.value) ? x.value : "") == t[2] && (has(x.effect) ? x.effect : "") == t[3]))'
                    '.map(t, JSONPatch{op: "add", path: "/spec/tolerations/-", value: %(tol)s})') % {
                        "claim": FORM_CLAIM, "tol": "Object.spec.tolerations{key: t[0], operator: t[1], value: t[2], effect: t[3]}"}}},
            ],
        },
    }
    validating = {
        "apiVersion": ADMISSION_API_VERSION, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": s["name"]},
        "spec": {
            "matchConstraints": _match_constraints(),
            "failurePolicy": s["failure_policy"],
            "matchConditions": [{"name": "asks-by-intent", "expression": _ANN % INTENT_ANNOTATION}],
            "variables": variables[:4],
            "validations": [
                {"expression": '(variables.key + ".resource") in variables.params', "reason": "Forbidden",
                 "messageExpression": ('"GPU intent \'" + variables.intent + "\' (annotation %s) is given by no pool of this cluster; " '
                                       '+ variables.params["summary"] + ". Fix: ask for one of " + variables.params["intents"]') % INTENT_ANNOTATION},
                {"expression": 'variables.count.matches("%s")' % _COUNT_RE, "reason": "Invalid",
                 "messageExpression": ('"annotation %s must be a whole number from 1 to 999, got \'" + variables.count + "\'"') % COUNT_ANNOTATION},
                {"expression": ('!((variables.key + ".resource") in variables.params) || !variables.count.matches("%s") || '
                                'variables.params[variables.key + ".max"] == "" || '
                                'int(variables.count) <= int(variables.params[variables.key + ".max"])') % _COUNT_RE,
                 "reason": "Forbidden",
                 "messageExpression": ('"GPU intent \'" + variables.intent + "\' gives at most " + variables.params[variables.key + ".max"] '
                                       '+ " per container (" + variables.params[variables.key + ".resource"] + "), asked for " + variables.count + "; " '
                                       '+ variables.params["summary"] + ". Fix: ask for at most that many, or for an intent that gives more"')},
                # The two policies load asynchronously: right after a change, or with the mutating binding missing, a Pod
                # could pass here unrewritten and run without a GPU. Refuse it instead.
                {"expression": '!((variables.key + ".resource") in variables.params) || (%s)' % _NAMES_GPU, "reason": "Forbidden",
                 "messageExpression": ('"GPU intent \'" + variables.intent + "\' was not rewritten by MutatingAdmissionPolicy %s '
                                       '(its binding does not cover this namespace, or the API server is still loading a change). '
                                       'Fix: retry in a few seconds; if it persists, re-run role gpushare.k8s.intent_admission"') % s["name"]},
            ],
        },
    }
    return [mutating, _binding("MutatingAdmissionPolicyBinding", s, {}),
            validating, _binding("ValidatingAdmissionPolicyBinding", s, {"validationActions": ["Deny"]})]
