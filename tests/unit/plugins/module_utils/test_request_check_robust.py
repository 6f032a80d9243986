# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The request check never crashes: deep merge chains, deep nesting, output streams that cannot encode a name.

Exit codes are the check's contract (0 OK, 1 too many GPUs, 2 nothing was checked): an internal error must never be
1, and input kubectl reads must be read, not end in a Python limit. The property tests generate deep structures
(objects nested thousands of levels, YAML with chains of merges and aliases around kubectl's alias budget) and hold
the check to its documented outcomes only.
"""

from __future__ import annotations

import inspect
import io
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ansible_collections.gpushare.k8s.plugins.module_utils.requests import check_request
from ansible_collections.gpushare.k8s.plugins.module_utils.requests import gpu_requests
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import manifest_yaml
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import quantity
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.check_request import main
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.gpu_requests import check_manifest, find_offenders
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_yaml import ManifestError

INTENTS = {"intents": "whole", "summary": "pools: default gives whole as nvidia.com/gpu",
           "intent.whole.form": "resource", "intent.whole.resource": "nvidia.com/gpu", "intent.whole.max": ""}
INTENTS_OPTION = '{"intents": "whole", "summary": "s", "intent.whole.form": "resource", "intent.whole.resource": "nvidia.com/gpu"}'


def merge_chain(links, padding, gpus=4):
    """A Pod whose GPU limit is the end of a chain of ``links`` mappings, each merging the one before (``a_i: &a_i {<<: *a_(i-1)}``).

    kubectl (go.yaml.in/yaml/v2) decodes every link again through each alias, about links**2 values, and refuses a
    document where too large a share of the values come from aliases: ``padding`` plain values written before the
    chain keep it under that budget (500 links need about 1,300; kubectl 1.33 reads 500 links with 1,300 and refuses
    them with 1,000, and reads 1,000 links with 1,000,000).
    """
    lines = ["apiVersion: v1", "kind: Pod", "metadata:", "  name: chained", "padding: [%s]" % ", ".join(["1"] * padding), "chain:",
             "  a0: &a0 {nvidia.com/gpu: %d}" % gpus]
    lines += ["  a%d: &a%d {<<: *a%d}" % (link, link, link - 1) for link in range(1, links)]
    lines += ["spec:", "  containers:", "  - name: main", "    image: x", "    resources: {limits: *a%d}" % (links - 1)]
    return "\n".join(lines) + "\n"


def little_stack(function, *args, **kwargs):
    """``function(*args, **kwargs)`` with 100 frames of stack to spare (hypothesis raises the recursion limit around a test)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 100)
    try:
        return function(*args, **kwargs)
    finally:
        sys.setrecursionlimit(limit)


@pytest.fixture
def manifest(tmp_path):
    def write(text, name="manifest.yaml"):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write


# ---------------------------------------------------------------------------
# merge chains as deep as kubectl reads them


def test_a_500_link_merge_chain_kubectl_reads_is_read(manifest, capsys):
    assert main([manifest(merge_chain(500, 1300))]) == 1
    assert capsys.readouterr() == ("OVER=main=4\n", "")


def test_the_chain_kubectl_refuses_is_refused_for_its_aliasing():
    with pytest.raises(ManifestError) as info:
        find_offenders(merge_chain(500, 1000))
    assert "(\"document contains excessive aliasing\")" in str(info.value)


def test_a_merge_chain_costs_no_stack():
    """Read under a recursion limit 100 frames above the caller's: a recursive reading of 500 links cannot pass."""
    found = little_stack(gpu_requests.container_requests, merge_chain(500, 1300, gpus=2))
    assert [(item["container"], item["count"]) for item in found] == [("main", 2)]


