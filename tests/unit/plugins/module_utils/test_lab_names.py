# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab's names checked before anything is written, and its ConfigMap and quota built as data.

Every expected message and every expected file below is written out by hand (the files as the lab wrote them from
its YAML templates), never computed by the code under test.
"""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.inventory import (
    check_name, check_names, configmap_object, lab_name_errors, manifest_text, namespace_changes, pod_objects, quota_object,
    render_configs)

INJECTED = ("team-a\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: pwned}\n"
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n"
            "subjects: [{kind: Group, name: 'system:authenticated', apiGroup: rbac.authorization.k8s.io}]")
LABEL_RULE = "(at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)"
SUBDOMAIN_RULE = ("(at most 253 lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a "
                  "letter or digit)")
POD_RULE = ("(at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit; the Pod's container "
            "is named after it)")


# --------------------------------------------------------------------------- one name


@pytest.mark.parametrize("kind, value", [
    ("namespace", "gpu-share"), ("namespace", "a"), ("namespace", "a" * 63), ("namespace", 7),
    ("name", "device-plugin-configs"), ("name", "gpu.quota.v2"), ("name", "a" * 253),
    ("pod", "team-a-job-1"), ("pod", "notebook"),
])
def test_kubernetes_names_pass(kind, value):
    assert check_name(value, kind, "field") == str(value)


@pytest.mark.parametrize("kind, value, message", [
    ("namespace", INJECTED,
     'gpushare_namespace: "team-a\\n---\\napiVersion: rbac.authorization.k8s.io/v1\\nkind..." is not a DNS-1123 label '
     + LABEL_RULE + ". Fix: use a name such as gpu-share"),
    ("namespace", "shared\n", "gpushare_namespace: 'shared\\n' is not a DNS-1123 label " + LABEL_RULE + ". Fix: use a name such as gpu-share"),
    ("namespace", "Team-A", "gpushare_namespace: 'Team-A' is not a DNS-1123 label " + LABEL_RULE + ". Fix: use a name such as gpu-share"),
    ("namespace", "gpu.share", "gpushare_namespace: 'gpu.share' is not a DNS-1123 label " + LABEL_RULE + ". Fix: use a name such as gpu-share"),
    ("namespace", "a" * 64, "gpushare_namespace: '%s' is not a DNS-1123 label " % ("a" * 59 + "...") + LABEL_RULE
     + ". Fix: use a name such as gpu-share"),
    ("namespace", "", "gpushare_namespace: '' is not a DNS-1123 label " + LABEL_RULE + ". Fix: use a name such as gpu-share"),
    ("namespace", None, "gpushare_namespace: None is not a DNS-1123 label " + LABEL_RULE + ". Fix: use a name such as gpu-share"),
    ("namespace", True, "gpushare_namespace: True is not a DNS-1123 label " + LABEL_RULE + ". Fix: use a name such as gpu-share"),
    ("namespace", "kube-system",
     "gpushare_namespace: namespace 'kube-system' belongs to the cluster (default and kube-* hold what every user and the control plane "
     "rely on; the lab sets its namespaces' Pod Security labels and runs its Pods and quota there). Fix: use a namespace of the lab's "
     "own, such as gpu-share"),
    ("namespace", "default",
     "gpushare_namespace: namespace 'default' belongs to the cluster (default and kube-* hold what every user and the control plane "
     "rely on; the lab sets its namespaces' Pod Security labels and runs its Pods and quota there). Fix: use a namespace of the lab's "
     "own, such as gpu-share"),
    ("name", "device-plugin-configs/x",
     "gpushare_namespace: 'device-plugin-configs/x' is not a DNS-1123 subdomain " + SUBDOMAIN_RULE + ". Fix: use a name such as "
     "device-plugin-configs"),
    ("name", "gpu-quota\n", "gpushare_namespace: 'gpu-quota\\n' is not a DNS-1123 subdomain " + SUBDOMAIN_RULE + ". Fix: use a name "
     "such as device-plugin-configs"),
    ("name", "a..b", "gpushare_namespace: 'a..b' is not a DNS-1123 subdomain " + SUBDOMAIN_RULE + ". Fix: use a name such as "
     "device-plugin-configs"),
    ("pod", "prod.inference", "gpushare_namespace: 'prod.inference' is not a DNS-1123 label " + POD_RULE + ". Fix: use a name such as "
     "notebook"),
])
def test_anything_else_is_refused_naming_the_field_and_the_fix(kind, value, message):
    with pytest.raises(InputError) as caught:
        check_name(value, kind, "gpushare_namespace")
    assert str(caught.value) == message


def test_a_list_of_names_names_the_bad_entry():
    assert check_names(["gpu-share", "team-a"], "namespace", "namespaces_names") == ["gpu-share", "team-a"]
    with pytest.raises(InputError, match=r"^namespaces_names\[1\]: 'team-a\\n' is not a DNS-1123 label"):
        check_names(["gpu-share", "team-a\n"], "namespace", "namespaces_names")


# --------------------------------------------------------------------------- the lab's fields


LAB = {
    "gpushare_namespace": "gpu-share", "gpushare_team_namespace": "team-a", "gpushare_device_plugin_namespace": "gpu-share",
    "gpushare_device_plugin_configmap": "device-plugin-configs", "gpushare_team_quota": {"name": "gpu-quota", "gpus": 2},
    "gpushare_team_pods": [{"name": "team-a-job-1"}, {"name": "team-a-job-2"}], "gpushare_team_over_pod": "team-over",
    "gpushare_split_pods": [{"name": "mig-job", "resource": "nvidia.com/mig-1g.10gb"}, {"name": "plain-gpu", "resource": "nvidia.com/gpu"}],
    "gpushare_placement": [{"name": "prod-inference", "place_on": "mig"}, {"name": "notebook", "place_on": "shared"}],
    "gpushare_nodes": [{"name": "lab-node-0", "gpus": 2}, {"name": "lab-node-1", "gpus": 2}],
    "gpushare_operator_namespace": "gpu-operator", "gpushare_operator_cluster_policy": "cluster-policy",
    "gpushare_operator_mig_parted_configmap": "gpushare-mig-parted-config",
}


def test_the_labs_own_names_pass():
    assert lab_name_errors(LAB) == []
    assert lab_name_errors({}) == []


@pytest.mark.parametrize("field, value, message", [
    ("gpushare_team_namespace", INJECTED,
     'gpushare_team_namespace: "team-a\\n---\\napiVersion: rbac.authorization.k8s.io/v1\\nkind..." is not a DNS-1123 label '
     + LABEL_RULE + ". Fix: use a name such as team-a."),
    ("gpushare_namespace", "GPU-Share", "gpushare_namespace: 'GPU-Share' is not a DNS-1123 label " + LABEL_RULE
     + ". Fix: use a name such as gpu-share."),
    ("gpushare_device_plugin_configmap", "device-plugin-configs/extra",
     "gpushare_device_plugin_configmap: 'device-plugin-configs/extra' is not a DNS-1123 subdomain " + SUBDOMAIN_RULE
     + ". Fix: use a name such as device-plugin-configs."),
    ("gpushare_team_quota", {"name": "gpu-quota\n", "gpus": 2},
     "gpushare_team_quota.name: 'gpu-quota\\n' is not a DNS-1123 subdomain " + SUBDOMAIN_RULE + ". Fix: use a name such as gpu-quota."),
    ("gpushare_team_pods", [{"name": "team-a-job-1"}, {"name": "team-a-job-2\n"}],
     "gpushare_team_pods[1].name: 'team-a-job-2\\n' is not a DNS-1123 label " + POD_RULE + ". Fix: use a name such as team-a-job-1."),
    ("gpushare_team_over_pod", "team_over", "gpushare_team_over_pod: 'team_over' is not a DNS-1123 label " + POD_RULE
     + ". Fix: use a name such as team-over."),
    ("gpushare_split_pods", [{"name": "Mig-Job", "resource": "nvidia.com/gpu"}],
     "gpushare_split_pods[0].name: 'Mig-Job' is not a DNS-1123 label " + POD_RULE + ". Fix: use a name such as mig-job."),
    ("gpushare_placement", [{"name": "prod inference", "place_on": "mig"}],
     "gpushare_placement[0].name: 'prod inference' is not a DNS-1123 label " + POD_RULE + ". Fix: use a name such as notebook."),
    ("gpushare_nodes", [{"name": "lab-node-0\n", "gpus": 2}],
     "gpushare_nodes[0].name: 'lab-node-0\\n' is not a DNS-1123 subdomain " + SUBDOMAIN_RULE + ". Fix: use a name such as lab-node-0."),
    ("gpushare_dra_nodes", [{"name": "dra-node-0"}, {"name": "DRA-Node-1", "gpus": 1}],
     "gpushare_dra_nodes[1].name: 'DRA-Node-1' is not a DNS-1123 subdomain " + SUBDOMAIN_RULE + ". Fix: use a name such as dra-node-0."),
    ("gpushare_operator_namespace", "kube-system",
     "gpushare_operator_namespace: namespace 'kube-system' belongs to the cluster (default and kube-* hold what every user and the "
     "control plane rely on; the lab sets its namespaces' Pod Security labels and runs its Pods and quota there). Fix: use a "
     "namespace of the lab's own, such as gpu-operator."),
])
def test_each_bad_name_of_the_lab_is_one_message_naming_its_field(field, value, message):
    assert lab_name_errors(dict(LAB, **{field: value})) == [message]


def test_every_bad_name_is_reported_at_once():
    errors = lab_name_errors(dict(LAB, gpushare_namespace="A", gpushare_team_over_pod="B"))
    assert [error.split(":")[0] for error in errors] == ["gpushare_namespace", "gpushare_team_over_pod"]


def test_the_team_may_not_share_the_labs_namespace():
    assert lab_name_errors(dict(LAB, gpushare_team_namespace="gpu-share")) == [
        "gpushare_team_namespace: 'gpu-share' is also the lab's own namespace (gpushare_namespace): the team's quota would count, "
        "and refuse, the lab's Pods of steps 4 and 8, and the team's Pods would run beside them. Fix: give the team a namespace of "
        "its own, such as team-a (or move the lab's, gpushare_namespace)."]


def test_the_shared_namespace_is_reported_beside_other_bad_names_but_not_beside_its_own():
    errors = lab_name_errors(dict(LAB, gpushare_team_namespace="gpu-share", gpushare_team_over_pod="B"))
    assert [error.split(":")[0] for error in errors] == ["gpushare_team_over_pod", "gpushare_team_namespace"]
    errors = lab_name_errors(dict(LAB, gpushare_namespace="kube-a", gpushare_team_namespace="kube-a"))
    assert [error.split(":")[0] for error in errors] == ["gpushare_namespace", "gpushare_team_namespace"]
    assert "belongs to the cluster" in errors[1]


def test_entries_without_a_name_are_left_to_the_checks_that_require_one_and_unknown_fields_are_refused():
    assert lab_name_errors(dict(LAB, gpushare_team_pods=[{}], gpushare_team_quota="gpu-quota", gpushare_nodes="lab-node-0")) == []
    with pytest.raises(ValueError, match="lab_name_errors: gpushare_namspace is not a field holding a name"):
        lab_name_errors({"gpushare_namspace": "gpu-share"})


def test_the_pods_the_lab_writes_carry_checked_names_and_namespaces():
    with pytest.raises(InputError, match=r"^gpu_pods\[0\]\.name: 'notebook\\n---\\nkind: Secret' is not a DNS-1123 label"):
        pod_objects([{"name": "notebook\n---\nkind: Secret", "resource": "nvidia.com/gpu"}], "pause")
    with pytest.raises(InputError, match=r"^gpu_pods namespace: 'gpu-share\\n' is not a DNS-1123 label"):
        pod_objects([{"name": "notebook", "resource": "nvidia.com/gpu"}], "pause", namespace="gpu-share\n")
    [pod] = pod_objects([{"name": "notebook", "resource": "nvidia.com/gpu"}], "pause", namespace="gpu-share")
    assert pod["metadata"] == {"name": "notebook", "namespace": "gpu-share"} and pod["spec"]["containers"][0]["name"] == "notebook"


# --------------------------------------------------------------------------- objects as data


# k8s/device-plugin-configs.yaml as the lab wrote it from its template (roles/device_plugin_config, before this change).
CONFIGMAP_FILE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: device-plugin-configs
  namespace: gpu-share
data:
  default: |-
    version: v1
    flags:
      migStrategy: none
  mps: |-
    version: v1
    flags:
      migStrategy: none
    sharing:
      mps:
        resources:
          - name: nvidia.com/gpu
            replicas: 4
  shared: |-
    version: v1
    flags:
      migStrategy: none
    sharing:
      timeSlicing:
        failRequestsGreaterThanOne: true
        resources:
          - name: nvidia.com/gpu
            replicas: 4
"""
CONFIGS = {
    "shared": {"version": "v1", "flags": {"migStrategy": "none"},
               "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
    "default": {"version": "v1", "flags": {"migStrategy": "none"}},
    "mps": {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
}


def test_the_configmap_file_is_the_one_the_template_wrote_byte_for_byte():
    text = manifest_text(configmap_object(render_configs(CONFIGS), "device-plugin-configs", "gpu-share"))
    assert text == CONFIGMAP_FILE


def test_the_quota_file_is_the_one_the_template_wrote_byte_for_byte():
    assert manifest_text(quota_object(["nvidia.com/gpu"], 2, "gpu-quota", "team-a")) == (
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpu-quota\n  namespace: team-a\nspec:\n  hard:\n"
        "    requests.nvidia.com/gpu: \"2\"\n")
    assert manifest_text(quota_object(["nvidia.com/mig-1g.10gb", "nvidia.com/gpu"], "3", "gpu-quota", "team-a")) == (
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpu-quota\n  namespace: team-a\nspec:\n  hard:\n"
        "    requests.nvidia.com/gpu: \"3\"\n    requests.nvidia.com/mig-1g.10gb: \"3\"\n")


def test_a_value_with_a_document_marker_stays_inside_its_value():
    text = manifest_text(configmap_object({"default": "version: v1\n---\nkind: ClusterRoleBinding", "x": "a \nb"}, "c", "gpu-share"))
    assert list(yaml.safe_load_all(text)) == [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "gpu-share"},
                                               "data": {"default": "version: v1\n---\nkind: ClusterRoleBinding", "x": "a \nb"}}]


