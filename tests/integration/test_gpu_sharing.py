# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The configure-only entry point, playbooks/gpu_sharing.yml, as a user runs it: the README's inventory, copied verbatim into
a file of the user's given with -i, against an operator-mode lab cluster of this module's own (the GPU Operator stand-in).

In order, on one cluster:
1. --check writes nothing;
2. pools chosen by label: the nodes advertise what their pools ask (4 slots per GPU; every GPU split into 1g.10gb), the
   unlabelled GPU node is named in a warning, and no Pod, namespace, quota or admission policy is created;
3. a re-run changes nothing;
4. a node labelled into a pool after the first run is configured by the next run, which changes nothing else;
5. two pools matching one node stop the run before any write; so does a MIG layout of several profiles per GPU that one
   GPU cannot hold, and one it holds is applied and advertised per profile;
6. gpushare_sharing_state: absent puts back what the first run found: kubectl shows the ClusterPolicy, the node labels and
   allocatable and the operator namespace's ConfigMaps byte for byte as before it.
"""
from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml
from kubernetes import client

from conftest import REPO, ansible_playbook
from reliability import KWOK_HOME, OwnCluster, output, recap, tail, wait_until

pytestmark = pytest.mark.slow

CLUSTER = "gpushare-it-sharing"
POOL_LABEL = "example.com/gpu-pool"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_LABEL = "nvidia.com/mig.config"
# The page of the checkout's guide on real clusters (the README links it): its example is what this module runs.
GUIDE = REPO / "docs" / "guide" / "real-clusters.md"


def readme_inventory() -> str:
    """The guide's configure-only inventory, verbatim: the yaml block of docs/guide/real-clusters.md naming gpu-cluster.yml."""
    section = GUIDE.read_text()
    blocks = re.findall(r"```yaml\n(# gpu-cluster\.yml: .*?)```\n", section, re.S)
    assert len(blocks) == 1, "docs/guide/real-clusters.md holds one yaml block starting '# gpu-cluster.yml: '"
    return blocks[0]


def readme_command() -> str:
    commands = re.findall(r"^ansible-playbook -i gpu-cluster\.yml playbooks/gpu_sharing\.yml", GUIDE.read_text(), re.M)
    assert commands, "the guide shows the checkout's command"
    return commands[0]


@pytest.fixture(scope="module")
def cluster():
    """The module's cluster with the README's pools labelled (the user's own labels), and what kubectl showed of it then: the
    state the undo at the end must give back byte for byte."""
    own = OwnCluster(CLUSTER)
    try:
        own.up(gpushare_gpu_operator_standin=True)
        label(own.core, "lab-node-1", "inference")
        label(own.core, "lab-node-2", "training")
        # the stand-in's processes (config-manager, then the plugin and GFD) label and advertise each node a moment after
        # the cluster is up: "before" is the nodes as they show once NVIDIA's code has spoken on each
        wait_until(lambda: operator_spoke(own.core), timeout=120, what="every GPU node to show GFD's labels and its GPUs")
        own.pristine = kubectl_views(own)
        yield own
    finally:
        own.down()


def operator_spoke(core) -> bool:
    gpu_nodes = [n for n in core.list_node().items if n.metadata.name.startswith("lab-node-")]
    return bool(gpu_nodes) and all("nvidia.com/gpu.product" in (n.metadata.labels or {}) and nvidia(n.status.allocatable)
                                   for n in gpu_nodes)


