# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Set or remove extended resources in Node status, through the status subresource.

kubernetes.core cannot patch subresources, and a Node's ``status.capacity`` /
``status.allocatable`` can only be changed there. This file holds:

* validation of the request (resource names, counts, fields), done before any
  call to the API server;
* ``plan_node``: a pure function from a Node's status to the JSON merge patch
  that touches only the managed keys (``null`` removes one), plus the before and
  after view of those keys;
* ``apply_node_resources``: reads the target Nodes (one LIST when more than one
  Node is named or a selector is used), refuses Nodes that kwok does not manage,
  and patches the changed Nodes concurrently, retrying conflicts after re-reading
  the Node. Transient failures (429, 5xx, connections refused or cut) are retried
  below, by the client's urllib3 ``Retry`` (``k8s_auth.api_retry``).

No Ansible import: the module is a thin wrapper and the tests call this directly.
The API is reached through the Kubernetes layer's Node adapter (``k8s.nodes.CoreNodeApi``)
so tests can pass a fake with the same methods.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

from ..errors import GpushareError, is_int
from ..k8s.cluster_objects import REQUEST_TIMEOUT
from ..k8s.nodes import NodeApiError
from ..k8s.quantity import parse_quantity
from ..names import DNS_SUBDOMAIN_RE, KWOK_NODE_ANNOTATION, LABEL_NAME_RE, LABEL_VALUE_RE


FIELDS = ("capacity", "allocatable")
LABELS = "labels"  # the key of before/after holding the managed labels
DEFAULT_FIELDS = FIELDS
STATES = ("present", "absent")
DEFAULT_PARALLELISM = 16
MAX_PARALLELISM = 256
DEFAULT_ATTEMPTS = 10
DEFAULT_REQUEST_TIMEOUT = REQUEST_TIMEOUT

KWOK_ANNOTATION = KWOK_NODE_ANNOTATION
KWOK_ANNOTATION_VALUE = "fake"

MAX_COUNT = 2 ** 63 - 1  # resource.Quantity holds an int64
_EXAMPLE = "use an integer, e.g. 8"

_DNS_SUBDOMAIN_RE = DNS_SUBDOMAIN_RE


class NodeResourcesError(GpushareError):
    """A request that cannot be carried out; nothing has been written.

    The message names the offending option and says how to fix it.
    """


class NodeWriteError(GpushareError):
    """Some Nodes could not be written. ``results`` holds every Node's outcome."""

    def __init__(self, message, results):
        super().__init__(message)
        self.results = results


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------


def resource_name_error(name):
    """Return why ``name`` is not a usable extended resource name, or ``None``."""
    if not isinstance(name, str):
        return 'resources: key {0!r} is not a string; use a resource name such as "nvidia.com/gpu"'.format(name)
    if "/" not in name:
        return (
            'resources: "{0}" is not an extended resource name; cpu, memory, pods and other '
            "names without a domain prefix belong to the kubelet. "
            'Use a domain-prefixed name such as "nvidia.com/gpu"'.format(name)
        )
    if "kubernetes.io/" in name:
        return (
            'resources: "{0}" is in the reserved kubernetes.io domain; '
            'use a domain you own, such as "example.com/{1}"'.format(name, name.rsplit("/", 1)[-1] or "gpu")
        )
    if name.startswith("requests."):
        return (
            'resources: "{0}" starts with "requests.", which resource quotas reserve; '
            'drop the prefix, e.g. "{1}"'.format(name, name[len("requests."):])
        )
    prefix, _sep, short = name.partition("/")
    if (
        not prefix
        or len(prefix) > 253 - len("requests.")
        or not _DNS_SUBDOMAIN_RE.fullmatch(prefix)
        or len(short) > 63
        or not LABEL_NAME_RE.fullmatch(short)
    ):
        return (
            'resources: "{0}" is not a valid extended resource name: the part before "/" must be '
            'a lowercase DNS subdomain (e.g. "nvidia.com") and the part after it 1-63 letters, '
            'digits, "-", "_" or ".", starting and ending with a letter or digit '
            '(e.g. "nvidia.com/gpu")'.format(name)
        )
    return None


