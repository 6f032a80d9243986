# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 5 ("Beyond the lab") on the live lab cluster, asserting the real API server's answers.

* gpu_feature_labels: the labels read back from the API, and the real scheduler placing Pods by them;
* quota coverage: a quota on nvidia.com/gpu only is bypassed through nvidia.com/mig-1g.10gb (the API
  admits such a Pod and never counts it), a quota covering every advertised name is clean and counts it;
  team_quota_resources: auto writes both lines;
* mig_migration_report: a Deployment pinned to the MIG node is reported, a free one is not, and a
  manifest on disk works the same.

The nodes are brought to the state `make lab` leaves (steps 2 and 3 with the lab's inventory, then
the labels). Everything else lives in namespaces with unique names, deleted afterwards.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from kubernetes.client.rest import ApiException

from lab_helpers import unique, wait_for

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "tests" / "integration" / "playbooks"
GPU, MIG = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
A100 = "NVIDIA-A100-SXM4-80GB"
HOST = "kubernetes.io/hostname"
IMAGE = "registry.k8s.io/pause:3.10"


def recap(proc):
    lines = [line for line in proc.stdout.splitlines() if line.startswith("localhost")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1])}


@pytest.fixture(scope="module")
def run_ok(run_playbook, kubeconfig):
    """Run one of tests/integration/playbooks/ against the test cluster; fail with its output unless it succeeds."""

    def run(playbook, extra_vars=None, **kwargs):
        proc = run_playbook(PLAYBOOKS / playbook, extra_vars=dict(extra_vars or {}, gpushare_kubeconfig=kubeconfig), **kwargs)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
        return proc

    return run


def gpu_pod(name, resource, node_selector=None, affinity=None):
    spec = {"containers": [{"name": "main", "image": IMAGE, "resources": {"limits": {resource: "1"}}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def deployment(name, resource=GPU, node_selector=None, replicas=1):
    template_spec = {"containers": [{"name": "server", "image": IMAGE, "resources": {"limits": {resource: "1"}}}]}
    if node_selector:
        template_spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": template_spec},
        },
    }


def bound_node(core_v1, namespace, name, timeout=60):
    return wait_for(lambda: core_v1.read_namespaced_pod(name, namespace).spec.node_name, timeout=timeout, what=f"{namespace}/{name} to be bound")


@pytest.fixture(scope="module")
def lab_nodes(run_ok, core_v1):
    """The nodes as `make lab` leaves them: steps 2 and 3, then the GPU feature labels."""
    run_ok("gpu_feature_labels.yml")
    return {node.metadata.name: node for node in core_v1.list_node().items}


@pytest.fixture
def namespaces(core_v1):
    """Create namespaces with unique names on demand; delete them all afterwards."""
    made = []

    def make(prefix):
        name = unique(prefix)
        core_v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            core_v1.delete_namespace(name, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise


# ---------------------------------------------------------------------------
# 1. GPU feature labels


def test_feature_labels_read_back_from_the_api(lab_nodes):
    labels = {name: {k: v for k, v in (node.metadata.labels or {}).items() if k.startswith("nvidia.com/")} for name, node in lab_nodes.items()}
    assert labels["lab-node-0"] == {
        "nvidia.com/device-plugin.config": "default",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.product": A100,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
    }
    assert labels["lab-node-1"] == {
        "nvidia.com/device-plugin.config": "shared",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.product": A100 + "-SHARED",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
    }
    assert labels["lab-node-2"] == {
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.product": A100,  # exactly the spec's step 3
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig-1g.10gb.count": "7",
        "nvidia.com/mig-1g.10gb.memory": "9856",
        "nvidia.com/mig-1g.10gb.product": A100 + "-MIG-1g.10gb",
        "nvidia.com/mig-1g.10gb.replicas": "1",
        "nvidia.com/mig-1g.10gb.sharing-strategy": "none",
        "nvidia.com/mig-1g.10gb.multiprocessors": "14",
        "nvidia.com/mig-1g.10gb.slices.gi": "1",
        "nvidia.com/mig-1g.10gb.slices.ci": "1",
        "nvidia.com/mig-1g.10gb.engines.copy": "1",
        "nvidia.com/mig-1g.10gb.engines.decoder": "0",  # the MIG User Guide: no NVDEC on the A100's 1-slice profile (go-nvml's mock said 1)
        "nvidia.com/mig-1g.10gb.engines.encoder": "0",
        "nvidia.com/mig-1g.10gb.engines.jpeg": "0",
        "nvidia.com/mig-1g.10gb.engines.ofa": "0",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mps.capable": "false",
    }


def test_the_scheduler_places_pods_by_the_labels(lab_nodes, core_v1, namespaces):
    namespace = namespaces("it-gfl")
    shared = gpu_pod("by-product", GPU, node_selector={"nvidia.com/gpu.product": A100 + "-SHARED"})
    mig_affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/mig-1g.10gb.count", "operator": "Exists"}]}]}}}
    profile = gpu_pod("by-mig-profile", MIG, affinity=mig_affinity)
    core_v1.create_namespaced_pod(namespace, shared)
    core_v1.create_namespaced_pod(namespace, profile)
    assert bound_node(core_v1, namespace, "by-product") == "lab-node-1"
    assert bound_node(core_v1, namespace, "by-mig-profile") == "lab-node-2"


def test_labels_are_idempotent_and_stale_ones_go_while_others_stay(lab_nodes, core_v1, run_ok):
    user_label, stale_label = unique("example.com/it-gfl"), "nvidia.com/mig-2g.20gb.count"
    core_v1.patch_node("lab-node-0", {"metadata": {"labels": {user_label: "keep", stale_label: "3"}}})
    try:
        check = run_ok("gpu_feature_labels.yml", {"it_steps": False}, check=True, diff=True)
        assert recap(check)["changed"] == 1, check.stdout[-3000:]
        assert stale_label in core_v1.read_node("lab-node-0").metadata.labels  # check mode wrote nothing
        first = run_ok("gpu_feature_labels.yml", {"it_steps": False})
        assert recap(first)["changed"] == 1
        labels = core_v1.read_node("lab-node-0").metadata.labels
        assert stale_label not in labels and labels[user_label] == "keep" and labels["nvidia.com/gpu.product"] == A100
        again = run_ok("gpu_feature_labels.yml", {"it_steps": False})
        assert recap(again)["changed"] == 0, again.stdout[-3000:]
    finally:
        core_v1.patch_node("lab-node-0", {"metadata": {"labels": {user_label: None, stale_label: None}}})


# ---------------------------------------------------------------------------
# 2. Quota coverage


def make_quota(core_v1, namespace, hard):
    core_v1.create_namespaced_resource_quota(namespace, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}, "spec": {"hard": hard}})
    # The admission plugin refuses Pods until the controller has filled in status.hard.
    wait_for(lambda: (core_v1.read_namespaced_resource_quota("gpu", namespace).status.hard or {}) == hard, what=f"quota status in {namespace}")


