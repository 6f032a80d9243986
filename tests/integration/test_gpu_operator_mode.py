# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Operator mode on a lab cluster of this module's own, with the GPU Operator stand-in as a component.

In order, on one cluster:
1. the stand-in runs with the cluster and answers the chart's default ClusterPolicy;
2. advertise mode is refused before any write (a ClusterPolicy exists; a node that is not a kwok node);
3. the whole lab in operator mode: --check --diff writes nothing, the run reaches the lab's end state
   (lab-node-0 2, lab-node-1 8, lab-node-2 7 x mig-1g.10gb and no nvidia.com/gpu), a re-run changes nothing;
   each GPU node's nvidia.com/* labels are what NVIDIA's gpu-feature-discovery writes for it (run again here, over
   the same mock NVML, with the node's GPUs, config and MIG strategy), its CUDA and driver labels included, and a
   node relabelled to the mps config gets GFD's nvidia.com/mps.capable=true;
4. NVIDIA's config-manager acts on labels (8 -> 2 -> 8); a ConfigMap edit (replicas 4 -> 2) changes nothing until the
   operator's DaemonSets restart (8 -> 4), by hand or by the config role;
5. a layout the GPUs cannot hold ends in mig.config.state=failed, and the role fails with the reason;
6. stand-in stopped: step 2 fails naming what did not happen; the test answering as the operator
   would lets the role pass; after a restart the lab completes;
7. a wait longer than the play's task cap is not cut (the wait task's own timeout is above it), and prints a progress
   line naming the pending node and its mig.config.state every progress_interval;
