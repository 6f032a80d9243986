# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Waiting for the GPU Operator: until each node matches the config model, or the operator has settled on something else.

The config model (:func:`gpu_operator.predict`) says what NVIDIA's k8s-device-plugin :data:`MODEL_VERSION` advertises
and what its gpu-feature-discovery (GFD) labels: that is the version the collection's differential tests run
(tests/integration/test_nvidia_device_plugin.py, test_nvidia_gfd.py; tools/nvidia/go.mod pins it). A cluster may run
another one. So the wait

* reads the versions the cluster runs from the operand DaemonSets' images (:func:`parse_image`: a strict reading of an
  image reference; a digest, another image or a reference that does not parse is "version unknown"), and a node's own
  operand Pod's image where one runs (a rollout from one version to another runs both);
* waits for the operator's own signals that it is done with a node (:func:`node_blockers`): the MIG manager's
  ``nvidia.com/mig.config.state`` is ``success`` for the layout the node is labelled with (not ``pending`` or
  ``rebooting``), each operand DaemonSet's rollout is complete, the node is not paused for a MIG change, and the
  node's device-plugin and GFD Pods (where the DaemonSets select the node) are ready and not terminating; then for
  ``settle`` seconds in which nothing the node shows changes (its ``nvidia.com/*`` capacity, allocatable and labels,
  its operand Pods): the kubelet writes a re-registered plugin's devices into the node's status on its next status
  update (every 10 s by default), so the default is twice that;
* compares once it has settled: a node that matches is done; a settled node that does not ends the wait at once with a
  report of each difference by node, resource (or label), what was predicted, what was advertised and the version of
  NVIDIA's component that advertised it, and says when that version is not the model's (the prediction is untested);
* ends the wait at once when a node's MIG manager reports ``failed`` for the layout the node is labelled with, with the
  reason: the lab stand-in's record of mig-parted's own message (annotation ``gpushare.k8s/mig-failure``), else the
  last error lines of the node's ``nvidia-mig-manager`` Pod log (the caller reads it), else where to find it.

A node the operator never settles (a MIG change in progress, no operator) is reported when ``timeout`` runs out, as
before. Pure Python, no Ansible import; :class:`OperandReader` reads the cluster through a ``kubernetes`` ApiClient.
"""

from __future__ import annotations

import hashlib
import json
import re

from . import gpu_features as _features
from . import gpu_operator as _op
from ..k8s.cluster_objects import ApiCallError, Route, api_path, call_json, list_pages

__all__ = ["DEFAULT_SETTLE", "MIG_MANAGER_DAEMONSET", "MODEL_VERSION", "OPERANDS", "OperandReader", "describe_failure", "describe_pending",
           "describe_versions", "mig_failure_causes", "mig_manager_reason", "node_blockers", "operand_versions", "parse_image", "wait_for_nodes"]

# The k8s-device-plugin release the config model is held to: its differential tests run this version's unmodified
# nvidia-device-plugin and gpu-feature-discovery (tools/nvidia/go.mod pins it; a unit test keeps the two equal).
MODEL_VERSION = "v0.18.0"
# The operand DaemonSets whose images say which version advertises and labels a node: (what it is, the operator's
# DaemonSet, its main container). Since k8s-device-plugin v0.15 both run the k8s-device-plugin image.
OPERANDS = (("nvidia-device-plugin", _op.DEVICE_PLUGIN_DAEMONSET, "nvidia-device-plugin"),
            ("gpu-feature-discovery", _op.GFD_DAEMONSET, "gpu-feature-discovery"))
# The image names that carry NVIDIA's k8s-device-plugin release in their tag (GFD had its own image before v0.15).
IMAGE_NAMES = ("k8s-device-plugin", "gpu-feature-discovery")
# The operator's MIG manager DaemonSet, whose Pod log on a node says why a layout failed.
MIG_MANAGER_DAEMONSET = "nvidia-mig-manager"
# Seconds a node must stay unchanged, its operator signals complete, before it is compared for a verdict.
DEFAULT_SETTLE = 20.0
# Seconds a failed MIG state seen when the wait starts must last (with the same label) before it ends the wait: a
# previous layout's failure is replaced by pending once the MIG manager takes up the new label.
STALE_GRACE = 5.0
# MIG manager states that mean it is still working on the node (reconfigure-mig.sh sets rebooting before a reboot).
MIG_BUSY = ("pending", "rebooting")
# The value of a node's nvidia.com/gpu.deploy.<operand> label while the MIG manager has stopped the GPU clients.
PAUSED = "paused-for-mig-change"
MAX_LOG_LINES = 200

# A Docker image reference, as the distribution reference grammar spells it: [domain/]path[:tag][@digest].
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?)"
_IMAGE_RE = re.compile(r"(?:(?P<domain>%s)/)?(?P<path>%s(?:/%s)*)(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
                       r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?" % (_DOMAIN, _COMPONENT, _COMPONENT))
# A release tag of NVIDIA's images: v<major>.<minor>.<patch>, optionally with a suffix (-ubi9, -rc.1).
_VERSION_RE = re.compile(r"(?P<version>v(?:0|[1-9][0-9]{0,3})\.(?:0|[1-9][0-9]{0,3})\.(?:0|[1-9][0-9]{0,3}))(?:-[0-9A-Za-z][0-9A-Za-z.]{0,31})?")


def _shown(value, limit=120):
    """Untrusted text as it may be printed: its repr, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def parse_image(image):
    """What an operand's image says of its version: ``{"image", "name", "tag", "digest", "version", "problem"}``.

    ``version`` is ``v<x>.<y>.<z>`` when the reference parses, names NVIDIA's ``k8s-device-plugin`` (or the former
    ``gpu-feature-discovery``) image, in any registry or path, and carries a release tag; otherwise it is ``None`` and
    ``problem`` says why (a digest alone does not name a version). The image is read from the cluster: untrusted.
    """
    info = {"image": None, "name": None, "tag": None, "digest": None, "version": None, "problem": None}
    if not isinstance(image, str) or not image:
        info["problem"] = "no image"
        return info
    match = _IMAGE_RE.fullmatch(image) if len(image) <= 512 else None
    if match is None:
        info["problem"] = "the image %s is not an image reference" % _shown(image)
        return info
    info.update(image=image, name=match.group("path").rsplit("/", 1)[-1], tag=match.group("tag"), digest=match.group("digest"))
    if info["name"] not in IMAGE_NAMES:
        info["problem"] = "the image %s is not NVIDIA's %s image" % (image, " or ".join(IMAGE_NAMES))
    elif info["tag"] is None:
        info["problem"] = "the image %s names no release (a digest only)" % image if info["digest"] else "the image %s has no tag" % image
    else:
        version = _VERSION_RE.fullmatch(info["tag"])
        if version is None:
            info["problem"] = "the tag of image %s is not a release (v<major>.<minor>.<patch>)" % image
        else:
            info["version"] = version.group("version")
    return info


def _containers(spec):
    spec = spec if isinstance(spec, dict) else {}
    return [c for c in (spec.get("containers") or []) if isinstance(c, dict)] if isinstance(spec.get("containers"), list) else []


def _image_of(spec, container):
    """The image of ``container`` in a Pod spec (else of the first container running one of :data:`IMAGE_NAMES`)."""
    containers = _containers(spec)
    for item in containers:
        if item.get("name") == container:
            return item.get("image")
    for item in containers:
        if parse_image(item.get("image"))["name"] in IMAGE_NAMES:
            return item.get("image")
    return None


def _dict(value):
    return value if isinstance(value, dict) else {}


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def operand_versions(daemonsets, namespace):
    """Per operand of :data:`OPERANDS` (by its name): ``{"daemonset", "image", "version", "problem", "tested"}`` read from
    the DaemonSet's Pod template (``daemonsets``: ``{name: object}``; ``None``: they could not be read)."""
    versions = {}
    for operand, name, container in OPERANDS:
        entry = {"daemonset": "%s/%s" % (namespace, name), "image": None, "version": None, "problem": None, "tested": False}
        daemonset = (daemonsets or {}).get(name)
        if daemonsets is None:
            entry["problem"] = "the operand DaemonSets could not be read"
        elif not isinstance(daemonset, dict):
            entry["problem"] = "no DaemonSet %s/%s" % (namespace, name)
        else:
            info = parse_image(_image_of(_dict(_dict(_dict(daemonset.get("spec")).get("template")).get("spec")), container))
            entry.update(image=info["image"], version=info["version"], problem=info["problem"])
        entry["tested"] = entry["version"] == MODEL_VERSION
        versions[operand] = entry
    return versions


def describe_versions(versions):
    """One sentence on the versions the cluster runs when the prediction is not for them (``""`` when it is)."""
    parts = []
    for operand, entry in sorted(versions.items()):
        if entry.get("tested"):
            continue
        if entry.get("version"):
            parts.append("%s %s (image %s of DaemonSet %s)" % (operand, entry["version"], entry["image"], entry["daemonset"]))
        else:
            parts.append("%s of unknown version (%s)" % (operand, entry.get("problem") or "unknown"))
    if not parts:
        return ""
    return ("The prediction is for NVIDIA k8s-device-plugin %s, the version the config model is held to; the cluster runs %s: "
            "a prediction the model was not tested for." % (MODEL_VERSION, "; ".join(parts)))


# --------------------------------------------------------------------------
# The operator's signals of completion, per node
# --------------------------------------------------------------------------


def _labels(node):
    return _dict(_dict(node.get("metadata")).get("labels"))


def _pod_ready(pod):
    conditions = _dict(pod.get("status")).get("conditions")
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions or []) \
        if isinstance(conditions, list) else False


def _rollout(daemonset):
    """Why the DaemonSet controller has not yet acted on the DaemonSet's latest spec, or ``None``."""
    metadata, status = _dict(daemonset.get("metadata")), _dict(daemonset.get("status"))
    generation, observed = _int(metadata.get("generation")), _int(status.get("observedGeneration"))
    if observed < generation:
        return "the DaemonSet controller has not yet seen its generation %d" % generation
    return None


def _pod_outdated(daemonset, pod):
    """Why ``pod`` is not of the DaemonSet's current Pod template, or ``None``: its ``pod-template-generation`` label is the
    DaemonSet's generation, or (a spec change that left the template alone) the rollout has updated every Pod."""
    generation = _dict(daemonset.get("metadata")).get("generation")
    label = _dict(_dict(pod.get("metadata")).get("labels")).get("pod-template-generation")
    if label is None or label == str(generation):
        return None
    status = _dict(daemonset.get("status"))
    desired, updated = _int(status.get("desiredNumberScheduled")), _int(status.get("updatedNumberScheduled"))
    if updated >= desired:
        return None
    return "is from an earlier Pod template (rolling out: %d of %d Pods updated)" % (updated, desired)


def _selects(daemonset, node):
    """Whether the DaemonSet's nodeSelector selects the node (the operator's operands select ``nvidia.com/gpu.deploy.*``)."""
    selector = _dict(_dict(_dict(_dict(daemonset.get("spec")).get("template")).get("spec")).get("nodeSelector"))
    labels = _labels(node)
    return all(labels.get(key) == value for key, value in selector.items())


def node_pods(pods, node_name):
    """The Pods of one DaemonSet (a list read from the cluster) on ``node_name``, newest first."""
    mine = [p for p in pods or [] if isinstance(p, dict) and _dict(p.get("spec")).get("nodeName") == node_name]
    return sorted(mine, key=lambda p: str(_dict(p.get("metadata")).get("creationTimestamp") or ""), reverse=True)


def node_blockers(node, want, operands):
    """Why the operator is not yet done with ``node`` (a list of reasons; empty: its signals say it is done).

    ``want`` is the node's prediction, ``operands`` :meth:`OperandReader.read`'s answer (``daemonsets``: by name or
    ``None``; ``pods``: by DaemonSet name, a list, or ``None`` when they could not be read).
    """
    reasons = []
    labels = _labels(node)
    layout, label, state = want.get("mig_config"), labels.get(_op.MIG_CONFIG_LABEL), labels.get(_op.MIG_STATE_LABEL)
    if state in MIG_BUSY and (layout or label):
        reasons.append("the MIG manager is at %s=%s" % (_op.MIG_STATE_LABEL, state))
    elif layout and label == layout and state is None:
        reasons.append("no MIG manager has answered %s=%s yet" % (_op.MIG_CONFIG_LABEL, layout))
    daemonsets = operands.get("daemonsets")
    for _operand, name, _container in OPERANDS:
        daemonset = (daemonsets or {}).get(name)
        if not isinstance(daemonset, dict):
            continue
        rollout = _rollout(daemonset)
        if rollout:
            reasons.append("DaemonSet %s: %s" % (name, rollout))
        paused = sorted(key for key, value in labels.items() if key.startswith("nvidia.com/gpu.deploy.") and value == PAUSED)
        if paused and name == _op.DEVICE_PLUGIN_DAEMONSET:
            reasons.append("the MIG manager has paused its GPU clients (%s=%s)" % (paused[0], PAUSED))
        pods = (operands.get("pods") or {}).get(name)
        if not _selects(daemonset, node) or pods is None:
            continue
        mine = node_pods(pods, _dict(node.get("metadata")).get("name"))
        if not mine:
            reasons.append("no Pod of DaemonSet %s runs on the node yet" % name)
        elif _dict(mine[0].get("metadata")).get("deletionTimestamp"):
            reasons.append("its Pod of DaemonSet %s is terminating" % name)
        elif not _pod_ready(mine[0]):
            reasons.append("its Pod of DaemonSet %s is not ready" % name)
        elif _pod_outdated(daemonset, mine[0]):
            reasons.append("its Pod of DaemonSet %s %s" % (name, _pod_outdated(daemonset, mine[0])))
    return reasons


def node_versions(node, versions, operands):
    """The versions that advertise and label ``node``: its own operand Pod's image where one runs, else the DaemonSet's."""
    mine = {}
    name = _dict(node.get("metadata")).get("name")
    for operand, daemonset, container in OPERANDS:
        entry = dict(versions.get(operand) or {})
        pods = node_pods(((operands.get("pods") or {}).get(daemonset)), name)
        if pods:
            info = parse_image(_image_of(_dict(pods[0].get("spec")), container))
            if info["image"] and info["image"] != entry.get("image"):
                entry.update(image=info["image"], version=info["version"], problem=info["problem"], pod=_dict(pods[0].get("metadata")).get("name"))
                entry["tested"] = entry["version"] == MODEL_VERSION
        mine[operand] = entry
    return mine


def fingerprint(node, operands):
    """A digest of everything the operator shows of ``node``: its ``nvidia.com/*`` capacity, allocatable and labels, its
    MIG failure record and its operand Pods (name, ready, image). Unchanged for ``settle`` seconds: settled."""
    name = _dict(node.get("metadata")).get("name")
    status = _dict(node.get("status"))
    shown = {
        "capacity": {k: v for k, v in _dict(status.get("capacity")).items() if str(k).startswith("nvidia.com/")},
        "allocatable": {k: v for k, v in _dict(status.get("allocatable")).items() if str(k).startswith("nvidia.com/")},
        "labels": {k: v for k, v in _labels(node).items() if str(k).startswith("nvidia.com/")},
        "failure": _dict(_dict(node.get("metadata")).get("annotations")).get(_op.MIG_FAILURE_ANNOTATION),
        "pods": [[_dict(p.get("metadata")).get("uid"), _pod_ready(p), bool(_dict(p.get("metadata")).get("deletionTimestamp")),
                  [c.get("image") for c in _containers(p.get("spec"))]]
                 for daemonset in sorted((operands.get("pods") or {})) for p in node_pods((operands.get("pods") or {})[daemonset], name)],
    }
    return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _differences(node, want):
    found = list(_op.compare(node, want))
    layout, label = want.get("mig_config"), _labels(node).get(_op.MIG_CONFIG_LABEL)
    if layout and label != layout:
        found.insert(0, ("label %s" % _op.MIG_CONFIG_LABEL, layout, label if label is not None else "absent"))
    return found


# --------------------------------------------------------------------------
# The wait
# --------------------------------------------------------------------------


def wait_for_nodes(read, expected, timeout, interval=0.5, settle=DEFAULT_SETTLE, clock=None, sleep=None, progress=None, progress_interval=30.0,
                   stale_grace=STALE_GRACE, namespace="gpu-operator"):
    """Poll ``read()`` until every node of ``expected`` (``{name: predict()}``) matches, one settles on something else,
    one's MIG manager reports ``failed``, or ``timeout`` seconds pass.

    ``read()`` returns ``{"nodes": {name: Node}, "daemonsets": {name: DaemonSet} or None, "pods": {DaemonSet name:
    [Pod]} or None}`` (:meth:`OperandReader.read` gives the last two). Returns ``{"matched", "failed": {node: {"layout",
    "reason"}}, "settled": {node: [(what, expected, seen)]}, "differences": {node: [...]}, "pending": {node: [reasons]},
    "changed": {node: bool}, "elapsed", "nodes", "versions": {operand: ...}, "node_versions": {node: {operand: ...}}}``:
    ``settled`` holds the verdicts (nodes the operator is done with that do not match), ``pending`` the nodes it was not
    done with, and why. A failed MIG state ends the wait when the node does not match and the state is current: it
    appeared during the wait, or the stand-in's record names the layout the node is labelled with, or it lasted
    ``stale_grace`` seconds (a previous layout's failure gives way to pending once the MIG manager takes up a new label).

    While nodes are pending, ``progress(line)`` is called every ``progress_interval`` seconds (:func:`describe_pending`),
    and once at the start when the cluster runs a version the prediction is not for. The wait never sleeps past
    ``timeout``, and never longer than ``interval`` at a time.
    """
    import time

    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    start = clock()
    next_progress = progress_interval if progress is not None and progress_interval and progress_interval > 0 else None
    seen = {}  # node -> {"mark", "since", "changed", "failure" (label and record of a failed state), "failed_since", "fresh"}
    first = True
    while True:
        snapshot = read()
        nodes = snapshot.get("nodes") or {}
        operands = {"daemonsets": snapshot.get("daemonsets"), "pods": snapshot.get("pods")}
        now = clock()
        elapsed = now - start
        versions = operand_versions(operands["daemonsets"], namespace)
        if first and progress is not None and operands["daemonsets"] is not None and describe_versions(versions):
            progress(describe_versions(versions))
        first = False
        differences, settled, failed, pending = {}, {}, {}, {}
        for name, want in expected.items():
            node = nodes.get(name)
            if node is None:
                differences[name] = [("node", "exists", "absent")]
                pending[name] = ["not in the cluster"]
                continue
            mark = fingerprint(node, operands)
            record = seen.get(name)
            if record is None:
                record = seen[name] = {"mark": mark, "since": now, "changed": False, "failure": None, "failed_since": None, "fresh": False}
            elif record["mark"] != mark:
                record.update(mark=mark, since=now, changed=True)
            labels = _labels(node)
            layout = labels.get(_op.MIG_CONFIG_LABEL)
            failure = (layout, _dict(_dict(node.get("metadata")).get("annotations")).get(_op.MIG_FAILURE_ANNOTATION)) \
                if labels.get(_op.MIG_STATE_LABEL) == "failed" and layout else None
            if failure is None:
                record.update(failure=None, failed_since=None, fresh=True)
            elif record["failure"] != failure:
                # failed after a state that was not (fresh: the MIG manager's answer to this wait), or failed with another label or
                # record than before (maybe a stale state under a new label: it must last)
                record.update(failure=failure, failed_since=now, fresh=record["fresh"] and record["failure"] is None)
            found = _differences(node, want)
            if not found:
                continue
            differences[name] = found
            if failure is not None:
                if record["fresh"] or now - record["failed_since"] >= stale_grace:
                    stand_in = _op.mig_failure_reason(node) or {}
                    failed[name] = {"layout": layout, "reason": stand_in.get("reason") if stand_in.get("layout") == layout else None}
                else:
                    pending[name] = ["%s=failed for %s when the wait started: %ss for the MIG manager to take it up again"
                                     % (_op.MIG_STATE_LABEL, layout, stale_grace)]
                continue
            blockers = node_blockers(node, want, operands)
            if blockers:
                pending[name] = blockers
            elif now - record["since"] >= settle:
                settled[name] = found
            else:
                pending[name] = ["settling: unchanged for %ds of %ss" % (int(now - record["since"]), settle)]
        if not differences or failed or settled or elapsed >= timeout:
            return {"matched": not differences, "failed": failed, "settled": settled, "differences": differences,
                    "pending": {k: v for k, v in pending.items() if k not in failed and k not in settled},
                    "changed": {name: record["changed"] for name, record in seen.items()}, "elapsed": round(elapsed, 3), "nodes": nodes,
                    "versions": versions, "node_versions": {name: node_versions(nodes[name], versions, operands) for name in differences if name in nodes}}
        if next_progress is not None and elapsed >= next_progress:
            progress(describe_pending(nodes, differences, expected, elapsed, timeout, pending=pending))
            while next_progress <= elapsed:
                next_progress += progress_interval
        sleep(max(0.0, min(interval, timeout - elapsed)))


def describe_pending(nodes, differences, expected, elapsed, timeout, per_node=3, pending=None):
    """One progress line for a wait in progress: the nodes still pending, their MIG state, what they show vs expect, and
    what the wait waits for on each.

    ``waiting for the GPU operator: 30s of 1200s, 1 of 3 node(s) pending: lab-node-2 mig.config.state=pending
    (capacity[nvidia.com/mig-1g.10gb] expected 7, seen absent) [the MIG manager is at nvidia.com/mig.config.state=pending]``.
    The MIG state is named for nodes that expect a layout or carry the label (``-`` when unset); at most ``per_node``
    differences per node are shown.
    """
    parts = []
    for name in sorted(differences):
        node = nodes.get(name)
        found = differences[name]
        if node is None:
            parts.append("%s (not in the cluster)" % name)
            continue
        labels = _labels(node)
        state = ""
        if (expected.get(name) or {}).get("mig_config") or _op.MIG_STATE_LABEL in labels:
            state = " mig.config.state=%s" % (labels.get(_op.MIG_STATE_LABEL) or "-")
        shown = "; ".join("%s expected %s, seen %s" % (what, want, seen) for what, want, seen in found[:per_node])
        more = len(found) - per_node
        why = (pending or {}).get(name)
        parts.append("%s%s (%s%s)%s" % (name, state, shown, "; %d more" % more if more > 0 else "", " [%s]" % "; ".join(why) if why else ""))
    return "waiting for the GPU operator: %ds of %ss, %d of %d node(s) pending: %s" % (
        int(elapsed), timeout, len(differences), len(expected), ", ".join(parts))


def _by_resource(found):
    """Resource differences of :func:`gpu_operator.compare` merged per resource: ``{resource: (predicted, capacity, allocatable)}``,
    and the other differences as they are."""
    resources, others = {}, []
    for what, want, seen in found:
        match = re.fullmatch(r"(capacity|allocatable)\[(.+)\]", what)
        if match is None:
            others.append((what, want, seen))
            continue
        entry = resources.setdefault(match.group(2), {"predicted": want})
        entry[match.group(1)] = seen
    return resources, others


def _version_of(entry):
    if not entry:
        return "version unknown"
    if entry.get("version"):
        return "%s%s" % (entry["version"], "" if entry.get("tested") else ", a version the model is not held to")
    return "version unknown: %s" % (entry.get("problem") or "unknown")


def _verdict(name, found, node_versions, settle):
    plugin = (node_versions or {}).get("nvidia-device-plugin")
    gfd = (node_versions or {}).get("gpu-feature-discovery")
    resources, others = _by_resource(found)
    parts = []
    for resource, entry in sorted(resources.items()):
        # a field without a difference shows what was predicted
        capacity, allocatable = entry.get("capacity", entry["predicted"]), entry.get("allocatable", entry["predicted"])
        seen = capacity if capacity == allocatable else "%s in capacity, %s in allocatable" % (capacity, allocatable)
        parts.append("resource %s: predicted %s, nvidia-device-plugin (%s) advertises %s" % (resource, entry["predicted"], _version_of(plugin), seen))
    labels = [(what, want, seen) for what, want, seen in others if what.startswith("label nvidia.com/") and what != "label " + _op.MIG_CONFIG_LABEL]
    for what, want, seen in others:
        if (what, want, seen) not in labels:
            parts.append("%s: expected %s, seen %s" % (what, want, seen))
    if labels:
        shown = "; ".join("%s predicted %s, written %s" % (what[len("label "):], want, seen) for what, want, seen in labels[:6])
        more = len(labels) - 6
        parts.append("gpu-feature-discovery (%s) labels: %s%s" % (_version_of(gfd), shown, " (and %d more)" % more if more > 0 else ""))
    return ("%s: the operator is done with the node (its MIG state, operand Pods and advertisement unchanged for %ss) and it does not "
            "advertise what the config model predicts: %s." % (name, settle, "; ".join(parts)))


def describe_failure(result, expected, causes, timeout, settle=DEFAULT_SETTLE, namespace="gpu-operator"):
    """One message for a wait that did not match: per node, the MIG manager's failure with its reason, the settled
    difference by resource and version, or (at the timeout) what differs and what the wait still waited for; the likely
    causes; and the versions, when the prediction is not for the ones the cluster runs."""
    parts = []
    ended = result["failed"] or result.get("settled")
    for name in sorted(set(result["differences"]) | set(result["failed"])):
        if name in result["failed"]:
            failure = result["failed"][name]
            reason = failure.get("reason") or failure.get("where") or (
                "the MIG manager recorded no reason on the node; it is in the log of the %s Pod on %s (kubectl -n %s get pods -o wide -l app=%s)"
                % (MIG_MANAGER_DAEMONSET, name, namespace, MIG_MANAGER_DAEMONSET))
            cause = " / ".join(causes.get(name) or [])
            parts.append("%s: %s=failed for layout %s: %s.%s" % (name, _op.MIG_STATE_LABEL, failure.get("layout"), reason.rstrip("."),
                                                                 " Likely cause: %s." % cause if cause else ""))
            continue
        if name in (result.get("settled") or {}):
            verdict = _verdict(name, result["settled"][name], (result.get("node_versions") or {}).get(name), settle)
            parts.append("%s Likely cause: %s." % (verdict, " / ".join(causes.get(name) or ["unknown"])))
            continue
        found = result["differences"][name]
        shown = "; ".join("%s expected %s, seen %s" % (what, want, seen) for what, want, seen in found[:8])
        more = len(found) - 8
        waiting = (result.get("pending") or {}).get(name)
        if ended:
            parts.append("%s: still pending after %ss (%s%s)%s." % (
                name, int(result["elapsed"]), shown, " (and %d more)" % more if more > 0 else "", ": waiting for %s" % "; ".join(waiting) if waiting else ""))
            continue
        parts.append("%s: after %ss the operator does not advertise what the config model predicts: %s%s.%s Likely cause: %s."
                     % (name, timeout, shown, " (and %d more)" % more if more > 0 else "",
                        " The wait was still waiting for: %s." % "; ".join(waiting) if waiting else "", " / ".join(causes.get(name) or ["unknown"])))
    note = describe_versions(result.get("versions") or {}) if any(v.get("version") or v.get("image") for v in (result.get("versions") or {}).values()) else ""
    return " ".join(parts) + (" " + note if note else "")


def settled_causes(node, want, causes, changed, node_versions):
    """The likely causes of a settled difference: the configuration's (``causes``, :func:`gpu_operator.likely_causes`) but
    "no operator answered" when the node did change; else what the node shows: a MIG layout applied with none of its
    devices advertised, a release the model is not held to; else a disagreement of the model with NVIDIA's code."""
    found = [cause for cause in causes if not (changed and cause.startswith("no operator answered"))]
    if found:
        return found
    plugin = (node_versions or {}).get("nvidia-device-plugin") or {}
    name = _dict(node.get("metadata")).get("name")
    if want.get("mig_config") and not any(str(key).startswith("nvidia.com/mig-") for key in _dict(_dict(node.get("status")).get("capacity"))):
        found.append("the MIG manager reports success for layout %s, but node %s advertises no MIG device: NVIDIA's mig-parted may have made none "
                     "of it (it knows some profiles by another name than the config model: docs/nvidia-device-plugin.md, 'The one listed "
                     "difference')" % (want["mig_config"], name))
    if plugin.get("version") and not plugin.get("tested"):
        found.append("node %s runs nvidia-device-plugin %s, a release the config model is not held to (%s): it may advertise otherwise"
                     % (name, plugin["version"], MODEL_VERSION))
    return found or ["NVIDIA's components and the config model disagree on this node (the operator is done with it): report it with this message"]


def mig_failure_causes(node, policy, configmaps, namespace):
    """The likely cause of a node's failed MIG state that the cluster's configuration shows: the layout its label names
    is missing from the mig-parted ConfigMap the ClusterPolicy names (or that ConfigMap, or its key, is); ``[]`` when the
    configuration has the layout (mig-parted's reason then says why)."""
    labels = _labels(node)
    layout, name = labels.get(_op.MIG_CONFIG_LABEL), _dict(node.get("metadata")).get("name")
    config = _dict(_dict(_dict(_dict(policy).get("spec")).get("migManager")).get("config"))
    mm_name = config.get("name")
    if not policy or not mm_name:
        return []
    data = (configmaps or {}).get(mm_name)
    if data is None:
        return ["ConfigMap %s/%s, which ClusterPolicy spec.migManager.config.name names, does not exist" % (namespace, mm_name)]
    text = _dict(data).get(_op.MIG_PARTED_KEY)
    if not isinstance(text, str):
        return ["ConfigMap %s/%s has no key %s" % (namespace, mm_name, _op.MIG_PARTED_KEY)]
    try:
        layouts = _op.parse_mig_parted(text)
    except _op.LayoutError as exc:
        return ["the mig-parted config in ConfigMap %s/%s cannot be read: %s" % (namespace, mm_name, exc)]
    if layout not in layouts:
        shown = ", ".join(sorted(str(key) for key in layouts)[:12])
        return ["node %s is labelled %s=%s, a layout ConfigMap %s/%s (spec.migManager.config.name) lacks (it has: %s%s): label the node with one "
                "of them or add the layout" % (name, _op.MIG_CONFIG_LABEL, layout, namespace, mm_name, shown or "none",
                                               ", ..." if len(layouts) > 12 else "")]
    return []


# --------------------------------------------------------------------------
# Reading the operands and the MIG manager's log
# --------------------------------------------------------------------------


def mig_manager_reason(log_text):
    """Why the MIG manager failed, from its Pod's log: the messages of the last error lines (mig-parted's ``level=error``
    / ``level=fatal`` lines, the script's ``Error``/``Unable`` lines), else the last three lines; ``None`` for no log."""
    lines = [line.strip() for line in (log_text or "").splitlines()[-MAX_LOG_LINES:] if line.strip()]
    if not lines:
        return None
    messages = []
    for line in lines:
        if "level=error" in line or "level=fatal" in line:
            _head, sep, rest = line.partition('msg="')
            messages.append(rest[:-1].replace('\\"', '"') if sep and rest.endswith('"') else line)
        elif line.lower().startswith(("error", "unable", "failed")):
            messages.append(line)
    chosen = messages[-3:] if messages else lines[-3:]
    return "; ".join(text[:300] for text in chosen)


class OperandReader:
    """Reads the operator's operand DaemonSets and their Pods in ``namespace``, and the MIG manager's Pod log.

    A read the API server refuses (no such namespace, forbidden) is not an error of the wait: what it would have told
    is then unknown, and ``notes`` says so once per problem.
    """

    def __init__(self, api_client, namespace, timeout=10):
        self._api_client = api_client
        self._namespace = namespace
        self._timeout = timeout
        self.notes = []

    def _note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def read(self):
        """``{"daemonsets": {name: object} or None, "pods": {DaemonSet name: [Pod]} or None}`` for :data:`OPERANDS`."""
        try:
            page = call_json(Route(self._api_client, "GET", api_path("apps/v1", "daemonsets", self._namespace)), timeout=self._timeout)
        except ApiCallError as exc:
            if exc.status in (401, 403, 404):
                self._note("cannot read the DaemonSets of namespace %s (%s): the versions the cluster runs are unknown" % (self._namespace, exc))
                return {"daemonsets": None, "pods": None}
            raise
        items = page.get("items") if isinstance(page, dict) else None
        daemonsets = {}
        for item in items if isinstance(items, list) else []:
            name = _dict(_dict(item).get("metadata")).get("name")
            if name in {operand[1] for operand in OPERANDS}:
                daemonsets[name] = item
        pods = {}
        for name, daemonset in daemonsets.items():
            selector = _dict(_dict(_dict(daemonset.get("spec")).get("selector")).get("matchLabels"))
            if not selector or not all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
                continue
            try:
                pods[name] = list_pages(Route(self._api_client, "GET", api_path("v1", "pods", self._namespace)), timeout=self._timeout,
                                        label_selector=",".join("%s=%s" % item for item in sorted(selector.items())))
            except ApiCallError as exc:
                if exc.status in (401, 403):
                    self._note("cannot list the Pods of namespace %s (%s): the operand Pods' readiness is not checked" % (self._namespace, exc))
                    return {"daemonsets": daemonsets, "pods": None}
                raise
        return {"daemonsets": daemonsets, "pods": pods}

    def mig_manager_log(self, node_name, lines=MAX_LOG_LINES):
        """The last ``lines`` of the log of the MIG manager's Pod on ``node_name`` (``(pod, text)``), or ``(pod or None,
        None)`` when there is no such Pod or it cannot be read."""
        try:
            pods = list_pages(Route(self._api_client, "GET", api_path("v1", "pods", self._namespace)), timeout=self._timeout,
                              label_selector="app=%s" % MIG_MANAGER_DAEMONSET)
        except ApiCallError:
            return None, None
        mine = node_pods(pods, node_name)
        if not mine:
            return None, None
        pod = _dict(mine[0].get("metadata")).get("name")
        route = Route(self._api_client, "GET", api_path("v1", "pods", self._namespace, pod, "log"))
        try:
            response = route(_request_timeout=self._timeout, container=MIG_MANAGER_DAEMONSET, tailLines=lines)
            try:
                text = response.data.decode("utf-8", "replace")
            finally:
                response.release_conn()
        except Exception:  # pylint: disable=broad-exception-caught  # a reason is a help: without it the hint is given
            return pod, None
        return pod, text
