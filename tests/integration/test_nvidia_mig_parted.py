# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model's MIG geometry held to NVIDIA's own nvidia-mig-parted (issue 28, mig-parted stage). No cluster is needed.

NVIDIA's unmodified nvidia-mig-parted v0.10.0 (tools/mig-parted) runs ``apply`` over our mock NVML (tools/nvml-mock),
as the operator lab's MIG manager runs it: ``gpu_operator_standin.MigParted``, the same argv, namespace and files (a
node state from plugins/module_utils/hardware/nvml_state.py with MIG off, its GPUs listed as sysfs lists them). mig-parted
enables MIG, creates the GPU and compute instances through the mock, which places and refuses them by NVIDIA's
hardware tables and writes each change back to the node's state file, read here afterwards.

For every MIG product of the tables and every profile the model knows (``mig.profiles``), on a node of one GPU:

* the model's ``max_instances`` per GPU is what mig-parted creates: that many instances apply, with that many MIG
  devices of the profile in the state file afterwards;
* one more fails: mig-parted exits non-zero, the mock's answer (``ERROR_INSUFFICIENT_RESOURCES``) in its message,
  and the model refuses the same count (``validate_layout``);

and a few layouts that mix profiles on one GPU, the model's verdict (``nvml_state.place``) against mig-parted's, on
both GPUs of a node of two.