def kubectl_views(cluster):
    """What `kubectl get` shows of what the configure-only run may change: the ClusterPolicy, every node's labels and
    allocatable, the operator namespace's ConfigMaps (bytes of kubectl's own output)."""
    kwok = yaml.safe_load_all((KWOK_HOME / "clusters" / cluster.name / "kwok.yaml").read_text())
    binary = next(doc["options"]["kubectlBinary"] for doc in kwok if (doc or {}).get("options", {}).get("kubectlBinary"))
    views = []
    for args in (["get", "clusterpolicy", "cluster-policy", "-o", "yaml"],
                 ["get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.metadata.labels} {.status.allocatable}{\"\\n\"}{end}"],
                 ["get", "configmaps", "-n", "gpu-operator", "-o", "name"]):
        proc = subprocess.run([binary, "--kubeconfig", str(cluster.kubeconfig), *args], capture_output=True, check=True, timeout=60)
        views.append(proc.stdout)
    # the object's own bookkeeping moves with every write, whatever was written: not the configuration
    views[0] = re.sub(rb"\n  (generation|resourceVersion): .*", b"", views[0])
    return views


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "gpu-cluster.yml"
    path.write_text(readme_inventory())
    return path


def run(cluster, inventory, *args):
    """The README's command with the user's inventory; the cluster is the one KUBECONFIG names, as the example says."""
    assert readme_command().split()[1:3] == ["-i", "gpu-cluster.yml"]
    return ansible_playbook(REPO / "playbooks" / "gpu_sharing.yml", "-i", str(inventory), *args,
                            env={"KUBECONFIG": str(cluster.kubeconfig)}, timeout=600)


def nvidia(resources):
    return {k: v for k, v in (resources or {}).items() if k.startswith("nvidia.com/")}


def allocatable(core, name):
    return nvidia(core.read_node(name).status.allocatable)


def label(core, name, value):
    core.patch_node(name, {"metadata": {"labels": {POOL_LABEL: value}}})


def snapshot(core):
    """Names of what the configure-only run must never create: Pods, namespaces, quotas, admission policies and bindings."""
    admission = client.AdmissionregistrationV1Api(core.api_client)
    return {
        "pods": sorted("%s/%s" % (p.metadata.namespace, p.metadata.name) for p in core.list_pod_for_all_namespaces().items),
        "namespaces": sorted(n.metadata.name for n in core.list_namespace().items),
        "quotas": sorted("%s/%s" % (q.metadata.namespace, q.metadata.name) for q in core.list_resource_quota_for_all_namespaces().items),
        "policies": sorted(p.metadata.name for p in admission.list_validating_admission_policy().items),
        "bindings": sorted(b.metadata.name for b in admission.list_validating_admission_policy_binding().items),
    }


def configuration(core):
    """Everything the configure-only run writes: the operator namespace's ConfigMaps, the ClusterPolicy, the nodes' labels."""
    custom = client.CustomObjectsApi(core.api_client)
    policy = custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
    return {"policy": policy.get("spec"),
            "configmaps": {c.metadata.name: c.data for c in core.list_namespaced_config_map("gpu-operator").items},
            "labels": {n.metadata.name: n.metadata.labels for n in core.list_node().items}}


