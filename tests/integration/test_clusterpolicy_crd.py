# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ClusterPolicy the collection writes, under NVIDIA's own schema: the CRD that controller-gen generates from
gpu-operator's public api/nvidia/v1 types (tools/clusterpolicy-crd/build.sh, cached in the user's cache as
`make clusterpolicy-crd` builds it), on a lab cluster of this module's own (gpushare-it-crd, without the stand-in and
the lab's ClusterPolicy).

* The generated CRD applies server-side and becomes Established.
* The ClusterPolicy patch the roles write (the gpu_operator_policy_patch filter over the lab's operator-mode inputs,
  inventory/group_vars/all/lab.yml), merge-patched as the gpu_operator role does and server-side applied, is stored
  field by field as sent: nothing pruned, nothing changed; what NVIDIA's schema adds (its defaults) is listed. The
  undo the gpu_sharing role computes from its record (sharing_record, sharing_undo_plan) puts the spec back.
* Values the collection's validation refuses, and values its filter lets through, each tried (dry run) against
  NVIDIA's schema: where the two disagree, the difference is data here (DIFFERENCES), so a new pin that changes one
  fails with the case named.
* The lab_cluster role installs this CRD for the stand-in and creates its ClusterPolicy with exactly the fields NVIDIA's
  schema requires (roles/lab_cluster/vars/main.yml): NVIDIA's schema accepts it. The object earlier versions of the
  role created (without them) is refused, and so is the undo recorded for it.