8. API server and stand-in restarts leave no stale advertisement;
9. on a cluster of its own, the whole lab in operator mode with an H100 node, a B200 node and an H100 MIG node.
"""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
import yaml
from kubernetes import client

from conftest import built_tool, kubectl_of
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import operator_standin as standin
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import nvml_state
from reliability import LAB_VARS, Background, OwnCluster, output, playbook, recap, snapshot, tail, wait_until

pytestmark = pytest.mark.slow

# How long a test waits for the stand-in's processes to react (well under a second on a quiet machine: `make bench`
# measures it; under CI's load a GFD or plugin start can take seconds, so the tests wait long and assert the end state)
WAIT = 60

CLUSTER = "gpushare-it-operator"
OPERATOR = {"gpushare_mode": "operator"}
NS = "gpu-operator"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
STATE_LABEL = "nvidia.com/mig.config.state"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
A100_80 = "NVIDIA-A100-SXM4-80GB"
# The GPU Operator's DaemonSets whose Pods load the device-plugin config.
DAEMONSETS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery")
# The nvidia.com/* labels of a node that are not GFD's: the collection's and the MIG manager's.
NOT_GFD = {CONFIG_LABEL, "nvidia.com/mig.config", STATE_LABEL}
# Labels only NVIDIA's GFD writes (the model has no driver): their presence shows GFD labelled the node.
GFD_ONLY = ("nvidia.com/cuda.driver-version.full", "nvidia.com/cuda.driver.major", "nvidia.com/cuda.runtime-version.full",
            "nvidia.com/cuda.runtime.major", "nvidia.com/gpu.machine", "nvidia.com/vgpu.present")


@pytest.fixture(scope="module")
def cluster():
    own = OwnCluster(CLUSTER)
    try:
        yield own.up(gpushare_gpu_operator_standin=True)
    finally:
        own.down()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("operator") / "gpushare"


def gpus(core, name):
    node = core.read_node(name)
    return {k: v for k, v in (node.status.allocatable or {}).items() if k.startswith("nvidia.com/")}


def capacity(core, name):
    node = core.read_node(name)
    return {k: v for k, v in (node.status.capacity or {}).items() if k.startswith("nvidia.com/")}


def labels(core, name):
    return dict(core.read_node(name).metadata.labels or {})


def advertised(core, name):
    """What the stand-in advertises for one node, read once: its nvidia.com allocatable, capacity and product label."""
    def nvidia(resources):
        return {k: v for k, v in (resources or {}).items() if k.startswith("nvidia.com/")}

    node = core.read_node(name)
    return nvidia(node.status.allocatable), nvidia(node.status.capacity), (node.metadata.labels or {}).get("nvidia.com/gpu.product")


def relabel(core, name, config):
    core.patch_node(name, {"metadata": {"labels": {CONFIG_LABEL: config}}})


def operator_state(core):
    """Everything operator mode writes besides the lab's own objects: the ClusterPolicy and the operator namespace's ConfigMaps."""
    custom = client.CustomObjectsApi(core.api_client)
    policy = custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
    return {"policy": (policy["metadata"]["resourceVersion"], policy.get("spec")),
            "configmaps": {cm.metadata.name: (cm.metadata.resource_version, cm.data) for cm in core.list_namespaced_config_map(NS).items}}


def test_standin_runs_with_the_cluster_and_answers_the_default_policy(cluster):
    assert cluster.components().get("gpu-operator-standin") in ("Running", "Ready"), cluster.components()
    log = cluster.kubeconfig.parent / "logs" / "gpu-operator-standin.log"
    node = cluster.core.read_node("lab-node-2")
    assert node.metadata.annotations["gpushare.k8s/gpus"] == "2"
    assert node.metadata.annotations["gpushare.k8s/gpu-product"] == A100_80
    # The chart's default ClusterPolicy: single strategy, no config, every GPU whole.
    for name in ("lab-node-0", "lab-node-1", "lab-node-2"):
        wait_until(lambda name=name: gpus(cluster.core, name) == {"nvidia.com/gpu": "2"}, timeout=30, what=f"{name} to advertise 2 GPUs")
    assert labels(cluster.core, "lab-node-0")["nvidia.com/gpu.product"] == A100_80
    assert log.is_file() and "started" in log.read_text()


def test_advertise_mode_is_refused_before_any_write(cluster, tmp_path):
    real = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "it-real-node"}}  # no kwok annotation: a real node
    cluster.core.create_node(real)
    try:
        before = snapshot(cluster.core)
        nodes = json.loads(json.dumps(LAB_VARS["gpushare_nodes"])) + [{"name": "it-real-node", "gpus": 1, "config": "default"}]
        proc = playbook("playbooks/lab.yml", cluster.lab_vars(tmp_path / "root", gpushare_nodes=nodes))
        text = output(proc)
        assert proc.returncode != 0, tail(proc)
        assert "gpushare_mode: advertise, but ClusterPolicy cluster-policy exists" in text and "Fix: set gpushare_mode: operator" in text, tail(proc)
        assert "it-real-node lacks the annotation kwok.x-k8s.io/node=fake" in text, tail(proc)
        assert not (tmp_path / "root").exists()
        after = snapshot(cluster.core)
        for state in (before, after):  # kwok manages the test's own node meanwhile
            state.pop("node/it-real-node", None)
        assert after == before
    finally:
        cluster.core.delete_node("it-real-node")


def test_operator_lab_check_mode_writes_nothing(cluster, root):
    before = (snapshot(cluster.core), operator_state(cluster.core))
    proc = playbook("playbooks/lab.yml", cluster.lab_vars(root, **OPERATOR), ["--check", "--diff"])
    assert proc.returncode == 0, tail(proc)
    assert (snapshot(cluster.core), operator_state(cluster.core)) == before
    assert not root.exists()


def test_operator_lab_reaches_the_lab_end_state_and_reruns_unchanged(cluster, root):
    proc = playbook("playbooks/lab.yml", cluster.lab_vars(root, **OPERATOR))
    assert proc.returncode == 0, tail(proc)
    core = cluster.core
    for name, want in {"lab-node-0": {"nvidia.com/gpu": "2"}, "lab-node-1": {"nvidia.com/gpu": "8"},
                       "lab-node-2": {"nvidia.com/mig-1g.10gb": "7"}}.items():
        assert gpus(core, name) == want and capacity(core, name) == want, name
    two = labels(core, "lab-node-2")
    assert two["nvidia.com/mig.config"] == "1g.10gb-x7-on-1-of-2" and two[STATE_LABEL] == "success"
    assert two["nvidia.com/mig.strategy"] == "mixed" and two["nvidia.com/mig-1g.10gb.count"] == "7"
    assert labels(core, "lab-node-1")["nvidia.com/gpu.product"] == A100_80 + "-SHARED"
    policy = client.CustomObjectsApi(core.api_client).get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
    assert policy["spec"]["devicePlugin"]["config"] == {"name": "device-plugin-configs", "default": "default"}
    assert policy["spec"]["mig"]["strategy"] == "mixed"
    assert policy["spec"]["migManager"]["config"]["name"] == "gpushare-mig-parted-config"
    assert set(core.read_namespaced_config_map("device-plugin-configs", NS).data) == {"default", "shared", "mps"}
    assert (root / "out" / "placement.txt").read_text() == "prod-inference=lab-node-2\nnotebook=lab-node-1\nbatch-train=lab-node-0\n"
    assert "exceeded quota: gpu-quota" in (root / "out" / "quota-denied.txt").read_text()
    files = {path: path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}
    again = playbook("playbooks/lab.yml", cluster.lab_vars(root, **OPERATOR))
    assert again.returncode == 0 and recap(again)["changed"] == 0, tail(again)
    assert {path: path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()} == files


@pytest.fixture(scope="module")
def gfd_tools():
    """(NVIDIA's gpu-feature-discovery, the directory of our mock libnvidia-ml.so.1): the builds the role made, from the cache."""
    return built_tool("tools/nvidia/build.sh") / "gpu-feature-discovery", built_tool("tools/nvml-mock/build.sh")


def run_gfd(tools, workdir, name, mig_devices, config_text, strategy):
    """NVIDIA's GFD run here, one shot, for a node of two A100-80GB GPUs with ``mig_devices``: its nvidia.com/* labels."""
    gfd, mock = tools
    workdir.mkdir(parents=True, exist_ok=True)
    state, config, out = workdir / "nvml-state", workdir / "config.yaml", workdir / "labels"
    nvml_state.write(str(state), nvml_state.node_state(A100_80, 2, node=name, mig_devices=mig_devices))
    config.write_text(config_text)
    env = {key: value for key, value in os.environ.items() if key not in ("MIG_STRATEGY", "NVIDIA_VISIBLE_DEVICES")}
    env.update(LD_LIBRARY_PATH=str(mock), MIG_STRATEGY=strategy, **{nvml_state.ENV: str(state)})
    proc = subprocess.run([str(gfd), "--oneshot", "--no-timestamp", "--output-file", str(out), "--config-file", str(config)],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return gfd_file(out)


def gfd_file(path):
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line.startswith("nvidia.com/"))


def gfd_labels_of(core, name):
    return {k: v for k, v in labels(core, name).items() if k.startswith("nvidia.com/") and k not in NOT_GFD}


def test_each_gpu_nodes_labels_are_what_nvidias_gfd_writes(cluster, gfd_tools, tmp_path):
    """The lab's end state: every nvidia.com/* label of each GPU node (but the collection's and the MIG manager's) is GFD's,
    run here again with the node's inputs (its two A100-80GB GPUs and MIG layout, the config its label or the ClusterPolicy
    default names, as the ConfigMap holds it, and the ClusterPolicy's MIG strategy), and the same as the stand-in's own
    output file of the node. Then lab-node-0 relabelled to mps: GFD's mps.capable=true and sharing strategy mps."""
    core = cluster.core
    spec = client.CustomObjectsApi(core.api_client).get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")["spec"]
    strategy = spec["mig"]["strategy"]
    configs = core.read_namespaced_config_map(spec["devicePlugin"]["config"]["name"], NS).data
    node_files = cluster.kubeconfig.parent / "gpu-operator-standin" / "nodes"
    layouts = {"lab-node-0": None, "lab-node-1": None, "lab-node-2": [["1g.10gb"] * 7, []]}

    def check(name, devices):
        config = labels(core, name).get(CONFIG_LABEL) or spec["devicePlugin"]["config"]["default"]
        want = run_gfd(gfd_tools, tmp_path / name, name, devices, configs[config], strategy)
        wait_until(lambda: gfd_labels_of(core, name) == want, timeout=WAIT, what=f"{name}'s labels to be GFD's")
        assert gfd_file(node_files / name / "gfd-labels") == want, name
        assert all(key in want for key in GFD_ONLY), (name, sorted(want))
        return want

    for name, devices in layouts.items():
        check(name, devices)
    assert gfd_labels_of(core, "lab-node-2")["nvidia.com/mig-1g.10gb.count"] == "7"
    assert gfd_labels_of(core, "lab-node-0")["nvidia.com/mps.capable"] == "false"
    relabel(core, "lab-node-0", "mps")
    try:
        wait_until(lambda: labels(core, "lab-node-0").get("nvidia.com/mps.capable") == "true", timeout=WAIT, what="lab-node-0 mps.capable=true")
        mps = check("lab-node-0", None)
        assert mps["nvidia.com/gpu.sharing-strategy"] == "mps" and mps["nvidia.com/gpu.replicas"] == "4", mps
    finally:
        relabel(core, "lab-node-0", "default")
    wait_until(lambda: labels(core, "lab-node-0").get("nvidia.com/mps.capable") == "false", timeout=WAIT, what="lab-node-0 back to mps.capable=false")
    assert "nvidia.com/gpu.replicas" in gfd_labels_of(core, "lab-node-0")


@pytest.fixture(scope="module")
def device_plugin_tools():
    """(NVIDIA's nvidia-device-plugin, device-plugin-kubelet, the mock's directory): the builds the role made, from the cache."""
    return (built_tool("tools/nvidia/build.sh") / "nvidia-device-plugin", built_tool("tools/device-plugin-kubelet/build.sh"),
            built_tool("tools/nvml-mock/build.sh"))


def test_each_gpu_nodes_allocatable_is_what_nvidias_device_plugin_registered(cluster, device_plugin_tools, tmp_path):
    """On the operator lab (after the lab ran), each GPU node's nvidia.com/* capacity and allocatable are what NVIDIA's device
    plugin lists when run here once more over that node's own NVML state and config file, with the ClusterPolicy's strategy:
    the stand-in's long-running plugin wrote them, the stand-in computed none."""
    plugin, kubelet, mock = device_plugin_tools
    core = cluster.core
    spec = client.CustomObjectsApi(core.api_client).get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")["spec"]
    node_files = cluster.kubeconfig.parent / "gpu-operator-standin" / "nodes"
    seen = {}
    for name in ("lab-node-0", "lab-node-1", "lab-node-2"):
        files, work = node_files / name, tmp_path / name
        work.mkdir()
        state = work / "nvml-state"
        state.write_text((files / "nvml-state").read_text())
        config = None
        if (files / "config.yaml").exists():
            config = work / "config.yaml"
            config.write_text((files / "config.yaml").read_text())
        entries = nvml_state.parse(state.read_text())
        env = standin.device_plugin_env(str(mock), str(work), str(state), nvml_state.device_count(entries), spec["mig"]["strategy"], name)
        run = subprocess.run(standin.device_plugin_command(str(plugin), str(kubelet), str(work), str(config) if config else None, once=True),
                             capture_output=True, text=True, timeout=60, env=env, check=False)
        assert run.returncode == 0, run.stderr[-3000:]
        listed = json.loads(run.stdout)["resources"]
        want = {resource: str(counts["healthy"]) for resource, counts in listed.items()}
        assert all(counts["devices"] == counts["healthy"] for counts in listed.values()), listed
        wait_until(lambda name=name, want=want: (gpus(core, name), capacity(core, name)) == (want, want), timeout=WAIT,
                   what=f"{name}'s allocatable and capacity to be the plugin's {want}")
        seen[name] = want
    assert seen["lab-node-1"] == {"nvidia.com/gpu": "8"} and seen["lab-node-2"] == {"nvidia.com/mig-1g.10gb": "7"}, seen


@pytest.mark.parametrize("product, family", [("NVIDIA-H100-80GB-HBM3", "hopper"), ("NVIDIA-B200", "blackwell")])
def test_h100_and_b200_nodes_are_labelled_by_gfd_as_the_role_predicts(cluster, gfd_tools, tmp_path, product, family):
    """A node with two H100 (B200) GPUs. Under the ClusterPolicy's mixed MIG strategy NVIDIA's device plugin refuses MPS,
    so the node_sharing role refuses config mps before it labels the node. With config shared the role passes: the node
    advertises what NVIDIA's device plugin registered (2 x 4 slices), and its labels are the ones the collection's model
    predicts and NVIDIA's GFD writes (run here again)."""
    core = cluster.core
    name = "it-" + family
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {"kwok.x-k8s.io/node": "fake", "gpushare.k8s/gpus": "2", "gpushare.k8s/gpu-product": product},
        "labels": {"kubernetes.io/hostname": name, "type": "kwok"}}})

    def node_sharing(config):
        return playbook("tests/integration/playbooks/role.yml", {
            "gpushare_kubeconfig": str(cluster.kubeconfig), "it_role": "gpushare.k8s.node_sharing", "node_sharing_mode": "operator",
            "node_sharing_nodes": [{"name": name, "gpus": 2, "product": product, "config": config}],
            "node_sharing_configs": LAB_VARS["gpushare_device_plugin_configs"], "node_sharing_configmap_namespace": NS,
            "node_sharing_operator": {"timeout": 30}})

    try:
        spec = client.CustomObjectsApi(core.api_client).get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")["spec"]
        assert spec["mig"]["strategy"] == "mixed"
        refused = node_sharing("mps")
        assert refused.returncode != 0
        assert "%s.config" % name in refused.stdout and "refuses MPS under the mixed MIG strategy" in refused.stdout, tail(refused)
        assert CONFIG_LABEL not in labels(core, name)  # nothing was written
        proc = node_sharing("shared")
        assert proc.returncode == 0, tail(proc)
        config = core.read_namespaced_config_map(spec["devicePlugin"]["config"]["name"], NS).data["shared"]
        gfd, mock = gfd_tools
        state, out, config_file = tmp_path / "nvml-state", tmp_path / "labels", tmp_path / "config.yaml"
        nvml_state.write(str(state), nvml_state.node_state(product, 2, node=name))
        config_file.write_text(config)
        env = dict(os.environ, LD_LIBRARY_PATH=str(mock), MIG_STRATEGY=spec["mig"]["strategy"], **{nvml_state.ENV: str(state)})
        run = subprocess.run([str(gfd), "--oneshot", "--no-timestamp", "--output-file", str(out), "--config-file", str(config_file)],
                             capture_output=True, text=True, timeout=60, env=env, check=False)
        assert run.returncode == 0, run.stderr[-3000:]
        want = gfd_file(out)
        assert gfd_labels_of(core, name) == want
        assert want["nvidia.com/gpu.product"] == product + "-SHARED" and want["nvidia.com/gpu.family"] == family, want
        assert want["nvidia.com/gpu.sharing-strategy"] == "time-slicing" and all(key in want for key in GFD_ONLY), want
        assert gpus(core, name) == {"nvidia.com/gpu": "8"}
    finally:
        core.delete_node(name)


