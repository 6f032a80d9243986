# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The inventory's GPU model: what each node advertises, which Pods the lab places where.

One home for the rules every role, filter and module applies to ``gpushare_nodes``,
``gpushare_device_plugin_configs`` and the lab's workloads: a node advertises its config's
replicated resources, or its MIG layout's instances (mixed strategy), or ``nvidia.com/gpu``.
The filters of the same names are adapters that turn these errors into filter errors.
Every error is a ``ValueError`` whose text names the field and the fix. No Ansible import.
"""

from __future__ import annotations

import re

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

from ..nvidia import device_plugin as _dp
from ..nvidia import gpu_features as _features
from ..hardware import node as _node
from ..nvidia import gpu_operator as _operator
from ..hardware import mig as _mig
from ..errors import InputError, is_int as _is_int
from ..names import CONFIG_LABEL, DNS_LABEL_RE, DNS_SUBDOMAIN_RE, LABEL_NAME_RE


__all__ = [
    "CONFIG_LABEL",
    "MIG_STRATEGY_LABEL",
    "InputError",
    "check_config_name",
    "check_name",
    "config",
    "configmap_object",
    "gpu_inventory",
    "lab_name_errors",
    "manifest_text",
    "mig_spec",
    "namespace_changes",
    "node_gpu_resources",
    "nodes_advertising",
    "place",
    "pod_objects",
    "quota_object",
    "render_configs",
]

# Node labels the lab places workloads by (steps 2 and 3), from their homes.
MIG_STRATEGY_LABEL = _features.MIG_STRATEGY_LABEL
PRODUCT_LABEL = _features.GPU + "product"

# What Kubernetes requires of the names the lab writes, checked before anything is written or sent. fullmatch, never
# match with "$": "$" also matches before a trailing newline, so "gpu-share\n" would pass.
_DNS_LABEL_RE = DNS_LABEL_RE
_DNS_SUBDOMAIN_RE = DNS_SUBDOMAIN_RE
_CONFIGMAP_KEY_RE = re.compile(r"[-._a-zA-Z0-9]+")
RESERVED_NAMESPACES = ("default",)
RESERVED_NAMESPACE_PREFIX = "kube-"
POD_SECURITY_PREFIX = "pod-security.kubernetes.io/"
POD_SECURITY_MODES = ("enforce", "audit", "warn")
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
# kind: (what it must be, the longest it may be, the regex)
_NAME_KINDS = {
    "namespace": ("a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)",
                  63, _DNS_LABEL_RE),
    "name": ("a DNS-1123 subdomain (at most 253 lower-case letters, digits, '-' and '.', each dot-separated part starting and "
             "ending with a letter or digit)", 253, _DNS_SUBDOMAIN_RE),
    # the lab names each Pod's one container after the Pod, and a container name is a DNS-1123 label
    "pod": ("a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit; "
            "the Pod's container is named after it)", 63, _DNS_LABEL_RE),
}
_EXAMPLES = {"namespace": "gpu-share", "name": "device-plugin-configs", "pod": "notebook"}
# The lab's inventory fields that hold names: (field, kind, where the name is: the value, or each entry's name, or the
# mapping's name, example).
_LAB_NAMES = (
    ("gpushare_namespace", "namespace", "value", "gpu-share"),
    ("gpushare_team_namespace", "namespace", "value", "team-a"),
    ("gpushare_device_plugin_namespace", "namespace", "value", "gpu-share"),
    ("gpushare_device_plugin_configmap", "name", "value", "device-plugin-configs"),
    ("gpushare_team_quota", "name", "mapping", "gpu-quota"),
    ("gpushare_team_pods", "pod", "each", "team-a-job-1"),
    ("gpushare_team_over_pod", "pod", "value", "team-over"),
    ("gpushare_split_pods", "pod", "each", "mig-job"),
    ("gpushare_placement", "pod", "each", "notebook"),
    ("gpushare_nodes", "name", "each", "lab-node-0"),
    ("gpushare_dra_nodes", "name", "each", "dra-node-0"),
    ("gpushare_operator_namespace", "namespace", "value", "gpu-operator"),
    ("gpushare_operator_cluster_policy", "name", "value", "cluster-policy"),
    ("gpushare_operator_mig_parted_configmap", "name", "value", "gpushare-mig-parted-config"),
)
_POD_KEYS = {"name", "resource", "count", "node_selector", "labels"}


def config(value, name=None):
    """A config given as a mapping or as YAML text, validated and normalised."""
    if isinstance(value, (str, bytes)):
        return _dp.parse_config(value, name=name)
    return _dp.validate_config(value, name=name)


def check_config_name(name):
    """``name`` as a config name (a ConfigMap key and a label value), or ConfigError."""
    if not isinstance(name, str) or len(name) > 63 or not LABEL_NAME_RE.fullmatch(name):
        raise _dp.ConfigError(
            "configs[%r]" % (name,),
            "a config name must be a valid ConfigMap key and label value (1-63 letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit)",
            "rename the config, e.g. shared or time-sliced-4",
        )
    return str(name)


def _shown(value, limit=60):
    """``value`` as a short, single-line repr for an error message (an injected manifest is not echoed whole)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return text[:limit] + "..." + (text[-1] if isinstance(value, str) else "")  # a string's closing quote


