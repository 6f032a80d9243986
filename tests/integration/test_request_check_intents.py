# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bin/check-request.sh reads GPU intents as the API server's intent policies do: a differential test.

The lab's intent policies (role intent_admission, the lab's pools and configs) are installed under a name of this
module's own, bound to a namespace of its own; the request check is installed (role request_check) with what the same
pools and configs give (request_check_intents). For every manifest of the corpus (each intent x counts, a bad count, an
unknown intent, the gpu-containers annotation, a Pod that names a GPU itself, a Deployment, a Volcano Job) the script's
verdict is held to the API server's server-side dry run of the Pod (a Deployment's or Volcano Job's Pod built from its
template, as its controller will create it): the script says REFUSED exactly when the API server refuses the Pod, and
otherwise the resource and count it says each container gets is what the API server stored, container by container. A
Pod that asks by no intent prints no INTENT line. Nothing is computed here from the collection's model.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.requests import intents as _intents
from lab_helpers import unique, wait_for

REPO = Path(__file__).resolve().parents[2]
LAB = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "lab.yml").read_text(encoding="utf-8"))
PLAYBOOK = "tests/integration/playbooks/role.yml"
INTENT, COUNT, CONTAINERS = "gpushare.k8s/gpu", "gpushare.k8s/gpu-count", "gpushare.k8s/gpu-containers"


def pod(name, annotations=None, containers=("cuda",), limits=None):
    spec = {"containers": [{"name": c, "image": "pause:3.10"} for c in containers]}
    if limits:
        spec["containers"][0]["resources"] = {"limits": limits}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": dict(annotations or {})}, "spec": spec}


def deployment(name, annotations):
    template = pod(name, annotations)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": template["metadata"]["annotations"]},
                                  "spec": template["spec"]}}}


def volcano_job(name, annotations):
    """A Volcano Job (a kind the check knows nothing of) whose task template asks by intent: its Pods are what admission sees."""
    template = pod(name, annotations)
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"minAvailable": 1, "tasks": [{"name": "worker", "replicas": 1,
                                                   "template": {"metadata": {"annotations": template["metadata"]["annotations"]},
                                                                "spec": template["spec"]}}]}}


def corpus():
    cases = []
    for intent in ("whole", "shared", "isolated", "1g.10gb", "2g.20gb", "exclusive"):
        for count in ("1", "2", "3"):
            cases.append(pod("p-%s-%s" % (intent.replace(".", "-"), count), {INTENT: intent, COUNT: count}))
    cases += [
        pod("p-default-count", {INTENT: "shared"}),
        pod("p-zero", {INTENT: "whole", COUNT: "0"}),
        pod("p-word", {INTENT: "whole", COUNT: "two"}),
        pod("p-two-containers", {INTENT: "whole"}, containers=("a", "b")),
        pod("p-one-of-two", {INTENT: "whole", CONTAINERS: "b"}, containers=("a", "b")),
        pod("p-names-gpu", {INTENT: "shared", COUNT: "2"}, limits={"nvidia.com/gpu": "2"}),
        pod("p-no-intent", {}, limits={"nvidia.com/gpu": "1"}),
        deployment("d-shared", {INTENT: "shared"}),
        deployment("d-shared-2", {INTENT: "shared", COUNT: "2"}),
        deployment("d-isolated", {INTENT: "isolated", COUNT: "3"}),
        volcano_job("v-whole-4", {INTENT: "whole", COUNT: "4"}),
        volcano_job("v-shared-2", {INTENT: "shared", COUNT: "2"}),
    ]
    return cases


def as_pod(obj):
    """What reaches the policies: the Pod itself, or the Pod a Deployment's ReplicaSet (a Volcano Job's controller) creates from its template."""
    if obj["kind"] == "Pod":
        return obj
    template = obj["spec"]["tasks"][0]["template"] if obj["apiVersion"].startswith("batch.volcano.sh/") else obj["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": obj["metadata"]["name"], "annotations": template["metadata"]["annotations"]},
            "spec": template["spec"]}


