# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.device_plugin import (
    shared_names,
    ConfigError,
    advertised_resources,
    parse_config,
    render_config,
    sharing_of,
    validate_config,
)

# The lab's three configs (lab-spec steps 1 and 7).
DEFAULT = {"version": "v1"}
SHARED = {
    "version": "v1",
    "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
}
MPS = {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}

SHARED_TEXT = """version: v1
sharing:
  timeSlicing:
    failRequestsGreaterThanOne: true
    resources:
      - name: nvidia.com/gpu
        replicas: 4"""


def time_slicing(**resource):
    item = {"name": "nvidia.com/gpu", "replicas": 4}
    item.update(resource)
    return {"version": "v1", "sharing": {"timeSlicing": {"resources": [item]}}}


def with_flags(**flags):
    return {"version": "v1", "flags": flags}


# ---------------------------------------------------------------------------
# rendering


def test_render_shared_is_exact():
    assert render_config(SHARED) == SHARED_TEXT


def test_render_default_and_mps():
    assert render_config(DEFAULT) == "version: v1"
    assert render_config(MPS) == "version: v1\nsharing:\n  mps:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 4"


def test_render_has_no_trailing_newline():
    assert not render_config(SHARED).endswith("\n")


def test_render_is_deterministic_whatever_the_input_order():
    shuffled = {
        "sharing": {"timeSlicing": {"resources": [{"replicas": 4, "name": "gpu"}], "failRequestsGreaterThanOne": True}},
        "version": "v1",
    }
    first = render_config(SHARED).encode("utf-8")
    assert render_config(copy.deepcopy(SHARED)).encode("utf-8") == first
    assert render_config(shuffled).encode("utf-8") == first


def test_render_fixed_order_with_every_section():
    config = {
        "sharing": {"timeSlicing": {"resources": [{"devices": [0, "1"], "rename": "gpu-ts", "replicas": 2, "name": "gpu"}], "renameByDefault": False}},
        "flags": {
            "gfd": {"sleepInterval": "60s", "oneshot": False},
            "plugin": {"deviceIDStrategy": "uuid", "passDeviceSpecs": True, "deviceListStrategy": "envvar"},
            "migStrategy": "none",
            "failOnInitError": True,
        },
        "version": "v1",
    }
    assert render_config(config) == (
        "version: v1\n"
        "flags:\n"
        "  migStrategy: none\n"
        "  failOnInitError: true\n"
        "  plugin:\n"
        "    passDeviceSpecs: true\n"
        "    deviceListStrategy: envvar\n"
        "    deviceIDStrategy: uuid\n"
        "  gfd:\n"
        "    oneshot: false\n"
        "    sleepInterval: 60s\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    renameByDefault: false\n"
        "    resources:\n"
        "      - name: nvidia.com/gpu\n"
        "        replicas: 2\n"
        "        rename: nvidia.com/gpu-ts\n"
        "        devices:\n"
        "          - 0\n"
        "          - '1'"
    )


def test_render_round_trips_through_parse():
    for config in (DEFAULT, SHARED, MPS):
        text = render_config(config)
        assert render_config(parse_config(text)) == text