def rollout_restart(cluster, *daemonsets):
    """What NVIDIA documents for an edited config: ``kubectl rollout restart`` of the operator's DaemonSets. kubectl
    stamps the restart to the second and refuses a second one within the same second: it is asked again a second later,
    as a user would."""
    argv = [kubectl_of(cluster.kubeconfig), "--kubeconfig", str(cluster.kubeconfig), "-n", NS, "rollout", "restart",
            *("daemonset/" + name for name in daemonsets)]
    for _attempt in range(3):
        proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)
        if proc.returncode == 0 or "within the past second" not in proc.stderr:
            break
        time.sleep(1)
    assert proc.returncode == 0, proc.stderr


def shared_state(core):
    return gpus(core, "lab-node-1"), labels(core, "lab-node-1").get("nvidia.com/gpu.replicas")


def test_relabel_is_advertised_and_a_configmap_edit_waits_for_a_restart(cluster):
    """A relabel reaches the node through NVIDIA's config-manager (it repoints the config file and signals the plugin).
    An edit of the config's content alone changes nothing, as on a real GPU Operator cluster (config-manager acts on
    label changes, the operator does not watch the ConfigMap); ``kubectl rollout restart`` of the device plugin's and
    GFD's DaemonSets applies it."""
    core = cluster.core
    for config, want in (("default", "2"), ("shared", "8")):
        relabel(core, "lab-node-1", config)
        # The device plugin advertises, gpu-feature-discovery labels: two writes, each awaited (under load the
        # label can follow the capacity by a second or more).
        product = A100_80 + "-SHARED" if config == "shared" else A100_80
        wait_until(lambda want=want, product=product: (gpus(core, "lab-node-1"), labels(core, "lab-node-1").get("nvidia.com/gpu.product"))
                   == ({"nvidia.com/gpu": want}, product), timeout=WAIT, what=f"lab-node-1 -> {want}, {product}")
    configmap = core.read_namespaced_config_map("device-plugin-configs", NS)
    shared = configmap.data["shared"]
    assert "replicas: 4" in shared
    files = cluster.kubeconfig.parent / "gpu-operator-standin" / "nodes" / "lab-node-1"
    log = files / "device-plugin.log"
    started = log.read_text().count("\n$ ")  # a line per start of the node's processes
    core.patch_namespaced_config_map("device-plugin-configs", NS, {"data": {"shared": shared.replace("replicas: 4", "replicas: 2")}})
    try:
        # The sign that the edit was processed: the node's mounted copy of the ConfigMap holds it (the stand-in syncs
        # it as the kubelet does, in the pass that would restart the plugin if anything did). Then nothing moved.
        mounted = files / "available-configs" / "shared"
        wait_until(lambda: "replicas: 2" in mounted.read_text(), timeout=WAIT, what="lab-node-1's mounted ConfigMap to hold the edit")
        assert log.read_text().count("\n$ ") == started, "the edit alone restarted lab-node-1's device plugin"
        assert shared_state(core) == ({"nvidia.com/gpu": "8"}, "4")
        rollout_restart(cluster, *DAEMONSETS)
        wait_until(lambda: shared_state(core) == ({"nvidia.com/gpu": "4"}, "2"), timeout=WAIT, what="lab-node-1 -> 4, label replicas 2 (replicas 2)")
        assert gpus(core, "lab-node-0") == {"nvidia.com/gpu": "2"}  # the default config did not change
    finally:
        core.patch_namespaced_config_map("device-plugin-configs", NS, {"data": {"shared": shared}})
        rollout_restart(cluster, *DAEMONSETS)
    wait_until(lambda: shared_state(core) == ({"nvidia.com/gpu": "8"}, "4"), timeout=WAIT, what="lab-node-1 back to 8, label replicas 4")


