# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GFD-label model held to NVIDIA's own gpu-feature-discovery (issue 28, stage 2). No cluster is needed.

NVIDIA's unmodified gpu-feature-discovery (tools/nvidia: k8s-device-plugin v0.18.0 built from a go.mod of ours) runs
over our mock NVML (tools/nvml-mock: a C libnvidia-ml.so.1 found through LD_LIBRARY_PATH) with a per-node state file
that plugins/module_utils/hardware/nvml_state.py writes from NVIDIA's hardware tables. For every product of the tables, under
every kind of device-plugin config the collection writes (rendered by the collection's own code, as the ConfigMap
holds it), GFD's ``nvidia.com/*`` labels must be the model's (``inventory.feature_labels``, what the
gpu_feature_labels filter and role set), label for label and value for value. MIG nodes too: the inventory's MIG
nodes (mixed strategy) with every profile of every product, the media-extension profiles, and the single strategy.
The labels the model leaves out on purpose are in ENVIRONMENT_LABELS, each with its reason; any other difference fails.
MIG profiles included: GFD names each profile from the memory NVML reports (go-nvlib: its share of the GPU, rounded up
to eighths, times the GPU's GiB), and the tables give every profile the memory a board reports (at most its share), so
GFD gives every profile of every product its documented name (the H200's 1g.18gb, the B200's 1g.23gb).

The comparison table is printed (``pytest -s`` or ``-rA`` show it); a summary per label is also given as a warning,
so it shows in the warnings summary of any run, xdist included. Both builds are cached in the user's cache (cold:
a couple of minutes for GFD, a second for the mock; their progress lines are shown as a warning too).
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import re
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import yaml

from conftest import REPO, built_tool, subprocess_env, text_table
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_features
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import products as gpu_products
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import tables as gpu_tables
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import nvml_state

BUILD_MOCK = REPO / "tools" / "nvml-mock" / "build.sh"
BUILD_NVIDIA = REPO / "tools" / "nvidia" / "build.sh"
LAB_VARS = REPO / "inventory" / "group_vars" / "all" / "lab.yml"
GPUS = 2  # a small node: GFD's labels do not depend on the count beyond gpu.count (1, 8 and 0 are checked too)
RUN_TIMEOUT = 60
MIG_LABEL = re.compile(r"^(nvidia\.com/mig-)([0-9]+g\.[0-9]+gb(?:\.me)?)(\..*)$")

_VERSIONS = ("the node's driver and CUDA versions: installed software, not the GPU or its config; the model has no driver "
             "(the mock answers with the versions of go-nvml's DGX server of the product)")
_HOST = "read from the host, not through NVML: {what}; the model describes the GPU, not the machine it is in"
# The labels GFD writes that the model leaves out on purpose, each with its reason. Listed once: any other label GFD
# writes and the model does not (or the other way round), and any value that differs, fails the test.
ENVIRONMENT_LABELS = {
    **dict.fromkeys((
        "nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev",
        "nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver-version.minor", "nvidia.com/cuda.driver-version.revision",
        "nvidia.com/cuda.driver-version.full",
        "nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor",
        "nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor", "nvidia.com/cuda.runtime-version.full",
    ), _VERSIONS),
    "nvidia.com/gpu.machine": _HOST.format(what="the DMI product name (/sys/class/dmi/id/product_name), 'unknown' without one"),
    "nvidia.com/gpu.mode": _HOST.format(what="each GPU's PCI class in /sys/bus/pci/devices/<bus id>/, 'unknown' on a machine without "
                                             "the GPU's PCI device (a real data-centre GPU says 'compute')"),
    "nvidia.com/vgpu.present": _HOST.format(what="whether the host's PCI bus has NVIDIA vGPU devices (go-nvlib's nvpci over sysfs)"),
}


