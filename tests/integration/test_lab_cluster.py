# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local lab cluster is a real control plane: the real scheduler places Pods
by what node status advertises, the real apiserver enforces quota at admission.

Each test works on its own kwok node and namespace so it holds whatever state
the lab left on lab-node-0..2.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kubernetes.client.rest import ApiException

from lab_helpers import unique, wait_for

GPU = "nvidia.com/gpu"
CONTROL_PLANE = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}


def _gpu_pod(name, selector, count=1):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": selector,
            "containers": [{
                "name": "cuda",
                "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                "resources": {"limits": {GPU: str(count)}},
            }],
        },
    }


@pytest.fixture(scope="module")
def scratch(core_v1):
    """A kwok node advertising no GPU and a namespace, removed afterwards."""
    node, ns = unique("gpushare-it-node"), unique("gpushare-it")
    label = {"gpushare.k8s/it-node": node}
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    core_v1.create_node({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": label, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {"capacity": capacity, "allocatable": capacity},
    })
    core_v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def ready_and_untainted():
        status = core_v1.read_node(node)
        ready = any(c.type == "Ready" and c.status == "True" for c in status.status.conditions or [])
        return ready and not status.spec.taints

    # kwok marks the node Ready; the node lifecycle controller then lifts its not-ready taint.
    wait_for(ready_and_untainted, timeout=60, what=f"node {node} Ready without taints")
    yield {"node": node, "ns": ns, "selector": label}
    core_v1.delete_namespace(ns)
    core_v1.delete_node(node)


def test_server_is_kubernetes_1_36(kubectl):
    version = json.loads(kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v1.36."), version["serverVersion"]
    assert version["clientVersion"]["gitVersion"].startswith("v1.36."), version["clientVersion"]


def _listening_sockets():
    """{inode: (address, port)} for every TCP socket in LISTEN state."""
    out = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            hex_addr, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_addr)
            if len(raw) == 4:
                addr = ".".join(str(b) for b in raw[::-1])
            else:  # IPv6: four little-endian 32-bit words
                words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
                addr = ":".join(b"".join(words).hex()[i:i + 4] for i in range(0, 32, 4))
            out[fields[9]] = (addr, int(hex_port, 16))
    return out


def _is_loopback(addr):
    return addr.startswith("127.") or addr == "0000:0000:0000:0000:0000:0000:0000:0001" \
        or addr.startswith("0000:0000:0000:0000:0000:ffff:7f")


def test_no_control_plane_port_listens_beyond_loopback(kubeconfig):
    sockets = _listening_sockets()
    seen = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        if exe not in CONTROL_PLANE:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = target[8:-1]
                if inode in sockets:
                    seen.setdefault(exe, []).append(sockets[inode])
    assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} <= set(seen), seen
    exposed = {exe: [a for a in addrs if not _is_loopback(a[0])] for exe, addrs in seen.items()}
    assert not any(exposed.values()), f"listening beyond loopback: {exposed}"