def test_every_link_of_a_chain_keeps_kubectls_merge_order():
    # each link adds a key after its merge, so it overrides what the chain merged: link 300 sets 3, link 400 sets 5
    # (kubectl 1.33 reads this file with 4,000 padding values and sends b's limits with nvidia.com/gpu 5)
    lines = ["apiVersion: v1", "kind: Pod", "metadata: {name: p}", "padding: [%s]" % ", ".join(["1"] * 4000), "chain:",
             "  a0: &a0 {nvidia.com/gpu: 1, k0: 0}"]
    for link in range(1, 450):
        extra = {300: "nvidia.com/gpu: 3", 400: "nvidia.com/gpu: 5"}.get(link, "k%d: %d" % (link, link))
        lines.append("  a%d: &a%d {<<: *a%d, %s}" % (link, link, link - 1, extra))
    lines += ["spec: {containers: [{name: a, image: x, resources: {limits: *a350}}, {name: b, image: x, resources: {limits: *a449}}]}"]
    found = gpu_requests.container_requests("\n".join(lines) + "\n")
    assert [(item["container"], item["count"]) for item in found] == [("a", 3), ("b", 5)]
    documents = [manifest_yaml.node_data(node) for _index, node in manifest_yaml.kubectl_documents("\n".join(lines) + "\n")]
    assert len(documents[0]["chain"]["a449"]) == 449  # k0..k449 but k300 and k400 (448 keys), and the GPU count


def test_a_mapping_merged_into_itself_is_refused():
    with pytest.raises(ManifestError) as info:
        find_offenders("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nx: &x {<<: *x}\nspec: {containers: []}\n")
    assert "is not allowed" in str(info.value)


def test_nesting_through_aliases_is_read_without_recursion():
    # each link holds the one before as a value: 500 levels deep once the aliases are expanded
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: c}", "padding: [%s]" % ", ".join(["1"] * 4000), "x:", "  a0: &a0 {k: v}"]
    lines += ["  a%d: &a%d {x: *a%d}" % (link, link, link - 1) for link in range(1, 500)]
    (document,) = [manifest_yaml.node_data(node) for _index, node in manifest_yaml.kubectl_documents("\n".join(lines) + "\n")]
    value, depth = document["x"]["a499"], 0
    while "x" in value:
        value, depth = value["x"], depth + 1
    assert (value, depth) == ({"k": "v"}, 499)


def test_a_pod_spec_nested_thousands_of_levels_deep_in_objects_is_found():
    spec = {"containers": [{"name": "deep", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}
    for _level in range(5000):
        spec = {"inner": spec}
    found = gpu_requests.container_requests({"apiVersion": "example.com/v1", "kind": "Deep", "metadata": {"name": "d"}, "spec": spec})
    assert [(item["container"], item["count"], item["path"]) for item in found] == [("deep", 2, "spec" + ".inner" * 5000 + ".containers[0]")]


# ---------------------------------------------------------------------------
# output every stream can carry; exit codes only for their meanings

INTENT_POD = """apiVersion: v1
kind: Pod
metadata:
  name: p\u20ac
  annotations: {gpushare.k8s/gpu: whole}
spec:
  containers:
  - name: c
    image: x
"""


def run_standalone(tmp_path, args, env_extra):
    """The four files copied side by side and run by a plain python3, as bin/check-request.sh runs them."""
    for module in (quantity, manifest_yaml, gpu_requests, check_request):
        shutil.copy(module.__file__, tmp_path)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONIOENCODING")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-s", str(tmp_path / "check_request.py"), *args], capture_output=True, env=env,
                          cwd=str(tmp_path), check=False, timeout=60)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_an_ok_pod_named_with_a_euro_sign_prints_ok_on_any_stdout(tmp_path, encoding):
    path = tmp_path / "pod.yaml"
    path.write_text(INTENT_POD, encoding="utf-8")
    run = run_standalone(tmp_path, [str(path), "--intents", INTENTS_OPTION], {"PYTHONIOENCODING": encoding})
    assert (run.returncode, run.stderr) == (0, b"")
    assert run.stdout == b"INTENT=p\\u20ac=whole -> nvidia.com/gpu: 1 for c\nOK\n"


