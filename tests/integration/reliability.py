# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers of the reliability tests (bad input, faults): own clusters, playbook runs, cluster snapshots, the lab's spec."""
from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import time
from pathlib import Path

import yaml
from kubernetes import client, config

from conftest import REPO, VENV_BIN, ansible_playbook, cluster_vars, port_base, subprocess_env

KWOK_HOME = Path.home() / ".kwok"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpushare"
KWOKCTL = CACHE / "kwok-v0.8.0" / "kwokctl"
LAB_NAMESPACES = ("gpu-share", "team-a")
LAB_VARS = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "lab.yml").read_text())
TRACEBACK = "Traceback (most recent call last)"
# lab-spec.md step 7, written out by hand: time-slicing isolates neither memory nor faults, MPS limits memory without
# enforcing it, MIG isolates both in hardware.
ISOLATION_TXT = ("TIMESLICING_MEMORY_ISOLATION=no\nMPS_MEMORY_ISOLATION=partial\nMIG_MEMORY_ISOLATION=yes\n"
                 "TIMESLICING_FAULT_ISOLATION=no\nMIG_FAULT_ISOLATION=yes\n")


def kubeconfig_of(cluster: str) -> Path:
    return KWOK_HOME / "clusters" / cluster / "kubeconfig.yaml"


def playbook(path, extra_vars=None, extra_args=(), timeout=1200):
    """Run ansible-playbook from the checkout and wait for it; the CompletedProcess."""
    return ansible_playbook(path, "-e", json.dumps(extra_vars or {}), *extra_args, timeout=timeout)


class Background:
    """ansible-playbook running in the background, its output in ``log`` (a file: a pipe nobody reads would block it)."""

    def __init__(self, path, extra_vars, log: Path):
        self.log = log
        cmd = [str(VENV_BIN / "ansible-playbook"), str(path), "-e", json.dumps(extra_vars)]
        with open(log, "w", encoding="utf-8") as handle:
            self.popen = subprocess.Popen(cmd, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, text=True, env=subprocess_env())
        self.returncode = None
        self.stdout = ""

    def wait(self, timeout=1200):
        """Wait for the run to end; returns self, with ``returncode`` and ``stdout`` set like a CompletedProcess."""
        try:
            self.returncode = self.popen.wait(timeout=timeout)
        finally:
            if self.popen.poll() is None:
                self.popen.kill()
                self.popen.wait()
        self.stdout = self.log.read_text(encoding="utf-8")
        return self

    def running(self):
        return self.popen.poll() is None


def output(proc) -> str:
    """Everything a run printed, whitespace collapsed (the YAML callback wraps long messages)."""
    text = (proc.stdout or "") + "\n" + (getattr(proc, "stderr", "") or "")
    return " ".join(text.replace("''", "'").split())


def recap(proc) -> dict:
    lines = [line for line in (proc.stdout or "").splitlines() if line.startswith("localhost")]
    assert lines, (proc.stdout or "")[-3000:]
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", lines[-1])}


def tail(proc, size=4000) -> str:
    return (proc.stdout or "")[-size:] + (getattr(proc, "stderr", "") or "")[-2000:]


