# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Guards against two upstream failure modes, computed from the device-plugin config model.

- A Pod asking for more than one unit of a resource that a ``timeSlicing`` config with
  ``failRequestsGreaterThanOne`` replicates is only refused by the kubelet's ``Allocate``
  call (``UnexpectedAdmissionError``), after scheduling, and the failed Pod stays around.
  :func:`time_sliced_resources` tells which configs slice which names;
  :func:`sliced_nodes` which nodes slice them, with the labels a Pod could select them by;
  :func:`guard_params` is what the admission policy (role ``admission_guard``) is built from;
  :func:`guard_objects` builds the policy and its binding from it as data (settings checked first by
  :func:`guard_settings`), :func:`guard_manifest` serialises them once for the file the lab keeps.
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
import json
import re
import textwrap

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

from ..names import CONFIG_LABEL, DNS_LABEL_RE, DNS_SUBDOMAIN_RE, LABEL_NAME_RE

from ..nvidia.device_plugin import (
    SHARED_SUFFIX,
    STRATEGY_NONE,
    STRATEGY_TIME_SLICING,
    ConfigError,
    advertised_name,
    parse_config,
    plain,
    sharing_block,
    sharing_of,
    validate_config,
)

__all__ = [
    "CONFIG_LABEL",
    "GUARD_DEFAULTS",
    "config_label_errors",
    "guard_manifest",
    "guard_objects",
    "guard_params",
    "guard_settings",
    "reachable_nodes",
    "sliced_nodes",
    "time_sliced_resources",
    "unshared_configs",
]


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
        strategy, resources, block = sharing_block(config)
        if strategy != STRATEGY_TIME_SLICING:
            continue
        if require_fail_requests and not block["failRequestsGreaterThanOne"]:
            continue
        rename_by_default = block["renameByDefault"]
        for resource in resources:
            advertised = advertised_name(resource, rename_by_default)
            yield name, advertised, advertised != resource["name"]


def time_sliced_resources(configs, require_fail_requests=True):
    """``{config name: [advertised resource names]}`` for the configs that time-slice GPUs.

    Only ``sharing.timeSlicing`` configs count (MPS and unshared configs are left out), and, unless
    ``require_fail_requests`` is false, only those with ``failRequestsGreaterThanOne: true`` (the ones whose
    multi-slice requests the kubelet refuses). Names are the advertised ones (``<name>.shared`` with
    ``renameByDefault``, else ``name``; a resource's own ``rename`` is ignored, as the plugin ignores it), sorted.
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


# --- The admission policy and its binding, built as data ----------------------------------------------------------
#
# The objects are dicts (never YAML text with values pasted in): a name, label or node label cannot add an object,
# a field or a line to them. guard_manifest() serialises them once, with comments, for the file the lab keeps.

ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"

# The role's settings (its variables without the ``admission_guard_`` prefix) and their defaults.
GUARD_DEFAULTS = {
    "name": "gpushare-time-slicing-guard",
    "config_label": CONFIG_LABEL,
    "failure_policy": "Fail",
    "excluded_namespaces": ["kube-system"],
    "validation_actions": ["Deny"],
    "namespace_selector": {},
}
_FAILURE_POLICIES = ("Fail", "Ignore")
_VALIDATION_ACTIONS = ("Deny", "Warn", "Audit")
_SELECTOR_KEYS = ("matchLabels", "matchExpressions")

_DNS_LABEL_RE = DNS_LABEL_RE
_DNS_SUBDOMAIN_RE = DNS_SUBDOMAIN_RE


def _shown(value, limit=60):
    """``value`` as a short, single-line repr for a message (an injected manifest is not echoed whole)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...'"


