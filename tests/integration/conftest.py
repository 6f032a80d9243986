# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for tests that run against the live local lab cluster.

The cluster is started by `make cluster` (playbooks/cluster.yml); these tests
never start a mock: a missing cluster is a failure with the fix in the message.
"""
from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest

import warm_start

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
CLUSTER = os.environ.get("GPUSHARE_CLUSTER_NAME", "gpushare")
KUBECONFIG = Path(
    os.environ.get("GPUSHARE_KUBECONFIG", Path.home() / ".kwok" / "clusters" / CLUSTER / "kubeconfig.yaml")
)


# Under pytest-xdist (`make test` runs `-n 3 --dist loadscope`) the modules below, each with a cluster of its own or
# needing none, run beside each other; all the others use the shared lab cluster and form one scope, run by one worker
# at a time. (xdist's `xdist_group` marks do nothing with pytest 9: its loadgroup rewrites `item._nodeid`, which
# pytest 9 no longer reads; so the scheduler below names each test's scope from its module.)
BESIDE_MODULES = frozenset({
    "test_bad_input.py", "test_dra.py", "test_faults.py", "test_gpu_operator_mode.py", "test_lab_playbook.py",
    "test_least_privilege.py", "test_gpu_sharing.py", "test_gpu_sharing_fleet.py",
    "test_gpu_sharing_helm.py", "test_clusterpolicy_crd.py", "test_gpu_sharing_stock_layouts.py",
    "test_gpu_operator_versions.py",  # a cluster (two: the fleet) of its own each
    "test_lab_cluster_build.py", "test_no_cluster.py", "test_gpu_tables.py", "test_nvidia_gfd.py",
    "test_nvidia_device_plugin.py",  # no cluster
})
SHARED_SCOPE = f"cluster {CLUSTER}"


def scope_of(nodeid: str) -> str:
    """The xdist scope of a test: its module when it may run beside others, else the shared cluster's."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return module if module in BESIDE_MODULES else SHARED_SCOPE