The table is printed (``pytest -s`` or ``-rA``) and given as a warning summary. The profiles NVIDIA's v0.18.0 plugin
and GFD name otherwise (test_nvidia_gfd.GFD_PROFILE_NAMES) are named the same way by mig-parted's go-nvlib (v0.7.0):
mig-parted parses a profile name against the names the node's GPUs give, and a name no GPU gives makes it apply
nothing and still report success (its config is dropped when it cannot be parsed). Those cases are run under the
name mig-parted knows, listed once (MIG_PARTED_PROFILE_NAMES); ``test_a_profile_the_gpu_lacks_is_applied_as_nothing``
shows the behaviour itself. Any other difference fails.
"""
from __future__ import annotations

import concurrent.futures
import json
import time
import warnings

import yaml

from conftest import built_tool, text_table
from test_nvidia_gfd import GFD_PROFILE_NAMES
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import operator_standin as gpu_operator_standin
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import products as gpu_products
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import nvml_state

GPUS = 2
WORKERS = 4
INSUFFICIENT = "ERROR_INSUFFICIENT_RESOURCES"
# The names mig-parted v0.10.0 parses for the few profiles NVIDIA's v0.18.0 binaries name otherwise than the tables:
# the same list, with the same reason (go-nvlib names a profile by its rounded memory share), as GFD's.
MIG_PARTED_PROFILE_NAMES = GFD_PROFILE_NAMES
# Profiles mig-parted v0.10.0 cannot name: the name NVIDIA's go-nvlib gives them is the one it gives a smaller profile
# of the same GPU (above), and mig-parted resolves the name to that smaller profile. Shown in the table, not compared.
MIG_PARTED_UNNAMEABLE = {("B200-180GB-HBM3e", "1g.45gb"), ("H200-141GB-HBM3e", "1g.35gb")}
# Layouts mixing profiles on one GPU (product, {profile: count}), each fitting or not by the tables' placements.
MIXED = [
    ("A100-SXM4-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}),
    ("A100-SXM4-80GB", {"4g.40gb": 1, "3g.40gb": 1}),
    ("A100-SXM4-80GB", {"4g.40gb": 2}),
    ("A100-SXM4-80GB", {"3g.40gb": 2, "1g.10gb": 1}),
    ("H100-SXM5-80GB", {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}),
    ("A30-24GB", {"2g.12gb": 1, "1g.6gb": 2}),
    ("A30-24GB", {"2g.12gb": 2, "1g.6gb": 1}),
]


def _tools():
    return (built_tool("tools/mig-parted/build.sh") / "nvidia-mig-parted", built_tool("tools/nvml-mock/build.sh"))


def _name(product, profile):
    return MIG_PARTED_PROFILE_NAMES.get((product, profile), profile)


def _config(devices):
    """A mig-parted config with one layout, ``case``: every GPU with MIG on and ``devices``."""
    return yaml.safe_dump({"version": "v1", "mig-configs": {"case": [{"devices": "all", "mig-enabled": True, "mig-devices": devices}]}})


def _apply(binary, mock, root, key, product, devices, gpus=GPUS):
    """mig-parted's verdict on one GPU layout of ``product`` on every GPU of a node of ``gpus``: ``(ok, reason,
    {gpu: [profile ids]})``."""
    runner = gpu_operator_standin.MigParted(str(binary), str(mock), str(root))
    node = "n%d" % key
    runner.gpus(node, nvml_state.node_state(product, gpus, node=node))
    ok, reason = runner.apply(node, _config(devices), "case")
    made = {}
    for field, value in runner.gpus(node, nvml_state.node_state(product, gpus, node=node)):
        parts = field.split(".")
        if len(parts) == 4 and parts[2] == "mig":
            made.setdefault(int(parts[1]), []).append(int(value.split()[1]))
    return ok, reason, made


def _profile_ids(product):
    return {p["name"]: p["id"] for p in gpu_products.mig_profiles(product)}


def test_mig_parted_creates_what_the_model_says_fits_and_refuses_one_more(tmp_path):
    binary, mock = _tools()
    cases = []
    for product in gpu_products.mig_products():
        for profile, facts in mig.profiles(product).items():
            for count in (facts["max"], facts["max"] + 1):
                cases.append((product, profile, count))
    # the unnameable ones are exactly the profiles whose own name mig-parted gives another profile of the GPU
    taken = {(product, name) for (product, profile), name in MIG_PARTED_PROFILE_NAMES.items() if profile != name}
    assert MIG_PARTED_UNNAMEABLE == {(product, profile) for product, profile, _count in cases if (product, profile) in taken}
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        def run(item):
            key, (product, profile, count) = item
            return _apply(binary, mock, tmp_path, key, product, {_name(product, profile): count}, gpus=1)

        results = list(pool.map(run, enumerate(cases)))
    rows, wrong = [], []
    for (product, profile, count), (ok, reason, made) in zip(cases, results):
        fits = count <= mig.max_instances(product, profile)
        if (product, profile) in MIG_PARTED_UNNAMEABLE:
            rows.append((product, profile, count, "fits" if fits else "refused", "applied" if ok else "failed",
                         "not compared: mig-parted reads %s as the smaller profile of that name" % profile))
            continue
        ids = _profile_ids(product)
        want = {0: [ids[profile]] * count} if fits else None
        same = ok == fits and (made == want if fits else INSUFFICIENT in (reason or ""))
        rows.append((product, _name(product, profile), count, "fits" if fits else "refused",
                     "applied" if ok else "failed", "same" if same else "DIFFER"))
        if not same:
            wrong.append("%s %s x%d: model %s, mig-parted %s (%s), devices %s" % (
                product, profile, count, "fits" if fits else "refuses", "applied" if ok else "failed", reason, json.dumps(made)))
    report = "nvidia-mig-parted v0.10.0 vs the model: %d cases in %.1f s (%d at a time)\n%s" % (
        len(cases), time.monotonic() - started, WORKERS, text_table(rows, ("product", "profile", "per GPU", "model", "mig-parted", "")))
    print(report)
    warnings.warn(report, stacklevel=1)
    assert not wrong, "\n".join(wrong)
    # the example, by name
    assert ("A100-SXM4-80GB", "1g.10gb", 7, "fits", "applied", "same") in rows
    assert ("A100-SXM4-80GB", "1g.10gb", 8, "refused", "failed", "same") in rows
    assert sum(row[-1] == "same" for row in rows) == len(rows) - 2 * len(MIG_PARTED_UNNAMEABLE)


def test_mixed_layouts_fit_as_the_model_places_them(tmp_path):
    binary, mock = _tools()
    rows, wrong = [], []
    for key, (product, devices) in enumerate(MIXED):
        names = [profile for profile, count in devices.items() for _n in range(count)]
        try:
            nvml_state.place(product, names)
            fits = True
        except nvml_state.NvmlStateError:
            fits = False
        ok, reason, made = _apply(binary, mock, tmp_path, key, product, {_name(product, p): c for p, c in devices.items()})
        ids = _profile_ids(product)
        want = sorted(ids[name] for name in names)
        same = ok == fits and (all(sorted(made.get(gpu, [])) == want for gpu in range(GPUS)) if fits else INSUFFICIENT in (reason or ""))
        rows.append((product, " + ".join("%dx%s" % (c, p) for p, c in devices.items()), "fits" if fits else "refused",
                     "applied" if ok else "failed", "same" if same else "DIFFER"))
        if not same:
            wrong.append("%s %s: model %s, mig-parted %s (%s), devices %s" % (product, devices, fits, ok, reason, json.dumps(made)))
    print(text_table(rows, ("product", "layout per GPU", "model", "mig-parted", "")))
    assert not wrong, "\n".join(wrong)
    assert {row[2] for row in rows} == {"fits", "refused"}, "the cases cover both verdicts"


def test_a_profile_the_gpu_lacks_is_applied_as_nothing(tmp_path):
    """NVIDIA's mig-parted v0.10.0 parses a layout's profile names against the names the node's GPUs give; a name none
    gives (3g.40gb on a 40 GB A100) drops the whole layout, and apply enables MIG, creates nothing and reports
    success: what a real node's MIG manager does with such a layout. The collection's roles refuse it before writing
    (mig.validate_layout), which is why that check exists."""
    binary, mock = _tools()
    ok, reason, made = _apply(binary, mock, tmp_path, 0, "A100-SXM4-40GB", {"3g.40gb": 1})
    assert (ok, reason, made) == (True, None, {})
    try:
        mig.validate_layout("A100-SXM4-40GB", "3g.40gb", 1)
    except mig.MigError as exc:
        assert "'3g.40gb' is not a MIG profile of A100-SXM4-40GB" in str(exc), exc
    else:
        raise AssertionError("the model accepts 3g.40gb on a 40 GB A100")
