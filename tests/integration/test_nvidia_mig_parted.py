# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model's MIG geometry held to NVIDIA's own nvidia-mig-parted (issue 28, mig-parted stage). No cluster is needed.

NVIDIA's unmodified nvidia-mig-parted v0.10.0 (tools/mig-parted) runs ``apply`` over our mock NVML (tools/nvml-mock),
as the operator lab's MIG manager runs it: ``gpu_operator_standin.MigParted``, the same argv, namespace and files (a
node state from plugins/module_utils/hardware/nvml_state.py with MIG off, its GPUs listed as sysfs lists them). mig-parted
enables MIG, creates the GPU and compute instances through the mock, which places and refuses them by NVIDIA's
hardware tables and writes each change back to the node's state file, read here afterwards.

What each case should do is decided by an oracle that shares no code with the model or the mock: NVIDIA's documented
MIG geometry (tools/gpu-tables/mig-geometry.yaml, the MIG User Guide's profiles and placements) searched by
tools/gpu-tables/documented.py's ``fits`` (its own backtracking over the documented placements, compute slices and
media extensions). For every MIG product of the tables and every profile the model knows (``mig.profiles``), on a
node of one GPU, at the model's ``max_instances`` and one more:

* the oracle's verdict is the model's: the model's count fits and one more does not;
* mig-parted does what the oracle says: a fitting count applies, with that many MIG devices of the profile in the
  state file afterwards; one more fails, the mock's answer (``ERROR_INSUFFICIENT_RESOURCES``) in its message;