def test_a_name_cannot_break_a_line_or_the_terminal(manifest, capsys):
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: \"c\\nOK\\e[2J\\u202e\", image: x, "
            "resources: {limits: {nvidia.com/gpu: 2}}}]}\n")
    assert main([manifest(text)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "OVER=c\\nOK\\x1b[2J\\u202e=2\n"


def test_over_lines_on_an_ascii_stdout_keep_their_exit_code(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(INTENT_POD.replace("name: c\n", "name: c\u00e9\n    resources: {limits: {nvidia.com/gpu: 3}}\n"), encoding="utf-8")
    run = run_standalone(tmp_path, [str(path)], {"PYTHONIOENCODING": "ascii"})
    assert (run.returncode, run.stdout, run.stderr) == (1, b"OVER=c\\xe9=3\n", b"")


class _BrokenStream(io.StringIO):
    encoding = "utf-8"

    def write(self, text):
        raise OSError(32, "Broken pipe")


@pytest.mark.parametrize("text", [INTENT_POD, INTENT_POD.replace("name: c\n", "name: c\n    resources: {limits: {nvidia.com/gpu: 3}}\n")],
                         ids=["ok", "over"])
def test_output_that_cannot_be_written_exits_2_never_1(manifest, monkeypatch, capsys, text):
    path = manifest(text)
    monkeypatch.setattr(sys, "stdout", _BrokenStream())
    assert main([path]) == 2
    assert "internal error, the check did not complete: BrokenPipeError: [Errno 32] Broken pipe" in capsys.readouterr().err


def test_a_failure_of_the_check_itself_exits_2(manifest, monkeypatch, capsys):
    def broken(*_args, **_kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(check_request, "check_manifest", broken)
    assert main([manifest(INTENT_POD)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "internal error, nothing was checked: RecursionError" in captured.err


def test_an_unencodable_message_on_standard_error_is_escaped():
    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    check_request._say(stream, "check-request: p\u20ac.yaml: document 1: nothing")  # pylint: disable=protected-access
    stream.flush()
    assert stream.buffer.getvalue() == b"check-request: p\\u20ac.yaml: document 1: nothing\n"


# ---------------------------------------------------------------------------
# property tests: deep generated structures get one of the documented outcomes, and the generators are not vacuous
# (each test also counts what it saw: the documents read, with and without offenders, and the ones refused)

KEYS = ["apiVersion", "kind", "metadata", "spec", "template", "containers", "initContainers", "resources", "computeResources",
        "limits", "requests", "nvidia.com/gpu", "items", "name", "annotations", "gpushare.k8s/gpu", "gpushare.k8s/gpu-count", "x"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**20), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from(["2", "1500m", "whole", "4", "v1", "Pod", "example.com/v1", "Job", "batch/v1", "", "1k", "-1"]),
                    st.text(max_size=5))
TREES = st.recursive(SCALARS, lambda children: st.one_of(st.lists(children, max_size=4),
                                                         st.dictionaries(st.sampled_from(KEYS), children, max_size=5)), max_leaves=40)
GPU_TWO = {"limits": {"nvidia.com/gpu": 2}}
PLANTED = st.sampled_from([
    {"containers": [{"name": "planted", "image": "x", "resources": GPU_TWO}]},  # a Pod spec
    {"container": {"image": "x", "resources": GPU_TWO}},  # an Argo template
    {"steps": [{"name": "planted", "computeResources": GPU_TWO}]},  # a Tekton task
    {"metadata": {"annotations": {"gpushare.k8s/gpu": "whole", "gpushare.k8s/gpu-count": "3"}},
     "spec": {"containers": [{"name": "planted", "image": "x"}]}},  # a Pod template asking by intent
])


@st.composite
def deep_objects(draw):
    """A generated tree or a planted request, wrapped in up to 3,000 more levels of mappings and lists, in an object of a kind."""
    tree = draw(st.one_of(TREES, PLANTED))
    wrappers = st.sampled_from(KEYS) if draw(st.booleans()) else st.just("x")  # any field names, or ones a custom kind may use
    for step in range(draw(st.integers(0, 3000))):
        tree = [tree] if step % 7 == 3 else {draw(wrappers) if step < 20 else "x": tree}
    kind, api_version = draw(st.sampled_from([("Pod", "v1"), ("Deployment", "apps/v1"), ("List", "v1"), ("ConfigMap", "v1"), (None, None),
                                              ("Workflow", "argoproj.io/v1alpha1"), ("Job", "batch.volcano.sh/v1alpha1"), ("Task", "tekton.dev/v1")]))
    obj = {"metadata": {"name": "g", "annotations": {"gpushare.k8s/gpu": "whole"}}, draw(st.sampled_from(["spec", "spec", "items", "data"])): tree}
    if kind:
        obj.update(kind=kind, apiVersion=api_version)
    return obj


def outcome(data):
    """``"over"``, ``"ok"`` or ``"refused"``: the documented outcomes of the check, and nothing else (any other exception fails).

    The check runs with 100 frames of stack to spare, whatever the input's depth: a recursive reading of deep input fails.
    """
    try:
        result = little_stack(check_manifest, data, intents=INTENTS)
    except ManifestError as exc:
        assert str(exc)  # refused, with a message
        return "refused"
    assert set(result) == {"offenders", "intents"}
    assert all(isinstance(item["count"], int) and item["count"] > 1 for item in result["offenders"])
    return "over" if result["offenders"] else "ok"


def test_generated_deep_objects_get_a_documented_outcome():
    seen = []

    @settings(max_examples=150, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(deep_objects())
    def check(obj):
        seen.append(outcome(obj))

    check()  # pylint: disable=no-value-for-parameter
    counts = {name: seen.count(name) for name in ("over", "ok", "refused")}
    assert min(counts.values()) >= 10, counts


@st.composite
def chained_yaml(draw):
    """YAML text with a chain of merges, list merges and nested aliases on both sides of kubectl's alias budget, nested deep or not.

    The chain repeats a drawn pattern of link forms (a few draws, however long the chain): all merges, or a mix.
    """
    links = draw(st.one_of(st.integers(1, 600), st.sampled_from([480, 520, 600])))  # long chains: a recursive reading fails past ~490
    padding = int(links * links * draw(st.sampled_from([0.0, 0.005, 0.02, 0.05, 0.05])))
    lines = ["apiVersion: %s" % draw(st.sampled_from(["v1", "argoproj.io/v1alpha1"])), "kind: %s" % draw(st.sampled_from(["Pod", "Workflow"])),
             "metadata:", "  name: gen", "padding: [%s]" % ", ".join(["1"] * padding), "chain:",
             "  a0: &a0 {nvidia.com/gpu: %d}" % draw(st.integers(0, 3))]
    forms = draw(st.sampled_from([["merge", "merge", "merge", "list", "nest", "extra"], ["merge", "merge", "extra"], ["merge"]]))
    pattern = draw(st.lists(st.sampled_from(forms), min_size=1, max_size=8))
    for link in range(1, links):
        form = pattern[link % len(pattern)]
        lines.append("  a%d: &a%d %s" % (link, link, {
            "merge": "{<<: *a%d}" % (link - 1),
            "list": "{<<: [*a%d, *a0]}" % (link - 1),
            "nest": "{x: *a%d}" % (link - 1),
            "extra": "{<<: *a%d, nvidia.com/gpu: %d}" % (link - 1, link % 4),
        }[form]))
    depth = draw(st.sampled_from([0, 0, 0, 0, 3, 150, 210]))
    value = "{limits: *a%d}" % (links - 1)
    lines.append("spec: " + "{x: " * depth + "{containers: [{name: c, image: x, resources: %s}], container: {resources: %s}}" % (value, value) + "}" * depth)
    return "\n".join(lines) + "\n"


def test_generated_merge_chains_get_a_documented_outcome():
    seen = []

    @settings(max_examples=25, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(chained_yaml())
    @example(merge_chain(520, 4000)).via("a chain past Python's default recursion limit, read by kubectl")
    @example(merge_chain(520, 4000, gpus=1)).via("the same, within the limit")
    @example(merge_chain(520, 1000)).via("a chain kubectl refuses for its aliasing")
    def check(text):
        seen.append(outcome(text))

    check()  # pylint: disable=no-value-for-parameter
    counts = {name: seen.count(name) for name in ("over", "ok", "refused")}
    assert min(counts.values()) >= 3, counts


@settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(chained_yaml())
def test_the_command_line_on_generated_chains_exits_0_1_or_2_never_with_an_internal_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("chain") / "chain.yaml"
    path.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = little_stack(main, [str(path), "--intents", INTENTS_OPTION])
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    assert "internal error" not in err.getvalue()
    assert (code, bool(err.getvalue())) in ((0, False), (1, False), (2, True))
    assert out.getvalue().endswith({0: "OK\n", 1: "\n", 2: ""}[code])
    assert code != 1 or "OVER=" in out.getvalue()
