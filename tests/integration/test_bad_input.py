# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad input is refused before anything is written: the playbook-level half of the bad-input matrix.

Each case runs playbooks/lab.yml with `-e` overrides of the inventory (or one role, or the
gpu_request_check module, through tests/integration/playbooks/bad_input.yml, or playbooks/cluster.yml)
against a cluster of this module's own, which already holds a team quota in use. Every case must fail
with its own message, written out below, naming the field, the problem and the fix; report nothing
changed; leave its lab root unwritten; and the cluster (nodes' labels and GPU status, lab namespaces,
ConfigMaps, quotas, Pods, admission policies, ClusterRoleBindings) must be the same afterwards. Names
that would have injected a document into a manifest the lab wrote as text (a namespace holding
"\n---\n" and a ClusterRoleBinding to cluster-admin) are among the cases. The pure functions behind these messages are covered case by case in
tests/unit (test_device_plugin.py, test_mig.py, test_gpushare_filters.py, test_gpu_requests.py,
test_preflight.py, test_bad_input_matrix.py).

The cases are independent and only read the cluster, so they run a few at a time.
"""
from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from kubernetes import client

from reliability import LAB_VARS, REPO, TRACEBACK, OwnCluster, output, playbook, recap, snapshot, tail, wait_until

CLUSTER = "gpushare-it-badinput"
ROLE_PLAYBOOK = "tests/integration/playbooks/bad_input.yml"
CONFIGS = LAB_VARS["gpushare_device_plugin_configs"]
NODES = LAB_VARS["gpushare_nodes"]
MIG_NODE = NODES[2]
# The lab cluster creates the DRA track's nodes too (inventory/group_vars/all/dra.yml).
DRA_NODES = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "dra.yml").read_text())["gpushare_dra_nodes"]
CLUSTER_NODES = ", ".join(sorted(node["name"] for node in NODES + DRA_NODES))


def configs(name, path, value):
    """The lab's configs with ``configs[name]`` changed at ``path`` (keys and list indexes)."""
    changed = copy.deepcopy(CONFIGS)
    target = changed[name]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return {"gpushare_device_plugin_configs": changed}


def nodes(index, **fields):
    """The lab's nodes with node ``index`` updated (``mig`` merges into its layout)."""
    changed = copy.deepcopy(NODES)
    if "mig" in fields:
        changed[index]["mig"].update(fields.pop("mig"))
    changed[index].update(fields)
    return {"gpushare_nodes": changed}


def lab(vars_, message):
    return {"playbook": "playbooks/lab.yml", "vars": vars_, "message": message}


def role(name, vars_, message):
    return {"playbook": ROLE_PLAYBOOK, "vars": {"bad_input_role": name, **vars_}, "message": message}


BILLION_LAUGHS = "\n".join(
    ['  l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + ["  l%d: &l%d [%s]" % (level, level, ", ".join(["*l%d" % (level - 1)] * 9)) for level in range(1, 9)]
)
GOOD_POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: bad-input-first, namespace: team-a}\nspec: {containers: [{name: c, image: pause}]}\n"
MANIFESTS = {
    "malformed": (GOOD_POD + "---\napiVersion: v1\nkind: Pod\nspec: [\n", "document 2, line 9: invalid YAML",
                  "Fix: correct the YAML syntax at that line"),
    "unsafe-tag": (
        GOOD_POD + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: !!python/object/apply:os.system ['touch /tmp/gpushare-pwned']\n",
        "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed (only plain YAML is read; tags that build objects "
        "are refused)",
        "Fix: remove the tag and write a plain value",
    ),
    "alias-bomb": (
        GOOD_POD + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n" + BILLION_LAUGHS + "\n",
        "YAML aliases expand the manifest to more than 1000000 values (an alias bomb?); refusing to write or apply it",
        "Fix: write the manifest as plain YAML Kubernetes objects (no tags, no anchors or aliases that multiply content)",
    ),
    "not-an-object": (
        GOOD_POD + "---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: team-a}\n", "document 2: metadata.name is missing",
        "Fix: name every Pod (metadata.name)"
    ),
}
REQUEST_MANIFESTS = {
    "malformed": ("kind: Pod\nspec: [\n", "Cannot check the manifest: document 1, line 3: invalid YAML",
                  "Fix: correct the YAML syntax at that line"),
    "unsafe-tag": ("kind: Pod\nx: !!python/object/apply:os.system ['touch /tmp/gpushare-pwned']\n",
                   "Cannot check the manifest: document 1, line 2: the YAML tag '!!python/object/apply:os.system' is not allowed",
                   "Fix: remove the tag and write the plain value."),
    "alias-bomb": ("x:\n" + BILLION_LAUGHS + "\nkind: Pod\nspec:\n  containers: *l8\n",
                   "Cannot check the manifest: document 1: this much aliasing is not allowed",
                   "Fix: write the repeated values out, or use fewer aliases."),
}
ARGUMENT_FIX = "Fix: correct these variables (ansible-doc -t role gpushare.k8s.<role> describes each)"
REPLICAS_FIX = "(upstream rejects it: one replica is no sharing). Fix: use 2 or more, or drop the sharing section for a node that does not share"
PROFILES = "1g.10gb x7, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g.40gb x1, 7g.80gb x1"

