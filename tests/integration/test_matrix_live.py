# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live step of each cell of the ansible-core matrix (noxfile.py, `make matrix`): the collection as a user of that
Ansible gets it and runs it, against an operator-mode lab cluster of this module's own (the GPU Operator stand-in).

The Ansible is the one beside this test's Python: `make matrix` runs the module with each cell's venv (.nox/core-*/bin,
or .venv for the default). With it: the tarball (tools/build-collection.sh) is built by that ansible-galaxy and
installed by it, offline, next to the kubernetes.core that cell's ``ansible`` package ships (ansible-galaxy 2.21 refuses
a collection whose ``requires_ansible`` leaves it out); then ``ansible-playbook -i gpu-cluster.yml
gpushare.k8s.gpu_sharing`` with the README's inventory, from the installed collection alone (no checkout, no
ansible.cfg, no site-packages collections): it configures the pools, a re-run changes nothing, and
``gpushare_sharing_state: absent`` gives back what kubectl showed before the first run, byte for byte. These runs
use the collection's in-controller action plugins and its calls into kubernetes.core's module_utils
(module_utils/k8s/objects.py) on that ansible-core and kubernetes.core.

Marked ``matrix``: pytest.ini leaves it out of every other run (`make test` covers the default core with
test_gpu_sharing.py, the same runs and more); `pytest -m matrix tests/integration/test_matrix_live.py` runs it alone.
With GPUSHARE_MATRIX_OUT set, the runs' recaps are written there as JSON for the matrix's table.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, subprocess_env
from reliability import OwnCluster, output, recap, tail, wait_until
from test_gpu_sharing import allocatable, kubectl_views, label, operator_spoke, readme_inventory

pytestmark = pytest.mark.matrix

CLUSTER = "gpushare-it-matrix"
BIN = Path(sys.executable).parent  # the cell's venv: its ansible-playbook and ansible-galaxy
MISMATCH = "does not support Ansible version"  # ansible-core's warning for a core outside requires_ansible
# -vvv: the collection's action plugins say when a module runs in the controller (plugin_utils/controller_action.py)
IN_CONTROLLER = re.compile(r"RUN gpushare\.k8s\.(\w+) IN THE CONTROLLER")
RESULTS = {}


def cell_versions():
    """ansible-core and kubernetes.core as this cell's Python has them (the ansible package's copy)."""
    from ansible.release import __version__  # pylint: disable=import-outside-toplevel
    import ansible_collections.kubernetes.core as kubernetes_core  # pylint: disable=import-outside-toplevel

    path = Path(list(kubernetes_core.__path__)[0])
    manifest = json.loads((path / "MANIFEST.json").read_text())
    return __version__, manifest["collection_info"]["version"], path


@pytest.fixture(scope="module", autouse=True)
def results():
    yield RESULTS
    out = os.environ.get("GPUSHARE_MATRIX_OUT")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(RESULTS, indent=1, sort_keys=True))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The environment of a user with the collection installed by this cell's ansible-galaxy, offline, beside the
    kubernetes.core of this cell's ansible package: only that collections path, no ansible.cfg."""
    core, kubernetes_core, kubernetes_core_path = cell_versions()
    work = tmp_path_factory.mktemp("installed")
    dest = work / "collections"
    env = subprocess_env(PATH="%s%s%s" % (BIN, os.pathsep, os.environ.get("PATH", "")),
                         ANSIBLE_COLLECTIONS_PATH=str(dest), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    env.pop("ANSIBLE_CONFIG")
    build = subprocess.run([str(REPO / "tools" / "build-collection.sh"), str(work)], cwd=work, env=env,
                           capture_output=True, text=True, check=False, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    tarball = next(work.glob("gpushare-k8s-*.tar.gz"))
    shutil.copytree(kubernetes_core_path, dest / "ansible_collections" / "kubernetes" / "core",
                    ignore=shutil.ignore_patterns("__pycache__"))
    install = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "-p", str(dest), str(tarball)],
                             cwd=work, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    listed = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "list", "--format", "json"], cwd=work, env=env,
                            capture_output=True, text=True, check=False, timeout=120)
    assert listed.returncode == 0, listed.stderr
    # (not ansible-core's own, ansible.*, which it lists wherever it looks: ansible._protomatter in 2.19)
    found = {name: info["version"] for collections in json.loads(listed.stdout).values() for name, info in collections.items()
             if not name.startswith("ansible.")}
    built = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    assert found == {"gpushare.k8s": built, "kubernetes.core": kubernetes_core}, found
    RESULTS.update(core=core, kubernetes_core=kubernetes_core, python="%d.%d.%d" % sys.version_info[:3])
    return env, work


