# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The documentation the collection's tarball ships is written for someone who installed it.

What the tarball holds is decided by galaxy.yml's ``build_ignore`` (matched as ``ansible-galaxy collection build``
matches it) and by tools/build-collection.sh, which puts docs/collection/README.md in place of README.md and drops
docs/collection. A shipped doc may name a file the tarball leaves out only where it says the file is in the source
repository (or a checkout of it); and whatever exists only for the lab says so where ``ansible-doc`` lists it.
"""
from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
from pathlib import Path, PurePosixPath

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
# tools/build-collection.sh: this file becomes the tarball's README.md, and docs/collection is left out.
COLLECTION_README = "docs/collection/README.md"
# What ansible-galaxy always leaves out, before galaxy.yml's build_ignore (ansible.galaxy.collection).
GALAXY_IGNORES = ["MANIFEST.json", "FILES.json", "galaxy.yml", "galaxy.yaml", ".git", "*.pyc", "*.retry", "tests/output",
                  "%s-%s-*.tar.gz" % (GALAXY["namespace"], GALAXY["name"])]
GALAXY_IGNORED_DIRS = {"CVS", ".bzr", ".hg", ".git", ".svn", "__pycache__", ".tox"}
SOURCE_MARK = re.compile(r"source repository|checkout", re.I)
LAB_ONLY_MARK = "(lab only) "


def ignore_patterns():
    return GALAXY_IGNORES + list(GALAXY["build_ignore"])


def omitted(path):
    """Whether ansible-galaxy leaves the checkout's relative ``path`` out: it or a directory above it matches."""
    parts = PurePosixPath(path).parts
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        if depth < len(parts) and parts[depth - 1] in GALAXY_IGNORED_DIRS:
            return True
        if any(fnmatch.fnmatch(prefix, pattern) for pattern in ignore_patterns()):
            return True
    return False


def checkout_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return sorted(name for name in out.decode().split("\0") if name and (REPO / name).is_file())


def shipped(path):
    """Whether the checkout's ``path`` is in the tarball (under its own name, or as README.md)."""
    if path == COLLECTION_README:
        return True
    if path == "README.md" or path.startswith("docs/collection/"):
        return False
    return not omitted(path)


def test_the_omission_rules_agree_with_what_galaxy_yml_says():
    for path in ("tools/build-collection.sh", "tests/integration/conftest.py", "Makefile", "BENCHMARKS.md", "README.md",
                 "docs/collection/other.md", "noxfile.py", "plugins/modules/__pycache__/x.pyc", "gpushare-k8s-1.0.0.tar.gz"):
        assert not shipped(path), path
    for path in ("plugins/modules/objects.py", "docs/nvidia-gfd.md", "meta/runtime.yml", "meta/ee-requirements.txt",
                 "roles/gpu_sharing/meta/argument_specs.yml", "tests/unit/test_shipped_docs.py", COLLECTION_README):
        assert shipped(path), path


# ---- pointers to files the tarball leaves out ----------------------------------------------------------------------


def omitted_pointers():
    """(name, regex) for each checkout path the tarball leaves out at its top (what build_ignore names), and ``make``.

    A directory is named as ``dir/...``; a file, or a path with a slash, by its name alone. The Makefile's targets
    are named as ``make <target>``.
    """
    names = set()
    for pattern in ignore_patterns():
        for match in REPO.glob(pattern):
            rel = match.relative_to(REPO).as_posix()
            if not shipped(rel) and rel.split("/")[0] not in GALAXY_IGNORED_DIRS and not rel.startswith(".git"):
                names.add((rel, match.is_dir()))
    pointers = []
    for rel, is_dir in sorted(names):
        body = re.escape(rel) + ("(?:/|\\b)" if "/" in rel else "/" if is_dir else "(?![\\w-]|\\.\\w)")
        pointers.append((rel, re.compile(r"(?<![\w./<>-])" + body)))
    if omitted("Makefile") and (REPO / "Makefile").is_file():
        targets = re.findall(r"^([a-z][\w-]*):", (REPO / "Makefile").read_text(), re.M)
        pointers.append(("Makefile", re.compile(r"\bmake (?:%s)(?![\w-])" % "|".join(map(re.escape, targets)))))
    return pointers


POINTERS = omitted_pointers()


def markdown_units(text):
    """(heading chain, unit) for each paragraph, list item, table row and fenced block of a markdown text."""
    units, headings, block, fence = [], [], [], None

    def flush():
        if block:
            units.append((" / ".join(headings), "\n".join(block)))
            block.clear()

    for line in text.splitlines():
        if fence is not None:
            block.append(line)
            if line.strip().startswith(fence):
                fence = None
                flush()
            continue
        stripped = line.strip()
        heading = re.match(r"(#+) (.*)", line)
        if heading:
            flush()
            level = len(heading.group(1))
            headings[level - 1:] = [heading.group(2)]
            continue
        if stripped.startswith("```"):
            flush()
            fence = stripped[:3]
            block.append(line)
        elif not stripped:
            flush()
        elif stripped.startswith("|") or re.match(r"(- |\* |\d+\. )", stripped):
            flush()
            block.append(line)
            if stripped.startswith("|"):
                flush()
        else:
            block.append(line)
    flush()
    return units