# Each message is the fragment of the output that names the field, the problem and the fix, written out by hand.
CASES = {
    # device-plugin configs: every one of them is checked before step 1, step 7's mps included
    "replicas-1": lab(configs("shared", ["sharing", "timeSlicing", "resources", 0, "replicas"], 1),
                      "shared: sharing.timeSlicing.resources[0].replicas: must be 2 or more, got 1 " + REPLICAS_FIX),
    "replicas-0": lab(configs("mps", ["sharing", "mps", "resources", 0, "replicas"], 0),
                      "mps: sharing.mps.resources[0].replicas: must be 2 or more, got 0 " + REPLICAS_FIX),
    "replicas-negative": lab(configs("shared", ["sharing", "timeSlicing", "resources", 0, "replicas"], -1),
                             "shared: sharing.timeSlicing.resources[0].replicas: must be 2 or more, got -1 " + REPLICAS_FIX),
    "replicas-four": lab(configs("mps", ["sharing", "mps", "resources", 0, "replicas"], "four"),
                         "mps: sharing.mps.resources[0].replicas: must be an integer, got string 'four'. Fix: write a whole number of 2 or "
                         "more, e.g. replicas: 4"),
    "unknown-config-key": lab(configs("shared", ["sharing", "timeSlicing", "renameByDefualt"], True),
                              "shared: sharing.timeSlicing.renameByDefualt: unknown key (upstream silently ignores it). Fix: did you mean "
                              "'renameByDefault'? Valid keys here: renameByDefault, failRequestsGreaterThanOne, resources"),
    "timeslicing-and-mps": lab(configs("mps", ["sharing", "timeSlicing"], CONFIGS["shared"]["sharing"]["timeSlicing"]),
                               "mps: sharing: both timeSlicing and mps are set (upstream silently uses mps and ignores timeSlicing). "
                               "Fix: keep only one of sharing.timeSlicing or sharing.mps"),
    "mps-with-mixed-mig": lab(configs("mps", ["flags", "migStrategy"], "mixed"),
                              "mps: sharing.mps: MPS is not supported with flags.migStrategy: mixed (upstream fails at run time). "
                              "Fix: use sharing.timeSlicing, or set flags.migStrategy: none for an MPS node"),
    "initial-config-undefined": lab({"gpushare_device_plugin_initial_configs": ["default", "sharde"]},
                                    "gpushare_device_plugin_initial_configs: sharde not among gpushare_device_plugin_configs (default, "
                                    "shared, mps). Fix: add the config or remove the name."),
    # nodes and MIG geometry
    "mig-unknown-profile": lab(nodes(2, mig={"profile": "1g.5gb"}),
                               "lab-node-2.mig.profile: '1g.5gb' is not a MIG profile of A100-SXM4-80GB. Fix: use one of the "
                               "A100-SXM4-80GB profiles (max instances per GPU): " + PROFILES),
    "mig-count-beyond-geometry": lab(nodes(2, mig={"count": 8}),
                                     "lab-node-2.mig.count: 8 instances of 1g.10gb do not fit: one A100-SXM4-80GB holds at most 7. Fix: use 1 "
                                     "to 7 per GPU, or another profile (" + PROFILES + ")"),
    "node-gpus-four": lab(nodes(0, gpus="four"), "lab-node-0.gpus: must be a non-negative integer, got 'four'. Fix: give the node's "
                                                 "physical GPU count, e.g. gpus: 2"),
    "node-listed-twice": lab({"gpushare_nodes": NODES + [dict(NODES[0], config="shared")]},
                             "lab-node-0: is listed twice. Fix: list each node once"),
    "missing-node": lab({"gpushare_nodes": NODES + [{"name": "lab-node-9", "gpus": 2, "config": "default"}]},
                        "gpushare_nodes: node lab-node-9 does not exist in the cluster (it has %s). Fix: create it (playbooks/cluster.yml "
                        "creates the lab cluster's nodes) or remove it from gpushare_nodes; nothing was written" % CLUSTER_NODES),
    "node-config-undefined": lab(nodes(1, config="sharde"),
                                 "lab-node-1.config: names config 'sharde', which is not among the device-plugin configs (default, mps, "
                                 "shared); the plugin's config manager crash-loops on such a label. Fix: use one of the configured names "
                                 "or add the config"),
    "node-config-not-in-configmap": lab(
        {**nodes(0, config="mps"), "gpushare_placement": [dict(w, place_on="mps") if w["place_on"] == "default" else w
                                                          for w in LAB_VARS["gpushare_placement"]]},
        "node lab-node-0: label nvidia.com/device-plugin.config=mps names no key of ConfigMap gpu-share/device-plugin-configs (its "
        "keys: default, shared); the device plugin's config manager would crash-loop on it. Fix: add key 'mps' to the ConfigMap before "
        "labelling (role gpushare.k8s.device_plugin_config), or set the node's config to one of its keys.",
    ),
    "split-pod-not-advertised": lab({"gpushare_split_pods": [{"name": "mig-job", "resource": "nvidia.com/mig-1g.5gb"}]},
                                    "gpushare_split_pods: mig-job ask for a resource no node of gpushare_nodes advertises (they would stay "
                                    "Pending). Fix: ask for one of nvidia.com/gpu, nvidia.com/mig-1g.10gb."),
    # the team's quota
    "quota-below-use": lab({"gpushare_team_quota": {"name": "gpu-quota", "gpus": 1}, "gpushare_team_pods": [{"name": "team-a-job-1"}]},
                           "gpushare_team_quota.gpus: quota team-a/gpu-quota would limit requests.nvidia.com/gpu to 1, but 2 are already "
                           "in use (now hard 2): the API server keeps the admitted Pods and refuses every new one until usage drops. Fix: "
                           "delete Pods until at most 1 is in use, set gpushare_team_quota.gpus to 2 or more, or set "
                           "team_quota_allow_shrink: true to lower it anyway"),
    "quota-gpus-four": lab({"gpushare_team_quota": {"name": "gpu-quota", "gpus": "four"}},
                           'gpushare_team_quota.gpus: "four" is not a whole number of 1 or more. Fix: set the GPU slots the team may '
                           'request, e.g. gpus: 2.'),
    "quota-gpus-negative": lab({"gpushare_team_quota": {"name": "gpu-quota", "gpus": -1}},
                               "gpushare_team_quota.gpus: -1 is not a whole number of 1 or more. Fix: set the GPU slots the team may "
                               "request, e.g. gpus: 2."),
    "quota-gpus-1": lab({"gpushare_team_quota": {"name": "gpu-quota", "gpus": 1}},
                        "gpushare_team_pods: 2 Pods of one unit each, but gpushare_team_quota.gpus is 1: the team must fill its quota "
                        "exactly so that team-over is the Pod it refuses (with fewer Pods it would be admitted, with more a team Pod would be refused). "
                        "Fix: list 1 team Pods, or set gpus: 2."),
    # a role's argument spec, checked for every role before step 1 (here step 5's, after the preflight passed)
    "role-argument-of-a-late-step": lab({"gpushare_quota_coverage_namespaces": {"team-a": 1}},
                                        "gpushare.k8s.quota_coverage: argument 'quota_coverage_namespaces' is of type dict and we "
                                        "were unable to convert to list: <class 'dict'> cannot be converted to a list "
                                        "(quota_coverage_namespaces is {{ gpushare_quota_coverage_namespaces | "
                                        "default([gpushare_team_namespace]) }}) " + ARGUMENT_FIX),
    # roles on their own: their argument specs (checked as the lab checks them) and their own checks
    "role-team-quota-gpus-four": role("team_quota", {"team_quota_gpus": "four"},
                                      "gpushare.k8s.team_quota: argument 'team_quota_gpus' is of type str and we were unable to convert to "
                                      "int: \"'four'\" cannot be converted to an int " + ARGUMENT_FIX),
    "role-team-quota-below-use": role("team_quota", {"team_quota_gpus": 1, "team_quota_pods": [{"name": "team-a-job-1"}]},
                                      "team_quota_gpus: quota team-a/gpu-quota would limit requests.nvidia.com/gpu to 1, but 2 are already in "
                                      "use (now hard 2): the API server keeps the admitted Pods and refuses every new one until usage drops. "
                                      "Fix: delete Pods until at most 1 is in use, set team_quota_gpus to 2 or more, or set "
                                      "team_quota_allow_shrink: true to lower it anyway"),
    "role-team-quota-no-pods": role("team_quota", {"team_quota_gpus": 2, "team_quota_pods": []},
                                    "team_quota_pods: 0 Pods of one unit each, but team_quota_gpus is 2: the team must fill its quota exactly "
                                    "so that team-over is the Pod it refuses (with fewer Pods it would be admitted, with more a team Pod "
                                    "would be refused). Fix: list 2 team Pods, or set team_quota_gpus: 0."),
    "role-mig-node-gpus-four": role("mig_node", {"mig_node_nodes": [dict(MIG_NODE, mig=dict(MIG_NODE["mig"], gpus="four"))]},
                                    "gpushare.k8s.mig_node: argument 'gpus' is of type str found in 'mig_node_nodes -> mig'. and we were "
                                    "unable to convert to int: \"'four'\" cannot be converted to an int " + ARGUMENT_FIX),
    "role-mig-node-missing-node": role("mig_node", {"mig_node_nodes": [dict(MIG_NODE, name="lab-node-9")]},
                                       "mig_node_nodes: node(s) not found: lab-node-9. Fix: correct the names (see `kubectl get nodes`) "
                                       "or create the nodes; nothing was changed"),
    "role-node-sharing-missing-node": role(
        "node_sharing",
        {"node_sharing_nodes": [NODES[0], dict(NODES[1], name="lab-node-9")], "node_sharing_configs": CONFIGS,
         "node_sharing_check_config_labels": False},
        "node_sharing_nodes: node(s) not found: lab-node-9. Fix: correct the names (see `kubectl get nodes`) or create the nodes; nothing was changed",
    ),
}
# Injections: a value that would have ended a YAML document the lab wrote as text and started another, applied with
# the runner's credentials. Every one is refused before anything is read or written, naming the field and the fix.
INJECTED_BINDING = "gpushare-injected-admin"
INJECTION = ("team-a\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: %s}\n"
             "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n"
             "subjects: [{kind: Group, name: 'system:authenticated', apiGroup: rbac.authorization.k8s.io}]" % INJECTED_BINDING)