@pytest.fixture(scope="module")
def cluster():
    """The module's operator-mode cluster with the README's pools labelled, and what kubectl showed of it then."""
    own = OwnCluster(CLUSTER)
    try:
        own.up(gpushare_gpu_operator_standin=True)
        label(own.core, "lab-node-1", "inference")
        label(own.core, "lab-node-2", "training")
        wait_until(lambda: operator_spoke(own.core), timeout=120, what="every GPU node to show GFD's labels and its GPUs")
        own.pristine = kubectl_views(own)
        yield own
    finally:
        own.down()


def run(installed, cluster, inventory, *args):
    """The README's command for the installed collection, with this cell's ansible-playbook."""
    env, work = installed
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), "gpushare.k8s.gpu_sharing", *args],
                          cwd=work, env=dict(env, KUBECONFIG=str(cluster.kubeconfig)),
                          capture_output=True, text=True, check=False, timeout=600)
    text = output(proc)
    assert MISMATCH not in text and "Traceback" not in text, tail(proc)
    # what ansible-core or kubernetes.core warns of on this cell (deprecations of what the collection uses, say)
    found = re.findall(r"\[(?:DEPRECATION WARNING|WARNING)\]: [^\n]*", (proc.stdout or "") + (proc.stderr or ""))
    RESULTS.setdefault("warnings", [])
    RESULTS["warnings"] += [line for line in found if line not in RESULTS["warnings"]]
    return proc


def test_this_ansible_configures_re_runs_unchanged_and_undoes(installed, cluster, tmp_path):
    core, _kubernetes_core, _path = cell_versions()
    version = subprocess.run([str(BIN / "ansible-playbook"), "--version"], env=installed[0], capture_output=True, text=True,
                             check=True, timeout=120).stdout
    assert version.splitlines()[0].startswith("ansible-playbook [core %s]" % core), version
    inventory = tmp_path / "gpu-cluster.yml"
    inventory.write_text(readme_inventory())

    first = run(installed, cluster, inventory)
    assert first.returncode == 0, tail(first)
    RESULTS["configure"] = recap(first)
    assert RESULTS["configure"]["changed"] > 0
    # the README's pools: 2 GPUs x 4 replicas of its shared config; every GPU of lab-node-2 split into 7 1g.10gb instances
    assert allocatable(cluster.core, "lab-node-1") == {"nvidia.com/gpu": "8"}
    assert allocatable(cluster.core, "lab-node-2") == {"nvidia.com/mig-1g.10gb": "14"}
    assert allocatable(cluster.core, "lab-node-0") == {"nvidia.com/gpu": "2"}

    again = run(installed, cluster, inventory, "-vvv")
    assert again.returncode == 0, tail(again)
    RESULTS["rerun"] = recap(again)
    assert RESULTS["rerun"]["changed"] == 0, tail(again)
    # the controller path (ActionBase, its _compute_environment_string, kubernetes.core's module_utils through
    # module_utils/k8s/objects.py) ran on this ansible-core: the modules ran in the controller, not as processes
    RESULTS["in_controller"] = sorted(set(IN_CONTROLLER.findall(again.stdout)))
    assert {"objects", "objects_info", "gpu_operator_wait", "node_resources"} <= set(RESULTS["in_controller"]), RESULTS["in_controller"]

    undone = run(installed, cluster, inventory, "-e", "gpushare_sharing_state=absent")
    assert undone.returncode == 0, tail(undone)
    RESULTS["undo"] = recap(undone)
    after = kubectl_views(cluster)
    for name, want, got in zip(("ClusterPolicy", "nodes", "ConfigMaps"), cluster.pristine, after):
        assert got == want, "%s after the undo:\n%s\nbefore the first run:\n%s" % (name, got.decode(), want.decode())
    RESULTS["undo_restored"] = True