def test_the_readme_example_configures_pools_chosen_by_label(cluster, inventory):
    core = cluster.core
    user = yaml.safe_load(inventory.read_text())["all"]["vars"]
    assert [p["name"] for p in user["gpushare_node_pools"]] == ["inference", "training"]
    label(core, "lab-node-1", "inference")
    label(core, "lab-node-2", "training")
    before, config_before = snapshot(core), configuration(core)

    checked = run(cluster, inventory, "--check", "--diff")
    assert checked.returncode == 0, tail(checked)
    assert configuration(core) == config_before, "--check wrote to the cluster"

    first = run(cluster, inventory)
    assert first.returncode == 0, tail(first)
    text = output(first)
    # reported before any write: the GPU node no pool covers; the DRA nodes (no GPUs) are not named
    assert "WARNING: gpushare_node_pools: GPU node lab-node-0 is in no pool" in text, tail(first)
    assert "dra-node" not in " ".join(re.findall(r"WARNING: [^']*", text))
    # 2 GPUs x 4 replicas of the README's shared config; 2 GPUs x 7 instances of 1g.10gb, nvidia.com/gpu gone (mixed)
    assert allocatable(core, "lab-node-1") == {"nvidia.com/gpu": "8"}
    assert allocatable(core, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "14"}
    assert allocatable(core, "lab-node-0") == {"nvidia.com/gpu": "2"}
    labels = {n: core.read_node(n).metadata.labels for n in ("lab-node-0", "lab-node-1", "lab-node-2")}
    assert labels["lab-node-1"][CONFIG_LABEL] == "shared" and MIG_LABEL not in labels["lab-node-1"]
    assert labels["lab-node-2"][MIG_LABEL] == "all-1g.10gb" and labels["lab-node-2"]["nvidia.com/mig.config.state"] == "success"
    assert CONFIG_LABEL not in labels["lab-node-0"] and MIG_LABEL not in labels["lab-node-0"]
    # only the user's configs: nothing of the collection's inventory/ (whose lab adds mps)
    configmaps = {c.metadata.name: c.data for c in core.list_namespaced_config_map("gpu-operator").items}
    assert sorted(configmaps["device-plugin-configs"]) == ["default", "shared"]
    assert snapshot(core) == before, "the configure-only run created a Pod, namespace, quota or admission policy"

    again = run(cluster, inventory)
    assert again.returncode == 0, tail(again)
    assert recap(again)["changed"] == 0, tail(again)
    assert snapshot(core) == before

    # a node that joins a pool after the first run is configured by the next run
    label(core, "lab-node-0", "inference")
    joined = run(cluster, inventory)
    assert joined.returncode == 0, tail(joined)
    assert allocatable(core, "lab-node-0") == {"nvidia.com/gpu": "8"}
    assert core.read_node("lab-node-0").metadata.labels[CONFIG_LABEL] == "shared"
    assert "GPU node lab-node-0 is in no pool" not in output(joined)
    assert recap(joined)["changed"] >= 1
    assert allocatable(core, "lab-node-1") == {"nvidia.com/gpu": "8"}
    assert allocatable(core, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "14"}
    assert snapshot(core) == before

    settled = run(cluster, inventory)
    assert settled.returncode == 0 and recap(settled)["changed"] == 0, tail(settled)


def test_the_roles_own_variable_names_work_from_an_inventory(cluster, inventory, tmp_path):
    """The inventory in the role's documented names (ansible-doc -t role gpushare.k8s.gpu_sharing): honoured, not shadowed
    by the playbook's gpushare_* names. The pools are the README's, renamed; a --check run resolves them (writes nothing)."""
    user = yaml.safe_load(inventory.read_text())
    own = user["all"]["vars"]
    renamed = {"gpushare_node_pools": "gpu_sharing_node_pools", "gpushare_device_plugin_configs": "gpu_sharing_configs",
               "gpushare_operator_namespace": "gpu_sharing_namespace", "gpushare_operator_cluster_policy": "gpu_sharing_cluster_policy",
               "gpushare_operator_mig_strategy": "gpu_sharing_mig_strategy", "gpushare_operator_default_config": "gpu_sharing_default_config"}
    for old, new in renamed.items():
        own[new] = own.pop(old)
    own["gpu_sharing_device_plugin_keys"] = ["shared", "default"]
    path = tmp_path / "gpu-cluster.yml"
    path.write_text(yaml.safe_dump(user))
    before = configuration(cluster.core)
    proc = run(cluster, path, "--check")
    assert proc.returncode == 0, tail(proc)
    text = output(proc)
    assert re.search(r"inference.*lab-node-1", text) and re.search(r"training.*lab-node-2", text), tail(proc)
    assert "0 pools" not in text and "gpushare_node_pools" not in text  # the messages name the inventory's own variable
    assert configuration(cluster.core) == before


