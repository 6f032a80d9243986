# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Checks that run before anything is written: bad input fails with the field and the fix, and nothing changes.

- :func:`manifest_objects` reads a manifest the collection is about to write and apply: plain YAML
  only (tags that build objects are refused), nesting and alias expansion bounded (an alias bomb
  is refused before anything expands it), and every document a Kubernetes object.
- :func:`missing_node_errors` names the nodes of an inventory the cluster does not have.
- :func:`quota_shrink_errors` refuses to lower a ResourceQuota below what is already in use:
  the API server accepts such a quota, keeps the admitted Pods and refuses every new one.

Pure Python (PyYAML only), so it is unit-tested outside Ansible.
"""

from __future__ import annotations

import json

try:
    from .manifest_yaml import ManifestError, iter_nodes, load_documents, read_text
    from .quantity import parse_quantity
except ImportError:  # loaded as plain modules, next to manifest_yaml.py
    from manifest_yaml import ManifestError, iter_nodes, load_documents, read_text  # type: ignore[no-redef]
    from quantity import parse_quantity  # type: ignore[no-redef]

try:
    from yaml.nodes import MappingNode, SequenceNode
except ImportError:  # manifest_yaml reports the missing library on first use
    MappingNode = SequenceNode = ()


__all__ = ["MAX_EXPANDED_VALUES", "manifest_fix", "manifest_objects", "missing_node_errors", "quota_shrink_errors"]

# Values (scalars, lists, mappings) one manifest may hold once its YAML aliases are expanded, as they
# are when it is sent to the API server. Real manifests hold thousands; a "billion laughs" holds 10^9.
MAX_EXPANDED_VALUES = 1000000

_PLAIN_FIX = "Fix: write the manifest as plain YAML Kubernetes objects (no tags, no anchors or aliases that multiply content)"


def manifest_fix(problem):
    """The fix for a problem :class:`ManifestError` reports, as ``"Fix: ..."``."""
    if problem.startswith("invalid YAML"):
        return "Fix: correct the YAML syntax at that line"
    if problem.startswith("YAML tag"):
        return "Fix: remove the tag and write a plain value"
    if problem.startswith("not UTF-8"):
        return "Fix: save the manifest as UTF-8 text"
    return _PLAIN_FIX


def _expanded_size(root, limit):
    """How many values ``root`` holds with every alias expanded (counting stops just above ``limit``); ``None`` for a cycle."""
    sizes = {}
    open_nodes = set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = []
        if isinstance(node, MappingNode):
            for key, value in node.value:
                children.extend((key, value))
        elif isinstance(node, SequenceNode):
            children = node.value
        if children_done or not children:
            sizes[id(node)] = min(limit + 1, 1 + sum(sizes[id(child)] for child in children))
            open_nodes.discard(id(node))
            continue
        if id(node) in open_nodes:
            return None  # an alias inside its own anchor: a recursive structure
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                return None
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _check_object(document, index):
    """Refuse a document the API server could not take as one object (apiVersion, kind, metadata.name)."""
    where = index + 1
    if not isinstance(document, dict):
        raise ManifestError(
            "the document is a %s, not a Kubernetes object. Fix: write a mapping with apiVersion, kind and metadata.name"
            % type(document).__name__.replace("dict", "mapping"),
            where,
        )
    for key in ("apiVersion", "kind"):
        if not isinstance(document.get(key), str) or not document.get(key):
            raise ManifestError("%s is missing or not a string. Fix: give every object apiVersion and kind, e.g. apiVersion: v1, kind: Pod" % key, where)
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        raise ManifestError("metadata is missing or not a mapping. Fix: add a metadata mapping holding the object's name (metadata.name)", where)
    if not any(isinstance(metadata.get(key), str) and metadata.get(key) for key in ("name", "generateName")):
        raise ManifestError("metadata.name is missing. Fix: name every %s (metadata.name)" % document["kind"], where)


def manifest_objects(text, max_values=MAX_EXPANDED_VALUES):
    """Read a manifest before it is written or applied; return its objects (empty documents dropped).

    Raises :class:`ManifestError` (document and line when known, then the problem and the fix) for text that is
    not UTF-8 or not valid YAML, tags that build objects, nesting deeper than the reader allows, aliases that
    expand the manifest beyond ``max_values`` values (an alias bomb), and documents that are not Kubernetes
    objects (a mapping with ``apiVersion``, ``kind`` and ``metadata.name``).
    """
    total = 0
    try:
        text = read_text(text)
        for index, node in iter_nodes(text):
            if node is None:
                continue
            size = _expanded_size(node, max_values)
            if size is None:
                raise ManifestError(
                    "a YAML alias refers to its own anchor (a recursive structure cannot be sent to the API server). %s" % _PLAIN_FIX,
                    index + 1,
                    node.start_mark.line + 1,
                )
            total += size
            if total > max_values:
                raise ManifestError(
                    "YAML aliases expand the manifest to more than %d values (an alias bomb?); refusing to write or apply it. %s"
                    % (max_values, _PLAIN_FIX),
                    index + 1,
                    node.start_mark.line + 1,
                )
    except ManifestError as exc:
        if "Fix:" in exc.problem:
            raise
        raise ManifestError("%s. %s" % (exc.problem, manifest_fix(exc.problem)), exc.document, exc.line) from None
    documents = load_documents(text)
    objects = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        _check_object(document, index)
        objects.append(document)
    return objects


def _name(item):
    """A node's name from a name, an inventory entry ``{name}`` or a Node object ``{metadata: {name}}``."""
    if isinstance(item, dict):
        item = (item.get("metadata") or {}).get("name") if isinstance(item.get("metadata"), dict) else item.get("name")
    return item if isinstance(item, str) and item else None


