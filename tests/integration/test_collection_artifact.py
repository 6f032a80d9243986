# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built collection installs with ansible-galaxy and its playbooks run by FQCN."""
from __future__ import annotations

import subprocess
import tarfile

from conftest import REPO, VENV_BIN, subprocess_env  # noqa: E402


def test_built_tarball_installs_and_runs_cluster_playbook_by_fqcn(tmp_path, kubeconfig):
    env = subprocess_env()
    env.pop("ANSIBLE_CONFIG")  # as a user would: no checkout, no ansible.cfg
    build = subprocess.run([VENV_BIN / "ansible-galaxy", "collection", "build", "--output-path", tmp_path, REPO],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr
    tarball = next(tmp_path.glob("gpushare-k8s-*.tar.gz"))
    names = tarfile.open(tarball).getnames()
    assert "playbooks/cluster.yml" in names and "roles/lab_cluster/files/build-binaries.sh" in names
    assert not [n for n in names if n.startswith((".venv", ".collections", ".git/"))], "build_ignore leaks"

    dest = tmp_path / "collections"
    install = subprocess.run([VENV_BIN / "ansible-galaxy", "collection", "install", "--force", "--no-deps", "-p", dest, tarball],
                             cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert install.returncode == 0, install.stderr
    assert (dest / "ansible_collections" / "gpushare" / "k8s" / "playbooks" / "cluster.yml").is_file(), install.stdout
    env["ANSIBLE_COLLECTIONS_PATH"] = str(dest)
    run = subprocess.run([VENV_BIN / "ansible-playbook", "gpushare.k8s.cluster"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "changed=0" in run.stdout.splitlines()[-2] or "changed=0" in run.stdout, run.stdout[-500:]