def script_verdicts(script, manifest):
    """{workload: ("refused", reason) | ("admitted", {container: {resource: count}})} from the script's output."""
    proc = subprocess.run([str(script), str(manifest)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    verdicts = {}
    for line in proc.stdout.splitlines():
        intent = re.fullmatch(r"INTENT=([\w.-]+)=([\w.+-]*) -> (.*)", line)
        refused = re.fullmatch(r"REFUSED=([\w.-]+)=(.*)", line)
        if intent:
            becomes = re.fullmatch(r"([\w./-]+): (\d+) for (.*)", intent.group(3))
            if becomes:
                verdicts[intent.group(1)] = ("admitted", {c: {becomes.group(1): becomes.group(2)} for c in becomes.group(3).split(", ")})
            elif intent.group(3).startswith("unchanged"):
                verdicts[intent.group(1)] = ("admitted", None)
            else:
                verdicts.setdefault(intent.group(1), ("refused", None))
        elif refused:
            verdicts[refused.group(1)] = ("refused", refused.group(2))
    return proc, verdicts


def server_verdict(kubectl, namespace, body):
    proc = kubectl("create", "--dry-run=server", "-o", "json", "-n", namespace, "-f", "-", input_text=json.dumps(body), check=False)
    if proc.returncode != 0:
        return ("refused", proc.stderr)
    stored = json.loads(proc.stdout)
    gpus = {c["name"]: {k: v for k, v in ((c.get("resources") or {}).get("limits") or {}).items() if k.startswith("nvidia.com/")}
            for c in stored["spec"]["containers"]}
    return ("admitted", {name: limits for name, limits in gpus.items() if limits})


@pytest.fixture(scope="module")
def setup(run_playbook, kubeconfig, kubectl, tmp_path_factory):
    name = unique("gpushare-it-rci")
    pools = _intents.lab_pools(LAB["gpushare_nodes"])
    configs = LAB["gpushare_device_plugin_configs"]
    policy_vars = {"it_role": "gpushare.k8s.intent_admission", "gpushare_kubeconfig": kubeconfig, "intent_admission_name": name,
                   "intent_admission_namespaces": [name], "intent_admission_pools": pools, "intent_admission_configs": configs}
    root = tmp_path_factory.mktemp("rci")
    # the script's view of the same pools and configs, through the collection's filter as lab.yml computes it
    params = _intents.params_data(_intents.intent_params(pools, configs))
    try:
        kubectl("create", "namespace", name)
        applied = run_playbook(PLAYBOOK, extra_vars=policy_vars)
        assert applied.returncode == 0, applied.stdout[-3000:]
        installed = run_playbook(PLAYBOOK, extra_vars={"it_role": "gpushare.k8s.request_check", "request_check_lab_root": str(root),
                                                       "request_check_intents": params})
        assert installed.returncode == 0, installed.stdout[-3000:]
        wait_for(lambda: server_verdict(kubectl, name, pod("probe", {INTENT: "whole"}))[1], timeout=60,
                 what=f"policy {name} to rewrite a Pod in {name}")
        yield {"namespace": name, "script": root / "bin" / "check-request.sh", "root": root}
    finally:
        run_playbook(PLAYBOOK, extra_vars={**policy_vars, "intent_admission_state": "absent"})
        kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.mark.parametrize("case", corpus(), ids=lambda case: case["metadata"]["name"])
def test_the_script_says_what_the_api_server_does(setup, kubectl, case):
    manifest = setup["root"] / ("%s.yaml" % case["metadata"]["name"])
    manifest.write_text(yaml.safe_dump(case), encoding="utf-8")
    proc, verdicts = script_verdicts(setup["script"], manifest)
    server = server_verdict(kubectl, setup["namespace"], as_pod(case))
    name = case["metadata"]["name"]
    if INTENT not in as_pod(case)["metadata"]["annotations"]:
        assert name not in verdicts and "INTENT=" not in proc.stdout, proc.stdout
        return
    ours = verdicts.get(name)
    assert ours is not None, proc.stdout
    if ours == ("admitted", None):
        # names a GPU itself: admission leaves it alone, and what decides is what it names (the time-slicing guard
        # refuses 2 x nvidia.com/gpu that could land on a time-sliced node; the script's OVER says the same)
        own = {c["name"]: c["resources"]["limits"] for c in case["spec"]["containers"] if c.get("resources")}
        assert server == ("admitted", own) or (server[0] == "refused" and proc.returncode == 1 and "OVER=" in proc.stdout), (proc.stdout, server)
        return
    assert ours[0] == server[0], (proc.stdout, server)
    if ours[0] == "refused":
        assert proc.returncode == 1, proc.stdout
        # the same reason in the same words: the script's message is the policy's message
        assert ours[1] and ours[1] in server[1], (ours[1], server[1])
    elif ours[1] is not None:
        assert ours[1] == server[1], (proc.stdout, server)
        # the script checks nvidia.com/gpu (request_check_resources' default): more than one unit of it is OVER
        over = any(int(count) > 1 for limits in ours[1].values() for resource, count in limits.items() if resource == "nvidia.com/gpu")
        assert (proc.returncode == 1) == over and ("OVER=" in proc.stdout) == over, proc.stdout