def _is_label_key(key):
    """A label key as Kubernetes requires it: ``[prefix/]name``, prefix a DNS-1123 subdomain, name at most 63 characters."""
    if not isinstance(key, str):
        return False
    prefix, _slash, name = key.rpartition("/")
    if _slash and not (len(prefix) <= 253 and _DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return False
    return len(name) <= 63 and bool(LABEL_NAME_RE.fullmatch(name))


def guard_settings(settings, prefix="admission_guard_"):
    """The guard's settings with defaults filled in, each checked; ``ConfigError`` names the field (``<prefix><key>``) and the fix.

    ``name`` (of the policy and its binding) must be a DNS-1123 subdomain, checked with ``re.fullmatch`` (so no line
    break, ``---`` or other text can follow it), ``config_label`` a label key, ``failure_policy`` ``Fail`` or
    ``Ignore``, ``excluded_namespaces`` DNS-1123 labels, ``validation_actions`` one or more of ``Deny``, ``Warn``,
    ``Audit`` without ``Deny`` and ``Warn`` together (the API server refuses that), ``namespace_selector`` a label
    selector (``matchLabels``, ``matchExpressions``).
    """
    if not isinstance(settings, dict):
        raise ConfigError("%ssettings" % prefix, "must be a mapping, got %s" % type(settings).__name__, "pass the role's variables")
    unknown = sorted(str(key) for key in settings if key not in GUARD_DEFAULTS)
    if unknown:
        raise ConfigError(prefix + unknown[0], "is not a setting of the admission guard",
                          "use one of %s" % ", ".join(prefix + key for key in GUARD_DEFAULTS))
    merged = plain(dict(GUARD_DEFAULTS, **settings))
    name = merged["name"]
    if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(name):
        raise ConfigError(
            prefix + "name",
            "%s is not a DNS-1123 subdomain (at most 253 lower-case letters, digits, '-' and '.', each dot-separated part "
            "starting and ending with a letter or digit), so it cannot name the ValidatingAdmissionPolicy and its binding" % _shown(name),
            "use a name such as %s" % GUARD_DEFAULTS["name"])
    if not _is_label_key(merged["config_label"]):
        raise ConfigError(prefix + "config_label", "%s is not a label key ([prefix/]name)" % _shown(merged["config_label"]),
                          "use the label the device plugin's config manager watches, such as %s" % CONFIG_LABEL)
    if merged["failure_policy"] not in _FAILURE_POLICIES:
        raise ConfigError(prefix + "failure_policy", "must be Fail or Ignore, got %s" % _shown(merged["failure_policy"]),
                          "use Fail (a policy that cannot be evaluated refuses the Pod) or Ignore")
    namespaces = merged["excluded_namespaces"]
    if not isinstance(namespaces, list) or not all(isinstance(ns, str) and len(ns) <= 63 and _DNS_LABEL_RE.fullmatch(ns) for ns in namespaces):
        raise ConfigError(prefix + "excluded_namespaces", "must be a list of namespace names (DNS-1123 labels), got %s" % _shown(namespaces),
                          "write e.g. [kube-system]")
    actions = merged["validation_actions"]
    if (not isinstance(actions, list) or not actions or not all(action in _VALIDATION_ACTIONS for action in actions)
            or len(set(actions)) != len(actions) or {"Deny", "Warn"} <= set(actions)):
        raise ConfigError(
            prefix + "validation_actions",
            "is %s; the API server needs at least one of Deny, Warn and Audit, each once, and refuses Deny together with Warn" % _shown(actions),
            "use [Deny] to refuse Pods, or [Warn, Audit] to only report them")
    selector = merged["namespace_selector"]
    if not isinstance(selector, dict) or any(key not in _SELECTOR_KEYS for key in selector):
        raise ConfigError(prefix + "namespace_selector", "must be a label selector (matchLabels, matchExpressions), got %s" % _shown(selector),
                          "write e.g. {matchLabels: {example.com/guarded: 'yes'}}, or {} to cover every namespace")
    return merged


def _cel(value):
    """A CEL literal of ``value``: JSON is valid CEL (strings, numbers, lists, maps)."""
    return json.dumps(value)


def _cel_strings(values):
    """A list(string) literal; when empty still typed: the API server's type checker panics on some expressions over an
    untyped ``[]`` (cel-go's homogeneous-literal validator, seen on v1.36.3)."""
    values = list(values)
    return _cel(values) if values else "[''].filter(x, false)"


def _lines(text):
    """CEL written as an indented block in this file, as the expression string (dedented, no final newline)."""
    return textwrap.dedent(text).strip("\n")


# Updates are only checked when they change the placement (gated Pods may gain a node selector or affinity).
_MATCH_CONDITION = ("request.operation == 'CREATE' || object.spec.?nodeSelector != oldObject.spec.?nodeSelector "
                    "|| object.spec.?affinity != oldObject.spec.?affinity")

# The sliced nodes this Pod may land on; same rules as reachable_nodes above.
_REACHABLE = _lines("""
    variables.nodes.filter(n,
      variables.nodeName != '' ? variables.nodeName == n
      : (variables.selector.all(k, k in variables.ignoredLabels
          || (k in variables.nodeLabels[n] && variables.nodeLabels[n][k] == variables.selector[k]))
        && (!variables.required.hasValue()
            || variables.required.value().?nodeSelectorTerms.orValue([]).exists(t,
                 size(t.?matchExpressions.orValue([])) + size(t.?matchFields.orValue([])) > 0
                 && t.?matchExpressions.orValue([]).all(e, e.key in variables.ignoredLabels ? true
                      : e.operator == 'In' ? (e.key in variables.nodeLabels[n] && variables.nodeLabels[n][e.key] in e.?values.orValue([]))
                      : e.operator == 'NotIn' ? !(e.key in variables.nodeLabels[n] && variables.nodeLabels[n][e.key] in e.?values.orValue([]))
                      : e.operator == 'Exists' ? e.key in variables.nodeLabels[n]
                      : e.operator == 'DoesNotExist' ? !(e.key in variables.nodeLabels[n])
                      : e.operator == 'Gt' || e.operator == 'Lt' ? (
                          e.key in variables.nodeLabels[n] && size(e.?values.orValue([])) == 1
                          && variables.nodeLabels[n][e.key].matches('^[+-]?[0-9]+$') && e.values[0].matches('^[+-]?[0-9]+$')
                          && (!variables.nodeLabels[n][e.key].matches('^[+-]?[0-9]{1,18}$') || !e.values[0].matches('^[+-]?[0-9]{1,18}$')
                              || (e.operator == 'Gt' ? int(variables.nodeLabels[n][e.key]) > int(e.values[0])
                                                     : int(variables.nodeLabels[n][e.key]) < int(e.values[0]))))
                      : true)
                 && t.?matchFields.orValue([]).all(f,
                      f.key != 'metadata.name' ? true
                      : f.operator == 'In' ? n in f.?values.orValue([])
                      : f.operator == 'NotIn' ? !(n in f.?values.orValue([]))
                      : true)))))
""")

# One container's counts (limit or request) of `name` that are integers above 1.
_OVER_ONE = ("  [?c.?resources.?limits[?name], ?c.?resources.?requests[?name]]\n"
             "    .map(q, string(q)).filter(q, isQuantity(q) && quantity(q).isInteger())\n"
             "    .exists(q, quantity(q).asInteger() > 1)))")

# The time-sliced nodes reachable by this Pod that slice `name`, as the message shows them.
_SHOWN = ("variables.reachable.filter(n, name in variables.nodeResources[n])"
          ".map(n, n + ' (' + variables.configLabel + '=' + variables.nodeConfigs[n] + ')')")

_MESSAGE_EXPRESSION = _lines("""
    variables.offenders.map(c, "container '" + c.name + "' asks for "
      + variables.asked.map(name,
          [?c.?resources.?limits[?name], ?c.?resources.?requests[?name]]
            .map(q, string(q)).filter(q, isQuantity(q) && quantity(q).isInteger() && quantity(q).asInteger() > 1)
            .map(q, q + ' ' + name))
        .filter(found, size(found) > 0).map(found, found[0]).join(' and ')).join('; ')
    + '. ' + variables.asked.map(name,
        name + ' is time-sliced with failRequestsGreaterThanOne on nodes this Pod can reach: '
          + (size(SHOWN) <= 10 ? SHOWN.join(', ')
             : [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(i, SHOWN[i]).join(', ')
               + ' and ' + string(size(SHOWN) - 10) + ' more')
          + '.').join(' ')
""").replace("SHOWN", _SHOWN) + (
    "\n+ ' There each unit is one time-slice of a shared physical GPU, not a GPU and not more memory, and the kubelet'"
    " + ' would fail the Pod with UnexpectedAdmissionError and leave it stuck. ' + variables.asked.map(name, variables.fixes[name]).join(' ')")

_MESSAGE = ("a container asks for more than one unit of a GPU that is time-sliced (failRequestsGreaterThanOne) on a node "
            "the Pod can reach; the kubelet would fail the Pod with UnexpectedAdmissionError. Ask for 1 unit, or pin the "
            "Pod to nodes that do not time-slice their GPUs.")

# (variable name, comment in the manifest or None, expression)
_VARIABLES = (
    ("nodes", "Every node on which some name is time-sliced with failRequestsGreaterThanOne (CEL literals are homogeneous, "
              "so one map per field): its name, all of its labels, its config and the names sliced there.", None),
    ("nodeLabels", None, None),
    ("nodeConfigs", None, None),
    ("nodeResources", None, None),
    ("names", None, None),
    ("fixes", "resource name -> the fix the message offers", None),
    ("ignoredLabels", "labels left out of the snapshot (their values change on their own): a requirement on one counts as met", None),
    ("configLabel", None, None),
    ("nodeName", None, "object.spec.?nodeName.orValue('')"),
    ("selector", None, "object.spec.?nodeSelector.orValue({})"),
    ("required", None, "object.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution"),
    ("reachable", "The sliced nodes this Pod may land on. With nodeName, that node and no other: the Pod never meets the "
                  "scheduler, and its kubelet allocates devices before it checks the selector, so a contradicting "
                  "nodeSelector or affinity does not keep it away. Without nodeName, as the scheduler reads the placement: "
                  "every nodeSelector entry, and one required node affinity term whose requirements all hold (an empty "
                  "term matches nothing; a requirement on an ignored label counts as met). Same rules as reachable_nodes "
                  "in module_utils/requests/guards.py.", _REACHABLE),
    ("guarded", "the sliced names this Pod can reach a node slicing",
     "variables.names.filter(name, variables.reachable.exists(n, name in variables.nodeResources[n]))"),
    ("containers", "init containers (sidecars among them) and containers",
     "object.spec.?initContainers.orValue([]) + object.spec.?containers.orValue([])"),
    ("offenders", "containers asking for more than one unit (limit or request) of a guarded name",
     "variables.containers.filter(c, variables.guarded.exists(name,\n" + _OVER_ONE),
    ("asked", "the guarded names some offender asks more than one of",
     "variables.guarded.filter(name, variables.offenders.exists(c,\n" + _OVER_ONE),
)

_HEADER = ("Refuse Pods asking for more than one slice of a time-sliced GPU at the API, before scheduling. Upstream, "
           "failRequestsGreaterThanOne is only enforced by the kubelet's Allocate call: the Pod fails with "
           "UnexpectedAdmissionError and stays until deleted.\n"
           "Generated by the gpushare.k8s.admission_guard role from the device-plugin configs and the cluster's Nodes: a "
           "snapshot of the time-sliced nodes and their labels. Re-run the role whenever a node is added or relabelled, or "
           "a config changes.\n"
           "Time-sliced nodes: %s.")


def _snapshot_variables(params):
    """The variables that carry the snapshot of the time-sliced nodes, by name."""
    nodes = (params or {}).get("nodes") or []
    names = [node["name"] for node in nodes]

    def by_node(field):
        return _cel({node["name"]: node[field] for node in nodes})

    return {
        "nodes": _cel_strings(names),
        "nodeLabels": by_node("labels"),
        "nodeConfigs": by_node("config"),
        "nodeResources": by_node("resources"),
        "names": _cel_strings((params or {}).get("names") or []),
        "fixes": _cel((params or {}).get("fixes") or {}),
        "ignoredLabels": _cel_strings((params or {}).get("ignored") or []),
    }


def guard_objects(params, settings=None):
    """The ValidatingAdmissionPolicy and its binding, as dicts: ``[policy, binding]``.

    ``params`` is what :func:`guard_params` returns (the snapshot of the time-sliced nodes), ``settings`` the role's
    settings (:func:`guard_settings`, checked first). Every value reaches the objects as data: the snapshot as CEL
    literals (JSON) inside the expressions, the names and selectors as fields.
    """
    s = guard_settings(settings or {})
    params = plain(params or {})
    literals = dict(_snapshot_variables(params), configLabel=_cel(s["config_label"]))
    constraints = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]}
    if s["excluded_namespaces"]:
        constraints["namespaceSelector"] = {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(s["excluded_namespaces"])}]}
    policy = {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": s["name"]},
        "spec": {
            "failurePolicy": s["failure_policy"],
            "matchConstraints": constraints,
            "matchConditions": [{"name": "create-or-placement-change", "expression": _MATCH_CONDITION}],
            "variables": [{"name": name, "expression": literals[name] if expression is None else expression}
                          for name, _note, expression in _VARIABLES],
            "validations": [{"expression": "size(variables.offenders) == 0", "reason": "Forbidden", "message": _MESSAGE,
                             "messageExpression": _MESSAGE_EXPRESSION}],
        },
    }
    binding = {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": s["name"]},
        "spec": {"policyName": s["name"], "validationActions": list(s["validation_actions"])},
    }
    if s["namespace_selector"]:
        binding["spec"]["matchResources"] = {"namespaceSelector": s["namespace_selector"]}
    return [policy, binding]