def check_name(value, kind, field, example=None):
    """``value`` as a name of ``kind`` (namespace, name or pod), or ``InputError`` naming ``field`` and the fix.

    A namespace is a DNS-1123 label and never ``default`` nor ``kube-*`` (they belong to the cluster: the lab labels its
    namespaces and runs Pods and a quota there); an object name a DNS-1123 subdomain; a lab Pod's name a DNS-1123
    label (its container is named after it). A whole number is a name as its text.
    """
    if kind not in _NAME_KINDS:
        raise ValueError("check_name: kind must be one of %s, got %r" % (", ".join(sorted(_NAME_KINDS)), kind))
    example = example or _EXAMPLES[kind]
    if _is_int(value):
        value = str(value)
    what, longest, pattern = _NAME_KINDS[kind]
    if not isinstance(value, str) or len(value) > longest or not pattern.fullmatch(value):
        raise InputError(field, "%s is not %s" % (_shown(value), what), "use a name such as %s" % example)
    if kind == "namespace" and (value in RESERVED_NAMESPACES or value.startswith(RESERVED_NAMESPACE_PREFIX)):
        raise InputError(
            field,
            "namespace %r belongs to the cluster (default and kube-* hold what every user and the control plane rely on; the "
            "lab sets its namespaces' Pod Security labels and runs its Pods and quota there)" % value,
            "use a namespace of the lab's own, such as %s" % example,
        )
    return str(value)


def check_names(values, kind, field, example=None):
    """``values`` (one name, or a list of names: ``field[i]``) checked by :func:`check_name`; returned as they are."""
    if isinstance(values, (list, tuple)):
        for index, value in enumerate(values):
            check_name(value, kind, "%s[%d]" % (field, index), example)
    else:
        check_name(values, kind, field, example)
    return values