def test_the_config_role_restarts_the_operators_pods_when_a_config_changes(cluster, tmp_path):
    """device_plugin_config in operator mode (what a lab re-run with new replicas and gpu_sharing do): the changed
    config reaches the node already on it without a hand-made restart; the same content again restarts nothing;
    a config only added restarts nothing."""
    core = cluster.core
    apps = client.AppsV1Api(core.api_client)

    def templates():
        return {name: apps.read_namespaced_daemon_set(name, NS).spec.template.metadata.annotations
                for name in DAEMONSETS}

    def run(replicas, extra=None):
        configs = json.loads(json.dumps(LAB_VARS["gpushare_device_plugin_configs"]))
        configs["shared"]["sharing"]["timeSlicing"]["resources"][0]["replicas"] = replicas
        configs.update(extra or {})
        proc = playbook("tests/integration/playbooks/role.yml", {
            "gpushare_kubeconfig": str(cluster.kubeconfig), "it_role": "gpushare.k8s.device_plugin_config",
            "device_plugin_config_namespace": NS, "device_plugin_config_configmap": "device-plugin-configs",
            "device_plugin_config_configs": configs, "device_plugin_config_keys": [], "device_plugin_config_file": "",
            "device_plugin_config_restart_operands": True})
        assert proc.returncode == 0, tail(proc)
        return proc

    assert shared_state(core) == ({"nvidia.com/gpu": "8"}, "4")
    try:
        proc = run(2)
        assert "(shared changed)" in output(proc), tail(proc)
        wait_until(lambda: shared_state(core) == ({"nvidia.com/gpu": "4"}, "2"), timeout=WAIT, what="lab-node-1 -> 4, label replicas 2")
        restarted = templates()
        assert recap(run(2))["changed"] == 0  # the same content: nothing written, nothing restarted
        extra = {"it-extra": {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}}}
        proc = run(2, extra)
        assert recap(proc)["changed"] == 1 and templates() == restarted, tail(proc)  # the ConfigMap only: an added config restarts nothing
    finally:
        core.patch_namespaced_config_map("device-plugin-configs", NS, {"data": {"it-extra": None}})
        run(4)
    wait_until(lambda: shared_state(core) == ({"nvidia.com/gpu": "8"}, "4"), timeout=WAIT, what="lab-node-1 back to 8, label replicas 4")