def coverage(run_ok, tmp_path, **args):
    out = tmp_path / unique("coverage")
    run_ok("quota_coverage.yml", {"it_args": args, "it_out": str(out)})
    return json.loads(out.read_text())


def quota_used(core_v1, namespace):
    return dict(core_v1.read_namespaced_resource_quota("gpu", namespace).status.used or {})


def test_quota_coverage_against_the_real_quota_system(lab_nodes, core_v1, namespaces, run_ok, tmp_path):
    gpu_only, covered = namespaces("it-qc-gpu"), namespaces("it-qc-all")
    make_quota(core_v1, gpu_only, {"requests.nvidia.com/gpu": "1"})

    # The lab's inventory: lab-node-0 (2 GPUs) and lab-node-1 (2 x 4 slices) advertise nvidia.com/gpu, lab-node-2 only
    # its seven MIG instances.
    report = coverage(run_ok, tmp_path, namespaces=[gpu_only])
    assert report["advertised"] == {GPU: ["lab-node-0", "lab-node-1"], MIG: ["lab-node-2"]}
    [entry] = report["namespaces"]
    assert entry["covered"] == [GPU]
    assert entry["uncovered"] == [{"resource": MIG, "nodes": ["lab-node-2"]}]
    assert report["ok"] is False and f"{gpu_only} (quota gpu): BYPASS" in report["msg"]

    # The real API agrees. The quota holds nvidia.com/gpu to one: the first GPU Pod is counted, a second refused ...
    core_v1.create_namespaced_pod(gpu_only, gpu_pod("gpu-1", GPU))
    wait_for(lambda: quota_used(core_v1, gpu_only).get("requests.nvidia.com/gpu") == "1", what="the quota to count the GPU Pod")
    with pytest.raises(ApiException) as denied:
        core_v1.create_namespaced_pod(gpu_only, gpu_pod("gpu-2", GPU))
    assert denied.value.status == 403 and "exceeded quota: gpu" in denied.value.body
    # ... while MIG Pods go around it: two more GPUs' worth are admitted and run, and the quota still counts one.
    for name in ("mig-bypass-1", "mig-bypass-2"):
        core_v1.create_namespaced_pod(gpu_only, gpu_pod(name, MIG))
    assert {bound_node(core_v1, gpu_only, name) for name in ("mig-bypass-1", "mig-bypass-2")} == {"lab-node-2"}
    assert quota_used(core_v1, gpu_only) == {"requests.nvidia.com/gpu": "1"}

    # A quota with a requests. line for every advertised name is clean, and the API counts the MIG Pod.
    make_quota(core_v1, covered, {"requests.nvidia.com/gpu": "1", "requests.nvidia.com/mig-1g.10gb": "1"})
    clean = coverage(run_ok, tmp_path, namespaces=[covered], fail_on_bypass=True)
    assert clean["ok"] is True
    assert (clean["namespaces"][0]["covered"], clean["namespaces"][0]["uncovered"]) == ([GPU, MIG], [])
    core_v1.create_namespaced_pod(covered, gpu_pod("mig-counted", MIG))
    wait_for(lambda: (core_v1.read_namespaced_resource_quota("gpu", covered).status.used or {}).get("requests.nvidia.com/mig-1g.10gb") == "1",
             what="the quota to count the MIG Pod")
    with pytest.raises(ApiException) as denied:
        core_v1.create_namespaced_pod(covered, gpu_pod("mig-over", MIG))
    assert denied.value.status == 403 and "exceeded quota" in denied.value.body


