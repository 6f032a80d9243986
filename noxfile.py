# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ansible-core matrix: the collection tested on every ansible-core that meta/runtime.yml claims.

    make matrix                     every cell, then the table (also in tests/output/matrix/table.txt)
    .venv/bin/nox -s "cell(2.21)"   one cell, then the table (the other rows from their last run)

A cell is one ansible-core, on one Python, with the kubernetes.core its ``ansible`` package ships:

- the default (2.19): the toolchain's own .venv (requirements-lock.txt, Python 3.11), what `make test` runs everything on;
- one per directory tests/matrix/core-<minor>/: overrides.txt (the ``ansible`` package and the ansible-core it requires,
  in place of requirements.txt's pins), python-version, and the locks `make lock` writes there (requirements-lock.txt,
  sanity-lock.txt). Its venv, .nox/core-<minor>/, is created with that Python and installed from the lock with
  --require-hashes, again whenever the lock changes (pip's cache keeps a re-install off the network).

Each cell runs three steps; the table at the end has a column for each. Every cell's sanity starts at once, at the
lowest priority, and takes what the cells' unit tests and live runs, one cell after the other, leave idle (as in
`make test`); each step runs to its end whatever the others gave, so that the table is whole.

- unit: the unit tests, with GPUSHARE_LOCK naming the cell's lock (tests/unit/test_lock.py checks the venv holds exactly
  it, test_requires_ansible.py that the claim covers its ansible-core);
- sanity: ``ansible-test sanity`` of that ansible-core (tests/sanity/run.sh; its venv .nox/core-<minor>-sanity);
- live: tests/integration/test_matrix_live.py with the cell's Python: the tarball built and installed by that
  ansible-galaxy, then ``gpushare.k8s.gpu_sharing`` configures an operator-mode lab cluster, re-runs with changed=0 and
  undoes, with that ansible-playbook (the recaps go into the table).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import nox

REPO = Path(__file__).resolve().parent
MATRIX = REPO / "tests" / "matrix"
OUTPUT = REPO / "tests" / "output" / "matrix"
# Each cell's venv is made from its lock below, not by nox.
nox.options.default_venv_backend = "none"


def default_core():
    (core,) = re.findall(r"^ansible-core==(\d+\.\d+)\.", (REPO / "requirements.txt").read_text(), re.M)
    return core


def cells():
    """name -> the cell's files and venvs, the default first."""
    found = {default_core(): {
        "lock": REPO / "requirements-lock.txt", "sanity_lock": REPO / "tests" / "sanity" / "requirements-lock.txt",
        "python": None, "venv": REPO / ".venv", "sanity_venv": REPO / ".venv-sanity"}}
    for overrides in sorted(MATRIX.glob("core-*/overrides.txt")):
        cell = overrides.parent
        found[cell.name[len("core-"):]] = {
            "lock": cell / "requirements-lock.txt", "sanity_lock": cell / "sanity-lock.txt",
            "python": (cell / "python-version").read_text().strip(),
            "venv": REPO / ".nox" / cell.name, "sanity_venv": REPO / ".nox" / (cell.name + "-sanity")}
    return found


CELLS = cells()


