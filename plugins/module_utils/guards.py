# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Guards against two upstream failure modes, computed from the device-plugin config model.

- A Pod asking for more than one unit of a resource that a ``timeSlicing`` config with
  ``failRequestsGreaterThanOne`` replicates is only refused by the kubelet's ``Allocate``
  call (``UnexpectedAdmissionError``), after scheduling, and the failed Pod stays around.
  :func:`time_sliced_resources` tells which configs slice which names;
  :func:`sliced_nodes` which nodes slice them, with the labels a Pod could select them by;
  :func:`guard_params` is what the admission policy (role ``admission_guard``) is built from.
  :func:`reachable_nodes` evaluates a Pod's placement against those nodes: its ``nodeName`` alone when it
  has one (the kubelet runs it there, whatever its selector says), else its node selector and required node
  affinity, the way the scheduler does; the policy's CEL mirrors it.
- A node label ``nvidia.com/device-plugin.config=<name>`` naming a key the ConfigMap lacks
  crash-loops the plugin's config-manager sidecar. :func:`config_label_errors` finds such
  labels before any node is labelled.

Pure Python, so it runs (and is unit-tested) outside Ansible.
"""

from __future__ import annotations

import difflib
import re

try:
    from .device_plugin import SHARED_SUFFIX, STRATEGY_NONE, STRATEGY_TIME_SLICING, ConfigError, advertised_name, parse_config, sharing_of, validate_config
except ImportError:  # loaded as a plain module, next to device_plugin.py
    from device_plugin import (  # type: ignore[no-redef]
        SHARED_SUFFIX,
        STRATEGY_NONE,
        STRATEGY_TIME_SLICING,
        ConfigError,
        advertised_name,
        parse_config,
        sharing_of,
        validate_config,
    )

__all__ = [
    "CONFIG_LABEL",
    "config_label_errors",
    "guard_params",
    "reachable_nodes",
    "sliced_nodes",
    "time_sliced_resources",
    "unshared_configs",
]

# The node label the GPU Operator's config manager watches.
CONFIG_LABEL = "nvidia.com/device-plugin.config"


def _configs(configs):
    """Validate a mapping of config name -> config (mapping or YAML text); yield ``(name, normalised config)`` sorted by name."""
    if not isinstance(configs, dict):
        raise ConfigError("configs", "must be a mapping of config name to device-plugin config", "give e.g. {shared: {version: v1, sharing: ...}}")
    for name in sorted(configs, key=str):
        value = configs[name]
        if isinstance(value, (str, bytes)):
            yield str(name), parse_config(value, name=str(name))
        else:
            yield str(name), validate_config(value, name=str(name))


def _sliced_entries(configs, require_fail_requests=True):
    """Yield ``(config name, advertised name, renamed)`` for every resource a time-slicing config replicates."""
    for name, config in _configs(configs):
        strategy, resources = sharing_of(config)
        if strategy != STRATEGY_TIME_SLICING:
            continue
        block = config["sharing"]["timeSlicing"]
        if require_fail_requests and not block.get("failRequestsGreaterThanOne", False):
            continue
        rename_by_default = block.get("renameByDefault", False)
        for resource in resources:
            advertised = advertised_name(resource, rename_by_default)
            yield name, advertised, advertised != resource["name"]


def time_sliced_resources(configs, require_fail_requests=True):
    """``{config name: [advertised resource names]}`` for the configs that time-slice GPUs.

    Only ``sharing.timeSlicing`` configs count (MPS and unshared configs are left out), and, unless
    ``require_fail_requests`` is false, only those with ``failRequestsGreaterThanOne: true`` (the ones whose
    multi-slice requests the kubelet refuses). Names are the advertised ones (``rename``, ``<name>.shared`` with
    ``renameByDefault``, else ``name``), sorted.
    """
    result = {}
    for name, advertised, _renamed in _sliced_entries(configs, require_fail_requests):
        result.setdefault(name, set()).add(advertised)
    return {name: sorted(names) for name, names in result.items()}


def unshared_configs(configs):
    """Names (sorted) of the configs without a ``sharing`` section: nodes labelled with them give whole GPUs."""
    return [name for name, config in _configs(configs) if sharing_of(config)[0] == STRATEGY_NONE]


def _node_config(node):
    if not isinstance(node, dict) or not node.get("name"):
        raise ConfigError("nodes", "each node must be a mapping with at least name and config", "write e.g. {name: lab-node-1, gpus: 2, config: shared}")
    return str(node["name"]), node.get("config")


def config_label_errors(nodes, keys, configmap="device-plugin-configs", namespace="gpu-share", label=CONFIG_LABEL):
    """Messages for every node whose config label would name a key the ConfigMap lacks (empty list: all labels are fine).

    ``nodes`` are inventory entries (``{name, config, ...}``; entries without ``config`` are skipped), ``keys`` the
    ConfigMap's data keys, or ``None`` when the ConfigMap does not exist. Each message names the node, the label value,
    the keys the ConfigMap has and the fix.
    """
    if not isinstance(nodes, (list, tuple)):
        raise ConfigError("nodes", "must be a list of nodes", "give the inventory's node entries, e.g. [{name: lab-node-1, config: shared}]")
    where = "ConfigMap %s/%s" % (namespace, configmap)
    labelled = [(name, value) for name, value in map(_node_config, nodes) if value is not None]
    if keys is None:
        if not labelled:
            return []
        wanted = ", ".join("%s=%s" % (name, value) for name, value in labelled)
        return [
            "%s does not exist, so no %s label can name a config in it (would label: %s); the device plugin's config manager "
            "crash-loops on a label naming a missing config. Fix: create the ConfigMap first (role gpushare.k8s.device_plugin_config, "
            "lab step 1), point node_sharing_configmap and node_sharing_configmap_namespace at the ConfigMap the plugin reads, "
            "or turn the check off with node_sharing_check_config_labels: false." % (where, label, wanted)
        ]
    keys = sorted(str(key) for key in keys)
    shown = ", ".join(keys) if keys else "no keys at all"
    errors = []
    for name, value in labelled:
        value = str(value)
        if value in keys:
            continue
        close = difflib.get_close_matches(value, keys, n=1, cutoff=0.6)
        hint = " (did you mean %r?)" % close[0] if close else ""
        errors.append(
            "node %s: label %s=%s names no key of %s (its keys: %s); the device plugin's config manager would crash-loop on it. "
            "Fix: add key %r to the ConfigMap before labelling (role gpushare.k8s.device_plugin_config), or set the node's config "
            "to one of its keys%s." % (name, label, value, where, shown, value, hint)
        )
    return errors


# --- Which nodes slice which names, and which of them a Pod can reach ---------------------------------------------

def _ignored(ignored_labels):
    if isinstance(ignored_labels, (str, bytes)) or not all(isinstance(key, str) and key for key in ignored_labels or ()):
        raise ConfigError("ignored_labels", "must be a list of label keys, got %r" % (ignored_labels,), "write e.g. [nvidia.com/gfd.timestamp]")
    return frozenset(ignored_labels or ())


_NODES_FIX = "give Node objects (the resources of kubernetes.core.k8s_info kind=Node) or entries {name, labels}"


def _node_identity(node):
    """``(name, {label: value})`` of a Node object (``metadata``) or of a ``{name, labels}`` entry."""
    if not isinstance(node, dict):
        raise ConfigError("nodes", "each node must be a mapping, got %s" % type(node).__name__, _NODES_FIX)
    meta = node["metadata"] if isinstance(node.get("metadata"), dict) else node
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError("nodes", "every node needs a name (metadata.name), got %r" % (name,), _NODES_FIX)
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        raise ConfigError("nodes", "node %s: labels must be a mapping of label to value" % name, _NODES_FIX)
    return name, {str(key): str(labels[key]) for key in sorted(labels, key=str)}


def sliced_nodes(nodes, configs, label=CONFIG_LABEL, default_config=None, ignored_labels=()):
    """Every node on which some resource name is time-sliced with ``failRequestsGreaterThanOne``, sorted by name.

    ``nodes`` are Node objects (or ``{name, labels}``), ``configs`` the named device-plugin configs (the ConfigMap's
    keys). A node's config is its ``label`` value, else ``default_config`` (the GPU Operator's
    ``devicePlugin.config.default``, used for nodes without the label) when given. Each entry is
    ``{name, config, labels, resources, known}``: ``resources`` the names sliced there, ``labels`` all of the node's
    labels (what a Pod may select it by). A node whose label names a config missing from ``configs`` cannot be judged,
    so it counts as slicing every name some config slices (``known: false``): the guard errs on refusing.
    Labels in ``ignored_labels`` (values that change on their own, such as gpu-feature-discovery's
    ``nvidia.com/gfd.timestamp``) are left out of ``labels``; :func:`reachable_nodes` counts any requirement on them as met.
    """
    ignored = _ignored(ignored_labels)
    sliced = time_sliced_resources(configs)
    every_name = sorted({name for names in sliced.values() for name in names})
    known_configs = {str(name) for name in configs}
    if default_config and str(default_config) not in known_configs:
        raise ConfigError(
            "default_config", "names config %r, which is not one of the configs (%s)" % (default_config, ", ".join(sorted(known_configs)) or "none"),
            "name a key of the device-plugin ConfigMap, or leave it empty when nodes without the label get no config")
    result = []
    seen = set()
    for name, labels in sorted(map(_node_identity, nodes)):
        labels = {key: value for key, value in labels.items() if key not in ignored}
        if name in seen:
            raise ConfigError("nodes", "node %s is listed twice" % name, _NODES_FIX)
        seen.add(name)
        config = labels.get(label) or (str(default_config) if default_config else "")
        if not config:
            continue
        if config in sliced:
            resources, known = sliced[config], True
        elif config in known_configs or not every_name:
            continue
        else:
            resources, known = every_name, False
        result.append({"name": name, "config": config, "labels": labels, "resources": list(resources), "known": known})
    return result


def _fix(name, label, plain, unshared):
    """The fix for a multi-unit request of time-sliced ``name``: pin to whole GPUs, or rename the slices."""
    if unshared:
        pin = "nodeSelector %s: %s" % (label, " or ".join(unshared))
    else:
        pin = "label them with a config that has no sharing section and select it by %s" % label
    text = ("Fix: ask for 1 %s; for whole GPUs pin the Pod to nodes that do not time-slice it (%s, or a required node affinity "
            "or nodeName that excludes every node above)" % (name, pin))
    if plain:
        text += (", or set renameByDefault: true in the timeSlicing section of config %s so the slices are advertised as %s%s "
                 "and %s keeps meaning whole GPUs" % (" and ".join(plain), name, SHARED_SUFFIX, name))
    else:
        text += " (%s is already the slices' own name, so renameByDefault does not help: ask for 1)" % name
    return text + "."


def guard_params(configs, nodes, label=CONFIG_LABEL, default_config=None, ignored_labels=()):
    """What the admission policy is built from: the sliced nodes, the names they slice, the fix per name.

    ``{"nodes": [{name, config, labels, resources}], "names": [...], "fixes": {name: text}, "unshared": [...],
    "unknown": [node names whose config label names a config the model lacks], "ignored": [label keys left out]}``. The policy refuses a Pod in
    which a container asks for more than one unit of a name when the Pod can reach (:func:`reachable_nodes`) a
    node in ``nodes`` that slices that name. It is a snapshot: re-compute it whenever node labels or configs change.
    """
    nodes = sliced_nodes(nodes, configs, label=label, default_config=default_config, ignored_labels=ignored_labels)
    names = sorted({name for node in nodes for name in node["resources"]})
    unshared = unshared_configs(configs)
    plain = {}
    for config, advertised, renamed in _sliced_entries(configs):
        if not renamed:
            plain.setdefault(advertised, set()).add(config)
    return {
        "nodes": [{key: node[key] for key in ("name", "config", "labels", "resources")} for node in nodes],
        "names": names,
        "fixes": {name: _fix(name, label, sorted(plain.get(name, ())), unshared) for name in names},
        "unshared": unshared,
        "unknown": [node["name"] for node in nodes if not node["known"]],
        "ignored": sorted(_ignored(ignored_labels)),
    }


_INTEGER_RE = re.compile(r"^[+-]?[0-9]+$")
# Up to 18 digits always fits in an int64; longer integers are not compared (the requirement counts as met).
_SMALL_INTEGER_RE = re.compile(r"^[+-]?[0-9]{1,18}$")


def _greater_or_less(operator, value, values):
    """``Gt``/``Lt`` as the scheduler reads them: one integer value, compared with the label's integer value."""
    if not isinstance(values, list) or len(values) != 1 or value is None:
        return False
    bound = str(values[0])
    if not (_INTEGER_RE.match(value) and _INTEGER_RE.match(bound)):
        return False  # the scheduler's parse fails: no match
    if not (_SMALL_INTEGER_RE.match(value) and _SMALL_INTEGER_RE.match(bound)):
        return True  # too long to compare safely in CEL: assume the node may match
    return int(value) > int(bound) if operator == "Gt" else int(value) < int(bound)