def test_missing_key_no_label_and_unknown_layout_end_as_on_an_operator_cluster(cluster):
    """Written by hand (the roles refuse these before writing): a config label naming a key the ConfigMap lacks leaves
    the node's advertisement as it was (config-manager crash-loops, the plugin keeps its config); no label gives the
    ClusterPolicy's default config; a MIG layout the mig-parted ConfigMap lacks ends in mig.config.state=failed with
    the reason, the node's MIG devices as they were. Each is put back after."""
    core = cluster.core
    spec = client.CustomObjectsApi(core.api_client).get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")["spec"]
    default = spec["devicePlugin"]["config"]["default"]
    assert labels(core, "lab-node-1")[CONFIG_LABEL] == "shared" and gpus(core, "lab-node-1") == {"nvidia.com/gpu": "8"}
    log = cluster.kubeconfig.parent / "gpu-operator-standin" / "nodes" / "lab-node-1" / "device-plugin.log"
    refusal = "specified config no-such-key does not exist"  # NVIDIA's config-manager, in the node's log
    refused = log.read_text().count(refusal)
    try:
        relabel(core, "lab-node-1", "no-such-key")
        # the sign that the relabel was processed: config-manager saw the label and refused the missing key
        wait_until(lambda: log.read_text().count(refusal) > refused, timeout=WAIT, what="config-manager to refuse config no-such-key")
        assert gpus(core, "lab-node-1") == {"nvidia.com/gpu": "8"}
        assert labels(core, "lab-node-1").get("nvidia.com/gpu.replicas") == "4"
        # lab-node-0 (the same two GPUs) runs the default config by its label: without a label lab-node-1 must match it
        assert labels(core, "lab-node-0")[CONFIG_LABEL] == default
        want = gpus(core, "lab-node-0")
        core.patch_node("lab-node-1", {"metadata": {"labels": {CONFIG_LABEL: None}}})
        # config-manager exited on the missing key and is in its crash-loop back-off (10 s) until it reads the label again
        wait_until(lambda: gpus(core, "lab-node-1") == want, timeout=30, what=f"lab-node-1 without a label to advertise {want} ({default})")
    finally:
        relabel(core, "lab-node-1", "shared")
    wait_until(lambda: gpus(core, "lab-node-1") == {"nvidia.com/gpu": "8"}, timeout=WAIT, what="lab-node-1 back to shared")

    layout = labels(core, "lab-node-2")[MIG_CONFIG_LABEL]
    before = gpus(core, "lab-node-2")
    try:
        core.patch_node("lab-node-2", {"metadata": {"labels": {MIG_CONFIG_LABEL: "no-such-layout"}}})
        wait_until(lambda: labels(core, "lab-node-2").get(STATE_LABEL) == "failed", timeout=WAIT, what="lab-node-2 mig.config.state=failed")
        reason = json.loads(core.read_node("lab-node-2").metadata.annotations["gpushare.k8s/mig-failure"])["reason"]
        # NVIDIA's mig-parted said why: its own message
        assert "selected mig-config not present: no-such-layout" in reason, reason
        assert gpus(core, "lab-node-2") == before
    finally:
        core.patch_node("lab-node-2", {"metadata": {"labels": {MIG_CONFIG_LABEL: layout}}})
    wait_until(lambda: labels(core, "lab-node-2").get(STATE_LABEL) == "success" and gpus(core, "lab-node-2") == before, timeout=WAIT,
               what="lab-node-2 back to its layout")