def lab_name_errors(settings):
    """One message per name of the lab's inventory fields (``{gpushare_<field>: value}``) Kubernetes would refuse.

    Fields not given are not checked; entries of the Pod and node lists without a ``name`` are left to the checks
    that require one. The team's namespace must not be the lab's own: the team's quota would limit the lab's Pods.
    """
    if not isinstance(settings, dict):
        raise ValueError("lab_name_errors: expected a mapping of the lab's fields, got %s" % type(settings).__name__)
    known = {field for field, _kind, _where, _example in _LAB_NAMES}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError("lab_name_errors: %s is not a field holding a name; use %s" % (unknown[0], ", ".join(sorted(known))))
    errors = []

    def check(value, kind, field, example):
        try:
            check_name(value, kind, field, example)
        except InputError as exc:
            errors.append(str(exc) + ".")

    for field, kind, where, example in _LAB_NAMES:
        if field not in settings:
            continue
        value = settings[field]
        if where == "value":
            check(value, kind, field, example)
        elif where == "mapping":
            if isinstance(value, dict) and "name" in value:
                check(value["name"], kind, field + ".name", example)
        elif isinstance(value, (list, tuple)):
            for index, entry in enumerate(value):
                if isinstance(entry, dict) and "name" in entry:
                    check(entry["name"], kind, "%s[%d].name" % (field, index), example)
    lab, team = settings.get("gpushare_namespace"), settings.get("gpushare_team_namespace")
    if isinstance(lab, str) and lab == team and not any(error.startswith(("gpushare_namespace:", "gpushare_team_namespace:")) for error in errors):
        errors.append(str(InputError(
            "gpushare_team_namespace",
            "%r is also the lab's own namespace (gpushare_namespace): the team's quota would count, and refuse, the lab's "
            "Pods of steps 4 and 8, and the team's Pods would run beside them" % team,
            "give the team a namespace of its own, such as team-a (or move the lab's, gpushare_namespace)",
        )) + ".")
    return errors


def pod_security_labels(levels):
    """``{pod-security.kubernetes.io/<mode>: <level>}`` of ``{mode: level}`` (modes enforce, audit, warn), checked."""
    if levels is None:
        return {}
    if not isinstance(levels, dict):
        raise InputError("pod_security", "must be a mapping of mode to level, got %s" % _shown(levels),
                         "write e.g. {enforce: baseline, warn: restricted, audit: restricted}, or {} to leave the labels alone")
    labels = {}
    for mode in sorted(levels, key=str):
        level = levels[mode]
        if mode not in POD_SECURITY_MODES:
            raise InputError("pod_security.%s" % mode, "is not a Pod Security mode", "use %s" % ", ".join(POD_SECURITY_MODES))
        if level not in POD_SECURITY_LEVELS:
            raise InputError("pod_security.%s" % mode, "%s is not a Pod Security level" % _shown(level),
                             "use %s" % ", ".join(POD_SECURITY_LEVELS))
        labels[POD_SECURITY_PREFIX + str(mode)] = str(level)
    return labels


def namespace_changes(current, labels=None, pod_security=None):
    """The writes that give each namespace ``labels`` and its Pod Security labels, keeping every other label it has.

    ``current`` is ``objects_info``'s ``results`` for ``names`` (one entry per namespace: ``item.name``, ``resources``).
    Returns ``[{name, exists, labels, pod_security_only}]`` for the namespaces to create (with all the labels) or to
    patch (with only the labels that are missing or differ); ``pod_security_only`` says the patch sets Pod Security
    labels only. A label of ``labels`` wins over the Pod Security label of the same key.
    """
    if labels is not None and not isinstance(labels, dict):
        raise InputError("labels", "must be a mapping of label to value, got %s" % _shown(labels), "write e.g. {team: a}")
    security = pod_security_labels(pod_security)
    wanted = dict(security, **_dp.plain(labels or {}))
    changes = []
    for index, result in enumerate(current or []):
        name = check_name((result.get("item") or {}).get("name"), "namespace", "namespaces[%d]" % index)
        found = result.get("resources") or []
        if not found:
            changes.append({"name": name, "exists": False, "labels": dict(wanted), "pod_security_only": False})
            continue
        have = (found[0].get("metadata") or {}).get("labels") or {}
        patch = {key: value for key, value in wanted.items() if have.get(key) != value}
        if patch:
            only = all(key in security and (labels or {}).get(key) is None for key in patch)
            changes.append({"name": name, "exists": True, "labels": patch, "pod_security_only": only})
    return changes


def render_configs(configs):
    """A mapping of config name -> config as name -> YAML text (ConfigMap data), names sorted."""
    if not isinstance(configs, dict) or not configs:
        raise _dp.ConfigError("configs", "must be a non-empty mapping of config name to config", "give e.g. {default: {version: v1}}")
    result = {}
    for name in sorted(configs, key=str):
        checked = check_config_name(name)
        result[checked] = _dp.render_config(config(configs[name], checked), name=checked)
    return result


