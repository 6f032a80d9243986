# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The configure-only entry point on a cluster whose ClusterPolicy a Helm release owns, as the GPU Operator's chart makes it.

On an operator-mode lab cluster of this module's own, the stand-in's ClusterPolicy is replaced by one a release of the
lab's own chart (tests/integration/charts/gpu-operator-lab, the GPU Operator chart's value names) creates, installed with
kubernetes.core.helm and the pinned helm (tools/helm). Then, with the README's inventory given by -i:
1. without the chart named, the run stops before any write, saying why a patch would not last;
2. with it, the release's values are changed (the others kept) instead of the object: the nodes advertise the pools'
   configuration; a re-run changes nothing;
3. a user's `helm upgrade --reuse-values` of the release, changing another value, leaves the configuration in place;
4. the undo gives the release its earlier values back: the ClusterPolicy's spec is as the chart first rendered it.
"""
from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from kubernetes import client

from conftest import REPO, ansible_playbook
from helm_tool import helm_binary
from reliability import OwnCluster, output, recap, tail
from test_gpu_sharing import POOL_LABEL, allocatable, label, readme_inventory

pytestmark = pytest.mark.slow

CLUSTER = "gpushare-it-helm"
CHART = REPO / "tests" / "integration" / "charts" / "gpu-operator-lab"
RELEASE, NAMESPACE = "gpu-operator", "gpu-operator"


@pytest.fixture(scope="module")
def helm():
    return helm_binary()


@pytest.fixture(scope="module")
def cluster(helm, tmp_path_factory):
    """The module's cluster, its ClusterPolicy made by a release of the lab's chart (installed by kubernetes.core.helm)."""
    own = OwnCluster(CLUSTER)
    try:
        own.up(gpushare_gpu_operator_standin=True)
        custom = client.CustomObjectsApi(own.core.api_client)
        custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
        play = tmp_path_factory.mktemp("helm") / "install.yml"
        play.write_text(yaml.safe_dump([{
            "name": "Install the GPU Operator's stand-in chart", "hosts": "localhost", "connection": "local", "gather_facts": False,
            "tasks": [{"name": "Install release gpu-operator", "kubernetes.core.helm": {
                "release_name": RELEASE, "release_namespace": NAMESPACE, "chart_ref": str(CHART), "binary_path": str(helm),
                "kubeconfig": str(own.kubeconfig), "wait": False}}]}]))
        proc = ansible_playbook(play, timeout=300)
        assert proc.returncode == 0, tail(proc)
        label(own.core, "lab-node-1", "inference")
        label(own.core, "lab-node-2", "training")
        yield own
    finally:
        own.down()


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "gpu-cluster.yml"
    path.write_text(readme_inventory())
    return path


def run(cluster, inventory, helm, *args, chart=True):
    extra = {"gpushare_helm_binary": str(helm)}
    if chart:
        extra["gpushare_operator_helm_chart"] = str(CHART)
    return ansible_playbook(REPO / "playbooks" / "gpu_sharing.yml", "-i", str(inventory), "-e", json.dumps(extra), *args,
                            env={"KUBECONFIG": str(cluster.kubeconfig)}, timeout=600)


def helm_cli(cluster, helm, *args):
    proc = subprocess.run([str(helm), "--kubeconfig", str(cluster.kubeconfig), *args], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def user_values(cluster, helm):
    return yaml.safe_load(helm_cli(cluster, helm, "get", "values", RELEASE, "-n", NAMESPACE, "-o", "yaml")) or {}


def policy(cluster):
    return client.CustomObjectsApi(cluster.core.api_client).get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")


def wait_for(predicate, seconds=30):
    import time
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "not reached in %s s" % seconds
        time.sleep(0.5)


def test_helm_owned_policy_is_changed_through_the_release_and_survives_an_upgrade(cluster, inventory, helm):
    core = cluster.core
    owned = policy(cluster)
    assert owned["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    spec_before, values_before = owned["spec"], user_values(cluster, helm)

    # 1. no chart named: refused before any write, saying why
    refused = run(cluster, inventory, helm, chart=False)
    assert refused.returncode != 0
    text = output(refused)
    assert "belongs to Helm release gpu-operator/gpu-operator" in text and "gpushare_operator_helm_chart" in text, tail(refused)
    assert "Nothing was written." in text
    assert policy(cluster)["spec"] == spec_before and user_values(cluster, helm) == values_before
    assert "device-plugin-configs" not in {c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items}

    # 2. through the release: the other values kept, the nodes configured; a re-run changes nothing
    first = run(cluster, inventory, helm)
    assert first.returncode == 0, tail(first)
    values = user_values(cluster, helm)
    assert values["devicePlugin"]["config"] == {"name": "device-plugin-configs", "default": "default"}
    assert values["mig"]["strategy"] == "mixed" and values["migManager"]["config"]["name"] == "gpushare-mig-parted-config"
    assert int(helm_cli(cluster, helm, "history", RELEASE, "-n", NAMESPACE, "-o", "json").count('"revision"')) == 2
    assert policy(cluster)["spec"]["devicePlugin"]["config"]["name"] == "device-plugin-configs"
    assert allocatable(core, "lab-node-1") == {"nvidia.com/gpu": "8"}
    assert allocatable(core, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "14"}
    again = run(cluster, inventory, helm)
    assert again.returncode == 0 and recap(again)["changed"] == 0, tail(again)

    # 3. a user's upgrade of the release with --reuse-values, changing another value: the configuration stays
    helm_cli(cluster, helm, "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values", "--set", "driver.enabled=false")
    after = policy(cluster)["spec"]
    assert after["driver"]["enabled"] is False  # (NVIDIA's schema also defaults driver.kernelModuleType)
    assert after["devicePlugin"]["config"] == {"name": "device-plugin-configs", "default": "default"}
    assert after["mig"]["strategy"] == "mixed"
    wait_for(lambda: allocatable(core, "lab-node-1") == {"nvidia.com/gpu": "8"})
    assert allocatable(core, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "14"}


def test_undo_gives_the_release_its_earlier_values_back(cluster, inventory, helm):
    core = cluster.core
    undone = run(cluster, inventory, helm, "-e", "gpushare_sharing_state=absent")
    assert undone.returncode == 0, tail(undone)
    values = user_values(cluster, helm)
    # the collection's values are gone, the user's own later change (driver.enabled=false) is kept
    assert values == {"driver": {"enabled": False}}, values
    spec = policy(cluster)["spec"]
    assert "config" not in (spec.get("devicePlugin") or {}) and spec["mig"] == {"strategy": "single"}
    assert spec["migManager"]["config"] == {"name": "default-mig-parted-config", "default": "all-disabled"}
    assert allocatable(core, "lab-node-1") == {"nvidia.com/gpu": "2"}
    assert allocatable(core, "lab-node-2") == {"nvidia.com/gpu": "2"}
    labels = core.read_node("lab-node-1").metadata.labels
    assert "nvidia.com/device-plugin.config" not in labels and labels[POOL_LABEL] == "inference"
    assert {c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items} == {"kube-root-ca.crt"}


def test_a_secret_in_the_release_values_is_never_printed_at_vvv(cluster, inventory, helm):
    """Issue 42: a release's user values can hold credentials (here one planted with --set-string, a value the chart
    does not render). The configure and undo runs read those values (helm_info), keep them in facts and give them back
    to kubernetes.core.helm; at -vvv every module's arguments and result would print them. Both runs do their work and
    the value is in neither's output."""
    import uuid

    secret = "gpushare-planted-%s" % uuid.uuid4().hex
    helm_cli(cluster, helm, "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
             "--set-string", "imagePullCredentials.password=%s" % secret)
    planted = user_values(cluster, helm)
    assert planted["imagePullCredentials"] == {"password": secret}

    configured = run(cluster, inventory, helm, "-vvv")
    assert configured.returncode == 0, tail(configured)
    values = user_values(cluster, helm)
    assert values["devicePlugin"]["config"] == {"name": "device-plugin-configs", "default": "default"}  # the run did its work
    assert values["imagePullCredentials"] == {"password": secret}  # and kept the user's value
    assert "ESTABLISH LOCAL CONNECTION FOR USER" in configured.stdout  # -vvv took effect
    assert secret not in configured.stdout + configured.stderr

    undone = run(cluster, inventory, helm, "-vvv", "-e", "gpushare_sharing_state=absent")
    assert undone.returncode == 0, tail(undone)
    assert user_values(cluster, helm) == planted  # the collection's values gone, the user's (the secret among them) kept
    assert "ESTABLISH LOCAL CONNECTION FOR USER" in undone.stdout
    assert secret not in undone.stdout + undone.stderr