def test_layout_the_gpus_cannot_hold_fails_with_the_reason(cluster):
    core = cluster.core
    name = "it-a100-40gb"
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name,
        "annotations": {"kwok.x-k8s.io/node": "fake", "gpushare.k8s/gpus": "2", "gpushare.k8s/gpu-product": "NVIDIA-A100-SXM4-40GB"},
        "labels": {"kubernetes.io/hostname": name, "type": "kwok"}}})
    try:
        # The inventory believes the node holds 80 GB A100s; its GPUs are 40 GB ones.
        node = {"name": name, "gpus": 2, "mig": {"product": A100_80, "profile": "1g.10gb", "gpus": 1}}
        started = time.monotonic()
        proc = playbook("tests/integration/playbooks/role.yml", {
            "gpushare_kubeconfig": str(cluster.kubeconfig), "it_role": "gpushare.k8s.mig_node", "mig_node_mode": "operator",
            "mig_node_nodes": [node], "mig_node_configs": LAB_VARS["gpushare_device_plugin_configs"],
            "mig_node_operator": {"timeout": 60}})
        elapsed = time.monotonic() - started
        text = output(proc)
        assert proc.returncode != 0, tail(proc)
        assert f"{name}: nvidia.com/mig.config.state=failed" in text, tail(proc)
        # NVIDIA's mig-parted tried every order of the instances over the mock's 40 GB A100s: its own message
        assert "Error creating GPU instance for '1g.10gb': ERROR_INSUFFICIENT_RESOURCES" in text, tail(proc)
        assert elapsed < 45, f"the role waited {elapsed:.0f}s instead of failing on the MIG manager's answer"
        assert labels(core, name)[STATE_LABEL] == "failed"
        assert not gpus(core, name).get("nvidia.com/mig-1g.10gb")
    finally:
        core.delete_node(name)


def test_an_h100_layout_beyond_its_memory_fails_as_on_hardware_and_keeps_the_earlier_devices(cluster):
    """Issue 40's layout, written by hand into the ClusterPolicy's mig-parted ConfigMap (the roles take one profile per
    node): 4 x 1g.20gb + 3g.40gb asks 12 of an H100's 8 memory slices (NVIDIA's MIG User Guide: 1g.20gb at
    {0,2,4,6}:2, 3g.40gb at {0,4}:4). An H100 node running 7 x 1g.10gb is labelled with it: NVIDIA's mig-parted over our
    mock fails (state failed, its own reason) and the node keeps advertising what it had."""
    core = cluster.core
    name, product = "it-h100", "NVIDIA-H100-80GB-HBM3"
    key = "config.yaml"
    configmap = "gpushare-mig-parted-config"
    original = core.read_namespaced_config_map(configmap, NS).data[key]
    layouts = yaml.safe_load(original)
    layouts["mig-configs"]["it-h100-7x1g.10gb"] = [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    layouts["mig-configs"]["it-h100-beyond-memory"] = [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.20gb": 4, "3g.40gb": 1}}]
    core.patch_namespaced_config_map(configmap, NS, {"data": {key: yaml.safe_dump(layouts, sort_keys=False)}})
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {"kwok.x-k8s.io/node": "fake", "gpushare.k8s/gpus": "1", "gpushare.k8s/gpu-product": product},
        "labels": {"kubernetes.io/hostname": name, "type": "kwok", MIG_CONFIG_LABEL: "it-h100-7x1g.10gb"}}})
    try:
        wait_until(lambda: labels(core, name).get(STATE_LABEL) == "success" and gpus(core, name).get("nvidia.com/mig-1g.10gb") == "7",
                   timeout=WAIT, what=f"{name}: 7 x 1g.10gb applied and advertised")
        before = gpus(core, name)
        core.patch_node(name, {"metadata": {"labels": {MIG_CONFIG_LABEL: "it-h100-beyond-memory"}}})
        wait_until(lambda: labels(core, name).get(STATE_LABEL) == "failed", timeout=WAIT, what=f"{name} mig.config.state=failed")
        reason = json.loads(core.read_node(name).metadata.annotations["gpushare.k8s/mig-failure"])["reason"]
        # NVIDIA's mig-parted's own words: it tried its orders of the five instances, the mock refused the last of each
        # (no documented placement holds it): "Error creating GPU instance for '3g.40gb': ERROR_INSUFFICIENT_RESOURCES
        # ... error attempting multiple config orderings: all orderings failed"
        assert "Error creating GPU instance for" in reason and "ERROR_INSUFFICIENT_RESOURCES" in reason, reason
        assert "all orderings failed" in reason, reason
        assert gpus(core, name) == before, (before, gpus(core, name))
    finally:
        core.delete_node(name)
        core.patch_namespaced_config_map(configmap, NS, {"data": {key: original}})