def mig_spec(mig, where, node_gpus=None):
    """``{nvidia.com/mig-<profile>: gpus x count}`` of a ``{product, profile, gpus?, count?}`` layout at ``where``
    (:func:`mig.node_mig` reads the block)."""
    return _mig.layout_resources(_mig.node_mig(mig, where, node_gpus), where)


def node_gpu_resources(node, configs=None):
    """Everything one inventory node (``{name, gpus, config?|mig?}``) advertises; a MIG node advertises only MIG resources.

    The node is read by the one node model (:func:`gpu_node.read_node`, the device-plugin track); a ``config`` must name
    one of ``configs``."""
    return _advertised(_node.read_node(node, _node.DEVICE_PLUGIN, configs or {}), configs)


def _advertised(model, configs):
    """What a device-plugin node of the model (:class:`gpu_node.GpuNode`) advertises."""
    if model.sharing == "mig":
        return _mig.layout_resources(model.mig, "%s.mig" % (model.name or "node"))
    if model.sharing == "whole":
        return {_dp.DEFAULT_RESOURCE: model.gpus}
    return _dp.advertised_resources(config(configs[model.config], str(model.config)), model.gpus)


def gpu_inventory(nodes, configs=None):
    """``{node name: {resource: count}}``: what every inventory node advertises (a node listed twice is refused)."""
    if not isinstance(nodes, (list, tuple)):
        raise ValueError("gpu_inventory: expected the list of inventory nodes ({name, gpus, config|mig})")
    return {str(model.name): _advertised(model, configs) for model in _node.read_nodes(nodes, _node.DEVICE_PLUGIN, configs or {}, field="nodes")}


def node_entries(nodes, configs=None, config_label=CONFIG_LABEL, mig_strategy="mixed", mode="advertise"):
    """The ``nodes`` entries of ``gpushare.k8s.node_resources`` that label, and advertise, inventory nodes as the lab does.

    ``mode`` ``advertise`` (kwok nodes): a node with ``config`` (or neither config nor mig) gets ``config_label`` set to
    its config (removed when it has none) and advertises what ``node_gpu_resources`` computes; a MIG node gets the MIG
    strategy and GPU product labels, its MIG resources, and loses ``nvidia.com/gpu`` (the mixed strategy exposes only
    its MIG profiles). ``operator`` (the GPU Operator advertises): labels only, the config label, or on a MIG node the
    MIG manager's layout label. Every node is validated first.
    """
    if not isinstance(nodes, (list, tuple)):
        raise ValueError("node_entries: expected the list of inventory nodes ({name, gpus, config|mig})")
    if mode not in ("advertise", "operator"):
        raise ValueError("node_entries: mode must be advertise or operator, got %r" % (mode,))
    entries = []
    for node in nodes:
        resources = node_gpu_resources(node, configs)
        mig = node.get("mig") is not None
        if mode == "operator":
            labels = {_operator.MIG_CONFIG_LABEL: _operator.node_layout(node)[0]} if mig else {config_label: node.get("config")}
            entries.append({"name": node["name"], "labels": labels})
        elif mig:
            entries.append({"name": node["name"], "labels": {MIG_STRATEGY_LABEL: mig_strategy, PRODUCT_LABEL: node["mig"]["product"]},
                            "resources": resources, "remove_resources": [_dp.DEFAULT_RESOURCE]})
        else:
            entries.append({"name": node["name"], "labels": {config_label: node.get("config")}, "resources": resources})
    return entries


def feature_labels(node, configs=None, product=None):
    """The labels gpu-feature-discovery would set on one inventory node (validates the node, its config and MIG layout).

    ``product`` is the GPU product of a node without ``mig`` that names none.
    """
    advertised = node_gpu_resources(node, configs)
    name = node.get("config")
    node_config = config(configs[name], str(name)) if name is not None else None
    return _features.feature_labels(node, advertised, node_config, product)


