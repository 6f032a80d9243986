# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module-level tests for gpushare.k8s.dra_resource_slices, with the fake API of the module_utils tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpushare.k8s.plugins.module_utils.dra.devices import DraApiError
from ansible_collections.gpushare.k8s.plugins.modules import dra_resource_slices

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from dra_fake_api import FakeApi  # noqa: E402  pylint: disable=wrong-import-position

NODES = [{"name": "dra-node-0", "gpus": 2}, {"name": "dra-node-1", "gpus": 2, "shared": {"replicas": 4}},
         {"name": "dra-node-2", "gpus": 1, "mig": True}]


class Exit(Exception):
    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result = result
        self.failed = failed


@pytest.fixture
def fake(monkeypatch):
    api = FakeApi()
    monkeypatch.setattr(dra_resource_slices, "build_api_client", lambda params, pool_maxsize=None: object())
    monkeypatch.setattr(dra_resource_slices, "ResourceSliceApi", lambda api_client: api)
    return api


@pytest.fixture
def run(monkeypatch):
    def exit_json(self, **result):
        raise Exit(result, failed=False)

    def fail_json(self, **result):
        raise Exit(result, failed=True)

    monkeypatch.setattr(dra_resource_slices.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(dra_resource_slices.AnsibleModule, "fail_json", fail_json)

    def main(args, check_mode=False, diff=False):
        args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        with patch_module_args(args):
            with pytest.raises(Exit) as outcome:
                dra_resource_slices.main()
        return outcome.value

    return main


def test_check_diff_then_apply_then_unchanged(fake, run):
    predicted = run({"nodes": NODES}, check_mode=True, diff=True)
    assert not predicted.failed and predicted.result["changed_pools"] == ["dra-node-0", "dra-node-1", "dra-node-2"]
    assert fake.slices == {} and predicted.result["diff"]["before"]["dra-node-2"] == {}
    assert len(predicted.result["diff"]["after"]["dra-node-2"]["dra-node-2-gpu.nvidia.com-1"]["devices"]) == 18
    first = run({"nodes": NODES})
    assert first.result["changed"] and "diff" not in first.result and len(fake.slices) == 4
    assert [p["devices"] for p in first.result["pools"]] == [2, 2, 18] and "before" not in first.result["pools"][0]
    second = run({"nodes": NODES}, diff=True)
    assert second.result["changed"] is False and second.result["diff"] == {"before": {}, "after": {}}


def test_bad_input_and_api_errors_are_messages(fake, run):
    outcome = run({"nodes": [{"name": "dra-node-0", "gpus": 2, "mig": True, "shared": {"replicas": 2}}]})
    assert outcome.failed and outcome.result["msg"].startswith("dra-node-0: sets both mig and shared. Fix:")
    outcome = run({"nodes": NODES, "parallelism": 0})
    assert outcome.failed and outcome.result["msg"].startswith("parallelism: 0 is out of range")
    fake.fail_next = [DraApiError(403, "resourceslices is forbidden")]
    outcome = run({"nodes": NODES[:1]})
    assert outcome.failed and "HTTP 403: resourceslices is forbidden" in outcome.result["msg"]
    assert outcome.result["pools"][0]["error"] and outcome.result["changed"] is False
