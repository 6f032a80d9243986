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

:data:`COUNT_ANNOTATION` (default 1) is how many each container gets; :data:`CONTAINERS_ANNOTATION` (comma-separated
names; default every container of ``spec.containers``) which containers get them. A Pod that already names a GPU
resource (``nvidia.com/...`` in any container's limits or requests) or a resource claim is never changed.

:func:`intent_params` computes, from the pools (``{name, selector, config | mig}``, the node pools' shape) and the
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

from ansible_collections.gpushare.k8s.plugins.module_utils import device_plugin as _dp
from ansible_collections.gpushare.k8s.plugins.module_utils import mig as _mig
from ansible_collections.gpushare.k8s.plugins.module_utils import node_pools as _pools
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.guards import CONFIG_LABEL

__all__ = [
    "ADMISSION_API_VERSION", "CONTAINERS_ANNOTATION", "COUNT_ANNOTATION", "INTENT_ANNOTATION", "INTENTS", "IntentError",
    "intent_objects", "intent_params", "intent_settings", "lab_pools", "params_data",
]

# One home for the annotation names a Pod (or a Pod template) asks by.
INTENT_ANNOTATION = "gpushare.k8s/gpu"
COUNT_ANNOTATION = "gpushare.k8s/gpu-count"
CONTAINERS_ANNOTATION = "gpushare.k8s/gpu-containers"
WHOLE, SHARED, ISOLATED = "whole", "shared", "isolated"
INTENTS = (WHOLE, SHARED, ISOLATED)
GPU_PREFIX = "nvidia.com/"
ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MIG_STRATEGY_NONE = "none"
# A count a container may ask for: 1-999 (the API server's own limit on an extended resource is far higher;
# no node gives more than this).
_COUNT_RE = "^[1-9][0-9]{0,2}$"
_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_PROFILE_SIZE_RE = re.compile(r"^([0-9]+)g\.([0-9]+)gb")


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
        if "profile" not in mig:
            raise IntentError(path + ".mig", "names a layout (%s), not a profile" % mig.get("layout"),
                              "give the pool's MIG profile ({profile: 1g.10gb}) so its resource name is known")
        resource = _mig.resource_name(mig["profile"], where=path + ".mig")
        return [(ISOLATED, resource, None, "MIG " + mig["profile"]), (mig["profile"], resource, None, "MIG " + mig["profile"])]
    name = pool["config"]
    config = _config(configs[name], name)
    strategy, resources = _dp.sharing_of(config)
    if strategy == _dp.STRATEGY_NONE:
        if config.get("flags", {}).get("migStrategy", MIG_STRATEGY_NONE) != MIG_STRATEGY_NONE:
            return []  # a MIG strategy on a config pool: what nvidia.com/gpu means there depends on the GPUs' layout
        return [(WHOLE, _dp.DEFAULT_RESOURCE, None, "unshared")]
    key = "timeSlicing" if strategy == _dp.STRATEGY_TIME_SLICING else "mps"
    block = config["sharing"][key]
    one = bool(block.get("failRequestsGreaterThanOne", False))
    gives = []
    for resource in resources:
        advertised = _dp.advertised_name(resource, block.get("renameByDefault", False))
        note = "%s x%d%s" % (strategy, resource["replicas"], ", failRequestsGreaterThanOne" if one else "")
        gives.append((SHARED, advertised, 1 if one else None, note))
    return gives[:1]


def _terms(selector):
    """A label selector as one node selector term: ``[[key, operator, "v1,v2"], ...]``."""
    expressions = [[key, "In", value] for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        expressions.append([expression["key"], expression["operator"], ",".join(expression.get("values") or [])])
    return expressions


def _profile_order(resource):
    match = _PROFILE_SIZE_RE.match(resource[len(_mig.RESOURCE_PREFIX):]) if resource.startswith(_mig.RESOURCE_PREFIX) else None
    return (int(match.group(1)), int(match.group(2)), resource) if match else (0, 0, resource)


def intent_params(pools, configs, field="intent_admission_pools"):
    """What each intent becomes on this cluster: ``{"intents": {intent: {resource, max, pools, terms}}, "pools": [...]}``.

    ``pools`` are node pools (``{name, selector, config}`` or ``{name, selector, mig: {profile}}``), ``configs`` the
    named device-plugin configs. An intent is served by the pools that give it; when they give it under different
    resource names, the name most pools give wins (``isolated``: the smallest MIG profile), since a container asks
    for one name. ``max`` is the most one container may ask for (``None``: no limit of the model's), ``terms`` one
    node selector term per pool (the pool's selector). ``pools`` lists every pool and what it gives, for messages.
    """
    try:
        _pools.validate_pools(pools, configs if isinstance(configs, dict) else {}, field=field)
    except _pools.PoolError as exc:
        raise IntentError(exc.path, exc.problem, exc.fix) from None
    if not pools:
        raise IntentError(field, "no pools given", "give the pools the policy places Pods on, e.g. lab_pools(gpushare_nodes)")
    offers, listed = {}, []
    for index, pool in enumerate(pools):
        path = "%s[%d] (%s)" % (field, index, pool["name"])
        if not pool["selector"].get("matchLabels") and not pool["selector"].get("matchExpressions"):
            raise IntentError(path + ".selector", "is empty: it would place every Pod on every node",
                              "select the pool's nodes by a label, e.g. {matchLabels: {pool: %s}}" % pool["name"])
        gives = _gives(pool, configs, path)
        listed.append({"name": pool["name"], "gives": [{"intent": i, "resource": r, "max": m, "note": n} for i, r, m, n in gives]})
        for intent, resource, most, _note in gives:
            offers.setdefault(intent, {}).setdefault(resource, []).append((pool, most))
    intents = {}
    for intent in sorted(offers):
        by_name = offers[intent]
        if intent == ISOLATED:
            resource = min(by_name, key=_profile_order)
        else:
            resource = sorted(by_name, key=lambda name: (-len(by_name[name]), name))[0]
        chosen = by_name[resource]
        limits = [most for _pool, most in chosen if most is not None]
        intents[intent] = {"resource": resource, "max": min(limits) if limits else None,
                           "pools": [pool["name"] for pool, _most in chosen],
                           "terms": [_terms(pool["selector"]) for pool, _most in chosen]}
    return {"intents": intents, "pools": listed}


def _summary(params):
    parts = []
    for pool in params["pools"]:
        gives = ", ".join("%s as %s%s" % (g["intent"], g["resource"], " (at most %d per container)" % g["max"] if g["max"] else "")
                          for g in pool["gives"]) or "no intent (a MIG strategy on a config pool)"
        parts.append("%s gives %s" % (pool["name"], gives))
    return "pools: " + "; ".join(parts)


def _key(intent):
    """The ConfigMap key prefix of an intent (keys allow ``[-._a-zA-Z0-9]``; a ``+me`` profile's ``+`` becomes ``_``)."""
    return "intent." + intent.replace("+", "_")


def params_data(params):
    """The params ConfigMap's data: per intent ``<key>.resource``, ``<key>.max`` ("" for none) and ``<key>.terms``
    (terms joined by ``|``, a term's expressions by ``;``, an expression ``key operator v1,v2``: none of these
    characters can occur in a label key or value), plus ``summary`` (the pools and what they give) and ``intents``."""
    data = {"intents": ",".join(sorted(params["intents"])), "summary": _summary(params)}
    for intent, entry in params["intents"].items():
        data[_key(intent) + ".resource"] = entry["resource"]
        data[_key(intent) + ".max"] = "" if entry["max"] is None else str(entry["max"])
        data[_key(intent) + ".terms"] = "|".join(";".join(" ".join(part for part in e if part) for e in term) for term in entry["terms"])
    return data


def lab_pools(nodes, config_label=CONFIG_LABEL):
    """The lab inventory's nodes (``gpushare_nodes``) as pools: one per config (selected by ``config_label``), one per
    MIG profile (selected by the nodes' hostnames: the lab's MIG nodes carry no config label)."""
    if not isinstance(nodes, (list, tuple)):
        raise IntentError("nodes", "must be the list of inventory nodes", "give gpushare_nodes")
    configs, migs = {}, {}
    for node in nodes:
        if not isinstance(node, dict) or not node.get("name"):
            raise IntentError("nodes", "each node needs a name, got %r" % (node,), "give gpushare_nodes")
        if node.get("mig"):
            migs.setdefault(node["mig"].get("profile"), []).append(str(node["name"]))
        elif node.get("config"):
            configs.setdefault(str(node["config"]), []).append(str(node["name"]))
    pools = [{"name": name.lower().replace("_", "-").replace(".", "-"), "selector": {"matchLabels": {config_label: name}}, "config": name}
             for name in sorted(configs)]
    for profile in sorted(migs, key=str):
        pools.append({"name": "mig-" + str(profile).replace(".", "-").replace("+", "-"),
                      "selector": {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": sorted(migs[profile])}]},
                      "mig": {"profile": profile}})
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
    'key: e[0], operator: e[1], values: e[2] == "" ? [] : e[2].split(",").map(v, v)}), '
    'matchFields: t[1].map(e, %(r)s.nodeSelectorTerms.matchFields{'
    'key: e[0], operator: e[1], values: e[2] == "" ? [] : e[2].split(",").map(v, v)})})') % {"r": _REQ}


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


def intent_objects(params, settings=None):
    """``[MutatingAdmissionPolicy, its binding, ValidatingAdmissionPolicy, its binding]`` as data."""
    s = intent_settings(settings)
    data = params_data(params)
    variables = [
        # what each intent becomes on this cluster (params_data), the one part that changes with the configs
        {"name": "params", "expression": "{%s}" % ", ".join("%s: %s" % (_literal(key), _literal(data[key])) for key in sorted(data))},
        {"name": "intent", "expression": _INTENT},
        {"name": "key", "expression": _KEY},
        {"name": "count", "expression": _COUNT},
        {"name": "resource", "expression": 'variables.params[variables.key + ".resource"]'},
        {"name": "wanted", "expression": ('%s ? object.metadata.annotations["%s"].split(",").map(n, n.trim()) : '
                                          'object.spec.containers.map(c, c.name)') % (_ANN % CONTAINERS_ANNOTATION, CONTAINERS_ANNOTATION)},
        # the pools' terms: [[key, operator, "v1,v2"], ...] per pool
        {"name": "ours", "expression": ('variables.params[variables.key + ".terms"].split("|").map(t, t.split(";").map(x, x.split(" ")))'
                                        '.map(t, t.map(x, [x[0], x[1], size(x) > 2 ? x[2] : ""]))')},
        # the Pod's own required terms, each [expressions, fields]; none: one empty term
        {"name": "existing", "expression": (
            "has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && "
            "has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? "
            "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.map(x, ["
            'has(x.matchExpressions) ? x.matchExpressions.map(e, [string(e.key), string(e.operator), has(e.values) ? e.values.join(",") : ""]) : [], '
            'has(x.matchFields) ? x.matchFields.map(e, [string(e.key), string(e.operator), has(e.values) ? e.values.join(",") : ""]) : []]) '
            ": [[[], []]]")},
        # every term of the Pod AND every pool's term: the Pod keeps its own placement and gains the pools'
        {"name": "terms", "expression": "variables.existing.map(x, variables.ours.map(t, [x[0] + t, x[1]])).flatten()"},
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
                    "!(" + gives + ") ? Object{} : Object{spec: Object.spec{containers: object.spec.containers.filter(c, c.name in variables.wanted).map(c, "
                    "Object.spec.containers{name: c.name, resources: Object.spec.containers.resources{"
                    "limits: {variables.resource: variables.count}}})}}")}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression": "!(" + gives + ") ? [] : " + (
                    '!has(object.spec.affinity) ? [JSONPatch{op: "add", path: "/spec/affinity", value: Object.spec.affinity{'
                    "nodeAffinity: Object.spec.affinity.nodeAffinity{requiredDuringSchedulingIgnoredDuringExecution: %(r)s{nodeSelectorTerms: %(t)s}}}}] "
                    ': !has(object.spec.affinity.nodeAffinity) ? [JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity", '
                    "value: Object.spec.affinity.nodeAffinity{requiredDuringSchedulingIgnoredDuringExecution: %(r)s{nodeSelectorTerms: %(t)s}}}] "
                    ': [JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", '
                    "value: %(r)s{nodeSelectorTerms: %(t)s}}]") % {"r": _REQ, "t": _BUILT_TERMS}}},
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
