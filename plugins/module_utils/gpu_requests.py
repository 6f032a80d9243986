# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Pre-deploy check: which containers ask for more than N units of a GPU resource.

The one implementation behind the ``gpu_request_check`` module, the ``gpu_offenders``
filter and the lab's ``bin/check-request.sh``. It imports nothing from Ansible or from
the rest of the collection, so this file also runs on its own::

    python3 gpu_requests.py <pod-manifest> [--resource NAME]... [--max N]

prints ``OVER=<container>=<count>`` per offending container and exits 1, prints ``OK``
and exits 0 when nothing asks for too much, and exits 2 (message on standard error)
when the manifest cannot be read, is not valid YAML or uses a tag that builds objects.

Hostile input stays cheap: YAML text is composed by libyaml one document at a time and
only the fields that can hold a Pod spec are visited, so aliases ("billion laughs")
are never expanded; nesting depth is checked before libyaml recurses into it; merge
keys are de-duplicated while they are flattened.
"""

from __future__ import annotations

import argparse
import re
import sys

try:
    import yaml
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode
    from yaml.resolver import BaseResolver

    try:
        from yaml.cyaml import CParser as _Parser
        from yaml.cyaml import CSafeLoader as _SafeLoader
    except ImportError:  # PyYAML built without libyaml
        from yaml.composer import Composer as _Composer
        from yaml.parser import Parser as _PyParser
        from yaml.reader import Reader as _Reader
        from yaml.scanner import Scanner as _Scanner
        from yaml import SafeLoader as _SafeLoader

        class _Parser(_Reader, _Scanner, _PyParser, _Composer):  # type: ignore[no-redef]
            """Pure-Python stand-in for libyaml's CParser (reader, scanner, parser, composer)."""

            def __init__(self, stream):
                _Reader.__init__(self, stream)
                _Scanner.__init__(self)
                _PyParser.__init__(self)
                _Composer.__init__(self)

    HAS_YAML = True
except ImportError:  # PyYAML missing: importable, and every entry point says what to install
    HAS_YAML = False
    yaml = None

    class _Missing:  # pylint: disable=too-few-public-methods
        """Placeholder base for the YAML classes below when PyYAML is missing."""

        def __init__(self, *args, **kwargs):
            raise ImportError("PyYAML")

    # Distinct placeholders, so the classes below still build a consistent MRO.
    MappingNode, ScalarNode, SequenceNode, BaseResolver, _Parser, _SafeLoader = (
        type(name, (_Missing,), {}) for name in ("MappingNode", "ScalarNode", "SequenceNode", "BaseResolver", "_Parser", "_SafeLoader")
    )


__all__ = [
    "DEFAULT_RESOURCES",
    "ManifestError",
    "WORKLOAD_KINDS",
    "find_offenders",
    "load_documents",
    "main",
]

DEFAULT_RESOURCES = ("nvidia.com/gpu",)

# Where the Pod spec lives in each workload kind.
_POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
WORKLOAD_KINDS = tuple(sorted(_POD_SPEC_PATHS))
_CONTAINER_FIELDS = ("containers", "initContainers", "ephemeralContainers")

