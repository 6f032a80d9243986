# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The NVIDIA GPU Operator's contract as the collection models it (operator mode).

On a cluster where the GPU Operator (or the lab cluster's stand-in) owns node status and the
GPU labels, the collection writes configuration and then verifies what comes back:

* ``ClusterPolicy`` ``spec.devicePlugin.config.{name,default}``, ``spec.mig.strategy`` and
  ``spec.migManager.config.{name,default}`` (:func:`cluster_policy_patch`);
* a mig-parted config holding the lab's MIG layouts (:func:`mig_parted_config`), computed from the
  inventory by the same geometry that validates it (:mod:`mig`);
* node labels ``nvidia.com/device-plugin.config`` and ``nvidia.com/mig.config``.

What a node then advertises, and which labels gpu-feature-discovery puts on it, is computed by one
function, :func:`node_state`, from the node's physical GPUs, the MIG state of each GPU, the selected
device-plugin config and the MIG strategy. The roles call it (through :func:`predict`) with the
inventory's view of the node, as the collection's prediction of what NVIDIA's code will advertise. The lab's
stand-in does not call it: its nodes are labelled by NVIDIA's GFD and their status written from NVIDIA's device
plugin, over the mock NVML (``hardware/nvml_state``), and the differential tests hold this model to that code.
:func:`compare` and :func:`likely_causes` turn a difference into an error a user can act on.

Pure Python (PyYAML for the mig-parted text only), no Ansible import.
"""

from __future__ import annotations

import hashlib
import json

from . import device_plugin as _dp
from . import gpu_features as _features
from .. import names as _names
from ..hardware import mig as _mig
from ..errors import GpushareError, InputError, is_int as _is_int

try:
    import yaml
except ImportError:  # only rendering and parsing mig-parted text need it
    yaml = None


__all__ = [
    "CLUSTER_POLICY_GROUP",
    "CLUSTER_POLICY_PLURAL",
    "CLUSTER_POLICY_VERSION",
    "CONFIG_DIGESTS_ANNOTATION",
    "DEVICE_PLUGIN_CONFIG_LABEL",
    "DEVICE_PLUGIN_DAEMONSET",
    "GFD_DAEMONSET",
    "LayoutError",
    "MIG_CONFIG_LABEL",
    "MIG_STATE_LABEL",
    "OperatorError",
    "POLICY_PATHS",
    "apply_layout",
    "cluster_policy_patch",
    "compare",
    "config_restarts",
    "layout_digest",
    "likely_causes",
    "mig_parted_config",
    "node_layout",
    "node_state",
    "parse_mig_parted",
    "predict",
    "render_mig_parted",
]

CLUSTER_POLICY_GROUP = "nvidia.com"
CLUSTER_POLICY_VERSION = "v1"
CLUSTER_POLICY_PLURAL = "clusterpolicies"
CLUSTER_POLICY_KIND = "ClusterPolicy"

DEVICE_PLUGIN_CONFIG_LABEL = _names.CONFIG_LABEL
# The operand DaemonSets whose Pods read the device-plugin config (the operator's names); the MPS control daemon's
# (nvidia-device-plugin-mps-control-daemon) mounts it too where it runs.
DEVICE_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"
GFD_DAEMONSET = "gpu-feature-discovery"
# On the Pod template of each operand DaemonSet that mounts the device-plugin ConfigMap: a digest of each config's
# content as of the DaemonSet's last restart by the collection (JSON {key: digest}); writing it is the restart.
CONFIG_DIGESTS_ANNOTATION = "gpushare.k8s/device-plugin-configs"
MIG_CONFIG_LABEL = _names.MIG_CONFIG_LABEL
MIG_STATE_LABEL = _names.MIG_STATE_LABEL
MIG_PARTED_KEY = "config.yaml"
ALL_DISABLED = "all-disabled"
STRATEGIES = ("none", "single", "mixed")
MIG_STATES = ("pending", "success", "failed")

# The simulated hardware of a kwok node (written by the lab cluster when it creates the node) and
# what the stand-in's MIG manager applied to it: the stand-in's equivalent of the GPUs themselves.
HARDWARE_GPUS_ANNOTATION = _names.HARDWARE_GPUS_ANNOTATION
HARDWARE_PRODUCT_ANNOTATION = _names.HARDWARE_PRODUCT_ANNOTATION
MIG_APPLIED_ANNOTATION = "gpushare.k8s/mig-applied"
MIG_FAILURE_ANNOTATION = "gpushare.k8s/mig-failure"


class OperatorError(InputError):
    """Bad operator-mode input. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


class LayoutError(GpushareError):
    """A MIG layout the node's GPUs cannot hold; ``str(error)`` is the reason the MIG manager reports."""


# --------------------------------------------------------------------------
# MIG layouts (mig-parted config)
# --------------------------------------------------------------------------


def layout_name(node):
    """The mig-parted layout name of an inventory node's ``mig`` spec.

    ``all-<profile>`` when every GPU carries the product's full layout (the name upstream's default
    config uses); otherwise ``<profile>-x<count>-on-<mig gpus>-of-<gpus>``.
    """
    return _layout_name(_node_mig(node), node["gpus"], "%s.mig" % node.get("name", "node"))


def _node_mig(node):
    return _mig.node_mig(node["mig"], "%s.mig" % node.get("name", "node"), node["gpus"])


def _layout_name(spec, gpus, where):
    if spec["profile"] is not None and spec["gpus"] == gpus and spec["count"] == _mig.max_instances(spec["product"], spec["profile"]):
        return "all-%s" % spec["profile"]
    name = "%s-on-%d-of-%d" % ("-".join("%s-x%d" % item for item in spec["devices"].items()), spec["gpus"], gpus)
    if len(name) > 63:
        raise OperatorError(where + ".devices", "the layout's name %s is longer than a label value may be (63)" % name,
                            "use fewer profiles in one layout")
    return name


def node_layout(node):
    """``(name, entries)``: the mig-parted layout of an inventory node with ``mig`` (validated by :func:`mig.node_mig`).

    The first ``mig.gpus`` GPUs carry ``mig.count`` (default: the full layout) instances of the
    profile, or the instances of ``mig.devices``; the node's other GPUs are MIG-enabled with no instances (they
    advertise nothing).
    """
    spec = _node_mig(node)
    gpus, mig_gpus, devices = node["gpus"], spec["gpus"], dict(spec["devices"])
    name = _layout_name(spec, gpus, "%s.mig" % node.get("name", "node"))
    if mig_gpus == gpus:
        return name, [{"devices": "all", "mig-enabled": True, "mig-devices": devices}]
    return name, [
        {"devices": list(range(mig_gpus)), "mig-enabled": True, "mig-devices": devices},
        {"devices": list(range(mig_gpus, gpus)), "mig-enabled": True, "mig-devices": {}},
    ]


def mig_parted_config(nodes):
    """The mig-parted config (``{"version": "v1", "mig-configs": {...}}``) holding every MIG node's layout and ``all-disabled``."""
    configs = {ALL_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for node in nodes:
        if node.get("mig") is None:
            continue
        name, entries = node_layout(node)
        if name in configs and configs[name] != entries:  # pragma: no cover - the name encodes the layout
            raise OperatorError("%s.mig" % node.get("name"), "layout %s differs from another node's" % name, "report this")
        configs[name] = entries
    return {"version": "v1", "mig-configs": {key: configs[key] for key in sorted(configs)}}


def render_mig_parted(nodes):
    """:func:`mig_parted_config` as YAML text (stable order), the value of the ConfigMap's ``config.yaml`` key."""
    return _dp.dump_yaml(mig_parted_config(nodes)) + "\n"


def parse_mig_parted(text):
    """``{layout: entries}`` from a mig-parted config's text. Raises :class:`LayoutError` on a malformed config."""
    if yaml is None:  # pragma: no cover - PyYAML is a requirement of the collection
        raise LayoutError("cannot read the mig-parted config: PyYAML is missing")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LayoutError("the mig-parted config is not valid YAML: %s" % exc) from None
    if not isinstance(data, dict) or not isinstance(data.get("mig-configs"), dict):
        raise LayoutError("the mig-parted config has no mig-configs mapping")
    if data.get("version") != "v1":
        raise LayoutError("the mig-parted config's version is %r, not v1" % (data.get("version"),))
    return data["mig-configs"]


def layout_digest(entries):
    """A short digest of a layout's entries: the stand-in re-applies a layout whose content changed."""
    return hashlib.sha256(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def apply_layout(product, gpus, entries):
    """The MIG state of each of ``gpus`` GPUs of ``product`` after applying a layout's ``entries``.

    Returns a list, one item per GPU: ``{"mig": bool, "devices": {profile: count}}``. Raises
    :class:`LayoutError` with the reason when the GPUs cannot hold the layout (the MIG manager's
    ``failed``): an index the node lacks, a profile the product lacks, more instances than fit (several profiles on
    one GPU: more memory or compute slices than it has, or no placement holding them all, :func:`mig.fit_devices`).
    """
    state = [{"mig": False, "devices": {}} for _index in range(gpus)]
    if not isinstance(entries, list) or not entries:
        raise LayoutError("the layout is not a non-empty list of device entries")
    for number, entry in enumerate(entries):
        where = "entry %d" % number
        if not isinstance(entry, dict):
            raise LayoutError("%s is not a mapping" % where)
        devices = entry.get("devices", "all")
        if devices == "all":
            indices = list(range(gpus))
        elif isinstance(devices, list) and all(_is_int(i) for i in devices):
            indices = devices
        else:
            raise LayoutError("%s: devices must be all or a list of GPU indices, got %r" % (where, devices))
        missing = [i for i in indices if not 0 <= i < gpus]
        if missing:
            raise LayoutError("%s names GPU %s, but the node has %d GPU%s" % (where, missing[0], gpus, "" if gpus == 1 else "s"))
        enabled = entry.get("mig-enabled")
        if not isinstance(enabled, bool):
            raise LayoutError("%s: mig-enabled must be true or false" % where)
        instances = entry.get("mig-devices") or {}
        if not isinstance(instances, dict):
            raise LayoutError("%s: mig-devices must be a mapping of profile to count" % where)
        if instances and not enabled:
            raise LayoutError("%s asks for MIG devices on GPUs with MIG disabled" % where)
        if len(instances) > 1:
            try:
                _mig.fit_devices(product, instances)
            except _mig.MigError as exc:
                raise LayoutError("%s: %s" % (where, exc.problem)) from None
        elif instances:
            [(profile, count)] = instances.items()
            try:
                _mig.validate_layout(product, profile, count)
            except _mig.MigError as exc:
                raise LayoutError("%s: %s on %s: %s" % (where, profile, product, exc.problem)) from None
        for index in indices:
            state[index] = {"mig": enabled, "devices": dict(instances)}
    return state


# --------------------------------------------------------------------------
# What a node advertises and how GFD labels it
# --------------------------------------------------------------------------


def node_state(name, product, gpu_state, config=None, strategy="mixed", config_name=None):
    """``(resources, labels)`` of a node with ``gpu_state`` (see :func:`apply_layout`) GPUs of ``product``.

    ``config`` is the selected device-plugin config (a mapping; ``None`` for the plugin's defaults),
    ``strategy`` the MIG strategy the plugin runs with. Mixed: MIG-enabled GPUs advertise
    ``nvidia.com/mig-<profile>`` per instance and nothing without instances; the others advertise
    ``nvidia.com/gpu`` as the config shares it. Single: every GPU MIG-enabled with one profile, each
    MIG device advertised as one ``nvidia.com/gpu``, shared as the config shares ``nvidia.com/gpu`` (time-slicing
    replicas, ``.shared`` with ``renameByDefault``). None: MIG is ignored, every GPU is ``nvidia.com/gpu``.
    Raises :class:`LayoutError` for a state the strategy cannot advertise (upstream: ``MIG-INVALID``), and for an
    MPS config under the mixed strategy or on MIG devices under the single one (NVIDIA's plugin exits at start).
    """
    if strategy not in STRATEGIES:
        raise LayoutError("MIG strategy %r is not one of %s" % (strategy, ", ".join(STRATEGIES)))
    config = _dp.validate_config(config if config is not None else {"version": "v1"}, name=config_name)
    gpus = len(gpu_state)
    mig_gpus = [gpu for gpu in gpu_state if gpu["mig"]] if strategy != "none" else []
    if _dp.sharing_of(config)[0] == _dp.STRATEGY_MPS:
        # NVIDIA's device plugin v0.18.0 exits at start (tests/integration/test_nvidia_device_plugin.py): the node advertises nothing
        if strategy == "mixed":
            raise LayoutError("NVIDIA's device plugin refuses MPS under the mixed MIG strategy ('using --mig-strategy=mixed is not supported with MPS')")
        if strategy == "single" and mig_gpus:
            raise LayoutError("NVIDIA's device plugin refuses MPS for MIG devices under the single MIG strategy "
                              "('sharing using MPS is not supported for MIG devices')")
    plain = gpus - len(mig_gpus)
    resources = {}
    if strategy == "single" and mig_gpus:
        profiles = {profile for gpu in mig_gpus for profile in gpu["devices"]}
        if plain or len(profiles) != 1 or any(not gpu["devices"] for gpu in mig_gpus):
            raise LayoutError("single strategy needs every GPU MIG-enabled with the same one profile (upstream labels the product MIG-INVALID)")
        # the MIG devices are nvidia.com/gpu, shared as the config shares nvidia.com/gpu (NVIDIA's plugin v0.18.0)
        resources.update(_dp.advertised_resources(config, sum(count for gpu in mig_gpus for count in gpu["devices"].values())))
    else:
        if plain:
            resources.update(_dp.advertised_resources(config, plain))
        for gpu in mig_gpus:
            for profile, count in gpu["devices"].items():
                for resource, total in _mig.mig_resources(product, profile, 1, count).items():
                    resources[resource] = resources.get(resource, 0) + total
    if any(gpu["mig"] for gpu in gpu_state) and strategy == "mixed":
        inventory_node = {"name": name, "gpus": gpus, "mig": {"product": product}}
        labels = _features.feature_labels(inventory_node, resources)
    else:
        inventory_node = {"name": name, "gpus": gpus, "product": product, "config": config_name}
        labels = _features.feature_labels(inventory_node, resources, config, mig_strategy=strategy)
    return resources, labels


def _no_mig(gpus):
    return [{"mig": False, "devices": {}} for _index in range(gpus)]


def predict(node, configs, strategy="mixed", default_product=None, default_config=None):
    """What the operator should make of an inventory node: ``{"resources", "labels", "config", "mig_config"}``.

    ``config`` is the device-plugin config label the collection writes (``None`` on a MIG node, which
    runs with the ClusterPolicy default ``default_config``), ``mig_config`` the layout label (``None``
    on a node without ``mig``).
    """
    name = str(node.get("name"))
    gpus = node["gpus"]
    mig = node.get("mig")
    config_name = node.get("config") if mig is None else None
    selected = config_name if config_name is not None else default_config
    if selected is not None and selected not in configs:
        raise OperatorError(
            "%s.config" % name if config_name is not None else "gpushare_operator_default_config",
            "names config %r, which is not among the device-plugin configs (%s)" % (selected, ", ".join(sorted(configs))),
            "use one of the configured names",
        )
    config = configs.get(selected) if selected is not None else None
    if mig is not None:
        product = mig["product"]
        layout, entries = node_layout(node)
        try:
            gpu_state = apply_layout(product, gpus, entries)
        except LayoutError as exc:  # pragma: no cover - node_layout validated the geometry
            raise OperatorError("%s.mig" % name, str(exc), "choose a layout the product holds") from None
    else:
        product = node.get("product") or default_product
        layout, gpu_state = None, _no_mig(gpus)
    try:
        resources, labels = node_state(name, product, gpu_state, config, strategy, config_name=selected)
    except LayoutError as exc:
        field = "%s.config" % name if config_name is not None else "gpushare_operator_default_config"
        raise OperatorError("%s.mig" % name if mig is not None else field, str(exc),
                            "give this node a layout and config NVIDIA's device plugin advertises under MIG strategy %s "
                            "(one profile on every GPU for single; time-slicing, not MPS, on MIG devices)" % strategy) from None
    return {"resources": resources, "labels": labels, "config": config_name, "mig_config": layout}


# --------------------------------------------------------------------------
# ClusterPolicy
# --------------------------------------------------------------------------


# Every ClusterPolicy field the collection sets (the leaves of cluster_policy_patch): the configure-only role's undo
# puts back these and no other (sharing_record refuses a record naming another).
POLICY_PATHS = (("devicePlugin", "config", "name"), ("devicePlugin", "config", "default"), ("mig", "strategy"),
                ("migManager", "config", "name"), ("migManager", "config", "default"))


def cluster_policy_patch(device_plugin_configmap, default_config, strategy, mig_parted_configmap, default_layout=ALL_DISABLED):
    """The merge patch pointing a ClusterPolicy at the collection's ConfigMaps (validated); it sets :data:`POLICY_PATHS`."""
    for path, value in (
        ("gpushare_device_plugin_configmap", device_plugin_configmap),
        ("gpushare_operator_default_config", default_config),
        ("gpushare_operator_mig_parted_configmap", mig_parted_configmap),
    ):
        if not isinstance(value, str) or not _names.LABEL_NAME_RE.fullmatch(value) or len(value) > 63:
            raise OperatorError(path, "%r is not a valid name (letters, digits, '-', '_', '.'; at most 63)" % (value,), "set a ConfigMap key or name")
    if default_layout not in (ALL_DISABLED, ""):
        raise OperatorError("gpushare_operator_default_layout",
                            "must be %s or empty (NVIDIA's ClusterPolicy schema allows only these for migManager.config.default), got %r"
                            % (ALL_DISABLED, default_layout), "give a node its own layout with its nvidia.com/mig.config label")
    if strategy not in ("single", "mixed"):
        raise OperatorError("gpushare_operator_mig_strategy", "must be single or mixed, got %r" % (strategy,),
                            "use mixed when not every GPU of a node is MIG-enabled")
    return {
        "spec": {
            "devicePlugin": {"config": {"name": device_plugin_configmap, "default": default_config}},
            "mig": {"strategy": strategy},
            "migManager": {"config": {"name": mig_parted_configmap, "default": default_layout}},
        }
    }


# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------


def _config_digests(data):
    return {str(key): hashlib.sha256(str(text).encode("utf-8")).hexdigest()[:12] for key, text in (data or {}).items()}


def config_restarts(daemonsets, configmap, before, after):
    """``[{name, changed, definition}]``: the patches (``definition``) that restart each DaemonSet of ``daemonsets`` (as
    listed) whose Pods mount ConfigMap ``configmap`` when a config they may have loaded changed, as ``kubectl rollout
    restart`` would; ``[]`` when none did.

    NVIDIA's config-manager points the plugin (and GFD) at a config only when the node's label changes, and the
    operator does not watch the ConfigMap, so an edited config reaches a node at its Pod's next start. A config counts
    as changed when its content now (``after``, the ConfigMap's data) differs from ``before`` (the data before this
    run wrote it; ``None``: there was none) or from the digest the DaemonSet's last such restart recorded
    (:data:`CONFIG_DIGESTS_ANNOTATION`, which also covers a run stopped between the write and the restart), or when
    it is gone. A config only added changes nothing a Pod loaded. Each patch writes the new digests into the Pod
    template's annotations (the same content gives the same annotation: a second run restarts nothing); ``changed``
    names the configs that changed.
    """
    now = _config_digests({key: text for key, text in (after or {}).items() if text is not None})  # null: a key a merge patch removes
    earlier = _config_digests(before)
    patches = []
    for daemonset in daemonsets or []:
        metadata = daemonset.get("metadata") or {}
        template = (daemonset.get("spec") or {}).get("template") or {}
        volumes = (template.get("spec") or {}).get("volumes") or []
        if not any((volume.get("configMap") or {}).get("name") == configmap for volume in volumes):
            continue
        try:
            recorded = json.loads(((template.get("metadata") or {}).get("annotations") or {}).get(CONFIG_DIGESTS_ANNOTATION) or "{}")
        except ValueError:
            recorded = {}
        recorded = recorded if isinstance(recorded, dict) else {}
        changed = sorted({key for key, digest in list(earlier.items()) + list(recorded.items()) if now.get(key) != digest})
        if changed:
            patches.append({"name": metadata.get("name"), "changed": changed, "definition": {
                "apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": metadata.get("name"), "namespace": metadata.get("namespace")},
                "spec": {"template": {"metadata": {"annotations": {CONFIG_DIGESTS_ANNOTATION: json.dumps(now, sort_keys=True)}}}},
            }})
    return patches


def _labels(node):
    return (node.get("metadata") or {}).get("labels") or {}


def compare(node, expected):
    """Differences between a Node object and :func:`predict`'s ``expected``: a list of ``(what, expected, seen)``.

    Checks ``nvidia.com/mig.config.state`` (``success`` when a layout is expected), every expected
    resource in capacity and allocatable, GPU resources advertised but not expected (e.g.
    ``nvidia.com/gpu`` on a mixed MIG node), and every expected GFD label.
    """
    differences = []
    labels = _labels(node)
    status = node.get("status") or {}
    if expected.get("mig_config"):
        state = labels.get(MIG_STATE_LABEL)
        if state != "success":
            differences.append((MIG_STATE_LABEL, "success", state))
    wanted = expected.get("resources") or {}
    for field in ("capacity", "allocatable"):
        current = status.get(field) or {}
        for resource in sorted(set(wanted) | {key for key in current if key.startswith("nvidia.com/")}):
            want = str(wanted[resource]) if resource in wanted else None
            seen = current.get(resource)
            if want is None and seen in (None, "0"):
                continue
            if seen != want:
                differences.append(("%s[%s]" % (field, resource), want if want is not None else "absent", seen if seen is not None else "absent"))
    for key, value in sorted((expected.get("labels") or {}).items()):
        if labels.get(key) != value:
            differences.append(("label %s" % key, value, labels.get(key, "absent")))
    for key in sorted(labels):
        if _features.is_managed_label(key) and key not in (expected.get("labels") or {}) and expected.get("labels") is not None:
            differences.append(("label %s" % key, "absent", labels[key]))
    return differences


def likely_causes(node, expected, policy, configmaps, operator_namespace):
    """Plain-language causes for a node that does not show what was expected (most specific first).

    ``policy`` is the ClusterPolicy object (``None`` when missing), ``configmaps`` ``{name: data}`` of
    the operator namespace's ConfigMaps the policy or the collection names.
    """
    causes = []
    labels = _labels(node)
    name = (node.get("metadata") or {}).get("name")
    if policy is None:
        return ["no ClusterPolicy: no GPU operator is configured on this cluster (install the operator, or use gpushare_mode: advertise on a kwok lab)"]
    spec = policy.get("spec") or {}
    dp_name = ((spec.get("devicePlugin") or {}).get("config") or {}).get("name")
    dp_default = ((spec.get("devicePlugin") or {}).get("config") or {}).get("default")
    want_cm = expected.get("configmap")
    if want_cm and dp_name != want_cm:
        causes.append("ClusterPolicy spec.devicePlugin.config.name is %r, not %r: the device plugin reads another ConfigMap" % (dp_name, want_cm))
    key = labels.get(DEVICE_PLUGIN_CONFIG_LABEL) or dp_default
    data = configmaps.get(dp_name)
    if dp_name and data is None:
        causes.append("ConfigMap %s/%s named by the ClusterPolicy does not exist: the config manager cannot start" % (operator_namespace, dp_name))
    elif key and data is not None and key not in data:
        causes.append(
            "node %s selects config %r (label %s or the ClusterPolicy default), which ConfigMap %s/%s lacks (it has: %s): "
            "the config manager crash-loops and the old advertisement stays"
            % (name, key, DEVICE_PLUGIN_CONFIG_LABEL, operator_namespace, dp_name, ", ".join(sorted(data)) or "no keys")
        )
    if expected.get("mig_config"):
        state = labels.get(MIG_STATE_LABEL)
        mm_name = ((spec.get("migManager") or {}).get("config") or {}).get("name")
        layouts = configmaps.get(mm_name)
        if labels.get(MIG_CONFIG_LABEL) != expected["mig_config"]:
            causes.append("node %s has %s=%r, not %r" % (name, MIG_CONFIG_LABEL, labels.get(MIG_CONFIG_LABEL), expected["mig_config"]))
        elif layouts is None:
            causes.append("ConfigMap %s/%s named by spec.migManager.config.name does not exist" % (operator_namespace, mm_name))
        elif state == "failed":
            causes.append("the MIG manager failed to apply %s on %s" % (expected["mig_config"], name))
        elif state in (None, "pending"):
            causes.append("the MIG manager has not finished (%s=%s)" % (MIG_STATE_LABEL, state or "unset"))
    if not causes:
        causes.append("no operator answered: the configuration is in place but node %s did not change; check that the GPU operator's "
                      "pods run (on the lab cluster: the gpu-operator-standin component, `kwokctl get components`)" % name)
    return causes


def mig_failure_reason(node):
    """The reason the stand-in's MIG manager recorded for ``failed`` (``None`` when it recorded none)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    try:
        failure = json.loads(annotations.get(MIG_FAILURE_ANNOTATION) or "null")
    except ValueError:
        return None
    return failure if isinstance(failure, dict) else None


MODES = ("advertise", "operator")
KWOK_ANNOTATION = _names.KWOK_NODE_ANNOTATION


def mode_errors(mode, nodes, cluster_nodes, policies, policy_name, field="gpushare_mode"):
    """Check the mode against the cluster before any write; one message (field, problem, fix) per mismatch.

    ``nodes`` are the inventory nodes, ``cluster_nodes`` the cluster's Node objects, ``policies`` its
    ClusterPolicy objects (empty when the CRD is not installed).
    """
    if mode not in MODES:
        return ["%s: %r is not a mode. Fix: use advertise (kwok nodes, the lab writes node status) or operator "
                "(the NVIDIA GPU Operator owns node status and GPU labels; the lab configures and verifies it)." % (field, mode)]
    names = sorted((policy.get("metadata") or {}).get("name") for policy in policies or [])
    if mode == "operator":
        if policy_name not in names:
            found = " (the cluster has: %s)" % ", ".join(names) if names else ""
            return ["%s: operator, but the cluster has no ClusterPolicy %s%s: no GPU Operator is configured to act on the lab's "
                    "configuration. Fix: install the GPU Operator (on the lab cluster: make lab-operator starts its stand-in), "
                    "set gpushare_operator_cluster_policy to the ClusterPolicy's name, or use gpushare_mode: advertise on a kwok cluster."
                    % (field, policy_name, found)]
        return []
    errors = []
    if names:
        errors.append("%s: advertise, but ClusterPolicy %s exists: the GPU Operator owns node status and the GPU labels here and "
                      "would overwrite what the lab writes. Fix: set gpushare_mode: operator." % (field, ", ".join(names)))
    wanted = {str(node.get("name")) for node in nodes or []}
    real = sorted(
        (node.get("metadata") or {}).get("name") for node in cluster_nodes or []
        if (node.get("metadata") or {}).get("name") in wanted
        and ((node.get("metadata") or {}).get("annotations") or {}).get(KWOK_ANNOTATION) != "fake"
    )
    if real:
        errors.append("%s: advertise writes node status, which only kwok nodes keep, but %s lack%s the annotation %s=fake "
                      "(real nodes: their device plugin owns the status). Fix: set gpushare_mode: operator with the GPU Operator "
                      "installed, or point the lab at a kwok cluster." % (field, ", ".join(real), "s" if len(real) == 1 else "", KWOK_ANNOTATION))
    return errors


def node_hardware(nodes, default_product=None):
    """``{node: {"gpus": n, "product": p}}`` for every inventory node with GPUs: what its GPUs physically are."""
    hardware = {}
    for node in nodes or []:
        gpus = node.get("gpus")
        if not _is_int(gpus) or gpus <= 0:
            continue
        mig = node.get("mig") if isinstance(node.get("mig"), dict) else {}
        product = node.get("product") or mig.get("product") or default_product
        if not product:
            raise OperatorError("%s.product" % node.get("name"), "missing: the node's GPUs need a product",
                                "set product on the node or a lab-wide default product")
        hardware[str(node["name"])] = {"gpus": gpus, "product": str(product)}
    return hardware