def test_standin_stopped_step2_fails_clearly_test_as_operator_passes_restart_completes(cluster, root, tmp_path):
    core = cluster.core
    cluster.kill("gpu-operator-standin")
    try:
        # Nobody answers: lab-node-0 and lab-node-1 swap configs; step 2 must fail within the timeout, naming what did not happen.
        nodes = json.loads(json.dumps(LAB_VARS["gpushare_nodes"]))
        nodes[0]["config"], nodes[1]["config"] = "shared", "default"
        started = time.monotonic()
        proc = playbook("playbooks/lab.yml", cluster.lab_vars(root, gpushare_nodes=nodes, gpushare_operator_timeout=5, **OPERATOR))
        elapsed = time.monotonic() - started
        text = output(proc)
        assert proc.returncode != 0, tail(proc)
        assert "lab-node-1: after 5s the operator does not advertise what the config model predicts" in text, tail(proc)
        assert "capacity[nvidia.com/gpu] expected 2, seen 8" in text and "no operator answered" in text, tail(proc)
        assert "lab-node-0: after 5s" in text and "capacity[nvidia.com/gpu] expected 8, seen 2" in text, tail(proc)
        assert elapsed < 120, elapsed
        # The test answers as the operator would, by the contract (values written here, not computed by the collection).
        answer_as_operator(cluster, tmp_path)
    finally:
        cluster.kwokctl("start", "cluster")
        wait_until(lambda: cluster.components().get("gpu-operator-standin") in ("Running", "Ready"), timeout=60, what="the stand-in")
    proc = playbook("playbooks/lab.yml", cluster.lab_vars(root, **OPERATOR))
    assert proc.returncode == 0, tail(proc)
    assert gpus(core, "lab-node-1") == {"nvidia.com/gpu": "8"}


def answer_as_operator(cluster, tmp_path):
    """Operator mode with no stand-in: the role waits; the test plays the device plugin and GFD for one node."""
    core = cluster.core
    name = "it-answered"
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": {"kubernetes.io/hostname": name, "type": "kwok"}}})
    try:
        role_vars = {"gpushare_kubeconfig": str(cluster.kubeconfig), "it_role": "gpushare.k8s.node_sharing", "node_sharing_mode": "operator",
                     "node_sharing_nodes": [{"name": name, "gpus": 1, "config": "shared"}],
                     "node_sharing_configs": LAB_VARS["gpushare_device_plugin_configs"],
                     "node_sharing_configmap_namespace": NS, "node_sharing_operator": {"timeout": 60}}
        run = Background("tests/integration/playbooks/role.yml", role_vars, tmp_path / "answered.log")
        wait_until(lambda: labels(core, name).get(CONFIG_LABEL) == "shared", timeout=60, what="the role to label the node")
        time.sleep(1)  # the role is now waiting
        core.patch_node_status(name, {"status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"}}})
        core.patch_node(name, {"metadata": {"labels": {
            "nvidia.com/gpu.count": "1", "nvidia.com/gpu.product": A100_80 + "-SHARED", "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.memory": "81920", "nvidia.com/mig.capable": "true",
            "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.compute.major": "8",
            "nvidia.com/gpu.compute.minor": "0", "nvidia.com/mps.capable": "false"}}})
        done = run.wait(timeout=120)
        assert done.returncode == 0, done.stdout[-3000:]

        # Nobody answers for this node now: a config change fails with the clear message.
        role_vars["node_sharing_nodes"] = [{"name": name, "gpus": 1, "config": "default"}]
        role_vars["node_sharing_operator"] = {"timeout": 3}
        proc = playbook("tests/integration/playbooks/role.yml", role_vars)
        text = output(proc)
        assert proc.returncode != 0, tail(proc)
        assert f"{name}: after 3s the operator does not advertise" in text and "expected 1, seen 4" in text and "no operator answered" in text, tail(proc)
    finally:
        core.delete_node(name)