and layouts that mix profiles on one GPU (among them, for each Hopper and Blackwell product, layouts that placing by
compute slices, as go-nvml's mock did, would accept), the oracle's verdict against the model's (``nvml_state.place``)
and mig-parted's, on both GPUs of a node of two.

The table is printed (``pytest -s`` or ``-rA``) and given as a warning summary. mig-parted parses a profile name
against the names the node's GPUs give (go-nvlib v0.7.0 names a profile from the memory NVML reports), so every profile
is run under the name NVIDIA documents, which the tables' memory gives it; a name no GPU gives makes mig-parted apply
nothing and still report success (``test_a_profile_the_gpu_lacks_is_applied_as_nothing``). Any difference fails.
"""
from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import time
import warnings
from pathlib import Path

import yaml

from conftest import built_tool, text_table
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import operator_standin as gpu_operator_standin
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import products as gpu_products
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import nvml_state

_TOOLS = Path(__file__).resolve().parents[2] / "tools" / "gpu-tables"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, _TOOLS / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The oracle: the documented geometry and its own search (stdlib + PyYAML); the mock's product names mapped to the
# documents' (merge.py names the pairs and why they differ).
documented = _load("documented")
DOCUMENTED = {row["product"]: row for row in documented.load(str(_TOOLS / "mig-geometry.yaml"))["products"]}
_MERGE = _load("merge")
# tables.py's product -> its row in the data file: go-nvml's mock's products by merge.py's map (a product the merge
# renamed after its documented NVML name, the H200 and the B200, and those written from the documents are keyed by it)
MOCK_TO_DOCUMENTED = {product: _MERGE.MOCK_TO_DOCUMENTED.get(product, product) for product in gpu_products.products()}

GPUS = 2
WORKERS = 4
INSUFFICIENT = "ERROR_INSUFFICIENT_RESOURCES"
# Layouts mixing profiles on one GPU (product, {profile: count}), each fitting or not by the tables' placements.
MIXED = [
    ("A100-SXM4-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}),
    ("A100-SXM4-80GB", {"4g.40gb": 1, "3g.40gb": 1}),
    ("A100-SXM4-80GB", {"4g.40gb": 2}),
    ("A100-SXM4-80GB", {"3g.40gb": 2, "1g.10gb": 1}),
    ("H100-SXM5-80GB", {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}),
    ("A30-24GB", {"2g.12gb": 1, "1g.6gb": 2}),
    ("A30-24GB", {"2g.12gb": 2, "1g.6gb": 1}),
    # Hopper and Blackwell place by memory slices as the A100 does; go-nvml's mock placed them by compute slices (the
    # 3g at (0,3) and (4,3), the double-memory 1g on any of 7 slots) and took the first five of these.
    ("H100-80GB-HBM3", {"1g.20gb": 4, "3g.40gb": 1}),
    ("H100-80GB-HBM3", {"3g.40gb": 2, "1g.10gb": 1}),
    ("H100-80GB-HBM3", {"1g.20gb": 3, "2g.20gb": 1, "1g.10gb": 1}),
    ("H200", {"3g.71gb": 2, "1g.18gb": 1}),
    ("B200", {"3g.90gb": 2, "1g.23gb": 1}),
    ("B200", {"4g.90gb": 1, "2g.45gb": 1, "1g.23gb": 1}),
    ("H100-80GB-HBM3", {"3g.40gb": 1, "1g.20gb": 2}),
    ("H200", {"4g.71gb": 1, "3g.71gb": 1}),
    # the products written from the documents: the H100 NVL and the GH200 place as the H100 does
    ("H100-NVL", {"1g.24gb": 4, "3g.47gb": 1}),
    ("H100-NVL", {"3g.47gb": 1, "1g.24gb": 2}),
    ("GH200-480GB", {"3g.48gb": 1, "1g.24gb": 2}),
    ("GH200-480GB", {"3g.48gb": 2, "1g.12gb": 1}),
    # one media extension per GPU: two +me profiles of the A30 fit its slices and placements, not its media extension
    ("A30-24GB", {"1g.6gb+me": 1, "2g.12gb+me": 1}),
    ("A30-24GB", {"1g.6gb+me": 1, "2g.12gb": 1}),
]


def oracle(product, layout):
    """The documents' verdict on ``layout`` ({profile: count}) on one GPU of ``product``: (fits, reason)."""
    return documented.fits(DOCUMENTED[MOCK_TO_DOCUMENTED[gpu_products.canonical(product)]], layout)


def _tools():
    return (built_tool("tools/mig-parted/build.sh") / "nvidia-mig-parted", built_tool("tools/nvml-mock/build.sh"))


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
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        def run(item):
            key, (product, profile, count) = item
            return _apply(binary, mock, tmp_path, key, product, {profile: count}, gpus=1)

        results = list(pool.map(run, enumerate(cases)))
    rows, wrong = [], []
    for (product, profile, count), (ok, reason, made) in zip(cases, results):
        fits = oracle(product, {profile: count})[0]
        if fits != (count <= mig.max_instances(product, profile)):
            wrong.append("%s %s x%d: the documents say %s, the model %s" % (
                product, profile, count, "fits" if fits else "refused", "fits" if not fits else "refused"))
        ids = _profile_ids(product)
        want = {0: [ids[profile]] * count} if fits else None
        same = ok == fits and (made == want if fits else INSUFFICIENT in (reason or ""))
        rows.append((product, profile, count, "fits" if fits else "refused",
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
    assert all(row[-1] == "same" for row in rows)
    # the profiles go-nvml's mock memory once made mig-parted read as a smaller profile of the same GPU
    assert ("H200", "1g.35gb", 4, "fits", "applied", "same") in rows
    assert ("B200", "1g.45gb", 4, "fits", "applied", "same") in rows


def test_mixed_layouts_fit_as_the_model_places_them(tmp_path):
    binary, mock = _tools()
    rows, wrong = [], []
    for key, (product, devices) in enumerate(MIXED):
        names = [profile for profile, count in devices.items() for _n in range(count)]
        fits, why = oracle(product, devices)
        try:
            nvml_state.place(product, names)
            model = True
        except nvml_state.NvmlStateError:
            model = False
        if model != fits:
            wrong.append("%s %s: the documents say %s (%s), the model %s" % (product, devices, fits, why, model))
        if "+me" not in str(devices):  # the roles' layouts hold no +me profile (mig.fit_devices refuses them by name)
            try:
                mig.fit_devices(product, devices)
                roles = True
            except mig.MigError:
                roles = False
            if roles != fits:
                wrong.append("%s %s: the documents say %s (%s), the roles' check %s" % (product, devices, fits, why, roles))
        ok, reason, made = _apply(binary, mock, tmp_path, key, product, devices)
        ids = _profile_ids(product)
        want = sorted(ids[name] for name in names)
        same = ok == fits and (all(sorted(made.get(gpu, [])) == want for gpu in range(GPUS)) if fits else INSUFFICIENT in (reason or ""))
        rows.append((product, " + ".join("%dx%s" % (c, p) for p, c in devices.items()), "fits" if fits else "refused",
                     "applied" if ok else "failed", "same" if same else "DIFFER"))
        if not same:
            wrong.append("%s %s: model %s, mig-parted %s (%s), devices %s" % (product, devices, fits, ok, reason, json.dumps(made)))
    print(text_table(rows, ("product", "layout per GPU", "documents", "mig-parted", "")))
    assert not wrong, "\n".join(wrong)
    assert {row[2] for row in rows} == {"fits", "refused"}, "the cases cover both verdicts"
    # the example: 120 GB on an 80 GB H100, refused by the documents, the model and NVIDIA's mig-parted
    assert ("H100-80GB-HBM3", "4x1g.20gb + 1x3g.40gb", "refused", "failed", "same") in rows
    assert oracle("H100-80GB-HBM3", {"1g.20gb": 4, "3g.40gb": 1}) == (
        False, "needs 12 of 8 memory slices (4 x 1g.20gb at 2 each + 3g.40gb at 4)")


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


def _state_with(product, instances):
    """A one-GPU state file of ``product`` with MIG on and the GPU instances ``instances`` (``[(profile, start, size)]``,
    each with its full compute instance), written line by line in the mock's format: a file nvml_state never writes
    (it places instances as the tables allow), as a hand or a bug could."""
    entries = nvml_state.node_state(product, 1, node="bad", mig_enabled=True)
    profiles = {p["name"]: p for p in gpu_products.mig_profiles(product)}
    for slot, (name, start, size) in enumerate(instances):
        profile = profiles[name]
        compute = min(c["id"] for c in profile["compute_profiles"] if c["slices"] == profile["slices"])
        entries.append(("device.0.mig.%d" % slot, "%d %d %d %d 0 %d MIG-bad-%d" % (slot + 1, profile["id"], start, size, compute, slot)))
    return entries


def test_a_state_file_holding_mig_devices_the_gpu_cannot_hold_is_refused_when_loaded(tmp_path):
    """The mock checks a state file's GPU instances when it loads it, as the hardware would hold them: a GPU instance
    at a placement NVIDIA's tables do not give its profile, two sharing memory slices, or two media-extended (+me)
    instances on one GPU make it refuse the file (naming the device and why), so NVIDIA's mig-parted fails before it
    changes anything. The same kind of file with instances where the GPU can hold them loads (mig-parted applies)."""
    binary, mock = _tools()
    config = yaml.safe_dump({"version": "v1", "mig-configs": {"all-disabled": [{"devices": "all", "mig-enabled": False}]}})
    cases = {
        "placement": ("H100-80GB-HBM3", [("1g.20gb", 1, 2)], "a GPU instance is at a placement its profile does not have"),
        "overlap": ("H100-80GB-HBM3", [("1g.20gb", 0, 2), ("1g.10gb", 1, 1)], "two GPU instances share memory slices"),
        "media extension": ("A30-24GB", [("1g.6gb+me", 0, 1), ("2g.12gb+me", 2, 2)],
                            "more than one media-extended (+me) GPU instance: a GPU has one media extension"),
        "held": ("H100-80GB-HBM3", [("3g.40gb", 4, 4), ("1g.20gb", 0, 2), ("1g.20gb", 2, 2)], None),
    }
    for key, (name, (product, instances, why)) in enumerate(sorted(cases.items())):
        runner = gpu_operator_standin.MigParted(str(binary), str(mock), str(tmp_path))
        node = "n%d" % key
        runner.gpus(node, _state_with(product, instances))
        ok, reason = runner.apply(node, config, "all-disabled")
        log = (tmp_path / node / "mig-parted.log").read_text()
        if why is None:
            assert ok, (name, reason, log)
        else:
            assert not ok, (name, log)
            assert "device 0: its GPU instances are not what the GPU can hold: " + why in log, (name, log)
