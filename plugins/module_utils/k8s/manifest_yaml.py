# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The collection's hardened YAML reader: manifests read as kubectl reads them, or refused.

Two readings, one home:

- :func:`kubectl_documents` composes each document from libyaml's events the way kubectl's reader
  (``sigs.k8s.io/yaml`` over ``go.yaml.in/yaml/v2``, after the ``---`` line split of
  ``k8s.io/apimachinery``) does, and refuses every construct on which the two could disagree: explicit
  tags (``!!binary`` is decoded by kubectl, ``!Ref`` passes as a string), repeated keys, keys that are
  not plain strings, numbers or booleans, YAML directives, ``...`` document ends, text after ``---``,
  and JSON followed by more input. Anchors, aliases and merge keys are read as kubectl reads them: an
  alias is the anchored value (the latest anchor of that name), a ``<<`` sets the merged keys where it
  stands (so a ``<<`` written after a key overrides it, as kubectl does, unlike the YAML spec; in a list
  of merged mappings the earlier ones win), and a document is refused where kubectl refuses it: an
  anchor whose value contains its own alias, a merge of something that is not a mapping, and
  "excessive aliasing" (kubectl's budget of expanded aliases, counted node by node as it counts them).
  What is left is read by :func:`mapping` and :func:`scalar` exactly as kubectl resolves it (YAML 1.1
  booleans, octal ``010``, ``1_000``, ``0x10``, floats like ``2e0``).
- :func:`load_documents` and :func:`iter_nodes` are the permissive safe readers (core-schema tags
  and aliases allowed, tags that build objects refused) for files the collection reads itself.

Hostile input stays cheap in both: input size, document count and nesting depth are bounded before
libyaml recurses; aliases are expanded only as far as kubectl's own budget allows. Pure Python (PyYAML), no Ansible import, so the
lab's ``bin/check-request.sh`` embeds this file.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

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
    "MAX_DEPTH",
    "MAX_DOCUMENTS",
    "MAX_INPUT_BYTES",
    "ManifestError",
    "is_null",
    "iter_nodes",
    "json_token",
    "kubectl_documents",
    "load_documents",
    "mapping",
    "node_data",
    "read_text",
    "scalar",
]

