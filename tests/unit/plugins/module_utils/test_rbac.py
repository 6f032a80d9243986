# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/lab/rbac.py: the lab's RBAC built as data; no inventory value can add or change an object."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.lab import rbac

# What was reproduced with the YAML template: a namespace value that closes its document and adds a
# ClusterRoleBinding of the lab's ServiceAccount to cluster-admin.
INJECTION = (
    "team-a\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: injected-admin\n"
    "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n"
    "- kind: ServiceAccount\n  name: gpushare-lab\n  namespace: gpushare-system\n---\napiVersion: v1\nkind: Namespace\n"
    "metadata:\n  name: team-a"
)
LAB = {"nodes": ["lab-node-0", "lab-node-1", "lab-node-2"], "team_access": True}


def kinds(objects):
    return [(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]) for obj in objects]


def role(objects, kind, namespace=None, name="gpushare-lab"):
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace]
    return found


def test_the_lab_rbac_objects():
    objects = rbac.rbac_objects(LAB)
    assert kinds(objects) == [
        ("Namespace", None, "gpushare-system"), ("Namespace", None, "gpu-share"), ("Namespace", None, "team-a"),
        ("ServiceAccount", "gpushare-system", "gpushare-lab"),
        ("ClusterRole", None, "gpushare-lab"), ("ClusterRoleBinding", None, "gpushare-lab"),
        ("Role", "gpu-share", "gpushare-lab"), ("RoleBinding", "gpu-share", "gpushare-lab"),
        ("Role", "team-a", "gpushare-lab"), ("RoleBinding", "team-a", "gpushare-lab"),
        ("ValidatingAdmissionPolicy", None, "gpushare-lab-node-keys"), ("ValidatingAdmissionPolicyBinding", None, "gpushare-lab-node-keys"),
        ("ValidatingAdmissionPolicy", None, "gpushare-lab-create-names"),
        ("ValidatingAdmissionPolicyBinding", None, "gpushare-lab-create-names"),
        ("ServiceAccount", "team-a", "gpushare-team"), ("Role", "team-a", "gpushare-team"), ("RoleBinding", "team-a", "gpushare-team"),
    ]
    # No long-lived token by default (token_source=request); with token_source=secret, one per ServiceAccount.
    assert not [o for o in objects if o["kind"] == "Secret"]
    secrets = [o for o in rbac.rbac_objects(dict(LAB, token_source="secret")) if o["kind"] == "Secret"]
    assert [s["metadata"]["name"] for s in secrets] == ["gpushare-lab-token", "gpushare-team-token"]
    assert secrets == rbac.token_secrets(dict(LAB, token_source="secret")) == rbac.token_secrets(LAB)


