# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built collection, as a user gets it: no development files, installs next to kubernetes.core, runs by FQCN.

One build (module-scoped): the tarball is installed into an empty collections path together with the
kubernetes.core the toolchain pins (the ansible package's copy, installed offline so the dependency range
of galaxy.yml is what decides), Ansible is told not to look anywhere else (no checkout, no ansible.cfg,
no collections in site-packages), and gpushare.k8s.cluster and gpushare.k8s.lab run from there against
the lab cluster, the lab with a lab root of its own. The build is `make build`'s, tools/build-collection.sh: the
tarball's README.md is docs/collection/README.md, written for someone who installed the collection.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import CLUSTER, REPO, VENV_BIN, subprocess_env  # noqa: E402

# Development files: the checkout's tooling, the live tests and the benchmarks need the checkout itself.
DEV_FILES = ("ansible.cfg", "pytest.ini", "Makefile", "requirements.txt", "requirements-lock.txt", "BENCHMARKS.md", ".ansible-lint", ".gitignore", "noxfile.py")
DEV_DIRS = ("benchmarks/", "tests/integration/", "tests/sanity/", "tests/matrix/", ".nox/", "extensions/", ".ci/", ".venv", ".collections/", ".git/",
            "docs/collection/", ".hypothesis/")
SHIPPED = ("LICENSE", "README.md", "meta/runtime.yml", "meta/ee-requirements.txt", "meta/execution-environment.yml",
           "playbooks/cluster.yml", "playbooks/lab.yml", "inventory/group_vars/all/lab.yml",
           "roles/lab_cluster/files/build-binaries.sh", "plugins/module_utils/k8s/quantity.py", "changelogs/changelog.yaml",
           "CHANGELOG.rst")


