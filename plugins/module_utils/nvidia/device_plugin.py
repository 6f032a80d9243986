# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""NVIDIA device-plugin config files (api/config/v1): strict validation, rendering, advertised resources.

Upstream decodes the config with a plain YAML unmarshal, so a misplaced or misspelt key
is silently ignored and a config setting both ``timeSlicing`` and ``mps`` silently uses
MPS. This model rejects both, names the full path of the offending field and says how
to fix it. Pure Python (PyYAML only) so it also runs outside Ansible.
"""

from __future__ import annotations

import copy
import difflib
import re

try:
    import yaml
except ImportError:  # rendering says what to install; validation needs no YAML library
    yaml = None

from ..errors import InputError, is_int as _is_int
from ..names import DNS_SUBDOMAIN_RE, GPU_RESOURCE
from ..k8s.manifest_yaml import ManifestError, load_documents


__all__ = [
    "ConfigError",
    "DEFAULT_RESOURCE",
    "MPS_MAX_CLIENTS",
    "advertised_name",
    "advertised_resources",
    "dump_yaml",
    "plain",
    "parse_config",
    "render_config",
    "sharing_block",
    "sharing_key",
    "sharing_of",
    "validate_config",
]

DEFAULT_PREFIX = "nvidia.com"
DEFAULT_RESOURCE = GPU_RESOURCE
SHARED_SUFFIX = ".shared"
# MPS serves at most 48 clients per GPU (16 on pre-Volta GPUs).
MPS_MAX_CLIENTS = 48
ROOT = "(top level)"

STRATEGY_NONE = "none"
STRATEGY_TIME_SLICING = "time-slicing"
STRATEGY_MPS = "mps"
_STRATEGY_KEYS = (("timeSlicing", STRATEGY_TIME_SLICING), ("mps", STRATEGY_MPS))
_KEY_OF_STRATEGY = {strategy: key for key, strategy in _STRATEGY_KEYS}

_DNS_SUBDOMAIN_RE = DNS_SUBDOMAIN_RE
_NAME_PART_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_UPSTREAM_NAME_PART_RE = _DNS_SUBDOMAIN_RE
_GO_DURATION_RE = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|\u00b5s|ms|s|m|h))+$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_DEVICE_REF_RE = re.compile(r"^([0-9]+|[0-9]+:[0-9]+|GPU-%s|MIG-%s|MIG-GPU-%s/[0-9]+/[0-9]+)$" % (_UUID, _UUID, _UUID))
_DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")


class ConfigError(InputError):
    """An invalid device-plugin config (an :class:`InputError`, the one root of bad input).

    ``path`` is the dotted path of the offending field (``sharing.timeSlicing.resources[0].replicas``),
    ``problem`` what is wrong, ``fix`` what to do, ``config_name`` the config's name when known.
    ``str(error)`` is ``"<config name>: <path>: <problem>. Fix: <fix>"``.
    """

    def __init__(self, path, problem, fix, config_name=None):
        super().__init__(path, problem, fix)
        self.config_name = config_name
        if config_name:
            self.message = "%s: %s" % (config_name, self.message)
            self.args = (self.message,)


# ---------------------------------------------------------------------------
# small helpers


def _type_name(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def _show(value):
    """Describe a value for an error message, briefly."""
    if isinstance(value, bool):
        return "boolean %s" % ("true" if value else "false")
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return "string %r" % text
    if isinstance(value, (int, float)):
        return "%s %r" % (_type_name(value), value)
    return _type_name(value)


def _join(items, last="or"):
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return "%s %s %s" % (", ".join(items[:-1]), last, items[-1])


# ---------------------------------------------------------------------------
# leaf validators: (value, path) -> normalised value, raising ConfigError


def _bool(value, path):
    if not isinstance(value, bool):
        raise ConfigError(path, "must be true or false, got %s" % _show(value), "write true or false without quotes")
    return value


def _string(value, path):
    if not isinstance(value, str) or not value:
        raise ConfigError(path, "must be a non-empty string, got %s" % _show(value), "give it a string value or remove the key")
    return str(value)


def _enum(*choices):
    def check(value, path):
        if not isinstance(value, str) or value not in choices:
            raise ConfigError(path, "must be one of %s, got %s" % (", ".join(choices), _show(value)), "set it to one of %s" % ", ".join(choices))
        return str(value)

    return check


def _abs_path(value, path):
    value = _string(value, path)
    if not value.startswith("/"):
        raise ConfigError(path, "must be an absolute path, got %s" % _show(value), "use an absolute host path such as /run/nvidia/mps")
    return value


def _duration(value, path):
    if not isinstance(value, str) or not _GO_DURATION_RE.fullmatch(value):
        raise ConfigError(path, "must be a duration string such as 60s or 1m30s, got %s" % _show(value), "write a quoted duration, e.g. sleepInterval: 60s")
    return str(value)


def _version(value, path):
    if value != "v1" or not isinstance(value, str):
        raise ConfigError(path, "unsupported version %s (only v1 exists)" % _show(value), "set version: v1")
    return "v1"


def _device_list_strategy(value, path):
    fix = "use one of %s, or a list of them" % ", ".join(_DEVICE_LIST_STRATEGIES)
    if isinstance(value, str):
        if value not in _DEVICE_LIST_STRATEGIES:
            raise ConfigError(path, "unknown device list strategy %s" % _show(value), fix)
        return str(value)
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(path, "must be a strategy name or a non-empty list of them, got %s" % _show(value), fix)
    result = []
    for index, item in enumerate(value):
        item_path = "%s[%d]" % (path, index)
        if not isinstance(item, str) or item not in _DEVICE_LIST_STRATEGIES:
            raise ConfigError(item_path, "unknown device list strategy %s" % _show(item), fix)
        if item in result:
            raise ConfigError(item_path, "duplicate strategy %r" % str(item), "list each strategy once")
        result.append(str(item))
    return result


def split_resource_name(value, path, what="name"):
    """Check a resource name (adding the ``nvidia.com/`` prefix when missing) and return the full name."""
    example = "nvidia.com/gpu" if what == "name" else "nvidia.com/gpu-shared"
    if not isinstance(value, str) or not value:
        raise ConfigError(path, "must be a resource name string, got %s" % _show(value), "write a resource name such as %s" % example)
    full = str(value) if "/" in value else "%s/%s" % (DEFAULT_PREFIX, value)
    prefix, _sep, part = full.partition("/")
    if not _DNS_SUBDOMAIN_RE.fullmatch(prefix) or len(prefix) > 253:
        raise ConfigError(
            path,
            "%r is not a valid extended resource name: prefix %r is not a DNS-1123 subdomain" % (full, prefix),
            "use a lowercase domain prefix such as %s" % example,
        )
    if len(part) > 63 or not _NAME_PART_RE.fullmatch(part):
        raise ConfigError(
            path,
            "%r is not a valid extended resource name: %r must be 1-63 characters of letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit" % (full, part),
            "use a name such as %s" % example,
        )
    if prefix != DEFAULT_PREFIX:
        raise ConfigError(
            path,
            "%r is not an NVIDIA resource: the device plugin only advertises names under %s/ (upstream would turn it into %s/%s)"
            % (full, DEFAULT_PREFIX, DEFAULT_PREFIX, full),
            "use a name under %s/, e.g. %s" % (DEFAULT_PREFIX, example),
        )
    if not _UPSTREAM_NAME_PART_RE.fullmatch(part):
        raise ConfigError(
            path,
            "%r is rejected by the device plugin: the part after %s/ must be lowercase letters, digits, '-' and '.'" % (full, DEFAULT_PREFIX),
            "write it in lowercase without '_', e.g. %s" % example,
        )
    return full


def _resource_name(value, path):
    return split_resource_name(value, path, "name")


def _rename(value, path):
    return split_resource_name(value, path, "rename")


def _replicas(value, path):
    if isinstance(value, str) and value.strip().isdigit():
        raise ConfigError(path, "must be an integer, got %s" % _show(value), "write replicas: %s without quotes" % value.strip())
    if not _is_int(value):
        raise ConfigError(path, "must be an integer, got %s" % _show(value), "write a whole number of 2 or more, e.g. replicas: 4")
    if value < 2:
        raise ConfigError(
            path,
            "must be 2 or more, got %d (upstream rejects it: one replica is no sharing)" % value,
            "use 2 or more, or drop the sharing section for a node that does not share",
        )
    return int(value)


def _devices(value, path):
    fix = "use 'all', a positive device count, or a list of GPU indices (0), MIG indices (0:1) or GPU-/MIG- UUIDs"
    if isinstance(value, str):
        if value != "all":
            raise ConfigError(path, "the only string accepted is 'all', got %s" % _show(value), fix)
        return "all"
    if _is_int(value):
        if value <= 0:
            raise ConfigError(path, "a device count must be positive, got %s" % _show(value), fix)
        return int(value)
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(path, "must be 'all', a count or a non-empty list, got %s" % _show(value), fix)
    result = []
    seen = set()
    for index, item in enumerate(value):
        item_path = "%s[%d]" % (path, index)
        if _is_int(item) and item >= 0:
            norm = int(item)
        elif isinstance(item, str) and _DEVICE_REF_RE.fullmatch(item):
            norm = str(item)
        else:
            raise ConfigError(item_path, "not a GPU index, MIG index or device UUID: %s" % _show(item), fix)
        if str(norm) in seen:
            raise ConfigError(item_path, "device %s is listed twice" % norm, "list each device once")
        seen.add(str(norm))
        result.append(norm)
    return result


# ---------------------------------------------------------------------------
# schema: mappings whose field order is the rendering order


class _Section:
    """A mapping with a fixed set of keys (in rendering order) and required keys."""

    def __init__(self, fields, required=(), example=""):
        self.fields = fields
        self.required = tuple(required)
        self.example = example


class _ListOf:
    """A non-empty list of sections."""

    def __init__(self, item, example=""):
        self.item = item
        self.example = example


_RESOURCE = _Section(
    {"name": _resource_name, "replicas": _replicas, "rename": _rename, "devices": _devices},
    required=("name", "replicas"),
)
_REPLICATED = _Section(
    {
        "renameByDefault": _bool,
        "failRequestsGreaterThanOne": _bool,
        "resources": _ListOf(_RESOURCE, example="[{name: nvidia.com/gpu, replicas: 4}]"),
    },
    required=("resources",),
)
_SHARING = _Section({"timeSlicing": _REPLICATED, "mps": _REPLICATED})
_PLUGIN = _Section(
    {
        "passDeviceSpecs": _bool,
        "deviceListStrategy": _device_list_strategy,
        "deviceIDStrategy": _enum("uuid", "index"),
        "cdiAnnotationPrefix": _string,
        "nvidiaCTKPath": _abs_path,
        "containerDriverRoot": _abs_path,
    }
)
_GFD = _Section(
    {
        "oneshot": _bool,
        "noTimestamp": _bool,
        "sleepInterval": _duration,
        "outputFile": _string,
        "machineTypeFile": _string,
    }
)
_FLAGS = _Section(
    {
        "migStrategy": _enum("none", "single", "mixed"),
        "failOnInitError": _bool,
        "nvidiaDriverRoot": _abs_path,
        "gdsEnabled": _bool,
        "mofedEnabled": _bool,
        "mpsRoot": _abs_path,
        "plugin": _PLUGIN,
        "gfd": _GFD,
    }
)
_CONFIG = _Section({"version": _version, "flags": _FLAGS, "sharing": _SHARING}, required=("version",))

_MISSING_FIX = {
    "version": "add version: v1 at the top level",
    "resources": "add a list with at least one resource, e.g. resources: [{name: nvidia.com/gpu, replicas: 4}]",
    "name": "add the resource to share, e.g. name: nvidia.com/gpu",
    "replicas": "add the number of slots per GPU, e.g. replicas: 4",
}


def _key_homes():
    """Map every key of the schema to the paths where it is valid (lists shown as ``[*]``)."""
    homes = {}

    def walk(spec, path):
        for key, sub in spec.fields.items():
            sub_path = "%s.%s" % (path, key) if path else key
            homes.setdefault(key, []).append(sub_path)
            if isinstance(sub, _Section):
                walk(sub, sub_path)
            elif isinstance(sub, _ListOf):
                walk(sub.item, sub_path + "[*]")

    walk(_CONFIG, "")
    return homes


_KEY_HOMES = _key_homes()


def _common_prefix_len(left, right):
    size = 0
    for a_item, b_item in zip(left, right):
        if a_item != b_item:
            break
        size += 1
    return size


def _unknown_key(key, path, section):
    """Build the error for a key that is not valid at ``path`` (the key's own path)."""
    generic = re.sub(r"\[\d+\]", "[*]", path)
    homes = [home for home in _KEY_HOMES.get(key, []) if home != generic]
    if homes:
        problem = "misplaced key (upstream silently ignores it here)"
        here = generic.split(".")
        best = max(_common_prefix_len(home.split("."), here) for home in homes)
        closest = [home for home in homes if _common_prefix_len(home.split("."), here) == best]
        if best > 0 and len(closest) < len(homes):
            homes = closest
        return ConfigError(path, problem, "move it to %s" % _join(homes))
    problem = "unknown key (upstream silently ignores it)"
    valid = ", ".join(section.fields)
    match = difflib.get_close_matches(key, list(section.fields), n=1, cutoff=0.6)
    if not match:
        lowered = {name.lower(): name for name in section.fields}
        if key.lower() in lowered:
            match = [lowered[key.lower()]]
    if match:
        return ConfigError(path, problem, "did you mean %r? Valid keys here: %s" % (match[0], valid))
    return ConfigError(path, problem, "remove it; valid keys here: %s" % valid)


def _join_path(parent, key):
    return "%s.%s" % (parent, key) if parent else key


def _check(spec, value, path):
    if isinstance(spec, _Section):
        return _check_section(spec, value, path)
    if isinstance(spec, _ListOf):
        return _check_list(spec, value, path)
    return spec(value, path)


def _check_section(spec, value, path):
    where = path or ROOT
    if not isinstance(value, dict):
        raise ConfigError(
            where, "must be a mapping, got %s" % _show(value), "write it as a mapping of key: value lines (valid keys: %s)" % ", ".join(spec.fields)
        )
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(where, "key %s is not a string" % _show(key), "use one of the keys %s" % ", ".join(spec.fields))
        if key not in spec.fields:
            raise _unknown_key(key, _join_path(path, key), spec)
    for key in spec.required:
        if key not in value:
            raise ConfigError(_join_path(path, key), "missing", _MISSING_FIX.get(key, "add %s" % key))
    result = {}
    for key, sub in spec.fields.items():
        if key in value:
            result[key] = _check(sub, value[key], _join_path(path, key))
    return result


def _check_list(spec, value, path):
    if not isinstance(value, (list, tuple)):
        raise ConfigError(path, "must be a list, got %s" % _show(value), "write a list, e.g. %s" % spec.example)
    if not value:
        raise ConfigError(path, "empty list", "add at least one entry, e.g. %s" % spec.example)
    return [_check(spec.item, item, "%s[%d]" % (path, index)) for index, item in enumerate(value)]


# ---------------------------------------------------------------------------
# rules that span several fields


def advertised_name(resource, rename_by_default=False):
    """The name a replicated resource is advertised under: ``<name>.shared`` when renamed by default, else ``name``.

    A resource's own ``rename`` is not used: NVIDIA's device plugin (and GFD) v0.18.0 drop it before anything is
    advertised (``DisableResourceNamingInConfig``: "Setting the 'rename' field ... is not yet supported in the config.
    Ignoring..."), so slices renamed that way are still advertised as ``name``; tests/integration/test_nvidia_device_plugin.py
    holds this to the plugin.
    """
    if rename_by_default:
        return resource["name"] + SHARED_SUFFIX
    return resource["name"]


def shared_names(configs):
    """The resource names any of ``configs`` (config name -> config) advertises as shares of a GPU, sorted.

    Time-slicing and MPS alike: ``<name>.shared`` with ``renameByDefault``, else ``name`` (a resource's own
    ``rename`` is ignored, as the plugin ignores it: :func:`advertised_name`). A Pod asking for
    more than one of these asks for several slices of shared GPUs.
    """
    names = set()
    for name in sorted(configs, key=str):
        strategy, resources, block = sharing_block(validate_config(configs[name], name=name))
        if strategy == STRATEGY_NONE:
            continue
        names.update(advertised_name(resource, block["renameByDefault"]) for resource in resources)
    return sorted(names)


def _check_sharing(config):
    sharing = config.get("sharing")
    if sharing is None:
        return
    present = [key for key, _strategy in _STRATEGY_KEYS if key in sharing]
    if len(present) > 1:
        raise ConfigError(
            "sharing",
            "both timeSlicing and mps are set (upstream silently uses mps and ignores timeSlicing)",
            "keep only one of sharing.timeSlicing or sharing.mps",
        )
    if not present:
        raise ConfigError("sharing", "no sharing method set", "add sharing.timeSlicing or sharing.mps, or remove sharing for a node that does not share")
    key = present[0]
    block = sharing[key]
    base = "sharing.%s" % key
    if key == "mps" and config.get("flags", {}).get("migStrategy") == "mixed":
        raise ConfigError(
            base,
            "MPS is not supported with flags.migStrategy: mixed (upstream fails at run time)",
            "use sharing.timeSlicing, or set flags.migStrategy: none for an MPS node",
        )
    names = {}
    advertised = {}
    for index, resource in enumerate(block["resources"]):
        path = "%s.resources[%d]" % (base, index)
        name = resource["name"]
        if name in names:
            raise ConfigError(path + ".name", "duplicate resource %s (also at resources[%d])" % (name, names[name]), "keep one entry per resource")
        names[name] = index
        if key == "mps":
            if name.startswith(DEFAULT_PREFIX + "/mig-"):
                raise ConfigError(
                    path + ".name", "MPS cannot share MIG devices (%s)" % name, "share nvidia.com/gpu with MPS, or use sharing.timeSlicing for MIG devices"
                )
            if resource["replicas"] > MPS_MAX_CLIENTS:
                raise ConfigError(
                    path + ".replicas",
                    "%d exceeds the %d MPS clients one GPU supports (16 on pre-Volta GPUs)" % (resource["replicas"], MPS_MAX_CLIENTS),
                    "use at most %d replicas" % MPS_MAX_CLIENTS,
                )
        shown = advertised_name(resource, block.get("renameByDefault", False))
        field = "name"
        split_resource_name(shown, "%s.%s" % (path, field), field)
        if shown in advertised:
            raise ConfigError(
                "%s.%s" % (path, field),
                "advertised name %s is already used by resources[%d]" % (shown, advertised[shown]),
                "give each shared resource its own name",
            )
        advertised[shown] = index


def _plain(value):
    """Deep copy into plain Python types (drops str/int/dict/list subclasses such as Ansible's tagged values)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return {(_plain(key) if isinstance(key, (str, int)) else key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return copy.deepcopy(value)


plain = _plain  # public: modules outside the config model (rbac) hand templated values to YAML and the API too


# ---------------------------------------------------------------------------
# public API


def validate_config(data, name=None):
    """Validate one device-plugin config and return a normalised deep copy.

    Keys come back in rendering order and resource names carry the ``nvidia.com/`` prefix.
    The input is never modified. Raises :class:`ConfigError`.
    """
    try:
        config = _check_section(_CONFIG, data, "")
        _check_sharing(config)
    except ConfigError as exc:
        if name and not exc.config_name:
            raise ConfigError(exc.path, exc.problem, exc.fix, config_name=name) from None
        raise
    return _plain(config)


if yaml is not None:
    class _BlockDumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
        """Safe dumper that indents block sequences under their key, like the upstream examples."""

        def increase_indent(self, flow=False, indentless=False):
            return super().increase_indent(flow, False)


def _dump(data):
    if yaml is None:
        raise ConfigError("", "cannot render: the Python library PyYAML is missing", "install it (pip install PyYAML)")
    text = yaml.dump(data, Dumper=_BlockDumper, default_flow_style=False, sort_keys=False, allow_unicode=True, width=4096, indent=2)
    return text.rstrip("\n")


def dump_yaml(data):
    """Render any data (tagged Ansible values included) as the configs are rendered: stable key order, block style, no trailing newline."""
    return _dump(_plain(data))


def render_config(data, name=None):
    """Validate and render one config as YAML text: stable key order, block style, no trailing newline."""
    return _dump(validate_config(data, name=name))


def parse_config(text, name=None):
    """Load one config from YAML text with the safe loader of :mod:`manifest_yaml` and validate it."""
    if not isinstance(text, (str, bytes)):
        raise ConfigError(ROOT, "expected YAML text, got %s" % _show(text), "pass the config file's text", config_name=name)
    try:
        documents = load_documents(text)
    except ManifestError as exc:
        where = "line %d" % exc.line if exc.line else ROOT
        raise ConfigError(where, exc.problem, "write the config as plain YAML (no tags), UTF-8", config_name=name) from None
    documents = [doc for doc in documents if doc is not None]
    if len(documents) != 1:
        raise ConfigError(ROOT, "expected exactly one YAML document, found %d" % len(documents), "keep one config per file or ConfigMap key", config_name=name)
    return validate_config(documents[0], name=name)


def sharing_of(config):
    """Return ``(strategy, resources)``: strategy is ``none``, ``time-slicing`` or ``mps``; resources the normalised list."""
    config = validate_config(config)
    sharing = config.get("sharing")
    if not sharing:
        return STRATEGY_NONE, []
    for key, strategy in _STRATEGY_KEYS:
        if key in sharing:
            return strategy, sharing[key]["resources"]
    return STRATEGY_NONE, []  # pragma: no cover - validate_config guarantees one strategy


def sharing_block(config):
    """Return ``(strategy, resources, block)``: :func:`sharing_of`'s pair and the config's ``sharing.timeSlicing`` or
    ``sharing.mps`` mapping (``{}`` without sharing), with ``renameByDefault`` and ``failRequestsGreaterThanOne``
    filled in (``False`` when not set): the one reading of a sharing block's flags."""
    config = validate_config(config)
    strategy, resources = sharing_of(config)
    if strategy == STRATEGY_NONE:
        return strategy, resources, {}
    block = dict(config["sharing"][sharing_key(strategy)])
    block["renameByDefault"] = bool(block.get("renameByDefault", False))
    block["failRequestsGreaterThanOne"] = bool(block.get("failRequestsGreaterThanOne", False))
    return strategy, resources, block


def sharing_key(strategy):
    """The config key of a sharing strategy: ``timeSlicing`` or ``mps``."""
    return _KEY_OF_STRATEGY[strategy]


def advertised_resources(config, gpus):
    """What a node with ``gpus`` physical GPUs labelled with ``config`` advertises, as ``{resource: count}``.

    No sharing: ``{"nvidia.com/gpu": gpus}``. A replicated resource is advertised as ``<name>.shared``
    (``renameByDefault``) or ``name``, with ``gpus * replicas`` slots; a resource's own ``rename`` is ignored, as
    NVIDIA's plugin v0.18.0 ignores it (:func:`advertised_name`).
    """
    if not _is_int(gpus) or gpus < 0:
        raise ConfigError("gpus", "must be a non-negative integer, got %s" % _show(gpus), "give the number of physical GPUs on the node, e.g. 2")
    config = validate_config(config)
    strategy, resources, block = sharing_block(config)
    result = {DEFAULT_RESOURCE: gpus}
    if strategy == STRATEGY_NONE:
        return result
    key = sharing_key(strategy)
    rename_by_default = block["renameByDefault"]
    for index, resource in enumerate(resources):
        path = "sharing.%s.resources[%d]" % (key, index)
        if resource["name"] != DEFAULT_RESOURCE:
            raise ConfigError(
                path + ".name",
                "cannot count %s from physical GPUs alone (only %s is a whole GPU)" % (resource["name"], DEFAULT_RESOURCE),
                "count MIG resources from the MIG layout (mig_resources) instead",
            )
        devices = resource.get("devices", "all")
        if devices != "all":
            raise ConfigError(
                path + ".devices",
                "cannot count slots for a subset of devices (upstream drops per-device settings, see k8s-device-plugin#1786)",
                "use devices: all (the default) to count advertised slots",
            )
        result.pop(DEFAULT_RESOURCE, None)
        result[advertised_name(resource, rename_by_default)] = gpus * resource["replicas"]
    return result
