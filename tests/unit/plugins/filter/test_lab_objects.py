# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab_objects filters: the model's errors become filter errors with the same text; the files come out as written."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.lab_objects import FilterModule

FILTERS = FilterModule().filters()


def test_filter_names():
    assert sorted(FILTERS) == ["checked_names", "configmap_manifest", "lab_name_errors", "loopback_address", "namespace_changes",
                               "quota_manifest"]


@pytest.mark.parametrize("name, args, message", [
    ("checked_names", ("gpu-share\n---\nkind: Secret", "namespace", "device_plugin_config_namespace"),
     "device_plugin_config_namespace: 'gpu-share\\n---\\nkind: Secret' is not a DNS-1123 label (at most 63 lower-case letters, "
     "digits and '-', starting and ending with a letter or digit). Fix: use a name such as gpu-share"),
    ("checked_names", (["a", "b/c"], "name", "names", "gpu-quota"),
     "names[1]: 'b/c' is not a DNS-1123 subdomain (at most 253 lower-case letters, digits, '-' and '.', each dot-separated part "
     "starting and ending with a letter or digit). Fix: use a name such as gpu-quota"),
    ("configmap_manifest", ({}, "Device-Plugin-Configs", "gpu-share", "device_plugin_config_configmap"),
     "device_plugin_config_configmap: 'Device-Plugin-Configs' is not a DNS-1123 subdomain (at most 253 lower-case letters, digits, "
     "'-' and '.', each dot-separated part starting and ending with a letter or digit). Fix: use a name such as device-plugin-configs"),
    ("quota_manifest", (["nvidia.com/gpu"], "two", "gpu-quota", "team-a", "n", "ns", "team_quota_gpus"),
     "team_quota_gpus: 'two' is not a whole number of 0 or more. Fix: give the GPU units the team may request, e.g. 2"),
    ("loopback_address", ("0.0.0.0", "lab_cluster_bind_address"),
     "lab_cluster_bind_address: '0.0.0.0' is not a loopback address; the lab cluster's etcd serves without authentication and its "
     "components trust whoever reaches them, so any other address would let anyone who can reach it read and change every object. "
     "Fix: use 127.0.0.1 (or another address of 127.0.0.0/8, ::1 or localhost)"),
    ("namespace_changes", ([{"item": {"name": "gpu-share"}, "resources": []}], {}, {"enforce": "none"}),
     "pod_security.enforce: 'none' is not a Pod Security level. Fix: use privileged, baseline, restricted"),
])
def test_errors_keep_the_models_message(name, args, message):
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS[name](*args)
    assert caught.value.message == message


def test_good_input_passes_through_or_comes_out_as_the_file():
    assert FILTERS["checked_names"](["gpu-share", "team-a"], "namespace", "namespaces_names") == ["gpu-share", "team-a"]
    assert FILTERS["loopback_address"]("127.0.0.1") == "127.0.0.1"
    assert FILTERS["lab_name_errors"]({"gpushare_namespace": "gpu-share", "gpushare_team_namespace": "team-a"}) == []
    assert FILTERS["configmap_manifest"]({"default": "version: v1\nflags:\n  migStrategy: none"}, "device-plugin-configs", "gpu-share") == (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: device-plugin-configs\n  namespace: gpu-share\ndata:\n"
        "  default: |-\n    version: v1\n    flags:\n      migStrategy: none\n")
    assert FILTERS["quota_manifest"](["nvidia.com/gpu"], 2, "gpu-quota", "team-a") == (
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpu-quota\n  namespace: team-a\nspec:\n  hard:\n"
        "    requests.nvidia.com/gpu: \"2\"\n")
