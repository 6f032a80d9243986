# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What lab_cluster says while it gets the control-plane binaries, run as a user runs it (ansible-playbook, the
role's binaries step) into a cache of the test's own: a line every few seconds while a component builds, naming it
and the time so far (read as it arrives, while the task runs); the build log's last lines when Go fails; what to do
when Go is missing; and a warm run that says nothing was built. No cluster is needed or touched.

A fake `go` first on PATH makes a build slow (or quick) without compiling anything; the failing build runs the real
Go with the module proxy off, so it fails at once with Go's own message.
"""
from __future__ import annotations

import json
import re
import subprocess
import time

from conftest import REPO, VENV_BIN, subprocess_env

VERSIONS = {"kubernetes": "v1.36.3", "etcd": "v3.6.16", "kwok": "v0.8.0"}
# A heartbeat line as the default callback prints a loop item.
HEARTBEAT = re.compile(r"\(item=(kwok v[0-9.]+): (\d+)m(\d\d)s, (.+)\)$")
# go as the build script calls it for kwok: `go env GOVERSION`, then `go install ...` with GOBIN set.
FAKE_GO = """#!/bin/sh
case "$1" in
  env) echo go1.26.0 ;;
  install) echo "fake go: downloading sigs.k8s.io/kwok"; sleep {seconds}
           printf '#!/bin/sh\\n' > "$GOBIN/kwok"; printf '#!/bin/sh\\n' > "$GOBIN/kwokctl"; chmod +x "$GOBIN/kwok" "$GOBIN/kwokctl" ;;
  *) echo "fake go: unexpected $*" >&2; exit 3 ;;
esac
"""


def command(cache, **extra_vars):
    variables = {"it_role": "gpushare.k8s.lab_cluster", "it_tasks_from": "binaries", "lab_cluster_cache_dir": str(cache), **extra_vars}
    return [str(VENV_BIN / "ansible-playbook"), "tests/integration/playbooks/role.yml", "-e", json.dumps(variables)]


def run(cache, env=None, **extra_vars):
    return subprocess.run(command(cache, **extra_vars), cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=subprocess_env(**(env or {})), check=False)


def cached(cache, *components):
    """The cache holding these components already (the role only looks whether their directory exists)."""
    for component in components:
        (cache / f"{component}-{VERSIONS[component]}").mkdir(parents=True)
    return cache


def test_a_warm_run_says_that_nothing_was_built(tmp_path):
    cache = cached(tmp_path / "cache", "kwok", "etcd", "kubernetes")
    proc = run(cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = " ".join(proc.stdout.split())  # the result's YAML folds long lines
    assert f"Nothing to build: kwok v0.8.0, etcd v3.6.16, kubernetes v1.36.3 are in {cache} already." in out
    assert "built in" not in out and "Start the build" not in out


def test_missing_go_names_the_go_version_and_where_prebuilt_binaries_go(tmp_path):
    cache = cached(tmp_path / "cache", "etcd")
    proc = run(cache, env={"PATH": f"{VENV_BIN}:/usr/bin:/bin"})
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert "Go is not on PATH: building kwok v0.8.0, kubernetes v1.36.3 from Go modules needs Go 1.26 or newer" in out, out[-3000:]
    assert f"{cache}/kwok-v0.8.0/ (kwok, kwokctl); {cache}/kubernetes-v1.36.3/ (kube-apiserver, kube-controller-manager," in out
    assert "-e lab_cluster_binaries=prebuilt -e lab_cluster_bin_dir=DIR" in out
    assert "about 10 minutes on 2 cores" in out
    assert sorted(p.name for p in cache.iterdir()) == ["etcd-v3.6.16"], "nothing was started"


def test_a_failed_build_shows_the_last_lines_of_its_log(tmp_path):
    cache = cached(tmp_path / "cache", "etcd", "kubernetes")
    proc = run(cache, env={"GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}, lab_cluster_kwok_version="v0.0.99")
    assert proc.returncode != 0
    log = cache / "logs" / "kwok-v0.0.99.log"
    go_error = "sigs.k8s.io/kwok/cmd/kwok@v0.0.99: module lookup disabled by GOPROXY=off"
    assert go_error in log.read_text()
    failure = " ".join(proc.stdout[proc.stdout.index("TASK [gpushare.k8s.lab_cluster : Fail with the last lines"):].split())
    assert "failed after" in failure and f"last lines of {log} (Go's full output)" in failure and go_error in failure, failure[-3000:]
    assert re.search(r"\(item=kwok v0\.0\.99: \dm\d\ds, failed \(exit 1\)\)", proc.stdout), proc.stdout[-3000:]
    assert sorted(p.name for p in cache.iterdir()) == ["etcd-v3.6.16", "kubernetes-v1.36.3", "logs"], "nothing installed"


def test_a_slow_build_shows_a_line_with_the_time_so_far_while_it_runs(tmp_path):
    """A 15 s fake build with a 2 s heartbeat: the lines arrive while the task runs, each naming the component and the
    time so far, at most a heartbeat (plus a loaded machine's slack) apart."""
    cache = cached(tmp_path / "cache", "etcd", "kubernetes")
    fake = tmp_path / "bin" / "go"
    fake.parent.mkdir()
    fake.write_text(FAKE_GO.format(seconds=15))  # long enough for 4 heartbeats on a loaded machine
    fake.chmod(0o755)
    env = subprocess_env(PATH=f"{fake.parent}:{VENV_BIN}:/usr/bin:/bin")
    proc = subprocess.Popen(command(cache, lab_cluster_build_heartbeat=2), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    lines = []
    for line in proc.stdout:
        lines.append((time.monotonic(), line.rstrip("\n")))
    assert proc.wait(timeout=120) == 0, "\n".join(text for _at, text in lines[-60:])
    beats = [(at, HEARTBEAT.search(text)) for at, text in lines if HEARTBEAT.search(text)]
    assert len(beats) >= 4, "\n".join(text for _at, text in lines)
    assert {match.group(1) for _at, match in beats} == {"kwok v0.8.0"}
    seconds = [int(match.group(2)) * 60 + int(match.group(3)) for _at, match in beats]
    assert seconds == sorted(seconds) and seconds[-1] >= 9, seconds
    assert "downloading and compiling kwok and kwokctl" in beats[1][1].group(4)
    assert beats[-1][1].group(4) == "done"
    gaps = [later - earlier for (earlier, _first), (later, _second) in zip(beats, beats[1:])]
    assert max(gaps) < 30, gaps  # the promise: a line at least every 30 s (here every 2 s, on any load)
    output = " ".join(" ".join(text for _at, text in lines).split())
    log = cache / "logs" / "kwok-v0.8.0.log"
    assert f"Go's full output in {log}" in output
    assert re.search(rf"kwok v0\.8\.0: installed in {re.escape(str(cache))}/kwok-v0\.8\.0 in 0m\d\ds \(\S+\); Go output in {re.escape(str(log))}", output)
    assert "fake go: downloading sigs.k8s.io/kwok" in log.read_text()
    assert (cache / "kwok-v0.8.0" / "kwokctl").is_file()
