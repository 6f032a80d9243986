# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/lab_cluster/files/gpu_operator_standin.py looks for kubernetes.core beside an installed collection.

module_utils/k8s/auth.py imports kubernetes.core's auth argument spec; the stand-in runs outside Ansible, so
its launcher puts the directory holding ``ansible_collections/`` on ``sys.path`` when the collection is
installed (ansible-galaxy installs kubernetes.core into the same path).
"""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
LAUNCHER = REPO / "roles" / "lab_cluster" / "files" / "gpu_operator_standin.py"


def launcher():
    spec = importlib.util.spec_from_file_location("gpu_operator_standin_launcher", LAUNCHER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_collections_path_of_an_installed_collection():
    module = launcher()
    assert module._collections_path("/home/u/.ansible/collections/ansible_collections/gpushare/k8s") == "/home/u/.ansible/collections"
    assert module._collections_path(str(REPO)) is None  # a checkout: kubernetes.core comes from site-packages


def test_an_installed_copy_puts_its_collections_path_on_sys_path(tmp_path, monkeypatch):
    root = tmp_path / "ansible_collections" / "gpushare" / "k8s"
    shutil.copytree(REPO / "plugins" / "module_utils", root / "plugins" / "module_utils", ignore=shutil.ignore_patterns("__pycache__"))
    module = launcher()
    monkeypatch.setattr(module, "COLLECTION_ROOT", str(root))
    monkeypatch.setattr(module, "PACKAGE", "gpushare_launcher_test_module_utils")
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        _standin, auth = module._module_utils()
    finally:
        for name in [n for n in sys.modules if n.startswith("gpushare_launcher_test_module_utils")]:
            del sys.modules[name]
    assert str(tmp_path) in sys.path
    assert auth.__file__ == str(root / "plugins" / "module_utils" / "k8s" / "auth.py")
    assert len(auth.AUTH_ARG_SPEC) == 17  # kubernetes.core's 16 and request_timeout