def test_validate_adds_prefix_and_never_mutates_input():
    config = time_slicing(name="gpu", rename="gpu-shared")
    before = copy.deepcopy(config)
    result = validate_config(config)
    assert config == before
    assert result["sharing"]["timeSlicing"]["resources"][0] == {"name": "nvidia.com/gpu", "replicas": 4, "rename": "nvidia.com/gpu-shared"}
    result["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 9
    assert config == before


def test_validate_accepts_device_forms():
    uuid = "GPU-b1028956-cfa2-0990-bf4a-5da9abb51763"
    for devices in ("all", 2, [0, 1], ["0", "1:0", uuid, "MIG-" + uuid[4:], "MIG-%s/3/0" % uuid]):
        assert validate_config(time_slicing(devices=devices))["sharing"]["timeSlicing"]["resources"][0]["devices"] == devices


# ---------------------------------------------------------------------------
# strict validation: every error names the path and the fix


BAD_CONFIGS = [
    pytest.param(
        ["v1"],
        "(top level)",
        "shared: (top level): must be a mapping, got list. Fix: write it as a mapping of key: value lines (valid keys: version, flags, sharing)",
        id="not-a-mapping",
    ),
    pytest.param({"sharing": None}, "version", "shared: version: missing. Fix: add version: v1 at the top level", id="no-version"),
    pytest.param({"version": "v2"}, "version", "shared: version: unsupported version string 'v2' (only v1 exists). Fix: set version: v1", id="version-v2"),
    pytest.param(
        {"version": "v1", 1: 2},
        "(top level)",
        "shared: (top level): key integer 1 is not a string. Fix: use one of the keys version, flags, sharing",
        id="non-string-key",
    ),
    pytest.param(
        {"version": "v1", "sharin": {}},
        "sharin",
        "shared: sharin: unknown key (upstream silently ignores it). Fix: did you mean 'sharing'? Valid keys here: version, flags, sharing",
        id="top-level-typo",
    ),
    pytest.param(
        {"version": "v1", "timeSlicing": {}},
        "timeSlicing",
        "shared: timeSlicing: misplaced key (upstream silently ignores it here). Fix: move it to sharing.timeSlicing",
        id="timeSlicing-at-top-level",
    ),
    pytest.param(
        with_flags(renameByDefault=True),
        "flags.renameByDefault",
        "shared: flags.renameByDefault: misplaced key (upstream silently ignores it here). "
        "Fix: move it to sharing.timeSlicing.renameByDefault or sharing.mps.renameByDefault",
        id="renameByDefault-under-flags",
    ),
    pytest.param(
        with_flags(migstrategy="none"),
        "flags.migstrategy",
        "shared: flags.migstrategy: unknown key (upstream silently ignores it). Fix: did you mean 'migStrategy'? "
        "Valid keys here: migStrategy, failOnInitError, nvidiaDriverRoot, gdsEnabled, mofedEnabled, mpsRoot, plugin, gfd",
        id="flags-typo",
    ),
    pytest.param(
        with_flags(migStrategy="all"),
        "flags.migStrategy",
        "shared: flags.migStrategy: must be one of none, single, mixed, got string 'all'. Fix: set it to one of none, single, mixed",
        id="migStrategy-value",
    ),
    pytest.param(
        with_flags(failOnInitError="yes"),
        "flags.failOnInitError",
        "shared: flags.failOnInitError: must be true or false, got string 'yes'. Fix: write true or false without quotes",
        id="quoted-bool",
    ),
    pytest.param(
        with_flags(mpsRoot="run/mps"),
        "flags.mpsRoot",
        "shared: flags.mpsRoot: must be an absolute path, got string 'run/mps'. Fix: use an absolute host path such as /run/nvidia/mps",
        id="relative-mpsRoot",
    ),
    pytest.param(
        with_flags(plugin={"deviceListStrategy": ["envvar", "bogus"]}),
        "flags.plugin.deviceListStrategy[1]",
        "shared: flags.plugin.deviceListStrategy[1]: unknown device list strategy string 'bogus'. "
        "Fix: use one of envvar, volume-mounts, cdi-annotations, cdi-cri, or a list of them",
        id="deviceListStrategy",
    ),
    pytest.param(
        with_flags(plugin={"deviceIDStrategy": "serial"}),
        "flags.plugin.deviceIDStrategy",
        "shared: flags.plugin.deviceIDStrategy: must be one of uuid, index, got string 'serial'. Fix: set it to one of uuid, index",
        id="deviceIDStrategy",
    ),
    pytest.param(
        with_flags(gfd={"oneShot": True}),
        "flags.gfd.oneShot",
        "shared: flags.gfd.oneShot: unknown key (upstream silently ignores it). Fix: did you mean 'oneshot'? "
        "Valid keys here: oneshot, noTimestamp, sleepInterval, outputFile, machineTypeFile",
        id="gfd-typo",
    ),
    pytest.param(
        with_flags(gfd={"sleepInterval": 60}),
        "flags.gfd.sleepInterval",
        "shared: flags.gfd.sleepInterval: must be a duration string such as 60s or 1m30s, got integer 60. "
        "Fix: write a quoted duration, e.g. sleepInterval: 60s",
        id="gfd-sleepInterval",
    ),
    pytest.param(
        with_flags(gfd={"sleepInterval": "60s\n"}),
        "flags.gfd.sleepInterval",
        "shared: flags.gfd.sleepInterval: must be a duration string such as 60s or 1m30s, got string '60s\\n'. "
        "Fix: write a quoted duration, e.g. sleepInterval: 60s",
        id="gfd-sleepInterval-trailing-newline",
    ),
    pytest.param(
        {"version": "v1", "sharing": {}},
        "sharing",
        "shared: sharing: no sharing method set. Fix: add sharing.timeSlicing or sharing.mps, or remove sharing for a node that does not share",
        id="empty-sharing",
    ),
    pytest.param(
        {"version": "v1", "sharing": None},
        "sharing",
        "shared: sharing: must be a mapping, got null. Fix: write it as a mapping of key: value lines (valid keys: timeSlicing, mps)",
        id="null-sharing",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": SHARED["sharing"]["timeSlicing"], "mps": MPS["sharing"]["mps"]}},
        "sharing",
        "shared: sharing: both timeSlicing and mps are set (upstream silently uses mps and ignores timeSlicing). "
        "Fix: keep only one of sharing.timeSlicing or sharing.mps",
        id="both-methods",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": {"replicas": 4, "resources": [{"name": "gpu", "replicas": 4}]}}},
        "sharing.timeSlicing.replicas",
        "shared: sharing.timeSlicing.replicas: misplaced key (upstream silently ignores it here). Fix: move it to sharing.timeSlicing.resources[*].replicas",
        id="replicas-on-the-method",
    ),
    pytest.param(
        time_slicing(renameByDefault=True),
        "sharing.timeSlicing.resources[0].renameByDefault",
        "shared: sharing.timeSlicing.resources[0].renameByDefault: misplaced key (upstream silently ignores it here). "
        "Fix: move it to sharing.timeSlicing.renameByDefault",
        id="renameByDefault-on-a-resource",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": {}}},
        "sharing.timeSlicing.resources",
        "shared: sharing.timeSlicing.resources: missing. Fix: add a list with at least one resource, e.g. resources: [{name: nvidia.com/gpu, replicas: 4}]",
        id="no-resources",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": {"resources": []}}},
        "sharing.timeSlicing.resources",
        "shared: sharing.timeSlicing.resources: empty list. Fix: add at least one entry, e.g. [{name: nvidia.com/gpu, replicas: 4}]",
        id="empty-resources",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": {"resources": {"name": "gpu"}}}},
        "sharing.timeSlicing.resources",
        "shared: sharing.timeSlicing.resources: must be a list, got mapping. Fix: write a list, e.g. [{name: nvidia.com/gpu, replicas: 4}]",
        id="resources-not-a-list",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"replicas": 4}]}}},
        "sharing.timeSlicing.resources[0].name",
        "shared: sharing.timeSlicing.resources[0].name: missing. Fix: add the resource to share, e.g. name: nvidia.com/gpu",
        id="no-name",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "gpu"}]}}},
        "sharing.timeSlicing.resources[0].replicas",
        "shared: sharing.timeSlicing.resources[0].replicas: missing. Fix: add the number of slots per GPU, e.g. replicas: 4",
        id="no-replicas",
    ),
    pytest.param(
        time_slicing(replicas="4"),
        "sharing.timeSlicing.resources[0].replicas",
        "shared: sharing.timeSlicing.resources[0].replicas: must be an integer, got string '4'. Fix: write replicas: 4 without quotes",
        id="quoted-replicas",
    ),
    pytest.param(
        time_slicing(replicas=True),
        "sharing.timeSlicing.resources[0].replicas",
        "shared: sharing.timeSlicing.resources[0].replicas: must be an integer, got boolean true. Fix: write a whole number of 2 or more, e.g. replicas: 4",
        id="bool-replicas",
    ),
    pytest.param(
        time_slicing(replicas=4.0),
        "sharing.timeSlicing.resources[0].replicas",
        "shared: sharing.timeSlicing.resources[0].replicas: must be an integer, got float 4.0. Fix: write a whole number of 2 or more, e.g. replicas: 4",
        id="float-replicas",
    ),
    pytest.param(
        time_slicing(replicas=1),
        "sharing.timeSlicing.resources[0].replicas",
        "shared: sharing.timeSlicing.resources[0].replicas: must be 2 or more, got 1 (upstream rejects it: one replica is no sharing). "
        "Fix: use 2 or more, or drop the sharing section for a node that does not share",
        id="one-replica",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "gpu", "replica": 4}]}}},
        "sharing.timeSlicing.resources[0].replica",
        "shared: sharing.timeSlicing.resources[0].replica: unknown key (upstream silently ignores it). Fix: did you mean 'replicas'? "
        "Valid keys here: name, replicas, rename, devices",
        id="replicas-typo",
    ),
    pytest.param(
        time_slicing(foo=1),
        "sharing.timeSlicing.resources[0].foo",
        "shared: sharing.timeSlicing.resources[0].foo: unknown key (upstream silently ignores it). Fix: "
        "remove it; valid keys here: name, replicas, rename, devices",
        id="unknown-resource-key",
    ),
    pytest.param(
        time_slicing(name="nvidia.com/gpu!"),
        "sharing.timeSlicing.resources[0].name",
        "shared: sharing.timeSlicing.resources[0].name: 'nvidia.com/gpu!' is not a valid extended resource name: 'gpu!' must be 1-63 characters "
        "of letters, digits, '-', '_' or '.', starting and ending with a letter or digit. Fix: use a name such as nvidia.com/gpu",
        id="bad-name-character",
    ),
    pytest.param(
        time_slicing(name="g" * 64),
        "sharing.timeSlicing.resources[0].name",
        "shared: sharing.timeSlicing.resources[0].name: 'nvidia.com/%s' is not a valid extended resource name: '%s' must be 1-63 characters "
        "of letters, digits, '-', '_' or '.', starting and ending with a letter or digit. Fix: use a name such as nvidia.com/gpu" % ("g" * 64, "g" * 64),
        id="name-too-long",
    ),
    pytest.param(
        time_slicing(name="Example.com/gpu"),
        "sharing.timeSlicing.resources[0].name",
        "shared: sharing.timeSlicing.resources[0].name: 'Example.com/gpu' is not a valid extended resource name: prefix 'Example.com' "
        "is not a DNS-1123 subdomain. Fix: use a lowercase domain prefix such as nvidia.com/gpu",
        id="bad-prefix",
    ),
    pytest.param(
        time_slicing(name="example.com/gpu"),
        "sharing.timeSlicing.resources[0].name",
        "shared: sharing.timeSlicing.resources[0].name: 'example.com/gpu' is not an NVIDIA resource: the device plugin only advertises names "
        "under nvidia.com/ (upstream would turn it into nvidia.com/example.com/gpu). Fix: use a name under nvidia.com/, e.g. nvidia.com/gpu",
        id="foreign-prefix",
    ),
    pytest.param(
        time_slicing(name="GPU"),
        "sharing.timeSlicing.resources[0].name",
        "shared: sharing.timeSlicing.resources[0].name: 'nvidia.com/GPU' is rejected by the device plugin: the part after nvidia.com/ must be "
        "lowercase letters, digits, '-' and '.'. Fix: write it in lowercase without '_', e.g. nvidia.com/gpu",
        id="uppercase-name",
    ),
    pytest.param(
        time_slicing(rename="-x"),
        "sharing.timeSlicing.resources[0].rename",
        "shared: sharing.timeSlicing.resources[0].rename: 'nvidia.com/-x' is not a valid extended resource name: '-x' must be 1-63 characters "
        "of letters, digits, '-', '_' or '.', starting and ending with a letter or digit. Fix: use a name such as nvidia.com/gpu-shared",
        id="bad-rename",
    ),
    pytest.param(
        time_slicing(devices="some"),
        "sharing.timeSlicing.resources[0].devices",
        "shared: sharing.timeSlicing.resources[0].devices: the only string accepted is 'all', got string 'some'. "
        "Fix: use 'all', a positive device count, or a list of GPU indices (0), MIG indices (0:1) or GPU-/MIG- UUIDs",
        id="devices-string",
    ),
    pytest.param(
        time_slicing(devices=[0, "gpu1"]),
        "sharing.timeSlicing.resources[0].devices[1]",
        "shared: sharing.timeSlicing.resources[0].devices[1]: not a GPU index, MIG index or device UUID: string 'gpu1'. "
        "Fix: use 'all', a positive device count, or a list of GPU indices (0), MIG indices (0:1) or GPU-/MIG- UUIDs",
        id="devices-item",
    ),
    pytest.param(
        time_slicing(devices=[0, "1\n"]),
        "sharing.timeSlicing.resources[0].devices[1]",
        "shared: sharing.timeSlicing.resources[0].devices[1]: not a GPU index, MIG index or device UUID: string '1\\n'. "
        "Fix: use 'all', a positive device count, or a list of GPU indices (0), MIG indices (0:1) or GPU-/MIG- UUIDs",
        id="devices-item-trailing-newline",
    ),
    pytest.param(
        time_slicing(devices=[0, "0"]),
        "sharing.timeSlicing.resources[0].devices[1]",
        "shared: sharing.timeSlicing.resources[0].devices[1]: device 0 is listed twice. Fix: list each device once",
        id="devices-duplicate",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": "true", "resources": [{"name": "gpu", "replicas": 2}]}}},
        "sharing.timeSlicing.renameByDefault",
        "shared: sharing.timeSlicing.renameByDefault: must be true or false, got string 'true'. Fix: write true or false without quotes",
        id="quoted-renameByDefault",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "gpu", "replicas": 2}, {"name": "nvidia.com/gpu", "replicas": 4}]}}},
        "sharing.timeSlicing.resources[1].name",
        "shared: sharing.timeSlicing.resources[1].name: duplicate resource nvidia.com/gpu (also at resources[0]). Fix: keep one entry per resource",
        id="duplicate-resource",
    ),
    pytest.param(
        {"version": "v1", "flags": {"migStrategy": "mixed"}, "sharing": MPS["sharing"]},
        "sharing.mps",
        "shared: sharing.mps: MPS is not supported with flags.migStrategy: mixed (upstream fails at run time). "
        "Fix: use sharing.timeSlicing, or set flags.migStrategy: none for an MPS node",
        id="mps-with-mixed-mig",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"mps": {"resources": [{"name": "gpu", "replicas": 49}]}}},
        "sharing.mps.resources[0].replicas",
        "shared: sharing.mps.resources[0].replicas: 49 exceeds the 48 MPS clients one GPU supports (16 on pre-Volta GPUs). Fix: use at most 48 replicas",
        id="mps-49-clients",
    ),
    pytest.param(
        {"version": "v1", "sharing": {"mps": {"resources": [{"name": "mig-1g.10gb", "replicas": 2}]}}},
        "sharing.mps.resources[0].name",
        "shared: sharing.mps.resources[0].name: MPS cannot share MIG devices (nvidia.com/mig-1g.10gb). "
        "Fix: share nvidia.com/gpu with MPS, or use sharing.timeSlicing for MIG devices",
        id="mps-on-mig",
    ),
]