def test_each_control_plane_component_runs_on_one_core(kubeconfig):
    """kwokctl started each of its own components with GOMAXPROCS=1 (the lab_cluster role's componentsPatches)."""
    pids = Path(kubeconfig).parent / "pids"
    found = {}
    for pidfile in sorted(pids.glob("*.pid")):
        pid = pidfile.read_text().strip()
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        found[pidfile.stem] = [entry.decode() for entry in environ if entry.startswith(b"GOMAXPROCS=")]
    assert found == {name: ["GOMAXPROCS=1"] for name in
                     ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")}, found


def test_gpu_pod_stays_pending_while_no_node_advertises_gpu(core_v1, scratch):
    core_v1.create_namespaced_pod(scratch["ns"], _gpu_pod("first", scratch["selector"]))

    def failed_scheduling():
        events = core_v1.list_namespaced_event(scratch["ns"], field_selector="involvedObject.name=first").items
        return [e.message for e in events if e.reason == "FailedScheduling"]

    messages = wait_for(failed_scheduling, timeout=60, what="a FailedScheduling event for Pod first")
    # With the DRA lab applied to this cluster (`make dra`), a DeviceClass serves the name through DRA's extended-resource
    # bridge: the scheduler then tries the node's devices and says so instead.
    from kubernetes import client  # pylint: disable=import-outside-toplevel

    bridged = any((item.spec.extended_resource_name or "") == GPU
                  for item in client.ResourceV1Api(core_v1.api_client).list_device_class().items)
    expected = "cannot allocate all claims" if bridged else f"Insufficient {GPU}"
    assert any(expected in m for m in messages), messages
    pod = core_v1.read_namespaced_pod("first", scratch["ns"])
    assert pod.status.phase == "Pending" and not pod.spec.node_name


def test_pod_binds_and_runs_once_node_status_advertises_gpu(core_v1, scratch):
    # What a device plugin does: write the count into status, capacity and allocatable.
    core_v1.patch_node_status(scratch["node"], {"status": {"capacity": {GPU: "1"}, "allocatable": {GPU: "1"}}})
    node = core_v1.read_node(scratch["node"])
    assert node.status.capacity[GPU] == "1" and node.status.allocatable[GPU] == "1"
    assert node.status.capacity["cpu"] == "8", "the status patch must keep the other resources"

    def running():
        pod = core_v1.read_namespaced_pod("first", scratch["ns"])
        return pod if pod.spec.node_name and pod.status.phase == "Running" else None

    pod = wait_for(running, timeout=90, what="Pod first bound and Running")
    assert pod.spec.node_name == scratch["node"]


def test_quota_on_gpu_requests_rejects_second_pod_at_admission(core_v1, scratch):
    ns = scratch["ns"]
    core_v1.create_namespaced_resource_quota(ns, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota"},
        "spec": {"hard": {f"requests.{GPU}": "1"}},
    })

    # The ResourceQuota controller fills status.used and status.hard in; admission counts against the quota as the API
    # server's own cache holds it (listed here with resourceVersion "0"). Until that cache has the controller's status,
    # upstream admission has no hard limit to compare with and admits the Pod (a freshly created quota's window): such a
    # Pod is deleted and the request made again; the quota must deny it within the minute.
    def counted(**cached):
        quota = core_v1.list_namespaced_resource_quota(ns, field_selector="metadata.name=gpu-quota", **cached).items[0].status
        return (quota.hard or {}).get(f"requests.{GPU}") == "1" and (quota.used or {}).get(f"requests.{GPU}") == "1"

    wait_for(lambda: counted() and counted(resource_version="0"), timeout=60, what="quota status to count the running Pod")

    def denied():
        try:
            core_v1.create_namespaced_pod(ns, _gpu_pod("second", scratch["selector"]))
        except ApiException as error:
            return error
        core_v1.delete_namespaced_pod("second", ns, grace_period_seconds=0)
        wait_for(lambda: [p.metadata.name for p in core_v1.list_namespaced_pod(ns).items] == ["first"], timeout=30,
                 what="the admitted Pod second gone")
        return None

    error = wait_for(denied, timeout=60, interval=1, what="admission to deny Pod second")
    assert error.status == 403
    assert "exceeded quota: gpu-quota" in error.body, error.body
    assert [p.metadata.name for p in core_v1.list_namespaced_pod(ns).items] == ["first"]