@pytest.mark.parametrize("call, message", [
    (lambda: configmap_object({}, "device-plugin-configs\n---\nkind: Secret", "gpu-share", ("device_plugin_config_configmap", "ns")),
     "device_plugin_config_configmap: 'device-plugin-configs\\n---\\nkind: Secret' is not a DNS-1123 subdomain " + SUBDOMAIN_RULE
     + ". Fix: use a name such as device-plugin-configs"),
    (lambda: configmap_object({}, "c", "Gpu-Share", ("name", "device_plugin_config_namespace")),
     "device_plugin_config_namespace: 'Gpu-Share' is not a DNS-1123 label " + LABEL_RULE + ". Fix: use a name such as gpu-share"),
    (lambda: configmap_object({"a/b": "x"}, "c", "gpu-share"),
     "data['a/b']: a ConfigMap key is at most 253 letters, digits, '-', '_' or '.'. Fix: rename the key, e.g. shared"),
    (lambda: configmap_object({"a": 1}, "c", "gpu-share"), "data.a: must be text, got 1. Fix: render the value as text first"),
    (lambda: quota_object(["nvidia.com/gpu"], 2, "gpu-quota", "team-a\n", ("team_quota_name", "team_quota_namespace", "team_quota_gpus")),
     "team_quota_namespace: 'team-a\\n' is not a DNS-1123 label " + LABEL_RULE + ". Fix: use a name such as team-a"),
    (lambda: quota_object(["nvidia.com/gpu"], -1, "gpu-quota", "team-a", ("team_quota_name", "team_quota_namespace", "team_quota_gpus")),
     "team_quota_gpus: -1 is not a whole number of 0 or more. Fix: give the GPU units the team may request, e.g. 2"),
    (lambda: quota_object([], 2, "gpu-quota", "team-a"),
     "resources: must be a non-empty list of resource names, got []. Fix: give e.g. [nvidia.com/gpu]"),
    (lambda: quota_object(["nvidia.com/gpu: 9\n"], 2, "gpu-quota", "team-a"),
     "resources[0]: 'nvidia.com/gpu: 9\\n' is not a resource name. Fix: give e.g. nvidia.com/gpu"),
])
def test_bad_objects_are_refused_naming_the_field(call, message):
    with pytest.raises(InputError) as caught:
        call()
    assert str(caught.value) == message