@pytest.mark.parametrize("config, path, message", BAD_CONFIGS)
def test_invalid_configs(config, path, message):
    with pytest.raises(ConfigError) as info:
        validate_config(config, name="shared")
    assert info.value.path == path
    assert str(info.value) == message
    assert info.value.config_name == "shared"
    assert isinstance(info.value, ValueError)


def test_error_without_name_has_no_prefix():
    with pytest.raises(ConfigError) as info:
        validate_config(time_slicing(replicas=1))
    assert str(info.value).startswith("sharing.timeSlicing.resources[0].replicas: must be 2 or more")


def test_mps_48_clients_is_allowed():
    config = {"version": "v1", "sharing": {"mps": {"resources": [{"name": "gpu", "replicas": 48}]}}}
    assert validate_config(config)["sharing"]["mps"]["resources"][0]["replicas"] == 48


# ---------------------------------------------------------------------------
# parsing


def test_parse_config_reads_the_rendered_text():
    assert parse_config(SHARED_TEXT) == SHARED


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param(
            "a: [",
            "shared: line 2: invalid YAML: while parsing a flow node did not find expected node content. Fix: write the config as plain YAML (no tags), UTF-8",
            id="invalid-yaml",
        ),
        pytest.param(
            "version: v1\n---\nversion: v1\n",
            "shared: (top level): expected exactly one YAML document, found 2. Fix: keep one config per file or ConfigMap key",
            id="two-documents",
        ),
        pytest.param(
            "x: !!python/object/apply:os.system ['id']",
            "shared: line 1: YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed (only plain YAML is read; tags that build "
            "objects are refused). Fix: write the config as plain YAML (no tags), UTF-8",
            id="unsafe-tag",
        ),
        pytest.param(
            b"\xff",
            "shared: (top level): not UTF-8 text (byte 0: invalid start byte). Fix: write the config as plain YAML (no tags), UTF-8",
            id="not-utf8",
        ),
        pytest.param(
            42,
            "shared: (top level): expected YAML text, got integer 42. Fix: pass the config file's text",
            id="not-text",
        ),
        pytest.param(
            "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: gpu\n        replicas: '4'\n",
            "shared: sharing.timeSlicing.resources[0].replicas: must be an integer, got string '4'. Fix: write replicas: 4 without quotes",
            id="quoted-replicas-in-text",
        ),
    ],
)
def test_parse_config_errors(text, message):
    with pytest.raises(ConfigError) as info:
        parse_config(text, name="shared")
    assert str(info.value) == message


