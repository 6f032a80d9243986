# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Release hygiene: license, metadata, runtime requirements, and the changelog antsibull-changelog would release.

The built artifact itself (what is in it, what is not, and that it installs and runs) is checked by
tests/integration/test_collection_artifact.py.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
HEADER = "GNU General Public License v3.0+"
# Import name -> distribution, for the third-party packages the collection's code imports.
DISTRIBUTIONS = {"kubernetes": "kubernetes", "yaml": "PyYAML", "urllib3": "urllib3"}
STDLIB = set(sys.stdlib_module_names)


def runtime_python_files():
    return sorted(p for p in [*REPO.glob("plugins/**/*.py"), *REPO.glob("roles/*/files/*.py")] if "__pycache__" not in p.parts)


def requirements(path):
    return [Requirement(line) for line in (REPO / path).read_text().splitlines() if line.strip() and not line.startswith(("#", "-r"))]


def test_the_license_galaxy_yml_declares_is_shipped_and_every_header_says_it():
    assert GALAXY["license"] == ["GPL-3.0-or-later"] and "license_file" not in GALAXY
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("GNU GENERAL PUBLIC LICENSE") and "Version 3, 29 June 2007" in text
    assert "or (at your option) any later version" in " ".join(text.split())
    # an empty file (a package's __init__.py, which ansible-test's empty-init wants empty) holds nothing to license
    missing = [str(p.relative_to(REPO)) for p in runtime_python_files() if p.read_text() and HEADER not in p.read_text()]
    assert not missing, "no GPL-3.0-or-later header: %s" % missing


def test_metadata_has_no_placeholders():
    for key in ("repository", "documentation", "homepage", "issues"):
        value = GALAXY.get(key)
        assert value is None or (value.startswith("https://") and "example" not in value), (key, value)
    assert re.fullmatch(r"\d+\.\d+\.\d+", GALAXY["version"])
    assert (REPO / GALAXY["readme"]).is_file()


def test_kubernetes_core_range_is_bounded_and_holds_the_version_tested():
    galaxy_range = GALAXY["dependencies"]["kubernetes.core"]
    listed = yaml.safe_load((REPO / "requirements.yml").read_text())["collections"]
    assert [c["version"] for c in listed if c["name"] == "kubernetes.core"] == [galaxy_range]
    spec = SpecifierSet(galaxy_range.replace(" ", ""))
    from ansible_collections.kubernetes.core.plugins.module_utils import _version  # noqa: F401  (installed, importable)

    manifest = Path(_version.__file__).resolve().parents[2] / "MANIFEST.json"
    tested = Version(yaml.safe_load(manifest.read_text())["collection_info"]["version"])
    assert tested in spec, (tested, galaxy_range)
    assert Version("%d.0.0" % (tested.major + 1)) not in spec, "the next major of kubernetes.core must not be accepted unseen"


def test_runtime_requirements_cover_every_third_party_import():
    ee = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert ee["dependencies"]["python"] == "meta/ee-requirements.txt"
    declared = {r.name.lower() for r in requirements("meta/ee-requirements.txt")}
    imported = set()
    for path in runtime_python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    own = {p.stem for p in REPO.glob("plugins/module_utils/**/*.py")}  # plain-module fallbacks of the standalone scripts
    third_party = imported - STDLIB - own - {"ansible", "ansible_collections", "__future__"}
    assert third_party <= set(DISTRIBUTIONS), third_party - set(DISTRIBUTIONS)
    assert {DISTRIBUTIONS[name].lower() for name in third_party} == declared


def test_the_pinned_toolchain_is_within_the_runtime_ranges():
    assert "-r meta/ee-requirements.txt" in (REPO / "requirements.txt").read_text().splitlines()
    pins = {r.name.lower(): next(iter(r.specifier)).version for r in requirements("requirements.txt") if r.specifier}
    for requirement in requirements("meta/ee-requirements.txt"):
        installed = pins.get(requirement.name.lower())
        if installed is None:  # not pinned: what the pinned packages pulled in
            from importlib.metadata import version

            installed = version(requirement.name)
        assert Version(installed) in requirement.specifier, (requirement, installed)


@pytest.fixture(scope="module")
def release_notes(tmp_path_factory):
    """CHANGELOG.rst as ``antsibull-changelog generate`` writes it from changelogs/changelog.yaml, in a copy of the checkout;
    the fragments not released yet must lint clean."""
    dest = tmp_path_factory.mktemp("release") / "ansible_collections" / "gpushare" / "k8s"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    env = dict(os.environ, PATH="%s%s%s" % (VENV_BIN, os.pathsep, os.environ.get("PATH", "")), ANSIBLE_COLLECTIONS_PATH="")
    env.pop("ANSIBLE_CONFIG", None)
    lint = subprocess.run([VENV_BIN / "antsibull-changelog", "lint"], cwd=dest, capture_output=True, text=True, env=env, check=False)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr
    (dest / "CHANGELOG.rst").unlink()
    generate = subprocess.run([VENV_BIN / "antsibull-changelog", "generate"], cwd=dest, capture_output=True, text=True, env=env, check=False,
                              timeout=300)
    assert generate.returncode == 0, generate.stdout + generate.stderr
    return (dest / "CHANGELOG.rst").read_text()


def test_the_committed_changelog_is_the_one_the_release_data_generates(release_notes):
    assert (REPO / "CHANGELOG.rst").read_text() == release_notes, "run antsibull-changelog generate and commit CHANGELOG.rst"


def section(notes, title):
    """The lines of one section (between its underlined title and the next one)."""
    match = re.search(r"^%s\n[-~]+\n(.*?)(?=^\S[^\n]*\n[-~=]+\n|\Z)" % re.escape(title), notes, re.S | re.M)
    assert match, "no %r section in\n%s" % (title, notes)
    return match.group(1)


def listed(text):
    return {line[2:].split(" - ")[0].replace("gpushare.k8s.", "") for line in text.splitlines() if line.startswith("- ")}


def test_the_first_release_reads_right(release_notes):
    releases = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"]
    assert list(releases) == ["1.0.0"] and GALAXY["version"] == "1.0.0", (list(releases), GALAXY["version"])
    assert "\nv%s\n" % GALAXY["version"] in release_notes
    assert section(release_notes, "Release Summary").strip().startswith("First release.")
    # Nothing was released before: nothing can be fixed, broken, deprecated or removed yet.
    for title in ("Bugfixes", "Breaking Changes / Porting Guide", "Security Fixes", "Deprecated Features", "Removed Features"):
        assert "\n%s\n" % title not in release_notes, title
    assert listed(section(release_notes, "New Modules")) == {p.stem for p in REPO.glob("plugins/modules/*.py")}
    assert listed(section(release_notes, "New Roles")) == {p.parent.parent.name for p in REPO.glob("roles/*/meta/argument_specs.yml")}
    assert listed(section(release_notes, "New Playbooks")) == {p.stem for p in REPO.glob("playbooks/*.yml")}
    assert listed(section(release_notes, "Filter")) == {p.stem for p in REPO.glob("plugins/filter/*.yml")}