def test_two_pools_on_one_node_stop_the_run_before_any_write(cluster, inventory, tmp_path):
    core = cluster.core
    user = yaml.safe_load(inventory.read_text())
    user["all"]["vars"]["gpushare_node_pools"].append(
        {"name": "everything", "selector": {"matchExpressions": [{"key": POOL_LABEL, "operator": "Exists"}]}, "config": "default"})
    user["all"]["vars"]["gpushare_node_pools"].append(
        {"name": "nowhere", "selector": {"matchLabels": {POOL_LABEL: "nowhere"}}, "config": "default"})
    bad = tmp_path / "gpu-cluster.yml"
    bad.write_text(yaml.safe_dump(user))
    label(core, "lab-node-0", "inference")
    before = configuration(core)
    proc = run(cluster, bad)
    assert proc.returncode != 0
    text = output(proc)
    assert "node lab-node-1 is matched by pools inference and everything" in text, tail(proc)
    assert "WARNING: gpushare_node_pools: pool nowhere matches no node" in text
    assert "Nothing was written." in text
    assert configuration(core) == before
    assert "Traceback" not in text


def test_a_bad_selector_is_refused_naming_the_field(cluster, inventory, tmp_path):
    user = yaml.safe_load(inventory.read_text())
    user["all"]["vars"]["gpushare_node_pools"][1]["selector"]["matchExpressions"][0]["operator"] = "in"
    bad = tmp_path / "gpu-cluster.yml"
    bad.write_text(json.dumps(user))
    before = configuration(cluster.core)
    proc = run(cluster, bad)
    assert proc.returncode != 0
    text = output(proc)
    assert "matchExpressions" in text and "operator" in text and "in" in text, tail(proc)
    assert configuration(cluster.core) == before


def owned(core):
    """What the configure-only run writes, without what NVIDIA's code on the nodes writes: the operator namespace's
    ConfigMaps, the ClusterPolicy, and the two labels the collection sets on each node."""
    seen = configuration(core)
    seen["labels"] = {name: {key: (labels or {}).get(key) for key in (CONFIG_LABEL, MIG_LABEL)} for name, labels in seen["labels"].items()}
    return seen


def test_a_mig_pool_of_several_profiles_per_gpu(cluster, inventory, tmp_path):
    """A pool's ``mig.devices`` (several profiles on each GPU, mig-parted's ``mig-devices``). Issue 40's layout, 4 x
    1g.20gb + 3g.40gb, on an H100 node joining the training pool: one GPU cannot hold it (NVIDIA's MIG User Guide: 1g.20gb
    takes 2 of the 8 memory slices, 3g.40gb 4), so the run stops before any write, naming the node, the slices and the
    memory it needs. 2 x 1g.20gb + 3g.40gb on the A100 80GB node: NVIDIA's mig-parted over the mock applies it, the plugin
    advertises each profile under its own name. The README's inventory then puts the pool's layout back."""
    core = cluster.core
    user = yaml.safe_load(inventory.read_text())
    training = next(pool for pool in user["all"]["vars"]["gpushare_node_pools"] if "mig" in pool)
    path = tmp_path / "gpu-cluster.yml"
    h100 = "it-h100"
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": h100, "labels": {"kubernetes.io/hostname": h100, "type": "kwok", POOL_LABEL: "training"},
        "annotations": {"kwok.x-k8s.io/node": "fake", "gpushare.k8s/gpus": "1", "gpushare.k8s/gpu-product": "NVIDIA-H100-80GB-HBM3"}}})
    try:
        training["mig"] = {"devices": {"1g.20gb": 4, "3g.40gb": 1}}
        path.write_text(yaml.safe_dump(user))
        before = owned(core)
        proc = run(cluster, path)
        text = output(proc)
        assert proc.returncode != 0, tail(proc)
        assert ("it-h100.mig.devices: 4 x 1g.20gb + 1 x 3g.40gb do not fit one H100-80GB-HBM3: they need 12 of its 8 memory slices "
                "(4 x 1g.20gb at 2 each + 3g.40gb at 4): 122880 MiB of memory, the GPU has 81920 MiB") in text, tail(proc)
        assert "Traceback" not in text
        assert owned(core) == before
    finally:
        core.delete_node(h100)
    training["mig"] = {"devices": {"3g.40gb": 1, "1g.20gb": 2}}
    path.write_text(yaml.safe_dump(user))
    proc = run(cluster, path)
    assert proc.returncode == 0, tail(proc)
    node = core.read_node("lab-node-2")
    assert node.metadata.labels[MIG_LABEL] == "1g.20gb-x2-3g.40gb-x1-on-2-of-2"
    assert node.metadata.labels["nvidia.com/mig.config.state"] == "success"
    assert allocatable(core, "lab-node-2") == {"nvidia.com/mig-1g.20gb": "4", "nvidia.com/mig-3g.40gb": "2"}
    back = run(cluster, inventory)
    assert back.returncode == 0, tail(back)
    assert allocatable(core, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "14"}


