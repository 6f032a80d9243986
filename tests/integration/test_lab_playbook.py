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

from conftest import REPO, VENV_BIN, cluster_vars, kubectl_of, subprocess_env

CLUSTER = os.environ.get("GPUSHARE_LAB_TEST_CLUSTER", "gpushare-it-lab")  # a cluster of its own, created and removed here
KUBECONFIG = Path.home() / ".kwok" / "clusters" / CLUSTER / "kubeconfig.yaml"
USER_KEY, USER_LABEL, USER_RESOURCE = "operator-notes", "example.com/rack", "example.com/fpga"
LAB_QUOTA = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "lab.yml").read_text(encoding="utf-8"))["gpushare_team_quota"]


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
    shown = task_text(fresh["first_run"], "gpushare.k8s.placement : Show where each intent landed")
    assert "Checked now: no earlier verdict is stored" in shown, shown
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


def task_text(proc, task):
    """What task ``task`` printed, its lines joined (the YAML result format folds long strings)."""
    shown = proc.stdout[proc.stdout.index("TASK [%s" % task):]
    shown = shown[:shown.index("TASK [", 1)] if "TASK [" in shown[1:] else shown
    return " ".join(line.strip() for line in shown.splitlines())


def kubectl_create(pod, dry_run=False):
    """``kubectl create`` of ``pod`` on the module's cluster: (exit code, standard error)."""
    args = [kubectl_of(KUBECONFIG), "--kubeconfig", str(KUBECONFIG), "create", "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    proc = subprocess.run(args, input=json.dumps(pod), capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, proc.stderr


def mig_by_intent(name, count):
    """A team-a Pod that asks for ``count`` MIG slices by intent only (no resource, no placement of its own)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "annotations": {"gpushare.k8s/gpu": "isolated", "gpushare.k8s/gpu-count": str(count)}},
            "spec": {"containers": [{"name": "cuda", "image": "registry.k8s.io/pause:3.10"}]}}


def test_a_team_pod_asking_5_mig_slices_by_intent_is_refused_by_the_quota(fresh):
    """Issue 42: gpu-quota limits nvidia.com/gpu only, and `isolated` is rewritten to nvidia.com/mig-1g.10gb, so such a Pod
    was created and ran while the quota read 2/2. The coverage quota beside it (the team's share, 2, of every other name)
    refuses it at admission; the spec's quota object, its file and step 5's refusal are as the spec writes them."""
    code, stderr = kubectl_create(mig_by_intent("team-a-mig-5", 5))
    assert code != 0, "the API server created the Pod"
    assert ('pods "team-a-mig-5" is forbidden: exceeded quota: gpushare-gpu-coverage, requested: requests.nvidia.com/mig-1g.10gb=5, '
            "used: requests.nvidia.com/mig-1g.10gb=0, limited: requests.nvidia.com/mig-1g.10gb=2") in stderr, stderr
    with pytest.raises(ApiException) as missing:
        fresh["core"].read_namespaced_pod("team-a-mig-5", "team-a")
    assert missing.value.status == 404
    # the team's share of MIG slices is 2: two pass (a dry run: admission, quota included, stores nothing), three do not
    code, stderr = kubectl_create(mig_by_intent("team-a-mig-2", 2), dry_run=True)
    assert code == 0, stderr
    code, stderr = kubectl_create(mig_by_intent("team-a-mig-3", 3), dry_run=True)
    assert code != 0 and "exceeded quota: gpushare-gpu-coverage, requested: requests.nvidia.com/mig-1g.10gb=3" in stderr, stderr
    # the spec's step 5, unchanged: its quota object and file, the refusal it saves
    core = fresh["core"]
    assert core.read_namespaced_resource_quota("gpu-quota", "team-a").spec.hard == {"requests.nvidia.com/gpu": "2"}
    assert (fresh["root"] / "k8s" / "gpu-quota.yaml").read_text() == (
        'apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpu-quota\n  namespace: team-a\nspec:\n  hard:\n    requests.nvidia.com/gpu: "2"\n')
    assert (fresh["root"] / "out" / "quota-denied.txt").read_text() == (
        'Error from server (Forbidden): error when creating "%s/k8s/team-over.yaml": pods "team-over" is forbidden: exceeded quota: '
        "gpu-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2\n" % fresh["root"])
    coverage = core.read_namespaced_resource_quota("gpushare-gpu-coverage", "team-a")
    assert coverage.spec.hard == {"requests.nvidia.com/mig-1g.10gb": "2"}
    assert coverage.metadata.labels == {"app.kubernetes.io/managed-by": "gpushare.k8s"}
    assert "team-a (quota gpu-quota, gpushare-gpu-coverage): covers every advertised GPU resource (nvidia.com/gpu, nvidia.com/mig-1g.10gb)" \
        in task_text(fresh["first_run"], "gpushare.k8s.quota_coverage : Show the quota coverage")


def test_a_gpu_resource_no_quota_of_the_team_limits_fails_the_quota_step_unless_the_inventory_intends_it(fresh, run_playbook):
    """A node advertising a GPU name the inventory does not know (a 2g.20gb MIG slice here): the quota step fails naming
    it (it printed BYPASS and went on); listed in gpushare_team_quota.coverage.uncovered, it is reported and the step passes."""
    core, extra = fresh["core"], "nvidia.com/mig-2g.20gb"
    core.patch_node_status("lab-node-0", {"status": {"capacity": {extra: "1"}, "allocatable": {extra: "1"}}})
    try:
        proc = run_playbook("playbooks/lab.yml", extra_vars=fresh["vars"], extra_args=["--tags", "quota_coverage"])
        assert proc.returncode != 0, proc.stdout[-3000:]
        assert ("team-a (quota gpu-quota, gpushare-gpu-coverage): BYPASS - Pods asking for nvidia.com/mig-2g.20gb (on lab-node-0) are not "
                "counted") in task_text(proc, "gpushare.k8s.quota_coverage : Check that every GPU quota"), proc.stdout[-3000:]
        quota = dict(LAB_QUOTA, coverage={"uncovered": [extra]})
        proc = run_playbook("playbooks/lab.yml", extra_vars=dict(fresh["vars"], gpushare_team_quota=quota), extra_args=["--tags", "quota_coverage"])
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert "left uncovered on purpose: nvidia.com/mig-2g.20gb (on lab-node-0)" in task_text(
            proc, "gpushare.k8s.quota_coverage : Show the quota coverage"), proc.stdout[-3000:]
    finally:
        core.patch_node_status("lab-node-0", {"status": {"capacity": {extra: None}, "allocatable": {extra: None}}})


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
    # nothing that decides where the intent Pods land changed: the verdict is reused and no Pod is created
    shown = task_text(proc, "gpushare.k8s.placement : Show where each intent landed")
    assert "Reused the stored verdict: nothing that decides where the intent Pods land changed" in shown, shown
    assert re.search(r"TASK \[gpushare\.k8s\.placement : Check now, unless the stored verdict holds[^\]]*\] \*+\nskipping", proc.stdout), shown
    assert "TASK [gpushare.k8s.placement : Create the intent Pods" not in proc.stdout


def test_step_8_checks_again_once_a_node_changes(fresh, run_playbook):
    """The stored verdict holds only while the nodes are as they were: a label added to a node makes step 8 create
    its intent Pods again, and they land where the table says."""
    core = fresh["core"]
    core.patch_node("lab-node-1", {"metadata": {"labels": {"example.com/rack": "r7"}}})
    try:
        proc = run_playbook("playbooks/lab.yml", extra_vars=fresh["vars"], extra_args=["--tags", "step8"])
    finally:
        core.patch_node("lab-node-1", {"metadata": {"labels": {"example.com/rack": None}}})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    shown = task_text(proc, "gpushare.k8s.placement : Show where each intent landed")
    assert "Checked now: the nodes, the namespace, the intent policies or the intents changed since the stored verdict" in shown, shown
    rows = intent_rows(proc)
    whole = rows.pop("intent-whole")
    assert whole in {INTENT_ROWS["intent-whole"], ("whole", "nvidia.com/gpu", "pending: its pool (lab-node-0) is full")}, whole
    assert rows == {name: row for name, row in INTENT_ROWS.items() if name != "intent-whole"}
    assert recap(proc)["changed"] == 0
    assert not [pod.metadata.name for pod in core.list_namespaced_pod("gpu-share").items if pod.metadata.name.startswith("intent-")]


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
