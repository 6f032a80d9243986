# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpushare.k8s.gpu_operator_wait's main(): progress lines while nodes are pending, shown through the action plugin's
hook and returned as ``progress``; none when the nodes already match. The cluster is a fake Node list here; the live
run (under a play cap shorter than the wait) is in tests/integration/test_gpu_operator_mode.py."""
from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.modules import gpu_operator_wait
from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import run_in_process

WANT = {"resources": {"nvidia.com/gpu": 8}, "labels": {}, "mig_config": None}


def _node(count):
    resources = {"nvidia.com/gpu": str(count)}
    return {"metadata": {"name": "gpu-a", "labels": {}}, "status": {"capacity": resources, "allocatable": resources}}


@pytest.fixture
def cluster(monkeypatch):
    nodes = [_node(2)]

    class FakeNodes:
        def __init__(self, _client):
            pass

        def list_nodes(self):
            return list(nodes)

    class NoOperator:
        def __init__(self, *_args):
            pass

        def cluster_policy(self):
            return None

        def configmap_data(self, _name):
            return None

    shown = []
    monkeypatch.setattr(gpu_operator_wait, "build_api_client", lambda _params: object())
    monkeypatch.setattr(gpu_operator_wait, "CoreNodeApi", FakeNodes)
    monkeypatch.setattr(gpu_operator_wait, "StandIn", NoOperator)
    monkeypatch.setattr(gpu_operator_wait, "show_progress", shown.append)
    return nodes, shown


def test_a_pending_node_is_named_in_a_progress_line_every_interval_until_the_timeout(cluster):
    _nodes, shown = cluster
    result = run_in_process(gpu_operator_wait, {"nodes": {"gpu-a": WANT}, "timeout": 1, "interval": 0.05, "progress_interval": 0.3})
    assert result["failed"] and "gpu-a: after 1s the operator does not advertise" in result["msg"], result
    assert 2 <= len(shown) <= 4 and shown == result["progress"], shown
    pending = "of 1s, 1 of 1 node(s) pending: gpu-a (capacity[nvidia.com/gpu] expected 8, seen 2"
    assert all(line.startswith("waiting for the GPU operator: ") and pending in line for line in shown), shown


def test_no_progress_line_when_the_nodes_match_at_once(cluster):
    nodes, shown = cluster
    nodes[0] = _node(8)
    result = run_in_process(gpu_operator_wait, {"nodes": {"gpu-a": WANT}, "timeout": 1200, "progress_interval": 0.01})
    assert result["matched"] and not result.get("failed") and result["progress"] == [] and shown == [], result