def count_error(name, value):
    """Return why ``value`` is not a usable count for resource ``name``, or ``None``."""
    where = 'resources["{0}"]'.format(name)
    if value is None:
        return "{0}: no count given; {1}".format(where, _EXAMPLE)
    if isinstance(value, bool):
        return "{0}: {1!r} is a boolean, not a count; {2}".format(where, value, _EXAMPLE)
    if isinstance(value, int):
        if value < 0:
            return "{0}: {1} is negative; use a non-negative integer, e.g. 8 (0 advertises none)".format(where, value)
        if value > MAX_COUNT:
            return "{0}: {1} is larger than a Kubernetes quantity holds ({2})".format(where, value, MAX_COUNT)
        return None
    if isinstance(value, str):
        return "{0}: {1!r} is a string, not a count; {2}".format(where, value, _EXAMPLE)
    return "{0}: {1!r} is a {2}, not a count; {3}".format(where, value, type(value).__name__, _EXAMPLE)


def normalize_resources(resources, state="present"):
    """Validate ``resources`` and return ``{name: int}`` (present) or ``{name: None}`` (absent).

    For ``present`` a mapping of name to count is required. For ``absent`` a list
    of names, a mapping (values ignored) or a single name is accepted. Every
    problem is reported at once.
    """
    if state not in STATES:
        raise NodeResourcesError("state: {0!r} is not one of {1}".format(state, ", ".join(STATES)))
    if state == "present":
        if not isinstance(resources, dict):
            raise NodeResourcesError(
                'resources: state=present needs a mapping of resource name to count, '
                'e.g. {{"nvidia.com/gpu": 8}}; got {0}'.format(type(resources).__name__)
            )
        items = list(resources.items())
    else:
        if isinstance(resources, str):
            resources = [resources]
        if isinstance(resources, dict):
            items = [(key, None) for key in resources]
        elif isinstance(resources, (list, tuple)):
            items = [(key, None) for key in resources]
        else:
            raise NodeResourcesError(
                "resources: state=absent needs a list of resource names (or a mapping whose "
                "keys are the names); got {0}".format(type(resources).__name__)
            )
    if not items:
        raise NodeResourcesError('resources: is empty; name at least one resource, e.g. "nvidia.com/gpu"')

    errors = []
    normalized = {}
    for name, value in items:
        problem = resource_name_error(name)
        if problem is None and state == "present":
            problem = count_error(name, value)
        if problem is not None:
            errors.append(problem)
            continue
        normalized[name] = value if state == "present" else None
    if errors:
        raise NodeResourcesError("; ".join(errors))
    return normalized


def normalize_fields(fields):
    """Validate ``fields`` and return them as a tuple in a stable order."""
    if fields is None:
        return DEFAULT_FIELDS
    if isinstance(fields, str):
        fields = [fields]
    unknown = [f for f in fields if f not in FIELDS]
    if unknown:
        raise NodeResourcesError(
            "fields: {0} not one of {1}".format(", ".join(repr(f) for f in unknown), ", ".join(FIELDS))
        )
    if not fields:
        raise NodeResourcesError("fields: is empty; use capacity, allocatable or both (the default)")
    return tuple(f for f in FIELDS if f in fields)


def normalize_names(names):
    """Validate node names, drop duplicates and keep their order."""
    if isinstance(names, str):
        names = [names]
    if not names:
        raise NodeResourcesError("name: is empty; give at least one node name or use label_selector")
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise NodeResourcesError("name: {0} is not a node name".format(", ".join(repr(n) for n in bad)))
    seen = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen


def check_parallelism(parallelism):
    if not is_int(parallelism) or not 1 <= parallelism <= MAX_PARALLELISM:
        raise NodeResourcesError(
            "parallelism: {0!r} is out of range; use an integer from 1 to {1} (default {2})".format(
                parallelism, MAX_PARALLELISM, DEFAULT_PARALLELISM
            )
        )
    return parallelism


_ENTRY_KEYS = ("name", "resources", "remove_resources", "labels")


def label_error(key, value, where):
    """Return why ``key: value`` is not a label the API server accepts (``None`` removes it), or ``None``."""
    if not isinstance(key, str):
        return "{0}: key {1!r} is not a string; use a label key such as nvidia.com/device-plugin.config".format(where, key)
    prefix, _sep, short = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(prefix))) or len(short) > 63 or not LABEL_NAME_RE.fullmatch(short):
        return (
            '{0}: "{1}" is not a valid label key: an optional lowercase DNS subdomain and "/", then 1-63 letters, digits, '
            '"-", "_" or ".", starting and ending with a letter or digit (e.g. "nvidia.com/device-plugin.config")'.format(where, key)
        )
    if value is None:
        return None
    if not isinstance(value, str):
        return '{0}["{1}"]: {2!r} is a {3}, not a string; quote it, e.g. "{2}"'.format(where, key, value, type(value).__name__)
    if len(value) > 63 or not LABEL_VALUE_RE.fullmatch(value):
        return (
            '{0}["{1}"]: {2!r} is not a valid label value: at most 63 letters, digits, "-", "_" or ".", starting and ending '
            "with a letter or digit".format(where, key, value)
        )
    return None


def normalize_node_entries(entries):
    """Validate the ``nodes`` option; return ``[(name, {resource: count | None}, labels | None)]`` in order.

    Each entry names one Node and what to set on it: ``resources`` (name to count), ``remove_resources`` (names)
    and ``labels`` (key to value; ``None`` removes the label). Every problem is reported at once.
    """
    if not isinstance(entries, (list, tuple)) or not entries:
        raise NodeResourcesError(
            "nodes: needs a non-empty list of entries such as {{name: lab-node-0, resources: {{nvidia.com/gpu: 8}}, "
            "labels: {{nvidia.com/device-plugin.config: shared}}}}; got {0!r}".format(entries)
        )
    errors = []
    seen = set()
    out = []
    for index, entry in enumerate(entries):
        where = "nodes[{0}]".format(index)
        if not isinstance(entry, dict):
            errors.append("{0}: {1!r} is not a mapping with name and resources, remove_resources or labels".format(where, entry))
            continue
        unknown = sorted(str(key) for key in entry if key not in _ENTRY_KEYS)
        if unknown:
            errors.append("{0}: unknown key(s) {1}; use {2}".format(where, ", ".join(unknown), ", ".join(_ENTRY_KEYS)))
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            errors.append("{0}.name: {1!r} is not a node name".format(where, name))
        elif name in seen:
            errors.append("{0}.name: {1} is listed twice; give each node one entry".format(where, name))
        seen.add(name)
        parts = {}
        for key, state in (("resources", "present"), ("remove_resources", "absent")):
            if entry.get(key) in (None, {}, []):
                continue
            try:
                parts[key] = normalize_resources(entry[key], state)
            except NodeResourcesError as exc:
                # normalize_resources names its option "resources"; say which of the entry's keys it was
                errors.append("{0}.{1}".format(where, str(exc).replace("resources: ", key + ": ")))
        both = sorted(set(parts.get("resources", ())) & set(parts.get("remove_resources", ())))
        if both:
            errors.append("{0}: {1} is both in resources and in remove_resources; keep it in one".format(where, ", ".join(both)))
        desired = dict(parts.get("resources", {}), **parts.get("remove_resources", {}))
        labels = entry.get("labels")
        if labels is not None:
            if not isinstance(labels, dict):
                errors.append("{0}.labels: must be a mapping of label key to value, got {1}".format(where, type(labels).__name__))
                labels = None
            else:
                errors.extend(filter(None, (label_error(k, v, where + ".labels") for k, v in labels.items())))
        if not desired and not labels:
            errors.append("{0}: names no change; give resources, remove_resources or labels".format(where))
        out.append((name, desired, labels))
    if errors:
        raise NodeResourcesError("; ".join(errors))
    return out