def test_team_quota_auto_covers_every_advertised_name(lab_nodes, core_v1, namespaces, run_ok, tmp_path):
    namespace = namespaces("it-qc-auto")
    root = tmp_path / "lab"
    extra = {
        "team_quota_lab_root": str(root),
        "team_quota_namespace": namespace,
        "team_quota_resources": "auto",
        "team_quota_gpus": 1,
        "team_quota_pods": [{"name": "job-1"}],
        "team_quota_node_selector": {"nvidia.com/device-plugin.config": "shared"},
    }
    run_ok("team_quota.yml", extra)
    hard = yaml.safe_load((root / "k8s" / "gpu-quota.yaml").read_text())["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "1", "requests.nvidia.com/mig-1g.10gb": "1"}
    assert core_v1.read_namespaced_resource_quota("gpu-quota", namespace).spec.hard == hard
    assert "exceeded quota: gpu-quota" in (root / "out" / "quota-denied.txt").read_text()
    assert coverage(run_ok, tmp_path, namespaces=[namespace])["namespaces"][0]["uncovered"] == []


# ---------------------------------------------------------------------------
# 3. MIG migration report


def migration(run_ok, tmp_path, **role_vars):
    out = tmp_path / unique("migration")
    run_ok("mig_migration_report.yml", dict(role_vars, mig_migration_report_dest=str(out)))
    return json.loads(out.read_text())


def test_migration_report_on_the_cluster(lab_nodes, namespaces, run_ok, tmp_path, kubectl):
    namespace = namespaces("it-mig")
    manifests = [deployment("pinned", node_selector={HOST: "lab-node-2"}), deployment("free")]
    kubectl("apply", "-n", namespace, "-f", "-", input_text=yaml.safe_dump_all(manifests))

    def pinned_pods():
        return kubectl("get", "pods", "-n", namespace, "-l", "app=pinned", "-o", "name").stdout.strip()

    wait_for(pinned_pods, what="the pinned Deployment's Pod")

    # After step 3 (the cluster already shows it): the inventory describes no change.
    nodes = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "lab.yml").read_text())
    report = migration(run_ok, tmp_path, mig_migration_report_namespaces=[namespace],
                       mig_migration_report_nodes=nodes["gpushare_nodes"], mig_migration_report_configs=nodes["gpushare_device_plugin_configs"])
    assert report["checked"] == 2 and report["ok"] is False
    assert [{k: row[k] for k in ("namespace", "kind", "name", "container", "resource")} for row in report["workloads"]] == [
        {"namespace": namespace, "kind": "Deployment", "name": "pinned", "container": "server", "resource": GPU}
    ]
    assert "lab-node-2 (nvidia.com/mig-1g.10gb: 7)" in report["workloads"][0]["reason"]
    assert f"- {namespace}/Deployment pinned (nvidia.com/gpu)" in report["summary"]

    # Before a change: turning lab-node-0 MIG would strand a Deployment pinned there.
    kubectl("apply", "-n", namespace, "-f", "-", input_text=yaml.safe_dump(deployment("pinned-0", node_selector={HOST: "lab-node-0"}, replicas=0)))
    before = migration(run_ok, tmp_path, mig_migration_report_namespaces=[namespace],
                       mig_migration_report_nodes=[{"name": "lab-node-0", "gpus": 2, "mig": {"product": A100, "profile": "1g.10gb"}}])
    rows = {row["name"]: row for row in before["workloads"]}
    assert set(rows) == {"pinned", "pinned-0"}
    assert rows["pinned-0"]["stranded_by_change"] is True and rows["pinned-0"]["nodes_before"] == ["lab-node-0"]
    assert rows["pinned"]["stranded_by_change"] is False


def test_migration_report_on_a_manifest_file(lab_nodes, run_ok, tmp_path):
    manifest = tmp_path / "apps.yaml"
    manifest.write_text(yaml.safe_dump_all([deployment("pinned", node_selector={HOST: "lab-node-2"}), deployment("free"),
                                            gpu_pod("mig-ok", MIG, node_selector={HOST: "lab-node-2"})]))
    report = migration(run_ok, tmp_path, mig_migration_report_cluster=False, mig_migration_report_paths=[str(manifest)],
                       mig_migration_report_default_namespace="apps")
    assert report["checked"] == 2
    assert [(row["namespace"], row["kind"], row["name"], row["container"]) for row in report["workloads"]] == [("apps", "Deployment", "pinned", "server")]