def python_version(python):
    """The X.Y of interpreter ``python``, or None when it does not run (a pyenv shim of a version not selected)."""
    try:
        done = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def interpreter(version):
    """A Python ``version`` (X.Y): pythonX.Y on PATH, else the newest pyenv build of it."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    builds = sorted(pyenv.glob("%s.*/bin/python%s" % (version, version)),
                    key=lambda path: [int(part) for part in re.findall(r"\d+", path.parts[-3])], reverse=True)
    for candidate in [shutil.which("python" + version), *builds]:
        if candidate and python_version(candidate) == version:
            return str(candidate)
    return None


def prepare(session, name, cell):
    """The cell's venv, installed from its lock (the default's is `make venv`'s)."""
    python = cell["venv"] / "bin" / "python"
    marker = cell["venv"] / ".installed-lock"
    if cell["python"] is None:
        if not python.exists():
            session.error("no %s: run make venv" % cell["venv"])
        return python
    if python.exists() and marker.exists() and marker.read_bytes() == cell["lock"].read_bytes():
        return python
    base = interpreter(cell["python"])
    if base is None:
        session.error("cell %s needs Python %s: put python%s on PATH (or install it with pyenv)" % (name, cell["python"], cell["python"]))
    session.log("creating %s with Python %s from %s" % (cell["venv"], cell["python"], cell["lock"].relative_to(REPO)))
    session.run(base, "-m", "venv", "--clear", str(cell["venv"]), external=True)
    session.run(str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--require-hashes",
                "-r", str(cell["lock"]), external=True)
    shutil.copyfile(cell["lock"], marker)
    return python


VERSIONS = r"""
import json, os, sys
from importlib import metadata
from ansible.release import __version__
import ansible_collections.kubernetes.core as kubernetes_core
with open(os.path.join(list(kubernetes_core.__path__)[0], "MANIFEST.json")) as manifest:
    collection = json.load(manifest)["collection_info"]["version"]
print(json.dumps({"core": __version__, "python": "%d.%d.%d" % sys.version_info[:3], "ansible": metadata.version("ansible"),
                  "kubernetes_core": collection}))
"""


def step(session, name, command, env):
    """Run one step; 'passed' or 'FAILED' (the other steps still run, so that the table is whole)."""
    started = time.monotonic()
    try:
        session.run(*map(str, command), env=env, external=True)
    except nox.command.CommandFailed:
        outcome = "FAILED"
    else:
        outcome = "passed"
    session.log("%s: %s in %.0f s" % (name, outcome, time.monotonic() - started))
    return outcome


def start_sanity(session, core, cell):
    """ansible-test sanity of the cell's ansible-core, in the background at the lowest priority; (process, log)."""
    log_path = OUTPUT / ("%s-sanity.log" % core)
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(  # pylint: disable=consider-using-with
            ["nice", "-n", "19", str(REPO / "tests" / "sanity" / "run.sh")], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, SANITY_TOOLCHAIN=str(cell["venv"]), SANITY_LOCK=str(cell["sanity_lock"]),
                     SANITY_VENV=str(cell["sanity_venv"])))
    session.log("cell %s: sanity runs in the background (nice 19), its output in %s" % (core, log_path.relative_to(REPO)))
    return process, log_path