# --------------------------------------------------------------------------
# Planning (pure)
# --------------------------------------------------------------------------


def same_quantity(current, desired):
    """True when the Node's value ``current`` already equals the integer ``desired``."""
    parsed = parse_quantity(current)
    return parsed is not None and parsed == Decimal(desired)


def managed_view(status, keys, fields=DEFAULT_FIELDS):
    """Return ``{field: {key: value}}`` for the managed ``keys`` present in ``status``."""
    status = status or {}
    view = {}
    for field in fields:
        current = status.get(field) or {}
        view[field] = {key: current[key] for key in keys if key in current}
    return view


def plan_node(status, resources, state="present", fields=DEFAULT_FIELDS):
    """Plan the change of one Node.

    ``status`` is the Node's ``status`` dict as the API returns it (may be empty).
    ``resources`` maps extended resource names to counts (``present``), or names
    the resources to remove (``absent``; a list or a mapping).

    Returns ``(patch, before, after)``: ``patch`` is a JSON merge patch
    (``{"status": {field: {name: "8" | None}}}``) holding only the keys that
    differ, or ``None`` when the Node already matches; ``before`` and ``after``
    are ``{field: {name: value}}`` limited to the managed names. Every other key
    of ``status`` is left out of the patch and so preserved.
    """
    return _plan_status(status, normalize_resources(resources, state), normalize_fields(fields))


def _plan_status(status, desired, fields):
    """``plan_node`` on validated input: ``desired`` maps names to counts (set) or ``None`` (remove)."""
    status = status or {}
    before = managed_view(status, desired, fields)
    after = {}
    changes = {}
    for field in fields:
        current = status.get(field) or {}
        wanted = dict(before[field])
        field_changes = {}
        for key, count in desired.items():
            if count is None:
                if key in current:
                    field_changes[key] = None
                    wanted.pop(key)
            elif key not in current or not same_quantity(current[key], count):
                field_changes[key] = str(count)
                wanted[key] = str(count)
        after[field] = wanted
        if field_changes:
            changes[field] = field_changes
    patch = {"status": changes} if changes else None
    return patch, before, after


def _plan_labels(metadata, labels):
    """``(patch, before, after)`` for the managed ``labels`` (``None`` removes one); ``patch`` is ``None`` when they match."""
    current = (metadata or {}).get("labels") or {}
    before = {key: current[key] for key in labels if key in current}
    after = {key: value for key, value in labels.items() if value is not None}
    patch = {key: value for key, value in labels.items() if before.get(key) != after.get(key)}
    return (patch or None), before, after


def _plan(node, want, fields):
    """``(label_patch, status_patch, before, after)`` for one Node; ``want`` is ``(resources, labels | None)``."""
    desired, labels = want
    status_patch, before, after = _plan_status(node.get("status"), desired, fields)
    label_patch = None
    if labels is not None:
        label_patch, before[LABELS], after[LABELS] = _plan_labels(node.get("metadata"), labels)
    return label_patch, status_patch, before, after


def _view(node, want, fields):
    """What the managed keys of ``node`` are now."""
    desired, labels = want
    view = managed_view(node.get("status"), desired, fields)
    if labels is not None:
        current = (node.get("metadata") or {}).get("labels") or {}
        view[LABELS] = {key: current[key] for key in labels if key in current}
    return view


def is_kwok_node(node):
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return annotations.get(KWOK_ANNOTATION) == KWOK_ANNOTATION_VALUE


