# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The operator's MIG layouts survive: the collection's mig-parted config carries every layout of the one it replaces.

The GPU Operator's MIG manager reads one mig-parted config, from the ConfigMap ``spec.migManager.config.name`` names (the
operator's own ``default-mig-parted-config`` when the name is unset: NVIDIA's stock layouts ``all-disabled``,
``all-enabled``, ``all-<profile>``, ``all-balanced``). A node outside the collection's pools may be labelled with any of
them, so pointing the ClusterPolicy at the collection's ConfigMap must not take one away:

* :func:`source` finds the ConfigMap the ClusterPolicy named before the collection's: the one it names now when that is
  another, else (a re-run: it names the collection's own) the earlier name the undo record holds. Every run copies from
  there, never from its own earlier output, so an edit of the team's ConfigMap reaches the next run and a layout no pool
  needs any more goes.
* :func:`render` writes the text: the team's ``mig-configs`` lines verbatim, so that their comments (NVIDIA's name the
  products each layout and each ``device-filter`` is for) keep their place and their meaning, then the layouts only the
  collection has, under a comment saying where each part comes from. A layout both have stays the team's when it does
  the same on every node the collection gives it (NVIDIA's ``all-1g.10gb`` and the collection's, on an A100 80GB); when
  it does something else there, :class:`OperatorError` names the layout, both ConfigMaps and the node, before any write.

