# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A task's `environment:` K8S_AUTH_* reach this collection's modules as they reach kubernetes.core's, on the lab cluster.

kubernetes.core's modules run as module processes, started with the task's environment over the controller's; they
read K8S_AUTH_* there (module_utils/k8s/client.py), after their own options. This collection's modules run in the
controller (action plugins) or as modules (gpushare_in_controller=false): the same playbook runs both ways. The
controller's own K8S_AUTH_KUBECONFIG and KUBECONFIG name a missing file, and the kubeconfig the tasks' environment
names has its context under a name of its own (its current-context names none), so only the environment leads to
the cluster. The playbook asserts each case itself; the results are compared here between the collections and paths.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "tests" / "integration" / "playbooks" / "task_environment_auth.yml"
CONTEXT = "it-env-only"


def env_only_kubeconfig(kubeconfig: str, path: Path) -> Path:
    """The lab's kubeconfig with its one context renamed CONTEXT and a current-context that names no context."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    (context,) = config["contexts"]
    context["name"] = CONTEXT
    config["current-context"] = "it-no-such-context"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def runs(run_playbook, kubeconfig, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("task-environment")
    controller_missing = str(tmp / "controller-kubeconfig-missing.yaml")
    extra = {"it_env_kubeconfig": str(env_only_kubeconfig(kubeconfig, tmp / "env-only.yaml")), "it_env_context": CONTEXT,
             "it_missing_kubeconfig": str(tmp / "task-kubeconfig-missing.yaml")}
    out = {}
    for in_controller in (True, False):
        path = tmp / ("controller.json" if in_controller else "module.json")
        proc = run_playbook(PLAYBOOK, extra_vars=dict(extra, it_out=str(path), gpushare_in_controller=in_controller),
                            env={"K8S_AUTH_KUBECONFIG": controller_missing, "KUBECONFIG": controller_missing},
                            timeout=300)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
        assert "failed=0" in proc.stdout and "ignored=5" in proc.stdout, proc.stdout[-3000:]
        out[in_controller] = json.loads(path.read_text())
    return out, extra, controller_missing


@pytest.mark.parametrize("in_controller", [True, False], ids=["controller", "module"])
def test_both_collections_see_the_same_nodes_through_the_environment(runs, in_controller):
    nodes = runs[0][in_controller]["nodes"]
    assert nodes["core"], nodes
    listed = {task: names for task, names in nodes.items() if task != "predicted"}
    assert listed == dict.fromkeys(listed, nodes["core"]), nodes
    assert nodes["predicted"] == nodes["core"][:1]
    assert runs[0][in_controller]["api_server"]["ok"]


def test_both_paths_of_this_collection_return_the_same(runs):
    assert runs[0][True] == runs[0][False]


@pytest.mark.parametrize("in_controller", [True, False], ids=["controller", "module"])
def test_a_missing_kubeconfig_in_the_environment_fails_both_and_ours_names_it(runs, in_controller):
    missing, extra = runs[0][in_controller]["missing"], runs[1]
    assert "Invalid kube-config file" in missing["core"], missing  # the kubernetes library skips a missing file
    for own in ("own", "predicted", "api_server"):
        assert extra["it_missing_kubeconfig"] in missing[own], missing


@pytest.mark.parametrize("in_controller", [True, False], ids=["controller", "module"])
def test_without_a_task_environment_both_read_the_controllers(runs, in_controller):
    controller = runs[0][in_controller]["controller"]
    assert "Invalid kube-config file" in controller["core"], controller
    assert runs[2] in controller["own"], controller
