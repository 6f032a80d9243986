# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.device_plugin import ConfigError
from ansible_collections.gpushare.k8s.plugins.module_utils.guards import config_label_errors, time_sliced_resources, unshared_configs

DEFAULT = {"version": "v1", "flags": {"migStrategy": "none"}}
SHARED = {
    "version": "v1",
    "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
}
MPS = {"version": "v1", "sharing": {"mps": {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
LAB = {"default": DEFAULT, "shared": SHARED, "mps": MPS}


def sliced(fail=True, rename_by_default=False, **resource):
    item = {"name": "nvidia.com/gpu", "replicas": 2}
    item.update(resource)
    block = {"resources": [item]}
    if fail is not None:
        block["failRequestsGreaterThanOne"] = fail
    if rename_by_default:
        block["renameByDefault"] = True
    return {"version": "v1", "sharing": {"timeSlicing": block}}


def test_lab_configs():
    assert time_sliced_resources(LAB) == {"shared": ["nvidia.com/gpu"]}
    assert unshared_configs(LAB) == ["default"]


@pytest.mark.parametrize(
    "config, expected",
    [
        (sliced(), ["nvidia.com/gpu"]),
        (sliced(rename_by_default=True), ["nvidia.com/gpu.shared"]),
        (sliced(rename="nvidia.com/gpu-sliced"), ["nvidia.com/gpu-sliced"]),
        (sliced(name="gpu"), ["nvidia.com/gpu"]),  # prefix added, as upstream
        (sliced(name="nvidia.com/mig-1g.10gb"), ["nvidia.com/mig-1g.10gb"]),
    ],
)
def test_advertised_names_are_guarded(config, expected):
    assert time_sliced_resources({"ts": config}) == {"ts": expected}


@pytest.mark.parametrize("fail", [False, None])
def test_time_slicing_without_fail_requests_is_left_out_unless_asked(fail):
    assert time_sliced_resources({"ts": sliced(fail=fail)}) == {}
    assert time_sliced_resources({"ts": sliced(fail=fail)}, require_fail_requests=False) == {"ts": ["nvidia.com/gpu"]}


def test_several_resources_are_sorted_and_configs_given_as_text():
    config = {"version": "v1", "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [
        {"name": "nvidia.com/mig-1g.10gb", "replicas": 2}, {"name": "nvidia.com/gpu", "replicas": 2}]}}}
    text = "version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n    resources:\n      - {name: gpu, replicas: 3}\n"
    assert time_sliced_resources({"b": config, "a": text}) == {"a": ["nvidia.com/gpu"], "b": ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]}


def test_invalid_configs_are_refused_with_the_config_name():
    with pytest.raises(ConfigError, match=r"^broken: sharing.timeSlicing.resources\[0\].replicas: must be 2 or more"):
        time_sliced_resources({"broken": sliced(replicas=1)})
    with pytest.raises(ConfigError, match="mapping"):
        unshared_configs(["default"])


NODES = [{"name": "lab-node-0", "gpus": 2, "config": "default"}, {"name": "lab-node-1", "gpus": 2, "config": "shared"},
         {"name": "lab-node-2", "gpus": 2, "mig": {"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb"}}]


def test_labels_naming_existing_keys_pass():
    assert config_label_errors(NODES, ["default", "shared", "mps"]) == []
    assert config_label_errors([], None) == []


def test_label_naming_a_missing_key_names_node_value_keys_and_fix():
    errors = config_label_errors(NODES, ["mps", "default"], configmap="cm", namespace="ns")
    assert errors == [
        "node lab-node-1: label nvidia.com/device-plugin.config=shared names no key of ConfigMap ns/cm (its keys: default, mps); "
        "the device plugin's config manager would crash-loop on it. Fix: add key 'shared' to the ConfigMap before labelling "
        "(role gpushare.k8s.device_plugin_config), or set the node's config to one of its keys."
    ]


def test_a_close_key_is_suggested_and_every_offender_reported():
    errors = config_label_errors(NODES, ["sharde"], label="example.com/config")
    assert len(errors) == 2
    assert errors[0].startswith("node lab-node-0: label example.com/config=default")
    assert errors[1].endswith("(did you mean 'sharde'?).")
    assert "(its keys: no keys at all)" in config_label_errors(NODES[:1], [])[0]


def test_a_missing_configmap_is_one_error_listing_every_label():
    (error,) = config_label_errors(NODES, None)
    assert error.startswith("ConfigMap gpu-share/device-plugin-configs does not exist")
    assert "would label: lab-node-0=default, lab-node-1=shared" in error
    assert "node_sharing_check_config_labels: false" in error


def test_bad_node_lists_are_refused():
    with pytest.raises(ConfigError):
        config_label_errors({"name": "x"}, [])
    with pytest.raises(ConfigError):
        config_label_errors([{"config": "default"}], [])