def test_cluster_playbook_rerun_reuses_the_running_cluster(run_playbook, core_v1):
    before = {n.metadata.name: n.metadata.uid for n in core_v1.list_node().items}
    proc = run_playbook("playbooks/cluster.yml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recap = [line for line in proc.stdout.splitlines() if line.startswith("localhost")][-1]
    assert "changed=0" in recap and "failed=0" in recap, recap
    after = {n.metadata.name: n.metadata.uid for n in core_v1.list_node().items}
    assert {"lab-node-0", "lab-node-1", "lab-node-2"} <= set(after)
    assert all(after[name] == uid for name, uid in before.items() if name in after), "nodes were re-created"


def test_extra_components_with_bad_names_are_refused_before_anything_is_written(tmp_path):
    from reliability import output, playbook

    home = tmp_path / "kwok"
    proc = playbook("playbooks/cluster.yml", {
        "gpushare_cluster_name": "gpushare-it-never", "lab_cluster_kwok_home": str(home),
        "lab_cluster_extra_components": [{"name": "etcd"}, {"name": "Op_1"}, {"binary": "/bin/true"}, {"name": "op"}, {"name": "op"},
                                         {"name": "op2\n"}],
    })
    text = output(proc)
    assert proc.returncode != 0, text[-3000:]
    for problem in ("etcd is one of kwokctl's own", 'name "Op_1" is not a DNS label', 'name "" is not a DNS label',
                    'name "op2\\n" is not a DNS label', "names repeat: etcd, Op_1, , op, op, op2"):
        assert problem in text, text[-3000:]
    assert not home.exists(), list(home.rglob("*"))


def _cluster_files(name):
    from reliability import KWOK_HOME

    return {path: path.read_bytes() for path in (KWOK_HOME / "clusters" / name / "kwok.yaml", KWOK_HOME / f"{name}.kwokctl.yaml")}


def test_a_running_cluster_that_is_not_the_one_asked_for_is_reported_not_reused(core_v1):
    from conftest import CLUSTER
    from reliability import output, playbook

    files = _cluster_files(CLUSTER)
    nodes = {n.metadata.name: n.metadata.uid for n in core_v1.list_node().items}
    proc = playbook("playbooks/cluster.yml", {"gpushare_cluster_name": CLUSTER, "lab_cluster_bind_address": "127.0.0.2",
                                              "lab_cluster_kubernetes_version": "v1.36.2", "lab_cluster_etcd_version": "v3.6.15"})
    text = output(proc)
    assert proc.returncode != 0, text[-3000:]
    assert (f"Lab cluster {CLUSTER} is running, but not as asked: bind address: running 127.0.0.1, asked 127.0.0.2; "
            "Kubernetes version: running v1.36.3, asked v1.36.2; etcd version: running 3.6.16, asked v3.6.15. "
            "Fix: set lab_cluster_recreate=true") in text, text[-3000:]
    assert "Look for each component's binaries in the cache" not in text and "Start the build" not in text, \
        "nothing is built for a cluster that will not be used"
    assert _cluster_files(CLUSTER) == files, "the running cluster's configuration was rewritten"
    assert {n.metadata.name: n.metadata.uid for n in core_v1.list_node().items} == nodes


def test_a_running_cluster_on_other_ports_is_reported_not_reused(core_v1):
    import yaml

    from conftest import CLUSTER
    from reliability import KWOK_HOME, output, playbook

    files = _cluster_files(CLUSTER)
    [config] = [doc for doc in yaml.safe_load_all((KWOK_HOME / "clusters" / CLUSTER / "kwok.yaml").read_text())
                if (doc or {}).get("kind") == "KwokctlConfiguration"]
    proc = playbook("playbooks/cluster.yml", {"gpushare_cluster_name": CLUSTER, "lab_cluster_port_base": 20900})
    text = output(proc)
    assert proc.returncode != 0, text[-3000:]
    assert (f"Lab cluster {CLUSTER} is running, but not as asked: etcd peer port: running {config['options']['etcdPeerPort']}, "
            f"asked 20900;") in text, text[-3000:]
    assert f"kube-apiserver port: running {config['options']['kubeApiserverPort']}, asked 20902;" in text, text[-3000:]
    assert _cluster_files(CLUSTER) == files, "the running cluster's configuration was rewritten"


def test_a_port_in_use_is_refused_before_the_cluster_is_created(tmp_path):
    import socket

    from reliability import output, playbook

    home = tmp_path / "kwok"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        base = port - 2  # the kube-apiserver's port of that base
        proc = playbook("playbooks/cluster.yml", {"gpushare_cluster_name": "gpushare-it-never", "lab_cluster_kwok_home": str(home),
                                                  "lab_cluster_port_base": base})
    text = output(proc)
    assert proc.returncode != 0, text[-3000:]
    assert (f"lab_cluster_port_base: {port} in use on 127.0.0.1, and cluster gpushare-it-never needs {base}-{base + 5}. "
            "Fix: choose another base, stop what listens there, or set 0 (kwokctl picks free ports); nothing was created.") in text, text[-3000:]
    assert not (home / "clusters").exists(), list(home.rglob("*"))  # kwokctl was never asked to create it
