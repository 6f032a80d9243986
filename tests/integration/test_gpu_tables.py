# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's hardware tables regenerated: tools/gpu-tables built with Go (cached in the user's cache, as `make tables`
builds it) reads go-nvml's mock into JSON, from which tools/gpu-tables/merge.py writes plugins/module_utils/hardware/tables.py
byte for byte. Its build says what it does: a line every few
seconds while Go compiles, the log's last lines when Go fails, nothing when the binary is cached. No cluster is needed.

A cold build of the generator (go-nvml's cgo packages) takes a minute or two on 2 cores; warm, the test takes a second.
The progress tests put a fake `go` first on PATH and a cache of their own, so they compile nothing.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings

from conftest import REPO, subprocess_env

BUILD = REPO / "tools" / "gpu-tables" / "build.sh"
MERGE = REPO / "tools" / "gpu-tables" / "merge.py"
TABLES = REPO / "plugins" / "module_utils" / "hardware" / "tables.py"
# go as build.sh calls it: `go env GOVERSION`, then `go build ... -o OUT .`, from tools/gpu-tables.
FAKE_GO = """#!/bin/sh
case "$1" in
  env) echo go1.26.0 ;;
  build) sleep {seconds}; [ -z "{fail}" ] || {{ echo "main.go:1:1: fake go: compile error" >&2; exit 1; }}
         while [ "$1" != "-o" ]; do shift; done; printf '#!/bin/sh\\n' > "$2"; chmod +x "$2" ;;
  *) echo "fake go: unexpected $*" >&2; exit 3 ;;
esac
"""


def build(cache=None, env=None, timeout=900):
    args = [str(BUILD)] + ([str(cache)] if cache else [])
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=subprocess_env(**(env or {})), check=False)


def fake_go(tmp_path, seconds, fail=""):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(FAKE_GO.format(seconds=seconds, fail=fail))
    go.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GPU_TABLES_HEARTBEAT": "1"}


def test_the_generator_writes_the_checked_in_tables_byte_for_byte(tmp_path):
    start = time.monotonic()
    proc = build()
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = time.monotonic() - start
    if proc.stderr:  # a cold build: show its progress lines in the run's warnings summary
        warnings.warn(f"tools/gpu-tables built in {built:.0f} s:\n{proc.stderr}", stacklevel=1)
    binary = proc.stdout.strip()
    mock = tmp_path / "mock.json"
    gen = subprocess.run([binary, "-o", str(mock)], capture_output=True, text=True, timeout=60, check=False)
    assert gen.returncode == 0, gen.stderr
    out = tmp_path / "gpu_tables.py"
    merge = subprocess.run([sys.executable, str(MERGE), str(mock), "-o", str(out)], capture_output=True, text=True, timeout=60, check=False)
    assert merge.returncode == 0, merge.stderr
    assert out.read_bytes() == TABLES.read_bytes(), (
        "plugins/module_utils/hardware/tables.py is not what tools/gpu-tables writes: run `make tables` and commit the result"
    )
    # Warm, the build is a lookup in the cache and prints nothing.
    again = build()
    assert again.returncode == 0 and again.stdout.strip() == binary and again.stderr == ""


def test_a_cold_build_prints_progress_and_installs_into_the_cache(tmp_path):
    cache = tmp_path / "cache"
    proc = build(cache, env=fake_go(tmp_path, 3))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("[build gpu-tables v0.13.4-1] building ") and "a cold build takes a minute or two" in lines[0]
    assert sum("still compiling (0m0" in line for line in lines) >= 2, proc.stderr
    assert lines[-1].startswith("[build gpu-tables v0.13.4-1] installed in %s/gpu-tables-v0.13.4-1-" % cache)
    binary = proc.stdout.strip()
    assert binary.startswith(str(cache)) and os.access(binary, os.X_OK)
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # the temporary sibling is gone


def test_a_failed_build_shows_the_last_lines_of_its_log_and_installs_nothing(tmp_path):
    cache = tmp_path / "cache"
    proc = build(cache, env=fake_go(tmp_path, 0, fail="yes"))
    assert proc.returncode == 1
    assert "failed after 0m0" in proc.stderr and "main.go:1:1: fake go: compile error" in proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in cache.iterdir()) == ["logs"]