@pytest.mark.parametrize("role", ["node_sharing", "mig_node"])
def test_a_wait_longer_than_the_play_cap_is_not_cut_and_reports_progress(cluster, role):
    """A play capping each task at 4 s, a wait of 10 s on a node no operator answers for (the stand-in acts only on nodes
    with simulated GPUs): the wait task's own timeout is above its wait, so the wait's message wins (the same holds for the
    lab's 180 s cap and a real cluster's 1200 s MIG wait), and a progress line names the node every 2 s."""
    core = cluster.core
    name = f"it-pending-{role.replace('_', '-')}"
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": {"kubernetes.io/hostname": name, "type": "kwok"}}})
    try:
        step = "device_plugin_timeout" if role == "node_sharing" else "mig_timeout"
        role_vars = {"gpushare_kubeconfig": str(cluster.kubeconfig), "it_play_timeout": 4, "it_role": f"gpushare.k8s.{role}",
                     f"{role}_mode": "operator", f"{role}_configs": LAB_VARS["gpushare_device_plugin_configs"],
                     f"{role}_operator": {step: 10, "progress_interval": 2}}
        if role == "node_sharing":
            role_vars.update(node_sharing_nodes=[{"name": name, "gpus": 1, "config": "shared"}], node_sharing_check_config_labels=False)
        else:
            role_vars.update(mig_node_nodes=[{"name": name, "gpus": 2, "mig": {"product": A100_80, "profile": "1g.10gb", "gpus": 1}}])
        started = time.monotonic()
        proc = playbook("tests/integration/playbooks/operator_wait_capped.yml", role_vars)
        elapsed = time.monotonic() - started
        text = output(proc)
        assert proc.returncode != 0, tail(proc)
        assert f"{name}: after 10s the operator does not advertise what the config model predicts" in text, tail(proc)
        assert "timed out" not in text.lower() and "timedout" not in text, tail(proc)
        assert elapsed >= 10, elapsed
        # the lines printed while waiting (the result's own list of them comes with the failure, after)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("[localhost] waiting for the GPU operator: ")]
        assert len(lines) >= 3, tail(proc)
        assert all(f"s of 10s, 1 of 1 node(s) pending: {name}" in line for line in lines), lines
        if role == "mig_node":
            # no MIG manager answers: the state label is unset, and the line says so
            assert f"{name} mig.config.state=- (" in lines[0] and "capacity[nvidia.com/mig-1g.10gb] expected 7, seen absent" in lines[0], lines
        else:
            assert "capacity[nvidia.com/gpu] expected 4, seen absent" in lines[0], lines
    finally:
        core.delete_node(name)


def test_restarts_leave_no_stale_advertisement(cluster):
    core = cluster.core
    # API server restarted right after a change: the stand-in reconnects and advertises the latest state.
    relabel(core, "lab-node-1", "default")
    cluster.kill("kube-apiserver")
    cluster.recover()
    # The stand-in writes status first and labels second: wait for both.
    two = {"nvidia.com/gpu": "2"}
    wait_until(lambda: advertised(core, "lab-node-1") == (two, two, A100_80), timeout=30,
               what="lab-node-1 -> 2 and its product label after the API server restart")
    # The stand-in restarted after a change it missed while down.
    cluster.kill("gpu-operator-standin")  # returns once the process is gone
    relabel(core, "lab-node-1", "shared")
    # the sign that nobody can have answered: kwokctl sees the stand-in stopped after the relabel was stored
    assert cluster.components().get("gpu-operator-standin") not in ("Running", "Ready"), cluster.components()
    assert gpus(core, "lab-node-1") == {"nvidia.com/gpu": "2"}
    cluster.kwokctl("start", "cluster")
    # (allocatable, product label): the capacity is not part of this check
    wait_until(lambda: advertised(core, "lab-node-1")[::2] == ({"nvidia.com/gpu": "8"}, A100_80 + "-SHARED"), timeout=30,
               what="lab-node-1 -> 8 and its -SHARED product label after the stand-in's restart")
    assert gpus(core, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "7"} and labels(core, "lab-node-2")[STATE_LABEL] == "success"


def test_the_operator_lab_runs_end_to_end_with_h100_and_b200_nodes(tmp_path):
    """The whole lab in operator mode on a cluster of its own whose nodes hold H100s (lab-node-0, and lab-node-2 as a MIG node)
    and B200s (lab-node-1): every step passes, so GFD's labels are what the collection predicts for these products, and each
    node's labels are its GFD output file's (hopper and blackwell, the B200's -SHARED product and 183359 MiB)."""
    nodes = [{"name": "lab-node-0", "gpus": 2, "config": "default", "product": "NVIDIA-H100-80GB-HBM3"},
             {"name": "lab-node-1", "gpus": 2, "config": "shared", "product": "NVIDIA-B200"},
             {"name": "lab-node-2", "gpus": 2, "mig": {"product": "NVIDIA-H100-80GB-HBM3", "profile": "1g.10gb", "gpus": 1}}]
    own = OwnCluster(CLUSTER + "-hb")
    try:
        core = own.up(gpushare_gpu_operator_standin=True, gpushare_nodes=nodes).core
        root = tmp_path / "gpushare"
        proc = playbook("playbooks/lab.yml", own.lab_vars(root, gpushare_nodes=nodes, **OPERATOR))
        assert proc.returncode == 0, tail(proc)
        assert (root / "out" / "placement.txt").read_text() == "prod-inference=lab-node-2\nnotebook=lab-node-1\nbatch-train=lab-node-0\n"
        files = own.kubeconfig.parent / "gpu-operator-standin" / "nodes"
        for node, allocatable, product, family in (
                ("lab-node-0", {"nvidia.com/gpu": "2"}, "NVIDIA-H100-80GB-HBM3", "hopper"),
                ("lab-node-1", {"nvidia.com/gpu": "8"}, "NVIDIA-B200-SHARED", "blackwell"),
                ("lab-node-2", {"nvidia.com/mig-1g.10gb": "7"}, "NVIDIA-H100-80GB-HBM3", "hopper")):
            got = gfd_labels_of(core, node)
            assert gpus(core, node) == allocatable and got == gfd_file(files / node / "gfd-labels"), node
            assert (got["nvidia.com/gpu.product"], got["nvidia.com/gpu.family"]) == (product, family) and all(key in got for key in GFD_ONLY), got
        assert gfd_labels_of(core, "lab-node-1")["nvidia.com/gpu.memory"] == "183359"
        assert gfd_labels_of(core, "lab-node-2")["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    finally:
        own.down()
