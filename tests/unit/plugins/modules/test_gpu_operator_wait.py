# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpushare.k8s.gpu_operator_wait's main(): progress lines while nodes are pending, shown through the action plugin's
hook and returned as ``progress``; none when the nodes already match; the versions the operand images name; a node the
operator is done with that does not match fails after ``settle`` seconds, not at the timeout; a failed MIG state ends the
wait with the reason from the MIG manager's Pod log. The cluster is a fake here; the live runs are in
tests/integration/test_gpu_operator_mode.py and test_gpu_operator_versions.py."""
from __future__ import annotations

import time

import pytest

from ansible_collections.gpushare.k8s.plugins.modules import gpu_operator_wait
from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import run_in_process

WANT = {"resources": {"nvidia.com/gpu": 8}, "labels": {}, "mig_config": None}
IMAGE = "registry.example/nvidia/k8s-device-plugin:%s"


def _node(count, labels=None):
    resources = {"nvidia.com/gpu": str(count)}
    return {"metadata": {"name": "gpu-a", "labels": dict(labels or {})}, "status": {"capacity": resources, "allocatable": resources}}


def _daemonset(name, container, version):
    return {"metadata": {"name": name, "generation": 1}, "spec": {"template": {"spec": {"containers": [{"name": container, "image": IMAGE % version}]}}},
            "status": {"observedGeneration": 1}}


@pytest.fixture
def cluster(monkeypatch):
    state = {"nodes": [_node(2)], "then": None, "daemonsets": None, "pods": None, "log": None, "log_reads": []}

    class FakeNodes:
        def __init__(self, _client):
            pass

        def list_nodes(self):
            if state["then"]:  # the nodes as read from the second read on
                nodes, state["nodes"], state["then"] = state["nodes"], state["then"], None
                return list(nodes)
            return list(state["nodes"])

    class FakeOperands:
        def __init__(self, _client, _namespace):
            self.notes = [] if state["daemonsets"] is not None else ["cannot read the DaemonSets of namespace gpu-operator (HTTP 403: forbidden)"]

        def read(self):
            return {"daemonsets": state["daemonsets"], "pods": state["pods"]}

        def mig_manager_log(self, node):
            state["log_reads"].append(node)
            return ("nvidia-mig-manager-x1", state["log"]) if state["log"] is not None else (None, None)

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
    monkeypatch.setattr(gpu_operator_wait, "OperandReader", FakeOperands)
    monkeypatch.setattr(gpu_operator_wait, "StandIn", NoOperator)
    monkeypatch.setattr(gpu_operator_wait, "show_progress", shown.append)
    return state, shown


def test_a_pending_node_is_named_in_a_progress_line_every_interval_until_the_timeout(cluster):
    _state, shown = cluster
    result = run_in_process(gpu_operator_wait, {"nodes": {"gpu-a": WANT}, "timeout": 1, "interval": 0.05, "progress_interval": 0.3})
    assert result["failed"] and "gpu-a: after 1s the operator does not advertise" in result["msg"], result
    assert 2 <= len(shown) <= 4 and shown == result["progress"], shown
    pending = "of 1s, 1 of 1 node(s) pending: gpu-a (capacity[nvidia.com/gpu] expected 8, seen 2"
    assert all(line.startswith("waiting for the GPU operator: ") and pending in line for line in shown), shown
    # the DaemonSets could not be read: the versions are unknown, and the message says what was not checked
    assert result["versions"]["nvidia-device-plugin"]["version"] is None and result["model_version"] == "v0.18.0"
    assert result["msg"].endswith("Not checked: cannot read the DaemonSets of namespace gpu-operator (HTTP 403: forbidden).")


def test_no_progress_line_when_the_nodes_match_at_once(cluster):
    state, shown = cluster
    state["nodes"][0] = _node(8)
    state["daemonsets"], state["pods"] = {"nvidia-device-plugin-daemonset": _daemonset("nvidia-device-plugin-daemonset", "nvidia-device-plugin", "v0.18.0"),
                                          "gpu-feature-discovery": _daemonset("gpu-feature-discovery", "gpu-feature-discovery", "v0.18.0")}, {}
    result = run_in_process(gpu_operator_wait, {"nodes": {"gpu-a": WANT}, "timeout": 1200, "progress_interval": 0.01})
    assert result["matched"] and not result.get("failed") and result["progress"] == [] and shown == [], result
    assert result["versions"]["nvidia-device-plugin"]["tested"] and result["notes"] == []


def test_a_settled_difference_on_another_version_fails_after_settle_seconds(cluster):
    """The plugin v0.17.4 advertises 2 where 8 are predicted and nothing changes: the wait fails once the node has settled
    (1 s here), not at its timeout of 1200 s, naming node, resource, prediction, advertisement and version."""
    state, shown = cluster
    state["daemonsets"], state["pods"] = {"nvidia-device-plugin-daemonset": _daemonset("nvidia-device-plugin-daemonset", "nvidia-device-plugin", "v0.17.4"),
                                          "gpu-feature-discovery": _daemonset("gpu-feature-discovery", "gpu-feature-discovery", "v0.18.0")}, {}
    started = time.monotonic()
    result = run_in_process(gpu_operator_wait, {"nodes": {"gpu-a": WANT}, "timeout": 1200, "interval": 0.05, "settle": 1, "progress_interval": 0})
    assert result["failed"] and time.monotonic() - started < 30, result
    assert result["settled"] == {"gpu-a": [["capacity[nvidia.com/gpu]", "8", "2"], ["allocatable[nvidia.com/gpu]", "8", "2"]]}  # as JSON returns them
    assert ("gpu-a: the operator is done with the node (its MIG state, operand Pods and advertisement unchanged for 1.0s) and it does not advertise "
            "what the config model predicts: resource nvidia.com/gpu: predicted 8, nvidia-device-plugin (v0.17.4, a version the model is not held to) "
            "advertises 2.") in result["msg"]
    assert "after 1200s" not in result["msg"]
    # said at the start, though progress lines are off
    assert shown[:1] == [line for line in result["progress"] if line.startswith("The prediction is for NVIDIA k8s-device-plugin v0.18.0")]
    assert result["versions"]["nvidia-device-plugin"]["version"] == "v0.17.4"


def test_a_failed_mig_state_ends_the_wait_with_the_mig_managers_log(cluster):
    state, _shown = cluster
    state["nodes"][0] = _node(2, {"nvidia.com/mig.config": "all-balanced", "nvidia.com/mig.config.state": "pending"})
    state["log"] = 'time="t" level=error msg="selected mig-config not present: all-balanced"\n'
    # pending on the first read, failed after: the MIG manager's answer during the wait ends it at once
    state["then"] = [_node(2, {"nvidia.com/mig.config": "all-balanced", "nvidia.com/mig.config.state": "failed"})]
    started = time.monotonic()
    result = run_in_process(gpu_operator_wait, {"nodes": {"gpu-a": WANT}, "timeout": 300, "interval": 0.05})
    assert time.monotonic() - started < 10 and state["log_reads"] == ["gpu-a"], result
    assert result["msg"].startswith("gpu-a: nvidia.com/mig.config.state=failed for layout all-balanced: the last error lines of "
                                    "gpu-operator/nvidia-mig-manager-x1's log: selected mig-config not present: all-balanced."), result["msg"]


@pytest.mark.parametrize("option, value", [("settle", -1), ("interval", 0)])
def test_a_bad_interval_or_settle_is_refused(cluster, option, value):
    result = run_in_process(gpu_operator_wait, {"nodes": {"gpu-a": WANT}, option: value})
    assert result["failed"] and result["msg"].startswith("%s: must be positive" % option), result
