# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils by domain (docs/layout.md): each package imports only the packages before it in LAYERS, so
nothing but the lab's own modules, filters and roles reaches ``lab/``, and the product never depends on the lab.

Imports are read from the source (every ``import``, top-level or inside a function), relative and absolute alike."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MODULE_UTILS = Path(__file__).resolve().parents[2] / "plugins" / "module_utils"
PREFIX = "ansible_collections.gpushare.k8s.plugins.module_utils"

# Left to right: a package may import its own modules and those of the packages to its left ("" is the top level:
# errors, names, files).
LAYERS = ("", "k8s", "hardware", "nvidia", "dra", "requests", "lab")
# Loaded as plain modules side by side by bin/check-request.sh: they may import only each other.
STANDALONE = {"k8s/quantity.py", "k8s/manifest_yaml.py", "requests/gpu_requests.py", "requests/check_request.py"}


def package_of(path: Path) -> str:
    parts = path.relative_to(MODULE_UTILS).parts
    return parts[0] if len(parts) > 1 else ""


def imported_modules(path: Path):
    """``[(line, dotted module under module_utils)]`` of every collection import in ``path``."""
    return imports_of(path.read_text(), path.relative_to(MODULE_UTILS).with_suffix("").parts[:-1], str(path))


def imports_of(source: str, here: tuple, path: str = "<probe>"):
    """:func:`imported_modules` of ``source``, a file of package ``here`` (its parts under module_utils)."""
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[:len(here) - (node.level - 1)]) if node.level > 1 else list(here)
                if node.level - 1 > len(here):
                    raise AssertionError("%s:%d climbs above module_utils" % (path, node.lineno))
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith(PREFIX):
                target = node.module[len(PREFIX):].strip(".").split(".") if node.module != PREFIX else []
            else:
                continue
            for alias in node.names:  # "from .k8s import auth" names a module; "from .k8s.auth import X" a name
                candidate = target + [alias.name]
                module = candidate if (MODULE_UTILS.joinpath(*candidate).with_suffix(".py")).is_file() else target
                found.append((node.lineno, ".".join(module)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX + "."):
                    found.append((node.lineno, alias.name[len(PREFIX) + 1:]))
    return found


FILES = sorted(path for path in MODULE_UTILS.rglob("*.py") if "__pycache__" not in path.parts)


def test_every_module_sits_in_a_known_package():
    assert {package_of(path) for path in FILES} == set(LAYERS)
    top = sorted(path.name for path in FILES if package_of(path) == "")
    assert top == ["errors.py", "files.py", "names.py"], top
    for package in LAYERS[1:]:
        assert (MODULE_UTILS / package / "__init__.py").read_text() == "", "empty, as ansible-test's empty-init wants"


@pytest.mark.parametrize("path", FILES, ids=[str(path.relative_to(MODULE_UTILS)) for path in FILES])
def test_imports_point_left_only(path):
    mine = LAYERS.index(package_of(path))
    for line, module in imported_modules(path):
        target = module.split(".")[0] if "." in module else ""
        assert (MODULE_UTILS.joinpath(*module.split(".")).with_suffix(".py")).is_file(), "%s:%d imports %s, which does not exist" % (path, line, module)
        assert LAYERS.index(target) <= mine, "%s:%d imports %s: package %r may import only %s" % (
            path.relative_to(MODULE_UTILS), line, module, LAYERS[mine], ", ".join(repr(item) for item in LAYERS[:mine + 1]))


def test_nothing_but_the_lab_imports_the_lab():
    """The rule the layers give, stated once more as the issue asks: no module_utils package imports from lab/."""
    offenders = ["%s:%d -> %s" % (path.relative_to(MODULE_UTILS), line, module)
                 for path in FILES if package_of(path) != "lab"
                 for line, module in imported_modules(path) if module.startswith("lab.")]
    assert offenders == []


def test_the_standalone_check_imports_only_its_own_four_files():
    for name in sorted(STANDALONE):
        path = MODULE_UTILS / name
        others = {module.replace(".", "/") + ".py" for _line, module in imported_modules(path)}
        assert others <= STANDALONE, (name, sorted(others - STANDALONE))


def test_the_checker_sees_a_bad_import():
    """The reader is not blind: lab imports written into a k8s module, relative and absolute, are found as lab's."""
    source = "from ..lab import inventory\nfrom ..lab.rbac import rbac_objects\n" \
             "from %s.lab.dra import workload_stages\nimport %s.lab.report\n" % (PREFIX, PREFIX)
    assert [module for _line, module in imports_of(source, ("k8s",))] == ["lab.inventory", "lab.rbac", "lab.dra", "lab.report"]