# ---------------------------------------------------------------------------
# sharing and advertised resources


def test_sharing_of():
    assert sharing_of(DEFAULT) == ("none", [])
    assert sharing_of(SHARED) == ("time-slicing", [{"name": "nvidia.com/gpu", "replicas": 4}])
    assert sharing_of(MPS) == ("mps", [{"name": "nvidia.com/gpu", "replicas": 4}])


@pytest.mark.parametrize(
    "config, gpus, expected",
    [
        pytest.param(DEFAULT, 2, {"nvidia.com/gpu": 2}, id="lab-default-2"),
        pytest.param(SHARED, 2, {"nvidia.com/gpu": 8}, id="lab-shared-2x4"),
        pytest.param(MPS, 2, {"nvidia.com/gpu": 8}, id="lab-mps-2x4"),
        pytest.param(SHARED, 0, {"nvidia.com/gpu": 0}, id="no-gpus"),
        pytest.param(
            {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [{"name": "gpu", "replicas": 4}]}}},
            2,
            {"nvidia.com/gpu.shared": 8},
            id="renameByDefault",
        ),
        # NVIDIA's plugin v0.18.0 ignores a resource's own rename (tests/integration/test_nvidia_device_plugin.py)
        pytest.param(time_slicing(rename="gpu-ts", replicas=3), 2, {"nvidia.com/gpu": 6}, id="rename-ignored"),
        pytest.param(
            {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [{"name": "gpu", "replicas": 2, "rename": "x"}]}}},
            1,
            {"nvidia.com/gpu.shared": 2},
            id="renameByDefault-beats-rename",
        ),
    ],
)
def test_advertised_resources(config, gpus, expected):
    assert advertised_resources(config, gpus) == expected


