# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet in one run of playbooks/gpu_sharing.yml: two lab clusters of this module's own, one inventory of the user's
(a group of two hosts, each a cluster with its own gpushare_kubeconfig, the README's configs and pools as group vars),
one ansible-playbook run.

Cluster a runs the GPU Operator (the lab's stand-in); cluster b is broken the way a fleet's new or half-built cluster
is: the GPU Operator is not installed there (no ClusterPolicy CRD), its nodes labelled into the same pools as a's.
The run configures a, fails b before any write, names b at the end, and exits non-zero.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from conftest import REPO, ansible_playbook
from reliability import OwnCluster, output, tail
from test_gpu_sharing import POOL_LABEL, allocatable, label, readme_inventory

pytestmark = pytest.mark.slow

HEALTHY, BROKEN = "gpushare-it-fleet-a", "gpushare-it-fleet-b"
GROUP = "gpu_clusters"


@pytest.fixture(scope="module")
def fleet():
    """Both clusters, created at once (each has ports of its own: conftest.port_base); a with the operator stand-in, b without."""
    clusters = {HEALTHY: OwnCluster(HEALTHY), BROKEN: OwnCluster(BROKEN)}
    options = {HEALTHY: {"gpushare_gpu_operator_standin": True}, BROKEN: {}}
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            started = [pool.submit(own.up, **options[name]) for name, own in clusters.items()]
            for future in started:
                future.result()
        yield clusters
    finally:
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda own: own.down(), clusters.values()))


@pytest.fixture(scope="module")
def inventory(fleet, tmp_path_factory):
    """The user's fleet inventory: one group, a host per cluster with its kubeconfig, the README example's vars shared."""
    shared = yaml.safe_load(readme_inventory())["all"]["vars"]
    shared["ansible_python_interpreter"] = "{{ ansible_playbook_python }}"
    hosts = {name: {"gpushare_kubeconfig": str(own.kubeconfig)} for name, own in fleet.items()}
    path = tmp_path_factory.mktemp("user") / "gpu-fleet.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {GROUP: {"hosts": hosts, "vars": shared}}}}, sort_keys=False))
    return path


def tasks(stdout: str) -> dict:
    """Each task's name to the hosts that reported a result in it (ok, changed, skipping, fatal, failed)."""
    blocks = re.split(r"^TASK \[", stdout, flags=re.M)[1:]
    reported = {}
    for block in blocks:
        name, body = block.split("]", 1)
        hosts = re.findall(r"^(?:ok|changed|skipping|fatal|failed): \[([^\]]+)\]", body, re.M)
        reported.setdefault(name.strip(), []).extend(hosts)
    return reported


def recap_of(proc, host: str) -> dict:
    """The PLAY RECAP counters of one host."""
    lines = [line for line in (proc.stdout or "").splitlines() if line.split(" ", 1)[0] == host and ":" in line]
    assert lines, tail(proc)
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", lines[-1])}


def node_labels(core) -> dict:
    return {node.metadata.name: dict(node.metadata.labels or {}) for node in core.list_node().items}


def written(core) -> dict:
    """What a run could write to a cluster without the operator: node labels, namespaces, ConfigMaps (the record's too)."""
    return {"labels": node_labels(core), "namespaces": sorted(ns.metadata.name for ns in core.list_namespace().items),
            "configmaps": sorted("%s/%s" % (c.metadata.namespace, c.metadata.name) for c in core.list_config_map_for_all_namespaces().items)}


def test_one_broken_cluster_of_two_leaves_the_other_configured_and_is_named(fleet, inventory):
    healthy, broken = fleet[HEALTHY].core, fleet[BROKEN].core
    for core in (healthy, broken):  # the same pools on both clusters: b fails for the missing operator alone
        label(core, "lab-node-1", "inference")
        label(core, "lab-node-2", "training")
    broken_before = written(broken)

    proc = ansible_playbook(REPO / "playbooks" / "gpu_sharing.yml", "-i", str(inventory), timeout=600)
    text = output(proc)

    assert proc.returncode != 0, tail(proc)
    # a: configured (2 GPUs x 4 replicas of the shared config; 2 GPUs x 7 instances of 1g.10gb, nvidia.com/gpu gone)
    assert allocatable(healthy, "lab-node-1") == {"nvidia.com/gpu": "8"}, tail(proc)
    assert allocatable(healthy, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "14"}
    assert allocatable(healthy, "lab-node-0") == {"nvidia.com/gpu": "2"}
    assert node_labels(healthy)["lab-node-1"]["nvidia.com/device-plugin.config"] == "shared"
    assert recap_of(proc, HEALTHY)["failed"] == 0 and recap_of(proc, HEALTHY)["changed"] >= 1, tail(proc)
    # b: failed before any write, its cause and the fix in the output, named in the play's last line
    assert recap_of(proc, BROKEN)["failed"] == 1, tail(proc)
    assert f"fatal: [{BROKEN}]" in text and f"fatal: [{HEALTHY}]" not in text
    assert ("ClusterPolicy cluster-policy does not exist (no ClusterPolicy CRD: the GPU Operator is not installed). "
            "Nothing was written. Fix: install the GPU Operator") in text, tail(proc)
    assert f"Not configured: {BROKEN} (see the failed task of each above). Configured: {HEALTHY}." in text, tail(proc)
    assert written(broken) == broken_before
    assert POOL_LABEL in node_labels(broken)["lab-node-1"]
    # one run, the clusters side by side: each task up to b's failure reports both, then a's alone
    reported = tasks(proc.stdout)
    assert sorted(reported["gpushare.k8s.gpu_sharing : Read ClusterPolicy cluster-policy"]) == [HEALTHY, BROKEN], reported
    assert sorted(reported["gpushare.k8s.gpu_sharing : Refuse a cluster without the ClusterPolicy (nothing written yet)"]) == [HEALTHY, BROKEN]
    assert reported["gpushare.k8s.mig_node : Label each node with its MIG layout (nvidia.com/mig.config)"] == [HEALTHY], reported
    assert "Traceback" not in text


def test_when_every_cluster_fails_the_run_still_names_them(fleet, inventory, tmp_path):
    """Both clusters refused before any write (a ClusterPolicy name neither has): the closing summary still prints."""
    user = yaml.safe_load(inventory.read_text())
    user["all"]["children"][GROUP]["vars"]["gpushare_operator_cluster_policy"] = "no-such-policy"
    path = tmp_path / "gpu-fleet.yml"
    path.write_text(yaml.safe_dump(user, sort_keys=False))
    before = {name: written(own.core) for name, own in fleet.items()}
    proc = ansible_playbook(REPO / "playbooks" / "gpu_sharing.yml", "-i", str(path), timeout=600)
    text = output(proc)
    assert proc.returncode != 0, tail(proc)
    named = re.findall(r"Not configured: (.*) \(see the failed task of each above\)\. Configured: none\.", text)
    assert len(named) == 1 and sorted(named[0].split(", ")) == sorted([HEALTHY, BROKEN]), tail(proc)
    for host in (HEALTHY, BROKEN):
        assert recap_of(proc, host)["failed"] == 1, tail(proc)
    assert {name: written(own.core) for name, own in fleet.items()} == before