def _time_slicing(replicas, rename_by_default=False, fail=False):
    block = {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    if rename_by_default:
        block["renameByDefault"] = True
    if fail:
        block["failRequestsGreaterThanOne"] = True
    return {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": block}}


def _mps(replicas, rename_by_default=False):
    block = {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    if rename_by_default:
        block["renameByDefault"] = True
    return {"version": "v1", "sharing": {"mps": block}}


def device_plugin_configs():
    """Every kind of device-plugin config the collection writes for a node without MIG: name -> config.

    No sharing; time-slicing with replicas 2, 4 and 7 (one replica is no sharing: the collection refuses it and writes
    no sharing section), renameByDefault off and on, failRequestsGreaterThanOne off and on; MPS with replicas 2 and 4,
    renameByDefault off and on; a resource's own ``rename``; the plugin's MIG strategies on a GPU without MIG enabled;
    and the lab's own configs (inventory/group_vars/all/lab.yml) as they are.
    """
    configs = {"default": {"version": "v1", "flags": {"migStrategy": "none"}}}
    for replicas, rename, fail in itertools.product((2, 4, 7), (False, True), (False, True)):
        name = "ts%d%s%s" % (replicas, "-rename" if rename else "", "-fail" if fail else "")
        configs[name] = _time_slicing(replicas, rename, fail)
    for replicas, rename in itertools.product((2, 4), (False, True)):
        configs["mps%d%s" % (replicas, "-rename" if rename else "")] = _mps(replicas, rename)
    configs["ts4-own-rename"] = {"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4, "rename": "nvidia.com/gpu-sliced"}]}}}
    configs["mig-single"] = {"version": "v1", "flags": {"migStrategy": "single"}}
    configs["mig-single-ts2"] = dict(_time_slicing(2), flags={"migStrategy": "single"})
    configs["mig-mixed"] = {"version": "v1", "flags": {"migStrategy": "mixed"}}
    lab = yaml.safe_load(LAB_VARS.read_text())["gpushare_device_plugin_configs"]
    configs.update(("lab.%s" % name, config) for name, config in lab.items())
    return configs


CONFIGS = device_plugin_configs()
# The config texts the collection puts in the device-plugin ConfigMap (inventory.render_configs, as the roles do).
CONFIG_TEXTS = inventory.render_configs(CONFIGS)


NODE = "gfd-node"


def _case(product, config, gpus, state, model, layout="-"):
    text = CONFIG_TEXTS[config] if config is not None else None
    return {"product": product, "config": config or "(plugin defaults)", "gpus": gpus, "layout": layout, "state": state,
            "config_text": text, "model": model}


def _node(product, config, gpus):
    node = {"name": NODE, "gpus": gpus, "product": product}
    if config is not None:
        node["config"] = config
    return node


def plain_cases():
    """Nodes without MIG: every product x every config (and the plugin's defaults), aliases, other GPU counts."""
    products = ["NVIDIA-" + product for product in gpu_products.products()]
    wanted = [(product, name, GPUS) for product in products for name in [None, *sorted(CONFIGS)]]
    # Every other spelling of a product the inventory accepts, and other GPU counts.
    wanted += [(alias, "default", GPUS) for alias in sorted(gpu_products.ALIASES)]
    wanted += [(products[0], "ts4", 1), (products[0], "mps4", 8), (products[0], "default", 0)]
    return [_case(product, config, gpus, nvml_state.node_state(product, gpus, node=NODE),
                  inventory.feature_labels(_node(product, config, gpus), CONFIGS, None)) for product, config, gpus in wanted]


def mig_cases():
    """MIG nodes as the inventory writes them (``mig: {product, profile, gpus}``: that many GPUs in the full layout of
    the profile, the others MIG-enabled and empty), every product x every profile, one and all GPUs partitioned; and
    each media-extension profile (one instance on one GPU), which the inventory does not lay out, from what the node
    advertises. GFD runs with the plugin's mixed strategy (the GPU Operator's MIG_STRATEGY=mixed)."""
    result = []
    for product in mig.products():
        spelled = "NVIDIA-" + product
        for profile in mig.profiles(product):
            count = mig.max_instances(product, profile)
            for partitioned in (1, GPUS):
                node = {"name": NODE, "gpus": GPUS, "mig": {"product": spelled, "profile": profile, "gpus": partitioned}}
                devices = [[profile] * count if index < partitioned else [] for index in range(GPUS)]
                model = inventory.feature_labels(node, CONFIGS, None)
                result.append(_case(spelled, "mig-mixed", GPUS, nvml_state.node_state(product, GPUS, node=NODE, mig_devices=devices), model,
                                    "%d x %s on %d of %d GPUs" % (count, profile, partitioned, GPUS)))
        for entry in gpu_products.mig_profiles(product):
            if "+" in entry["name"]:
                node = {"name": NODE, "gpus": GPUS, "mig": {"product": spelled, "profile": entry["name"]}}
                model = gpu_features.feature_labels(node, {mig.resource_name(entry["name"]): 1})
                devices = [[entry["name"]]] + [[] for _index in range(GPUS - 1)]
                result.append(_case(spelled, "mig-mixed", GPUS, nvml_state.node_state(product, GPUS, node=NODE, mig_devices=devices), model,
                                    "1 x %s on 1 of %d GPUs" % (entry["name"], GPUS)))
    return result


def single_cases():
    """The single MIG strategy: every GPU in the full layout of one profile, every product x every profile, without and
    with time-slicing. The collection's node model has no single-strategy node; the model's labels are
    ``gpu_features.feature_labels(..., mig_single=(profile, devices))``."""
    result = []
    for product in mig.products():
        spelled = "NVIDIA-" + product
        for profile in mig.profiles(product):
            count = mig.max_instances(product, profile)
            state = nvml_state.node_state(product, GPUS, node=NODE, mig_devices=[[profile] * count] * GPUS)
            for config in ("mig-single", "mig-single-ts2"):
                node = {"name": NODE, "gpus": GPUS, "product": spelled, "config": config}
                labels = gpu_features.feature_labels(node, {"nvidia.com/gpu": count * GPUS}, CONFIGS[config], mig_single=(profile, count * GPUS))
                result.append(_case(spelled, config, GPUS, state, labels, "%d x %s on %d of %d GPUs" % (count, profile, GPUS, GPUS)))
    return result


@pytest.fixture(scope="module")
def tools():
    """(GFD binary, directory of our libnvidia-ml.so.1), built once and cached in the user's cache."""
    return built_tool(BUILD_NVIDIA) / "gpu-feature-discovery", built_tool(BUILD_MOCK)


def run_gfd(tools, workdir, state_entries, config_text=None, state_env=True):
    """NVIDIA's GFD, one shot, over our library and ``state_entries``: its CompletedProcess and labels ({} if none)."""
    gfd, mock = tools
    workdir.mkdir(parents=True, exist_ok=True)
    state = workdir / "nvml-state"
    nvml_state.write(str(state), state_entries)
    output = workdir / "labels"
    if output.exists():
        output.unlink()
    args = [str(gfd), "--oneshot", "--no-timestamp", "--output-file", str(output)]
    if config_text is not None:
        config = workdir / "config.yaml"
        config.write_text(config_text + "\n")
        args += ["--config-file", str(config)]
    env = {key: value for key, value in os.environ.items() if key not in ("NVIDIA_VISIBLE_DEVICES", nvml_state.ENV)}
    env["LD_LIBRARY_PATH"] = str(mock)
    if state_env:
        env[nvml_state.ENV] = str(state)
    proc = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT, env=env, check=False)
    labels = {}
    if output.exists():
        for line in output.read_text().splitlines():
            if line.strip():
                key, value = line.split("=", 1)
                labels[key] = value
    return proc, labels


@pytest.fixture(scope="module")
def comparison(tools, tmp_path_factory):
    """Every case run through GFD and the model: a list of dicts (the case, GFD's labels, the model's, the differences)."""
    workdir = tmp_path_factory.mktemp("gfd")
    results = []
    start = time.monotonic()
    cases = plain_cases() + mig_cases() + single_cases()
    for case in cases:
        proc, gfd = run_gfd(tools, workdir, case["state"], case["config_text"])
        assert proc.returncode == 0 and gfd, "GFD failed on %s x %s x %s:\n%s" % (case["product"], case["config"], case["layout"], proc.stderr[-3000:])
        gfd = {key: value for key, value in gfd.items() if key.startswith("nvidia.com/")}
        model = case["model"]
        compared = sorted((set(gfd) | set(model)) - set(ENVIRONMENT_LABELS))
        differences = [(key, gfd.get(key, "(absent)"), model.get(key, "(absent)")) for key in compared if gfd.get(key) != model.get(key)]
        results.append(dict(case, gfd=gfd, compared=compared, differences=differences))
    elapsed = time.monotonic() - start
    rows = [(r["product"], r["config"], r["gpus"], r["layout"], len(r["compared"]), len(r["compared"]) - len(r["differences"]),
             len(r["differences"]), r["gfd"].get("nvidia.com/gpu.product", "-"), r["gfd"].get("nvidia.com/mps.capable", "-"))
            for r in results]
    print("\nNVIDIA gpu-feature-discovery v0.18.0 over our NVML mock vs the model (%d cases, %.1f s):\n" % (len(results), elapsed))
    print(text_table(rows, ("product (inventory)", "config", "gpus", "MIG devices", "compared", "same", "differ", "GFD gpu.product",
                            "GFD mps.capable")))
    by_label = {}
    for result in results:
        for key in result["compared"]:
            counts = by_label.setdefault(MIG_LABEL.sub(r"\1<profile>\3", key), [0, 0])
            counts[0 if (key, result["gfd"].get(key, "(absent)"), result["model"].get(key, "(absent)")) not in result["differences"] else 1] += 1
    summary = [(key, same + differ, same, differ) for key, (same, differ) in sorted(by_label.items())]
    seen = sorted({key for r in results for key in r["gfd"] if key in ENVIRONMENT_LABELS})
    report = (
        "GFD v0.18.0 vs the model: %d products x %d configs (+ aliases and GPU counts), %d MIG layouts; %d cases in %.1f s\n%s\n"
        "left out on purpose (ENVIRONMENT_LABELS, GFD wrote %d of %d): %s"
        % (len(gpu_tables.PRODUCTS), len(CONFIGS) + 1, sum(1 for r in results if r["layout"] != "-"), len(results), elapsed,
           text_table(summary, ("label", "cases", "same", "differ")), len(seen), len(ENVIRONMENT_LABELS),
           ", ".join(key[len("nvidia.com/"):] for key in seen))
    )
    print("\n" + report)
    warnings.warn(report, stacklevel=1)
    return results


def test_gfd_writes_the_models_labels_for_every_product_and_config(comparison):
    failing = [r for r in comparison if r["differences"]]
    rows = [(r["product"], r["config"], r["gpus"], r["layout"], key, gfd, model) for r in failing for key, gfd, model in r["differences"]]
    assert not failing, "%d of %d cases differ from NVIDIA's GFD:\n%s" % (
        len(failing), len(comparison), text_table(rows, ("product", "config", "gpus", "MIG devices", "label", "GFD", "model")))


def _documented_names():
    """Each product of the tables -> the profile names of its row in NVIDIA's documented MIG geometry (the data file,
    read by its own loader; merge.py names which row each product is)."""
    tools = REPO / "tools" / "gpu-tables"
    loaded = {}
    for name in ("documented", "merge"):
        spec = importlib.util.spec_from_file_location("gfd_" + name, tools / (name + ".py"))
        loaded[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded[name])
    rows = {row["product"]: row for row in loaded["documented"].load(str(tools / "mig-geometry.yaml"))["products"]}
    mapping = {product: loaded["merge"].MOCK_TO_DOCUMENTED.get(product, product) for product in gpu_tables.PRODUCTS}
    return {product: {profile["name"] for profile in rows[row]["profiles"]} for product, row in mapping.items()}


def test_gfd_names_every_mig_profile_as_nvidia_documents_it(comparison):
    """Every profile NVIDIA's GFD labels (``nvidia.com/mig-<profile>.count``, the mixed strategy) is named as NVIDIA's MIG
    User Guide names it for that product: the H200's 1g.18gb, 1g.35gb and 3g.71gb, the B200's 1g.23gb and 1g.45gb, the
    H100 NVL's 1g.12gb, the GH200's 3g.48gb (go-nvml's mock memory once made GFD name the H200's 1g.18gb 1g.35gb)."""
    documented = _documented_names()
    seen = {}
    for result in comparison:
        product = gpu_products.canonical(result["product"])
        for key in result["gfd"]:
            found = re.fullmatch(r"nvidia\.com/mig-(.+)\.count", key)
            if found:
                profile = found.group(1).replace(".me", "+me")
                assert profile in documented[product], (product, profile, sorted(documented[product]))
                seen.setdefault(product, set()).add(profile)
    assert set(seen) == set(gpu_tables.PRODUCTS) - {p for p in gpu_tables.PRODUCTS if not gpu_tables.PRODUCTS[p]["mig_profiles"]}
    for product, profiles in (("H200", {"1g.18gb", "1g.35gb", "3g.71gb", "7g.141gb"}), ("B200", {"1g.23gb", "1g.45gb"}),
                              ("H100-NVL", {"1g.12gb", "3g.47gb", "7g.94gb"}), ("GH200-480GB", {"1g.12gb", "3g.48gb", "7g.96gb"}),
                              ("H200-NVL", {"1g.18gb", "1g.35gb", "7g.141gb"})):
        assert profiles <= seen[product], (product, sorted(seen[product]))


def test_every_case_compares_the_full_label_set(comparison):
    for result in comparison:
        if result["gpus"]:
            # count, product, replicas, sharing-strategy, memory, family, compute major/minor, mig.capable, mps.capable
            assert len(result["compared"]) >= 10, result
        else:
            assert result["model"] == {} and result["compared"] == [], result  # no GPU: GFD writes only host labels


def test_the_label_exceptions_are_all_real(comparison):
    """Every label left out on purpose is one GFD writes here, and one the model never writes."""
    written = {key for result in comparison for key in result["gfd"]}
    assert set(ENVIRONMENT_LABELS) <= written, sorted(set(ENVIRONMENT_LABELS) - written)
    assert not {key for result in comparison for key in result["model"]} & set(ENVIRONMENT_LABELS)


def test_gfd_says_mps_capable_under_mps_only(comparison):
    """The difference issue 28 expected: GFD writes mps.capable=true under an MPS config, false otherwise."""
    for result in comparison:
        if result["gpus"]:
            mps = "mps" in (CONFIGS.get(result["config"]) or {}).get("sharing", {})
            assert result["gfd"]["nvidia.com/mps.capable"] == ("true" if mps else "false"), result["config"]


def test_gfd_labels_every_gpu_of_the_tables_as_the_tables_say(comparison):
    for result in comparison:
        if not result["gpus"]:
            continue
        product = gpu_products.canonical(result["product"])
        facts = gpu_tables.PRODUCTS[product]
        name, _sep, mig_profile = result["gfd"]["nvidia.com/gpu.product"].split("-SHARED")[0].partition("-MIG-")
        assert name == facts["name"].replace(" ", "-")
        if mig_profile:  # the single strategy: the MIG devices are nvidia.com/gpu
            assert result["config"].startswith("mig-single") and result["gfd"]["nvidia.com/mig.strategy"] == "single"
        else:
            assert result["gfd"]["nvidia.com/gpu.memory"] == str(facts["memory_mib"])
        assert ".".join((result["gfd"]["nvidia.com/gpu.compute.major"], result["gfd"]["nvidia.com/gpu.compute.minor"])) == facts[
            "cuda_compute_capability"]


# ---------------------------------------------------------------------------
# the mock library as NVIDIA's binary sees it


def test_without_a_state_file_the_library_says_what_to_set(tools, tmp_path):
    proc, labels = run_gfd(tools, tmp_path, nvml_state.node_state("A100-SXM4-80GB", 1), state_env=False)
    assert proc.returncode != 0 and not labels
    assert "nvml-mock: GPUSHARE_NVML_STATE is not set" in proc.stderr


def test_a_bad_state_file_is_named_with_its_line(tools, tmp_path):
    entries = nvml_state.node_state("A100-SXM4-80GB", 1)
    proc, labels = run_gfd(tools, tmp_path, entries[:3] + [("device.0.colour", "green")] + entries[3:])
    assert proc.returncode != 0 and not labels
    assert "nvml-state:4: unknown key device.0.colour" in proc.stderr


def test_the_builds_are_cached(tools):
    for script in (BUILD_NVIDIA, BUILD_MOCK):
        proc = subprocess.run([str(script)], cwd=REPO, capture_output=True, text=True, timeout=60, env=subprocess_env(), check=False)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert Path(proc.stdout.strip()) == tools[1]
    assert (tools[1] / "libnvidia-ml.so.1").is_file() and os.access(tools[0], os.X_OK)


def test_a_mig_layout_the_gpu_cannot_hold_is_refused_before_gfd_runs():
    """7 x 1g.10gb fit an A100 80GB, an 8th does not: the state file is never written for it."""
    assert len([key for key, _value in nvml_state.node_state("A100-SXM4-80GB", 1, mig_devices=[["1g.10gb"] * 7]) if ".mig." in key]) == 7
    with pytest.raises(nvml_state.NvmlStateError, match="do not fit one A100-SXM4-80GB"):
        nvml_state.node_state("A100-SXM4-80GB", 1, mig_devices=[["1g.10gb"] * 8])


# ---------------------------------------------------------------------------
# the builds say what they do (a fake `go` and a fake compiler: nothing is compiled)

# go as tools/nvidia/build.sh calls it: `go env GOVERSION`, then `go build ... -o OUT <module>/cmd/<command>`.
FAKE_GO = """#!/bin/sh
case "$1" in
  env) echo go1.26.0 ;;
  build) sleep {seconds}; [ -z "{fail}" ] || {{ echo "cmd/gpu-feature-discovery: fake go: compile error" >&2; exit 1; }}
         while [ "$1" != "-o" ]; do shift; done; printf '#!/bin/sh\\n' > "$2"; chmod +x "$2" ;;
  *) echo "fake go: unexpected $*" >&2; exit 3 ;;
esac
"""


def _fake_bin(tmp_path, name, text):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(text)
    tool.chmod(0o755)
    return str(bin_dir)


def _run_build(script, cache, env):
    return subprocess.run([str(script), str(cache)], cwd=REPO, capture_output=True, text=True, timeout=120, env=subprocess_env(**env), check=False)


def test_a_cold_gfd_build_prints_progress_and_installs_into_the_cache(tmp_path):
    cache = tmp_path / "cache"
    bin_dir = _fake_bin(tmp_path, "go", FAKE_GO.format(seconds=3, fail=""))
    proc = _run_build(BUILD_NVIDIA, cache, {"PATH": bin_dir + os.pathsep + os.environ["PATH"], "GPUSHARE_NVIDIA_HEARTBEAT": "1"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("[build nvidia v0.18.0] building gpu-feature-discovery nvidia-device-plugin config-manager "
                               "of github.com/NVIDIA/k8s-device-plugin")
    assert "a cold build takes several minutes" in lines[0]
    assert sum("still compiling (0m0" in line for line in lines) >= 2, proc.stderr
    assert lines[-1].startswith("[build nvidia v0.18.0] installed in %s/nvidia-k8s-device-plugin-v0.18.0-" % cache)
    directory = Path(proc.stdout.strip())
    assert os.access(directory / "gpu-feature-discovery", os.X_OK) and os.access(directory / "nvidia-device-plugin", os.X_OK)
    assert directory.parent == cache
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # the temporary sibling is gone
    again = _run_build(BUILD_NVIDIA, cache, {"PATH": bin_dir + os.pathsep + os.environ["PATH"]})
    assert again.returncode == 0 and again.stdout.strip() == str(directory) and again.stderr == ""


def test_a_failed_gfd_build_shows_the_last_lines_of_its_log_and_installs_nothing(tmp_path):
    cache = tmp_path / "cache"
    bin_dir = _fake_bin(tmp_path, "go", FAKE_GO.format(seconds=0, fail="yes"))
    proc = _run_build(BUILD_NVIDIA, cache, {"PATH": bin_dir + os.pathsep + os.environ["PATH"]})
    assert proc.returncode == 1 and proc.stdout == ""
    assert "gpu-feature-discovery failed after 0m0" in proc.stderr and "fake go: compile error" in proc.stderr
    assert sorted(p.name for p in cache.iterdir()) == ["logs"]


def test_a_failed_mock_build_shows_the_compilers_lines_and_installs_nothing(tmp_path):
    cache = tmp_path / "cache"
    cc = _fake_bin(tmp_path, "fake-cc", "#!/bin/sh\necho 'nvml_mock.c:1:1: fake cc: error' >&2\nexit 1\n")
    proc = _run_build(BUILD_MOCK, cache, {"CC": cc + "/fake-cc"})
    assert proc.returncode == 1 and proc.stdout == ""
    assert "[build nvml-mock] failed" in proc.stderr and "fake cc: error" in proc.stderr
    assert sorted(p.name for p in cache.iterdir()) == ["logs"]
    built = _run_build(BUILD_MOCK, cache, {})  # the real compiler, into the same cache
    assert built.returncode == 0 and (Path(built.stdout.strip()) / "libnvidia-ml.so.1").is_file(), built.stderr