def test_the_lab_runs_with_an_inventory_of_the_users_own(cluster, inventory, tmp_path):
    """playbooks/lab.yml with the user's inventory and their nodes by name: the lab parameters it leaves out take the lab's
    defaults (it stopped at once with 'gpushare_lab_root' is undefined), its own values are kept. --check: nothing written."""
    user = yaml.safe_load(inventory.read_text())
    own = user["all"]["vars"]
    own.update({"gpushare_mode": "operator", "gpushare_device_plugin_namespace": own["gpushare_operator_namespace"],
                "gpushare_nodes": [{"name": "lab-node-0", "gpus": 2, "config": "default"}, {"name": "lab-node-1", "gpus": 2, "config": "shared"},
                                   {"name": "lab-node-2", "gpus": 2, "mig": {"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 1}}]})
    del own["gpushare_node_pools"]
    path = tmp_path / "lab-cluster.yml"
    path.write_text(yaml.safe_dump(user))
    before = configuration(cluster.core), snapshot(cluster.core)
    proc = ansible_playbook(REPO / "playbooks" / "lab.yml", "-i", str(path), "--check", "-e",
                            json.dumps({"gpushare_kubeconfig": str(cluster.kubeconfig), "gpushare_lab_root": str(tmp_path / "lab")}),
                            timeout=600)
    assert proc.returncode == 0, tail(proc)
    text = output(proc)
    assert "is undefined" not in text
    # the inventory's own values over the lab's: operator mode (the lab's default, advertise, is refused on this cluster)
    assert "Put the inventory's own parameters back over the lab's defaults" in text and "item=gpushare_mode" in text
    assert (configuration(cluster.core), snapshot(cluster.core)) == before
    assert not (tmp_path / "lab").exists()


def test_undo_gives_back_what_kubectl_showed_before_the_first_run(cluster, inventory):
    core = cluster.core
    assert kubectl_views(cluster) != cluster.pristine, "the tests above configured the cluster"
    # the pool label the tests above put on lab-node-0 is the user's own: the user takes it back; the undo never touches it
    core.patch_node("lab-node-0", {"metadata": {"labels": {POOL_LABEL: None}}})
    configured = kubectl_views(cluster)

    checked = run(cluster, inventory, "-e", "gpushare_sharing_state=absent", "--check")
    assert checked.returncode == 0, tail(checked)
    assert kubectl_views(cluster) == configured, "--check of the undo wrote to the cluster"

    undone = run(cluster, inventory, "-e", "gpushare_sharing_state=absent")
    assert undone.returncode == 0, tail(undone)
    after = kubectl_views(cluster)
    for name, want, got in zip(("ClusterPolicy", "nodes", "ConfigMaps"), cluster.pristine, after):
        assert got == want, "%s after the undo:\n%s\nbefore the first run:\n%s" % (name, got.decode(), want.decode())

    again = run(cluster, inventory, "-e", "gpushare_sharing_state=absent")
    assert again.returncode == 0 and recap(again)["changed"] == 0, tail(again)
    assert "this cluster holds no record of a configuring run" in output(again)
    assert kubectl_views(cluster) == cluster.pristine


SEAL = "gpushare.k8s/sharing-record"
RECORD_NAME = "gpushare-sharing-record"
EMPTY_OWNED = {CONFIG_LABEL: None, MIG_LABEL: None, "nvidia.com/mig.config.state": None}


def planted_record(policy=None, configmaps=None, nodes=None):
    return json.dumps({"version": 1, "policy": policy, "configmaps": configmaps or {}, "nodes": nodes or {}}, sort_keys=True, indent=1)


def gpu_node(owned=None):
    return {"gpus": 2, "product": None, "resources": {}, "labels": {}, "baseline": True, "owned": dict(EMPTY_OWNED, **(owned or {}))}


# The record an attacker with create on ConfigMaps of the operator's namespace plants before the first run (the issue's
# reproduction), and three records naming what the collection never writes, each sealed as if the seal had been forged.
PLANTED = {
    "unsealed": (planted_record({"via": "patch", "fields": [[["driver", "repository"], "evil.example.com/nvidia"],
                                                            [["devicePlugin", "env"], [{"name": "X", "value": "y"}]]]},
                                {"unrelated-config": {"created": True}},
                                {"lab-node-0": gpu_node({"node-role.kubernetes.io/control-plane": "", "topology.kubernetes.io/zone": "x"})}),
                 False, "record.json: carries no seal"),
    "foreign-configmap": (planted_record(configmaps={"unrelated-config": {"created": True}}), True,
                          "record.json configmaps: names ConfigMap \"unrelated-config\", which the collection does not write"),
    "foreign-node": (planted_record(nodes={"dra-node-0": gpu_node()}), True, "record nodes.dra-node-0: names a node with no GPU"),
    "foreign-release": (planted_record({"via": "helm", "release": {"name": "other", "namespace": "kube-system"},
                                       "fields": [[["mig", "strategy"], "single"]]}), True,
                        "record.json policy.release: names Helm release \"kube-system\"/\"other\", but the ClusterPolicy belongs to no Helm release"),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_record_the_collection_did_not_write_is_refused_before_any_write(cluster, inventory, case):
    """After the undo (no record on the cluster): a planted record stops both the undo and a configuring run, naming the
    field, and kubectl shows nothing changed. The seal of the sealed variants is computed here (hashlib), not by the role."""
    import hashlib

    text, seal, message = PLANTED[case]
    core = cluster.core
    custom = client.CustomObjectsApi(core.api_client)
    core.create_namespaced_config_map("gpu-operator", {"metadata": {"name": RECORD_NAME}, "data": {"record.json": text}})
    try:
        if seal:
            value = json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(), "previous": ""})
            custom.patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy",
                                               {"metadata": {"annotations": {SEAL: value}}})
        planted_views = kubectl_views(cluster)
        for args in (("-e", "gpushare_sharing_state=absent"), ()):
            proc = run(cluster, inventory, *args)
            assert proc.returncode != 0, tail(proc)
            assert message in output(proc), tail(proc)
            assert "Traceback" not in output(proc)
            assert kubectl_views(cluster) == planted_views, "a refused record let the run write"
    finally:
        core.delete_namespaced_config_map(RECORD_NAME, "gpu-operator")
        custom.patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy", {"metadata": {"annotations": {SEAL: None}}})
    assert kubectl_views(cluster) == cluster.pristine


def test_the_undo_needs_nothing_of_the_inventory_but_the_cluster(cluster, inventory, tmp_path):
    """Configured by the README's inventory, undone with one whose configs lack the default name (the undo relabelled the
    MIG node, then failed on the inventory: half undone): the undo reads what it needs from the record and the cluster."""
    configured = run(cluster, inventory)
    assert configured.returncode == 0, tail(configured)
    user = yaml.safe_load(inventory.read_text())
    configs = user["all"]["vars"]["gpushare_device_plugin_configs"]
    user["all"]["vars"]["gpushare_device_plugin_configs"] = {"shared": configs["shared"]}
    other = tmp_path / "gpu-cluster.yml"
    other.write_text(yaml.safe_dump(user))
    undone = run(cluster, other, "-e", "gpushare_sharing_state=absent")
    assert undone.returncode == 0, tail(undone)
    assert kubectl_views(cluster) == cluster.pristine


# The GPUs teams buy now, one node each (one GPU), with a MIG pool per product under the profile names NVIDIA documents.
CURRENT_GPUS = {
    "it-h100-nvl": ("NVIDIA-H100-NVL", "nvl", {"profile": "1g.12gb"}, {"nvidia.com/mig-1g.12gb": "7"}),
    "it-h200": ("NVIDIA-H200", "h200", {"profile": "1g.18gb"}, {"nvidia.com/mig-1g.18gb": "7"}),
    "it-gh200": ("NVIDIA-GH200-480GB", "gh200", {"devices": {"3g.48gb": 1, "1g.24gb": 2}},
                 {"nvidia.com/mig-3g.48gb": "1", "nvidia.com/mig-1g.24gb": "2"}),
    "it-b200": ("NVIDIA-B200", "b200", {"layout": "all-1g.23gb"}, {"nvidia.com/mig-1g.23gb": "7"}),
}


def test_h100_nvl_h200_gh200_and_b200_nodes_run_end_to_end_with_their_real_profile_names(cluster, tmp_path):
    """Issue 40: an inventory of the user's own with a MIG pool per product (H100 NVL, H200, GH200 480GB, B200), one node
    of each joining the operator lab. NVIDIA's mig-parted applies each layout over the mock, its GFD labels and its device
    plugin advertises each profile under the name NVIDIA's MIG User Guide gives it (nvidia.com/mig-1g.18gb on the H200,
    1g.12gb on the H100 NVL, 3g.48gb and 1g.24gb together on the GH200, 1g.23gb on the B200); a re-run changes nothing;
    the undo gives back what kubectl showed before."""
    core = cluster.core
    pools = [{"name": pool, "selector": {"matchLabels": {POOL_LABEL: pool}}, "mig": mig} for pool, mig in
             ((pool, mig) for _product, pool, mig, _want in CURRENT_GPUS.values())]
    user = yaml.safe_load(readme_inventory())
    user["all"]["vars"]["gpushare_node_pools"] = pools
    path = tmp_path / "gpu-cluster.yml"
    path.write_text(yaml.safe_dump(user))
    before = kubectl_views(cluster)
    for name, (product, pool, _mig, _want) in CURRENT_GPUS.items():
        core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok", POOL_LABEL: pool},
            "annotations": {"kwok.x-k8s.io/node": "fake", "gpushare.k8s/gpus": "1", "gpushare.k8s/gpu-product": product}}})
    try:
        wait_until(lambda: all("nvidia.com/gpu.product" in (core.read_node(name).metadata.labels or {}) for name in CURRENT_GPUS),
                   timeout=120, what="GFD's labels on the new nodes")
        proc = run(cluster, path)
        assert proc.returncode == 0, tail(proc)
        for name, (product, _pool, _mig, want) in CURRENT_GPUS.items():
            node = core.read_node(name)
            labels = node.metadata.labels
            assert labels["nvidia.com/mig.config.state"] == "success", (name, labels)
            assert allocatable(core, name) == want, (name, allocatable(core, name))
            # NVIDIA's GFD over the mock: the product as NVML names it, each profile's count under the documented name
            assert labels["nvidia.com/gpu.product"] == product, (name, labels["nvidia.com/gpu.product"])
            assert {key: labels[key] for key in labels if key.startswith("nvidia.com/mig-") and key.endswith(".count")} == {
                resource + ".count": count for resource, count in want.items()}, (name, labels)
        again = run(cluster, path)
        assert again.returncode == 0 and recap(again)["changed"] == 0, tail(again)
        undone = run(cluster, path, "-e", "gpushare_sharing_state=absent")
        assert undone.returncode == 0, tail(undone)
        for name in CURRENT_GPUS:
            assert MIG_LABEL not in (core.read_node(name).metadata.labels or {}), name
    finally:
        for name in CURRENT_GPUS:
            core.delete_node(name)
    wait_until(lambda: kubectl_views(cluster) == before, timeout=60, what="the cluster as before the test")
