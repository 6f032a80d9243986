# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Node pools chosen by Kubernetes label selectors, resolved against the cluster's nodes. No Ansible import.

A pool is ``{name, selector, config}`` (every matched node runs that device-plugin config) or
``{name, selector, mig: {profile[, gpus]} | {devices[, gpus]} | {layout}}`` (every matched node gets that MIG layout:
one profile, or several at once as ``devices: {profile: instances per GPU}``, checked against each node's product). ``selector`` is a
Kubernetes ``LabelSelector`` (``matchLabels`` and ``matchExpressions`` with ``In``, ``NotIn``, ``Exists``,
``DoesNotExist``, all ANDed; an empty selector matches every node), read as the API server reads it.

:func:`resolve_pools` turns the pools and the nodes the cluster has now into the collection's node entries
(``{name, gpus, product, config | mig}``), so a node that joins a pool later is configured by the next run. A node's
physical GPUs come from the cluster, where the GPU Operator stand-in and gpu-feature-discovery put them: the
annotations ``gpushare.k8s/gpus`` and ``gpushare.k8s/gpu-product`` the lab cluster writes, else the
gpu-feature-discovery labels ``nvidia.com/gpu.count`` and ``nvidia.com/gpu.product``.
"""

from __future__ import annotations

from ansible_collections.gpushare.k8s.plugins.module_utils import names as _names
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError, is_int as _is_int

__all__ = ["PoolError", "validate_selector", "selector_matches", "validate_pools", "node_gpus", "resolve_pools"]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
SELECTOR_KEYS = ("matchLabels", "matchExpressions")
POOL_KEYS = ("name", "selector", "config", "mig")
MIG_KEYS = ("profile", "gpus", "layout", "devices")
HARDWARE_GPUS_ANNOTATION = _names.HARDWARE_GPUS_ANNOTATION
HARDWARE_PRODUCT_ANNOTATION = _names.HARDWARE_PRODUCT_ANNOTATION
GPU_COUNT_LABEL = _names.COUNT_LABEL
GPU_PRODUCT_LABEL = _names.PRODUCT_LABEL
GPU_PRESENT_LABEL = _names.PRESENT_LABEL


class PoolError(InputError):
    """A bad pool or selector. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def _label_key_problem(key):
    """Why ``key`` is not a label key (``[prefix/]name``), or ``None``."""
    if not isinstance(key, str) or not key:
        return "%r is not a label key" % (key,)
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _names.DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return "%r has a prefix that is not a DNS subdomain" % key
    if len(name) > 63 or not _names.LABEL_NAME_RE.fullmatch(name):
        return "%r is not a label key (a name of at most 63 letters, digits, '-', '_', '.', optionally after a DNS prefix and '/')" % key
    return None


def _label_value_problem(value):
    if not isinstance(value, str):
        return "%r is not a string (quote it: label values are strings)" % (value,)
    if value and (len(value) > 63 or not _names.LABEL_NAME_RE.fullmatch(value)):
        return "%r is not a label value (at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric)" % value
    return None


def validate_selector(selector, path="selector"):
    """Check a ``LabelSelector`` as the API server would; raise :class:`PoolError` naming the field."""
    if not isinstance(selector, dict):
        raise PoolError(path, "must be a label selector (a mapping of matchLabels and/or matchExpressions), got %r" % (selector,),
                        "write e.g. {matchLabels: {pool: inference}}")
    unknown = sorted(str(k) for k in selector if k not in SELECTOR_KEYS)
    if unknown:
        raise PoolError(path, "unknown field%s %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)),
                        "a label selector has only matchLabels and matchExpressions")
    labels = selector.get("matchLabels")
    if labels is not None:
        if not isinstance(labels, dict):
            raise PoolError(path + ".matchLabels", "must be a mapping of label keys to values, got %r" % (labels,), "write {key: value}")
        for key, value in labels.items():
            problem = _label_key_problem(key) or _label_value_problem(value)
            if problem:
                raise PoolError("%s.matchLabels" % path, problem, "use a valid label key and a quoted string value")
    expressions = selector.get("matchExpressions")
    if expressions is not None:
        if not isinstance(expressions, list):
            raise PoolError(path + ".matchExpressions", "must be a list of {key, operator, values}, got %r" % (expressions,),
                            "write a list")
        for index, expression in enumerate(expressions):
            _validate_expression(expression, "%s.matchExpressions[%d]" % (path, index))


def _validate_expression(expression, path):
    if not isinstance(expression, dict):
        raise PoolError(path, "must be a mapping {key, operator, values}, got %r" % (expression,), "write {key: k, operator: In, values: [v]}")
    unknown = sorted(str(k) for k in expression if k not in ("key", "operator", "values"))
    if unknown:
        raise PoolError(path, "unknown field%s %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)),
                        "an expression has only key, operator and values")
    problem = _label_key_problem(expression.get("key"))
    if problem:
        raise PoolError(path + ".key", problem, "name a label key")
    operator = expression.get("operator")
    if operator not in OPERATORS:
        raise PoolError(path + ".operator", "%r is not an operator" % (operator,), "use one of %s (case matters)" % ", ".join(OPERATORS))
    values = expression.get("values")
    if values is None:
        values = []
    if not isinstance(values, list):
        raise PoolError(path + ".values", "must be a list of strings, got %r" % (values,), "write values: [a, b]")
    if operator in ("In", "NotIn") and not values:
        raise PoolError(path + ".values", "must not be empty for operator %s" % operator, "list at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise PoolError(path + ".values", "must be empty for operator %s" % operator, "remove values")
    for value in values:
        problem = _label_value_problem(value)
        if problem:
            raise PoolError(path + ".values", problem, "use quoted label values")


def selector_matches(selector, labels):
    """Whether a node with ``labels`` matches ``selector`` (Kubernetes semantics; the selector is validated first).

    Every ``matchLabels`` pair and every expression must hold. ``In``: the label exists with one of the values;
    ``NotIn``: the label is absent or has none of the values; ``Exists``: the key is present (any value, even empty);
    ``DoesNotExist``: the key is absent. An empty selector matches every node.
    """
    validate_selector(selector)
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if key not in labels or labels[key] != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _present(mapping):
    """A mapping without its ``None`` values: an argument spec fills the options not given with ``None``."""
    return {k: v for k, v in mapping.items() if v is not None} if isinstance(mapping, dict) else mapping


def _normalise(pool):
    pool = _present(pool)
    if isinstance(pool, dict) and isinstance(pool.get("mig"), dict):
        pool["mig"] = _present(pool["mig"])
    if isinstance(pool, dict) and isinstance(pool.get("selector"), dict):
        selector = _present(pool["selector"])
        if isinstance(selector.get("matchExpressions"), list):
            selector["matchExpressions"] = [_present(e) for e in selector["matchExpressions"]]
        pool["selector"] = selector
    return pool


def validate_pools(pools, configs=None, field="gpushare_node_pools"):
    """Check every pool (names, selectors, config or MIG layout) before anything is read or written."""
    if pools is None:
        return
    if not isinstance(pools, list):
        raise PoolError(field, "must be a list of pools {name, selector, config | mig}, got %r" % (pools,), "write a list")
    seen = set()
    for index, pool in enumerate(pools):
        path = "%s[%d]" % (field, index)
        pool = _normalise(pool)
        if not isinstance(pool, dict):
            raise PoolError(path, "must be a mapping {name, selector, config | mig}, got %r" % (pool,), "write a mapping")
        name = pool.get("name")
        if not isinstance(name, str) or len(name) > 63 or not _names.DNS_LABEL_RE.fullmatch(name):
            raise PoolError(path + ".name", "%r is not a pool name (lower-case letters, digits and '-', at most 63)" % (name,), "name the pool")
        path = "%s[%d] (%s)" % (field, index, name)
        if name in seen:
            raise PoolError(path + ".name", "pool %s is named twice" % name, "give each pool its own name")
        seen.add(name)
        unknown = sorted(str(k) for k in pool if k not in POOL_KEYS)
        if unknown:
            raise PoolError(path, "unknown field%s %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)),
                            "a pool has name, selector and one of config or mig")
        if "selector" not in pool:
            raise PoolError(path + ".selector", "missing", "choose the pool's nodes with a label selector, e.g. {matchLabels: {pool: %s}}" % name)
        validate_selector(pool["selector"], path + ".selector")
        if ("config" in pool) == ("mig" in pool):
            raise PoolError(path, "needs exactly one of config and mig", "give the pool a device-plugin config or a MIG layout")
        if "config" in pool:
            config = pool["config"]
            if configs is not None and config not in configs:
                raise PoolError(path + ".config", "names config %r, which is not among the device-plugin configs (%s)"
                                % (config, ", ".join(sorted(str(c) for c in configs))), "use one of them or add it")
        else:
            _validate_mig(pool["mig"], path + ".mig")


def _validate_mig(mig, path):
    if not isinstance(mig, dict):
        raise PoolError(path, "must be a mapping {profile[, gpus]}, {devices[, gpus]} or {layout}, got %r" % (mig,), "write e.g. {profile: 1g.10gb}")
    unknown = sorted(str(k) for k in mig if k not in MIG_KEYS)
    if unknown:
        raise PoolError(path, "unknown field%s %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)),
                        "a pool's mig has profile or devices (and optionally gpus), or layout; the product is read from each node")
    if sum(key in mig for key in ("profile", "devices", "layout")) != 1:
        raise PoolError(path, "needs exactly one of profile, devices and layout",
                        "write {profile: 1g.10gb}, {devices: {1g.10gb: 4, 3g.40gb: 1}} or {layout: all-1g.10gb}")
    if "layout" in mig:
        layout = mig["layout"]
        if "gpus" in mig:
            raise PoolError(path + ".gpus", "goes with profile or devices, not layout", "write {profile: <p>, gpus: <n>}")
        if not isinstance(layout, str) or not layout.startswith("all-") or layout == "all-disabled" or len(layout) <= 4:
            raise PoolError(path + ".layout", "%r is not a layout this collection writes" % (layout,),
                            "use all-<profile> (every GPU split into that profile), or profile and gpus")
    elif "devices" in mig:
        devices = mig["devices"]
        if not isinstance(devices, dict) or not devices:
            raise PoolError(path + ".devices", "must be a non-empty mapping of MIG profile to instances per GPU, got %r" % (devices,),
                            "write e.g. {1g.10gb: 4, 3g.40gb: 1}")
        for profile, count in devices.items():
            if not isinstance(profile, str) or not profile:
                raise PoolError(path + ".devices", "%r is not a MIG profile name" % (profile,), "write e.g. 1g.10gb")
            if not _is_int(count) or count < 1:
                raise PoolError("%s.devices.%s" % (path, profile), "must be a whole number of instances of at least 1, got %r" % (count,),
                                "give the instances per GPU, or leave the profile out")
    elif not isinstance(mig["profile"], str) or not mig["profile"]:
        raise PoolError(path + ".profile", "%r is not a MIG profile name" % (mig["profile"],), "write e.g. 1g.10gb")
    if "gpus" in mig and (not _is_int(mig["gpus"]) or mig["gpus"] < 1):
        raise PoolError(path + ".gpus", "must be a whole number of at least 1, got %r" % (mig["gpus"],), "count the GPUs to split, or omit it for all")


def _meta(node, key):
    return ((node or {}).get("metadata") or {}).get(key) or {}


def _product(raw):
    """A product as gpu-feature-discovery labels it, without the suffixes it adds (-SHARED, -MIG-<profile>)."""
    product = str(raw)
    if product.endswith("-SHARED"):
        product = product[:-len("-SHARED")]
    return product.split("-MIG-", 1)[0]


def node_gpus(node):
    """``(gpus, product)`` of a Node object: the physical GPUs the cluster says it holds (``None`` where unknown)."""
    annotations, labels = _meta(node, "annotations"), _meta(node, "labels")
    gpus = None
    for raw in (annotations.get(HARDWARE_GPUS_ANNOTATION), labels.get(GPU_COUNT_LABEL)):
        if raw is not None and str(raw).isdigit():
            gpus = int(raw)
            break
    product = annotations.get(HARDWARE_PRODUCT_ANNOTATION) or labels.get(GPU_PRODUCT_LABEL)
    return gpus, (_product(product) if product else None)


def _is_gpu_node(node):
    gpus, _product_name = node_gpus(node)
    return bool(gpus) or _meta(node, "labels").get(GPU_PRESENT_LABEL) == "true"


def resolve_pools(pools, cluster_nodes, configs=None, named=(), field="gpushare_node_pools"):
    """Match the pools against the cluster's nodes, before anything is written.

    Returns ``{"nodes": [...], "pools": {pool: [node, ...]}, "warnings": [...], "errors": [...]}``: ``nodes`` are the
    collection's node entries (``{name, gpus, product, config}`` or ``{name, gpus, product, mig: {product, profile,
    gpus}}``), one per matched node; ``errors`` (a node two pools match, a node also named in ``named``, a matched
    node whose GPUs the cluster does not report) stop the run; ``warnings`` name each pool that matches no node and
    each GPU node no pool (nor ``named``) covers.
    """
    validate_pools(pools, configs, field)
    pools = [_normalise(pool) for pool in pools or []]
    nodes = sorted((n for n in cluster_nodes or [] if ((n or {}).get("metadata") or {}).get("name")), key=lambda n: n["metadata"]["name"])
    named = set(named or ())
    matched, errors, warnings, entries = {}, [], [], []
    for pool in pools:
        matched[pool["name"]] = [n["metadata"]["name"] for n in nodes if selector_matches(pool["selector"], _meta(n, "labels"))]
        if not matched[pool["name"]]:
            warnings.append("%s: pool %s matches no node (selector %s); nothing is configured for it."
                            % (field, pool["name"], _describe(pool["selector"])))
    for node in nodes:
        name = node["metadata"]["name"]
        mine = [pool for pool in pools if name in matched[pool["name"]]]
        if len(mine) > 1:
            errors.append("%s: node %s is matched by pools %s. Fix: make the selectors disjoint (a node belongs to one pool)."
                          % (field, name, " and ".join(p["name"] for p in mine)))
            continue
        if mine and name in named:
            errors.append("%s: node %s is matched by pool %s and also listed by name. Fix: list it in one place."
                          % (field, name, mine[0]["name"]))
            continue
        if not mine:
            if name not in named and _is_gpu_node(node):
                warnings.append("%s: GPU node %s is in no pool; it keeps the operator's default config." % (field, name))
            continue
        entry = _entry(mine[0], node, field)
        if isinstance(entry, str):
            errors.append(entry)
        else:
            entries.append(entry)
    return {"nodes": entries, "pools": matched, "warnings": warnings, "errors": errors}


def _entry(pool, node, field):
    name = node["metadata"]["name"]
    gpus, product = node_gpus(node)
    if not gpus:
        return ("%s: node %s (pool %s) reports no GPU count (neither the annotation %s nor the gpu-feature-discovery label %s). "
                "Fix: wait until the GPU Operator has labelled the node, or take it out of the pool." % (
                    field, name, pool["name"], HARDWARE_GPUS_ANNOTATION, GPU_COUNT_LABEL))
    entry = {"name": name, "gpus": gpus}
    if product:
        entry["product"] = product
    if "config" in pool:
        entry["config"] = pool["config"]
        return entry
    if not product:
        sources = (HARDWARE_PRODUCT_ANNOTATION, GPU_PRODUCT_LABEL)
        return ("%s: node %s (pool %s) reports no GPU product (neither %s nor %s), which its MIG layout needs. "
                "Fix: wait until the GPU Operator has labelled the node." % ((field, name, pool["name"]) + sources))
    mig = pool["mig"]
    entry["mig"] = {"product": product, "gpus": mig.get("gpus", gpus)}
    if "devices" in mig:
        entry["mig"]["devices"] = dict(mig["devices"])
    else:
        entry["mig"]["profile"] = mig["layout"][len("all-"):] if "layout" in mig else mig["profile"]
    return entry


def _describe(selector):
    parts = ["%s=%s" % (k, v) for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        values = expression.get("values") or []
        parts.append("%s %s%s" % (expression["key"], expression["operator"], " (%s)" % ", ".join(values) if values else ""))
    return ", ".join(parts) or "everything"