def node_name(node):
    return (node.get("metadata") or {}).get("name")


# --------------------------------------------------------------------------
# Executor
# --------------------------------------------------------------------------


class RetryPolicy:
    """How often and after how long a write that lost a conflict is tried again (exponential backoff, jitter)."""

    def __init__(self, attempts=DEFAULT_ATTEMPTS, base_delay=0.05, max_delay=2.0, sleep=time.sleep):
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep

    def delay(self, attempt):
        delay = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return delay * (0.5 + random.random() / 2)


def _read_targets(api, names, label_selector, allow_no_match, option="name"):
    if names is not None:
        if len(names) == 1:
            try:
                nodes = [api.get_node(names[0])]
            except NodeApiError as exc:
                if exc.status != 404:
                    raise
                nodes = []
        else:
            nodes = api.list_nodes(None)
        by_name = {node_name(n): n for n in nodes}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise NodeResourcesError(
                "{0}: node(s) not found: {1}. Fix: correct the names (see `kubectl get nodes`) or create the nodes; "
                "nothing was changed".format(option, ", ".join(missing))
            )
        return [by_name[n] for n in names]

    nodes = api.list_nodes(label_selector)
    nodes.sort(key=node_name)
    if not nodes and not allow_no_match:
        raise NodeResourcesError(
            "label_selector: {0!r} matches no node. Check it with `kubectl get nodes -l '{0}'`, "
            "or set allow_no_match: true if an empty match is expected".format(label_selector)
        )
    return nodes


def _check_real_nodes(nodes, allow_real_nodes):
    real = [node_name(n) for n in nodes if not is_kwok_node(n)]
    if real and not allow_real_nodes:
        raise NodeResourcesError(
            "refusing to change node(s) {0}: they lack the annotation {1}={2}, so they are not "
            "kwok nodes. On a real cluster the device plugin owns these numbers and overwrites "
            "them; set allow_real_nodes: true to write anyway".format(
                ", ".join(real), KWOK_ANNOTATION, KWOK_ANNOTATION_VALUE
            )
        )


def _with_version(patch, node):
    """``patch`` with the resourceVersion precondition of ``node``: a concurrent writer's change is a 409 we retry."""
    version = (node.get("metadata") or {}).get("resourceVersion")
    if not version:
        return patch
    body = dict(patch)
    body["metadata"] = dict(body.get("metadata") or {}, resourceVersion=version)
    return body


def _converge(api, node, want, fields, policy):
    """Bring one Node to the desired labels, then status; return its result dict."""
    name = node_name(node)
    label_patch, status_patch, before, after = _plan(node, want, fields)
    attempt = 0
    wrote = False
    while label_patch is not None or status_patch is not None:
        attempt += 1
        try:
            # The precondition makes a concurrent writer's change a 409 we retry on fresh data, so ``before`` is
            # exactly what this write replaced.
            if label_patch is not None:
                node = api.patch_node(name, _with_version({"metadata": {"labels": label_patch}}, node))
                label_patch, wrote = None, True
            if status_patch is not None:
                node = api.patch_node_status(name, _with_version(status_patch, node))
                status_patch, wrote = None, True
        except NodeApiError as exc:
            if not exc.retryable or attempt >= policy.attempts:
                if attempt >= policy.attempts and exc.retryable:
                    raise NodeApiError(exc.status, "gave up after {0} attempts: {1}".format(attempt, exc.message))
                raise
            policy.sleep(policy.delay(attempt))
            node = api.get_node(name)
            label_patch, status_patch, _unused, after = _plan(node, want, fields)
            continue
    if wrote:
        after = _view(node, want, fields)
    return {"name": name, "changed": before != after, "before": before, "after": after}