def test_the_cluster_role_is_narrow():
    rules = role(rbac.rbac_objects(LAB), "ClusterRole")["rules"]
    granted = {(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"]), tuple(r.get("resourceNames", ()))) for r in rules}
    assert granted == {
        (("",), ("nodes",), ("get", "patch"), ("lab-node-0", "lab-node-1", "lab-node-2")),
        (("",), ("nodes/status",), ("patch",), ("lab-node-0", "lab-node-1", "lab-node-2")),
        (("",), ("nodes",), ("list",), ()),
        # no patch: the ServiceAccount cannot relabel a namespace (Pod Security)
        (("",), ("namespaces",), ("get",), ("gpu-share", "team-a")),
        # the guard is installed by the administrator; the ServiceAccount only reads it
        (("admissionregistration.k8s.io",), ("validatingadmissionpolicies", "validatingadmissionpolicybindings"), ("get",),
         ("gpushare-time-slicing-guard",)),
        # so are the GPU intent policies
        (("admissionregistration.k8s.io",), ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings", "validatingadmissionpolicies",
                                             "validatingadmissionpolicybindings"), ("get",), ("gpushare-gpu-intent",)),
    }
    without = role(rbac.rbac_objects(dict(LAB, intent_admission=False)), "ClusterRole")["rules"]
    assert not [r for r in without if "mutatingadmissionpolicies" in r["resources"]], without


def test_the_intent_pods_may_be_deleted_by_name_only():
    def deletes(settings):
        return [(o["metadata"]["namespace"], r.get("resourceNames")) for o in rbac.rbac_objects(settings)
                if o["kind"] == "Role" and o["metadata"]["name"] == "gpushare-lab" for r in o["rules"] if "delete" in r["verbs"]]
    assert deletes(dict(LAB, intent_pods=["intent-shared", "intent-whole"])) == [("gpu-share", ["intent-shared", "intent-whole"])]
    assert deletes(LAB) == deletes(dict(LAB, intent_admission=False, intent_pods=["intent-shared"])) == []
    with pytest.raises(rbac.InputError, match=r"rbac_intent_pods\[0\]"):
        rbac.rbac_objects(dict(LAB, intent_pods=["Bad Name"]))


def test_workload_and_quota_lists_live_in_the_lab_namespaces():
    objects = rbac.rbac_objects(LAB)
    listed = {(o["metadata"]["namespace"], resource) for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "gpushare-lab"
              for r in o["rules"] if "list" in r["verbs"] for resource in r["resources"]}
    workloads = {"pods", "podtemplates", "replicationcontrollers", "daemonsets", "deployments", "replicasets", "statefulsets", "cronjobs", "jobs"}
    assert listed == {(ns, w) for ns in ("gpu-share", "team-a") for w in workloads} | {("team-a", "resourcequotas")}
    # Without the reports, only the lab report's Pods.
    bare = rbac.rbac_objects(dict(LAB, mig_migration_report=False, quota_coverage=False))
    listed = {(o["metadata"]["namespace"], resource) for o in bare if o["kind"] == "Role" and o["metadata"]["name"] == "gpushare-lab"
              for r in o["rules"] if "list" in r["verbs"] for resource in r["resources"]}
    assert listed == {("gpu-share", "pods"), ("team-a", "pods")}


def test_the_node_keys_policy_matches_only_the_lab_service_account():
    objects = rbac.rbac_objects(LAB)
    policy = role(objects, "ValidatingAdmissionPolicy", name="gpushare-lab-node-keys")["spec"]
    assert policy["matchConditions"] == [{"name": "lab-service-account",
                                          "expression": 'request.userInfo.username == "system:serviceaccount:gpushare-system:gpushare-lab"'}]
    assert policy["matchConstraints"]["resourceRules"][0]["resources"] == ["nodes", "nodes/status"]
    assert policy["failurePolicy"] == "Fail"
    binding = role(objects, "ValidatingAdmissionPolicyBinding", name="gpushare-lab-node-keys")["spec"]
    assert binding == {"policyName": "gpushare-lab-node-keys", "validationActions": ["Deny"]}


def test_the_manifest_is_the_objects_with_a_reason_per_rule():
    text = rbac.rbac_manifest(LAB)
    assert list(yaml.safe_load_all(text)) == rbac.rbac_objects(LAB)
    cluster_role = text.split("kind: ClusterRole\n", 1)[1].split("---", 1)[0]
    assert cluster_role.count("  - apiGroups:") == 6
    for block in cluster_role.split("  - apiGroups:")[:-1]:
        assert block.rstrip().splitlines()[-1].lstrip().startswith("#"), block  # each rule is preceded by its reason


@pytest.mark.parametrize("field", ["namespace", "lab_namespace", "team_namespace", "device_plugin_namespace",
                                   "admission_guard_probe_namespace"])
def test_an_injected_namespace_is_refused_naming_the_field(field):
    with pytest.raises(rbac.InputError) as caught:
        rbac.rbac_objects(dict(LAB, **{field: INJECTION}))
    message = str(caught.value)
    assert message.startswith("rbac_%s: 'team-a\\n---\\napiVersion" % field)
    assert "is not a DNS-1123 label" in message and "Fix: use a name such as" in message
    assert "cluster-admin" not in message  # the value is not echoed whole
    with pytest.raises(rbac.InputError, match=r"^rbac_%s: 'team-a\\n---\\napiVersion.*' is not a DNS-1123 label .*\. Fix: use a name "
                                              r"such as [a-z-]+$" % field):
        rbac.rbac_manifest(dict(LAB, **{field: INJECTION}))


@pytest.mark.parametrize("field, value, problem", [
    ("service_account", "gpushare-lab\n", "is not a DNS-1123 label"),  # a trailing newline passes a regex with $
    ("service_account", "Gpushare", "is not a DNS-1123 label"),
    ("team_service_account", "a" * 64, "is not a DNS-1123 label"),
    ("device_plugin_configmap", "cm: {x}", "is not a DNS-1123 subdomain"),
    ("team_quota", "", "is not a DNS-1123 subdomain"),
    ("team_coverage_quota", "Coverage", "is not a DNS-1123 subdomain"),
    ("admission_guard_name", "guard]\n- name", "is not a DNS-1123 subdomain"),
    ("nodes", "lab-node-0", "must be a list of node names"),
    ("token_source", "forever", "must be one of request, secret"),
    ("team_access", "yes", "must be true or false"),
    ("lab_namespaces", ["x"], "is not a setting of the RBAC"),
])
def test_every_name_is_checked(field, value, problem):
    with pytest.raises(rbac.InputError) as caught:
        rbac.rbac_objects(dict(LAB, **{field: value}))
    assert str(caught.value).startswith("rbac_%s: " % field) and problem in str(caught.value) and "Fix: " in str(caught.value)


def test_the_lab_may_read_and_patch_its_two_quotas_only():
    """The team's quota and the coverage quota beside it, by name; create cannot be limited to names."""
    def quota_rules(settings):
        team = role(rbac.rbac_objects(settings), "Role", "team-a")
        return [(r["verbs"], r.get("resourceNames")) for r in team["rules"] if r["resources"] == ["resourcequotas"]]
    assert quota_rules(LAB) == [(["create"], None), (["get", "patch"], ["gpu-quota", "gpushare-gpu-coverage"]), (["list"], None)]
    assert quota_rules(dict(LAB, team_coverage_quota="team-a-extra"))[1] == (["get", "patch"], ["gpu-quota", "team-a-extra"])


def test_a_bad_node_name_is_named_by_its_index():
    with pytest.raises(rbac.InputError, match=r"^rbac_nodes\[1\]: 'lab-node-1\\n'"):
        rbac.rbac_objects(dict(LAB, nodes=["lab-node-0", "lab-node-1\n"]))


@pytest.mark.parametrize("namespace", ["default", "kube-system", "kube-public", "kube-node-lease", "kube-anything"])
@pytest.mark.parametrize("field", ["namespace", "lab_namespace", "team_namespace", "device_plugin_namespace",
                                   "admission_guard_probe_namespace"])
def test_cluster_namespaces_are_refused(field, namespace):
    with pytest.raises(rbac.InputError) as caught:
        rbac.rbac_objects(dict(LAB, **{field: namespace}))
    message = str(caught.value)
    assert message.startswith("rbac_%s: namespace %r belongs to the cluster" % (field, namespace))
    assert "Fix: use a namespace of the lab's own" in message


def test_the_team_service_account_must_not_be_the_lab_one():
    with pytest.raises(rbac.InputError, match="^rbac_team_service_account: the team's ServiceAccount gpushare-system/gpushare-lab is the lab's own"):
        rbac.rbac_objects(dict(LAB, team_namespace="gpushare-system", team_service_account="gpushare-lab"))


def test_object_drift():
    desired = {"metadata": {"name": "g", "labels": {"a": "1"}}, "spec": {"failurePolicy": "Fail", "rules": [{"x": 1}]}}
    live = {"metadata": {"name": "g", "labels": {"a": "1", "b": "2"}, "uid": "u"},
            "spec": {"failurePolicy": "Fail", "matchPolicy": "Equivalent", "rules": [{"x": 1, "scope": "*"}]}, "status": {}}
    assert rbac.object_drift(desired, live) == []
    assert rbac.object_drift(desired, None) == ["."]
    assert rbac.object_drift(desired, dict(live, spec={"failurePolicy": "Ignore", "rules": [{"x": 1}]})) == ["spec.failurePolicy"]
    assert rbac.object_drift(desired, dict(live, spec={"failurePolicy": "Fail", "rules": []})) == ["spec.rules"]
    assert rbac.object_drift([desired, desired], [live]) == ["."]


def test_namespaces_it_creates_carry_the_pod_security_labels():
    namespaces = [obj for obj in rbac.rbac_objects({}) if obj["kind"] == "Namespace"]
    assert [obj["metadata"]["name"] for obj in namespaces] == ["gpushare-system", "gpu-share", "team-a"]
    for obj in namespaces:
        assert obj["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "gpushare.k8s",
            "app.kubernetes.io/part-of": "gpushare-lab",
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/warn": "restricted",
            "pod-security.kubernetes.io/audit": "restricted",
        }
    bare = [obj for obj in rbac.rbac_objects({"pod_security": {}}) if obj["kind"] == "Namespace"]
    assert {key for obj in bare for key in obj["metadata"]["labels"]} == {"app.kubernetes.io/managed-by", "app.kubernetes.io/part-of"}
    message = r"^rbac_pod_security\.enforce: 'strict' is not a Pod Security level\. Fix: use privileged, baseline, restricted$"
    with pytest.raises(rbac.InputError, match=message):
        rbac.rbac_objects({"pod_security": {"enforce": "strict"}})


def test_pod_security_default_is_the_namespaces_roles():
    roles = Path(__file__).resolve().parents[4] / "roles"
    rbac_default = yaml.safe_load((roles / "rbac" / "defaults" / "main.yml").read_text())["rbac_pod_security"]
    namespaces_default = yaml.safe_load((roles / "namespaces" / "defaults" / "main.yml").read_text())["namespaces_pod_security"]
    assert rbac_default == namespaces_default == {"enforce": "baseline", "warn": "restricted", "audit": "restricted"}
