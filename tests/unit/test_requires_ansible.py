# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""meta/runtime.yml's ``requires_ansible`` claims only the ansible-core releases the tests run on.

The tests run on one ansible-core per minor release, each with the kubernetes.core its ``ansible`` package ships: the
default, requirements.txt's pin (the unit and live tests in .venv, ansible-test sanity in .venv-sanity), and one per
cell of the ansible-core matrix (tests/matrix/core-*/overrides.txt; `make matrix` runs the unit tests, sanity and a
live configure / re-run / undo of playbooks/gpu_sharing.yml on each). The claim starts at the default pin, the oldest,
and stops before the minor release after the newest cell; the minor releases in between are all tested. ansible-core
reads the claim with its own rule when it loads the collection (a version outside it warns, or fails with
COLLECTIONS_ON_ANSIBLE_VERSION_MISMATCH=error).
"""
from __future__ import annotations

import os
import re
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ansible.plugins.loader import _does_collection_support_ansible_version
from ansible.release import __version__ as INSTALLED_CORE

REPO = Path(__file__).resolve().parents[2]
REQUIRES_ANSIBLE = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"]
CELLS = sorted(path.parent for path in (REPO / "tests" / "matrix").glob("core-*/overrides.txt"))
# The lock this venv was installed from: the matrix names a cell's; else the toolchain's (.venv).
INSTALLED_LOCK = Path(os.environ.get("GPUSHARE_LOCK") or REPO / "requirements-lock.txt").resolve()


def pin(path) -> Version:
    (found,) = re.findall(r"^ansible-core==(\S+)$", path.read_text(), re.M)
    return Version(found)


def locked_core(path) -> Version:
    (found,) = re.findall(r"^ansible-core==(\S+) ", path.read_text(), re.M)
    return Version(found)


def pinned_core() -> Version:
    return pin(REPO / "requirements.txt")


def cores_tested() -> list:
    """The ansible-core of every cell, oldest first: requirements.txt's, then each tests/matrix cell's."""
    return sorted([pinned_core()] + [pin(cell / "overrides.txt") for cell in CELLS])


def test_the_matrix_tests_one_release_of_each_minor_without_a_gap():
    minors = [core.release[:2] for core in cores_tested()]
    first = minors[0]
    assert minors == [(first[0], first[1] + step) for step in range(len(minors))], minors
    assert len(minors) >= 2, "the matrix has no cell beside the default"


def test_requires_ansible_is_the_oldest_tested_core_up_to_the_minor_after_the_newest():
    oldest, newest = cores_tested()[0], cores_tested()[-1]
    assert oldest == pinned_core(), "the default toolchain (requirements.txt) is the oldest ansible-core tested"
    assert SpecifierSet(REQUIRES_ANSIBLE) == SpecifierSet(">=%s,<%d.%d" % (oldest, newest.major, newest.minor + 1)), (
        "meta/runtime.yml requires_ansible %r does not match the tested ansible-core %s" % (REQUIRES_ANSIBLE, cores_tested()))


def test_the_tests_run_on_the_core_of_their_lock():
    assert Version(INSTALLED_CORE) == locked_core(INSTALLED_LOCK), (
        "this venv holds ansible-core %s, %s pins %s: run `make venv` (or `make matrix`)" % (
            INSTALLED_CORE, INSTALLED_LOCK.name, locked_core(INSTALLED_LOCK)))
    assert Version(INSTALLED_CORE) in cores_tested()
    assert locked_core(REPO / "requirements-lock.txt") == pinned_core(), "run make lock"
    for cell in CELLS:
        assert locked_core(cell / "requirements-lock.txt") == pin(cell / "overrides.txt"), "run make lock"
    # what run.sh installs for sanity: the same ansible-core as its toolchain lock
    assert locked_core(REPO / "tests" / "sanity" / "requirements-lock.txt") == pinned_core(), "run make lock"
    for cell in CELLS:
        assert locked_core(cell / "sanity-lock.txt") == pin(cell / "overrides.txt"), "run make lock"


def test_the_ansible_package_installed_is_the_one_built_on_this_core():
    """Each cell pins ansible and ansible-core together (overrides.txt replaces both): the ansible package must be the
    release that requires this ansible-core, whose kubernetes.core it ships."""
    (core_requirement,) = [Requirement(r) for r in metadata.requires("ansible") if Requirement(r).name == "ansible-core"]
    assert Version(INSTALLED_CORE) in core_requirement.specifier, (metadata.version("ansible"), str(core_requirement))


def claimed(version):
    """Whether ansible-core, by its own rule (plugins/loader.py), takes ``version`` as supported by the collection."""
    return _does_collection_support_ansible_version(REQUIRES_ANSIBLE, version)


def test_ansible_core_takes_the_tested_cores_and_nothing_outside_their_minor_releases():
    cores = cores_tested()
    oldest, newest = cores[0], cores[-1]
    for version in [*cores, INSTALLED_CORE]:
        assert claimed(str(version)), version
    outside = ["%d.%d.0" % (newest.major, newest.minor + 1), "%d.%d.0rc1" % (newest.major, newest.minor + 1),
               "%d.0.0" % (newest.major + 1), "%d.%d.99" % (oldest.major, oldest.minor - 1)]
    if oldest.micro:
        outside.append("%d.%d.%d" % (oldest.major, oldest.minor, oldest.micro - 1))
    for version in outside:
        assert not claimed(version), version


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REPO)) for p in REPO.glob("roles/*/meta/main.yml")))
def test_roles_claim_the_oldest_minor_release(path):
    oldest = cores_tested()[0]
    info = yaml.safe_load((REPO / path).read_text())["galaxy_info"]
    assert str(info["min_ansible_version"]) == "%d.%d" % (oldest.major, oldest.minor), path