@pytest.mark.parametrize(
    "config, gpus, message",
    [
        pytest.param(
            DEFAULT, True, "gpus: must be a non-negative integer, got boolean true. Fix: give the number of physical GPUs on the node, e.g. 2", id="bool"
        ),
        pytest.param(
            DEFAULT, -1, "gpus: must be a non-negative integer, got integer -1. Fix: give the number of physical GPUs on the node, e.g. 2", id="negative"
        ),
        pytest.param(
            DEFAULT, "2", "gpus: must be a non-negative integer, got string '2'. Fix: give the number of physical GPUs on the node, e.g. 2", id="string"
        ),
        pytest.param(
            time_slicing(devices=[0]),
            2,
            "sharing.timeSlicing.resources[0].devices: cannot count slots for a subset of devices (upstream drops per-device settings, see "
            "k8s-device-plugin#1786). Fix: use devices: all (the default) to count advertised slots",
            id="device-subset",
        ),
        pytest.param(
            time_slicing(name="mig-1g.10gb"),
            2,
            "sharing.timeSlicing.resources[0].name: cannot count nvidia.com/mig-1g.10gb from physical GPUs alone (only nvidia.com/gpu is a whole GPU). "
            "Fix: count MIG resources from the MIG layout (mig_resources) instead",
            id="mig-resource",
        ),
    ],
)
def test_advertised_resources_errors(config, gpus, message):
    with pytest.raises(ConfigError) as info:
        advertised_resources(config, gpus)
    assert str(info.value) == message


