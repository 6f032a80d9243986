# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Faults while the lab runs, on a cluster of this module's own: nothing lost, nothing duplicated.

In order, on one cluster (each test leaves the lab converged for the next):
1. kube-apiserver killed in the middle of the lab: the run fails naming the connection problem;
   once the control plane is back, re-running converges to exactly what the spec asks for.
2. kwok controller killed and restarted: the advertised resources and labels survive, and the new
   controller takes the nodes over (leases, Pods started).
3. a node deleted and re-created between runs: the next run restores its labels and resources.
4. two lab runs at once (distinct lab roots) on a cluster the lab has to set up again: both succeed
   and the cluster ends converged, no status key lost.
"""
from __future__ import annotations

import datetime

import pytest
from kubernetes import client

from reliability import (
    LAB_NAMESPACES,
    TRACEBACK,
    Background,
    OwnCluster,
    assert_lab_converged,
    gpu_status,
    output,
    playbook,
    recap,
    tail,
    wait_until,
)

pytestmark = pytest.mark.slow

CLUSTER = "gpushare-it-faults"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
CONNECTION_PROBLEMS = ("Connection refused", "cannot reach the API server", "Max retries exceeded")


@pytest.fixture(scope="module")
def cluster():
    own = OwnCluster(CLUSTER)
    try:
        yield own.up()
    finally:
        own.down()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("faults") / "gpushare"


def gpu_view(core):
    """Every node's nvidia.com labels and GPU status (capacity and allocatable)."""
    view = {}
    for node in core.list_node().items:
        labels = {k: v for k, v in (node.metadata.labels or {}).items() if k.startswith("nvidia.com/")}
        capacity = {k: v for k, v in (node.status.capacity or {}).items() if k.startswith("nvidia.com/")}
        view[node.metadata.name] = {"labels": labels, "capacity": capacity, "allocatable": gpu_status(node)}
    return view


def failure_lines(proc):
    """The lines that say why the run failed (the error banner and the fatal result's message)."""
    return [line for line in proc.stdout.splitlines() if line.startswith(("[ERROR]", "fatal:")) or line.strip().startswith("msg:")]


def test_apiserver_killed_mid_lab_fails_clearly_and_a_rerun_converges(cluster, root, tmp_path):
    run = Background("playbooks/lab.yml", cluster.lab_vars(root), tmp_path / "interrupted.log")
    try:
        wait_until(lambda: cluster.core.read_namespaced_config_map("device-plugin-configs", "gpu-share"), timeout=600, interval=0.2,
                   what="step 1's ConfigMap")
        assert run.running(), "the lab ended before the API server could be stopped"
        cluster.kill("kube-apiserver")
    finally:
        run.wait(timeout=900)
    text = output(run)
    assert run.returncode != 0, tail(run)
    assert any(problem in text for problem in CONNECTION_PROBLEMS), failure_lines(run)
    assert TRACEBACK not in text, tail(run)

    cluster.recover()
    rerun = playbook("playbooks/lab.yml", cluster.lab_vars(root))
    assert rerun.returncode == 0, tail(rerun) + cluster.diagnose()
    assert_lab_converged(cluster.core, root)


def test_kwok_controller_restart_keeps_resources_and_labels(cluster):
    core = cluster.core
    before = gpu_view(core)
    assert before["lab-node-1"]["allocatable"] == {"nvidia.com/gpu": "8"}, before
    restarted = datetime.datetime.now(datetime.timezone.utc)
    killed = cluster.kill("kwok-controller")
    cluster.kwokctl("start", "cluster")  # starts what is not running: the kwok controller
    assert cluster.component_pid("kwok-controller") != killed, cluster.diagnose()
    assert gpu_view(core) == before

    # The new controller takes a node over when the old one's lease expires (200 s in kwokctl's
    # clusters); without a lease, at its next sync.
    leases = client.CoordinationV1Api(core.api_client)
    for name in before:
        leases.delete_namespaced_lease(name, "kube-node-lease")

    def taken_over():
        renewed = leases.list_namespaced_lease("kube-node-lease").items
        return {lease.metadata.name for lease in renewed if lease.spec.renew_time and lease.spec.renew_time > restarted} >= set(before)

    try:
        wait_until(taken_over, timeout=180, interval=2, what="the restarted kwok controller to take the nodes over")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {cluster.diagnose()}") from None
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kwok-restart-probe"},
             "spec": {"nodeName": "lab-node-0", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}
    core.create_namespaced_pod("default", probe)
    try:
        wait_until(lambda: core.read_namespaced_pod("kwok-restart-probe", "default").status.phase == "Running", timeout=120,
                   what="the restarted kwok controller to run a new Pod")
    finally:
        core.delete_namespaced_pod("kwok-restart-probe", "default", grace_period_seconds=0)
    assert gpu_view(core) == before
    for namespace in LAB_NAMESPACES:
        assert {pod.status.phase for pod in core.list_namespaced_pod(namespace).items} == {"Running"}


def test_node_deleted_and_recreated_is_restored_by_the_next_run(cluster, root):
    core = cluster.core
    before = gpu_view(core)
    core.delete_node("lab-node-1")
    wait_until(lambda: "lab-node-1" not in {node.metadata.name for node in core.list_node().items}, what="lab-node-1 to be gone")
    up = playbook("playbooks/cluster.yml", {"gpushare_cluster_name": cluster.name})
    assert up.returncode == 0, tail(up)
    assert gpu_view(core)["lab-node-1"] == {"labels": {}, "capacity": {}, "allocatable": {}}

    # The steps that own node labels and status (2 and 3); the preflight and the report always run.
    run = playbook("playbooks/lab.yml", cluster.lab_vars(root), extra_args=("--tags", "step2,step3"))
    assert run.returncode == 0, tail(run)
    assert recap(run)["changed"] > 0
    assert gpu_view(core) == before
    node = core.read_node("lab-node-1")
    assert {"cpu", "memory", "pods"} <= set(node.status.allocatable), node.status.allocatable


def reset_lab(core):
    """Undo the lab on the cluster (namespaces, node labels and GPU status), so the next runs set it all up again."""
    for namespace in LAB_NAMESPACES:
        core.delete_namespace(namespace)
    for node in core.list_node().items:
        labels = {k: None for k in node.metadata.labels or {} if k.startswith("nvidia.com/")}
        resources = {k: None for k in node.status.capacity or {} if k.startswith("nvidia.com/")}
        core.patch_node(node.metadata.name, {"metadata": {"labels": labels}})
        core.patch_node_status(node.metadata.name, {"status": {"capacity": resources, "allocatable": resources}})
    wait_until(lambda: not {ns.metadata.name for ns in core.list_namespace().items} & set(LAB_NAMESPACES), timeout=180,
               what="the lab namespaces to be deleted")


def test_two_lab_runs_at_once_both_converge(cluster, tmp_path):
    core = cluster.core
    reset_lab(core)
    assert all(not any(view.values()) for view in gpu_view(core).values()), gpu_view(core)
    roots = [tmp_path / "a" / "gpushare", tmp_path / "b" / "gpushare"]
    runs = [Background("playbooks/lab.yml", cluster.lab_vars(each), tmp_path / f"run-{index}.log") for index, each in enumerate(roots)]
    for run in runs:
        run.wait(timeout=1200)
    for run in runs:
        assert run.returncode == 0, tail(run)
    for each in roots:
        assert_lab_converged(core, each)
    assert (roots[0] / "k8s" / "device-plugin-configs.yaml").read_bytes() == (roots[1] / "k8s" / "device-plugin-configs.yaml").read_bytes()