MAX_INPUT_BYTES = 32 * 1024 * 1024
MAX_DOCUMENTS = 100000
MAX_DEPTH = 200
# Below these, nesting cannot exceed MAX_DEPTH: flow depth < _QUICK_DEPTH per document and
# block depth <= 2 * (indentation + indicators) + 2; above them an exact event scan decides.
_QUICK_DEPTH = 64
_LONG_PREFIX_RE = re.compile(r"^[ \t?:-]{%d,}" % _QUICK_DEPTH, re.M)
_DOCUMENT_MARK_RE = re.compile(r"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.M)

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
# Tags the kubectl reading gives nodes written without a tag; any other tag was written explicitly.
_PLAIN = "gpushare:plain"
_QUOTED = "gpushare:quoted"
_COLLECTION = "gpushare:collection"


class ManifestError(Exception):
    """A manifest that cannot be checked: unreadable, invalid YAML, a refused construct, malformed workload.

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
# text, depth, errors


def read_text(text_or_stream):
    """Return the manifest as ``str``, refusing anything larger than MAX_INPUT_BYTES or not UTF-8."""
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


# ---------------------------------------------------------------------------
# the permissive safe reading (files the collection reads for itself)


class _LightResolver(BaseResolver):
    """Resolves only null (empty documents) and merge keys; every other plain scalar stays a string."""

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


def iter_nodes(text):
    """Yield ``(index, root node)`` per document of ``text`` (a ``str``); the permissive reading.

    Core-schema tags and aliases are allowed (aliases are shared nodes, never expanded), tags that
    build objects are refused. Each document is dropped once the caller moves on.
    """
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
    """Load every YAML document of a manifest with a safe loader (libyaml when available); the permissive reading.

    Returns the list of documents, ``None`` for empty ones (so indexes match the file).
    Raises :class:`ManifestError` for unreadable text, invalid YAML or tags that build objects.
    """
    text = read_text(text_or_stream)
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
# the kubectl reading


class _AliasNode:  # pylint: disable=too-few-public-methods
    """An alias (``*name``) where it is written; kubectl's reader keeps it as a node of its own and expands it when decoding."""

    __slots__ = ("anchor", "target", "start_mark", "end_mark")

    def __init__(self, anchor, target, start_mark, end_mark):
        self.anchor = anchor
        self.target = target
        self.start_mark = start_mark
        self.end_mark = end_mark


def _tag(event, kind):
    """The tag a node of the kubectl reading carries: how it was written (plain, quoted, untagged collection) or its explicit tag."""
    if event.tag is not None and event.tag != "!":
        return event.tag
    if kind is ScalarNode:
        if event.implicit[0]:
            return _PLAIN
        if event.implicit[1]:
            return _QUOTED
        return "!"  # the non-specific tag "!" written explicitly
    return _COLLECTION if event.implicit else "!"


class _Document:  # pylint: disable=too-few-public-methods
    """One composed document: its root node and whether it holds an alias."""

    __slots__ = ("root", "has_alias")

    def __init__(self):
        self.root = None
        self.has_alias = False


def _compose(text):
    """Yield a :class:`_Document` per YAML document of ``text``, composed from libyaml's events as kubectl's reader composes them.

    Unlike PyYAML's composer, an anchor may be defined again (an alias names the latest definition, as in
    kubectl's reader) and an alias stays an :class:`_AliasNode` where it is written, so its expansion can
    be counted as kubectl counts it.
    """
    parser = _Parser(text)
    index = 0
    try:
        try:
            parser.get_event()  # stream start
            while not parser.check_event(yaml.StreamEndEvent):
                parser.get_event()  # document start
                document = _Document()
                anchors = {}
                stack = []  # [collection node, pending mapping key]
                while True:
                    event = parser.get_event()
                    if isinstance(event, yaml.DocumentEndEvent):
                        break
                    if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                        node = stack.pop()[0]
                        node.end_mark = event.end_mark
                        if not stack:
                            document.root = node
                        continue
                    if isinstance(event, yaml.AliasEvent):
                        if event.anchor not in anchors:
                            raise ManifestError("invalid YAML: unknown anchor %r referenced (kubectl refuses it)" % event.anchor, index + 1,
                                                event.start_mark.line + 1)
                        node = _AliasNode(event.anchor, anchors[event.anchor], event.start_mark, event.end_mark)
                        document.has_alias = True
                        opened = False
                    elif isinstance(event, yaml.ScalarEvent):
                        node = ScalarNode(_tag(event, ScalarNode), event.value, event.start_mark, event.end_mark, style=event.style)
                        opened = False
                    else:
                        kind = SequenceNode if isinstance(event, yaml.SequenceStartEvent) else MappingNode
                        node = kind(_tag(event, kind), [], event.start_mark, None, flow_style=event.flow_style)
                        opened = True
                    if getattr(event, "anchor", None) is not None and not isinstance(event, yaml.AliasEvent):
                        anchors[event.anchor] = node  # registered before its children: an alias inside refers to it
                    if stack:
                        parent = stack[-1]
                        if isinstance(parent[0], SequenceNode):
                            parent[0].value.append(node)
                        elif parent[1] is None:
                            parent[1] = node
                        else:
                            parent[0].value.append((parent[1], node))
                            parent[1] = None
                    elif not opened:
                        document.root = node
                    if opened:
                        stack.append([node, None])
                yield document
                index += 1
        except yaml.YAMLError as exc:
            raise _yaml_error(exc, index) from None
    finally:
        parser.dispose()


def target(node):
    """The node an alias stands for (any other node: itself)."""
    return node.target if isinstance(node, _AliasNode) else node


_SEPARATOR_LINE_RE = re.compile(r"^---(.*)$", re.M)
# Timestamps (2001-12-14) need no rule: kubectl's reader keeps them as their text, and so does this one.
_END_LINE_RE = re.compile(r"^\.\.\.(?:[ \t].*)?$", re.M)
_DIRECTIVE_LINE_RE = re.compile(r"^%", re.M)
_BOOLS = {}
for _words, _value in (("y Y yes Yes YES true True TRUE on On ON", True), ("n N no No NO false False FALSE off Off OFF", False)):
    for _word in _words.split():
        _BOOLS[_word] = _value
_SPECIAL_FLOATS = frozenset((".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"))
_YAML_FLOAT_RE = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INT_RE = re.compile(r"^([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


class _Unsupported(Exception):
    """A plain scalar whose reading by kubectl this reader does not reproduce."""


def _refuse(construct, why, fix, document, node):
    raise ManifestError("%s is not allowed: %s. Fix: %s" % (construct, why, fix), document + 1, node.start_mark.line + 1 if node is not None else None)


def _check_text(text):
    """Refuse what kubectl's document split (a line starting with ``---``) and YAML reader treat differently from YAML."""
    for match in _SEPARATOR_LINE_RE.finditer(text):
        rest = match.group(1)
        if rest.strip() and not (rest[0] in " \t" and rest.strip().startswith("#")):
            line = text.count("\n", 0, match.start()) + 1
            raise ManifestError(
                "a line starting with '---' followed by %r: kubectl splits documents at every line starting with '---' and "
                "refuses text after it. Fix: put the document on the lines after '---'" % rest.strip()[:20],
                None,
                line,
            )
    for regex, what in ((_END_LINE_RE, "a '...' document end"), (_DIRECTIVE_LINE_RE, "a YAML directive ('%' at the start of a line)")):
        match = regex.search(text)
        if match:
            line = text.count("\n", 0, match.start()) + 1
            raise ManifestError(
                "%s is not allowed: kubectl reads only the first document of each '---' section and ignores the rest. "
                "Fix: separate documents with '---' lines only" % what,
                None,
                line,
            )


def _json_stream(text):
    """kubectl reads input starting with '{' as JSON: refuse JSON followed by anything, which it reads its own way."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return
    decoder = json.JSONDecoder(parse_constant=_no_constant)
    try:
        _value, end = decoder.raw_decode(stripped)
    except (ValueError, _Unsupported):
        return  # not JSON: kubectl falls back to YAML for the whole input, as this reader does
    if stripped[end:].strip():
        raise ManifestError(
            "a JSON object followed by more input: kubectl reads it as a stream of JSON objects, not as YAML. "
            "Fix: send one JSON object per file, or write the manifest as YAML documents separated by '---'",
            1,
            None,
        )


def _no_constant(name):
    raise _Unsupported(name)


def plain_value(value):
    """The value kubectl's YAML reader gives a plain (unquoted, untagged) scalar: None, bool, int, float or str.

    Raises :class:`_Unsupported` for values kubectl cannot send as JSON (NaN, infinities).
    """
    if value in _NULL_VALUES:
        return None
    if value in _BOOLS:
        return _BOOLS[value]
    if value in _SPECIAL_FLOATS:
        raise _Unsupported("%s (not a number JSON can carry)" % value)
    if not value or value[0] not in "+-.0123456789":
        return value
    if value[0] == ".":
        return _float_or_text(value, value) if _YAML_FLOAT_RE.match(value) else value
    plain = value.replace("_", "")
    number = _go_int(plain)
    if number is not None:
        return number
    if _YAML_FLOAT_RE.match(plain):
        return _float_or_text(plain, value)
    return value


def _go_int(plain):
    """Go's ``ParseInt(s, 0, 64)``, then ``ParseUint(s, 0, 64)``: an int, or None."""
    match = _INT_RE.match(plain)
    if not match:
        return None
    sign, digits = match.groups()
    if len(digits) > 1 and digits[0] == "0" and digits[1] in "xXoObB":
        number = int(digits[2:], {"x": 16, "o": 8, "b": 2}[digits[1].lower()])
    elif len(digits) > 1 and digits[0] == "0":
        number = int(digits[1:], 8)
    else:
        if len(digits) > 20:
            return None
        number = int(digits)
    if sign == "-":
        number = -number
    if _INT64_MIN <= number <= _INT64_MAX:
        return number
    if sign == "" and number <= _UINT64_MAX:
        return number  # a uint64; kubectl's JSON handling turns it into a float64 on the way out
    return None


def _float_or_text(plain, original):
    number = float(plain)
    if math.isinf(number):
        return original  # Go's ParseFloat fails on overflow: kubectl keeps the text
    if number == 0 and any(digit in "123456789" for digit in plain.split("e")[0].split("E")[0]):
        raise _Unsupported("%s (too small for a float64)" % original)
    return number


def json_token(value):
    """The JSON text kubectl sends for a scalar value (after its own JSON round trip), e.g. 2.0 -> ``2``, 1e21 -> ``1e+21``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return str(value)
        value = float(value)  # kubectl reads integers beyond int64 back as float64
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise _Unsupported(repr(value))
        if value == 0:
            return "0"
        if 1e-6 <= abs(value) < 1e21:  # Go: the shortest digits, positional
            text = format(Decimal(repr(value)), "f")
            return text.rstrip("0").rstrip(".") if "." in text else text
        mantissa, exponent = repr(value).split("e")  # Go: the shortest digits, e+21 / e-7
        return "%se%s%d" % (mantissa[:-2] if mantissa.endswith(".0") else mantissa, "-" if exponent.startswith("-") else "+", abs(int(exponent)))
    return json.dumps(value)


_NUMBER_START = frozenset("+-.0123456789")
# How kubectl's reader scales the share of a document that may come from expanding aliases (go.yaml.in/yaml/v2):
# up to 99 % below 400,000 decoded nodes, down to 10 % at 4,000,000; checked only past 100 aliased and 1,000 nodes.
ALIAS_RATIO_LOW, ALIAS_RATIO_HIGH = 400000, 4000000


def _allowed_alias_ratio(decoded):
    if decoded <= ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (float(decoded - ALIAS_RATIO_LOW) / (ALIAS_RATIO_HIGH - ALIAS_RATIO_LOW))


def _is_merge(key):
    return isinstance(key, ScalarNode) and key.tag == _PLAIN and key.value == "<<"


def _key_text(key, document):
    """The string kubectl uses for a mapping key, or a refusal."""
    aliased = isinstance(key, _AliasNode)
    key = target(key)
    text = key.value
    if key.tag == _PLAIN and text and text[0] not in _NUMBER_START and text not in _BOOLS and text not in _NULL_VALUES and text != "<<":
        return text  # the common case: a plain word stays that word
    if not isinstance(key, ScalarNode):
        _refuse("a mapping or list used as a key", "kubectl refuses it", "use a string key", document, key)
    if key.tag == _QUOTED:
        return key.value
    if key.tag != _PLAIN:
        return None  # refused with the tags
    if key.value == "<<":
        if aliased:
            return "<<"  # an alias is never a merge: kubectl reads the key "<<"
        _refuse("a merge key ('<<') here", "kubectl refuses it", "merge a mapping", document, key)  # not reached: merges are read apart
    try:
        value = plain_value(key.value)
    except _Unsupported:
        value = 0.5  # refused below
    if value is None:
        _refuse("a null key (%r)" % key.value, "kubectl refuses it", "use a string key", document, key)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        _refuse("a floating-point key (%r)" % key.value, "kubectl turns it into a string of its own", "quote the key", document, key)
    return value


def _key_identity(key):
    """The key as kubectl's reader holds it before it becomes a JSON string: ``(type, value)``."""
    key = target(key)
    if key.tag == _PLAIN:
        value = plain_value(key.value)
        return (type(value).__name__, value)
    return ("str", key.value)


def _merge_sources(value, document):
    """The mappings a ``<<`` merges, in the order kubectl applies them (a later one overrides), or a refusal."""
    node = target(value)
    if isinstance(node, MappingNode):
        return [node]
    if isinstance(value, SequenceNode):  # written in place: an alias of a list is refused
        sources = [target(item) for item in reversed(value.value)]  # earlier mappings take precedence: applied last
        if all(isinstance(item, MappingNode) for item in sources):
            return sources
    _refuse(
        "a merge ('<<') of something that is not a mapping",
        "kubectl refuses it (\"map merge requires map or sequence of maps as the value\")",
        "merge a mapping, an alias of one or a list of them",
        document,
        node,
    )
    return []  # not reached


def _merged(node, document):
    """A mapping node's ``{key as kubectl spells it: value node}`` with its merges applied as kubectl applies them (cached).

    A merged mapping contributes what it holds once its own merges are applied, so each mapping is merged once. The
    mappings a chain of merges names are merged first, from the end of the chain, without recursion: a chain is as deep
    as kubectl's alias budget lets it be, never as deep as Python's stack.
    """
    cached = getattr(node, "_gpushare_pairs", None)
    if cached is not None:
        return cached
    stack = [node]
    opened = set()  # mappings whose merged sources are being merged first
    while stack:
        current = stack[-1]
        if getattr(current, "_gpushare_pairs", None) is not None:
            stack.pop()
            continue
        waiting = [source for key, value in current.value if _is_merge(key) for source in _merge_sources(value, document)
                   if getattr(source, "_gpushare_pairs", None) is None]
        if not waiting:
            _merge_pairs(current, document)
            opened.discard(id(current))
            stack.pop()
            continue
        opened.add(id(current))
        for source in waiting:
            if id(source) in opened:
                _refuse(
                    "a mapping merged ('<<') into itself",
                    "kubectl refuses it (\"anchor value contains itself\")",
                    "merge other mappings than the one being written",
                    document,
                    source,
                )
            stack.append(source)
    return node._gpushare_pairs  # pylint: disable=protected-access


def _merge_pairs(node, document):
    """Apply one mapping's merges, every mapping it merges being merged already (see :func:`_merged`)."""
    pairs = {}
    identities = {}

    def put(text, identity, value, key):
        if identities.get(text, identity) != identity:
            _refuse(
                "the key %r written twice, once merged ('<<')" % text,
                "kubectl holds two different keys that become the same string and sends either value",
                "write the key once, in one spelling",
                document,
                target(key),
            )
        identities[text] = identity
        pairs[text] = (value, identity, key)

    for key, value in node.value:
        if _is_merge(key):
            for source in _merge_sources(value, document):
                for text, (merged_value, identity, merged_key) in source._gpushare_entries.items():  # pylint: disable=protected-access
                    put(text, identity, merged_value, merged_key)
            continue
        put(_key_text(key, document), _key_identity(key), value, key)
    node._gpushare_entries = pairs  # pylint: disable=protected-access
    node._gpushare_pairs = {text: entry[0] for text, entry in pairs.items()}  # pylint: disable=protected-access


def _distinct_nodes(root):
    """Every node of a composed document once (list items, mapping values, tagged keys), however many aliases name it."""
    stack = [root]
    seen = set()
    while stack:
        node = target(stack.pop())
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        if isinstance(node, MappingNode):
            for key, value in node.value:
                stack.append(value)
                if not _is_merge(key) and target(key).tag not in (_PLAIN, _QUOTED):
                    stack.append(key)  # a tagged key is refused with its tag
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)


def _check_kubectl(root, document):
    """Refuse, anywhere in a composed document, what kubectl reads differently or refuses: tags, repeated keys, bad keys and merges."""
    for node in _distinct_nodes(root):
        if node.tag not in (_PLAIN, _QUOTED, _COLLECTION):
            _refuse(
                "the YAML tag %r" % node.tag.replace(_TAG, "!!"),
                "kubectl decodes some tags (!!binary) and sends others as plain text, so what it sends is not what is written",
                "remove the tag and write the plain value",
                document,
                node,
            )
        if isinstance(node, MappingNode):
            keys = set()
            for key, value in node.value:
                if _is_merge(key):
                    _merge_sources(value, document)
                    continue
                if target(key).tag not in (_PLAIN, _QUOTED):
                    continue  # refused with its tag
                text = _key_text(key, document)
                if text in keys:
                    _refuse("the repeated key %r" % text, "YAML readers disagree on which value wins", "keep one %r key per mapping" % text, document, key)
                keys.add(text)
        elif isinstance(node, ScalarNode) and node.tag == _PLAIN and node.value[:1] in _NUMBER_START:
            try:
                plain_value(node.value)
            except _Unsupported as exc:
                _refuse("the value %s" % exc, "kubectl cannot send it as JSON", "quote it, or write a number", document, node)


def _check_merges(root, document):
    """Apply every mapping's merges once (so a key two merges spell differently is refused before anything reads it)."""
    for node in _distinct_nodes(root):
        if isinstance(node, MappingNode) and any(_is_merge(key) for key, _value in node.value):
            _merged(node, document)


def _check_alias_budget(root, document):
    """Count the nodes kubectl's reader decodes, in its order, and refuse where it refuses.

    kubectl (go.yaml.in/yaml/v2) decodes the document node, then every key and value, every list item,
    each merged mapping (not the list holding them) and, through each alias, the anchored value again.
    It refuses an alias met again inside its own expansion ("anchor value contains itself") and, past 100
    nodes decoded through aliases and 1,000 in all, a document where the aliased share exceeds
    :func:`_allowed_alias_ratio` ("excessive aliasing").
    """
    decoded, aliased = 1, 0  # the document node
    expanding = set()
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if depth < 0:
            expanding.discard(id(node))
            continue
        decoded += 1
        if depth:
            aliased += 1
        if aliased > 100 and decoded > 1000 and aliased / decoded > _allowed_alias_ratio(decoded):
            _refuse(
                "this much aliasing",
                "kubectl refuses a document whose YAML aliases expand to more than it allows (\"document contains excessive "
                "aliasing\"): %d of its first %d values come from aliases" % (aliased, decoded),
                "write the repeated values out, or use fewer aliases",
                document,
                None,
            )
        if isinstance(node, _AliasNode):
            if id(node) in expanding:
                _refuse(
                    "the alias *%s inside the value it names" % node.anchor,
                    "kubectl refuses it (\"anchor '%s' value contains itself\")" % node.anchor,
                    "write the value out without referring to itself",
                    document,
                    node,
                )
            expanding.add(id(node))
            stack.append((node, -1))
            stack.append((node.target, depth + 1))
        elif isinstance(node, MappingNode):
            for key, value in reversed(node.value):
                if _is_merge(key):
                    if isinstance(value, SequenceNode):
                        stack.extend((item, depth) for item in value.value)  # applied last to first, so pushed first to last
                    else:
                        stack.append((value, depth))
                else:
                    stack.append((value, depth))
                    stack.append((key, depth))
        elif isinstance(node, SequenceNode):
            stack.extend((item, depth) for item in reversed(node.value))


def _check_event_tags(text):
    """Refuse every explicit tag, the non-specific '!' included (libyaml reports '! 2' like a plain 2; kubectl reads a string)."""
    loader = _Parser(text)
    document = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.DocumentStartEvent):
                document += 1
            elif getattr(event, "tag", None) is not None:
                raise ManifestError(
                    "the YAML tag %r is not allowed: kubectl decodes some tags (!!binary) and sends others as plain text, so what "
                    "it sends is not what is written. Fix: remove the tag and write the plain value" % event.tag.replace(_TAG, "!!"),
                    max(document, 1),
                    event.start_mark.line + 1,
                )
    except yaml.YAMLError:
        return  # reported with its document by the reading itself
    finally:
        loader.dispose()


