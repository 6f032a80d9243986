# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab cluster's generated YAML (kwokctl configuration, kwok nodes) is dumped from data.

Each template is rendered by Ansible's own templating engine with the role's defaults, then read
back as YAML: every name, version and path must come back as the same string, whatever its text.
"""
from __future__ import annotations

from pathlib import Path

import warnings

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[3] / "roles" / "lab_cluster"
# Texts a YAML reader turns into something else when written bare: numbers, booleans, null, comments.
TRICKY = ["123", "yes", "on", "no", "null", "1e3", "0x1F", "1.10", "~"]
TRICKY_PATH = "/tmp/lab cache #1/bin: x"

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # pytest may have set the collection finder up already
    init_plugin_loader()


def render(template, **overrides):
    loader = DataLoader()
    variables = loader.load_from_file(str(ROLE / "defaults" / "main.yml"))
    variables.update(loader.load_from_file(str(ROLE / "vars" / "main.yml")))
    variables.update({"ansible_managed": "Ansible managed", "lab_cluster_bins": {}}, **overrides)
    templar = Templar(loader=loader, variables=variables)
    # a play templates a role variable when it is read; the kwokctl template reads this one
    variables["lab_cluster__ports"] = templar.template(trust_as_template(variables["lab_cluster__ports"]))
    templar = Templar(loader=loader, variables=variables)
    return templar.template(trust_as_template((ROLE / "templates" / template).read_text())) or ""


def bins(directory):
    names = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok", "kwokctl"]
    return {name: f"{directory}/{name}" for name in names}


@pytest.mark.parametrize("text", TRICKY)
def test_node_names_and_capacity_survive_as_strings(text):
    capacity = {"cpu": text, "memory": "256Gi", "pods": "110"}
    docs = [doc for doc in yaml.safe_load_all(render("nodes.yaml.j2", lab_cluster_nodes=[text, "lab-node-0"],
                                                     lab_cluster_node_capacity=capacity)) if doc is not None]
    assert [doc["metadata"]["name"] for doc in docs] == [text, "lab-node-0"]
    assert docs[0]["metadata"]["labels"]["kubernetes.io/hostname"] == text
    assert docs[0]["status"]["capacity"] == capacity == docs[0]["status"]["allocatable"]
    assert docs[0]["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}


def test_a_name_read_as_a_number_is_still_written_as_its_text():
    docs = [doc for doc in yaml.safe_load_all(render("nodes.yaml.j2", lab_cluster_nodes=[123])) if doc]
    assert docs[0]["metadata"]["name"] == "123"


def test_no_nodes_render_no_document():
    assert [doc for doc in yaml.safe_load_all(render("nodes.yaml.j2", lab_cluster_nodes=[])) if doc] == []


@pytest.mark.parametrize("text", TRICKY)
def test_kwokctl_configuration_keeps_versions_addresses_and_names(text):
    config = yaml.safe_load(render("kwokctl.yaml.j2", lab_cluster_name=f"{text}\nkind: Injected",
                                   lab_cluster_bind_address=text, lab_cluster_kubernetes_version=text,
                                   lab_cluster_kwok_version=text, lab_cluster_etcd_version="v" + text,
                                   lab_cluster_bins=bins("/opt/bin")))
    assert config["kind"] == "KwokctlConfiguration"
    assert config["apiVersion"] == "config.kwok.x-k8s.io/v1alpha1"
    options = config["options"]
    assert options["bindAddress"] == options["kubeVersion"] == options["kwokVersion"] == options["etcdVersion"] == text
    assert options["runtime"] == "binary"


def test_kwokctl_configuration_keeps_binary_paths_with_a_comment_sign():
    config = yaml.safe_load(render("kwokctl.yaml.j2", lab_cluster_bins=bins(TRICKY_PATH)))
    assert config["options"]["etcdVersion"] == "3.6.16" and config["options"]["bindAddress"] == "127.0.0.1"
    assert config["options"]["kubeApiserverBinary"] == f"{TRICKY_PATH}/kube-apiserver"
    assert config["options"]["kwokControllerBinary"] == f"{TRICKY_PATH}/kwok"
    assert config["options"]["kubectlBinary"] == f"{TRICKY_PATH}/kubectl"
    assert "components" not in config


def test_kwokctl_download_mode_names_no_binary():
    config = yaml.safe_load(render("kwokctl.yaml.j2", lab_cluster_binaries="download", lab_cluster_bins={"kwokctl": "kwokctl"}))
    assert not [key for key in config["options"] if key.endswith("Binary")]


def test_extra_components_are_appended_as_data():
    extra = [{"name": "operator", "binary": f"{TRICKY_PATH}/operator", "args": ["--flag=yes", "123", "# not a comment"],
              "envs": [{"name": "ON", "value": "on"}]}]
    config = yaml.safe_load(render("kwokctl.yaml.j2", lab_cluster_bins=bins("/opt/bin"), lab_cluster_extra_components=extra))
    assert config["components"] == extra


def test_kwokctls_own_components_get_one_core_and_extra_components_are_left_alone():
    extra = [{"name": "operator", "binary": "/opt/bin/operator", "envs": [{"name": "ON", "value": "on"}]}]
    config = yaml.safe_load(render("kwokctl.yaml.j2", lab_cluster_bins=bins("/opt/bin"), lab_cluster_extra_components=extra))
    one_core = [{"name": "GOMAXPROCS", "value": "1"}]
    assert config["componentsPatches"] == [{"name": name, "extraEnvs": one_core} for name in
                                           ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")]
    assert config["components"] == extra


def test_nodes_get_their_labels_and_taints_and_others_none():
    taint = {"key": "gpushare.k8s/gpu-manager", "value": "dra", "effect": "NoSchedule"}
    docs = [doc for doc in yaml.safe_load_all(render(
        "nodes.yaml.j2", lab_cluster_nodes=["lab-node-0", "dra-node-0"],
        lab_cluster_node_labels={"dra-node-0": {"gpushare.k8s/gpu-manager": "dra"}},
        lab_cluster_node_taints={"dra-node-0": [taint]})) if doc]
    lab, dra = docs
    assert lab["spec"] == {} and "gpushare.k8s/gpu-manager" not in lab["metadata"]["labels"]
    assert dra["spec"] == {"taints": [taint]}
    assert dra["metadata"]["labels"]["gpushare.k8s/gpu-manager"] == "dra" and dra["metadata"]["labels"]["type"] == "kwok"


def test_a_port_base_puts_every_listener_on_its_own_port_and_none_leaves_kwokctl_to_pick():
    options = yaml.safe_load(render("kwokctl.yaml.j2", lab_cluster_port_base=20100, lab_cluster_bins=bins("/opt")))["options"]
    assert {key: value for key, value in options.items() if key.endswith("Port")} == {
        "etcdPeerPort": 20100, "etcdPort": 20101, "kubeApiserverPort": 20102, "kwokControllerPort": 20103,
        "kubeControllerManagerPort": 20104, "kubeSchedulerPort": 20105}
    assert not [key for key in yaml.safe_load(render("kwokctl.yaml.j2", lab_cluster_bins=bins("/opt")))["options"] if key.endswith("Port")]