def yaml_units(text):
    """Each string of a YAML document, and each block of comment lines."""
    units, comments = [], []
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("#"):
            comments.append(line)
        elif comments:
            units.append(("", "\n".join(comments)))
            comments = []

    def strings(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for key, value in node.items():
                yield from strings(key)
                yield from strings(value)
        elif isinstance(node, list):
            for item in node:
                yield from strings(item)

    units += [("", s) for s in strings(yaml.safe_load(text))]
    return units


def module_doc_texts(path):
    """DOCUMENTATION, EXAMPLES and RETURN of a module."""
    tree = ast.parse((REPO / path).read_text())
    return [node.value.value for node in tree.body if isinstance(node, ast.Assign) and len(node.targets) == 1
            and getattr(node.targets[0], "id", None) in ("DOCUMENTATION", "EXAMPLES", "RETURN")]


def shipped_docs():
    """{path: [(heading chain, unit)]} for every document a user of the tarball reads.

    Markdown files; module, filter and role documentation (what ansible-doc shows) and roles' galaxy_info; and the
    comments of the YAML a user opens (the playbooks, the lab's inventory, meta/, requirements.yml).
    """
    docs = {}
    for path in checkout_files():
        if not shipped(path):
            continue
        if path.endswith(".md"):
            docs[path] = markdown_units((REPO / path).read_text())
        elif re.fullmatch(r"plugins/modules/[^/]+\.py", path):
            docs[path] = [unit for text in module_doc_texts(path) for unit in yaml_units(text)]
        elif re.fullmatch(r"plugins/filter/[^/]+\.yml|roles/[^/]+/meta/(argument_specs|main)\.yml|playbooks/[^/]+\.yml"
                          r"|inventory/.+\.yml|meta/.+\.yml|requirements\.yml", path):
            docs[path] = yaml_units((REPO / path).read_text())
        elif re.fullmatch(r"meta/.+\.txt", path):
            docs[path] = [("", line) for line in (REPO / path).read_text().splitlines() if line.startswith("#")]
    return docs


SHIPPED_DOCS = shipped_docs()


def test_the_shipped_docs_are_found():
    assert {COLLECTION_README, "docs/nvidia-gfd.md", "plugins/modules/objects.py", "roles/gpu_sharing/meta/argument_specs.yml",
            "plugins/filter/node_pools.yml", "playbooks/gpu_sharing.yml", "meta/runtime.yml"} <= set(SHIPPED_DOCS)
    assert "README.md" not in SHIPPED_DOCS and not [p for p in SHIPPED_DOCS if p.startswith(("tests/integration/", "tools/"))]
    names = {name for name, _regex in POINTERS}
    assert {"tools", "tests/integration", "Makefile", "BENCHMARKS.md"} <= names, names


def test_the_pointer_rules_find_what_they_should():
    def found(text):
        return [name for name, regex in POINTERS if regex.search(text)]

    assert found("run `tests/integration/test_nvidia_gfd.py`") == ["tests/integration"]
    assert found("`tools/nvidia/build.sh`") == ["tools"]
    assert found("see BENCHMARKS.md.") == ["BENCHMARKS.md"]
    assert "Makefile" in found("start it with `make cluster`")
    assert found("the pinned toolchain is in requirements.txt") == ["requirements.txt"]
    assert found("meta/ee-requirements.txt, the tools a team uses, both collections, <checkout>/tools, make the API server") == []


@pytest.mark.parametrize("path", sorted(SHIPPED_DOCS))
def test_a_shipped_doc_names_an_omitted_file_only_as_the_source_repositorys(path):
    found = []
    for headings, unit in SHIPPED_DOCS[path]:
        if SOURCE_MARK.search(headings) or SOURCE_MARK.search(unit):
            continue
        for name, regex in POINTERS:
            match = regex.search(unit)
            if match:
                line = unit[:match.start()].count("\n") + 1
                found.append("%s (line %d of %r): %s" % (name, line, unit.splitlines()[0][:60], unit.splitlines()[line - 1].strip()))
    assert not found, ("the tarball leaves these out; point at what an installed collection has, or say it is in the source "
                       "repository: %s" % found)


# ---- lab-only content says so --------------------------------------------------------------------------------------

# What exists only for the lab: it only makes sense on the local lab cluster (kwok nodes, its control plane, its
# simulated GPUs and DRA driver) or for the lab's own files and steps. Everything else is for any cluster.
LAB_ONLY = {
    "module": {
        "kwok_cluster": "creates, starts and deletes the lab's kwokctl cluster",
        "node_resources": "writes node status a device plugin owns on a real node; refuses nodes that are not kwok nodes",
        "dra_resource_slices": "publishes simulated GPUs as a DRA driver would",
        "preflight_check": "checks the lab's inventory data and the lab cluster before the lab writes",
    },
    "role": {
        "lab_cluster": "starts or removes the local lab cluster",
        "lab_preflight": "the lab's first step: checks its data, the local control plane and the cluster",
        "lab_report": "prints the lab's summary",
        "isolation_table": "writes the lab's out/isolation.txt (step 7)",
        "placement": "places the lab's workloads and writes its out/placement.txt",
        "scheduling_check": "the lab's proof that resource names never share slots, with Pods of its own",
        "gpu_feature_labels": "labels simulated nodes; on a real node gpu-feature-discovery does",
        "rbac": "a ServiceAccount granted exactly the calls the lab makes",
        "dra_driver": "plays a DRA driver on the lab's simulated DRA nodes",
        "dra_workloads": "runs the DRA lab's workloads",
        "dra_report": "writes the DRA lab's reports",
        "dra_team_quota": "the DRA lab's quota step, over its simulated devices",
    },
    "filter": {
        "build_progress": "progress lines of the lab cluster's control-plane build",
        "kwokctl_mismatches": "compares a running kwokctl cluster with the lab's",
        "kwokctl_ports": "the lab cluster's kwokctl ports",
        "loopback_address": "keeps the lab cluster's unauthenticated components on loopback",
        "lab_name_errors": "checks the names of the lab's inventory",
        "lab_summary": "the lab's end-of-run summary",
        "dra_device_classes": "the DRA lab's DeviceClasses",
        "dra_nodes": "validates the DRA lab's simulated nodes",
        "dra_placement_report": "the DRA lab's out/dra-placement.txt",
        "dra_share_limits": "the DRA lab's shared class, for the lab's request check",
        "dra_sharing_table": "the DRA lab's side-by-side table",
        "dra_team": "the DRA lab's quota and claims",
        "dra_workload_errors": "checks the DRA lab's allocations",
        "dra_workloads": "the DRA lab's workloads",
        "gpu_feature_labels": "labels for simulated nodes",
        "gpu_feature_label_entries": "node_resources entries for simulated nodes",
        "intent_lab_pools": "the lab inventory's nodes as pools",
        "intent_dra_pools": "the DRA lab inventory's nodes as pools",
        "intent_placement_report": "checks the lab's intent Pods against its isolation table",
        "intent_verdict": "the lab's intent check, reused while nothing that decides placement changed",
        "placement_fits": "the placement role's fit",
        "placement_pods": "the placement role's Pods",
        "rbac_manifest": "the lab's RBAC",
        "rbac_objects": "the lab's RBAC",
        "rbac_token_secrets": "the lab's ServiceAccounts' tokens",
        "gpu_operator_hardware": "the simulated GPUs the lab cluster's GPU Operator stand-in reads",
        "gpu_operator_mode_errors": "checks the lab's mode (advertise on kwok nodes, or operator)",
        "team_fill_errors": "the lab's step 5 proof needs the team to fill its quota exactly",
    },
}


def short_descriptions():
    """{(kind, name): [short_description, ...]}: every module, role entry point and filter; and roles' galaxy_info."""
    found = {}
    for path in sorted(REPO.glob("plugins/modules/*.py")):
        doc = yaml.safe_load(module_doc_texts(path.relative_to(REPO).as_posix())[0])
        found[("module", path.stem)] = [doc["short_description"]]
    for path in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        role = path.parent.parent.name
        specs = yaml.safe_load(path.read_text())["argument_specs"]
        found[("role", role)] = [spec["short_description"] for spec in specs.values()]
        info = yaml.safe_load((path.parent / "main.yml").read_text())["galaxy_info"]
        found[("role", role)].append(info["description"])
    for path in sorted(REPO.glob("plugins/filter/*.yml")):
        found[("filter", path.stem)] = [yaml.safe_load(path.read_text())["DOCUMENTATION"]["short_description"]]
    return found


SHORT_DESCRIPTIONS = short_descriptions()


def test_every_lab_only_name_exists():
    missing = [(kind, name) for kind, names in LAB_ONLY.items() for name in names if (kind, name) not in SHORT_DESCRIPTIONS]
    assert not missing, missing


@pytest.mark.parametrize("kind, name", sorted(SHORT_DESCRIPTIONS))
def test_lab_only_content_says_so_and_nothing_else_does(kind, name):
    descriptions = SHORT_DESCRIPTIONS[(kind, name)]
    if name in LAB_ONLY[kind]:
        assert all(d.startswith(LAB_ONLY_MARK) for d in descriptions), (
            "%s %s exists only for the lab (%s): start its short description with %r: %s"
            % (kind, name, LAB_ONLY[kind][name], LAB_ONLY_MARK, descriptions))
    else:
        assert not any("lab only" in d.lower() for d in descriptions), (
            "%s %s says it is lab only; if it is, add it to LAB_ONLY with the reason: %s" % (kind, name, descriptions))