def feature_label_entries(nodes, configs=None, product=None):
    """``gpushare.k8s.node_resources`` ``nodes`` entries giving every inventory node its gpu-feature-discovery labels.

    Each entry also removes every other label this model may set (``gpu_features.prunable_labels``), so a label an
    earlier layout or config left goes. Every node is validated before the list is returned.
    """
    if not isinstance(nodes, (list, tuple)):
        raise ValueError("feature_label_entries: expected the list of inventory nodes ({name, gpus, config|mig, product?})")
    prune = dict.fromkeys(_features.prunable_labels())
    return [{"name": node["name"], "labels": dict(prune, **feature_labels(node, configs, product))} for node in nodes]


def nodes_advertising(inventory, resource):
    """Names of the nodes of a gpu_inventory result that advertise ``resource`` (sorted)."""
    return sorted(name for name, resources in inventory.items() if int(resources.get(resource, 0)) > 0)


def place(workloads, nodes, configs):
    """[(Pod entry, names of the inventory nodes it fits)] for ``[{name, place_on: mig|<config name>}]``.

    ``mig`` selects the MIG mixed-strategy nodes and asks for their profile's resource; a config name selects the
    nodes labelled with that config and asks for the resource that config advertises. One unit each.
    """
    inventory = gpu_inventory(nodes, configs)
    placed = []
    for index, workload in enumerate(workloads or []):
        where = f"placement[{index}]"
        if not isinstance(workload, dict) or not workload.get("name") or not workload.get("place_on"):
            raise ValueError(f"{where}: each workload needs 'name' and 'place_on' (mig or a device-plugin config name)")
        target = str(workload["place_on"])
        if target == "mig":
            targets = [str(n["name"]) for n in nodes if n.get("mig")]
            selector = {MIG_STRATEGY_LABEL: "mixed"}
        else:
            targets = [str(n["name"]) for n in nodes if n.get("config") == target]
            selector = {CONFIG_LABEL: target}
        if not targets:
            choices = sorted({str(n["config"]) for n in nodes if n.get("config")} | ({"mig"} if any(n.get("mig") for n in nodes) else set()))
            raise ValueError(f"{where}.place_on: no node uses {target!r}; use one of {', '.join(choices)}")
        resource = sorted(inventory[targets[0]])[0]
        pod = {"name": str(workload["name"]), "resource": resource, "node_selector": selector}
        placed.append((pod, sorted(n for n in targets if int(inventory[n].get(resource, 0)) > 0)))
    return placed


def pod_objects(pods, image, namespace=None, labels=None):
    """Pods that each ask for GPU units: ``[{name, resource, count?, node_selector?, labels?}]`` as Pod objects."""
    if not isinstance(pods, (list, tuple)):
        raise ValueError("gpu_pods: expected a list of {name, resource, count, node_selector, labels}")
    docs = []
    for index, pod in enumerate(pods):
        where = f"gpu_pods[{index}]"
        if not isinstance(pod, dict) or not pod.get("name") or not pod.get("resource"):
            raise ValueError(f"{where}: each Pod needs 'name' and 'resource' (e.g. {{name: notebook, resource: nvidia.com/gpu}})")
        unknown = sorted(set(pod) - _POD_KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_POD_KEYS))}")
        count = pod.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"{where}.count: {count!r} is not a positive integer; extended resources are whole units, e.g. 1")
        metadata = {"name": check_name(pod["name"], "pod", where + ".name")}
        if namespace:
            metadata["namespace"] = check_name(namespace, "namespace", "gpu_pods namespace")
        merged_labels = dict(labels or {}, **(pod.get("labels") or {}))
        if merged_labels:
            metadata["labels"] = {str(k): str(v) for k, v in sorted(merged_labels.items())}
        spec = {}
        if pod.get("node_selector"):
            spec["nodeSelector"] = {str(k): str(v) for k, v in sorted(pod["node_selector"].items())}
        spec["containers"] = [{
            "name": metadata["name"],
            "image": str(image),
            # Extended resources go in limits; requests default to the same value.
            "resources": {"limits": {str(pod["resource"]): count}},
        }]
        docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    return docs


