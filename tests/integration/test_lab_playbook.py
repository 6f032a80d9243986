# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/lab.yml on a fresh cluster of its own: check mode writes nothing,
a real run keeps what a user added, a second run changes nothing."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from kubernetes import client, config

CLUSTER = "gpushare-it-lab"
KUBECONFIG = Path.home() / ".kwok" / "clusters" / CLUSTER / "kubeconfig.yaml"
USER_KEY, USER_LABEL, USER_RESOURCE = "operator-notes", "example.com/rack", "example.com/fpga"


def recap(proc):
    lines = [line for line in proc.stdout.splitlines() if line.startswith("localhost")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1])}


def tree_digest(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def fresh(run_playbook, tmp_path_factory):
    up = run_playbook("playbooks/cluster.yml", extra_vars={"gpushare_cluster_name": CLUSTER})
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    api = config.new_client_from_config(config_file=str(KUBECONFIG))
    root = tmp_path_factory.mktemp("lab") / "gpushare"
    lab_vars = {"gpushare_kubeconfig": str(KUBECONFIG), "gpushare_lab_root": str(root)}
    yield {"core": client.CoreV1Api(api), "root": root, "vars": lab_vars}
    run_playbook("playbooks/cluster.yml", extra_vars={"gpushare_cluster_name": CLUSTER, "lab_cluster_state": "absent"})


def test_check_mode_on_fresh_cluster_writes_nothing_and_reports_changes(fresh, run_playbook):
    proc = run_playbook("playbooks/lab.yml", extra_vars=fresh["vars"], check=True, diff=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert recap(proc)["changed"] > 0
    assert "nvidia.com/device-plugin.config" in proc.stdout  # the diff shows the labels it would set
    assert not fresh["root"].exists(), list(fresh["root"].rglob("*"))
    core = fresh["core"]
    assert {ns.metadata.name for ns in core.list_namespace().items}.isdisjoint({"gpu-share", "team-a"})
    for node in core.list_node().items:
        assert not [k for k in node.metadata.labels if k.startswith("nvidia.com/")], node.metadata.labels
        assert not [k for k in node.status.capacity if k.startswith("nvidia.com/")], node.status.capacity


def test_lab_keeps_what_a_user_added(fresh, run_playbook):
    core = fresh["core"]
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-share"}})
    user_configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "device-plugin-configs"}, "data": {USER_KEY: "keep me"}}
    core.create_namespaced_config_map("gpu-share", user_configmap)
    core.patch_node("lab-node-1", {"metadata": {"labels": {USER_LABEL: "r42"}}})
    core.patch_node_status("lab-node-1", {"status": {"capacity": {USER_RESOURCE: "3"}, "allocatable": {USER_RESOURCE: "3"}}})

    proc = run_playbook("playbooks/lab.yml", extra_vars=fresh["vars"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]

    data = core.read_namespaced_config_map("device-plugin-configs", "gpu-share").data
    assert data[USER_KEY] == "keep me" and {"default", "shared", "mps"} <= set(data)
    node = core.read_node("lab-node-1")
    assert node.metadata.labels[USER_LABEL] == "r42"
    assert node.metadata.labels["nvidia.com/device-plugin.config"] == "shared"
    assert node.status.capacity[USER_RESOURCE] == "3" and node.status.allocatable[USER_RESOURCE] == "3"
    assert node.status.capacity["nvidia.com/gpu"] == "8" and node.status.allocatable["nvidia.com/gpu"] == "8"


def test_second_run_changes_nothing_and_files_are_byte_identical(fresh, run_playbook):
    before = tree_digest(fresh["root"])
    assert {"k8s/device-plugin-configs.yaml", "k8s/mig-job.yaml", "k8s/gpu-quota.yaml", "k8s/team-over.yaml",
            "k8s/placement.yaml", "bin/check-request.sh", "out/quota-denied.txt", "out/isolation.txt",
            "out/placement.txt"} <= set(before)
    proc = run_playbook("playbooks/lab.yml", extra_vars=fresh["vars"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert recap(proc)["changed"] == 0, [l for l in proc.stdout.splitlines() if l.startswith(("TASK", "changed"))]
    assert tree_digest(fresh["root"]) == before
