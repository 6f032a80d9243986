# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Least privilege, on a cluster of its own (cluster-admin only creates the cluster and the RBAC).

- The whole lab runs green as ServiceAccount gpushare-system/gpushare-lab, bound only to the
  RBAC of role gpushare.k8s.rbac (playbooks/rbac.yml).
- Each rule of that RBAC is needed: for every rule (and every patch verb that shares a rule
  with get), a ServiceAccount bound to the RBAC minus that rule runs the lab up to the step
  that needs it, which fails naming the forbidden verb and resource.
- What was taken away is refused by the real API server: relabelling a namespace (Pod Security),
  writing admission policies (the administrator installs the guard), node writes beyond the
  nvidia.com/* keys (the administrator's node-keys policy), lists outside the lab's namespaces.
- No inventory value can inject an object into the RBAC (a ClusterRoleBinding to cluster-admin
  was reproduced with the YAML template): it is refused before anything is applied.
- The opt-in team ServiceAccount can run Pods in team-a and nothing else (real API calls).
- Tokens expire (TokenRequest); no long-lived token Secret exists. Tokens and other credentials
  never reach the output (-vvv and --diff included), a kubeconfig the role did not write is never
  replaced unless forced, and the files holding credentials are 0600.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import re
import stat
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple, Optional

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

import conftest
from conftest import REPO, cluster_vars
from lab_helpers import unique, wait_for

# A cluster of its own, named after the one the run was given (gpushare-it-lp for the default cluster).
CLUSTER = "gpushare-it-lp" if conftest.CLUSTER == "gpushare" else f"{conftest.CLUSTER}-lp"
ADMIN_KUBECONFIG = Path.home() / ".kwok" / "clusters" / CLUSTER / "kubeconfig.yaml"
KWOKCTL_CONFIG = Path.home() / ".kwok" / f"{CLUSTER}.kwokctl.yaml"
SA_NAMESPACE, SA, TEAM_SA = "gpushare-system", "gpushare-lab", "gpushare-team"
LAB_NS, TEAM_NS = "gpu-share", "team-a"
CONFIGMAP, QUOTA, GUARD = "device-plugin-configs", "gpu-quota", "gpushare-time-slicing-guard"
NODE_KEYS = f"{SA}-node-keys"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA}"
RBAC_GROUP = "rbac.authorization.k8s.io"
WORKERS = 4


def tail(proc, size=4000) -> str:
    return proc.stdout[-size:] + proc.stderr[-size:]


def normalised(text: str) -> str:
    """Output with JSON escaping undone and YAML line folding joined, for message matching."""
    return re.sub(r"\s+", " ", re.sub(r'\\+"', '"', text))


def ansible(args, timeout=900):
    """ansible-playbook from the checkout (not through conftest's run_playbook, which needs the shared cluster; also
    called from worker threads)."""
    return conftest.ansible_playbook(*args, timeout=timeout)


def run_playbook(path, extra_vars, diff=False, extra_args=()):
    return ansible([path, "-e", json.dumps(extra_vars), *(["--diff"] if diff else []), *extra_args])


def write_private(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(handle, "w") as stream:
        stream.write(text)
    return path


def token_of(kubeconfig: Path) -> str:
    return yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]


def admin_client():
    return config.new_client_from_config(config_file=str(ADMIN_KUBECONFIG))


def clean(obj: dict) -> dict:
    """An object read from the API, ready to be created again."""
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    meta = obj.get("metadata", {})
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        meta.pop(key, None)
    return obj


@pytest.fixture(scope="module")
def lp(tmp_path_factory):
    """Own cluster; RBAC (and the team ServiceAccount) applied by cluster-admin through playbooks/rbac.yml."""
    up = run_playbook("playbooks/cluster.yml", extra_vars=cluster_vars(CLUSTER))
    assert up.returncode == 0, tail(up)
    work = tmp_path_factory.mktemp("least-privilege")
    rbac_vars = {
        "gpushare_kubeconfig": str(ADMIN_KUBECONFIG),
        "rbac_manifest_path": str(work / "rbac.yaml"),
        "rbac_kubeconfig_path": str(work / "creds" / f"{SA}.kubeconfig"),
        "rbac_team_access": True,
        "rbac_team_kubeconfig_path": str(work / "creds" / f"{TEAM_SA}.kubeconfig"),
    }
    proc = run_playbook("playbooks/rbac.yml", extra_vars=rbac_vars)
    assert proc.returncode == 0, tail(proc)
    api = admin_client()
    yield {
        "work": work,
        "rbac_vars": rbac_vars,
        "manifest": [doc for doc in yaml.safe_load_all((work / "rbac.yaml").read_text()) if doc],
        "sa_kubeconfig": Path(rbac_vars["rbac_kubeconfig_path"]),
        "team_kubeconfig": Path(rbac_vars["rbac_team_kubeconfig_path"]),
        "core": client.CoreV1Api(api),
    }
    run_playbook("playbooks/cluster.yml", extra_vars={"gpushare_cluster_name": CLUSTER, "lab_cluster_state": "absent"})


@pytest.fixture(scope="module")
def lab_as_sa(lp):
    """The whole lab, run as the ServiceAccount (its kubeconfig holds nothing else); then the administrator re-runs
    playbooks/rbac.yml, which renders the guard from the nodes as the lab labelled them, and the ServiceAccount runs
    the guard step again (it now only verifies it)."""
    root = lp["work"] / "root"
    lab_vars = {"gpushare_kubeconfig": str(lp["sa_kubeconfig"]), "gpushare_lab_root": str(root)}
    started = time.monotonic()
    proc = ansible(["playbooks/lab.yml", "-e", json.dumps(lab_vars)])
    seconds = time.monotonic() - started
    refresh = run_playbook("playbooks/rbac.yml", extra_vars=lp["rbac_vars"])
    guard = ansible(["playbooks/lab.yml", "--tags", "admission_guard", "--skip-tags", "always", "-e", json.dumps(lab_vars)])
    return {"proc": proc, "root": root, "seconds": seconds, "refresh": refresh, "guard": guard}


# --------------------------------------------------------------------------- the whole lab


@pytest.mark.slow
def test_whole_lab_runs_green_as_the_service_account(lp, lab_as_sa):
    proc = lab_as_sa["proc"]
    assert proc.returncode == 0, tail(proc)
    output = normalised(proc.stdout + proc.stderr)
    # The only refusal: the guard the administrator installed before the lab labelled the nodes is out of date, and the
    # ServiceAccount may not rewrite it; the lab says so and who refreshes it.
    refusals = re.findall(r'cannot (\w+) resource "([\w/]+)"', output)
    # Besides, the preflight's reads the ServiceAccount may not make are skipped with a message (control-plane Leases,
    # the GPU operator's ClusterPolicies).
    assert set(refusals) <= {("patch", "validatingadmissionpolicies"), ("list", "leases"), ("list", "clusterpolicies")}, refusals
    assert "Fix: an administrator re-runs playbooks/rbac.yml" in output
    root = lab_as_sa["root"]
    for name in ("k8s/device-plugin-configs.yaml", "k8s/mig-job.yaml", "out/quota-denied.txt", "out/isolation.txt", "out/placement.txt"):
        assert (root / name).is_file(), name
    assert "exceeded quota: gpu-quota" in (root / "out/quota-denied.txt").read_text()
    node = lp["core"].read_node("lab-node-1")
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.metadata.labels["nvidia.com/device-plugin.config"] == "shared"


def test_after_the_administrator_refreshes_the_guard_the_service_account_verifies_it(lab_as_sa):
    refresh, guard = lab_as_sa["refresh"], lab_as_sa["guard"]
    assert refresh.returncode == 0, tail(refresh)
    assert guard.returncode == 0, tail(guard)
    output = normalised(guard.stdout + guard.stderr)
    assert "forbidden" not in output.lower() and "is not the one the configs and nodes call for" not in output
    # Nothing written: the write is skipped; the dry-run over-request is refused by the API server.
    assert re.search(r"TASK \[(gpushare.k8s.admission_guard : )?Write and apply the admission policy and its binding\] \*+ skipping", output)
    assert re.search(r"Wait until a dry-run over-request is refused.*?\] \*+ ok:", output), tail(guard)


@pytest.mark.usefixtures("lab_as_sa")
def test_the_kubeconfig_is_the_service_account_and_nothing_more(lp):
    sa_api = config.new_client_from_config(config_file=str(lp["sa_kubeconfig"]))
    review = client.AuthenticationV1Api(sa_api).create_self_subject_review({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert review.status.user_info.username == f"system:serviceaccount:{SA_NAMESPACE}:{SA}"
    core = client.CoreV1Api(sa_api)
    attempts = {
        "list secrets (its own token included)": lambda: core.list_namespaced_secret(SA_NAMESPACE),
        "create a namespace": lambda: core.create_namespace({"metadata": {"name": unique("lp-ns")}}),
        "delete a node": lambda: core.delete_node("lab-node-0"),
        "read another ConfigMap of gpu-share": lambda: core.read_namespaced_config_map("kube-root-ca.crt", LAB_NS),
        "read the kube-system namespace": lambda: core.read_namespace("kube-system"),
        "create a Pod in default": lambda: core.create_namespaced_pod("default", pod_body(unique("lp-pod"))),
    }
    for what, attempt in attempts.items():
        with pytest.raises(ApiException) as caught:
            attempt()
        assert caught.value.status == 403, f"the lab's ServiceAccount could {what}"


# --------------------------------------------------------------------------- what was taken away is refused


def sa_api(lp):
    return config.new_client_from_config(config_file=str(lp["sa_kubeconfig"]))


def denied(attempt) -> str:
    """The API server's refusal of ``attempt`` (RBAC's 403 or an admission policy's), as its message."""
    with pytest.raises(ApiException) as caught:
        attempt()
    assert caught.value.status in (403, 422), caught.value
    return json.loads(caught.value.body)["message"]


@pytest.mark.usefixtures("lab_as_sa")
def test_the_service_account_cannot_relabel_a_namespace(lp):
    """No namespace patch: Pod Security (or the guard's opt-in label) stays the administrator's."""
    core = client.CoreV1Api(sa_api(lp))
    for namespace in (LAB_NS, TEAM_NS):
        privileged = {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
        message = denied(lambda: core.patch_namespace(namespace, privileged))
        assert f'User "{SA_USER}" cannot patch resource "namespaces" in API group "" in the namespace "{namespace}"' in message
        assert core.read_namespace(namespace).metadata.name == namespace  # it may still read it (step 1)
    for namespace in (LAB_NS, TEAM_NS):  # the administrator's labels (playbooks/rbac.yml created the namespaces) stand
        assert (lp["core"].read_namespace(namespace).metadata.labels or {}).get("pod-security.kubernetes.io/enforce") == "baseline"


@pytest.mark.usefixtures("lab_as_sa")
def test_the_guard_is_the_administrators_and_the_service_account_only_reads_it(lp):
    admission = client.AdmissionregistrationV1Api(sa_api(lp))
    policy = admission.read_validating_admission_policy(GUARD)  # installed by playbooks/rbac.yml, read by the lab
    assert policy.metadata.name == GUARD
    fields = {f.manager for f in policy.metadata.managed_fields}
    assert fields and not any("serviceaccount" in manager.lower() for manager in fields)
    rogue = {"metadata": {"name": unique("lp-rogue")}, "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
        "validations": [{"expression": "false"}]}}
    group = 'in API group "admissionregistration.k8s.io" at the cluster scope'
    assert f'cannot create resource "validatingadmissionpolicies" {group}' in denied(
        lambda: admission.create_validating_admission_policy(rogue))
    off = {"spec": {"validationActions": ["Audit"]}}
    assert f'cannot patch resource "validatingadmissionpolicybindings" {group}' in denied(
        lambda: admission.patch_validating_admission_policy_binding(GUARD, off))
    assert f'cannot delete resource "validatingadmissionpolicies" {group}' in denied(
        lambda: admission.delete_validating_admission_policy(GUARD))
    assert f'cannot patch resource "validatingadmissionpolicies" {group}' in denied(
        lambda: admission.patch_validating_admission_policy(NODE_KEYS, {"spec": {"failurePolicy": "Ignore"}}))


NODE = "lab-node-0"
POLICY_DENIAL = f"ValidatingAdmissionPolicy '{NODE_KEYS}' with binding '{NODE_KEYS}' denied request"
NODE_WRITES = {
    # what the ServiceAccount tries: (patch of the node or of its status, what the refusal names)
    "another label": ("node", {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}},
                      "may change only nvidia.com/* labels of a node; this request changes node-role.kubernetes.io/control-plane"),
    "a label removed": ("node", {"metadata": {"labels": {"kubernetes.io/hostname": None}}},
                        "may change only nvidia.com/* labels of a node; this request changes kubernetes.io/hostname"),
    "a label that merely looks like ours": ("node", {"metadata": {"labels": {"nvidia.com.evil/x": "1"}}},
                                            "this request changes nvidia.com.evil/x"),
    "an annotation": ("node", {"metadata": {"annotations": {"example.com/owner": "lab"}}},
                      "may not change a node's annotations, finalizers or owner references"),
    "a taint": ("node", {"spec": {"taints": [{"key": "example.com/drain", "effect": "NoSchedule"}]}},
                "may not change a node's spec"),
    "unschedulable": ("node", {"spec": {"unschedulable": True}}, "may not change a node's spec"),
    "another extended resource": ("status", {"status": {"capacity": {"example.com/fpga": "4"}, "allocatable": {"example.com/fpga": "4"}}},
                                  "may change only nvidia.com/* status.capacity resources of a node; this request changes example.com/fpga"),
    "cpu": ("status", {"status": {"allocatable": {"cpu": "512"}}},
            "may change only nvidia.com/* status.allocatable resources of a node; this request changes cpu"),
    "a condition": ("status", {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Drained"}]}},
                    "may not change a node's status other than capacity and allocatable"),
}


@pytest.mark.usefixtures("lab_as_sa")
@pytest.mark.parametrize("what", NODE_WRITES)
def test_node_writes_are_limited_to_nvidia_keys(lp, what):
    """The administrator's node-keys policy (CEL on oldObject and object, matched to the ServiceAccount's user)."""
    core = client.CoreV1Api(sa_api(lp))
    kind, body, names = NODE_WRITES[what]
    patch = core.patch_node if kind == "node" else core.patch_node_status
    before = lp["core"].read_node(NODE)

    def refused_by_the_policy():
        message = denied(lambda: patch(NODE, body))
        return message if POLICY_DENIAL in message else None

    message = wait_for(refused_by_the_policy, timeout=15, what="the node-keys policy to refuse the write")
    assert SA_USER in message and names in message, message
    after = lp["core"].read_node(NODE)
    assert (after.metadata.labels, after.metadata.annotations, after.spec.taints, after.spec.unschedulable) == (
        before.metadata.labels, before.metadata.annotations, before.spec.taints, before.spec.unschedulable)
    assert "example.com/fpga" not in after.status.capacity and after.status.allocatable["cpu"] == before.status.allocatable["cpu"]


@pytest.mark.usefixtures("lab_as_sa")
def test_node_writes_of_nvidia_keys_pass_and_the_policy_binds_only_the_service_account(lp):
    """Each write is read back by the administrator: the API server stored what the ServiceAccount sent."""
    core, admin = client.CoreV1Api(sa_api(lp)), lp["core"]
    probe = "nvidia.com/lp-probe"
    core.patch_node(NODE, {"metadata": {"labels": {probe: "1"}}})
    assert admin.read_node(NODE).metadata.labels.get(probe) == "1"
    core.patch_node(NODE, {"metadata": {"labels": {probe: None}}})
    assert probe not in admin.read_node(NODE).metadata.labels
    # Status: the lab's own slots written again as they are (lab-node-0: two unshared GPUs), then a new nvidia.com/*
    # resource stored and removed.
    core.patch_node_status(NODE, {"status": {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}}})
    core.patch_node_status(NODE, {"status": {"capacity": {probe: "3"}, "allocatable": {probe: "3"}}})
    after = admin.read_node(NODE).status
    assert (after.capacity.get(probe), after.allocatable.get(probe)) == ("3", "3")
    assert (after.capacity["nvidia.com/gpu"], after.allocatable["nvidia.com/gpu"]) == ("2", "2")
    core.patch_node_status(NODE, {"status": {"capacity": {probe: None}, "allocatable": {probe: None}}})
    after = admin.read_node(NODE).status
    assert probe not in after.capacity and probe not in after.allocatable
    # The administrator (another user) is not bound by the ServiceAccount's policy.
    admin.patch_node(NODE, {"metadata": {"annotations": {"example.com/admin": "yes"}}})
    assert admin.read_node(NODE).metadata.annotations.get("example.com/admin") == "yes"
    admin.patch_node(NODE, {"metadata": {"annotations": {"example.com/admin": None}}})
    assert "example.com/admin" not in admin.read_node(NODE).metadata.annotations


@pytest.mark.usefixtures("lab_as_sa")
def test_the_service_account_creates_only_the_configmap_it_owns_in_the_device_plugin_namespace(lp):
    """RBAC cannot limit a create to names; the administrator's create-names policy does. The ServiceAccount's create of
    another ConfigMap there (a planted record for another role to read, say) is refused; in another namespace RBAC refuses."""
    core = client.CoreV1Api(sa_api(lp))
    create_names = f"{SA}-create-names"
    planted = {"metadata": {"name": "gpushare-sharing-record"}, "data": {"record.json": "{}"}}

    def refused_by_the_policy():
        message = denied(lambda: core.create_namespaced_config_map(LAB_NS, planted))
        return message if f"ValidatingAdmissionPolicy '{create_names}'" in message else None

    message = wait_for(refused_by_the_policy, timeout=15, what="the create-names policy to refuse the create")
    assert f"{SA_USER} may create only ConfigMap device-plugin-configs in namespace {LAB_NS}; this request creates " \
           "gpushare-sharing-record" in message, message
    generated = {"metadata": {"generateName": "planted-"}, "data": {}}
    assert f"ValidatingAdmissionPolicy '{create_names}'" in denied(lambda: core.create_namespaced_config_map(LAB_NS, generated))
    assert not [c for c in lp["core"].list_namespaced_config_map(LAB_NS).items if c.metadata.name != "device-plugin-configs"
                and c.metadata.name != "kube-root-ca.crt"]
    # its own ConfigMap the lab created; another user (the administrator) is not bound by the policy
    assert lp["core"].read_namespaced_config_map("device-plugin-configs", LAB_NS).data
    lp["core"].create_namespaced_config_map(LAB_NS, {"metadata": {"name": "lp-admin-probe"}, "data": {}})
    lp["core"].delete_namespaced_config_map("lp-admin-probe", LAB_NS)


@pytest.mark.usefixtures("lab_as_sa")
def test_lists_are_scoped_to_the_lab_namespaces(lp):
    api = sa_api(lp)
    core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
    for namespace in (LAB_NS, TEAM_NS):  # what the reports read ...
        core.list_namespaced_pod(namespace)
        apps.list_namespaced_deployment(namespace)
        batch.list_namespaced_job(namespace)
    core.list_namespaced_resource_quota(TEAM_NS)
    core.list_node()  # nodes belong to no namespace
    cluster_wide = 'at the cluster scope'
    refused = {  # ... and nothing beyond them
        f'cannot list resource "pods" in API group "" {cluster_wide}': core.list_pod_for_all_namespaces,
        f'cannot list resource "resourcequotas" in API group "" {cluster_wide}': core.list_resource_quota_for_all_namespaces,
        f'cannot list resource "deployments" in API group "apps" {cluster_wide}': apps.list_deployment_for_all_namespaces,
        f'cannot list resource "cronjobs" in API group "batch" {cluster_wide}': batch.list_cron_job_for_all_namespaces,
        'cannot list resource "pods" in API group "" in the namespace "kube-system"': lambda: core.list_namespaced_pod("kube-system"),
        'cannot list resource "resourcequotas" in API group "" in the namespace "gpu-share"':
            lambda: core.list_namespaced_resource_quota(LAB_NS),
        'cannot list resource "namespaces" in API group "" at the cluster scope': core.list_namespace,
    }
    for expected, attempt in refused.items():
        assert f'User "{SA_USER}" {expected}' in denied(attempt)


INJECTED_BINDING = "lp-injected-admin"
INJECTION = (f"{TEAM_NS}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {INJECTED_BINDING}\n"
             "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n"
             f"- kind: ServiceAccount\n  name: {SA}\n  namespace: {SA_NAMESPACE}\n---\napiVersion: v1\nkind: Namespace\n"
             f"metadata:\n  name: {TEAM_NS}")


def test_an_injected_namespace_is_refused_before_anything_is_applied(lp):
    """Reproduced with the YAML template: this inventory value bound the ServiceAccount to cluster-admin."""
    manifest = lp["work"] / "injected-rbac.yaml"
    extra = dict(lp["rbac_vars"], gpushare_team_namespace=INJECTION, rbac_manifest_path=str(manifest))
    proc = run_playbook("playbooks/rbac.yml", extra_vars=extra)
    rbac_api = client.RbacAuthorizationV1Api(admin_client())
    bindings = [b.metadata.name for b in rbac_api.list_cluster_role_binding().items if b.role_ref.name == "cluster-admin"]
    assert INJECTED_BINDING not in bindings, "the injected ClusterRoleBinding to cluster-admin was applied"
    assert proc.returncode != 0, tail(proc)
    output = normalised(proc.stdout + proc.stderr)
    assert "rbac_team_namespace: " in output and "team-a\\n---\\napiVersion" in output, tail(proc)
    assert "is not a DNS-1123 label" in output
    assert "Fix: use a name such as team-a" in output
    assert not manifest.exists()


# --------------------------------------------------------------------------- the team ServiceAccount


def pod_body(name, gpus=0, node_selector=None):
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    spec = {"containers": [{"name": "main", "image": "pause:3.10", "resources": resources}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def forbidden(attempt) -> str:
    with pytest.raises(ApiException) as caught:
        attempt()
    assert caught.value.status == 403, caught.value
    return json.loads(caught.value.body)["message"]


@pytest.mark.usefixtures("lab_as_sa")
def test_team_service_account_runs_pods_in_its_namespace_only(lp):
    team_api = config.new_client_from_config(config_file=str(lp["team_kubeconfig"]))
    core = client.CoreV1Api(team_api)
    user = f"system:serviceaccount:{TEAM_NS}:{TEAM_SA}"

    name = unique("team-user")
    created = core.create_namespaced_pod(TEAM_NS, pod_body(name))
    assert created.metadata.name == name
    assert name in [p.metadata.name for p in core.list_namespaced_pod(TEAM_NS).items]
    quota = core.read_namespaced_resource_quota(QUOTA, TEAM_NS)  # it may read its quota ...
    assert quota.spec.hard["requests.nvidia.com/gpu"] == "2"
    core.delete_namespaced_pod(name, TEAM_NS, grace_period_seconds=0)

    # ... and nothing else.
    message = forbidden(lambda: core.create_namespaced_pod(LAB_NS, pod_body(unique("team-user"))))
    assert f'User "{user}" cannot create resource "pods"' in message and f'in the namespace "{LAB_NS}"' in message
    assert 'cannot list resource "pods"' in forbidden(lambda: core.list_namespaced_pod(LAB_NS))
    assert 'cannot get resource "configmaps"' in forbidden(lambda: core.read_namespaced_config_map(CONFIGMAP, LAB_NS))
    raise_quota = {"spec": {"hard": {"requests.nvidia.com/gpu": "100"}}}
    assert 'cannot patch resource "resourcequotas"' in forbidden(lambda: core.patch_namespaced_resource_quota(QUOTA, TEAM_NS, raise_quota))
    assert 'cannot delete resource "resourcequotas"' in forbidden(lambda: core.delete_namespaced_resource_quota(QUOTA, TEAM_NS))
    assert 'cannot patch resource "nodes"' in forbidden(lambda: core.patch_node("lab-node-0", {"metadata": {"labels": {"team": "a"}}}))
    gpus = {"status": {"capacity": {"nvidia.com/gpu": "64"}, "allocatable": {"nvidia.com/gpu": "64"}}}
    assert 'cannot patch resource "nodes/status"' in forbidden(lambda: core.patch_node_status("lab-node-1", gpus))
    assert 'cannot list resource "nodes"' in forbidden(core.list_node)
    grant = {"metadata": {"name": "more"}, "rules": [{"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["patch"]}]}
    assert 'cannot create resource "roles"' in forbidden(lambda: client.RbacAuthorizationV1Api(team_api).create_namespaced_role(TEAM_NS, grant))
    assert lp["core"].read_namespaced_resource_quota(QUOTA, TEAM_NS).spec.hard["requests.nvidia.com/gpu"] == "2"


# --------------------------------------------------------------------------- secrets


VERBOSE = ("api_key", "lab_step_1", "rbac_role")


def verbose_args(lp) -> dict:
    """-vvv runs: node_resources and k8s_info with api_key, the lab's first step with the ServiceAccount's
    kubeconfig, and the RBAC role itself (which reads the token Secrets), with --diff."""
    work = lp["work"]
    cluster = yaml.safe_load(lp["sa_kubeconfig"].read_text())["clusters"][0]["cluster"]
    ca_file = work / "ca.crt"
    ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    auth_vars = write_private(work / "auth-vars.json", json.dumps(
        {"it_host": cluster["server"], "it_token": token_of(lp["sa_kubeconfig"]), "it_ca_cert": str(ca_file)}))
    lab_vars = {"gpushare_kubeconfig": str(lp["sa_kubeconfig"]), "gpushare_lab_root": str(work / "root-vvv")}
    return {
        "api_key": ["tests/integration/playbooks/secret_hygiene.yml", "-vvv", "-e", f"@{auth_vars}"],
        "lab_step_1": ["playbooks/lab.yml", "-vvv", "--tags", "step1", "-e", json.dumps(lab_vars)],
        "rbac_role": ["playbooks/rbac.yml", "-vvv", "--diff", "-e", json.dumps(lp["rbac_vars"])],
    }


@pytest.mark.parametrize("run", VERBOSE)
def test_tokens_never_reach_the_output(lp, runs, run):
    proc = runs["verbose", run]["proc"]
    assert proc.returncode == 0, tail(proc)
    output = proc.stdout + proc.stderr
    # really -vvv: a module process's connection lines, or the controller path's own line
    assert "<localhost> EXEC" in output or "ESTABLISH LOCAL CONNECTION" in output or "IN THE CONTROLLER (no module process)" in output
    for kubeconfig in (lp["sa_kubeconfig"], lp["team_kubeconfig"]):
        token = token_of(kubeconfig)
        assert len(token) > 100
        for form in (token, base64.b64encode(token.encode()).decode()):
            assert form not in output, f"{run}: a token of {kubeconfig.name} is in the output"
            assert form[10:50] not in output, f"{run}: part of a token of {kubeconfig.name} is in the output"


def test_files_holding_credentials_are_private(lp):
    for kubeconfig in (lp["sa_kubeconfig"], lp["team_kubeconfig"]):
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600, kubeconfig
        assert stat.S_IMODE(kubeconfig.parent.stat().st_mode) == 0o700, kubeconfig.parent
    assert stat.S_IMODE(KWOKCTL_CONFIG.stat().st_mode) == 0o600, KWOKCTL_CONFIG
    manifest = (lp["work"] / "rbac.yaml").read_text()
    assert token_of(lp["sa_kubeconfig"]) not in manifest and "token:" not in manifest


def guard_parameters(playbook: str) -> dict:
    """The admission_guard role's parameters in a playbook: a `roles:` entry, or an import_role task (in a block): the play's
    variables (lab.yml sets every role's there, checked by role_argument_check) under the task's own."""
    [play] = yaml.safe_load((REPO / "playbooks" / playbook).read_text())
    entries = [dict(r) for r in play.get("roles", []) if r["role"] == "gpushare.k8s.admission_guard"]

    def walk(tasks):
        for task in tasks or []:
            walk(task.get("block"))
            if (task.get("ansible.builtin.import_role") or {}).get("name") == "gpushare.k8s.admission_guard":
                entries.append({**(play.get("vars") or {}), **(task.get("vars") or {})})

    walk(play.get("tasks"))
    [entry] = entries
    return {key: value for key, value in entry.items() if key.startswith("admission_guard_") and key != "admission_guard_state"}


def test_the_administrator_installs_the_guard_the_lab_would_write():
    """The lab run as the ServiceAccount writes nothing only if playbooks/rbac.yml installs the same guard."""
    assert guard_parameters("rbac.yml") == guard_parameters("lab.yml")


def kubectl_binary() -> str:
    """kubectl as the lab cluster uses it (kwokctl's own config names it)."""
    for doc in yaml.safe_load_all((ADMIN_KUBECONFIG.parent / "kwok.yaml").read_text()):
        binary = ((doc or {}).get("options") or {}).get("kubectlBinary")
        if binary and os.path.isfile(binary):
            return binary
    return "kubectl"


def jwt_claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@pytest.mark.usefixtures("lab_as_sa")
def test_the_kubeconfig_holds_an_expiring_token_and_no_long_lived_token_exists(lp):
    for kubeconfig, namespace, account in ((lp["sa_kubeconfig"], SA_NAMESPACE, SA), (lp["team_kubeconfig"], TEAM_NS, TEAM_SA)):
        claims = jwt_claims(token_of(kubeconfig))
        assert claims["sub"] == f"system:serviceaccount:{namespace}:{account}"
        assert claims["exp"] - claims["iat"] == 8 * 3600  # the default token_expiration
        secrets = lp["core"].list_namespaced_secret(namespace).items
        assert not [s.metadata.name for s in secrets if s.type == "kubernetes.io/service-account-token"]
        # kubectl itself reads the file (the collection's mark is a kubeconfig extension it keeps and ignores).
        whoami = subprocess.run([kubectl_binary(), "--kubeconfig", str(kubeconfig), "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"],
                                capture_output=True, text=True, timeout=60, check=False)
        assert whoami.returncode == 0 and whoami.stdout == f"system:serviceaccount:{namespace}:{account}", whoami.stderr
        marks = [e for e in yaml.safe_load(kubeconfig.read_text())["extensions"] if e["name"] == "gpushare.k8s/service-account-kubeconfig"]
        assert marks[0]["extension"]["serviceAccount"] == f"{namespace}/{account}"


@pytest.mark.usefixtures("lab_as_sa")
def test_a_second_run_keeps_a_valid_token(lp):
    before = lp["sa_kubeconfig"].read_text()
    proc = run_playbook("playbooks/rbac.yml", extra_vars=lp["rbac_vars"])
    assert proc.returncode == 0, tail(proc)
    assert lp["sa_kubeconfig"].read_text() == before


def test_someone_elses_kubeconfig_is_never_replaced_unless_forced_nor_shown(lp):
    """The administrator's own kubeconfig at the kubeconfig path, flattened as `kubectl config view --flatten` writes it
    (client key and certificate embedded), plus a user with a password."""
    admin = yaml.safe_load(ADMIN_KUBECONFIG.read_text())
    user = admin["users"][0]["user"]
    key_pem, cert_pem = Path(user.pop("client-key")).read_text(), Path(user.pop("client-certificate")).read_text()
    user["client-key-data"] = base64.b64encode(key_pem.encode()).decode()
    user["client-certificate-data"] = base64.b64encode(cert_pem.encode()).decode()
    password = unique("admins-password")
    admin["users"].append({"name": "basic", "user": {"username": "admin", "password": password}})
    path = lp["work"] / "admins" / "config"
    path.parent.mkdir(mode=0o700)
    path.write_text(yaml.safe_dump(admin))
    original = path.read_text()
    credentials = [user["client-key-data"], user["client-certificate-data"], password]
    credentials += [line for pem in (key_pem, cert_pem) for line in pem.splitlines() if "-----" not in line]
    extra = dict(lp["rbac_vars"], rbac_kubeconfig_path=str(path), rbac_team_access=False)

    refused = run_playbook("playbooks/rbac.yml", extra_vars=extra, diff=True)
    assert refused.returncode != 0, tail(refused)
    output = normalised(refused.stdout + refused.stderr)
    assert f"{path} exists and was not written by gpushare.k8s.service_account_kubeconfig" in output, tail(refused)
    assert "set force: true to replace it" in output
    assert path.read_text() == original

    forced = run_playbook("playbooks/rbac.yml", extra_vars=dict(extra, rbac_kubeconfig_force=True), diff=True, extra_args=["-v"])
    assert forced.returncode == 0, tail(forced)
    replaced = yaml.safe_load(path.read_text())
    assert replaced["users"][0]["user"].keys() == {"token"} and replaced["extensions"][0]["name"] == "gpushare.k8s/service-account-kubeconfig"
    shown = forced.stdout + forced.stderr
    assert "client-key-data" in shown  # the diff shows the replaced file's shape ...
    for value in credentials:  # ... and none of its credentials (a PEM's or base64's head is the same for all: the middle)
        middle = value[len(value) // 2 - 20:len(value) // 2 + 20] if len(value) > 40 else value
        assert middle not in shown, "a credential of the replaced kubeconfig is in the output"


# --------------------------------------------------------------------------- every rule is needed


class Case(NamedTuple):
    """Remove one rule (or one verb of it) and run the lab up to the step that needs it."""

    id: str
    namespace: Optional[str]  # None: the ClusterRole; else the Role in that namespace
    resources: tuple
    verbs: tuple  # the rule, as rendered
    tags: str
    failing: tuple  # (verb, resource, API group) of the call that must be forbidden
    drop: Optional[str] = None  # a verb to drop, instead of the whole rule
    prepare: Optional[str] = None  # state the case needs (sequential cases)
    extra: tuple = ()
    scope: Optional[str] = None  # where the API server says the call was refused, when not the rule's own scope


CORE, APPS, BATCH, ADMISSION = "", "apps", "batch", "admissionregistration.k8s.io"
VAP = ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
INTENT_POLICIES = ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings") + VAP
WORKLOADS_CORE = ("pods", "podtemplates", "replicationcontrollers")
APPS_WORKLOADS, BATCH_WORKLOADS = ("daemonsets", "deployments", "replicasets", "statefulsets"), ("cronjobs", "jobs")
CASES = [
    # ClusterRole
    # node_resources reads one node with a GET (step 3's single MIG node), several with one LIST
    Case("nodes-get", None, ("nodes",), ("get", "patch"), "step3", ("get", "nodes", CORE)),
    # another product: the labels change, so a PATCH is needed (a converged node is not written)
    Case("nodes-patch", None, ("nodes",), ("get", "patch"), "gpu_feature_labels", ("patch", "nodes", CORE), drop="patch",
         extra=("-e", "gpushare_gpu_product=NVIDIA-H100-80GB-HBM3")),
    # the preflight (tagged always) lists the nodes first
    Case("nodes-list", None, ("nodes",), ("list",), "always", ("list", "nodes", CORE)),
    # a namespace's own namespace is itself, for authorization
    Case("namespaces-get", None, ("namespaces",), ("get",), "step1", ("get", "namespaces", CORE), scope=LAB_NS),
    # the lab reads the guard the administrator installed before anything else
    Case("guard-get", None, VAP, ("get",), "admission_guard", ("get", VAP[0], ADMISSION)),
    # the lab reads the GPU intent policies the administrator installed (and writes nothing when they are as built)
    Case("intent-get", None, INTENT_POLICIES, ("get",), "intent_admission", ("get", INTENT_POLICIES[0], ADMISSION)),
    # Role in gpu-share
    Case("configmaps-get", LAB_NS, ("configmaps",), ("get", "patch"), "step1", ("get", "configmaps", CORE)),
    Case("configmaps-patch", LAB_NS, ("configmaps",), ("get", "patch"), "step1", ("patch", "configmaps", CORE), drop="patch"),
    Case("lab-pods-get", LAB_NS, ("pods",), ("get", "create", "patch"), "step4", ("get", "pods", CORE)),
    Case("lab-pods-patch", LAB_NS, ("pods",), ("get", "create", "patch"), "step4", ("patch", "pods", CORE), drop="patch"),
    # the guard's dry-run probe Pod is created in gpu-share on every run
    Case("lab-pods-create", LAB_NS, ("pods",), ("get", "create", "patch"), "admission_guard", ("create", "pods", CORE),
         drop="create", extra=("-e", "admission_guard_timeout=3")),
    # the MIG migration report lists every workload kind of the lab's namespaces (gpu-share first)
    # step 8 deletes the intent Pods it created, by name (the run fails at the removal; the administrator removes them after)
    Case("lab-intent-pods-delete", LAB_NS, ("pods",), ("delete",), "step8", ("delete", "pods", CORE), prepare="intent-pods"),
    Case("lab-workloads-core-list", LAB_NS, WORKLOADS_CORE, ("list",), "mig_migration_report", ("list", "pods", CORE)),
    Case("lab-workloads-apps-list", LAB_NS, APPS_WORKLOADS, ("list",), "mig_migration_report", ("list", "daemonsets", APPS)),
    Case("lab-workloads-batch-list", LAB_NS, BATCH_WORKLOADS, ("list",), "mig_migration_report", ("list", "cronjobs", BATCH)),
    # Role in team-a
    Case("team-pods-get", TEAM_NS, ("pods",), ("get", "create", "patch"), "step5", ("get", "pods", CORE)),
    Case("team-pods-patch", TEAM_NS, ("pods",), ("get", "create", "patch"), "step5", ("patch", "pods", CORE), drop="patch"),
    # team-over is created (and refused by the quota) on every run
    Case("team-pods-create", TEAM_NS, ("pods",), ("get", "create", "patch"), "step5", ("create", "pods", CORE), drop="create"),
    Case("team-workloads-core-list", TEAM_NS, WORKLOADS_CORE, ("list",), "mig_migration_report", ("list", "pods", CORE)),
    Case("team-workloads-apps-list", TEAM_NS, APPS_WORKLOADS, ("list",), "mig_migration_report", ("list", "daemonsets", APPS)),
    Case("team-workloads-batch-list", TEAM_NS, BATCH_WORKLOADS, ("list",), "mig_migration_report", ("list", "cronjobs", BATCH)),
    Case("resourcequotas-get", TEAM_NS, ("resourcequotas",), ("get", "patch"), "step5", ("get", "resourcequotas", CORE)),
    Case("resourcequotas-patch", TEAM_NS, ("resourcequotas",), ("get", "patch"), "step5", ("patch", "resourcequotas", CORE), drop="patch"),
    Case("resourcequotas-list", TEAM_NS, ("resourcequotas",), ("list",), "quota_coverage", ("list", "resourcequotas", CORE)),
    # Sequential: each needs the object it creates (or the status it writes) to be absent first.
    Case("nodes-status-patch", None, ("nodes/status",), ("patch",), "step2", ("patch", "nodes/status", CORE), prepare="node-status"),
    Case("configmaps-create", LAB_NS, ("configmaps",), ("create",), "step1", ("create", "configmaps", CORE), prepare="configmap"),
    Case("resourcequotas-create", TEAM_NS, ("resourcequotas",), ("create",), "step5", ("create", "resourcequotas", CORE), prepare="quota"),
]


def rule_matches(rule, case):
    return sorted(rule.get("resources", [])) == sorted(case.resources) and sorted(rule["verbs"]) == sorted(case.verbs)


def find_role(manifest, namespace):
    kind = "Role" if namespace else "ClusterRole"
    for doc in manifest:
        if doc["kind"] == kind and doc["metadata"]["name"] == SA and doc["metadata"].get("namespace") == namespace:
            return doc
    raise AssertionError(f"no {kind} {SA} {namespace or ''} in the rendered RBAC")


def test_every_rule_and_verb_has_a_removal_case(lp):
    """Each verb of each rule must be shown to be needed: a grant added without a case here fails."""
    proved = {}
    for case in CASES:
        rules = [r for r in find_role(lp["manifest"], case.namespace)["rules"] if rule_matches(r, case)]
        assert len(rules) == 1, f"{case.id}: rule {case.resources} {case.verbs} is not (or not once) in the rendered RBAC"
        proved.setdefault((case.namespace, tuple(sorted(case.resources)), tuple(sorted(case.verbs))), set()).add(case.failing[0])
    for doc in lp["manifest"]:
        if doc["kind"] in ("ClusterRole", "Role") and doc["metadata"]["name"] == SA:
            for rule in doc["rules"]:
                key = (doc["metadata"].get("namespace"), tuple(sorted(rule["resources"])), tuple(sorted(rule["verbs"])))
                assert proved.get(key) == set(rule["verbs"]), f"no removal case proves {sorted(set(rule['verbs']) - proved.get(key, set()))} of {key}"


def case_account(api, case, index, lp) -> tuple:
    """A ServiceAccount bound to the lab's RBAC minus the case's rule; returns (name, kubeconfig path)."""
    name = f"lp-{index:02d}-{case.id}"[:63]
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    manifest = lp["manifest"]
    labels = {"gpushare.k8s/test": "least-privilege"}
    core.create_namespaced_service_account(SA_NAMESPACE, {"metadata": {"name": name, "labels": labels}})
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": SA_NAMESPACE}]
    for doc in manifest:
        if doc["kind"] not in ("ClusterRole", "Role") or doc["metadata"]["name"] != SA:
            continue
        namespace = doc["metadata"].get("namespace")
        rules = copy.deepcopy(doc["rules"])
        if namespace == case.namespace:
            hits = [i for i, rule in enumerate(rules) if rule_matches(rule, case)]
            assert len(hits) == 1, (case.id, rules)
            if case.drop:
                rules[hits[0]]["verbs"] = [v for v in rules[hits[0]]["verbs"] if v != case.drop]
            else:
                del rules[hits[0]]
        role = {"metadata": {"name": name, "labels": labels}, "rules": rules}
        ref = {"apiGroup": RBAC_GROUP, "kind": doc["kind"], "name": name}
        binding = {"metadata": {"name": name, "labels": labels}, "roleRef": ref, "subjects": subject}
        if namespace:
            rbac.create_namespaced_role(namespace, role)
            rbac.create_namespaced_role_binding(namespace, binding)
        else:
            rbac.create_cluster_role(role)
            rbac.create_cluster_role_binding(binding)
    token = core.create_namespaced_service_account_token(name, SA_NAMESPACE, {"spec": {"expirationSeconds": 3600}}).status.token
    kubeconfig = yaml.safe_load(lp["sa_kubeconfig"].read_text())
    kubeconfig["users"][0]["user"]["token"] = token
    return name, write_private(lp["work"] / "creds" / f"{name}.kubeconfig", yaml.safe_dump(kubeconfig))


class Prepared:
    """Make the state a sequential case needs (as cluster-admin), and put it back afterwards."""

    def __init__(self, api, what):
        self.api, self.what, self.saved = api, what, None

    def __enter__(self):
        core = client.CoreV1Api(self.api)
        serialise = self.api.sanitize_for_serialization
        if self.what == "configmap":
            self.saved = clean(serialise(core.read_namespaced_config_map(CONFIGMAP, LAB_NS)))
            core.delete_namespaced_config_map(CONFIGMAP, LAB_NS)
        elif self.what == "quota":
            self.saved = clean(serialise(core.read_namespaced_resource_quota(QUOTA, TEAM_NS)))
            core.delete_namespaced_resource_quota(QUOTA, TEAM_NS)
        elif self.what == "node-status":
            status = core.read_node("lab-node-0").status
            self.saved = {"capacity": {"nvidia.com/gpu": status.capacity["nvidia.com/gpu"]},
                          "allocatable": {"nvidia.com/gpu": status.allocatable["nvidia.com/gpu"]}}
            core.patch_node_status("lab-node-0", {"status": {"capacity": {"nvidia.com/gpu": None}, "allocatable": {"nvidia.com/gpu": None}}})
        return self

    def __exit__(self, *exc):
        core = client.CoreV1Api(self.api)
        if self.what == "configmap":
            core.create_namespaced_config_map(LAB_NS, self.saved)
        elif self.what == "quota":
            core.create_namespaced_resource_quota(TEAM_NS, self.saved)
        elif self.what == "node-status":
            core.patch_node_status("lab-node-0", {"status": self.saved})
        elif self.what == "intent-pods":  # what the run could not remove: step 8's intent Pods
            for pod in core.list_namespaced_pod(LAB_NS).items:
                if pod.metadata.name.startswith("intent-"):
                    core.delete_namespaced_pod(pod.metadata.name, LAB_NS, grace_period_seconds=0)
        return False


def run_case(index, case, lp):
    api = admin_client()
    started = time.monotonic()
    name, kubeconfig = case_account(api, case, index, lp)
    lab_vars = {"gpushare_kubeconfig": str(kubeconfig), "gpushare_lab_root": str(lp["work"] / "cases" / case.id)}
    # Only the step: the preflight and the lab report (tagged always) would fail first on several rules.
    skip = [] if case.tags == "always" else ["--skip-tags", "always"]
    args = ["playbooks/lab.yml", "--tags", case.tags, *skip, "-e", json.dumps(lab_vars), *case.extra]
    if case.prepare:
        with Prepared(api, case.prepare):
            proc = ansible(args)
    else:
        proc = ansible(args)
    return {"proc": proc, "account": name, "seconds": time.monotonic() - started}


def timed(function, *args):
    started = time.monotonic()
    return {"proc": function(*args), "seconds": time.monotonic() - started}


@pytest.fixture(scope="module")
def runs(request, lp, lab_as_sa):
    """The requested -vvv runs and removal cases: the ones that leave the cluster as they found it
    WORKERS at a time, then the ones that must remove an object first, one by one."""
    assert lab_as_sa["proc"].returncode == 0, "the whole lab must run as the ServiceAccount first:\n" + tail(lab_as_sa["proc"])
    # Only this module's items: other modules' parameters may be dicts (unhashable) and are not ours.
    requested = {(item.originalname, value.id if isinstance(value, Case) else str(value))
                 for item in request.session.items
                 if item.module is request.module and hasattr(item, "callspec")
                 for value in item.callspec.params.values()}
    verbose = verbose_args(lp)
    indexed = [(index, case) for index, case in enumerate(CASES) if ("test_removing_one_rule_fails_naming_it", case.id) in requested]
    results = {}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {("verbose", name): pool.submit(timed, ansible, args) for name, args in verbose.items()
                   if ("test_tokens_never_reach_the_output", name) in requested}
        futures.update({("case", case.id): pool.submit(run_case, index, case, lp) for index, case in indexed if not case.prepare})
        results.update({key: future.result() for key, future in futures.items()})
    for index, case in indexed:
        if case.prepare:
            results["case", case.id] = run_case(index, case, lp)
    return results


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_removing_one_rule_fails_naming_it(runs, case):
    run = runs["case", case.id]
    proc = run["proc"]
    verb, resource, group = case.failing
    namespace = case.scope or case.namespace
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    expected = (f'User "system:serviceaccount:{SA_NAMESPACE}:{run["account"]}" cannot {verb} resource "{resource}" '
                f'in API group "{group}" {scope}')
    assert proc.returncode != 0, f"the lab up to {case.tags} passed without {case.id}:\n" + tail(proc)
    assert expected in normalised(proc.stdout + proc.stderr), f"expected: {expected}\n" + tail(proc)