# --- The same objects as the file the lab keeps ---------------------------------------------------------------------

if yaml is not None:
    class _Dumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
        """Block style with sequences indented under their key; lists of plain values in flow style
        (``resources: [pods]``); multi-line strings (CEL) as literal blocks."""

        def increase_indent(self, flow=False, indentless=False):
            return super().increase_indent(flow, False)

    def _represent_list(dumper, data):
        flow = all(isinstance(item, (str, int, float, bool)) and "\n" not in str(item) for item in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    def _represent_str(dumper, data):
        style = "|" if "\n" in data and data == data.strip() and all(line == line.rstrip() for line in data.split("\n")) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    _Dumper.add_representer(list, _represent_list)
    _Dumper.add_representer(str, _represent_str)


def _dump(data, indent=""):
    if yaml is None:
        raise ConfigError("", "cannot render: the Python library PyYAML is missing", "install it (pip install PyYAML)")
    text = yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True, width=120)
    return "".join(indent + line + "\n" if line else "\n" for line in text.splitlines())


def _comment(text, indent=""):
    """``text`` as YAML comment lines, wrapped; a line break in ``text`` only starts another comment line."""
    lines = []
    for paragraph in str(text).replace("\r", "\n").split("\n"):
        lines.extend(textwrap.wrap(paragraph, width=110 - len(indent), break_on_hyphens=False, break_long_words=False) or [""])
    return "".join(("%s# %s" % (indent, line)).rstrip() + "\n" for line in lines)


def guard_manifest(params, settings=None):
    """The objects of :func:`guard_objects` as YAML (two documents), each part commented; loading it gives exactly those objects."""
    policy, binding = guard_objects(params, settings)
    spec = policy["spec"]
    comments = {name: comment for name, comment, _expression in _VARIABLES}
    nodes = [node["name"] for node in (params or {}).get("nodes") or []]
    text = _comment(_HEADER % (", ".join(nodes) or "none"))
    text += _dump({key: policy[key] for key in ("apiVersion", "kind", "metadata")}) + "spec:\n"
    text += _dump({key: spec[key] for key in ("failurePolicy", "matchConstraints")}, "  ")
    text += _comment("Updates are only checked when they change the placement (gated Pods may gain a node selector or "
                     "affinity); other updates of existing Pods are never blocked.", "  ")
    text += _dump({"matchConditions": spec["matchConditions"]}, "  ") + "  variables:\n"
    for variable in spec["variables"]:
        if comments.get(variable["name"]):
            text += _comment(comments[variable["name"]], "    ")
        text += _dump([variable], "    ")
    text += _dump({"validations": spec["validations"]}, "  ")
    return text + "---\n" + _dump(binding)