def _names(items):
    return [name for name in (_name(item) for item in items or []) if name]


def missing_node_errors(wanted, existing, field="nodes"):
    """``[message]`` naming the nodes of ``wanted`` (names or ``{name}`` entries) not among ``existing`` (Node objects or names).

    Empty when every node exists.
    """
    have = set(_names(existing))
    missing = [name for name in dict.fromkeys(_names(wanted)) if name not in have]
    if not missing:
        return []
    return [
        "%s: node%s %s do%s not exist in the cluster (it has %s). Fix: create %s (playbooks/cluster.yml creates the lab cluster's "
        "nodes) or remove %s from %s; nothing was written"
        % (
            field,
            "s" if len(missing) > 1 else "",
            ", ".join(missing),
            "" if len(missing) > 1 else "es",
            ", ".join(sorted(have)) or "no nodes",
            "them" if len(missing) > 1 else "it",
            "them" if len(missing) > 1 else "it",
            field,
        )
    ]


def team_fill_errors(gpus, pods, over_pod, gpus_field="gpus", pods_field="pods", gpus_fix="gpus"):
    """``[message]`` when the team's quota ``gpus`` is not a whole number of 1 or more, or its ``pods`` do not fill it exactly.

    Each team Pod asks for one unit, so the team must fill its quota exactly for ``over_pod`` to be the Pod the API server
    refuses: with fewer Pods it would be admitted, with more a team Pod would be refused. ``gpus_field`` and ``pods_field``
    name the settings in the messages, ``gpus_fix`` the setting the fix changes.
    """
    if not (isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 1):
        return ["%s: %s is not a whole number of 1 or more. Fix: set the GPU slots the team may request, e.g. %s: 2."
                % (gpus_field, json.dumps(gpus), gpus_fix)]
    if not isinstance(pods, (list, tuple)):
        raise ValueError("%s: must be a list of Pods ({name}), got %s" % (pods_field, type(pods).__name__))
    team = len(pods)
    if team == gpus:
        return []
    return ["%s: %d Pods of one unit each, but %s is %d: the team must fill its quota exactly so that %s is the Pod it refuses "
            "(with fewer Pods it would be admitted, with more a team Pod would be refused). Fix: list %d team Pods, or set %s: %d."
            % (pods_field, team, gpus_field, gpus, over_pod, gpus, gpus_fix, team)]


def _show(number):
    return str(int(number)) if number == number.to_integral_value() else str(number.normalize())


def quota_shrink_errors(quota, hard, option="hard", allow_option="allow_shrink"):
    """``[message]`` per key of ``hard`` that would be set below what ``quota`` (the live ResourceQuota) already uses.

    ``quota`` is the ResourceQuota as the API returns it (``None`` or ``{}`` when it does not exist yet);
    ``hard`` maps quota keys (``requests.nvidia.com/gpu``) to the new limits. ``option`` names the setting
    that gave the limit and ``allow_option`` the setting that allows lowering it anyway, for the messages.
    """
    if not isinstance(hard, dict):
        raise ValueError("hard must be a mapping of quota key to limit, e.g. {'requests.nvidia.com/gpu': 2}")
    quota = quota or {}
    metadata = quota.get("metadata") or {}
    used = (quota.get("status") or {}).get("used") or {}
    current = (quota.get("status") or {}).get("hard") or (quota.get("spec") or {}).get("hard") or {}
    where = "%s/%s" % (metadata.get("namespace", "?"), metadata.get("name", "?"))
    errors = []
    for key in sorted(hard):
        wanted = parse_quantity(hard[key])
        if wanted is None:
            raise ValueError("hard[%r]: %r is not a quantity" % (key, hard[key]))
        in_use = parse_quantity(used.get(key))
        if in_use is None or in_use <= wanted:
            continue
        errors.append(
            "%s: quota %s would limit %s to %s, but %s %s already in use (now hard %s): the API server keeps the admitted Pods "
            "and refuses every new one until usage drops. Fix: delete Pods until at most %s %s in use, set %s to %s or more, "
            "or set %s: true to lower it anyway"
            % (
                option,
                where,
                key,
                _show(wanted),
                _show(in_use),
                "is" if in_use == 1 else "are",
                current.get(key, "unset"),
                _show(wanted),
                "is" if wanted == 1 else "are",
                option,
                _show(in_use),
                allow_option,
            )
        )
    return errors