def configmap_object(data, name, namespace, fields=("name", "namespace")):
    """A ConfigMap ``name`` in ``namespace`` holding ``data`` (key -> text, keys sorted), every name checked first.

    ``fields`` names the two settings the name and the namespace come from, for the error messages.
    """
    name = check_name(name, "name", fields[0], "device-plugin-configs")
    namespace = check_name(namespace, "namespace", fields[1])
    if not isinstance(data, dict):
        raise InputError("data", "must be a mapping of key to text, got %s" % _shown(data), "give e.g. {default: 'version: v1'}")
    checked = {}
    for key in sorted(data, key=str):
        if not isinstance(key, str) or len(key) > 253 or not _CONFIGMAP_KEY_RE.fullmatch(key):
            raise InputError("data[%s]" % _shown(key), "a ConfigMap key is at most 253 letters, digits, '-', '_' or '.'",
                             "rename the key, e.g. shared")
        if not isinstance(data[key], str):
            raise InputError("data.%s" % key, "must be text, got %s" % _shown(data[key]), "render the value as text first")
        checked[str(key)] = str(data[key])
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": checked}


def quota_object(resources, units, name, namespace, fields=("name", "namespace", "units")):
    """A ResourceQuota ``name`` in ``namespace`` limiting ``requests.<resource>`` to ``units`` for each of ``resources``.

    Extended resources are quota'd only as ``requests.<name>``; the names come sorted. ``fields`` names the settings
    the name, the namespace and the units come from, for the error messages.
    """
    name = check_name(name, "name", fields[0], "gpu-quota")
    namespace = check_name(namespace, "namespace", fields[1], "team-a")
    if isinstance(units, str) and units.isdigit() and units.isascii():
        units = int(units)
    if not _is_int(units) or units < 0:
        raise InputError(fields[2], "%s is not a whole number of 0 or more" % _shown(units), "give the GPU units the team may request, e.g. 2")
    if isinstance(resources, (str, bytes)) or not isinstance(resources, (list, tuple)) or not resources:
        raise InputError("resources", "must be a non-empty list of resource names, got %s" % _shown(resources), "give e.g. [nvidia.com/gpu]")
    for index, resource in enumerate(resources):
        if not isinstance(resource, str) or not resource or any(char.isspace() for char in resource):
            raise InputError("resources[%d]" % index, "%s is not a resource name" % _shown(resource), "give e.g. nvidia.com/gpu")
    hard = {"requests." + str(resource): str(units) for resource in sorted(set(resources))}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": namespace}, "spec": {"hard": hard}}


if yaml is not None:
    class _ManifestDumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
        """Block style with sequences indented under their key; multi-line text as a literal block (``|-``), text YAML
        would read as another type (``"2"``) in double quotes."""

        def increase_indent(self, flow=False, indentless=False):
            return super().increase_indent(flow, False)

    def _represent_text(dumper, data):
        if "\n" in data:
            style = "|"
        elif dumper.resolve(yaml.ScalarNode, data, (True, False)) != "tag:yaml.org,2002:str":
            style = '"'
        else:
            style = None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    _ManifestDumper.add_representer(str, _represent_text)


def manifest_text(objects):
    """An object, or a list of objects, as the YAML file the lab writes and applies (``---`` between documents).

    Built from data, so no value can end a document or start another: a value that holds a line break is a literal
    block (or, where YAML cannot hold it as one, a quoted string).
    """
    if yaml is None:
        raise ValueError("manifest_text: the Python library PyYAML is missing. Fix: install it (pip install PyYAML)")
    documents = objects if isinstance(objects, (list, tuple)) else [objects]
    if not documents or not all(isinstance(doc, dict) for doc in documents):
        raise ValueError("manifest_text: expected an object (a mapping) or a non-empty list of objects")
    return yaml.dump_all([_dp.plain(doc) for doc in documents], Dumper=_ManifestDumper, default_flow_style=False,
                         sort_keys=False, allow_unicode=True, width=4096, explicit_start=len(documents) > 1)