def apply_node_resources(
    api,
    resources=None,
    state="present",
    names=None,
    label_selector=None,
    fields=DEFAULT_FIELDS,
    check_mode=False,
    allow_real_nodes=False,
    allow_no_match=False,
    parallelism=DEFAULT_PARALLELISM,
    policy=None,
    nodes=None,
):
    """Set (``present``) or remove (``absent``) extended resources on Nodes, and with ``nodes`` their labels.

    Exactly one of ``names`` (list of Node names), ``label_selector`` and ``nodes``
    selects the Nodes. ``resources`` and ``state`` apply to every Node selected by
    ``names`` or ``label_selector``; ``nodes`` is a list of per-Node entries
    (``normalize_node_entries``), each with its own resources, resources to remove
    and labels. Everything is validated and every target Node read before the
    first write; a ``NodeResourcesError`` then means nothing was written. Labels
    may be written on any Node; resources only on kwok Nodes unless
    ``allow_real_nodes``.

    Returns one dict per target Node: ``name``, ``changed``, ``before``,
    ``after`` (``{field: {resource: value}}``, plus ``labels`` with ``nodes``
    entries that set labels). In check mode ``after`` and ``changed`` are the
    prediction. Raises ``NodeWriteError`` (with all results) if some writes
    failed; failed Nodes carry an ``error`` key.
    """
    if sum(option is not None for option in (names, label_selector, nodes)) != 1:
        raise NodeResourcesError("give exactly one of name, label_selector and nodes")
    fields = normalize_fields(fields)
    parallelism = check_parallelism(parallelism)
    if nodes is not None:
        if resources is not None or state != "present":
            raise NodeResourcesError("nodes: give each entry its resources and remove_resources; resources and state apply to name and label_selector only")
        entries = normalize_node_entries(nodes)
        names = [name for name, _desired, _labels in entries]
        option = "nodes"
    else:
        desired = normalize_resources(resources, state)
        if names is not None:
            names = normalize_names(names)
        option = "name"
    policy = policy or RetryPolicy()

    try:
        targets = _read_targets(api, names, label_selector, allow_no_match, option)
    except NodeApiError as exc:
        raise NodeResourcesError("cannot read nodes: {0}".format(exc))
    if nodes is not None:
        wants = [(desired, labels) for _name, desired, labels in entries]
    else:
        wants = [(desired, None)] * len(targets)
    _check_real_nodes([node for node, want in zip(targets, wants) if want[0]], allow_real_nodes)

    plans = [_plan(node, want, fields) for node, want in zip(targets, wants)]
    if check_mode:
        return [
            {"name": node_name(node), "changed": label_patch is not None or status_patch is not None, "before": before, "after": after}
            for node, (label_patch, status_patch, before, after) in zip(targets, plans)
        ]

    results = [None] * len(targets)
    pending = []
    for index, (node, (label_patch, status_patch, before, after)) in enumerate(zip(targets, plans)):
        if label_patch is None and status_patch is None:
            results[index] = {"name": node_name(node), "changed": False, "before": before, "after": after}
        else:
            pending.append(index)

    def run(index):
        try:
            return _converge(api, targets[index], wants[index], fields, policy)
        except Exception as exc:  # reported per node, never lost in a worker
            before = plans[index][2]
            return {
                "name": node_name(targets[index]),
                "changed": False,
                "before": before,
                "after": before,
                "error": str(exc) if isinstance(exc, NodeApiError) else "{0}: {1}".format(type(exc).__name__, exc),
            }

    if len(pending) == 1 or parallelism == 1:
        for index in pending:
            results[index] = run(index)
    elif pending:
        with ThreadPoolExecutor(max_workers=min(parallelism, len(pending))) as pool:
            for index, result in zip(pending, pool.map(run, pending)):
                results[index] = result

    failed = [r for r in results if "error" in r]
    if failed:
        raise NodeWriteError(
            "could not update {0} of {1} node(s): {2}".format(
                len(failed), len(results), "; ".join("{0}: {1}".format(r["name"], r["error"]) for r in failed)
            ),
            results,
        )
    return results