class OwnCluster:
    """A lab cluster of the test's own (never the shared one): created by playbooks/cluster.yml, removed afterwards."""

    def __init__(self, name: str):
        self.name = name
        self.kubeconfig = kubeconfig_of(name)
        self.core = None

    def up(self, **extra_vars):
        """Create the cluster, removing first what an interrupted session may have left under the same name."""
        if self.left_over():
            self.down()
        proc = playbook("playbooks/cluster.yml", cluster_vars(self.name, **extra_vars))
        assert proc.returncode == 0, tail(proc)
        self.core = client.CoreV1Api(config.new_client_from_config(config_file=str(self.kubeconfig)))
        # the ports of its own (conftest.cluster_vars): the API server listens on the base's third port
        assert self.core.api_client.configuration.host.endswith(":%d" % (port_base(self.name) + 2)), self.core.api_client.configuration.host
        return self

    def left_over(self) -> bool:
        """Whether anything of this name is left: kwokctl's cluster directory, or what the lab_cluster role wrote beside it
        (the kwokctl configuration, the GPU Operator stand-in's launcher). Removing nothing costs a playbook run."""
        paths = (KWOK_HOME / "clusters" / self.name, KWOK_HOME / f"{self.name}.kwokctl.yaml", KWOK_HOME / "gpushare-components" / self.name)
        return any(path.exists() for path in paths)

    def down(self):
        if os.environ.get("GPUSHARE_KEEP_TEST_CLUSTERS"):  # a debugging aid: inspect the cluster after the test
            return
        playbook("playbooks/cluster.yml", {"gpushare_cluster_name": self.name, "lab_cluster_state": "absent"})

    def lab_vars(self, root: Path, **overrides) -> dict:
        return {"gpushare_kubeconfig": str(self.kubeconfig), "gpushare_lab_root": str(root), **overrides}

    def kwokctl(self, *args, check=True, timeout=300):
        proc = subprocess.run([str(KWOKCTL), "--name", self.name, *args], capture_output=True, text=True, timeout=timeout, check=False,
                              env=dict(os.environ, KWOK_WORKDIR=str(KWOK_HOME)))
        assert not check or proc.returncode == 0, proc.stderr[-2000:]
        return proc

    def component_pid(self, component: str) -> int:
        """The pid of one of this cluster's components, checked to be this cluster's binary (never another cluster's)."""
        pid = int((KWOK_HOME / "clusters" / self.name / "pids" / f"{component}.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        own = str(KWOK_HOME / "clusters" / self.name) + "/"
        assert any(part.decode().startswith(own) for part in cmdline), (pid, cmdline[:3])
        return pid

    def kill(self, component: str, timeout=60):
        """SIGKILL one component of this cluster and wait until the process is gone (reaped, so kwokctl sees it stopped)."""
        pid = self.component_pid(component)
        os.kill(pid, 9)
        deadline = time.monotonic() + timeout
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(f"/proc/{pid}").exists(), f"{component} ({pid}) still exists after SIGKILL"
        return pid

    def components(self) -> dict:
        lines = self.kwokctl("get", "components", "-o", "wide").stdout.splitlines()[1:]
        return dict(line.split()[:2] for line in lines if line.strip())

    def recover(self, timeout=240):
        """``kwokctl start cluster`` (it starts the components that are not running) until the control plane works again.

        kube-controller-manager and kube-scheduler exit when they cannot renew their leader lease for a while, possibly
        after the first start: start again until both hold a lease renewed after the recovery began.
        """
        began = datetime.datetime.now(datetime.timezone.utc)
        leases = client.CoordinationV1Api(self.core.api_client)

        def healthy():
            if set(self.components().values()) != {"Ready"}:
                self.kwokctl("start", "cluster")
                return False
            held = {lease.metadata.name: lease.spec.renew_time for lease in leases.list_namespaced_lease("kube-system").items}
            return all(held.get(name) and held[name] > began for name in ("kube-controller-manager", "kube-scheduler"))

        self.kwokctl("start", "cluster")
        wait_until(healthy, timeout=timeout, interval=2, what=f"the control plane of {self.name} to work again")

    def diagnose(self) -> str:
        """Component states and the end of the kwok controller's log, for failure messages."""
        try:
            states = self.components()
        except AssertionError as exc:
            states = str(exc)
        log = KWOK_HOME / "clusters" / self.name / "logs" / "kwok-controller.log"
        lines = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
        return f"components: {states}; kwok-controller log: {lines}"


def wait_until(predicate, timeout=120.0, interval=0.5, what="condition"):
    """Poll predicate() (exceptions count as not yet) until it is truthy."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:  # pylint: disable=broad-except
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def snapshot(core) -> dict:
    """What a lab run may change, by content: nodes' labels and GPU status, lab namespaces and their ConfigMaps, quotas, Pods."""
    state = {"namespaces": sorted(ns.metadata.name for ns in core.list_namespace().items)}
    for node in core.list_node().items:
        state[f"node/{node.metadata.name}"] = {
            "labels": dict(node.metadata.labels or {}),
            "capacity": dict(node.status.capacity or {}),
            "allocatable": dict(node.status.allocatable or {}),
        }
    for namespace in LAB_NAMESPACES:
        for cm in core.list_namespaced_config_map(namespace).items:
            state[f"configmap/{namespace}/{cm.metadata.name}"] = (cm.metadata.resource_version, dict(cm.data or {}))
        for quota in core.list_namespaced_resource_quota(namespace).items:
            state[f"quota/{namespace}/{quota.metadata.name}"] = (dict(quota.spec.hard or {}), dict((quota.status and quota.status.used) or {}))
        for pod in core.list_namespaced_pod(namespace).items:
            state[f"pod/{namespace}/{pod.metadata.name}"] = (pod.metadata.uid, pod.spec.node_name)
    policies = client.AdmissionregistrationV1Api(core.api_client).list_validating_admission_policy().items
    state["admission_policies"] = sorted(policy.metadata.name for policy in policies)
    return state


def gpu_status(node) -> dict:
    return {k: v for k, v in (node.status.allocatable or {}).items() if k.startswith("nvidia.com/")}


def assert_lab_converged(core, root: Path):
    """The cluster and the lab root hold exactly what lab-spec.md asks for: nothing lost, nothing duplicated."""
    pods = {(pod.metadata.namespace, pod.metadata.name): pod for namespace in LAB_NAMESPACES for pod in core.list_namespaced_pod(namespace).items}
    expected = {("gpu-share", name) for name in ("mig-job", "plain-gpu", "prod-inference", "notebook", "batch-train")}
    expected |= {("team-a", "team-a-job-1"), ("team-a", "team-a-job-2")}
    assert set(pods) == expected, sorted(pods)
    assert all(pod.spec.node_name for pod in pods.values()), {k: p.spec.node_name for k, p in pods.items()}
    assert pods["gpu-share", "mig-job"].spec.node_name == "lab-node-2" and pods["gpu-share", "plain-gpu"].spec.node_name != "lab-node-2"
    placed = {"prod-inference": "lab-node-2", "notebook": "lab-node-1", "batch-train": "lab-node-0"}
    assert {name: pods["gpu-share", name].spec.node_name for name in placed} == placed
    configmaps = [cm for cm in core.list_namespaced_config_map("gpu-share").items if cm.metadata.name == "device-plugin-configs"]
    assert len(configmaps) == 1 and {"default", "shared", "mps"} <= set(configmaps[0].data), configmaps
    assert "replicas: 4" in configmaps[0].data["shared"] and "sharing" not in configmaps[0].data["default"]
    quota = core.read_namespaced_resource_quota("gpu-quota", "team-a")
    assert quota.spec.hard["requests.nvidia.com/gpu"] == "2" and quota.status.used["requests.nvidia.com/gpu"] == "2", quota.status
    nodes = {node.metadata.name: node for node in core.list_node().items}
    labels = {name: nodes[name].metadata.labels for name in ("lab-node-0", "lab-node-1", "lab-node-2")}
    assert labels["lab-node-0"]["nvidia.com/device-plugin.config"] == "default"
    assert labels["lab-node-1"]["nvidia.com/device-plugin.config"] == "shared"
    assert labels["lab-node-2"]["nvidia.com/mig.strategy"] == "mixed"
    assert labels["lab-node-2"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"  # exactly mig.product (step 3)
    for name, resources in {"lab-node-0": {"nvidia.com/gpu": "2"}, "lab-node-1": {"nvidia.com/gpu": "8"},
                            "lab-node-2": {"nvidia.com/mig-1g.10gb": "7"}}.items():
        status = nodes[name].status
        for field in (status.capacity, status.allocatable):
            assert {k: v for k, v in field.items() if k in ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb")} == resources, (name, field)
            assert {"cpu", "memory", "pods"} <= set(field), (name, field)  # status keys the lab does not own survive
    out = root / "out"
    assert (out / "placement.txt").read_text() == "prod-inference=lab-node-2\nnotebook=lab-node-1\nbatch-train=lab-node-0\n"
    assert "exceeded quota: gpu-quota" in (out / "quota-denied.txt").read_text()
    assert (out / "isolation.txt").read_text() == ISOLATION_TXT