def run_cells(session, cores):
    """The cells ``cores``: their venvs, then every cell's sanity started at the lowest priority (they take what the
    other steps leave idle, as in make test), each cell's unit tests and live run in turn, and the table."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    results, pythons, sanities, started = {}, {}, {}, time.monotonic()
    try:
        for core in cores:
            results[core] = {"cell": core, "started": time.time()}
            pythons[core] = prepare(session, core, CELLS[core])
            results[core].update(json.loads(subprocess.run([str(pythons[core]), "-c", VERSIONS], capture_output=True, text=True,
                                                           check=True, timeout=120).stdout))
            session.log("cell %s: ansible-core %s, Python %s, ansible %s, kubernetes.core %s" % (
                core, results[core]["core"], results[core]["python"], results[core]["ansible"], results[core]["kubernetes_core"]))
        for core in cores:
            sanities[core] = start_sanity(session, core, CELLS[core])
        for core in cores:
            python, result = pythons[core], results[core]
            env = {"GPUSHARE_LOCK": str(CELLS[core]["lock"]),
                   "PATH": "%s%s%s" % (python.parent, os.pathsep, os.environ.get("PATH", ""))}
            session.log("cell %s: the unit tests" % core)
            result["unit"] = step(session, "cell %s: unit" % core,
                                  [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "tests/unit"], env)
            live_out = OUTPUT / ("%s-live.json" % core)
            live_out.unlink(missing_ok=True)
            session.log("cell %s: the live run of gpu_sharing" % core)
            result["live"] = step(session, "cell %s: live" % core,
                                  [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "matrix",
                                   "tests/integration/test_matrix_live.py"], dict(env, GPUSHARE_MATRIX_OUT=str(live_out)))
            if live_out.exists():
                result["live_runs"] = json.loads(live_out.read_text())
        for core in cores:
            process, log_path = sanities.pop(core)
            waited = time.monotonic()
            results[core]["sanity"] = "passed" if process.wait() == 0 else "FAILED"
            print("\n".join(line for line in log_path.read_text().splitlines() if not line.startswith(NOISE)), flush=True)
            session.log("cell %s: sanity %s (waited %.0f s for it after the other steps)" % (
                core, results[core]["sanity"], time.monotonic() - waited))
    finally:
        for process, _log in sanities.values():  # an error above: stop what still runs
            process.terminate()
            process.wait()
        for core, result in results.items():
            result["result"] = "passed" if all(result.get(key) == "passed" for key in ("unit", "sanity", "live")) else "FAILED"
            (OUTPUT / ("%s.json" % core)).write_text(json.dumps(result, indent=1, sort_keys=True))
    print_table(session, sorted(results, key=list(CELLS).index), time.monotonic() - started)


# pip's progress lines of ansible-test's own venvs: left out of the sanity output shown
NOISE = ("Collecting ", "  Downloading ", "Installing collected", "Successfully installed", "Processing ", "Looking in links",
         "Using cached ", "     ")


@nox.session(name="matrix")
def matrix_session(session):
    """Every cell (the default, then tests/matrix/core-*), then the table: what `make matrix` runs."""
    run_cells(session, list(CELLS))


@nox.session(name="cell", default=False)
@nox.parametrize("core", [nox.param(core, id=core) for core in CELLS])
def cell_session(session, core):
    """One cell, then the table (the other cells' rows as their last run left them)."""
    run_cells(session, [core])


def live_column(result):
    runs = result.get("live_runs") or {}
    if result.get("live") != "passed":
        return result.get("live", "not run")
    return "changed=%d / changed=%d / changed=%d, restored" % (
        runs["configure"]["changed"], runs["rerun"]["changed"], runs["undo"]["changed"])


def text_table(rows, headers):
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    line = "  ".join("%%-%ds" % width for width in widths)
    return "\n".join(text.rstrip() for text in [line % tuple(headers), line % tuple("-" * width for width in widths)]
                     + [line % tuple(row) for row in rows])


def print_table(session, fresh, seconds):
    """The matrix's table: each cell's versions and steps, from tests/output/matrix/<cell>.json (``fresh``: the cells
    this run ran; the others' rows are from their last run, or "not run")."""
    rows, failed = [], []
    for core in CELLS:
        path = OUTPUT / ("%s.json" % core)
        result = json.loads(path.read_text()) if path.exists() else {"result": "not run"}
        if core in fresh and result["result"] != "passed":
            failed.append(core)
        rows.append([result.get("core", core), result.get("python", "-"), result.get("ansible", "-"),
                     result.get("kubernetes_core", "-"), result.get("unit", "-"), result.get("sanity", "-"), live_column(result),
                     result["result"] + ("" if core in fresh else " (earlier run)" if path.exists() else "")])
    text = text_table(rows, ["ansible-core", "Python", "ansible", "kubernetes.core", "unit", "sanity",
                             "live gpu_sharing: configure / re-run / undo", "result"])
    (OUTPUT / "table.txt").write_text(text + "\n")
    print("\nThe ansible-core matrix (meta/runtime.yml requires_ansible: %s; this run: %d s)\n\n%s\n" % (
        re.search(r'^requires_ansible: "(.*)"', (REPO / "meta" / "runtime.yml").read_text(), re.M).group(1), seconds, text),
        flush=True)
    if failed:
        session.error("cell(s) %s failed (their steps' output above; sanity's in %s)" % (", ".join(failed), OUTPUT.relative_to(REPO)))
