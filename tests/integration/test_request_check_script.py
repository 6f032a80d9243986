# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lab steps 6 and 7 as a user gets them: the files the roles install, run for real.

No cluster is needed: the roles only write under a lab root, here a temporary
directory. bin/check-request.sh is installed by the request_check role through
ansible-playbook (tests/integration/playbooks/request_check.yml) and then run
as the lab's grader runs it; out/isolation.txt is written the same way.
"""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, VENV_BIN, ansible_playbook as run_ansible_playbook  # noqa: E402

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def ansible_playbook(playbook, extra_vars, *args, expect_rc=0, timeout=300):
    """Run one of tests/integration/playbooks/ from the checkout; return (process, changed count)."""
    proc = run_ansible_playbook(PLAYBOOKS / playbook, "-e", json.dumps(extra_vars), *args, timeout=timeout)
    assert proc.returncode == expect_rc, f"{playbook} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    recap = RECAP.findall(proc.stdout)
    assert len(recap) == 1, proc.stdout[-2000:]
    return proc, int(recap[0][1])


class Installed:
    def __init__(self, root: Path, first_changed: int, second_changed: int, bytes_before: bytes):
        self.root = root
        self.script = root / "bin" / "check-request.sh"
        self.first_changed = first_changed
        self.second_changed = second_changed
        self.bytes_before = bytes_before


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """Install the script twice with the role; keep what the second run did."""
    root = tmp_path_factory.mktemp("lab")
    _proc, first = ansible_playbook("request_check.yml", {"request_check_lab_root": str(root)})
    before = (root / "bin" / "check-request.sh").read_bytes()
    _proc, second = ansible_playbook("request_check.yml", {"request_check_lab_root": str(root)})
    return Installed(root, first, second, before)


@pytest.fixture
def check(installed, tmp_path):
    """Write a manifest and run the installed script on it (never allowed to hang)."""
    def run(text, name="manifest.yaml", env=None):
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return subprocess.run([str(installed.script), str(path)], capture_output=True, text=True,
                              timeout=20, check=False, env=env)
    return run


# ---------------------------------------------------------------------------
# the role


def test_role_installs_the_script_and_the_one_implementation(installed):
    assert installed.first_changed > 0
    mode = installed.script.stat().st_mode
    assert stat.S_IMODE(mode) == 0o755
    # The one implementation, embedded verbatim; the spec names no other file in bin/.
    for name in ("k8s/quantity.py", "k8s/manifest_yaml.py", "requests/gpu_requests.py", "requests/check_request.py"):
        assert (REPO / "plugins" / "module_utils" / name).read_text().rstrip("\n") in installed.script.read_text()
    assert sorted(p.name for p in (installed.root / "bin").iterdir()) == ["check-request.sh"]
    assert installed.script.read_text().startswith("#!/usr/bin/env bash\n")


def test_second_run_changes_nothing(installed):
    assert installed.second_changed == 0
    assert installed.script.read_bytes() == installed.bytes_before


def test_check_mode_writes_nothing(tmp_path):
    root = tmp_path / "lab"
    _proc, changed = ansible_playbook("request_check.yml", {"request_check_lab_root": str(root)}, "--check")
    assert changed > 0  # predicted
    assert not root.exists()


RENAMED_CONFIGS = {
    "default": {"version": "v1"},
    "shared": {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
}


def test_the_lab_tells_the_script_the_names_its_configs_advertise(kubeconfig, tmp_path):
    # Under renameByDefault the time-sliced node advertises nvidia.com/gpu.shared: 4 of them are 4 slices of one GPU.
    root = tmp_path / "lab"
    proc = run_ansible_playbook(REPO / "playbooks" / "lab.yml", "--tags", "step6", "-e",
                                json.dumps({"gpushare_lab_root": str(root), "gpushare_device_plugin_configs": RENAMED_CONFIGS}), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    manifest = tmp_path / "shared.yaml"
    manifest.write_text(POD_ONE_GPU.replace("nvidia.com/gpu: 1", "nvidia.com/gpu.shared: 4"), encoding="utf-8")
    result = subprocess.run([str(root / "bin" / "check-request.sh"), str(manifest)], capture_output=True, text=True, timeout=20, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (1, "OVER=main=4\n", "")
    manifest.write_text(POD_ONE_GPU.replace("nvidia.com/gpu: 1", "nvidia.com/gpu.shared: 1"), encoding="utf-8")
    result = subprocess.run([str(root / "bin" / "check-request.sh"), str(manifest)], capture_output=True, text=True, timeout=20, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "OK\n", "")


def test_self_test_runs_on_the_step_4_manifest(tmp_path):
    root = tmp_path / "lab"
    (root / "k8s").mkdir(parents=True)
    mig_job = root / "k8s" / "mig-job.yaml"
    mig_job.write_text(POD_ONE_GPU.replace("name: one", "name: mig-job"))
    proc, _changed = ansible_playbook("request_check.yml", {"request_check_lab_root": str(root)})
    self_test = proc.stdout.split("Check that k8s/mig-job.yaml passes", 1)[1].split("PLAY RECAP", 1)[0]
    assert "ok: [localhost]" in self_test

    # A step-4 manifest that asks for two units fails the role, naming the offender.
    mig_job.write_text(textwrap.dedent(POD_TWO_GPUS))
    proc, _changed = ansible_playbook("request_check.yml", {"request_check_lab_root": str(root)}, expect_rc=2)
    assert "OVER=trainer=2" in proc.stdout + proc.stderr


# ---------------------------------------------------------------------------
# the script, on the cases of lab step 6

POD_TWO_GPUS = """\
    apiVersion: v1
    kind: Pod
    metadata:
      name: greedy
    spec:
      containers:
        - name: trainer
          image: registry.k8s.io/pause:3.10
          resources:
            limits:
              nvidia.com/gpu: 2
    """

POD_ONE_GPU = """\
apiVersion: v1
kind: Pod
metadata:
  name: one