# how the messages show it: repr, cut after 60 characters
SHOWN_INJECTION = '"team-a\\n---\\napiVersion: rbac.authorization.k8s.io/v1\\nkind..."'
LABEL_RULE = "(at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)"
SUBDOMAIN_RULE = ("(at most 253 lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a letter "
                  "or digit)")
CASES.update({
    "name-team-namespace-injects-a-binding": lab(
        {"gpushare_team_namespace": INJECTION},
        "gpushare_team_namespace: %s is not a DNS-1123 label %s. Fix: use a name such as team-a." % (SHOWN_INJECTION, LABEL_RULE)),
    "name-configmap-namespace-injects-a-binding": lab(
        {"gpushare_device_plugin_namespace": INJECTION},
        "gpushare_device_plugin_namespace: %s is not a DNS-1123 label %s. Fix: use a name such as gpu-share." % (SHOWN_INJECTION, LABEL_RULE)),
    "name-quota-trailing-newline": lab(
        {"gpushare_team_quota": {"name": "gpu-quota\n", "gpus": 2}},
        "gpushare_team_quota.name: 'gpu-quota\\n' is not a DNS-1123 subdomain %s. Fix: use a name such as gpu-quota." % SUBDOMAIN_RULE),
    "name-pod-trailing-newline": lab(
        {"gpushare_team_over_pod": "team-over\n"},
        "gpushare_team_over_pod: 'team-over\\n' is not a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting "
        "and ending with a letter or digit; the Pod's container is named after it). Fix: use a name such as team-over."),
    "name-namespace-upper-case": lab(
        {"gpushare_namespace": "Gpu-Share"},
        "gpushare_namespace: 'Gpu-Share' is not a DNS-1123 label %s. Fix: use a name such as gpu-share." % LABEL_RULE),
    "name-configmap-with-slash": lab(
        {"gpushare_device_plugin_configmap": "device-plugin-configs/extra"},
        "gpushare_device_plugin_configmap: 'device-plugin-configs/extra' is not a DNS-1123 subdomain %s. Fix: use a name such as "
        "device-plugin-configs." % SUBDOMAIN_RULE),
    "name-namespace-of-the-cluster": lab(
        {"gpushare_namespace": "kube-system"},
        "gpushare_namespace: namespace 'kube-system' belongs to the cluster (default and kube-* hold what every user and the control "
        "plane rely on; the lab sets its namespaces' Pod Security labels and runs its Pods and quota there). Fix: use a namespace of "
        "the lab's own, such as gpu-share."),
    "name-team-namespace-is-the-labs": lab(
        {"gpushare_team_namespace": "gpu-share"},
        "gpushare_team_namespace: 'gpu-share' is also the lab's own namespace (gpushare_namespace): the team's quota would count, and "
        "refuse, the lab's Pods of steps 4 and 8, and the team's Pods would run beside them. Fix: give the team a namespace of its "
        "own, such as team-a (or move the lab's, gpushare_namespace)."),
    # the roles on their own check their names too, before their first request
    "role-team-quota-namespace-injects-a-binding": role(
        "team_quota", {"team_quota_namespace": INJECTION},
        "team_quota_namespace: %s is not a DNS-1123 label %s. Fix: use a name such as team-a" % (SHOWN_INJECTION, LABEL_RULE)),
    "role-device-plugin-config-namespace-injects-a-binding": role(
        "device_plugin_config", {"gpushare_device_plugin_configs": CONFIGS, "device_plugin_config_namespace": INJECTION},
        "device_plugin_config_namespace: %s is not a DNS-1123 label %s. Fix: use a name such as gpu-share" % (SHOWN_INJECTION, LABEL_RULE)),
    "role-namespaces-upper-case": role(
        "namespaces", {"namespaces_names": ["gpu-share", "Team-A"]},
        "namespaces_names[1]: 'Team-A' is not a DNS-1123 label %s. Fix: use a name such as gpu-share" % LABEL_RULE),
    # the lab cluster listens on loopback only (its etcd serves without authentication); its kwokctl home is the case's root
    "cluster-bind-address-beyond-loopback": {
        "playbook": "playbooks/cluster.yml", "vars": {"gpushare_cluster_name": "gpushare-it-badbind", "lab_cluster_bind_address": "0.0.0.0"},
        "message": "lab_cluster_bind_address: '0.0.0.0' is not a loopback address; the lab cluster's etcd serves without authentication "
                   "and its components trust whoever reaches them, so any other address would let anyone who can reach it read and "
                   "change every object. Fix: use 127.0.0.1 (or another address of 127.0.0.0/8, ::1 or localhost)"},
    # a node name the API server would refuse, checked before the cluster is created (its kwokctl home stays empty)
    "cluster-dra-node-name-not-a-subdomain": {
        "playbook": "playbooks/cluster.yml",
        "vars": {"gpushare_cluster_name": "gpushare-it-badnode", "gpushare_dra_nodes": [dict(DRA_NODES[0], name="DRA_Node_0")]},
        "message": "gpushare_dra_nodes[0].name: 'DRA_Node_0' is not a DNS-1123 subdomain (at most 253 lower-case letters, digits, '-' "
                   "and '.', each dot-separated part starting and ending with a letter or digit). Fix: use a name such as dra-node-0"},
})
CASES.update({"role-manifest-" + name: dict(role("manifest", {"manifest_content": text}, problem), fix=fix)
              for name, (text, problem, fix) in MANIFESTS.items()})
