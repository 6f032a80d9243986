# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpushare.k8s.node_resources against the live lab cluster (no mocks).

(a) runs the ansible integration target tests/integration/targets/node_resources;
(b) two concurrent callers set different keys on the same Node and both converge.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import nodes
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import node_status
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import build_api_client

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
NODE = "lab-node-0"
RACE_KEYS = ("example.com/it-race-a", "example.com/it-race-b")


def _ansible_env():
    env = dict(os.environ)
    env["PATH"] = "{0}{1}{2}".format(VENV_BIN, os.pathsep, env.get("PATH", ""))
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    env["ANSIBLE_FORCE_COLOR"] = "0"
    return env


def _status(core_v1, name=NODE):
    status = core_v1.read_node(name).status
    return dict(status.capacity or {}), dict(status.allocatable or {})


@pytest.fixture
def race_keys(kubeconfig, core_v1):
    """The two resource names of the race tests, removed before and after."""
    api = nodes.CoreNodeApi(build_api_client({"kubeconfig": kubeconfig}))

    def clean():
        node_status.apply_node_resources(api, list(RACE_KEYS), state="absent", names=[NODE])

    clean()
    yield RACE_KEYS
    clean()
    capacity, allocatable = _status(core_v1)
    assert not set(RACE_KEYS) & (set(capacity) | set(allocatable))


def test_integration_target(run_playbook, kubeconfig):
    proc = run_playbook(
        REPO / "tests" / "integration" / "playbooks" / "run_target.yml",
        extra_vars={"target": "node_resources", "gpushare_kubeconfig": kubeconfig},
    )
    assert proc.returncode == 0, "integration target node_resources failed:\n{0}\n{1}".format(
        proc.stdout[-20000:], proc.stderr[-5000:]
    )
    assert "failed=0" in proc.stdout


class _RacingApi(nodes.CoreNodeApi):
    """Holds each caller's first read until both have read the same resourceVersion."""

    def __init__(self, api_client, barrier):
        super().__init__(api_client)
        self._barrier = barrier
        self._first = True
        self.calls = []

    def get_node(self, name):
        node = super().get_node(name)
        self.calls.append(("get", node["metadata"]["resourceVersion"]))
        if self._first:
            self._first = False
            self._barrier.wait(timeout=30)
        return node

    def patch_node_status(self, name, patch):
        self.calls.append(("patch", (patch.get("metadata") or {}).get("resourceVersion")))
        return super().patch_node_status(name, patch)


def test_two_threads_race_on_one_node_and_both_converge(kubeconfig, core_v1, race_keys):
    barrier = threading.Barrier(2)
    apis = [_RacingApi(build_api_client({"kubeconfig": kubeconfig}), barrier) for dummy in race_keys]
    results = {}
    errors = []

    def caller(api, key, count):
        try:
            results[key] = node_status.apply_node_resources(api, {key: count}, names=[NODE])
        except Exception as exc:  # reported by the assertion below
            errors.append(repr(exc))

    threads = [
        threading.Thread(target=caller, args=(api, key, count))
        for api, key, count in zip(apis, race_keys, (3, 5))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert all(results[key][0]["changed"] for key in race_keys)

    capacity, allocatable = _status(core_v1)
    assert (capacity[race_keys[0]], capacity[race_keys[1]]) == ("3", "5")
    assert (allocatable[race_keys[0]], allocatable[race_keys[1]]) == ("3", "5")
    assert "cpu" in capacity and "pods" in allocatable

    # Both read the same version (the barrier holds each first read until both are done); the server accepted one
    # write and sent the other a 409, which that caller retried after a fresh read.
    calls = sorted((api.calls for api in apis), key=len)
    read = calls[0][0]
    assert read[0] == "get" and calls[1][0] == read, calls
    winner, loser = calls
    assert winner == [read, ("patch", read[1])], calls
    assert loser[:2] == [read, ("patch", read[1])] and loser[2][0] == "get" and loser[2][1] != read[1], calls
    assert loser[-1][0] == "patch" and len(loser) % 2 == 0, calls


def test_two_module_processes_on_one_node_both_converge(kubeconfig, core_v1, race_keys):
    def start(key, count):
        args = {"name": [NODE], "resources": {key: count}, "kubeconfig": kubeconfig}
        return subprocess.Popen(
            [str(VENV_BIN / "ansible"), "localhost", "-m", "gpushare.k8s.node_resources", "-a", json.dumps(args)],
            cwd=REPO, env=_ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    procs = [start(key, count) for key, count in zip(race_keys, (7, 9))]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, "ansible -m gpushare.k8s.node_resources failed:\n{0}\n{1}".format(out, err)
        assert "CHANGED" in out, out

    capacity, allocatable = _status(core_v1)
    assert (capacity[race_keys[0]], capacity[race_keys[1]]) == ("7", "9")
    assert (allocatable[race_keys[0]], allocatable[race_keys[1]]) == ("7", "9")


ENTRY_KEY = "example.com/it-entry"


def _labels(core_v1, name):
    return dict(core_v1.read_node(name).metadata.labels or {})


def test_nodes_entries_label_and_advertise_in_one_call_and_refuse_missing_nodes(kubeconfig, core_v1):
    """`nodes`: per-node labels, resources and removals; every node read before the first write."""
    api = nodes.CoreNodeApi(build_api_client({"kubeconfig": kubeconfig}))
    others = {name: {k: v for k, v in _labels(core_v1, name).items() if k != ENTRY_KEY} for name in ("lab-node-0", "lab-node-1")}
    entries = [
        {"name": "lab-node-0", "labels": {ENTRY_KEY: "a"}, "resources": {ENTRY_KEY: 3}},
        {"name": "lab-node-1", "labels": {ENTRY_KEY: "b"}},
    ]
    try:
        first = node_status.apply_node_resources(api, nodes=entries)
        assert [r["changed"] for r in first] == [True, True]
        assert _labels(core_v1, "lab-node-0") == dict(others["lab-node-0"], **{ENTRY_KEY: "a"})
        assert _labels(core_v1, "lab-node-1") == dict(others["lab-node-1"], **{ENTRY_KEY: "b"})
        capacity, allocatable = _status(core_v1)
        assert capacity[ENTRY_KEY] == allocatable[ENTRY_KEY] == "3" and "cpu" in capacity
        assert first[0]["after"]["labels"] == {ENTRY_KEY: "a"}

        again = node_status.apply_node_resources(api, nodes=entries)
        assert [r["changed"] for r in again] == [False, False]

        with pytest.raises(node_status.NodeResourcesError, match="^nodes: node\\(s\\) not found: lab-node-9"):
            node_status.apply_node_resources(api, nodes=[{"name": "lab-node-0", "labels": {ENTRY_KEY: "c"}},
                                                         {"name": "lab-node-9", "labels": {ENTRY_KEY: "c"}}])
        assert _labels(core_v1, "lab-node-0")[ENTRY_KEY] == "a", "nothing is written when a node is missing"
    finally:
        done = node_status.apply_node_resources(api, nodes=[
            {"name": "lab-node-0", "labels": {ENTRY_KEY: None}, "remove_resources": [ENTRY_KEY]},
            {"name": "lab-node-1", "labels": {ENTRY_KEY: None}},
        ])
    assert [r["after"]["labels"] for r in done] == [{}, {}]
    assert _labels(core_v1, "lab-node-0") == others["lab-node-0"]
    assert _labels(core_v1, "lab-node-1") == others["lab-node-1"]
    capacity, allocatable = _status(core_v1)
    assert ENTRY_KEY not in capacity and ENTRY_KEY not in allocatable
