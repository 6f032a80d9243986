# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read a manifest about to be written and applied, before anything is: plain YAML only (tags that build objects are
refused), nesting and alias expansion bounded (an alias bomb is refused before anything expands it), and every document
a Kubernetes object (:func:`manifest_objects`); :func:`manifest_fix` is the fix for what :mod:`manifest_yaml` reports.

Pure Python (PyYAML only), so it is unit-tested outside Ansible.
"""

from __future__ import annotations

from .manifest_yaml import ManifestError, iter_nodes, load_documents, read_text

try:
    from yaml.nodes import MappingNode, SequenceNode
except ImportError:  # manifest_yaml reports the missing library on first use
    MappingNode = SequenceNode = ()


__all__ = ["MAX_EXPANDED_VALUES", "manifest_fix", "manifest_objects"]

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