CASES.update({"module-gpu-request-check-" + name: dict(role("gpu_request_check", {"bad_input_manifest_text": text}, problem), fix=fix)
              for name, (text, problem, fix) in REQUEST_MANIFESTS.items()})


def seed(core):
    """Give the cluster a team quota in use (2 of 2), as a finished lab run leaves it, without running the lab."""
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    core.create_namespaced_resource_quota("team-a", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}},
    })
    wait_until(lambda: (core.read_namespaced_resource_quota("gpu-quota", "team-a").status.hard or {}), what="the quota's status")
    for index in (1, 2):
        core.create_namespaced_pod("team-a", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"team-a-job-{index}"},
            "spec": {"nodeName": "lab-node-1", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                                               "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        })
    wait_until(lambda: (core.read_namespaced_resource_quota("gpu-quota", "team-a").status.used or {}).get("requests.nvidia.com/gpu") == "2",
               what="the quota to count both Pods")


def case_vars(cluster, name, case, root):
    extra = cluster.lab_vars(root / "gpushare", **case["vars"])
    text = extra.pop("bad_input_manifest_text", None)
    if text is not None:
        manifest = root / "input.yaml"
        manifest.write_text(text)
        extra["bad_input_manifest"] = str(manifest)
    if extra.get("bad_input_role") == "manifest":
        extra["manifest_path"] = str(root / "gpushare" / "k8s" / f"{name}.yaml")
    if extra.get("bad_input_role") == "team_quota":
        extra.setdefault("team_quota_pods", LAB_VARS["gpushare_team_pods"])
        extra["team_quota_lab_root"] = str(root / "gpushare")
    if case["playbook"] == "playbooks/cluster.yml":
        extra["lab_cluster_kwok_home"] = str(root / "gpushare")  # nothing may be written there either
    if extra.get("bad_input_role") == "device_plugin_config":
        extra["device_plugin_config_configs"] = extra.pop("gpushare_device_plugin_configs")
        extra["device_plugin_config_lab_root"] = str(root / "gpushare")
    return extra


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cluster = OwnCluster(CLUSTER)
    try:
        cluster.up()
        seed(cluster.core)
        before = snapshot(cluster.core)
        rbac = client.RbacAuthorizationV1Api(cluster.core.api_client)
        bindings_before = sorted(binding.metadata.name for binding in rbac.list_cluster_role_binding().items)
        roots = {name: tmp_path_factory.mktemp(name) for name in CASES}

        def run(name):
            return name, playbook(CASES[name]["playbook"], case_vars(cluster, name, CASES[name], roots[name]))

        with ThreadPoolExecutor(max_workers=4) as pool:
            procs = dict(pool.map(run, sorted(CASES)))
        yield {"before": before, "after": snapshot(cluster.core), "procs": procs, "roots": roots, "bindings_before": bindings_before,
               "bindings_after": sorted(binding.metadata.name for binding in rbac.list_cluster_role_binding().items)}
    finally:
        cluster.down()


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_fails_before_anything_is_written(results, name):
    proc, root, case = results["procs"][name], results["roots"][name], CASES[name]
    text = output(proc)
    assert proc.returncode != 0, tail(proc)
    assert "Fix: " in case["message"] + case.get("fix", ""), "the case states no fix"
    assert case["message"] in text, tail(proc)
    assert case.get("fix", "") in text, tail(proc)
    assert TRACEBACK not in text, tail(proc)
    assert recap(proc)["changed"] == 0, tail(proc)
    assert not (root / "gpushare").exists(), sorted(str(p) for p in (root / "gpushare").rglob("*"))


def test_cluster_is_unchanged_after_every_bad_input(results):
    before, after = results["before"], results["after"]
    assert after == before, {key: (before.get(key), after.get(key)) for key in set(before) | set(after) if before.get(key) != after.get(key)}


def test_no_injected_object_exists(results):
    """The injected ClusterRoleBinding (to cluster-admin, for every authenticated user) was never created."""
    assert INJECTED_BINDING not in results["bindings_after"]
    assert results["bindings_after"] == results["bindings_before"]