def test_shared_names_lists_every_name_advertised_as_shares():
    def sharing(method, resources, rename_by_default=None):
        block = {"resources": resources}
        if rename_by_default is not None:
            block["renameByDefault"] = rename_by_default
        return {"version": "v1", "sharing": {method: block}}

    configs = {
        "default": {"version": "v1"},
        "shared": sharing("timeSlicing", [{"name": "nvidia.com/gpu", "replicas": 4}]),
        "renamed": sharing("timeSlicing", [{"name": "nvidia.com/gpu", "replicas": 2}], rename_by_default=True),
        "mps": sharing("mps", [{"name": "nvidia.com/gpu", "replicas": 4, "rename": "nvidia.com/gpu.mps"}]),
    }
    assert shared_names(configs) == ["nvidia.com/gpu", "nvidia.com/gpu.shared"]  # the plugin ignores mps's own rename
    assert shared_names({"default": {"version": "v1"}}) == []


def test_a_resources_own_rename_is_not_an_advertised_name():
    """Two resources with one ``rename`` do not collide: NVIDIA's plugin v0.18.0 ignores ``rename`` and advertises ``name``."""
    config = {"version": "v1", "sharing": {"timeSlicing": {"resources": [
        {"name": "gpu", "replicas": 2, "rename": "x"}, {"name": "mig-1g.10gb", "replicas": 4, "rename": "x"}]}}}
    assert shared_names({"shared": config}) == ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]


def test_sharing_block_is_the_one_reading_of_the_flags():
    from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import device_plugin as dp

    config = {"version": "v1", "sharing": {"mps": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    strategy, resources, block = dp.sharing_block(config)
    assert (strategy, [r["replicas"] for r in resources]) == (dp.STRATEGY_MPS, [2])
    assert (block["renameByDefault"], block["failRequestsGreaterThanOne"]) == (True, False)
    assert dp.sharing_key(dp.STRATEGY_TIME_SLICING) == "timeSlicing" and dp.sharing_key(dp.STRATEGY_MPS) == "mps"
    assert dp.sharing_block({"version": "v1"}) == (dp.STRATEGY_NONE, [], {})
    # the caller's config is not changed by the flags filled in
    assert "failRequestsGreaterThanOne" not in config["sharing"]["mps"]
