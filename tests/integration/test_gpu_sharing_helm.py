# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The configure-only entry point on a cluster whose ClusterPolicy a Helm release owns, as the GPU Operator's chart makes it.

On an operator-mode lab cluster of this module's own, the stand-in's ClusterPolicy is replaced by one a release of the
lab's own chart (tests/integration/charts/gpu-operator-lab, the GPU Operator chart's value names) creates, installed with
kubernetes.core.helm and the pinned helm (tools/helm). Then, in order:
1. by default the run writes nothing to the release: it writes its ConfigMaps, prints the values fragment and stops before
   any node label;
2. the collection README's bootstrap play (the fragment, the team's own kubernetes.core.helm task, the role) configures
   both pools; run again, it changes nothing;
3. a `helm upgrade` from the team's values file, the fragment merged in, changes nothing the nodes advertise;
4. the undo refuses while the release still carries the fragment, and undoes once the team took it out;
5. with gpushare_operator_helm: upgrade, the release's values are changed (the others kept) instead of the object; a user's
   `helm upgrade --reuse-values` keeps the configuration; the undo gives the release its earlier values back;
6. values with a secret in them never reach the output at -vvv.
"""
from __future__ import annotations

import json
import os
import re
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


def run(cluster, inventory, helm, *args, chart=True, mode="upgrade"):
    extra = {"gpushare_helm_binary": str(helm)}
    if chart:
        extra["gpushare_operator_helm_chart"] = str(CHART)
    if mode:
        extra["gpushare_operator_helm"] = mode
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


FRAGMENT = {"devicePlugin": {"config": {"name": "device-plugin-configs", "default": "default"}}, "mig": {"strategy": "mixed"},
            "migManager": {"config": {"name": "gpushare-mig-parted-config", "default": "all-disabled"}}}
TEAM_VALUES = {"driver": {"enabled": True}}  # the team's own values file: a value the collection never sets


def revisions(cluster, helm):
    return len(json.loads(helm_cli(cluster, helm, "history", RELEASE, "-n", NAMESPACE, "-o", "json")))


def node_state(core):
    """What the nodes advertise and the labels the collection writes on them."""
    state = {}
    for node in core.list_node().items:
        if node.metadata.name.startswith("lab-node-"):
            labels = node.metadata.labels or {}
            owned = {k: v for k, v in labels.items() if k in ("nvidia.com/device-plugin.config", "nvidia.com/mig.config")}
            state[node.metadata.name] = (nvidia(node.status.allocatable), owned)
    return state


def nvidia(resources):
    return {k: v for k, v in (resources or {}).items() if k.startswith("nvidia.com/")}


def bootstrap_play() -> str:
    """The collection README's bootstrap play, verbatim (section "In your cluster's bootstrap")."""
    readme = (REPO / "docs" / "collection" / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(# gpu-bootstrap\.yml: .*?)```\n", readme, re.S)
    assert len(blocks) == 1, "the collection README holds one yaml block starting '# gpu-bootstrap.yml: '"
    return blocks[0]


def role_named_inventory(inventory, path):
    """The README's inventory in the role's own variable names (what the bootstrap play's include_role reads)."""
    user = yaml.safe_load(inventory.read_text())
    own = user["all"]["vars"]
    for old, new in {"gpushare_node_pools": "gpu_sharing_node_pools", "gpushare_device_plugin_configs": "gpu_sharing_configs",
                     "gpushare_operator_namespace": "gpu_sharing_namespace", "gpushare_operator_cluster_policy": "gpu_sharing_cluster_policy",
                     "gpushare_operator_mig_strategy": "gpu_sharing_mig_strategy",
                     "gpushare_operator_default_config": "gpu_sharing_default_config"}.items():
        own[new] = own.pop(old)
    path.write_text(yaml.safe_dump(user))
    return path


def test_by_default_the_release_stays_the_teams_and_the_run_prints_the_fragment(cluster, inventory, helm):
    core = cluster.core
    spec_before, values_before, revision = policy(cluster)["spec"], user_values(cluster, helm), revisions(cluster, helm)
    nodes_before = node_state(core)
    refused = run(cluster, inventory, helm, chart=False, mode=None)
    assert refused.returncode != 0
    text = output(refused)
    assert "whose values do not carry GPU sharing's fragment yet" in text, tail(refused)
    assert "The collection writes nothing to the release: its ConfigMaps are written, no node label is." in text
    for line in ("devicePlugin:", "name: device-plugin-configs", "strategy: mixed", "name: gpushare-mig-parted-config"):
        assert line in text, (line, tail(refused))
    # nothing of the release, nothing on the nodes; the collection's own ConfigMaps written, none Helm-owned
    assert (policy(cluster)["spec"], user_values(cluster, helm), revisions(cluster, helm)) == (spec_before, values_before, revision)
    assert node_state(core) == nodes_before
    written = {c.metadata.name: c for c in core.list_namespaced_config_map(NAMESPACE).items}
    assert {"device-plugin-configs", "gpushare-mig-parted-config"} <= set(written)
    assert not any((written[n].metadata.annotations or {}).get("meta.helm.sh/release-name") for n in ("device-plugin-configs", "gpushare-mig-parted-config"))


def test_the_readme_bootstrap_play_configures_both_pools(cluster, inventory, helm, tmp_path):
    core = cluster.core
    play = tmp_path / "gpu-bootstrap.yml"
    play.write_text(bootstrap_play())
    team = tmp_path / "gpu-operator-values.yml"
    team.write_text(yaml.safe_dump(TEAM_VALUES))
    inv = role_named_inventory(inventory, tmp_path / "gpu-cluster.yml")
    extra = json.dumps({"gpu_operator_chart": str(CHART), "gpu_operator_values_file": str(team),
                        "gpu_sharing_values_fragment_file": str(tmp_path / "gpu-sharing-values.yml")})
    env = {"KUBECONFIG": str(cluster.kubeconfig), "PATH": "%s:%s" % (helm.parent, os.environ["PATH"])}
    first = ansible_playbook(play, "-i", str(inv), "-e", extra, env=env, timeout=600)
    assert first.returncode == 0, tail(first)
    assert yaml.safe_load((tmp_path / "gpu-sharing-values.yml").read_text()) == FRAGMENT
    assert user_values(cluster, helm) == dict(TEAM_VALUES, **FRAGMENT)  # the team's release, from the team's task
    assert policy(cluster)["spec"]["devicePlugin"]["config"] == FRAGMENT["devicePlugin"]["config"]
    assert allocatable(core, "lab-node-1") == {"nvidia.com/gpu": "8"}
    assert allocatable(core, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "14"}
    assert core.read_node("lab-node-2").metadata.labels["nvidia.com/mig.config.state"] == "success"
    again = ansible_playbook(play, "-i", str(inv), "-e", extra, env=env, timeout=600)
    assert again.returncode == 0 and recap(again)["changed"] == 0, tail(again)


def test_an_upgrade_from_the_teams_values_file_with_the_fragment_changes_nothing_the_nodes_advertise(cluster, helm, tmp_path):
    core = cluster.core
    before = node_state(core)
    team = tmp_path / "gpu-operator-values.yml"
    team.write_text(yaml.safe_dump(dict(TEAM_VALUES, **FRAGMENT)))  # the fragment merged into the team's own file
    revision = revisions(cluster, helm)
    helm_cli(cluster, helm, "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "-f", str(team))
    assert revisions(cluster, helm) == revision + 1
    import time
    time.sleep(5)  # the stand-in acts on a ClusterPolicy change within a second; nothing may move
    assert node_state(core) == before


def test_the_undo_waits_for_the_fragment_to_leave_the_release(cluster, inventory, helm, tmp_path):
    core = cluster.core
    before = node_state(core), sorted(c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items)
    refused = run(cluster, inventory, helm, "-e", "gpushare_sharing_state=absent", chart=False, mode=None)
    assert refused.returncode != 0
    text = output(refused)
    assert 'ClusterPolicy spec.devicePlugin.config.name: names ConfigMap "device-plugin-configs", which the undo would delete' in text, tail(refused)
    assert (node_state(core), sorted(c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items)) == before
    # the team takes the fragment out of its values file and upgrades; then the undo runs. The ClusterPolicy then names
    # the operator's own mig-parted ConfigMap again, which a real operator ships (NVIDIA's stock layouts; the lab's chart
    # does not create it): the MIG manager makes the GPUs whole from its all-disabled
    stock = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n" \
            "  all-1g.10gb:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \"1g.10gb\": 7\n"
    core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "default-mig-parted-config"}, "data": {"config.yaml": stock}})
    team = tmp_path / "gpu-operator-values.yml"
    team.write_text(yaml.safe_dump(TEAM_VALUES))
    helm_cli(cluster, helm, "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "-f", str(team))
    revision = revisions(cluster, helm)
    undone = run(cluster, inventory, helm, "-e", "gpushare_sharing_state=absent", chart=False, mode=None)
    assert undone.returncode == 0, tail(undone)
    assert revisions(cluster, helm) == revision  # the undo wrote nothing to the release either
    assert allocatable(core, "lab-node-1") == {"nvidia.com/gpu": "2"}
    assert allocatable(core, "lab-node-2") == {"nvidia.com/gpu": "2"}
    assert {c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items} == {"kube-root-ca.crt", "default-mig-parted-config"}
    assert "gpushare.k8s/sharing-record" not in (policy(cluster)["metadata"].get("annotations") or {})
    core.delete_namespaced_config_map("default-mig-parted-config", NAMESPACE)  # the modes below start as the chart left it


def test_helm_owned_policy_is_changed_through_the_release_and_survives_an_upgrade(cluster, inventory, helm):
    core = cluster.core
    owned = policy(cluster)
    assert owned["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    spec_before, values_before, revision = owned["spec"], user_values(cluster, helm), revisions(cluster, helm)

    # 1. no chart named: refused before any write, saying why
    refused = run(cluster, inventory, helm, chart=False)
    assert refused.returncode != 0
    text = output(refused)
    assert "belongs to Helm release gpu-operator/gpu-operator" in text and "gpushare_operator_helm_chart" in text, tail(refused)
    assert "gpushare_operator_helm is upgrade" in text
    assert "Nothing was written." in text
    assert policy(cluster)["spec"] == spec_before and user_values(cluster, helm) == values_before
    assert "device-plugin-configs" not in {c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items}

    # 2. through the release: the other values kept, the nodes configured; a re-run changes nothing
    first = run(cluster, inventory, helm)
    assert first.returncode == 0, tail(first)
    values = user_values(cluster, helm)
    assert values["devicePlugin"]["config"] == {"name": "device-plugin-configs", "default": "default"}
    assert values["mig"]["strategy"] == "mixed" and values["migManager"]["config"]["name"] == "gpushare-mig-parted-config"
    assert revisions(cluster, helm) == revision + 1
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