* build.sh says what it does (a fake `go` first on PATH and a cache of the test's own: nothing compiled): progress
  lines with a heartbeat, nothing but the path when cached, the log's last lines and nothing installed on a failure.

A cold build of controller-gen takes one to two minutes on 2 cores (its progress lines are shown as a warning), the
generation seconds; warm, the build is a lookup.
"""
from __future__ import annotations

import copy
import json
import subprocess
import time
import warnings

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from conftest import REPO, subprocess_env
from reliability import LAB_VARS, OwnCluster
from ansible_collections.gpushare.k8s.plugins.filter.gpu_operator import gpu_operator_policy_patch
from ansible_collections.gpushare.k8s.plugins.filter.sharing import sharing_record, sharing_record_seal, sharing_undo_plan
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.sharing_record import RECORD_KEY

pytestmark = pytest.mark.slow

CLUSTER = "gpushare-it-crd"
BUILD = REPO / "tools" / "clusterpolicy-crd" / "build.sh"
ROLE_VARS = yaml.safe_load((REPO / "roles" / "lab_cluster" / "vars" / "main.yml").read_text(encoding="utf-8"))
POLICY = LAB_VARS["gpushare_operator_cluster_policy"]
MANAGER = "gpushare.k8s"
RECORD = "gpushare-sharing-record"

# What earlier versions of the lab_cluster role created ("with the chart's defaults", under a minimal CRD of ours).
LAB_CREATED_SPEC = {"mig": {"strategy": "single"},
                    "migManager": {"config": {"name": "default-mig-parted-config", "default": "all-disabled"}}}
# The spec fields NVIDIA's types require (no omitempty): the GPU Operator's Helm chart always renders them, and the
# lab_cluster role now creates them (and adds them to a ClusterPolicy an earlier version created).
NVIDIA_REQUIRED = ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter", "operator", "toolkit")

# The lab's operator-mode inputs, as the roles pass them to the filter.
PATCH_INPUTS = (LAB_VARS["gpushare_device_plugin_configmap"], LAB_VARS["gpushare_operator_default_config"],
                LAB_VARS["gpushare_operator_mig_strategy"], LAB_VARS["gpushare_operator_mig_parted_configmap"])

# Values tried against both sides: (case, filter arguments, spec written when the filter refuses them; None: the
# filter's own patch), then whether the collection accepts them, whether NVIDIA's schema accepts them, and why they
# differ. A row where the two agree needs no reason.
CASES = [
    ("the lab's inputs", PATCH_INPUTS, None, True, True, ""),
    ("strategy single", (PATCH_INPUTS[0], PATCH_INPUTS[1], "single", PATCH_INPUTS[3]), None, True, True, ""),
    ("strategy bogus", (PATCH_INPUTS[0], PATCH_INPUTS[1], "bogus", PATCH_INPUTS[3]), {"mig": {"strategy": "bogus"}}, False, False, ""),
    ("strategy none", (PATCH_INPUTS[0], PATCH_INPUTS[1], "none", PATCH_INPUTS[3]), {"mig": {"strategy": "none"}}, False, True,
     "NVIDIA's enum is none/single/mixed; the collection writes single or mixed only (none is a device-plugin flag)"),
    ("default layout all-1g.10gb", PATCH_INPUTS + ("all-1g.10gb",), {"migManager": {"config": {"default": "all-1g.10gb"}}}, False, False, ""),
    ("default layout empty", PATCH_INPUTS + ("",), None, True, True, ""),
    ("default config 'bad name!'", (PATCH_INPUTS[0], "bad name!", PATCH_INPUTS[2], PATCH_INPUTS[3]),
     {"devicePlugin": {"config": {"default": "bad name!"}}}, False, True,
     "NVIDIA types the config names as plain strings (no pattern, no length)"),
    ("ConfigMap name of 64 characters", ("c" * 64,) + PATCH_INPUTS[1:], {"devicePlugin": {"config": {"name": "c" * 64}}}, False, True,
     "NVIDIA types the config names as plain strings (no pattern, no length)"),
    ("config default 42 (not a string)", None, {"devicePlugin": {"config": {"default": 42}}}, False, False, ""),
]
# The cases where the two sides differ, as data: the collection stricter (refuses what NVIDIA's schema takes) or laxer.
DIFFERENCES = {
    "strategy none": "collection stricter",
    "default config 'bad name!'": "collection stricter",
    "ConfigMap name of 64 characters": "collection stricter",
}


# go as build.sh calls it: `go env GOVERSION`, then `go build ... -o OUT sigs.k8s.io/controller-tools/cmd/controller-gen`;
# the controller-gen it "builds" writes a one-line CRD into the directory of its output:crd:dir= argument.
FAKE_GO = """#!/bin/sh
case "$1" in
  env) echo go1.26.0 ;;
  build) sleep SECONDS; [ -z "FAIL" ] || { echo "controller-gen.go:1:1: fake go: compile error" >&2; exit 1; }
         while [ "$1" != "-o" ]; do shift; done
         printf '#!/bin/sh\\nfor a; do case "$a" in output:crd:dir=*) d=${a#output:crd:dir=} ;; esac; done\\n' > "$2"
         printf 'echo "kind: CustomResourceDefinition" > "$d/nvidia.com_clusterpolicies.yaml"\\n' >> "$2"; chmod +x "$2" ;;
  *) echo "fake go: unexpected $*" >&2; exit 3 ;;
