# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's stock MIG layouts survive playbooks/gpu_sharing.yml, on an operator-mode lab cluster of this module's own.

Before the first run the ClusterPolicy names ConfigMap default-mig-parted-config (as the GPU Operator's chart does), which
holds layouts shaped as NVIDIA's stock ones (tests/stock-mig-parted-config.yml: all-disabled, all-enabled, all-<profile>,
all-balanced with one entry per GPU family), its MIG strategy is mixed, and lab-node-0, in no pool of the README's
inventory, is labelled nvidia.com/mig.config=all-balanced: NVIDIA's mig-parted (the stand-in's MIG manager) applied it
and the node advertises its instances. Then, in order:
1. the README's run points the ClusterPolicy at the collection's ConfigMap: lab-node-0 stays at success, the collection's
   ConfigMap holds the stock lines verbatim, and another stock layout asked of lab-node-0 afterwards is applied from it;
   a re-run changes nothing;
2. a stock layout edited to mean something else where a pool uses its name stops the next run before any write, naming
   the layout and both ConfigMaps;
3. the undo gives back what kubectl showed before the first run, byte for byte (the ClusterPolicy's pointer included),
   and lab-node-0 is still at success.
"""
from __future__ import annotations

import pytest
import yaml
from kubernetes import client

from conftest import REPO
from reliability import OwnCluster, output, recap, tail, wait_until
from test_gpu_sharing import kubectl_views, label, operator_spoke, readme_inventory, run

pytestmark = pytest.mark.slow

CLUSTER = "gpushare-it-stock-layouts"
NAMESPACE = "gpu-operator"
STOCK_NAME = "default-mig-parted-config"
OWN_NAME = "gpushare-mig-parted-config"
STOCK = (REPO / "tests" / "stock-mig-parted-config.yml").read_text()
MIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
OUTSIDE = "lab-node-0"
# 2 GPUs x (2 x 1g.10gb + 1 x 2g.20gb + 1 x 3g.40gb): the stock all-balanced entry of the A100 80GB, under the mixed strategy
BALANCED = {"nvidia.com/mig-1g.10gb": "4", "nvidia.com/mig-2g.20gb": "2", "nvidia.com/mig-3g.40gb": "2"}


@pytest.fixture(scope="module")
def cluster():
    own = OwnCluster(CLUSTER)
    try:
        own.up(gpushare_gpu_operator_standin=True)
        core = own.core
        policy = cluster_policy(core)
        assert policy["spec"]["migManager"]["config"]["name"] == STOCK_NAME, "the lab's ClusterPolicy names the stock ConfigMap first"
        core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": STOCK_NAME}, "data": {"config.yaml": STOCK}})
        # a team running all-balanced (several profiles on one GPU) runs the mixed strategy: under single, NVIDIA's plugin
        # refuses such a node (GFD labels it MIG-INVALID)
        client.CustomObjectsApi(core.api_client).patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy",
                                                                             {"spec": {"mig": {"strategy": "mixed"}}})
        label(core, "lab-node-1", "inference")
        label(core, "lab-node-2", "training")
        core.patch_node(OUTSIDE, {"metadata": {"labels": {MIG_LABEL: "all-balanced"}}})
        wait_until(lambda: state(core, OUTSIDE) == "success" and nvidia_allocatable(core, OUTSIDE) == BALANCED, timeout=180,
                   what="%s to reach %s=success on the stock ConfigMap and advertise its instances" % (OUTSIDE, STATE_LABEL))
        wait_until(lambda: operator_spoke(core), timeout=120, what="every GPU node to show GFD's labels and its GPUs")
        own.pristine = kubectl_views(own)
        yield own
    finally:
        own.down()


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "gpu-cluster.yml"
    path.write_text(readme_inventory())
    return path


def cluster_policy(core):
    return client.CustomObjectsApi(core.api_client).get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")


def state(core, node):
    return (core.read_node(node).metadata.labels or {}).get(STATE_LABEL)


def nvidia_allocatable(core, node):
    return {k: v for k, v in (core.read_node(node).status.allocatable or {}).items() if k.startswith("nvidia.com/")}


def configmap_text(core, name):
    return core.read_namespaced_config_map(name, NAMESPACE).data["config.yaml"]


def test_a_stock_layout_node_outside_the_pools_ends_success(cluster, inventory):
    core = cluster.core
    first = run(cluster, inventory)
    assert first.returncode == 0, tail(first)
    assert "WARNING: gpushare_node_pools: GPU node %s is in no pool" % OUTSIDE in output(first)
    assert cluster_policy(core)["spec"]["migManager"]["config"]["name"] == OWN_NAME
    # the node no pool covers keeps its stock layout: applied, nothing to redo (the API server's own answer)
    assert core.read_node(OUTSIDE).metadata.labels[MIG_LABEL] == "all-balanced"
    assert state(core, OUTSIDE) == "success"
    assert nvidia_allocatable(core, OUTSIDE) == BALANCED
    # the pool's node got the stock all-1g.10gb (the same on this board as the collection's)
    assert core.read_node("lab-node-2").metadata.labels[MIG_LABEL] == "all-1g.10gb" and state(core, "lab-node-2") == "success"
    assert nvidia_allocatable(core, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "14"}

    # the collection's ConfigMap: the stock config's mig-configs lines as written (comments included), every stock layout
    text = configmap_text(core, OWN_NAME)
    stock_lines = STOCK.splitlines()
    block = "\n".join(stock_lines[stock_lines.index("mig-configs:") + 1:])
    assert block in text
    assert yaml.safe_load(text)["mig-configs"] == yaml.safe_load(STOCK)["mig-configs"]
    assert configmap_text(core, STOCK_NAME) == STOCK, "the team's ConfigMap was written"
    annotations = core.read_namespaced_config_map(OWN_NAME, NAMESPACE).metadata.annotations
    assert annotations["gpushare.k8s/mig-parted-source"] == STOCK_NAME

    # another stock layout asked of the node now comes from the collection's ConfigMap, which NVIDIA's mig-parted applies
    core.patch_node(OUTSIDE, {"metadata": {"labels": {MIG_LABEL: "all-2g.20gb"}}})
    wait_until(lambda: state(core, OUTSIDE) == "success" and nvidia_allocatable(core, OUTSIDE) == {"nvidia.com/mig-2g.20gb": "6"},
               timeout=180, what="%s to apply all-2g.20gb from %s" % (OUTSIDE, OWN_NAME))
    core.patch_node(OUTSIDE, {"metadata": {"labels": {MIG_LABEL: "all-balanced"}}})
    wait_until(lambda: state(core, OUTSIDE) == "success" and nvidia_allocatable(core, OUTSIDE) == BALANCED,
               timeout=180, what="%s back at all-balanced" % OUTSIDE)

    again = run(cluster, inventory)
    assert again.returncode == 0 and recap(again)["changed"] == 0, tail(again)
    assert configmap_text(core, OWN_NAME) == text


def test_a_stock_layout_meaning_something_else_where_a_pool_uses_its_name_stops_the_run_before_any_write(cluster, inventory):
    core = cluster.core
    edited = STOCK.replace('"1g.10gb": 7', '"1g.10gb": 3', 1)
    assert edited != STOCK
    core.patch_namespaced_config_map(STOCK_NAME, NAMESPACE, {"data": {"config.yaml": edited}})
    try:
        before = kubectl_views(cluster), configmap_text(core, OWN_NAME)
        proc = run(cluster, inventory)
        assert proc.returncode != 0, tail(proc)
        text = output(proc)
        assert ("ConfigMap gpu-operator/default-mig-parted-config config.yaml mig-configs.all-1g.10gb: differs from the layout all-1g.10gb "
                "that ConfigMap gpu-operator/gpushare-mig-parted-config must hold for node lab-node-2") in text, tail(proc)
        assert "3 x 1g.10gb" in text and "7 x 1g.10gb" in text and "Traceback" not in text
        assert (kubectl_views(cluster), configmap_text(core, OWN_NAME)) == before, "the refused run wrote"
    finally:
        core.patch_namespaced_config_map(STOCK_NAME, NAMESPACE, {"data": {"config.yaml": STOCK}})


def test_undo_gives_back_the_clusterpolicys_pointer_and_the_node_keeps_its_layout(cluster, inventory):
    core = cluster.core
    # the pool labels are the user's own: the user takes them back; the undo never touches them
    undone = run(cluster, inventory, "-e", "gpushare_sharing_state=absent")
    assert undone.returncode == 0, tail(undone)
    assert cluster_policy(core)["spec"]["migManager"]["config"]["name"] == STOCK_NAME
    after = kubectl_views(cluster)
    for name, want, got in zip(("ClusterPolicy", "nodes", "ConfigMaps"), cluster.pristine, after):
        assert got == want, "%s after the undo:\n%s\nbefore the first run:\n%s" % (name, got.decode(), want.decode())
    assert state(core, OUTSIDE) == "success" and core.read_node(OUTSIDE).metadata.labels[MIG_LABEL] == "all-balanced"
    assert nvidia_allocatable(core, OUTSIDE) == BALANCED
    assert configmap_text(core, STOCK_NAME) == STOCK
