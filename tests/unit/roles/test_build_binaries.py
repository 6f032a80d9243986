# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/lab_cluster/files/build-binaries.sh: arguments checked before anything runs, Go's own error shown with
the last lines of the build log, which keeps Go's full output.

The Go cases run the real toolchain with the module proxy switched off (GOPROXY=off), so Go fails at once
with its own message; nothing is downloaded or built.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

BASH = shutil.which("bash") or "/bin/bash"
SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "lab_cluster" / "files" / "build-binaries.sh"


def build(component, version, dest, **env):
    environ = dict(os.environ, GOPROXY="off", GOTOOLCHAIN="local", GOFLAGS="-mod=mod", **env)
    return subprocess.run([BASH, str(SCRIPT), component, version, str(dest)], capture_output=True, text=True,
                          env=environ, timeout=120, check=False)


@pytest.mark.parametrize("version", ["1.36.3", "v1.36", "v1.36.3-rc.0", "v1.36.3 ", "v01.36.3", "v1.36.3; touch /tmp/x",
                                     "$(id)", "latest", ""])
def test_a_version_that_is_not_vX_Y_Z_is_refused_before_anything_runs(tmp_path, version):
    dest = tmp_path / "cache" / "kubernetes"
    # With an empty PATH nothing but bash builtins can run: the refusal must come first.
    proc = build("kubernetes", version, dest, PATH="/nonexistent")
    assert proc.returncode == 2, proc.stderr
    assert "version must be vX.Y.Z (e.g. v1.36.3)" in proc.stderr and "nothing was run" in proc.stderr, proc.stderr
    assert not (tmp_path / "cache").exists()


def test_an_unknown_component_is_refused_before_anything_runs(tmp_path):
    proc = build("kube-proxy", "v1.36.3", tmp_path / "cache" / "x", PATH="/nonexistent")
    assert proc.returncode == 2 and "unknown component; expected kubernetes, etcd or kwok" in proc.stderr, proc.stderr
    assert not (tmp_path / "cache").exists()


go = pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain (the lab cluster's build needs it too)")


@go
def test_kubernetes_download_failure_shows_gos_error(tmp_path):
    proc = build("kubernetes", "v1.0.99", tmp_path / "kubernetes-v1.0.99")
    assert proc.returncode == 1
    assert "k8s.io/kubernetes@v1.0.99: module lookup disabled by GOPROXY=off" in proc.stderr, proc.stderr
    log = tmp_path / "kubernetes-v1.0.99.log"
    assert f"last lines of {log} (Go's full output):" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == [log.name], "a failed build leaves nothing but its log"


@go
def test_etcd_dependency_failure_shows_gos_error(tmp_path):
    proc = build("etcd", "v3.0.99", tmp_path / "etcd-v3.0.99")
    assert proc.returncode == 1
    assert "failed after 0m0" in proc.stderr and ": go mod tidy" in proc.stderr, proc.stderr
    # The error is Go's, from the log's last lines, which the log itself keeps in full.
    assert "module lookup disabled by GOPROXY=off" in proc.stderr, proc.stderr
    assert "module lookup disabled by GOPROXY=off" in (tmp_path / "etcd-v3.0.99.log").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["etcd-v3.0.99.log"]


def test_missing_go_is_refused_before_anything_is_written(tmp_path):
    proc = build("kwok", "v0.8.0", tmp_path / "kwok-v0.8.0", PATH="/usr/bin:/bin")
    assert proc.returncode == 2 and "go is not on PATH" in proc.stderr and str(tmp_path / "kwok-v0.8.0") in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())