def pytest_xdist_make_scheduler(config, log):
    """Schedule whole scopes (scope_of) on the workers, in collection order (SCOPE_ORDER, below)."""
    from xdist.scheduler import LoadScopeScheduling  # only when xdist runs

    class ByCluster(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return scope_of(nodeid)

    return ByCluster(config, log)


# kwokctl gives a new cluster the highest free ports below 32768 (free: nothing listens there) and does not count the
# ports its other clusters saved: two clusters created at the same moment can be given the same ports, and so can a
# cluster created while a test has another cluster's component stopped. So every cluster the tests create is given
# ports of its own (the lab_cluster role's lab_cluster_port_base, from `cluster_vars`), below the range kwokctl picks
# from, and test modules create clusters and stop components at the same time.
PORT_BASE_FIRST, PORT_BASE_SLOTS = 20000, 1000


def port_base(cluster: str) -> int:
    """The first of the six ports of test cluster `cluster` (a stable hash of its name)."""
    return PORT_BASE_FIRST + 10 * (zlib.crc32(cluster.encode()) % PORT_BASE_SLOTS)


def cluster_vars(cluster: str, **extra) -> dict:
    """The cluster playbook's variables for a cluster a test creates: its name and its own ports."""
    return {"gpushare_cluster_name": cluster, "lab_cluster_port_base": port_base(cluster), **extra}


# The order the scopes start in under xdist: the longest first, so that the last to start are short and the workers
# finish together (what each took in a CI rehearsal of make test, three workers on the 2-core machine: the shared
# cluster's modules 431 s, operator mode 217, faults 212, DRA 150, least privilege 77, lab playbook 56, gpu_sharing 49,
# helm 45, bad input 41, the device plugin 32, the fleet 31, the build 29, GFD 20, the CRD 16). A module not listed
# starts after these.
SCOPE_ORDER = (SHARED_SCOPE, "test_gpu_operator_mode.py", "test_faults.py", "test_dra.py", "test_least_privilege.py",
               "test_lab_playbook.py", "test_gpu_sharing.py", "test_gpu_sharing_helm.py", "test_gpu_operator_versions.py",
               "test_gpu_sharing_stock_layouts.py", "test_bad_input.py",
               "test_nvidia_device_plugin.py", "test_gpu_sharing_fleet.py", "test_lab_cluster_build.py", "test_nvidia_gfd.py",
               "test_clusterpolicy_crd.py", "test_gpu_tables.py", "test_no_cluster.py")


def pytest_collection_modifyitems(items):
    """Each scope's tests in SCOPE_ORDER (a stable sort: within a scope, the collection's order)."""
    order = {scope: index for index, scope in enumerate(SCOPE_ORDER)}
    items.sort(key=lambda item: order.get(scope_of(item.nodeid), len(order)))


def ansible_playbook(path, *args, timeout=900, env=None):
    """ansible-playbook `path` from the checkout, waited for; the CompletedProcess (started warm: warm_start.py)."""
    return warm_start.run([str(VENV_BIN / "ansible-playbook"), str(path), *args], env=subprocess_env(**(env or {})),
                          cwd=str(REPO), timeout=timeout)


def pytest_sessionfinish(session):
    warm_start.close_all()


# What each scope took, and on which worker (setup, call and teardown of its tests; the controller sees every worker's
# reports): printed after the durations, the figures SCOPE_ORDER is balanced by.
_SCOPE_TIMES: dict = {}


def pytest_runtest_logreport(report):
    worker = getattr(getattr(report, "node", None), "gateway", None)
    entry = _SCOPE_TIMES.setdefault(scope_of(report.nodeid), {"seconds": 0.0, "worker": None, "start": None, "stop": None})
    entry["seconds"] += report.duration
    entry["worker"] = getattr(worker, "id", None) or entry["worker"] or "main"
    start, stop = getattr(report, "start", None), getattr(report, "stop", None)
    if start is not None:
        entry["start"] = start if entry["start"] is None else min(entry["start"], start)
        entry["stop"] = stop if entry["stop"] is None else max(entry["stop"], stop)


def pytest_terminal_summary(terminalreporter):
    if not _SCOPE_TIMES:
        return
    first = min((entry["start"] for entry in _SCOPE_TIMES.values() if entry["start"] is not None), default=None)
    terminalreporter.section("time per scope (worker, seconds from the first test's start to the scope's end)")
    for scope, entry in sorted(_SCOPE_TIMES.items(), key=lambda item: (item[1]["worker"], item[1]["start"] or 0)):
        span = "" if first is None or entry["stop"] is None else "  %4.0f s .. %4.0f s" % (entry["start"] - first, entry["stop"] - first)
        terminalreporter.write_line("%-5s %6.1f s%s  %s" % (entry["worker"], entry["seconds"], span, scope))


def subprocess_env(**extra) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.setdefault("ANSIBLE_HOME", str(Path.home() / ".ansible"))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def built_tool(script) -> Path:
    """Run one of tools/*/build.sh (``script``, relative to the checkout) and return the path it prints: the cached build,
    or a fresh one (a cold build's progress lines then go to the run's warnings summary)."""
    import time  # pylint: disable=import-outside-toplevel
    import warnings  # pylint: disable=import-outside-toplevel

    start = time.monotonic()
    proc = subprocess.run([str(REPO / script)], cwd=REPO, capture_output=True, text=True, timeout=1500, env=subprocess_env(), check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if proc.stderr:
        warnings.warn("%s built in %.0f s:\n%s" % (script, time.monotonic() - start, proc.stderr), stacklevel=1)
    return Path(proc.stdout.strip())


def text_table(rows, headers) -> str:
    """``rows`` under ``headers`` as aligned plain-text columns (the comparison tables the tests print)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    line = "  ".join("%%-%ds" % width for width in widths)
    lines = [line % tuple(headers), line % tuple("-" * width for width in widths)] + [line % tuple(row) for row in rows]
    return "\n".join(text.rstrip() for text in lines)


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    if not KUBECONFIG.is_file():
        pytest.fail(f"no lab cluster: {KUBECONFIG} does not exist. Start it with `make cluster`.", pytrace=False)
    return str(KUBECONFIG)


def kubectl_of(kubeconfig) -> str:
    """kubectl as the lab cluster of ``kubeconfig`` uses it (kwokctl's own config, beside the kubeconfig, names it)."""
    import yaml

    cfg = Path(kubeconfig).parent / "kwok.yaml"
    for doc in yaml.safe_load_all(cfg.read_text()) if cfg.is_file() else []:
        binary = ((doc or {}).get("options") or {}).get("kubectlBinary")
        if binary and os.path.isfile(binary):
            return binary
    return "kubectl"


@pytest.fixture(scope="session")
def kubectl_path() -> str:
    """kubectl as the lab cluster uses it (kwokctl's own config names it)."""
    return kubectl_of(KUBECONFIG)


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
        args = []
        if check:
            args.append("--check")
        if diff:
            args.append("--diff")
        if extra_vars:
            import json

            args += ["-e", json.dumps(extra_vars)]
        return ansible_playbook(path, *args, *extra_args, timeout=timeout, env=env)
    return run
