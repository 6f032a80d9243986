# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad input is refused before anything is written: the playbook-level half of the bad-input matrix.

Each case runs playbooks/lab.yml with `-e` overrides of the inventory (or one role, or the
gpu_request_check module, through tests/integration/playbooks/bad_input.yml) against a cluster of
this module's own, which already holds a team quota in use. Every case must fail with a message
naming the field and the fix, report nothing changed, leave its lab root unwritten, and the cluster
(nodes' labels and GPU status, lab namespaces, ConfigMaps, quotas, Pods, admission policies) must be
the same afterwards. The pure functions behind these messages are covered case by case in
tests/unit (test_device_plugin.py, test_mig.py, test_gpushare_filters.py, test_gpu_requests.py,
test_preflight.py, test_bad_input_matrix.py).

The cases are independent and only read the cluster, so they run a few at a time.
"""
from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

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
    "malformed": (GOOD_POD + "---\napiVersion: v1\nkind: Pod\nspec: [\n", "document 2, line 9: invalid YAML", "Fix: correct the YAML syntax"),
    "unsafe-tag": (
        GOOD_POD + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: !!python/object/apply:os.system ['touch /tmp/gpushare-pwned']\n",
        "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed",
        "Fix: remove the tag",
    ),
    "alias-bomb": (
        GOOD_POD + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n" + BILLION_LAUGHS + "\n",
        "YAML aliases expand the manifest to more than 1000000 values (an alias bomb?)",
        "Fix: write the manifest as plain YAML",
    ),
    "not-an-object": (
        GOOD_POD + "---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: team-a}\n", "document 2: metadata.name is missing", "Fix: name every Pod"
    ),
}
REQUEST_MANIFESTS = {
    "malformed": ("kind: Pod\nspec: [\n", "line 3: invalid YAML"),
    "unsafe-tag": ("kind: Pod\nx: !!python/object/apply:os.system ['touch /tmp/gpushare-pwned']\n",
                   "the YAML tag '!!python/object/apply:os.system' is not allowed"),
    "alias-bomb": ("x:\n" + BILLION_LAUGHS + "\nkind: Pod\nspec:\n  containers: *l8\n", "a YAML alias (*name) is not allowed"),
}

CASES = {
    # device-plugin configs: every one of them is checked before step 1, step 7's mps included
    "replicas-1": lab(configs("shared", ["sharing", "timeSlicing", "resources", 0, "replicas"], 1),
                      "shared: sharing.timeSlicing.resources[0].replicas: must be 2 or more, got 1 (upstream rejects it: one replica is no "
                      "sharing). Fix: use 2 or more, or drop the sharing section"),
    "replicas-0": lab(configs("mps", ["sharing", "mps", "resources", 0, "replicas"], 0),
                      "mps: sharing.mps.resources[0].replicas: must be 2 or more, got 0"),
    "replicas-negative": lab(configs("shared", ["sharing", "timeSlicing", "resources", 0, "replicas"], -1),
                             "shared: sharing.timeSlicing.resources[0].replicas: must be 2 or more, got -1"),
    "replicas-four": lab(configs("mps", ["sharing", "mps", "resources", 0, "replicas"], "four"),
                         "mps: sharing.mps.resources[0].replicas: must be an integer, got string 'four'. Fix: write a whole number of 2 or more"),
    "unknown-config-key": lab(configs("shared", ["sharing", "timeSlicing", "renameByDefualt"], True),
                              "shared: sharing.timeSlicing.renameByDefualt: unknown key (upstream silently ignores it). Fix: did you mean "
                              "'renameByDefault'?"),
    "timeslicing-and-mps": lab(configs("mps", ["sharing", "timeSlicing"], CONFIGS["shared"]["sharing"]["timeSlicing"]),
                               "mps: sharing: both timeSlicing and mps are set (upstream silently uses mps and ignores timeSlicing). "
                               "Fix: keep only one of sharing.timeSlicing or sharing.mps"),
    "mps-with-mixed-mig": lab(configs("mps", ["flags", "migStrategy"], "mixed"),
                              "mps: sharing.mps: MPS is not supported with flags.migStrategy: mixed (upstream fails at run time). "
                              "Fix: use sharing.timeSlicing, or set flags.migStrategy: none"),
    "initial-config-undefined": lab({"gpushare_device_plugin_initial_configs": ["default", "sharde"]},
                                    "gpushare_device_plugin_initial_configs: sharde not among gpushare_device_plugin_configs"),
    # nodes and MIG geometry
    "mig-unknown-profile": lab(nodes(2, mig={"profile": "1g.5gb"}),
                               "lab-node-2.mig.profile: '1g.5gb' is not a MIG profile of A100-SXM4-80GB. Fix: use one of the "
                               "A100-SXM4-80GB profiles"),
    "mig-count-beyond-geometry": lab(nodes(2, mig={"count": 8}),
                                     "lab-node-2.mig.count: 8 instances of 1g.10gb do not fit: one A100-SXM4-80GB holds at most 7. Fix: use 1 "
                                     "to 7 per GPU"),
    "node-gpus-four": lab(nodes(0, gpus="four"), "lab-node-0.gpus: must be a non-negative integer, got 'four'. Fix: give the node's "
                                                 "physical GPU count"),
    "missing-node": lab({"gpushare_nodes": NODES + [{"name": "lab-node-9", "gpus": 2, "config": "default"}]},
                        "gpushare_nodes: node lab-node-9 does not exist in the cluster (it has %s). Fix: create it" % CLUSTER_NODES),
    "node-config-undefined": lab(nodes(1, config="sharde"),
                                 "lab-node-1.config: names config 'sharde', which is not among the device-plugin configs (default, mps, "
                                 "shared); the plugin's config manager crash-loops on such a label. Fix:"),
    "node-config-not-in-configmap": lab(
        {**nodes(0, config="mps"), "gpushare_placement": [dict(w, place_on="mps") if w["place_on"] == "default" else w
                                                          for w in LAB_VARS["gpushare_placement"]]},
        "node lab-node-0: label nvidia.com/device-plugin.config=mps names no key of ConfigMap gpu-share/device-plugin-configs",
    ),
    "split-pod-not-advertised": lab({"gpushare_split_pods": [{"name": "mig-job", "resource": "nvidia.com/mig-1g.5gb"}]},
                                    "gpushare_split_pods: mig-job ask for a resource no node of gpushare_nodes advertises (they would stay "
                                    "Pending). Fix: ask for one of nvidia.com/gpu, nvidia.com/mig-1g.10gb"),
    # the team's quota
    "quota-below-use": lab({"gpushare_team_quota": {"name": "gpu-quota", "gpus": 1}, "gpushare_team_pods": [{"name": "team-a-job-1"}]},
                           "gpushare_team_quota.gpus: quota team-a/gpu-quota would limit requests.nvidia.com/gpu to 1, but 2 are already "
                           "in use (now hard 2): the API server keeps the admitted Pods and refuses every new one until usage drops. Fix: "
                           "delete Pods until at most 1 is in use, set gpushare_team_quota.gpus to 2 or more, or set "
                           "team_quota_allow_shrink: true"),
    "quota-gpus-four": lab({"gpushare_team_quota": {"name": "gpu-quota", "gpus": "four"}},
                           'gpushare_team_quota.gpus: "four" is not a whole number of 1 or more. Fix: set the GPU slots'),
    "quota-gpus-negative": lab({"gpushare_team_quota": {"name": "gpu-quota", "gpus": -1}}, "gpushare_team_quota.gpus: -1 is not a whole number"),
    "quota-gpus-1": lab({"gpushare_team_quota": {"name": "gpu-quota", "gpus": 1}},
                        "gpushare_team_pods: 2 Pods of one unit each, but gpushare_team_quota.gpus is 1: the team must fill its quota "
                        "exactly so that team-over is the Pod it refuses (with fewer Pods it would be admitted, with more a team Pod would be refused). "
                        "Fix: list 1 team Pods, or set gpus: 2"),
    # a role's argument spec, checked for every role before step 1 (here step 5's, after the preflight passed)
    "role-argument-of-a-late-step": lab({"gpushare_quota_coverage_namespaces": {"team-a": 1}},
                                        "gpushare.k8s.quota_coverage: argument 'quota_coverage_namespaces' is of type dict and we "
                                        "were unable to convert to list: <class 'dict'> cannot be converted to a list "
                                        "(quota_coverage_namespaces is {{ gpushare_quota_coverage_namespaces | "
                                        "default([gpushare_team_namespace]) }})"),
    # roles on their own: their argument specs and their own checks
    "role-team-quota-gpus-four": role("team_quota", {"team_quota_gpus": "four"},
                                      "argument 'team_quota_gpus' is of type str and we were unable to convert to int"),
    "role-team-quota-below-use": role("team_quota", {"team_quota_gpus": 1, "team_quota_pods": [{"name": "team-a-job-1"}]},
                                      "team_quota_gpus: quota team-a/gpu-quota would limit requests.nvidia.com/gpu to 1, but 2 are already in "
                                      "use (now hard 2)"),
    "role-team-quota-no-pods": role("team_quota", {"team_quota_gpus": 2, "team_quota_pods": []},
                                    "team_quota_pods: 0 Pods of one unit each, but team_quota_gpus is 2"),
    "role-mig-node-gpus-four": role("mig_node", {"mig_node_nodes": [dict(MIG_NODE, mig=dict(MIG_NODE["mig"], gpus="four"))]},
                                    "argument 'gpus' is of type str found in 'mig_node_nodes -> mig'. and we were unable to convert to int"),
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
CASES.update({"role-manifest-" + name: dict(role("manifest", {"manifest_content": text}, problem), fix=fix)
              for name, (text, problem, fix) in MANIFESTS.items()})
CASES.update({"module-gpu-request-check-" + name: role("gpu_request_check", {"bad_input_manifest_text": text}, problem)
              for name, (text, problem) in REQUEST_MANIFESTS.items()})


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
        roots = {name: tmp_path_factory.mktemp(name) for name in CASES}

        def run(name):
            return name, playbook(CASES[name]["playbook"], case_vars(cluster, name, CASES[name], roots[name]))

        with ThreadPoolExecutor(max_workers=4) as pool:
            procs = dict(pool.map(run, sorted(CASES)))
        yield {"before": before, "after": snapshot(cluster.core), "procs": procs, "roots": roots}
    finally:
        cluster.down()


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_fails_before_anything_is_written(results, name):
    proc, root, case = results["procs"][name], results["roots"][name], CASES[name]
    text = output(proc)
    assert proc.returncode != 0, tail(proc)
    assert case["message"] in text, tail(proc)
    assert case.get("fix", "Fix") in text or "unable to convert" in text, tail(proc)
    assert TRACEBACK not in text, tail(proc)
    assert recap(proc)["changed"] == 0, tail(proc)
    assert not (root / "gpushare").exists(), sorted(str(p) for p in (root / "gpushare").rglob("*"))


def test_cluster_is_unchanged_after_every_bad_input(results):
    before, after = results["before"], results["after"]
    assert after == before, {key: (before.get(key), after.get(key)) for key in set(before) | set(after) if before.get(key) != after.get(key)}