esac
"""


def _build(cache, env, timeout=120):
    return subprocess.run([str(BUILD), str(cache)], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=subprocess_env(**env), check=False)


def _fake_go(tmp_path, seconds, fail=""):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(FAKE_GO.replace("SECONDS", str(seconds)).replace("FAIL", fail))
    go.chmod(0o755)
    return {"PATH": "%s:%s" % (bin_dir, subprocess_env()["PATH"]), "GPUSHARE_CLUSTERPOLICY_CRD_HEARTBEAT": "1"}


def test_a_cold_build_prints_progress_and_installs_controller_gen_and_the_crd_into_the_cache(tmp_path):
    cache, env = tmp_path / "cache", _fake_go(tmp_path, 3)
    proc = _build(cache, env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("[build clusterpolicy-crd] building controller-gen v0.23.0 ") and "about two minutes" in lines[0], lines
    assert sum("still compiling (0m0" in line for line in lines) >= 2, proc.stderr
    assert any(line.startswith("[build clusterpolicy-crd] generating the ClusterPolicy CRD from github.com/NVIDIA/gpu-operator/api/nvidia/v1@v0.0.0-")
               for line in lines), proc.stderr
    assert lines[-1].startswith("[build clusterpolicy-crd] installed in %s/clusterpolicy-crd-" % cache), lines[-1]
    path = proc.stdout.strip()
    assert path.startswith("%s/clusterpolicy-crd-" % cache) and path.endswith("/nvidia.com_clusterpolicies.yaml")
    assert open(path, encoding="utf-8").read() == "kind: CustomResourceDefinition\n"
    names = sorted(p.name for p in cache.iterdir())  # the temporary siblings are gone
    assert [name.rsplit("-", 1)[0] for name in names] == ["clusterpolicy-crd", "controller-gen-v0.23.0", "logs"], names
    again = _build(cache, env)
    assert again.returncode == 0 and again.stdout == proc.stdout and again.stderr == ""  # cached: a lookup, silent


def test_a_failed_build_shows_the_last_lines_of_its_log_and_installs_nothing(tmp_path):
    cache = tmp_path / "cache"
    proc = _build(cache, _fake_go(tmp_path, 0, fail="yes"))
    assert proc.returncode == 1
    assert "go build of controller-gen failed after 0m0" in proc.stderr and "fake go: compile error" in proc.stderr, proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in cache.iterdir()) == ["logs"]


def _table(rows, headers):
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _leaves(tree, prefix=()):
    """``{path: value}`` of every leaf of ``tree`` (an empty mapping is a leaf)."""
    if isinstance(tree, dict) and tree:
        out = {}
        for key, value in tree.items():
            out.update(_leaves(value, prefix + (key,)))
        return out
    return {prefix: tree}


def _merge(base, patch):
    """A JSON merge patch (RFC 7386) of ``patch`` onto ``base``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base) if isinstance(base, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


@pytest.fixture(scope="module")
def generated_crd():
    """The generated CRD's path (built once into the user's cache; a cold build's progress lines shown as a warning)."""
    start = time.monotonic()
    proc = subprocess.run([str(BUILD)], cwd=REPO, capture_output=True, text=True, timeout=1200, env=subprocess_env(), check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if proc.stderr:
        warnings.warn("tools/clusterpolicy-crd/build.sh ran in %.0f s:\n%s" % (time.monotonic() - start, proc.stderr), stacklevel=1)
    again = subprocess.run([str(BUILD)], cwd=REPO, capture_output=True, text=True, timeout=60, env=subprocess_env(), check=False)
    assert again.returncode == 0 and again.stdout == proc.stdout and again.stderr == "", again.stderr  # warm: a lookup, silent
    path = proc.stdout.strip()
    assert path.endswith("/nvidia.com_clusterpolicies.yaml") and "/clusterpolicy-crd-" in path, path
    return yaml.safe_load(open(path, encoding="utf-8"))


def _schema(crd):
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


@pytest.fixture(scope="module")
def cluster(generated_crd):
    own = OwnCluster(CLUSTER)
    try:
        yield own.up()
    finally:
        own.down()


@pytest.fixture(scope="module")
def policies(cluster, generated_crd):
    """The ClusterPolicy resource, once the generated CRD is applied server-side and Established."""
    dyn = DynamicClient(cluster.core.api_client)
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.server_side_apply(body=generated_crd, field_manager=MANAGER, force_conflicts=True)
    deadline = time.monotonic() + 60
    while True:
        conditions = crds.get(name="clusterpolicies.nvidia.com").to_dict().get("status", {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            break
        assert time.monotonic() < deadline, "the generated CRD is not Established after 60 s: %s" % conditions
        time.sleep(0.2)
    while True:
        try:
            return DynamicClient(cluster.core.api_client).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
        except ResourceNotFoundError:
            assert time.monotonic() < deadline, "nvidia.com/v1 ClusterPolicy is not served 60 s after the CRD was applied"
            time.sleep(0.2)


def _created_spec():
    """The spec the lab_cluster role creates today: NVIDIA's required fields and the chart's defaults (its vars)."""
    return dict(copy.deepcopy(ROLE_VARS["lab_cluster__policy_required"]), **copy.deepcopy(ROLE_VARS["lab_cluster__policy_chart_defaults"]))


def _policy(spec):
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": POLICY}, "spec": spec}


def _stored_spec(policies):
    return policies.get(name=POLICY).to_dict()["spec"]


def _refusal(call):
    """``None`` when ``call`` is accepted, else the API server's message."""
    try:
        call()
    except ApiException as exc:
        assert exc.status == 422, exc
        return json.loads(exc.body)["message"]
    return None


def test_nvidia_schema_requires_what_the_chart_renders_and_refuses_the_earlier_lab_object_without_it(generated_crd, policies):
    spec = _schema(generated_crd)["properties"]["spec"]
    assert tuple(sorted(spec["required"])) == tuple(sorted(NVIDIA_REQUIRED)), spec["required"]
    refused = _refusal(lambda: policies.create(body=_policy(copy.deepcopy(LAB_CREATED_SPEC)), dry_run="All"))
    assert refused and all("spec.%s: Required value" % name in refused for name in NVIDIA_REQUIRED), refused


@pytest.fixture(scope="module")
def created(policies):
    """ClusterPolicy cluster-policy created as the lab creates it, with the fields NVIDIA requires; its stored spec."""
    policies.create(body=_policy(_created_spec()))
    return _stored_spec(policies)


def test_the_collection_patch_is_stored_field_by_field_and_its_undo_puts_the_spec_back(policies, created):
    before, sent = created, _created_spec()
    assert _stored_spec(policies) == before
    for path, value in _leaves(sent).items():  # the create: nothing pruned (an empty mapping may hold defaults)
        stored = before
        for key in path:
            stored = stored[key]
        assert stored == value or (value == {} and isinstance(stored, dict)), (path, value, stored)
    defaults = sorted((".".join(path), value) for path, value in _leaves(before).items() if path not in _leaves(sent))

    patch = gpu_operator_policy_patch(*PATCH_INPUTS)
    policies.patch(body=_policy(copy.deepcopy(patch["spec"])), name=POLICY, content_type="application/merge-patch+json")
    after = _stored_spec(policies)
    rows = []
    for path, value in sorted(_leaves(patch["spec"]).items()):
        stored = after
        for key in path:
            stored = (stored or {}).get(key)
        rows.append(("spec." + ".".join(path), json.dumps(value), json.dumps(stored), "yes" if stored == value else "NO"))
    print("\nThe collection's ClusterPolicy patch (lab operator-mode inputs) under NVIDIA's schema:\n")
    print(_table(rows, ("field", "sent", "stored", "same")))
    print("\nDefaulted by NVIDIA's schema on create (not sent): %s" % ", ".join("%s=%s" % item for item in defaults))
    assert all(row[3] == "yes" for row in rows), _table(rows, ("field", "sent", "stored", "same"))
    assert after == _merge(before, patch["spec"]), (after, before)  # and nothing else changed

    # the same object server-side applied by the collection's field manager: accepted, nothing changes
    policies.server_side_apply(body=_policy(copy.deepcopy(patch["spec"])), field_manager=MANAGER, force_conflicts=True)
    assert _stored_spec(policies) == after

    # the gpu_sharing role's undo: its record of the earlier values, then the merge patch that puts them back
    record = sharing_record([], RECORD, {"spec": before}, patch, "patch", {}, [], [])
    plan = sharing_undo_plan([{"metadata": {"name": RECORD}, "data": {RECORD_KEY: record}}], RECORD, _sealed(after, record), None, [])
    policies.patch(body=_policy(plan["policy_patch"]["spec"]), name=POLICY, content_type="application/merge-patch+json")
    assert _stored_spec(policies) == before, plan


def _sealed(spec, record):
    """The ClusterPolicy as the role leaves it: ``spec``, and the seal of ``record`` it wrote before the record."""
    return {"metadata": {"name": POLICY, "annotations": {"gpushare.k8s/sharing-record": sharing_record_seal([], RECORD, {}, record)}}, "spec": spec}


def test_the_undo_for_a_policy_created_as_the_lab_did_before_removes_a_required_field(policies, created):
    """The record of a ClusterPolicy without devicePlugin (the lab's object before it was created with NVIDIA's required
    fields) puts devicePlugin back as absent: under NVIDIA's schema, which requires it, that undo is refused. Created
    with the required fields, as the lab_cluster role now does, the undo removes devicePlugin.config alone (above)."""
    patch = gpu_operator_policy_patch(*PATCH_INPUTS)
    record = sharing_record([], RECORD, {"spec": copy.deepcopy(LAB_CREATED_SPEC)}, patch, "patch", {}, [], [])
    plan = sharing_undo_plan([{"metadata": {"name": RECORD}, "data": {RECORD_KEY: record}}], RECORD, _sealed(created, record), None, [])
    assert plan["policy_patch"]["spec"]["devicePlugin"] is None, plan
    refused = _refusal(lambda: policies.patch(body=_policy(plan["policy_patch"]["spec"]), name=POLICY, dry_run="All",
                                              content_type="application/merge-patch+json"))
    assert refused and "spec.devicePlugin: Required value" in refused, refused


@pytest.mark.usefixtures("created")
def test_values_refused_by_the_collection_against_nvidia_schema(policies):
    rows, wrong = [], []
    for case, args, written, collection_ok, nvidia_ok, reason in CASES:
        try:
            spec = gpu_operator_policy_patch(*args)["spec"] if args else None
        except AnsibleFilterError as exc:  # the collection refuses
            spec, refused_by_collection = None, str(exc).split(". Fix", maxsplit=1)[0]
        else:
            refused_by_collection = None if args else "not a value the filter writes"
        body = spec if spec is not None else written
        assert body is not None, case
        refused = _refusal(lambda body=body: policies.patch(body=_policy(copy.deepcopy(body)), name=POLICY, dry_run="All",
                                                            content_type="application/merge-patch+json"))
        got = (refused_by_collection is None, refused is None)
        expected_difference = DIFFERENCES.get(case)
        difference = None if got[0] == got[1] else ("collection stricter" if got[1] else "collection laxer")
        rows.append((case, "accepts" if got[0] else "refuses", "accepts" if got[1] else "refuses: " + refused.split(": ", 1)[-1][:70],
                     difference or "-", reason or "-"))
        if got != (collection_ok, nvidia_ok) or difference != expected_difference:
            detail = (collection_ok, nvidia_ok, got[0], got[1], refused_by_collection or refused)
            wrong.append((case, "expected collection %s, NVIDIA %s; got %s, %s (%s)" % detail))
    text = _table(rows, ("case", "collection", "NVIDIA's schema", "difference", "why"))
    print("\nValues against the collection's validation and NVIDIA's ClusterPolicy schema (dry run):\n\n" + text)
    warnings.warn("ClusterPolicy values, the collection vs NVIDIA's schema (%d differences):\n%s"
                  % (sum(1 for row in rows if row[3] != "-"), text), stacklevel=1)
    assert not wrong, "\n".join("%s: %s" % item for item in wrong)


def test_the_lab_cluster_role_creates_what_nvidia_schema_requires(generated_crd, policies):
    """The role's ClusterPolicy holds exactly NVIDIA's required spec fields besides the chart's defaults, and NVIDIA's
    schema accepts it as created (a dry run); the role's earlier object (LAB_CREATED_SPEC) lacks them."""
    spec = _schema(generated_crd)["properties"]["spec"]
    assert sorted(ROLE_VARS["lab_cluster__policy_required"]) == sorted(spec["required"]) == sorted(NVIDIA_REQUIRED)
    body = _policy(_created_spec())
    body["metadata"]["name"] = "as-the-lab-cluster-role-creates-it"  # beside the module's cluster-policy
    assert _refusal(lambda: policies.create(body=body, dry_run="All")) is None
    assert {key: _created_spec()[key] for key in LAB_CREATED_SPEC} == LAB_CREATED_SPEC
