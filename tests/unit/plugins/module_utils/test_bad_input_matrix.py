# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The unit half of the bad-input matrix: the cases the existing unit tests did not cover yet.

Each case asserts the whole message (field, problem and fix). Already covered elsewhere, not repeated:
replicas 1, quoted and boolean replicas, unknown and misplaced keys, timeSlicing with mps, MPS with
mixed MIG (test_device_plugin.py); unknown product and profile, A100-40GB counts (test_mig.py); a
node naming a missing config (test_gpushare_filters.py); malformed YAML, unsafe tags, alias bombs
for the request check (test_gpu_requests.py); manifests, missing nodes, quotas (test_preflight.py).
The playbook half (tests/integration/test_bad_input.py) runs the same inputs through the lab.
"""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.device_plugin import ConfigError, validate_config
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware.mig import MigError, validate_layout

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
LAB = yaml.safe_load(open(os.path.join(ROOT, "inventory", "group_vars", "all", "lab.yml"), encoding="utf-8"))
CONFIGS = LAB["gpushare_device_plugin_configs"]
MIG_NODE = LAB["gpushare_nodes"][2]


def with_replicas(name, replicas):
    config = copy.deepcopy(CONFIGS[name])
    method = "timeSlicing" if "timeSlicing" in config["sharing"] else "mps"
    config["sharing"][method]["resources"][0]["replicas"] = replicas
    return config


NOT_SHARING = "upstream rejects it: one replica is no sharing). Fix: use 2 or more, or drop the sharing section for a node that does not share"


@pytest.mark.parametrize(
    "name, replicas, message",
    [
        pytest.param("shared", 0, "shared: sharing.timeSlicing.resources[0].replicas: must be 2 or more, got 0 (" + NOT_SHARING, id="ts-0"),
        pytest.param("shared", -1, "shared: sharing.timeSlicing.resources[0].replicas: must be 2 or more, got -1 (" + NOT_SHARING, id="ts-negative"),
        pytest.param(
            "shared",
            "four",
            "shared: sharing.timeSlicing.resources[0].replicas: must be an integer, got string 'four'. "
            "Fix: write a whole number of 2 or more, e.g. replicas: 4",
            id="ts-four",
        ),
        pytest.param("mps", 1, "mps: sharing.mps.resources[0].replicas: must be 2 or more, got 1 (" + NOT_SHARING, id="mps-1"),
        pytest.param("mps", 0, "mps: sharing.mps.resources[0].replicas: must be 2 or more, got 0 (" + NOT_SHARING, id="mps-0"),
        pytest.param("mps", -1, "mps: sharing.mps.resources[0].replicas: must be 2 or more, got -1 (" + NOT_SHARING, id="mps-negative"),
        pytest.param(
            "mps",
            "four",
            "mps: sharing.mps.resources[0].replicas: must be an integer, got string 'four'. Fix: write a whole number of 2 or more, e.g. replicas: 4",
            id="mps-four",
        ),
    ],
)
def test_replicas_of_the_lab_configs(name, replicas, message):
    with pytest.raises(ConfigError) as info:
        validate_config(with_replicas(name, replicas), name=name)
    assert str(info.value) == message


A100_80 = "1g.10gb x7, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g.40gb x1, 7g.80gb x1"


@pytest.mark.parametrize(
    "profile, count, message",
    [
        pytest.param(
            "1g.10gb",
            8,
            "lab-node-2.mig.count: 8 instances of 1g.10gb do not fit: one A100-SXM4-80GB holds at most 7. Fix: use 1 to 7 per GPU, or another "
            "profile (%s)" % A100_80,
            id="count-beyond-geometry",
        ),
        pytest.param(
            "1g.5gb",
            7,
            "lab-node-2.mig.profile: '1g.5gb' is not a MIG profile of A100-SXM4-80GB. Fix: use one of the A100-SXM4-80GB profiles (max "
            "instances per GPU): %s" % A100_80,
            id="40gb-profile-on-80gb",
        ),
        pytest.param("1g.10gb", 0, "lab-node-2.mig.count: must be at least 1, got 0. Fix: use a whole number from 1 to 7", id="count-0"),
        pytest.param(
            "1g.10gb",
            "four",
            "lab-node-2.mig.count: must be an integer number of instances per GPU, got 'four'. Fix: use a whole number from 1 to 7",
            id="count-four",
        ),
    ],
)
def test_mig_layout_of_the_lab_node(profile, count, message):
    with pytest.raises(MigError) as info:
        validate_layout(MIG_NODE["mig"]["product"], profile, count, where="lab-node-2.mig")
    assert str(info.value) == message


def role_errors(role, params):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    return ArgumentSpecValidator(spec).validate(params).error_messages


@pytest.mark.parametrize(
    "role, params, message",
    [
        pytest.param(
            "team_quota",
            {"team_quota_gpus": "four"},
            "argument 'team_quota_gpus' is of type str and we were unable to convert to int: \"'four'\" cannot be converted to an int",
            id="team-quota-gpus-four",
        ),
        pytest.param(
            "team_quota",
            {"team_quota_allow_shrink": "maybe"},
            "argument 'team_quota_allow_shrink' is of type str and we were unable to convert to bool",
            id="team-quota-allow-shrink",
        ),
        pytest.param(
            "mig_node",
            {"mig_node_nodes": [dict(MIG_NODE, mig=dict(MIG_NODE["mig"], gpus="four"))]},
            "argument 'gpus' is of type str found in 'mig_node_nodes -> mig'. and we were unable to convert to int",
            id="mig-node-gpus-four",
        ),
        pytest.param(
            "node_sharing",
            {"node_sharing_nodes": [{"name": "lab-node-1", "gpus": "four", "config": "shared"}], "node_sharing_configs": CONFIGS},
            "argument 'gpus' is of type str found in 'node_sharing_nodes'. and we were unable to convert to int",
            id="node-sharing-gpus-four",
        ),
        pytest.param(
            "node_sharing",
            {"node_sharing_nodes": [{"name": "lab-node-1", "gpus": 2}], "node_sharing_configs": CONFIGS},
            "missing required arguments: config found in node_sharing_nodes",
            id="node-sharing-no-config",
        ),
        pytest.param(
            "lab_preflight",
            {"lab_preflight_nodes": {"name": "lab-node-0", "gpus": 2}, "lab_preflight_configs": CONFIGS},
            "argument 'lab_preflight_nodes' is of type dict and we were unable to convert to list",
            id="preflight-nodes-mapping",
        ),
    ],
)
def test_role_argument_specs_refuse_wrong_types(role, params, message):
    errors = role_errors(role, params)
    assert any(error.startswith(message) for error in errors), errors


@pytest.mark.parametrize("role", ["team_quota", "lab_preflight", "manifest", "node_sharing", "mig_node"])
def test_the_lab_input_passes_the_argument_specs(role):
    params = {
        "team_quota": {"team_quota_gpus": 2, "team_quota_pods": LAB["gpushare_team_pods"], "team_quota_allow_shrink": False},
        "lab_preflight": {"lab_preflight_nodes": LAB["gpushare_nodes"], "lab_preflight_configs": CONFIGS,
                          "lab_preflight_team_quota": LAB["gpushare_team_quota"], "lab_preflight_allow_quota_shrink": False},
        "manifest": {"manifest_content": "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"},
        "node_sharing": {"node_sharing_nodes": LAB["gpushare_nodes"][:2], "node_sharing_configs": CONFIGS},
        "mig_node": {"mig_node_nodes": [MIG_NODE]},
    }[role]
    assert role_errors(role, params) == []
