# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for tests that run against the live local lab cluster.

The cluster is started by `make cluster` (playbooks/cluster.yml); these tests
never start a mock: a missing cluster is a failure with the fix in the message.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
CLUSTER = os.environ.get("GPUSHARE_CLUSTER_NAME", "gpushare")
KUBECONFIG = Path(
    os.environ.get("GPUSHARE_KUBECONFIG", Path.home() / ".kwok" / "clusters" / CLUSTER / "kubeconfig.yaml")
)


def subprocess_env(**extra) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.setdefault("ANSIBLE_HOME", str(Path.home() / ".ansible"))
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    if not KUBECONFIG.is_file():
        pytest.fail(f"no lab cluster: {KUBECONFIG} does not exist. Start it with `make cluster`.", pytrace=False)
    return str(KUBECONFIG)


@pytest.fixture(scope="session")
def kubectl_path() -> str:
    """kubectl as the lab cluster uses it (kwokctl's own config names it)."""
    import yaml

    cfg = KUBECONFIG.parent / "kwok.yaml"
    for doc in yaml.safe_load_all(cfg.read_text()) if cfg.is_file() else []:
        binary = ((doc or {}).get("options") or {}).get("kubectlBinary")
        if binary and os.path.isfile(binary):
            return binary
    return "kubectl"


@pytest.fixture(scope="session")
def kubectl(kubeconfig, kubectl_path):
    def run(*args, check=True, input_text=None, timeout=60):
        proc = subprocess.run(
            [kubectl_path, "--kubeconfig", kubeconfig, *args],
            capture_output=True, text=True, input=input_text, timeout=timeout, check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc
    return run


@pytest.fixture(scope="session")
def api_client(kubeconfig):
    from kubernetes import client, config

    return config.new_client_from_config(config_file=kubeconfig)


@pytest.fixture(scope="session")
def core_v1(api_client):
    from kubernetes import client

    return client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def run_playbook(kubeconfig):
    """Run ansible-playbook from the checkout; returns the CompletedProcess."""
    def run(path, extra_vars=None, check=False, diff=False, extra_args=(), env=None, timeout=900):
        cmd = [str(VENV_BIN / "ansible-playbook"), str(path)]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        if extra_vars:
            import json

            cmd += ["-e", json.dumps(extra_vars)]
        cmd += list(extra_args)
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                              env=subprocess_env(**(env or {})), check=False)
    return run