spec:
  containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources:
        limits:
          nvidia.com/gpu: 1
"""

POD_NO_GPU = """\
    apiVersion: v1
    kind: Pod
    metadata:
      name: cpu-only
    spec:
      containers:
        - name: web
          image: registry.k8s.io/pause:3.10
          resources:
            limits:
              cpu: "1"
    """

MULTI_DOC = """\
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: settings
    data:
      nvidia.com/gpu: "8"
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: train
    spec:
      replicas: 1
      selector:
        matchLabels: {app: train}
      template:
        metadata:
          labels: {app: train}
        spec:
          initContainers:
            - name: warmup
              image: registry.k8s.io/pause:3.10
              resources:
                limits:
                  nvidia.com/gpu: 2
          containers:
            - name: learner
              image: registry.k8s.io/pause:3.10
              resources:
                requests:
                  nvidia.com/gpu: 3
                limits:
                  nvidia.com/gpu: 3
            - name: logger
              image: registry.k8s.io/pause:3.10
    """


def test_two_gpus_in_limits_is_over(check):
    result = check(POD_TWO_GPUS)
    assert (result.returncode, result.stdout, result.stderr) == (1, "OVER=trainer=2\n", "")


def test_requests_are_checked_too(check):
    result = check(POD_TWO_GPUS.replace("limits:", "requests:"))
    assert (result.returncode, result.stdout) == (1, "OVER=trainer=2\n")


def test_multi_document_file_reports_every_offender(check):
    result = check(MULTI_DOC)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert sorted(lines) == ["OVER=learner=3", "OVER=warmup=2"]
    assert "OK" not in lines


@pytest.mark.parametrize("text", [POD_ONE_GPU, POD_NO_GPU, POD_ONE_GPU + "---\n" + textwrap.dedent(POD_NO_GPU)],
                         ids=["one-gpu", "no-gpu", "both"])
def test_within_one_slice_is_ok(check, text):
    result = check(text)
    assert (result.returncode, result.stdout, result.stderr) == (0, "OK\n", "")


def test_empty_file_has_nothing_to_reject(check):
    # The one implementation (check_request.py, and its unit test test_cli_prints_ok) treats a file
    # without documents like a Pod without a GPU request: nothing asks for too much, so OK.
    result = check("")
    assert (result.returncode, result.stdout) == (0, "OK\n")


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("kind: Pod\nspec: [\n", "invalid YAML", id="invalid-yaml"),
        pytest.param("kind: Pod\nmetadata: !!python/object/apply:os.system ['touch pwned']\n", "is not allowed", id="unsafe-tag"),
        pytest.param("!!python/object/apply:os.system ['touch pwned']\n", "is not allowed", id="unsafe-tag-top-level"),
    ],
)
def test_unreadable_manifests_exit_2(check, tmp_path, text, message):
    result = check(text)
    assert result.returncode == 2
    assert "OK" not in result.stdout and "OVER=" not in result.stdout
    assert result.stderr.startswith("check-request: ") and message in result.stderr
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_missing_file_exits_2(installed, tmp_path):
    result = subprocess.run([str(installed.script), str(tmp_path / "missing.yaml")], capture_output=True,
                            text=True, timeout=20, check=False)
    assert result.returncode == 2 and result.stdout == "" and "cannot read" in result.stderr


def alias_chain(prefix, first, levels, width=10, wrap="[{}]"):
    """YAML lines defining &<prefix>0 = first and &<prefix>N = wrap(width aliases of &<prefix>N-1)."""
    lines = [f"{prefix}0: &{prefix}0 {first}"]
    for level in range(1, levels):
        aliases = ", ".join([f"*{prefix}{level - 1}"] * width)
        lines.append(f"{prefix}{level}: &{prefix}{level} " + wrap.format(aliases))
    return lines


def test_alias_bomb_of_pods_finishes(check):
    # Lists of Lists of ... 10**9 Pods, each with a container asking for 2 GPUs, in 1 KiB of YAML.
    pod = "{kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]}}"
    chain = alias_chain("c", pod, 9, wrap="{{kind: List, items: [{}]}}")
    text = "\n".join(["apiVersion: v1", "kind: List", *chain, "items: [" + ", ".join(["*c8"] * 10) + "]"]) + "\n"
    result = check(text)  # the subprocess timeout (20 s) fails the test if it hangs
    assert result.returncode in (1, 2), (result.returncode, result.stdout[:200], result.stderr[:500])
    assert "OK" not in result.stdout.splitlines()


def test_billion_laughs_outside_the_pod_spec_is_refused_at_once(check):
    # A Pod whose annotations hold 10**11 "lol"s: kubectl refuses it ("excessive aliasing"), and so does
    # the check, at once and without expanding it (the subprocess timeout fails the test otherwise).
    lines = ["apiVersion: v1", "kind: Pod", *alias_chain("l", '"lol"', 12),
             "metadata:", "  name: laughs", "  annotations: {bomb: *l11}",
             "spec:", "  containers: [{name: main, image: registry.k8s.io/pause:3.10}]"]
    result = check("\n".join(lines) + "\n")
    assert (result.returncode, result.stdout) == (2, ""), result.stderr[:500]
    assert "(\"document contains excessive aliasing\")" in result.stderr


@pytest.mark.parametrize(
    "limits, construct",
    [
        pytest.param("{nvidia.com/gpu: 1, <<: 2}", "map merge requires map or sequence of maps as the value", id="merge-of-a-number"),
        pytest.param("{!!binary bnZpZGlhLmNvbS9ncHU=: 2}", "the YAML tag '!!binary' is not allowed", id="binary-key"),
        pytest.param("{nvidia.com/gpu: !!binary Mg==}", "the YAML tag '!!binary' is not allowed", id="binary-value"),
        pytest.param("{nvidia.com/gpu: 2, nvidia.com/gpu: 1}", "the repeated key 'nvidia.com/gpu' is not allowed", id="repeated-key"),
        pytest.param("{nvidia.com/gpu: 1500m}", "is '1500m', not a whole number", id="fraction"),
        pytest.param("{nvidia.com/gpu: %s}" % ("9" * 5000), "longer than 64 characters", id="huge-digits"),
    ],
)
def test_constructs_kubectl_reads_differently_exit_2_naming_them(check, limits, construct):
    result = check(POD_TWO_GPUS.replace("nvidia.com/gpu: 2", "").replace("limits:", "limits: " + limits))
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert construct in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("quantity, out", [("2000m", "OVER=trainer=2\n"), ("2e0", "OVER=trainer=2\n"), ("1k", "OVER=trainer=1000\n"),
                                           ("1000m", "OK\n"), ('"1"', "OK\n")])
def test_quantities_as_the_api_server_reads_them(check, quantity, out):
    result = check(POD_TWO_GPUS.replace("nvidia.com/gpu: 2", "nvidia.com/gpu: " + quantity))
    assert (result.returncode, result.stdout, result.stderr) == (1 if out.startswith("OVER") else 0, out, "")


def test_custom_resource_pod_templates_are_checked(check):
    rollout = """\
        apiVersion: argoproj.io/v1alpha1
        kind: Rollout
        metadata:
          name: canary
        spec:
          template:
            spec:
              containers:
                - name: server
                  image: registry.k8s.io/pause:3.10
                  resources:
                    limits:
                      nvidia.com/gpu: 2
        """
    result = check(rollout)
    assert (result.returncode, result.stdout) == (1, "OVER=server=2\n")


@pytest.mark.parametrize(
    "workload, out",
    [
        pytest.param("""\
            apiVersion: argoproj.io/v1alpha1
            kind: Workflow
            metadata: {generateName: train-}
            spec:
              entrypoint: train
              templates:
              - name: train
                container: {image: trainer, resources: {limits: {nvidia.com/gpu: 4}}}
            """, "OVER=spec.templates[0].container.resources=4\n", id="argo-workflow"),
        pytest.param("""\
            apiVersion: tekton.dev/v1
            kind: TaskRun
            metadata: {name: build}
            spec:
              taskSpec:
                steps:
                - {name: build, image: x, computeResources: {limits: {nvidia.com/gpu: 4}}}
            """, "OVER=build=4\n", id="tekton-taskrun"),
        pytest.param("""\
            apiVersion: serving.kserve.io/v1beta1
            kind: InferenceService
            metadata: {name: llm}
            spec:
              predictor:
                model: {modelFormat: {name: huggingface}, resources: {limits: {nvidia.com/gpu: 4}}}
            """, "OVER=spec.predictor.model.resources=4\n", id="kserve-inferenceservice"),
    ],
)
def test_the_kinds_teams_use_are_checked(check, workload, out):
    result = check(workload)
    assert (result.returncode, result.stdout, result.stderr) == (1, out, "")


def test_a_merge_chain_kubectl_reads_is_read(check):
    # 500 links (a_i: &a_i {<<: *a_(i-1)}), padded under kubectl's alias budget: kubectl 1.33 reads this file
    lines = ["apiVersion: v1", "kind: Pod", "metadata: {name: chained}", "padding: [%s]" % ", ".join(["1"] * 1300), "chain:",
             "  a0: &a0 {nvidia.com/gpu: 4}"]
    lines += ["  a%d: &a%d {<<: *a%d}" % (link, link, link - 1) for link in range(1, 500)]
    lines += ["spec: {containers: [{name: main, image: x, resources: {limits: *a499}}]}"]
    result = check("\n".join(lines) + "\n")
    assert (result.returncode, result.stdout, result.stderr) == (1, "OVER=main=4\n", "")


def test_a_name_the_output_cannot_encode_is_escaped(check):
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    result = check(POD_TWO_GPUS.replace("name: trainer", "name: trainer-\u20ac"), env=env)
    assert (result.returncode, result.stdout, result.stderr) == (1, "OVER=trainer-\\u20ac=2\n", "")


def test_help_exits_2(installed):
    result = subprocess.run([str(installed.script), "--help"], capture_output=True, text=True, timeout=20, check=False)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("usage: check-request")


def test_falls_back_to_python3_when_the_configured_python_is_gone(tmp_path):
    root = tmp_path / "lab"
    ansible_playbook("request_check.yml", {"request_check_lab_root": str(root), "request_check_python": str(tmp_path / "gone" / "python")})
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(textwrap.dedent(POD_TWO_GPUS))
    script = str(root / "bin" / "check-request.sh")

    with_yaml = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    result = subprocess.run([script, str(manifest)], capture_output=True, text=True, timeout=20, check=False, env=with_yaml)
    assert (result.returncode, result.stdout) == (1, "OVER=trainer=2\n"), result.stderr

    # A python3 without PyYAML must not look like "too many GPUs" (exit 1): exit 2 and say why.
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    fake = fake_bin / "python3"
    fake.write_text(f'#!/bin/sh\nexec {sys.executable} -S -I "$@"\n')
    fake.chmod(0o755)
    without_yaml = dict(os.environ, PATH=f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    result = subprocess.run([script, str(manifest)], capture_output=True, text=True, timeout=20, check=False, env=without_yaml)
    assert result.returncode == 2 and result.stdout == ""
    assert "cannot import yaml" in result.stderr


# ---------------------------------------------------------------------------
# lab step 7: the isolation table

ISOLATION = (
    "TIMESLICING_MEMORY_ISOLATION=no\n"
    "MPS_MEMORY_ISOLATION=partial\n"
    "MIG_MEMORY_ISOLATION=yes\n"
    "TIMESLICING_FAULT_ISOLATION=no\n"
    "MIG_FAULT_ISOLATION=yes\n"
)


def test_isolation_table(tmp_path):
    root = tmp_path / "lab"
    _proc, changed = ansible_playbook("isolation_table.yml", {"isolation_table_lab_root": str(root)}, "--check")
    assert changed > 0 and not root.exists()

    _proc, changed = ansible_playbook("isolation_table.yml", {"isolation_table_lab_root": str(root)})
    table = root / "out" / "isolation.txt"
    assert changed > 0
    assert table.read_bytes() == ISOLATION.encode()

    _proc, changed = ansible_playbook("isolation_table.yml", {"isolation_table_lab_root": str(root)})
    assert changed == 0
    assert table.read_bytes() == ISOLATION.encode()