What a layout does on a node is computed as nvidia-mig-parted walks it (NVIDIA/mig-parted ``api/spec/v1``,
``WalkSelectedMigConfigForEachGPU``): each entry applies to the GPUs its ``devices`` (``all`` or indices) and its
``device-filter`` (PCI device ids; none: every GPU) select, a later entry over an earlier one; a GPU no entry selects is
left as it is. Pure Python (PyYAML), no Ansible import.
"""

from __future__ import annotations

import json

from . import device_plugin as _dp
from .. import names as _names
from . import gpu_operator as _op
from ..hardware import products as _products
from ..errors import is_int as _is_int

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML is a requirement of the collection
    yaml = None

__all__ = ["DEFAULT_CONFIGMAP", "OperatorError", "SOURCE_ANNOTATION", "render", "source"]

OperatorError = _op.OperatorError
# The ConfigMap the operator creates and its MIG manager reads when spec.migManager.config.name is unset or empty.
DEFAULT_CONFIGMAP = "default-mig-parted-config"
KEY = _op.MIG_PARTED_KEY
# On the collection's mig-parted ConfigMap: the name of the ConfigMap whose layouts it carries, what a later run reads when
# neither the ClusterPolicy (it names the collection's own) nor the record (a run that left the ClusterPolicy to a Helm
# release's values records none of its fields) says it.
SOURCE_ANNOTATION = "gpushare.k8s/mig-parted-source"
_POINTER = ("migManager", "config", "name")
_ENTRY_FIELDS = ("device-filter", "devices", "mig-enabled", "mig-devices")
_UNKNOWN = object()
_REFUSED = "nvidia-mig-parted refuses the whole file, so the MIG manager could apply no layout of it on any node"


def _show(text, limit=80):
    """A name read from the cluster, safe in a message: as it is when it is a plain name, else JSON-quoted and cut."""
    text = str(text)
    if len(text) <= 63 and _names.LABEL_VALUE_RE.fullmatch(text):
        return text
    return json.dumps(text[:limit] + ("..." if len(text) > limit else ""))


# --------------------------------------------------------------------------
# Which ConfigMap
# --------------------------------------------------------------------------


def _current_pointer(policy):
    node = (policy or {}).get("spec")
    for key in _POINTER:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    if node is not None and not isinstance(node, str):
        raise OperatorError("ClusterPolicy spec.migManager.config.name", "is %s, not a ConfigMap name" % type(node).__name__,
                            "set it to the name of the ConfigMap holding the MIG layouts (or remove it: the operator then reads %s)"
                            % DEFAULT_CONFIGMAP)
    return node


def _recorded_pointer(recorded):
    """The earlier ``spec.migManager.config.name`` among the record's ``[[path, value], ...]``: the name, ``None`` when it was
    unset (the field or a level above it absent), :data:`_UNKNOWN` when the record holds no such field."""
    for path, value in recorded or ():
        path = tuple(path)
        if path == _POINTER:
            return value if isinstance(value, str) else None
        if path == _POINTER[:len(path)]:
            return None
    return _UNKNOWN


def source(policy, configmaps, own, namespace, recorded=None, remembered=None):
    """The mig-parted config whose layouts the collection's ConfigMap ``own`` carries, or ``None`` when there is none.

    ``policy`` is the ClusterPolicy object as read now, ``configmaps`` ``{name: data}`` of the operator's namespace
    ``namespace``, ``recorded`` the ClusterPolicy fields of the undo record (``[[path, earlier value], ...]``, its
    ``policy.fields``; ``None`` without a record), ``remembered`` the :data:`SOURCE_ANNOTATION` of ``own`` (what an
    earlier run carried). Returns ``{"name", "namespace", "target": own, "text"}``, ``text`` ``None`` when that ConfigMap
    does not exist (its layouts were not there to serve any node).

    The ConfigMap is the one the ClusterPolicy named before the collection pointed it at ``own``: the one it names now
    when that is another; when it names ``own`` (a re-run), the earlier name the record holds (whether it was recorded
    from the object or from its Helm release's values), else the one ``remembered`` names (the team merged the
    collection's values into its release by hand: no field was recorded); :data:`DEFAULT_CONFIGMAP` when that name was
    unset or empty, as the operator then reads that one. With none of these, :data:`DEFAULT_CONFIGMAP` when it exists,
    else nothing.
    """
    name = _current_pointer(policy)
    if name == own:
        name = _recorded_pointer(recorded)
        if name is _UNKNOWN:
            if isinstance(remembered, str) and len(remembered) <= 253 and _names.DNS_SUBDOMAIN_RE.fullmatch(remembered):
                name = remembered
            else:
                # the operator's own config, which it created when the name was unset, if it is there
                name = DEFAULT_CONFIGMAP if DEFAULT_CONFIGMAP in (configmaps or {}) else own
    name = name or DEFAULT_CONFIGMAP
    if name == own:
        return None
    result = {"name": name, "namespace": namespace, "target": own, "text": None}
    data = (configmaps or {}).get(name)
    if data is None:
        return result
    text = data.get(KEY) if isinstance(data, dict) else None
    if not isinstance(text, str):
        raise OperatorError("ConfigMap %s/%s" % (namespace, _show(name)),
                            "has no key %s, where the MIG manager reads the layouts of the config spec.migManager.config.name names" % KEY,
                            "put the mig-parted config under key %s there, or point spec.migManager.config.name at the ConfigMap that holds "
                            "the layouts your nodes use" % KEY)
    result["text"] = text
    return result


# --------------------------------------------------------------------------
# What a layout does
# --------------------------------------------------------------------------


def _read(text, where):
    """``{layout: entries}`` of a mig-parted config's text, checked by the rules nvidia-mig-parted parses it by."""
    if yaml is None:  # pragma: no cover - PyYAML is a requirement of the collection
        raise OperatorError(where, "cannot be read: PyYAML is missing", "install PyYAML")
    fix = "correct it in that ConfigMap, or point spec.migManager.config.name at a valid mig-parted config"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise OperatorError(where, "is not valid YAML (%s): %s" % (" ".join(str(exc).split()), _REFUSED), fix) from None
    if not isinstance(data, dict):
        raise OperatorError(where, "is not a mapping of version and mig-configs: %s" % _REFUSED, fix)
    extra = sorted(_show(key) for key in data if key not in ("version", "mig-configs"))
    if extra:
        raise OperatorError(where, "has fields mig-parted does not know (%s): %s" % (", ".join(extra), _REFUSED), fix)
    if data.get("version") != "v1":
        raise OperatorError(where + " version", "is %s, not v1: %s" % (_show(data.get("version")), _REFUSED), fix)
    configs = data.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise OperatorError(where + " mig-configs", "is not a mapping of at least one layout: %s" % _REFUSED, fix)
    for name, entries in configs.items():
        path = "%s mig-configs.%s" % (where, _show(name))
        if not isinstance(name, str):
            raise OperatorError(path, "is not a layout name (text): %s" % _REFUSED, fix)
        if not isinstance(entries, list) or not entries:
            raise OperatorError(path, "is not a list of at least one entry: %s" % _REFUSED, fix)
        for index, entry in enumerate(entries):
            problem = _entry_problem(entry)
            if problem:
                raise OperatorError("%s[%d]" % (path, index), "%s: %s" % (problem, _REFUSED), fix)
    return configs


def _entry_problem(entry):
    if not isinstance(entry, dict):
        return "is not a mapping"
    extra = sorted(_show(key) for key in entry if key not in _ENTRY_FIELDS)
    if extra:
        return "has fields mig-parted does not know (%s)" % ", ".join(extra)
    for key in ("devices", "mig-enabled"):
        if key not in entry:
            return "lacks %s" % key
    devices = entry["devices"]
    if devices != "all" and not (isinstance(devices, list) and all(_is_int(index) for index in devices)):
        return "devices is neither all nor a list of GPU indices"
    device_filter = entry.get("device-filter")
    if "device-filter" in entry and not (isinstance(device_filter, str)
                                         or (isinstance(device_filter, list) and all(isinstance(i, str) for i in device_filter))):
        return "device-filter is neither a PCI device id (text) nor a list of them"
    if not isinstance(entry["mig-enabled"], bool):
        return "mig-enabled is not true or false"
    instances = entry.get("mig-devices")
    if instances is not None and not (isinstance(instances, dict) and all(
            isinstance(profile, str) and profile and _is_int(count) and count >= 0 for profile, count in instances.items())):
        return "mig-devices is not a mapping of MIG profile to count"
    if entry["mig-enabled"] and instances is None:
        return "mig-enabled is true without mig-devices"
    if not entry["mig-enabled"] and instances:
        return "mig-devices are given with mig-enabled false"
    return None


def _device_ids(device_filter):
    """The PCI device ids a ``device-filter`` selects (``None``: every GPU), parsed as mig-parted parses them (an id it
    cannot parse selects no GPU)."""
    texts = [device_filter] if isinstance(device_filter, str) else list(device_filter or [])
    texts = [text for text in texts if text != ""]
    if not texts:
        return None
    ids = set()
    for text in texts:
        try:
            value = int(text, 0)
        except ValueError:
            continue
        if -(1 << 31) <= value < (1 << 31):
            ids.add(value & 0xFFFFFFFF)
    return ids


def effect(entries, device_id, gpus):
    """What a layout's ``entries`` do to ``gpus`` GPUs of PCI device id ``device_id``: per GPU ``None`` (left as it is)
    or ``(mig_enabled, ((profile, count), ...))``."""
    state = [None] * gpus
    for entry in entries:
        ids = _device_ids(entry.get("device-filter"))
        if ids is not None and device_id not in ids:
            continue
        devices = entry.get("devices", "all")
        indices = range(gpus) if devices == "all" else [index for index in devices if 0 <= index < gpus]
        enabled = bool(entry.get("mig-enabled"))
        instances = tuple(sorted((str(p), c) for p, c in (entry.get("mig-devices") or {}).items() if c)) if enabled else ()
        for index in indices:
            state[index] = (enabled, instances)
    return state


def _describe(state):
    """``GPUs 0-1: MIG on, 2 x 1g.10gb + 1 x 2g.20gb``: one part per run of GPUs in the same state."""
    def one(gpu):
        if gpu is None:
            return "left as it is (no entry selects it)"
        if not gpu[0]:
            return "MIG off"
        return "MIG on, " + (" + ".join("%d x %s" % (count, profile) for profile, count in gpu[1]) or "no instances")
    parts, start = [], 0
    for index in range(1, len(state) + 1):
        if index == len(state) or state[index] != state[start]:
            gpus = "GPU %d" % start if index - start == 1 else "GPUs %d-%d" % (start, index - 1)
            parts.append("%s: %s" % (gpus, one(state[start])))
            start = index
    return "; ".join(parts)


# --------------------------------------------------------------------------
# The text
# --------------------------------------------------------------------------


def _users(nodes):
    """``{layout: [(node, product, gpus)]}``: the nodes the run gives each of its layouts (``all-disabled``: every MIG node,
    which the undo sets back to it)."""
    users = {}
    for node in nodes or []:
        if node.get("mig") is None:
            continue
        name, _entries = _op.node_layout(node)
        user = (str(node.get("name")), node["mig"]["product"], node["gpus"])
        users.setdefault(name, []).append(user)
        if name != _op.ALL_DISABLED:
            users.setdefault(_op.ALL_DISABLED, []).append(user)
    return users


def _check_same(name, theirs, ours, users, src):
    for node, product, gpus in users:
        device_id = int(_products.pci_device_id(product), 16)
        want, have = effect(ours, device_id, gpus), effect(theirs, device_id, gpus)
        if want != have:
            earlier = "ConfigMap %s/%s" % (src["namespace"], _show(src["name"]))
            raise OperatorError(
                "%s %s mig-configs.%s" % (earlier, KEY, name),
                "differs from the layout %s that ConfigMap %s/%s must hold for node %s (%d x %s, PCI device id 0x%08x): there the "
                "ClusterPolicy's earlier mig-parted config gives %s, the node needs %s; one config holds one layout of a name"
                % (name, src["namespace"], src["target"], node, gpus, product, device_id, _describe(have), _describe(want)),
                "make %s in %s do the same on %s (the collection then keeps that one), remove it there, or give the node a layout "
                "of another name (mig: {profile, gpus} with fewer GPUs than the node has)" % (name, earlier, product))


def _header(src, added, verbatim):
    where = "ConfigMap %s/%s" % (src["namespace"], src["name"])
    how = ("copied line for line with their comments" if verbatim
           else "re-written, their comments lost (its mig-configs could not be read line by line)")
    lines = ["# Written by gpushare.k8s, anew on every run. First, %s:" % how,
             "# every layout of %s, the mig-parted config spec.migManager.config.name named" % where,
             "# before the collection's (change them there: each run copies them again)."]
    if added:
        lines.append("# Then, after the line 'Added by gpushare.k8s', the layouts of the collection's nodes it lacks.")
    return "\n".join(lines) + "\n"


def _splice(text, added):
    """The team's config text with ``added`` after the last line of its ``mig-configs`` block (its own lines untouched),
    or ``None`` when its layout cannot be found line by line (``mig-configs`` not a block mapping, several documents)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    if not isinstance(root, yaml.MappingNode):
        return None
    keys = [(key, value) for key, value in root.value if isinstance(key, yaml.ScalarNode)]
    found = [(key, value) for key, value in keys if key.value == "mig-configs"]
    if len(found) != 1 or not isinstance(found[0][1], yaml.MappingNode) or found[0][1].flow_style or not found[0][1].value:
        return None
    key, value = found[0]
    lines = text.splitlines()
    first = value.value[0][0].start_mark.line
    later = [other.start_mark.line for other, _value in keys if other.start_mark.line > key.start_mark.line]
    last = (min(later) if later else len(lines)) - 1
    while last > first and (not lines[last].strip() or lines[last].lstrip().startswith("#")):
        last -= 1
    indent = " " * value.value[0][0].start_mark.column
    block = lines[key.start_mark.line + 1:last + 1]
    if added:
        block.append("")
        block.append(indent + "# Added by gpushare.k8s: the layouts of its nodes the layouts above lack.")
        block.extend(indent + line for line in _dp.dump_yaml(added).splitlines())
    return "version: v1\nmig-configs:\n" + "\n".join(block) + "\n"


def render(nodes, src=None):
    """The collection's mig-parted config text: :func:`gpu_operator.render_mig_parted` of ``nodes`` when ``src`` (a
    :func:`source`) is ``None`` or names a ConfigMap that does not exist, else every layout of ``src`` plus the nodes'
    layouts it lacks. Deterministic: the same nodes and source give the same text."""
    if not src or src.get("text") is None:
        return _op.render_mig_parted(nodes)
    where = "ConfigMap %s/%s %s" % (src["namespace"], _show(src["name"]), KEY)
    theirs = _read(src["text"], where)
    ours = _op.mig_parted_config(nodes)["mig-configs"]
    users = _users(nodes)
    added = {}
    for name in sorted(ours):
        if name in theirs:
            _check_same(name, theirs[name], ours[name], users.get(name, ()), src)
        else:
            added[name] = ours[name]
    spliced = _splice(src["text"], added)
    if spliced is not None:
        try:
            check = yaml.safe_load(spliced)
        except yaml.YAMLError:  # pragma: no cover - the lines come from a text that parsed
            check = None
        if isinstance(check, dict) and check.get("mig-configs") == dict(theirs, **added) and check.get("version") == "v1":
            return _header(src, added, True) + spliced
    return _header(src, added, False) + _dp.dump_yaml({"version": "v1", "mig-configs": dict(theirs, **added)}) + "\n"
