# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_sharing refuses a config label the live ConfigMap lacks, before labelling any node.

Works on two scratch kwok nodes and a ConfigMap in a namespace of its own, removed afterwards.
"""
from __future__ import annotations

import re

import pytest
import yaml

from conftest import REPO
from lab_helpers import unique

CONFIG_LABEL = "nvidia.com/device-plugin.config"
PLAYBOOK = "tests/integration/playbooks/node_sharing.yml"
CONFIGS = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "lab.yml").read_text())["gpushare_device_plugin_configs"]


def recap(proc):
    lines = [line for line in proc.stdout.splitlines() if line.startswith("localhost")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1])}


@pytest.fixture(scope="module")
def scratch(core_v1, kubeconfig):
    """Two kwok nodes with no GPU and a ConfigMap holding only the `default` config."""
    nodes = [unique("gpushare-it-cfg-a"), unique("gpushare-it-cfg-b")]
    ns, configmap = unique("gpushare-it-cfg"), unique("plugin-configs")
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    core_v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        core_v1.create_namespaced_config_map(ns, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": configmap},
            "data": {"default": "version: v1\nflags:\n  migStrategy: none"},
        })
        for node in nodes:
            core_v1.create_node({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "status": {"capacity": capacity, "allocatable": capacity},
            })
        yield {"nodes": nodes, "ns": ns, "configmap": configmap}
    finally:
        for node in nodes:
            try:
                core_v1.delete_node(node)
            except Exception:  # pylint: disable=broad-except
                pass
        core_v1.delete_namespace(ns)


def role_vars(scratch, kubeconfig, configs_of_nodes, **extra):
    nodes = [{"name": node, "gpus": 1, "config": config} for node, config in zip(scratch["nodes"], configs_of_nodes)]
    return {
        "gpushare_kubeconfig": kubeconfig,
        "node_sharing_nodes": nodes,
        "node_sharing_configs": CONFIGS,
        "node_sharing_configmap": scratch["configmap"],
        "node_sharing_configmap_namespace": scratch["ns"],
        **extra,
    }


def unlabelled(core_v1, scratch):
    for name in scratch["nodes"]:
        node = core_v1.read_node(name)
        assert CONFIG_LABEL not in (node.metadata.labels or {}), node.metadata.labels
        assert "nvidia.com/gpu" not in (node.status.capacity or {}), node.status.capacity


def test_label_naming_a_missing_key_is_refused_before_any_node_is_labelled(scratch, kubeconfig, core_v1, run_playbook):
    node_a, node_b = scratch["nodes"]
    # node_a's config exists, node_b's does not: neither may be labelled.
    proc = run_playbook(PLAYBOOK, extra_vars=role_vars(scratch, kubeconfig, ["default", "shared"]))
    assert proc.returncode != 0, proc.stdout[-3000:]
    out = " ".join(proc.stdout.split())
    assert (f"node {node_b}: label {CONFIG_LABEL}=shared names no key of ConfigMap {scratch['ns']}/{scratch['configmap']} "
            "(its keys: default)") in out, out[-3000:]
    assert "Fix: add key 'shared' to the ConfigMap" in out and "No node was labelled." in out
    assert f"node {node_a}:" not in out
    unlabelled(core_v1, scratch)


def test_a_missing_configmap_is_refused(scratch, kubeconfig, core_v1, run_playbook):
    proc = run_playbook(PLAYBOOK, extra_vars=role_vars(scratch, kubeconfig, ["default", "default"], node_sharing_configmap="nowhere"))
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert f"ConfigMap {scratch['ns']}/nowhere does not exist" in out and "node_sharing_check_config_labels: false" in out
    unlabelled(core_v1, scratch)


def test_check_mode_falls_back_to_the_inventory_and_says_so(scratch, kubeconfig, core_v1, run_playbook):
    missing = run_playbook(PLAYBOOK, extra_vars=role_vars(scratch, kubeconfig, ["default", "shared"], node_sharing_configmap="nowhere"),
                           check=True)
    assert missing.returncode == 0, missing.stdout[-3000:]
    out = " ".join(missing.stdout.split())
    assert f"ConfigMap {scratch['ns']}/nowhere does not exist yet (this run creates it)" in out
    assert "checked against the config names of the inventory (default, mps, shared)" in out
    lacking = run_playbook(PLAYBOOK, extra_vars=role_vars(scratch, kubeconfig, ["default", "shared"]), check=True)
    assert lacking.returncode == 0, lacking.stdout[-3000:]
    assert "lacks shared (it has: default)" in " ".join(lacking.stdout.split())
    unlabelled(core_v1, scratch)


def test_labels_naming_existing_keys_are_applied_once(scratch, kubeconfig, core_v1, run_playbook):
    extra = role_vars(scratch, kubeconfig, ["default", "default"])
    proc = run_playbook(PLAYBOOK, extra_vars=extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    for name in scratch["nodes"]:
        node = core_v1.read_node(name)
        assert node.metadata.labels[CONFIG_LABEL] == "default"
        assert node.status.capacity["nvidia.com/gpu"] == "1"
    again = run_playbook(PLAYBOOK, extra_vars=extra)
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-3000:]


def test_the_check_can_be_turned_off(scratch, kubeconfig, core_v1, run_playbook):
    proc = run_playbook(PLAYBOOK, extra_vars=role_vars(scratch, kubeconfig, ["default", "shared"], node_sharing_check_config_labels=False))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert core_v1.read_node(scratch["nodes"][1]).metadata.labels[CONFIG_LABEL] == "shared"
