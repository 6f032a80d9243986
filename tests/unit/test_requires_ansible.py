# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""meta/runtime.yml's ``requires_ansible`` claims only the ansible-core the tests run on.

requirements.txt pins the one ansible-core every test runs on (the unit and live tests in .venv, ansible-test sanity in
.venv-sanity: tests/sanity/run.sh installs its lock, compiled with the same pin). The claim starts at that pin and
stops before the next minor release; ansible-core reads it with its own rule when it loads the collection (a version
outside it warns, or fails with COLLECTIONS_ON_ANSIBLE_VERSION_MISMATCH=error).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ansible.plugins.loader import _does_collection_support_ansible_version
from ansible.release import __version__ as INSTALLED_CORE

REPO = Path(__file__).resolve().parents[2]
REQUIRES_ANSIBLE = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"]


def pinned_core() -> Version:
    (pin,) = re.findall(r"^ansible-core==(\S+)$", (REPO / "requirements.txt").read_text(), re.M)
    return Version(pin)


def test_requires_ansible_is_the_pinned_core_up_to_the_next_minor_release():
    pin = pinned_core()
    assert SpecifierSet(REQUIRES_ANSIBLE) == SpecifierSet(">=%s,<%d.%d" % (pin, pin.major, pin.minor + 1)), (
        "meta/runtime.yml requires_ansible %r does not match ansible-core==%s in requirements.txt" % (REQUIRES_ANSIBLE, pin))


def test_the_tests_run_on_the_pinned_core():
    assert Version(INSTALLED_CORE) == pinned_core(), "the .venv holds ansible-core %s: run `make venv`" % INSTALLED_CORE
    sanity_lock = (REPO / "tests" / "sanity" / "requirements-lock.txt").read_text()  # what run.sh installs for sanity
    assert re.findall(r"^ansible-core==(\S+) ", sanity_lock, re.M) == [str(pinned_core())], "run make lock"


def claimed(version):
    """Whether ansible-core, by its own rule (plugins/loader.py), takes ``version`` as supported by the collection."""
    return _does_collection_support_ansible_version(REQUIRES_ANSIBLE, version)


def test_ansible_core_takes_the_pin_and_nothing_outside_its_minor_release():
    pin = pinned_core()
    assert claimed(str(pin))
    assert claimed(INSTALLED_CORE)
    outside = ["%d.%d.0" % (pin.major, pin.minor + 1), "%d.%d.0rc1" % (pin.major, pin.minor + 1), "%d.0.0" % (pin.major + 1),
               "%d.%d.99" % (pin.major, pin.minor - 1)]
    if pin.micro:
        outside.append("%d.%d.%d" % (pin.major, pin.minor, pin.micro - 1))
    for version in outside:
        assert not claimed(version), version


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REPO)) for p in REPO.glob("roles/*/meta/main.yml")))
def test_roles_claim_the_same_minor_release(path):
    pin = pinned_core()
    info = yaml.safe_load((REPO / path).read_text())["galaxy_info"]
    assert str(info["min_ansible_version"]) == "%d.%d" % (pin.major, pin.minor), path
