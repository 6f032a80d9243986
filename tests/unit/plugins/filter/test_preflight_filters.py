# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.filter.preflight import FilterModule

FILTERS = FilterModule().filters()
FILTER_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "filter")


def test_filter_names():
    assert sorted(FILTERS) == ["manifest_objects", "missing_node_errors", "quota_shrink_errors", "team_fill_errors"]


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_every_filter_has_sidecar_documentation(name):
    with open(os.path.join(FILTER_DIR, name + ".yml"), encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    assert doc["DOCUMENTATION"]["name"] == name
    assert "_input" in doc["DOCUMENTATION"]["options"]
    assert "_value" in doc["RETURN"]
    yaml.safe_load(doc["EXAMPLES"])


def test_manifest_objects():
    assert FILTERS["manifest_objects"]("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n") == [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
    ]


def test_manifest_objects_error_is_a_filter_error_with_the_fix():
    with pytest.raises(AnsibleFilterError) as info:
        FILTERS["manifest_objects"]("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: !!python/name:os.system\n")
    assert info.value.message == (
        "manifest: document 1, line 4: YAML tag 'tag:yaml.org,2002:python/name:os.system' is not allowed (only plain YAML is read; tags "
        "that build objects are refused). Fix: remove the tag and write a plain value"
    )


def test_missing_node_errors():
    assert FILTERS["missing_node_errors"]([{"name": "a"}], [{"metadata": {"name": "a"}}]) == []
    assert FILTERS["missing_node_errors"](["b"], ["a"], "mig_node_nodes")[0].startswith("mig_node_nodes: node b does not exist in the cluster")


def test_quota_shrink_errors():
    live = {"metadata": {"name": "q", "namespace": "n"}, "status": {"used": {"requests.nvidia.com/gpu": "3"}}}
    assert FILTERS["quota_shrink_errors"](live, {"requests.nvidia.com/gpu": 3}) == []
    assert FILTERS["quota_shrink_errors"](live, {"requests.nvidia.com/gpu": 2}, "gpus", "allow")[0].startswith(
        "gpus: quota n/q would limit requests.nvidia.com/gpu to 2, but 3 are already in use (now hard unset)"
    )
    with pytest.raises(AnsibleFilterError) as info:
        FILTERS["quota_shrink_errors"](live, ["requests.nvidia.com/gpu"])
    assert info.value.message == "hard must be a mapping of quota key to limit, e.g. {'requests.nvidia.com/gpu': 2}"
