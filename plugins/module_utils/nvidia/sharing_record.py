# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the configure-only role found before it first changed a cluster, kept on that cluster, and how to put it back.
No Ansible import.

The record is a JSON document in a ConfigMap of the collection's own (``gpushare-sharing-record`` in the operator's
namespace). Every run of the role extends it *before* its first write, and only with what it has not recorded yet, so
the values it holds are always those from before the collection touched them:

- ``policy``: the ClusterPolicy fields the role sets, each with its earlier value, or ``null`` at the highest level
  that was absent (``devicePlugin: null`` when the ClusterPolicy had no ``devicePlugin`` at all), so that the undo
  removes what was added and nothing else. ``via`` says where they were changed: ``patch`` (the object) or ``helm``
  (the values of the Helm release the ClusterPolicy belongs to; then the paths are paths in the release's
  user-supplied values).
- ``configmaps``: each ConfigMap the role writes: ``created`` when it did not exist (the undo deletes it), else the
  earlier value of each key the role writes (``null``: the key was absent).
- ``nodes``: at the first run every GPU node (the ClusterPolicy it changes reaches them all), later each node a run
  configures that the cluster did not have then: the earlier value of the labels the role writes (``null``: absent),
  its GPUs and product, and what it advertised (its ``nvidia.com/*`` allocatable and the GPU labels the operator
  manages), which the undo waits for where it is known (``baseline``: recorded before the first run's writes).

:func:`undo_plan` turns a record and the cluster's current objects into the writes that put the earlier state back.
"""

from __future__ import annotations

import copy
import hashlib
import json

from ansible_collections.gpushare.k8s.plugins.module_utils import names as _names
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import node_pools as _pools
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError, is_int
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.gpu_operator import POLICY_PATHS

__all__ = ["RecordError", "RECORD_KEY", "OWNED_LABELS", "SEAL_ANNOTATION", "load", "dump", "extend", "undo_plan", "helm_release",
           "merged_values", "chart_version", "seal", "record_text", "fragment_differences", "helm_owner"]

RECORD_KEY = "record.json"
RECORD_VERSION = 1
# The labels the role writes, and the MIG manager's answer to one of them: each is put back as it was.
OWNED_LABELS = _names.OPERATOR_OWNED_LABELS
MIG_CONFIG_LABEL = _names.MIG_CONFIG_LABEL
ALL_DISABLED = "all-disabled"
HELM_RELEASE_ANNOTATION = "meta.helm.sh/release-name"
HELM_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"
# The seal: an annotation on the ClusterPolicy (``{"sha256": <record text's>, "previous": <the text's before, or "">}``),
# written by the role just before each write of the record. A record is used only when its text has one of the two
# digests: whoever may create ConfigMaps in the operator's namespace (the lab's ServiceAccount, say) but not patch the
# ClusterPolicy cannot plant or edit a record the undo would act on. ``previous`` admits the record of a run stopped
# between the seal and the record write.
SEAL_ANNOTATION = "gpushare.k8s/sharing-record"
# Bounds of what a record may hold (a record is read back from the cluster: untrusted input).
_MAX_TEXT = 256
_MAX_GPUS = 4096
_CONFIGMAP_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")


class RecordError(InputError):
    """A record that cannot be read or used. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``."""


def record_text(data):
    """The record's text in a ConfigMap's ``data`` (``None``: no record)."""
    return (data or {}).get(RECORD_KEY)


def _digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _seal_of(policy):
    """The ClusterPolicy's seal as ``(sha256, previous)``, ``None`` when it has none; a malformed one raises."""
    annotations = ((policy or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(SEAL_ANNOTATION)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        value = None
    hexdigits = set("0123456789abcdef")
    if (not isinstance(value, dict) or set(value) != {"sha256", "previous"}
            or not all(isinstance(v, str) and len(v) in ((64, 0) if k == "previous" else (64,)) and set(v) <= hexdigits for k, v in value.items())):
        raise RecordError("ClusterPolicy annotation %s" % SEAL_ANNOTATION, "is not a seal the collection writes (%s)" % _quote(text),
                          "remove the annotation (kubectl annotate clusterpolicy <name> %s-); the record it sealed can then no longer "
                          "be used" % SEAL_ANNOTATION)
    return value["sha256"], value["previous"]


def seal(current_text, new_text, policy=None):
    """The seal annotation's value for ``new_text`` replacing ``current_text`` (``None``: no record yet).

    Unchanged text under a valid seal keeps that seal (a re-run writes nothing).
    """
    if current_text == new_text and policy is not None:
        held = _seal_of(policy)
        if held is not None and held[0] == _digest(new_text):
            return ((policy.get("metadata") or {}).get("annotations") or {})[SEAL_ANNOTATION]
    return json.dumps({"sha256": _digest(new_text), "previous": _digest(current_text) if current_text is not None else ""}, sort_keys=True)


def _quote(text, limit=80):
    """Text read from the cluster, safe to put in a message: JSON-quoted (control characters escaped), cut to ``limit``."""
    text = str(text)
    return json.dumps(text[:limit] + ("..." if len(text) > limit else ""))


def load(data, where="the record ConfigMap", policy=None, configmaps=None):
    """The record in a ConfigMap's ``data`` (``None`` or no key: an empty record), validated.

    With ``policy`` (the ClusterPolicy object as read) the record must carry its seal (:data:`SEAL_ANNOTATION`) and a
    Helm release it names must be the one the ClusterPolicy's own annotations name; ``configmaps`` maps each ConfigMap
    name the role may write to the keys it may write there (``None``: any key). The record is checked against what
    the collection itself writes: the ClusterPolicy fields of :data:`POLICY_PATHS`, the labels of
    :data:`OWNED_LABELS`, node names, GPU counts and products as the model gives them. Anything else is refused
    naming the field, before a caller writes anything.
    """
    text = record_text(data)
    if text is None:
        return _empty()
    field = "%s %s" % (where, RECORD_KEY)
    if not isinstance(text, str):
        raise RecordError(field, "is not text", "delete the record ConfigMap")
    if policy is not None:
        held = _seal_of(policy)
        if held is None:
            raise RecordError(field, "carries no seal: the ClusterPolicy has no %s annotation, so the collection did not write this "
                              "record (or a version before the seal did)" % SEAL_ANNOTATION,
                              "find out who created the ConfigMap; if the collection did not, delete it (kubectl -n <namespace> delete "
                              "configmap <record>): nothing of it is used, and the next run records the cluster as it is")
        if _digest(text) not in held:
            raise RecordError(field, "was changed after the collection wrote it: its digest is not the one the ClusterPolicy's %s "
                              "annotation holds" % SEAL_ANNOTATION,
                              "restore the record from a backup, or delete it and the annotation (the undo can then no longer put "
                              "back the earlier values)")
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise RecordError(field, "is not JSON (%s)" % exc,
                          "restore it from a backup, or delete it (then undo can no longer put back the earlier values)") from None
    if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
        raise RecordError(field, "is not a version %d record" % RECORD_VERSION, "use the collection version that wrote it")
    for key, default in _empty().items():
        record.setdefault(key, default)
    _validate(record, field, policy, configmaps)
    return record


def _fail(field, problem):
    raise RecordError(field, problem, "the collection never writes such a record: delete it (kubectl -n <namespace> delete configmap "
                                      "<record>) and check who can write ConfigMaps in the operator's namespace")


def _keys(value, field, allowed, required=()):
    if not isinstance(value, dict):
        _fail(field, "is not a mapping")
    extra = sorted(str(key) for key in value if key not in allowed)
    if extra:
        _fail(field, "has fields the collection does not write: %s" % ", ".join(_quote(key) for key in extra))
    missing = [key for key in required if key not in value]
    if missing:
        _fail(field, "lacks %s" % ", ".join(missing))


def _short_text(value, field, allow_none=True):
    if value is None and allow_none:
        return
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        _fail(field, "is not a text of at most %d characters" % _MAX_TEXT)


def _label_value(value, field):
    if value is None:
        return
    if not isinstance(value, str) or len(value) > 63 or not _names.LABEL_VALUE_RE.fullmatch(value):
        _fail(field, "%s is not a label value" % _quote(value))


def _nvidia_key(key, field):
    if not isinstance(key, str) or not key.startswith(_names.PREFIX) or len(key) > 63 + len(_names.PREFIX) \
            or not _names.LABEL_NAME_RE.fullmatch(key[len(_names.PREFIX):]):
        _fail(field, "%s is not an %s* name" % (_quote(key), _names.PREFIX))


def _validate_policy(recorded, field, policy):
    if recorded is None:
        return
    _keys(recorded, field, ("via", "fields", "release"), ("via", "fields"))
    via = recorded["via"]
    if via not in ("patch", "helm"):
        _fail(field + ".via", "%s is neither patch nor helm" % _quote(via))
    if via == "helm":
        release = recorded.get("release")
        _keys(release, field + ".release", ("name", "namespace"), ("name", "namespace"))
        for key in ("name", "namespace"):
            if not isinstance(release[key], str) or len(release[key]) > 253 or not _names.DNS_SUBDOMAIN_RE.fullmatch(release[key]):
                _fail("%s.release.%s" % (field, key), "%s is not a Helm release %s" % (_quote(release[key]), key))
        if policy is not None and helm_release(policy) != release:
            owner = helm_release(policy)
            raise RecordError(field + ".release", "names Helm release %s/%s, but the ClusterPolicy belongs to %s" % (
                _quote(release["namespace"]), _quote(release["name"]),
                "%s/%s" % (_quote(owner["namespace"]), _quote(owner["name"])) if owner else "no Helm release"),
                "the undo changes only the release that owns the ClusterPolicy: put the ClusterPolicy back under that release, or "
                "delete the record and its seal and restore the values by hand")
    elif "release" in recorded:
        _fail(field + ".release", "is set for a patch record")
    fields = recorded["fields"]
    if not isinstance(fields, list):
        _fail(field + ".fields", "is not a list")
    seen = set()
    for index, entry in enumerate(fields):
        where = "%s.fields[%d]" % (field, index)
        if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], list):
            _fail(where, "is not a [path, value] pair")
        path, value = tuple(entry[0]), entry[1]
        full = [known for known in POLICY_PATHS if known[:len(path)] == path] if path else []
        if not full:
            _fail(where, "names spec.%s, which the collection never sets (it sets %s)" % (
                ".".join(_quote(key) for key in path), ", ".join("spec." + ".".join(known) for known in POLICY_PATHS)))
        if path in seen:
            _fail(where, "names spec.%s twice" % ".".join(path))
        seen.add(path)
        if path not in POLICY_PATHS and value is not None:
            _fail(where, "gives spec.%s a value: a level above a field the collection sets is recorded only as absent (null)" % ".".join(path))
        if value is not None and not isinstance(value, (str, bool, int, float)):
            _fail(where, "gives spec.%s a %s: the fields the collection sets hold a name or a strategy" % (".".join(path), type(value).__name__))
        if isinstance(value, str):
            _short_text(value, where)


def _validate_configmaps(recorded, field, configmaps):
    if not isinstance(recorded, dict):
        _fail(field, "is not a mapping")
    for name, entry in recorded.items():
        where = "%s.%s" % (field, name)
        if configmaps is not None and name not in configmaps:
            _fail(field, "names ConfigMap %s, which the collection does not write (it writes %s)" % (
                _quote(name), ", ".join(sorted(configmaps))))
        if not isinstance(name, str) or len(name) > 253 or not _names.DNS_SUBDOMAIN_RE.fullmatch(name):
            _fail(field, "%s is not a ConfigMap name" % _quote(name))
        _keys(entry, where, ("created", "keys"), ("created",))
        if not isinstance(entry["created"], bool):
            _fail(where + ".created", "is not true or false")
        if entry["created"] and "keys" in entry:
            _fail(where + ".keys", "is set for a ConfigMap the collection created")
        keys = entry.get("keys", {})
        if not isinstance(keys, dict):
            _fail(where + ".keys", "is not a mapping")
        allowed = configmaps.get(name) if configmaps is not None else None
        for key, value in keys.items():
            if not isinstance(key, str) or not key or len(key) > 253 or not set(key) <= _CONFIGMAP_KEY_CHARS:
                _fail(where + ".keys", "%s is not a ConfigMap key" % _quote(key))
            if allowed is not None and key not in allowed:
                _fail(where + ".keys", "names key %s, which the collection does not write there" % _quote(key))
            if value is not None and not isinstance(value, str):
                _fail("%s.keys.%s" % (where, key), "is neither text nor null")


def _validate_nodes(recorded, field):
    if not isinstance(recorded, dict):
        _fail(field, "is not a mapping")
    for name, entry in recorded.items():
        if not isinstance(name, str) or len(name) > 253 or not _names.DNS_SUBDOMAIN_RE.fullmatch(name):
            _fail(field, "%s is not a node name" % _quote(name))
        where = "%s.%s" % (field, name)
        _keys(entry, where, ("resources", "labels", "owned", "gpus", "product", "baseline"), ("resources", "labels", "owned", "gpus", "product"))
        owned = entry["owned"]
        _keys(owned, where + ".owned", OWNED_LABELS)
        for key, value in owned.items():
            _label_value(value, "%s.owned.%s" % (where, key))
        gpus = entry["gpus"]
        if not is_int(gpus) or not 0 <= gpus <= _MAX_GPUS:
            _fail(where + ".gpus", "%s is not a GPU count (0 to %d)" % (_quote(gpus), _MAX_GPUS))
        _label_value(entry["product"], where + ".product")
        if not isinstance(entry.get("baseline", True), bool):
            _fail(where + ".baseline", "is not true or false")
        for part in ("resources", "labels"):
            values = entry[part]
            if not isinstance(values, dict):
                _fail("%s.%s" % (where, part), "is not a mapping")
            for key, value in values.items():
                _nvidia_key(key, "%s.%s" % (where, part))
                if part == "labels":
                    _label_value(value, "%s.labels.%s" % (where, key))
                else:
                    _short_text(value, "%s.resources.%s" % (where, key), allow_none=False)


def _validate(record, field, policy, configmaps):
    _keys(record, field, ("version", "policy", "configmaps", "nodes"))
    _validate_policy(record["policy"], field + " policy", policy)
    _validate_configmaps(record["configmaps"], field + " configmaps", configmaps)
    _validate_nodes(record["nodes"], field + " nodes")


def dump(record):
    """The record as the ConfigMap's text (stable: sorted keys, so an unchanged record is an unchanged ConfigMap)."""
    return json.dumps(record, sort_keys=True, indent=1)


def _empty():
    return {"version": RECORD_VERSION, "policy": None, "configmaps": {}, "nodes": {}}


def _leaf_paths(tree, prefix=()):
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from _leaf_paths(value, prefix + (key,))
        else:
            yield prefix + (key,)


def _earlier(tree, path):
    """``(path, value)``: ``path``'s value in ``tree``, or the shortest prefix of ``path`` that is absent, with ``None``."""
    node = tree
    for depth, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            return path[:depth + 1], None
        node = node[key]
    return path, copy.deepcopy(node)


def _fields(tree, patch):
    """The earlier values of every field ``patch`` sets in ``tree``, each at the level that existed (see :func:`_earlier`)."""
    fields = []
    for path in _leaf_paths(patch):
        entry = _earlier(tree or {}, path)
        if entry[0] not in [tuple(field[0]) for field in fields]:
            fields.append((list(entry[0]), entry[1]))
    return [list(field) for field in fields]


def helm_release(policy):
    """``{name, namespace}`` of the Helm release a ClusterPolicy object belongs to (its ``meta.helm.sh`` annotations), else ``None``."""
    annotations = ((policy or {}).get("metadata") or {}).get("annotations") or {}
    name, namespace = annotations.get(HELM_RELEASE_ANNOTATION), annotations.get(HELM_NAMESPACE_ANNOTATION)
    return {"name": name, "namespace": namespace} if name and namespace else None


def helm_owner(obj):
    """``{name, namespace}`` of the Helm release an object belongs to, ``{}`` when it carries only Helm's managed-by label,
    ``None`` when Helm does not own it."""
    metadata = (obj or {}).get("metadata") or {}
    release = helm_release(obj)
    if release:
        return release
    return {} if ((metadata.get("labels") or {}).get("app.kubernetes.io/managed-by") == "Helm") else None


def _at(tree, path):
    node = tree
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def fragment_differences(policy, patch):
    """``[(field, wanted, found)]``: each field of the values fragment (``patch["spec"]``, the GPU Operator chart's value
    names, which are the ClusterPolicy's spec fields) the ClusterPolicy does not hold yet; ``[]`` when it carries them all."""
    spec = (policy or {}).get("spec") or {}
    return [(".".join(path), _at(patch.get("spec") or {}, path), _at(spec, path)) for path in _leaf_paths(patch.get("spec") or {})
            if _at(spec, path) != _at(patch.get("spec") or {}, path)]


def chart_version(chart, chart_ref):
    """The chart version of a release whose chart is ``chart`` (Helm's ``<name>-<version>``), for an upgrade from ``chart_ref``.

    ``None`` for a chart directory or archive (Helm takes the version from the chart itself). A release made from
    another chart than ``chart_ref`` names is refused: upgrading it from that chart would replace the operator.
    """
    if chart_ref.startswith(("/", "./", "../", "~")) or chart_ref.endswith(".tgz"):
        return None
    name = chart_ref.rstrip("/").rsplit("/", 1)[-1]
    if not chart or not chart.startswith(name + "-"):
        raise RecordError("gpushare_operator_helm_chart", "%r names chart %s, but the release was installed from %s" % (chart_ref, name, chart),
                          "name the chart the GPU Operator's release was installed from (e.g. nvidia/gpu-operator)")
    return chart[len(name) + 1:]


def _set_path(tree, path, value):
    """Set ``path`` in ``tree`` to ``value``; ``None`` removes it (and the parents it leaves empty are kept as they were)."""
    node = tree
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            if value is None:
                return
            node[key] = {}
        node = node[key]
    if value is None:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = copy.deepcopy(value)


def merged_values(values, patch):
    """A release's user-supplied ``values`` with ``patch`` merged in (mappings merged, anything else replaced)."""
    merged = copy.deepcopy(values or {})

    def merge(into, update):
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = copy.deepcopy(value)

    merge(merged, patch)
    return merged


def _advertised(node, managed_label):
    labels = (node.get("metadata") or {}).get("labels") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {
        "resources": {key: value for key, value in sorted(allocatable.items()) if key.startswith("nvidia.com/")},
        "labels": {key: value for key, value in sorted(labels.items()) if managed_label(key)},
    }


def _node_entry(node, managed_label, gpus, product, baseline):
    labels = (node.get("metadata") or {}).get("labels") or {}
    return dict(_advertised(node, managed_label), owned={key: labels.get(key) for key in OWNED_LABELS}, gpus=gpus, product=product,
                baseline=baseline)


def _check_recorded_nodes(record, nodes):
    """Refuse a record naming a node of the cluster the collection cannot have configured: no GPU, nothing of ``nvidia.com/``
    advertised and none of the labels it writes."""
    present = {(node.get("metadata") or {}).get("name"): node for node in nodes or []}
    for name in sorted(record.get("nodes") or {}):
        node = present.get(name)
        if node is None:
            continue
        labels = (node.get("metadata") or {}).get("labels") or {}
        if not (_pools.node_gpus(node)[0] or _advertised(node, lambda key: False)["resources"] or any(key in labels for key in OWNED_LABELS)):
            raise RecordError("record nodes.%s" % name, "names a node with no GPU and none of the labels the collection writes (%s): "
                              "the collection never configured it" % ", ".join(OWNED_LABELS),
                              "delete the record and its seal; nothing was written")


def extend(record, policy, patch, via, configmaps, nodes, entries, managed_label, values=None, release=None):
    """The record extended with what it lacks, before the role writes (``record`` itself is not changed).

    ``policy`` is the ClusterPolicy object and ``patch`` the ``{"spec": ...}`` merge patch the role applies; ``via`` is
    ``patch`` or ``helm`` (then ``values`` are the release's user-supplied values and ``release`` its ``{name,
    namespace}``). ``configmaps`` maps each ConfigMap the role writes to ``(data or None when absent, keys written)``;
    ``nodes`` are the cluster's Node objects and ``entries`` the node entries this run configures (``{name, gpus,
    product | mig: {product}}``).
    """
    record = copy.deepcopy(record) if record else _empty()
    _check_recorded_nodes(record, nodes)
    first = record["policy"] is None
    if first:
        if via == "helm":
            record["policy"] = {"via": "helm", "release": dict(release), "fields": _fields(values or {}, patch.get("spec") or {})}
        else:
            record["policy"] = {"via": "patch", "fields": _fields((policy or {}).get("spec") or {}, patch.get("spec") or {})}
    for name, (data, keys) in sorted(configmaps.items()):
        entry = record["configmaps"].get(name)
        if entry is None:
            entry = record["configmaps"][name] = {"created": True} if data is None else {"created": False, "keys": {}}
        if not entry["created"]:
            for key in keys:
                entry["keys"].setdefault(key, (data or {}).get(key))
    by_name = {(node.get("metadata") or {}).get("name"): node for node in nodes}
    if first:
        # The first run changes the ClusterPolicy, which every GPU node follows: each is recorded as it is now, in the
        # pools or not, so that a node that joins a pool later is put back as it was before the first run.
        for name, node in sorted(by_name.items()):
            gpus, product = _pools.node_gpus(node)
            if gpus or _advertised(node, managed_label)["resources"]:
                record["nodes"][name] = _node_entry(node, managed_label, gpus, product, baseline=True)
    for entry in sorted(entries, key=lambda item: str(item["name"])):
        name = str(entry["name"])
        if name not in by_name:
            continue
        product = entry.get("product") or (entry.get("mig") or {}).get("product")
        if name in record["nodes"]:
            record["nodes"][name]["gpus"], record["nodes"][name]["product"] = entry["gpus"], product
            continue
        # a node the cluster did not have at the first run: what it shows now already follows the collection's
        # ClusterPolicy, so its labels are put back but what it advertised before cannot be known (no wait for it)
        record["nodes"][name] = _node_entry(by_name[name], managed_label, entry["gpus"], product, baseline=first)
    return record


_POINTERS = (("devicePlugin", "config", "name"), ("migManager", "config", "name"))


def _check_pointers(recorded, policy, plan):
    """Refuse an undo that would delete a ConfigMap the ClusterPolicy still names afterwards (its release's values carry the
    fragment the team merged: the operator would lose its configs)."""
    after = copy.deepcopy(((policy or {}).get("spec")) or {})
    if plan["policy_patch"]:
        after = merged_values(after, plan["policy_patch"]["spec"])
    elif recorded and recorded.get("via") == "helm":
        for path, value in recorded["fields"]:
            _set_path(after, path, value)
    for path in _POINTERS:
        name = _at(after, path)
        if name in plan["configmaps_delete"]:
            raise RecordError("ClusterPolicy spec.%s" % ".".join(path),
                              "names ConfigMap %s, which the undo would delete: the GPU Operator's release values still carry the "
                              "collection's fragment" % _quote(name),
                              "take the fragment (devicePlugin.config, migManager.config, mig.strategy) out of the release's values "
                              "file and upgrade the release, then undo; nothing was written")


def undo_plan(record, policy, values, configmaps, nodes):
    """The writes that put back what ``record`` holds, against the cluster's current objects.

    Returns ``{policy_patch, values, release, mig_reset, configmaps_delete, configmaps_patch, node_labels, expected}``:
    the ClusterPolicy merge patch (``None`` unless ``via`` is ``patch``), the release's full user-supplied values with
    every recorded path put back (``None`` unless ``via`` is ``helm``), the nodes whose MIG layout the collection set
    where none (or ``all-disabled``) was (``[{name, gpus, product}]``: a MIG manager changes a GPU only when its label
    names a layout, so they are asked for ``all-disabled`` before the label goes), the ConfigMaps to delete (the role created them),
    ``{name: {key: earlier or None}}`` for the others, ``{node: {label: earlier or None}}`` for the nodes that still exist,
    and ``{node: {resources, labels}}``: what each of them advertised before (for the wait).
    """
    plan = {"policy_patch": None, "values": None, "release": None, "mig_reset": [], "configmaps_delete": [], "configmaps_patch": {},
            "node_labels": {}, "expected": {}}
    _check_recorded_nodes(record, nodes)
    recorded = record.get("policy")
    if recorded:
        if recorded["via"] == "helm":
            restored = copy.deepcopy(values or {})
            for path, value in recorded["fields"]:
                _set_path(restored, path, value)
            plan["values"], plan["release"] = restored, recorded["release"]
        elif policy is not None:
            spec_patch = {}
            for path, value in recorded["fields"]:
                node = spec_patch
                for key in path[:-1]:
                    node = node.setdefault(key, {})
                node[path[-1]] = value
            plan["policy_patch"] = {"spec": spec_patch} if spec_patch else None
    for name, entry in sorted(record.get("configmaps", {}).items()):
        if name not in configmaps:
            continue
        if entry["created"]:
            plan["configmaps_delete"].append(name)
        elif entry.get("keys"):
            plan["configmaps_patch"][name] = dict(entry["keys"])
    _check_pointers(recorded, policy, plan)
    present = {(node.get("metadata") or {}).get("name"): node for node in nodes}
    for name, entry in sorted(record.get("nodes", {}).items()):
        if name not in present:
            continue
        layout = ((present[name].get("metadata") or {}).get("labels") or {}).get(MIG_CONFIG_LABEL)
        earlier = entry["owned"].get(MIG_CONFIG_LABEL)
        if layout and layout != earlier and earlier in (None, ALL_DISABLED):
            plan["mig_reset"].append({"name": name, "gpus": entry["gpus"], "product": entry["product"]})
        plan["node_labels"][name] = dict(entry["owned"])
        if entry.get("baseline", True):
            plan["expected"][name] = {"resources": entry["resources"], "labels": entry["labels"]}
    return plan