def kubectl_documents(text):
    """Yield ``(index, root node)`` per document of ``text`` (a ``str``), as kubectl would read them, or raise ManifestError.

    Every node of every document is checked before it is yielded (see the module's docstring for
    what is refused); read the nodes with :func:`is_null`, :func:`mapping`, :func:`sequence` and
    :func:`scalar` (each follows aliases).
    """
    _check_text(text)
    _json_stream(text)
    _check_depth(text)
    if "!" in text:  # every YAML tag is written with '!'
        _check_event_tags(text)
    index = 0
    for document in _compose(text):
        node = document.root
        if node is not None:
            _check_kubectl(node, index)
            if document.has_alias:
                _check_alias_budget(node, index)
            _check_merges(node, index)
        yield index, node
        index += 1
        if index > MAX_DOCUMENTS:
            raise ManifestError("more than %d documents; split the manifest" % MAX_DOCUMENTS)


def node_data(node):
    """A document of :func:`kubectl_documents` as the data kubectl sends (dicts, lists, str, bool, None, int, float).

    Built without recursion: aliases may nest a document deeper than Python's stack.
    """
    result = []
    stack = [(node, result, None)]  # (node, the container its value goes into, the key there or None to append)
    while stack:
        current, into, key = stack.pop()
        current = target(current)
        if is_null(current):
            value = None
        elif isinstance(current, MappingNode):
            value = {}
            stack.extend((child, value, text) for text, child in reversed(list(mapping(current).items())))
        elif isinstance(current, SequenceNode):
            value = []
            stack.extend((child, value, None) for child in reversed(current.value))
        else:
            value = scalar(current)
        if key is None:
            into.append(value)
        else:
            into[key] = value
    return result[0]


def is_null(node):
    """True for a missing node or one kubectl reads as null (``~``, ``null``, nothing)."""
    node = target(node)
    return node is None or (isinstance(node, ScalarNode) and node.tag == _PLAIN and node.value in _NULL_VALUES)


def mapping(node):
    """A mapping node of :func:`kubectl_documents` as ``{key as kubectl spells it: value node}``, merges applied; None for other nodes."""
    node = target(node)
    if not isinstance(node, MappingNode):
        return None
    return _merged(node, 0)


def sequence(node):
    """The items of a list node of :func:`kubectl_documents`; None for other nodes."""
    node = target(node)
    return node.value if isinstance(node, SequenceNode) else None


def scalar(node):
    """The value kubectl sends for a scalar node (None, bool, int, float or str); raises ValueError for a list or mapping."""
    node = target(node)
    if not isinstance(node, ScalarNode):
        raise ValueError("not a scalar")
    if node.tag == _QUOTED:
        return node.value
    return plain_value(node.value)
