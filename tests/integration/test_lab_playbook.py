# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/lab.yml on a fresh cluster of its own: check mode writes nothing, step 1 alone writes the spec's
two configs, a real run keeps what a user added and leaves k8s/device-plugin-configs.yaml holding what the
ConfigMap holds, a second run changes nothing, and the summary reads line by line under the default callback."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from conftest import REPO, VENV_BIN, cluster_vars, subprocess_env

CLUSTER = os.environ.get("GPUSHARE_LAB_TEST_CLUSTER", "gpushare-it-lab")  # a cluster of its own, created and removed here
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
    up = run_playbook("playbooks/cluster.yml", extra_vars=cluster_vars(CLUSTER))
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


def file_data(root):
    (configmap,) = [doc for doc in yaml.safe_load_all((root / "k8s" / "device-plugin-configs.yaml").read_text()) if doc]
    assert (configmap["kind"], configmap["metadata"]["name"], configmap["metadata"]["namespace"]) == ("ConfigMap", "device-plugin-configs", "gpu-share")
    return configmap["data"]


def test_step_1_alone_writes_and_applies_the_specs_two_configs(fresh, run_playbook):
    proc = run_playbook("playbooks/lab.yml", extra_vars=fresh["vars"], extra_args=["--tags", "step1"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    data = file_data(fresh["root"])
    assert set(data) == {"default", "shared"}
    assert "sharing" not in yaml.safe_load(data["default"])
    assert yaml.safe_load(data["shared"])["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 4
    assert fresh["core"].read_namespaced_config_map("device-plugin-configs", "gpu-share").data == data


def test_lab_keeps_what_a_user_added(fresh, run_playbook):
    core = fresh["core"]
    try:  # step 1 may have run already
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-share"}})
    except ApiException as exc:
        assert exc.status == 409, exc
    user_configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "device-plugin-configs"}, "data": {USER_KEY: "keep me"}}
    try:
        core.create_namespaced_config_map("gpu-share", user_configmap)
    except ApiException as exc:
        assert exc.status == 409, exc
        core.patch_namespaced_config_map("device-plugin-configs", "gpu-share", {"data": {USER_KEY: "keep me"}})
    core.patch_node("lab-node-1", {"metadata": {"labels": {USER_LABEL: "r42"}}})
    core.patch_node_status("lab-node-1", {"status": {"capacity": {USER_RESOURCE: "3"}, "allocatable": {USER_RESOURCE: "3"}}})

    proc = run_playbook("playbooks/lab.yml", extra_vars=fresh["vars"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    fresh["first_run"] = proc

    data = core.read_namespaced_config_map("device-plugin-configs", "gpu-share").data
    assert data[USER_KEY] == "keep me" and {"default", "shared", "mps"} <= set(data)
    node = core.read_node("lab-node-1")
    assert node.metadata.labels[USER_LABEL] == "r42"
    assert node.metadata.labels["nvidia.com/device-plugin.config"] == "shared"
    assert node.status.capacity[USER_RESOURCE] == "3" and node.status.allocatable[USER_RESOURCE] == "3"
    assert node.status.capacity["nvidia.com/gpu"] == "8" and node.status.allocatable["nvidia.com/gpu"] == "8"


# Where the isolation table puts each intent of inventory/group_vars/all/lab.yml's gpushare_intent_placement, written by
# hand: the resource admission must write and the node the scheduler must choose (lab-node-0 unsliced, lab-node-1
# time-sliced, lab-node-2 MIG 1g.10gb). On the first run the unsliced node has a GPU free (batch-train comes after).
INTENT_ROWS = {
    "intent-isolated": ("isolated", "nvidia.com/mig-1g.10gb", "lab-node-2"),
    "intent-1g-10gb": ("1g.10gb", "nvidia.com/mig-1g.10gb", "lab-node-2"),
    "intent-shared": ("shared", "nvidia.com/gpu", "lab-node-1"),
    "intent-whole": ("whole", "nvidia.com/gpu", "lab-node-0"),
}


def intent_rows(proc):
    """{pod: (intent, resource, node or the pending text)} from step 8's report."""
    shown = proc.stdout[proc.stdout.index("TASK [gpushare.k8s.placement : Show where each intent landed"):]
    shown = shown[:shown.index("TASK [", 1)]
    text = " ".join(line.strip() for line in shown.splitlines())
    return {m.group(1): (m.group(2), m.group(3), m.group(4)) for m in re.finditer(
        r"(intent-[\w-]+) \(gpushare\.k8s/gpu: ([\w.]+)\) -> ([\w./-]+): 1 -> ([^\s']+(?: its pool \([\w-]+\) is full)?)", text)}


def test_step_8_places_one_pod_per_intent_where_the_table_says_and_removes_them(fresh):
    """The lab's first run: each intent Pod got, at admission, the resource of the pool the table names and was bound
    to that pool's node; none of them is left, and the lab's own Pods are where the spec says."""
    assert intent_rows(fresh["first_run"]) == INTENT_ROWS
    pods = {pod.metadata.name: pod.spec.node_name for pod in fresh["core"].list_namespaced_pod("gpu-share").items}
    assert not [name for name in pods if name.startswith("intent-")], pods
    assert (fresh["root"] / "out" / "placement.txt").read_text() == "prod-inference=lab-node-2\nnotebook=lab-node-1\nbatch-train=lab-node-0\n"


def test_after_step_7_the_file_holds_what_the_configmap_holds(fresh):
    """Re-applying k8s/device-plugin-configs.yaml changes nothing: it has step 7's mps; only the user's own key is not in it."""
    live = fresh["core"].read_namespaced_config_map("device-plugin-configs", "gpu-share").data
    data = file_data(fresh["root"])
    assert set(data) == {"default", "shared", "mps"}
    assert data == {key: value for key, value in live.items() if key != USER_KEY}
    assert yaml.safe_load(data["mps"])["sharing"] == {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}


def test_second_run_changes_nothing_and_files_are_byte_identical(fresh, run_playbook):
    before = tree_digest(fresh["root"])
    assert {"k8s/device-plugin-configs.yaml", "k8s/mig-job.yaml", "k8s/gpu-quota.yaml", "k8s/team-over.yaml",
            "k8s/placement.yaml", "bin/check-request.sh", "out/quota-denied.txt", "out/isolation.txt",
            "out/placement.txt"} <= set(before)
    proc = run_playbook("playbooks/lab.yml", extra_vars=fresh["vars"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert recap(proc)["changed"] == 0, [l for l in proc.stdout.splitlines() if l.startswith(("TASK", "changed"))]
    assert tree_digest(fresh["root"]) == before
    # The unsliced node is full now (batch-train, and plain-gpu when the scheduler put it there): `whole` then waits,
    # and the scheduler must say that its pool lacks room, not that it went elsewhere.
    rows = intent_rows(proc)
    whole = rows.pop("intent-whole")
    assert rows == {name: row for name, row in INTENT_ROWS.items() if name != "intent-whole"}
    assert whole in {INTENT_ROWS["intent-whole"], ("whole", "nvidia.com/gpu", "pending: its pool (lab-node-0) is full")}, whole


def test_the_summary_reads_line_by_line_under_the_default_callback(fresh, tmp_path):
    """lab_report with an empty ansible.cfg (the default callback, JSON results): one short line per node, per Pod,
    per folder of files, and the export line, each printed on a line of its own."""
    empty = tmp_path / "ansible.cfg"
    empty.write_text("")
    variables = {"it_role": "gpushare.k8s.lab_report", "gpushare_kubeconfig": str(KUBECONFIG),
                 "lab_report_nodes": ["lab-node-0", "lab-node-1", "lab-node-2"], "lab_report_namespaces": ["gpu-share", "team-a"],
                 "lab_report_lab_root": str(fresh["root"]), "lab_report_kubeconfig": str(KUBECONFIG)}
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "tests/integration/playbooks/role.yml", "-e", json.dumps(variables)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
                          env=subprocess_env(ANSIBLE_CONFIG=str(empty), ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    shown = proc.stdout[proc.stdout.index("TASK [gpushare.k8s.lab_report : Show the lab at a glance]"):]
    lines = re.findall(r'^ {8}"(.*)",?$', shown, flags=re.M)  # the JSON list, one string a line
    assert "\\n" not in shown and max(len(line) for line in lines if not line.startswith("files in ")) <= 120, lines
    assert re.fullmatch(r"node lab-node-0 +config default +nvidia\.com/gpu=2 +gpu\.product=NVIDIA-A100-SXM4-80GB", lines[0]), lines
    assert re.fullmatch(r"node lab-node-1 +config shared +nvidia\.com/gpu=8 +gpu\.product=NVIDIA-A100-SXM4-80GB-SHARED", lines[1]), lines
    assert re.fullmatch(r"node lab-node-2 +config - +nvidia\.com/mig-1g\.10gb=7 +gpu\.product=NVIDIA-A100-SXM4-80GB mig\.strategy=mixed",
                        lines[2]), lines
    pods = {m.group(1): m.group(2) for m in (re.fullmatch(r"pod (\S+) +on (\S+) +Running", line) for line in lines) if m}
    assert {pod: pods.get(pod) for pod in ("gpu-share/mig-job", "gpu-share/prod-inference", "gpu-share/notebook", "gpu-share/batch-train")} == {
        "gpu-share/mig-job": "lab-node-2", "gpu-share/prod-inference": "lab-node-2", "gpu-share/notebook": "lab-node-1",
        "gpu-share/batch-train": "lab-node-0"}, lines
    assert lines[lines.index(f"files in {fresh['root']}:") + 1:-1] == [
        "bin/: check-request.sh", "k8s/: device-plugin-configs.yaml, gpu-quota.yaml, mig-job.yaml, placement.yaml, team-over.yaml",
        "out/: isolation.txt, placement.txt, quota-denied.txt"], lines
    assert lines[-1] == f"next: export KUBECONFIG={KUBECONFIG}"