# --------------------------------------------------------------------------- namespaces and Pod Security


def read(name, labels=None):
    """One entry of objects_info's results for ``names``: the namespace, found (with ``labels``) or not (None)."""
    return {"item": {"name": name}, "resources": [] if labels is None else [{"metadata": {"name": name, "labels": labels}}]}


SECURITY = {"enforce": "baseline", "warn": "restricted", "audit": "restricted"}
PSA = {"pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/enforce": "baseline",
       "pod-security.kubernetes.io/warn": "restricted"}


def test_a_missing_namespace_is_created_with_the_pod_security_labels():
    assert namespace_changes([read("gpu-share")], {}, SECURITY) == [
        {"name": "gpu-share", "exists": False, "labels": PSA, "pod_security_only": False}]


def test_an_existing_namespace_gets_only_the_labels_it_lacks_and_keeps_its_own():
    current = {"team": "a", "pod-security.kubernetes.io/enforce": "baseline", "kubernetes.io/metadata.name": "team-a"}
    assert namespace_changes([read("team-a", current)], {}, SECURITY) == [
        {"name": "team-a", "exists": True, "pod_security_only": True,
         "labels": {"pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}]


def test_a_namespace_that_has_every_label_is_not_written():
    assert namespace_changes([read("gpu-share", dict(PSA, other="kept"))], {}, SECURITY) == []


def test_a_different_level_is_set_back_and_namespaces_labels_win():
    current = dict(PSA, **{"pod-security.kubernetes.io/enforce": "privileged"})
    assert namespace_changes([read("gpu-share", current)], {}, SECURITY) == [
        {"name": "gpu-share", "exists": True, "labels": {"pod-security.kubernetes.io/enforce": "baseline"}, "pod_security_only": True}]
    assert namespace_changes([read("gpu-share", PSA)], {"pod-security.kubernetes.io/enforce": "restricted", "team": "a"}, SECURITY) == [
        {"name": "gpu-share", "exists": True, "pod_security_only": False,
         "labels": {"pod-security.kubernetes.io/enforce": "restricted", "team": "a"}}]


def test_no_pod_security_leaves_the_labels_alone():
    assert namespace_changes([read("gpu-share", {}), read("team-a")], {}, {}) == [
        {"name": "team-a", "exists": False, "labels": {}, "pod_security_only": False}]


@pytest.mark.parametrize("levels, message", [
    ({"enforce": "strict"}, "pod_security.enforce: 'strict' is not a Pod Security level. Fix: use privileged, baseline, restricted"),
    ({"enforced": "baseline"}, "pod_security.enforced: is not a Pod Security mode. Fix: use enforce, audit, warn"),
    ("baseline", "pod_security: must be a mapping of mode to level, got 'baseline'. Fix: write e.g. {enforce: baseline, warn: "
                 "restricted, audit: restricted}, or {} to leave the labels alone"),
])
def test_bad_pod_security_levels_are_refused(levels, message):
    with pytest.raises(InputError) as caught:
        namespace_changes([read("gpu-share")], {}, levels)
    assert str(caught.value) == message


def test_a_namespace_name_that_is_not_one_is_refused_before_any_change():
    with pytest.raises(InputError, match=r"^namespaces\[1\]: 'Team-A' is not a DNS-1123 label"):
        namespace_changes([read("gpu-share"), read("Team-A")], {}, SECURITY)