MAX_INPUT_BYTES = 32 * 1024 * 1024
MAX_DOCUMENTS = 100000
MAX_DEPTH = 200
MAX_LIST_DEPTH = 10
MAX_STEPS = 500000
# Below these, nesting cannot exceed MAX_DEPTH: flow depth < _QUICK_DEPTH per document and
# block depth <= 2 * (indentation + indicators) + 2; above them an exact event scan decides.
_QUICK_DEPTH = 64
_LONG_PREFIX_RE = re.compile(r"^[ \t?:-]{%d,}" % _QUICK_DEPTH, re.M)
_DOCUMENT_MARK_RE = re.compile(r"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.M)
_QUANTITY_RE = re.compile(r"^\+?([0-9]+)(?:\.0*)?$")

_TAG = "tag:yaml.org,2002:"
_NULL_TAG = _TAG + "null"
_MERGE_TAG = _TAG + "merge"
_STR_TAG = _TAG + "str"
_SEQ_TAG = _TAG + "seq"
_MAP_TAG = _TAG + "map"
_NULL_VALUES = frozenset(("", "~", "null", "Null", "NULL"))
_SAFE_TAGS = frozenset(
    _TAG + name for name in ("null", "bool", "int", "float", "str", "binary", "timestamp", "seq", "map", "omap", "pairs", "set", "merge", "value")
)


class ManifestError(Exception):
    """A manifest that cannot be checked: unreadable, invalid YAML, unsafe tag, malformed workload.

    ``document`` and ``line`` are 1-based when known.
    """

    def __init__(self, problem, document=None, line=None):
        self.problem = problem
        self.document = document
        self.line = line
        where = []
        if document is not None:
            where.append("document %d" % document)
        if line is not None:
            where.append("line %d" % line)
        self.message = "%s: %s" % (", ".join(where), problem) if where else problem
        super().__init__(self.message)


# ---------------------------------------------------------------------------
# reading YAML safely


class _LightResolver(BaseResolver):
    """Resolves only what the check needs: null (empty documents) and merge keys; every other plain scalar stays a string.

    The composer calls these three methods once per node, so they are kept minimal (no path resolvers).
    """

    def descend_resolver(self, current_node, current_index):
        pass

    def ascend_resolver(self):
        pass

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode:
            if implicit[0]:
                if value in _NULL_VALUES:
                    return _NULL_TAG
                if value == "<<":
                    return _MERGE_TAG
            return _STR_TAG
        return _SEQ_TAG if kind is SequenceNode else _MAP_TAG


class _NodeLoader(_Parser, _LightResolver):
    """Composes YAML documents into nodes (libyaml when available), constructing no Python objects."""

    def __init__(self, stream):
        _Parser.__init__(self, stream)
        _LightResolver.__init__(self)


class _ObjectLoader(_SafeLoader):
    """Safe loader whose merge keys cannot multiply: each flattened mapping keeps one pair per key."""

    def flatten_mapping(self, node):
        merged = any(key.tag == _MERGE_TAG for key, _value in node.value)
        super().flatten_mapping(node)
        if merged:
            node.value = _last_pair_per_key(node.value)


def _last_pair_per_key(pairs):
    """Drop pairs overridden later in the list (construction keeps the last value of a key anyway)."""
    seen = set()
    kept = []
    for key, value in reversed(pairs):
        ident = (key.tag, key.value) if isinstance(key, ScalarNode) else id(key)
        if ident in seen:
            continue
        seen.add(ident)
        kept.append((key, value))
    kept.reverse()
    return kept


def _read_text(text_or_stream):
    """Return the manifest as ``str``, refusing anything larger than MAX_INPUT_BYTES."""
    if not HAS_YAML:
        raise ManifestError("the Python library PyYAML is required to read manifests; install it (pip install PyYAML)")
    data = text_or_stream
    if hasattr(data, "read"):
        data = data.read(MAX_INPUT_BYTES + 1)
    if isinstance(data, (bytes, bytearray)):
        if len(data) > MAX_INPUT_BYTES:
            raise ManifestError("larger than %d MiB; refusing to read it" % (MAX_INPUT_BYTES // (1024 * 1024)))
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ManifestError("not UTF-8 text (byte %d: %s)" % (exc.start, exc.reason)) from None
    if not isinstance(data, str):
        raise ManifestError("expected YAML text, got %s" % type(text_or_stream).__name__)
    if len(data) > MAX_INPUT_BYTES:
        raise ManifestError("larger than %d MiB; refusing to read it" % (MAX_INPUT_BYTES // (1024 * 1024)))
    return str(data)


def _yaml_error(exc, document):
    """Turn a PyYAML error raised while reading document ``document`` (0-based) into a ManifestError."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
    tag = re.search(r"constructor for the tag '([^']*)'", problem)
    if tag:
        return ManifestError(_unsafe_tag_problem(tag.group(1)), document + 1, line)
    context = getattr(exc, "context", None)
    if context:
        problem = "%s %s" % (context, problem)
    return ManifestError("invalid YAML: %s" % problem, document + 1, line)


def _unsafe_tag_problem(tag):
    return "YAML tag %r is not allowed (only plain YAML is read; tags that build objects are refused)" % tag


def _check_depth(text):
    """Refuse nesting deeper than MAX_DEPTH before libyaml's recursive composer sees it."""
    long_prefix = _LONG_PREFIX_RE.search(text) is not None
    if not long_prefix and text.count("[") + text.count("{") < _QUICK_DEPTH:
        return
    if not long_prefix and all(chunk.count("[") + chunk.count("{") < _QUICK_DEPTH for chunk in _DOCUMENT_MARK_RE.split(text)):
        return
    depth = 0
    document = 0
    loader = _Parser(text)
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ManifestError("nested deeper than %d levels; refusing to read it" % MAX_DEPTH, document, event.start_mark.line + 1)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.DocumentStartEvent):
                document += 1
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, max(document - 1, 0)) from None
    finally:
        loader.dispose()


def _check_tags(root, document):
    """Refuse explicit tags outside the YAML core schema anywhere in a composed document (aliases visited once)."""
    stack = [root]
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.tag not in _SAFE_TAGS:
            raise ManifestError(_unsafe_tag_problem(node.tag), document + 1, node.start_mark.line + 1)
        if isinstance(node, MappingNode):
            for key, value in node.value:
                stack.append(key)
                stack.append(value)
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)


def _iter_nodes(text):
    """Yield ``(index, root node)`` per document; each document is dropped once the caller moves on."""
    _check_depth(text)
    explicit_tags = "!" in text  # every YAML tag is written with '!'
    loader = _NodeLoader(text)
    index = 0
    try:
        while True:
            try:
                if not loader.check_node():
                    break
                node = loader.get_node()
            except yaml.YAMLError as exc:
                raise _yaml_error(exc, index) from None
            except RecursionError:
                raise ManifestError("nested too deeply to read", index + 1) from None
            if explicit_tags and node is not None:
                _check_tags(node, index)
            yield index, node
            index += 1
            if index > MAX_DOCUMENTS:
                raise ManifestError("more than %d documents; split the manifest" % MAX_DOCUMENTS)
    finally:
        loader.dispose()


def load_documents(text_or_stream):
    """Load every YAML document of a manifest with a safe loader (libyaml when available).

    Returns the list of documents, ``None`` for empty ones (so indexes match the file).
    Raises :class:`ManifestError` for unreadable text, invalid YAML or tags that build objects.
    """
    text = _read_text(text_or_stream)
    _check_depth(text)
    documents = []
    loader = _ObjectLoader(text)
    try:
        while loader.check_data():
            documents.append(loader.get_data())
            if len(documents) > MAX_DOCUMENTS:
                raise ManifestError("more than %d documents; split the manifest" % MAX_DOCUMENTS)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, len(documents)) from None
    except RecursionError:
        raise ManifestError("nested too deeply to read", len(documents) + 1) from None
    finally:
        loader.dispose()
    return documents


# ---------------------------------------------------------------------------
# two views of a document: composed YAML nodes, or plain Python objects


class _ObjectView:
    """Already-loaded documents (dicts and lists)."""

    @staticmethod
    def is_null(value):
        return value is None

    @staticmethod
    def as_map(value, _walker):
        return value if isinstance(value, dict) else None

    @staticmethod
    def as_list(value):
        return value if isinstance(value, (list, tuple)) else None

    @staticmethod
    def as_text(value):
        return str(value) if isinstance(value, str) else None

    @staticmethod
    def quantity(value):
        """Return ``(count or None, shown)`` for a resource quantity."""
        if isinstance(value, bool):
            return None, str(value).lower()
        if isinstance(value, int):
            return (int(value) if value >= 0 else None), str(value)
        if isinstance(value, float):
            return (int(value) if value.is_integer() and value >= 0 else None), repr(value)
        if isinstance(value, str):
            return _whole(value), repr(str(value))
        return None, type(value).__name__

    @staticmethod
    def line(_value):
        return None


class _NodeView:
    """Composed YAML nodes: mappings are read on demand, merge keys honoured, nothing else constructed."""

    @staticmethod
    def is_null(node):
        return node is None or (isinstance(node, ScalarNode) and node.tag == _NULL_TAG)

    @staticmethod
    def as_map(node, walker):
        if not isinstance(node, MappingNode):
            return None
        result = {}
        _merge_into(result, node, walker, set(), 0)
        return result

    @staticmethod
    def as_list(node):
        return node.value if isinstance(node, SequenceNode) else None

    @staticmethod
    def as_text(node):
        if isinstance(node, ScalarNode) and node.tag != _NULL_TAG:
            return node.value
        return None

    @staticmethod
    def quantity(node):
        if not isinstance(node, ScalarNode) or node.tag == _NULL_TAG:
            return None, "null" if _NodeView.is_null(node) else "a %s" % ("list" if isinstance(node, SequenceNode) else "mapping")
        return _whole(node.value), repr(node.value)

    @staticmethod
    def line(node):
        return node.start_mark.line + 1 if node is not None else None


def _whole(text):
    """``"2"``, ``"+2"``, ``"2.0"`` -> 2; anything else (``"1.5"``, ``"500m"``, ``"-1"``, ``"1k"``) -> None."""
    match = _QUANTITY_RE.match(text)
    return int(match.group(1)) if match else None


def _merge_into(result, node, walker, seen, depth):
    """Read ``node``'s keys into ``result``: own keys first, then merged mappings in order (earlier wins)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if depth > MAX_DEPTH:
        raise ManifestError("merge keys nested deeper than %d levels" % MAX_DEPTH, walker.document + 1, node.start_mark.line + 1)
    own = {}
    merges = []
    for key, value in node.value:
        walker.step()
        if key.tag == _MERGE_TAG:
            merges.append(value)
        elif isinstance(key, ScalarNode):
            own[key.value] = value  # a repeated key keeps its last value, as a YAML load would
    for key, value in own.items():
        result.setdefault(key, value)
    for merge in merges:
        sources = merge.value if isinstance(merge, SequenceNode) else [merge]
        for source in sources:
            if isinstance(source, MappingNode):
                _merge_into(result, source, walker, seen, depth + 1)


# ---------------------------------------------------------------------------
# the walk


class _Walker:
    def __init__(self, view, resources, max_per_container, budget=MAX_STEPS):
        self.view = view
        self.resources = resources
        self.max = max_per_container
        self.offenders = []
        self.steps = 0
        self.budget = budget
        self.document = 0

    def step(self):
        self.steps += 1
        if self.steps > self.budget:
            raise ManifestError(
                "more than %d containers, items or keys to visit (YAML aliases multiplying content?); split the manifest" % self.budget,
                self.document + 1,
            )

    def fail(self, problem, node):
        raise ManifestError(problem, self.document + 1, self.view.line(node))

    def mapping(self, node, where):
        result = self.view.as_map(node, self)
        if result is None:
            self.fail("%s must be a mapping" % where, node)
        return result

    def check_document(self, index, doc):
        self.document = index
        if self.view.is_null(doc):
            return
        self.check_object(doc, "", None, 0, set())

    def check_object(self, node, where, default_kind, depth, seen):
        view = self.view
        obj = view.as_map(node, self)
        if obj is None:
            self.fail("%s is not a Kubernetes object (expected a mapping with kind, metadata, spec)" % (where.rstrip(".") or "the document"), node)
        kind = view.as_text(obj.get("kind")) or default_kind
        if kind is None:
            return
        if kind == "List" or (kind.endswith("List") and "items" in obj):
            self.check_list(obj, where, None if kind == "List" else kind[: -len("List")], depth, seen)
            return
        path = _POD_SPEC_PATHS.get(kind)
        if path is None:
            return
        metadata = view.as_map(obj.get("metadata"), self) or {}
        name = view.as_text(metadata.get("name")) or view.as_text(metadata.get("generateName")) or ""
        current = obj
        for position, key in enumerate(path):
            child = current.get(key)
            if view.is_null(child):
                return
            current = self.mapping(child, where + ".".join(path[: position + 1]))
        spec_path = where + ".".join(path)
        for field in _CONTAINER_FIELDS:
            containers = current.get(field)
            if view.is_null(containers):
                continue
            items = view.as_list(containers)
            if items is None:
                self.fail("%s.%s must be a list" % (spec_path, field), containers)
            for position, container in enumerate(items):
                self.step()
                self.check_container(container, "%s.%s[%d]" % (spec_path, field, position), kind, name)

    def check_list(self, obj, where, item_kind, depth, seen):
        view = self.view
        items_node = obj.get("items")
        if view.is_null(items_node):
            return
        items = view.as_list(items_node)
        if items is None:
            self.fail("%sitems must be a list" % where, items_node)
        if depth >= MAX_LIST_DEPTH:
            self.fail("Lists nested deeper than %d levels" % MAX_LIST_DEPTH, items_node)
        for position, item in enumerate(items):
            self.step()
            if id(item) in seen or view.is_null(item):
                continue  # an alias of an item already checked
            seen.add(id(item))
            self.check_object(item, "%sitems[%d]." % (where, position), item_kind, depth + 1, seen)

    def check_container(self, node, where, kind, name):
        view = self.view
        container = self.mapping(node, where)
        container_name = view.as_text(container.get("name")) or where.rsplit(".", 1)[-1]
        resources_node = container.get("resources")
        if view.is_null(resources_node):
            return
        resources = self.mapping(resources_node, where + ".resources")
        counts = {}
        for section in ("limits", "requests"):
            section_node = resources.get(section)
            if view.is_null(section_node):
                continue
            amounts = self.mapping(section_node, "%s.resources.%s" % (where, section))
            for resource in self.resources:
                if resource not in amounts:
                    continue
                value = amounts[resource]
                count, shown = view.quantity(value)
                if count is None:
                    self.fail(
                        "%s.resources.%s[%s] is %s, not a whole number (extended resources are requested in whole units)" % (where, section, resource, shown),
                        value if value is not None else node,
                    )
                counts[resource] = max(count, counts.get(resource, 0))
        for resource in self.resources:
            count = counts.get(resource)
            if count is not None and count > self.max:
                self.offenders.append(
                    {"document": self.document, "kind": kind, "name": name, "container": container_name, "resource": resource, "count": count}
                )


def _check_options(resources, max_per_container):
    if isinstance(resources, str):
        resources = (resources,)
    resources = tuple(resources)
    if not resources or not all(isinstance(item, str) and item for item in resources):
        raise ValueError("resources must be a non-empty list of resource names, e.g. ['nvidia.com/gpu']")
    if isinstance(max_per_container, bool) or not isinstance(max_per_container, int) or max_per_container < 0:
        raise ValueError("max_per_container must be a non-negative integer, got %r" % (max_per_container,))
    return tuple(dict.fromkeys(str(item) for item in resources)), int(max_per_container)


def find_offenders(documents_or_text, resources=DEFAULT_RESOURCES, max_per_container=1):
    """List every container that asks for more than ``max_per_container`` of one of ``resources``.

    ``documents_or_text`` is YAML text (``str``/``bytes``/a readable stream; several documents
    allowed), one object (``dict``) or a list of objects. Workloads are Pod, PodTemplate,
    Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob and
    ``List``s of them; containers, initContainers and ephemeralContainers are checked, in
    both ``limits`` and ``requests`` (the larger counts). Each offender is
    ``{"document": 0-based index, "kind", "name", "container", "resource", "count"}``.
    Raises :class:`ManifestError` for unreadable or invalid input, ``ValueError`` for bad options.
    """
    resources, max_per_container = _check_options(resources, max_per_container)
    if isinstance(documents_or_text, (str, bytes, bytearray)) or hasattr(documents_or_text, "read"):
        text = _read_text(documents_or_text)
        walker = _Walker(_NodeView, resources, max_per_container, budget=MAX_STEPS + len(text))
        for index, node in _iter_nodes(text):
            walker.check_document(index, node)
        return walker.offenders
    if isinstance(documents_or_text, dict):
        documents = [documents_or_text]
    elif isinstance(documents_or_text, (list, tuple)):
        documents = documents_or_text
    elif documents_or_text is None:
        documents = []
    else:
        raise ManifestError("expected YAML text, an object or a list of objects, got %s" % type(documents_or_text).__name__)
    walker = _Walker(_ObjectView, resources, max_per_container)
    for index, document in enumerate(documents):
        walker.check_document(index, document)
    return walker.offenders


# ---------------------------------------------------------------------------
# command line


def _read_file(path):
    if path == "-":
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        return _read_text(stream)
    with open(path, "rb") as handle:
        return _read_text(handle)


def _say(stream, line):
    """One line of the CLI's output (the module never calls this)."""
    stream.write(line + "\n")


def main(argv=None):
    """``check-request <pod-manifest>``: exit 0 and ``OK``, exit 1 and ``OVER=<container>=<count>`` lines, or exit 2."""
    parser = argparse.ArgumentParser(
        prog="check-request",
        description="Reject GPU requests larger than one slice before deploying: prints OVER=<container>=<count> "
        "per offending container (exit 1) or OK (exit 0); exit 2 when the manifest cannot be read.",
    )
    parser.add_argument("manifest", help="manifest file with one or more YAML documents ('-' reads standard input)")
    parser.add_argument("--resource", action="append", dest="resources", metavar="NAME", help="resource to check (repeatable; default nvidia.com/gpu)")
    parser.add_argument("--max", type=int, default=1, dest="max_per_container", metavar="N", help="most units one container may ask for (default 1)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code in (0, None) else 2
    try:
        resources, max_per_container = _check_options(args.resources or DEFAULT_RESOURCES, args.max_per_container)
    except ValueError as exc:
        _say(sys.stderr, "check-request: %s" % exc)
        return 2
    try:
        offenders = find_offenders(_read_file(args.manifest), resources=resources, max_per_container=max_per_container)
    except OSError as exc:
        _say(sys.stderr, "check-request: cannot read %s: %s" % (args.manifest, exc.strerror or exc))
        return 2
    except ManifestError as exc:
        _say(sys.stderr, "check-request: %s: %s" % (args.manifest, exc))
        return 2
    if offenders:
        for offender in offenders:
            _say(sys.stdout, "OVER=%s=%d" % (offender["container"], offender["count"]))
        return 1
    _say(sys.stdout, "OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