def _expression_matches(expression, labels):
    """One ``matchExpressions`` requirement against a node's labels (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    value = labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        return _greater_or_less(operator, value, values)
    return True  # an operator the API server would refuse: assume the node may match


def _field_matches(expression, name):
    """One ``matchFields`` requirement (only ``metadata.name`` with In/NotIn is valid) against a node's name."""
    if expression.get("key") != "metadata.name":
        return True
    values = expression.get("values") or []
    if expression.get("operator") == "In":
        return name in values
    if expression.get("operator") == "NotIn":
        return name not in values
    return True


def _term_matches(term, name, labels, ignored):
    """A node selector term: every expression and field requirement holds; an empty term matches no node."""
    expressions = (term or {}).get("matchExpressions") or []
    fields = (term or {}).get("matchFields") or []
    if not expressions and not fields:
        return False
    return (all(e.get("key") in ignored or _expression_matches(e, labels) for e in expressions)
            and all(_field_matches(f, name) for f in fields))


def reachable_nodes(pod, nodes, ignored_labels=()):
    """Names of the ``nodes`` (``{name, labels}``) a Pod may run on, judged from its placement alone.

    With ``spec.nodeName`` set, that node is the one the Pod reaches, whatever its ``nodeSelector`` or node affinity
    say: such a Pod never meets the scheduler, and the kubelet allocates its devices before it checks the selector
    (a time-sliced over-request then fails with ``UnexpectedAdmissionError`` all the same). Without ``nodeName`` a
    node is reachable unless the Pod provably excludes it: a ``nodeSelector`` entry differs, or no term of the
    required node affinity matches it. Taints, resources and preferred affinity are ignored (they do not pin a Pod).
    A requirement on a label in ``ignored_labels`` (left out of the nodes' snapshot) counts as met. The admission
    policy's CEL evaluates the same rules.
    """
    ignored = _ignored(ignored_labels)
    spec = pod.get("spec", pod) if isinstance(pod, dict) else {}
    spec = spec or {}
    node_name = spec.get("nodeName") or ""
    selector = spec.get("nodeSelector") or {}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"))
    reached = []
    for node in nodes:
        name, labels = _node_identity(node)
        if node_name:
            if node_name == name:
                reached.append(name)
            continue  # the kubelet of nodeName runs it: its selector and affinity do not move it elsewhere
        if any(key not in ignored and labels.get(key) != str(value) for key, value in selector.items()):
            continue
        if required is not None and not any(_term_matches(term, name, labels, ignored) for term in required.get("nodeSelectorTerms") or []):
            continue
        reached.append(name)
    return reached
