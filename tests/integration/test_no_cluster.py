# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/lab.yml without a cluster: the first error is the preflight's, before any kubernetes.core task, naming
the kubeconfig (never masked) or the API server's URL, and how to get a cluster. Needs no cluster."""
from __future__ import annotations

import json
import re
import socket
import subprocess

import yaml

from conftest import REPO, VENV_BIN, subprocess_env

CHECK_TASK = "TASK [gpushare.k8s.lab_preflight : Check that the kubeconfig exists and the API server answers]"
RESCUE_TASKS = ["TASK [Ask whether the API server still answers]", "TASK [Fail with the step that failed and why]"]


def lab(tmp_path, kubeconfig, **extra_vars):
    root = tmp_path / "gpushare"
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "playbooks/lab.yml", "-e",
                           json.dumps({"gpushare_kubeconfig": str(kubeconfig), "gpushare_lab_root": str(root), **extra_vars})],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=subprocess_env(), check=False)
    return proc, root


def unanswered_kubeconfig(tmp_path):
    """A kubeconfig naming an API server on a loopback port nobody listens on; (its path, the port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": f"https://127.0.0.1:{port}", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "lab", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "lab"}}],
    }))
    return path, port


def assert_first_error_is_the_preflights(proc, root):
    out = proc.stdout
    assert proc.returncode != 0, out[-3000:]
    tasks = re.findall(r"^TASK \[[^\]]+\]", out, flags=re.M)
    # The play stopped there: no task talked to the cluster before it, and after it only the lab's rescue ran,
    # which (the check having said it all) restates the failure without asking the cluster again.
    assert tasks[tasks.index(CHECK_TASK) + 1:] == RESCUE_TASKS, tasks
    assert re.search(r"^localhost\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=1\s+skipped=\d+\s+rescued=1 ", out, flags=re.M), out[-1000:]
    assert not re.search(r"(?<!\*)\*{8}(?!\*)", out) and "remote_src" not in out  # a masked value, not a task banner
    assert not root.exists(), "nothing was written"
    failure = " ".join(out[out.index(CHECK_TASK):].split())
    assert "start it with ansible-playbook gpushare.k8s.cluster (`make cluster` in a checkout), or set gpushare_kubeconfig" in failure, failure
    return failure


def test_a_missing_kubeconfig_is_the_first_error_and_names_the_file(tmp_path):
    missing = tmp_path / ".kwok" / "clusters" / "gpushare" / "kubeconfig.yaml"
    failure = assert_first_error_is_the_preflights(*lab(tmp_path, missing))
    assert f"kubeconfig {missing} does not exist, so there is no cluster to run against. Fix:" in failure, failure


def test_a_kubeconfig_whose_api_server_does_not_answer_names_its_url(tmp_path):
    path, port = unanswered_kubeconfig(tmp_path)
    failure = assert_first_error_is_the_preflights(*lab(tmp_path, path))
    assert f"cannot reach the API server (kube-apiserver) at https://127.0.0.1:{port}: " in failure, failure
    assert "Connection refused" in failure


def test_bad_input_is_reported_as_such_even_when_no_api_server_answers(tmp_path):
    """An input error is the run's error: the rescue does not ask the API server (the input check sent no request),
    so an unreachable cluster cannot replace the message that names the field and the fix."""
    path, _port = unanswered_kubeconfig(tmp_path)
    proc, root = lab(tmp_path, path, gpushare_team_quota={"nvidia.com/gpu": "-1"})
    out = proc.stdout
    assert proc.returncode != 0, out[-3000:]
    assert re.search(r"^TASK \[Ask whether the API server still answers\] \*+\nskipping: \[localhost\]", out, flags=re.M), out[-3000:]
    failure = " ".join(out[out.index("TASK [Fail with the step that failed and why]"):].split())
    assert "failed: gpushare_team_quota.gpus: null is not a whole number of 1 or more. Fix: set the GPU slots" in failure, failure
    assert "cannot reach the API server" not in failure, failure
    assert not root.exists(), "nothing was written"