def galaxy(env, cwd, *args):
    return subprocess.run([str(VENV_BIN / "ansible-galaxy"), "collection", *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(tarball member names, environment that sees only the installed collections, a scratch directory)."""
    work = tmp_path_factory.mktemp("artifact")
    dest = work / "collections"
    env = subprocess_env()
    env.pop("ANSIBLE_CONFIG")  # as a user would: no checkout, no ansible.cfg
    # Only the new collections path (pytest-ansible points ANSIBLE_COLLECTIONS_PATH at the checkout), no site-packages.
    env.update(ANSIBLE_COLLECTIONS_PATH=str(dest), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    build = subprocess.run([str(REPO / "tools" / "build-collection.sh"), str(work)], cwd=work, env=env,
                           capture_output=True, text=True, check=False, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    tarball = next(work.glob("gpushare-k8s-*.tar.gz"))
    with tarfile.open(tarball) as archive:
        names = archive.getnames()

    from ansible_collections.kubernetes.core.plugins.module_utils import args_common

    core = Path(args_common.__file__).resolve().parents[2]
    shutil.copytree(core, dest / "ansible_collections" / "kubernetes" / "core", ignore=shutil.ignore_patterns("__pycache__"))
    install = galaxy(env, work, "install", "--offline", "-p", dest, tarball)
    assert install.returncode == 0, install.stdout + install.stderr
    listed = galaxy(env, work, "list")
    assert "gpushare.k8s" in listed.stdout and "kubernetes.core" in listed.stdout, install.stdout + listed.stdout + listed.stderr
    return names, env, work


def test_the_artifact_holds_the_collection_and_no_development_files(installed):
    names, _env, _work = installed
    assert not [n for n in names if n in DEV_FILES or n.startswith(DEV_DIRS) or "__pycache__" in n], "build_ignore leaks"
    assert set(SHIPPED) <= set(names), set(SHIPPED) - set(names)


def test_cluster_and_lab_run_from_the_installed_collection(installed, kubeconfig):
    _names, env, work = installed
    cluster = subprocess.run([str(VENV_BIN / "ansible-playbook"), "gpushare.k8s.cluster", "-e", "gpushare_cluster_name=" + CLUSTER],
                             cwd=work, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert cluster.returncode == 0, cluster.stdout[-3000:] + cluster.stderr[-2000:]
    assert "changed=0" in cluster.stdout, cluster.stdout[-800:]  # the running cluster is reused as it is

    root = work / "lab"
    lab_command = [str(VENV_BIN / "ansible-playbook"), "gpushare.k8s.lab", "-e", "gpushare_cluster_name=" + CLUSTER,
                   "-e", "gpushare_lab_root=%s" % root]
    try:
        lab = subprocess.run(lab_command, cwd=work, env=env, capture_output=True, text=True, check=False, timeout=900)
    finally:
        # The shared cluster is left as the other live tests expect it: without the admission guard the lab installs
        # (it would refuse their Pods asking for 2 nvidia.com/gpu). Removed by the installed collection's own role.
        removed = subprocess.run(lab_command + ["--tags", "admission_guard", "-e", "gpushare_admission_guard=false"], cwd=work,
                                 env=env, capture_output=True, text=True, check=False, timeout=300)
    assert lab.returncode == 0, lab.stdout[-5000:] + lab.stderr[-2000:]
    assert removed.returncode == 0, removed.stdout[-3000:] + removed.stderr[-2000:]
    assert "failed=0" in lab.stdout
    script = root / "bin" / "check-request.sh"
    assert "collections/ansible_collections/gpushare/k8s" not in script.read_text()  # standalone, no path back
    over = root / "two.yaml"
    over.write_text("kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources: {limits: {nvidia.com/gpu: 2000m}}\n")
    check = subprocess.run([str(script), str(over)], capture_output=True, text=True, check=False, timeout=60)
    assert (check.returncode, check.stdout) == (1, "OVER=c=2\n"), check.stderr


COLLECTION_README = REPO / "docs" / "collection" / "README.md"


def fenced_blocks(text):
    """[(language, body)] of the markdown's fenced code blocks, in order."""
    return re.findall(r"^ *```(\w*)\n(.*?)^ *```$", text, re.S | re.M)


def inventory_example(text):
    """The configure-only inventory example: the one yaml block that starts '# gpu-cluster.yml: '."""
    examples = [body for lang, body in fenced_blocks(text) if lang == "yaml" and body.startswith("# gpu-cluster.yml: ")]
    assert len(examples) == 1, examples
    return examples[0]


@pytest.fixture(scope="module")
def tarball_readme(installed):
    _names, _env, work = installed
    with tarfile.open(next(work.glob("gpushare-k8s-*.tar.gz"))) as archive:
        return archive.extractfile("README.md").read()


def test_the_artifacts_readme_is_the_one_for_installed_users(tarball_readme):
    assert tarball_readme == COLLECTION_README.read_bytes()
    assert tarball_readme != (REPO / "README.md").read_bytes()


def test_the_artifacts_readme_starts_with_the_configure_only_entry_point(tarball_readme):
    text = tarball_readme.decode()
    examples = [(lang, body) for lang, body in fenced_blocks(text) if lang in ("yaml", "bash", "sh")]
    assert examples[0] == ("yaml", inventory_example(text)), examples[0]
    assert examples[1][0] in ("bash", "sh") and examples[1][1].startswith(
        "ansible-playbook -i gpu-cluster.yml gpushare.k8s.gpu_sharing\n"), examples[1]


def test_the_artifacts_readme_runs_nothing_with_make_and_names_only_shipped_files(installed, tarball_readme):
    names, _env, _work = installed
    text = tarball_readme.decode()
    code_lines = [line.strip() for _lang, body in fenced_blocks(text) for line in body.splitlines()]
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"^ *```.*?^ *```$", "", text, flags=re.S | re.M))
    assert not [c for c in code_lines + spans if re.match(r"(\$ )?make( |$)", c)], "a make command in the tarball's README"
    shipped = set(names) | {n.rsplit("/", i)[0] for n in names for i in range(1, n.count("/") + 1)}
    headings = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links, "the README links at least LICENSE"
    for link in links:
        if link.startswith("#"):
            assert link[1:] in headings, "link %s: no such heading" % link
        elif not re.match(r"[a-z]+:", link):
            assert link.split("#")[0].rstrip("/") in shipped, "link %s: not in the tarball" % link
    # Code spans naming a path of the checkout (its first part an entry of the checkout's top level) name shipped files.
    top = {p.name for p in REPO.iterdir()}
    paths = [s.rstrip("/") for s in spans if re.fullmatch(r"[\w.-]+(/[\w.<>-]+)*/?", s) and s.split("/")[0] in top]
    assert paths, "the README names files of the collection"
    assert [p for p in paths if p not in shipped and "<" not in p] == [], "named in the README, not in the tarball"


def test_the_collection_readmes_inventory_example_is_the_repository_readmes():
    """The tarball's README and the checkout's guide show one configure-only example (test_gpu_sharing.py runs the guide's)."""
    assert inventory_example(COLLECTION_README.read_text()) == inventory_example((REPO / "docs" / "guide" / "real-clusters.md").read_text())
