# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model of what NVIDIA's device plugin advertises, held to NVIDIA's own nvidia-device-plugin (issue 28,
device-plugin stage). No cluster is needed.

NVIDIA's unmodified nvidia-device-plugin (tools/nvidia: k8s-device-plugin v0.18.0) runs over our mock NVML
(tools/nvml-mock) with a per-node state file written by plugins/module_utils/hardware/nvml_state.py from NVIDIA's hardware
tables, in a user and mount namespace of its own, registered with device-plugin-kubelet (tools/device-plugin-kubelet)
in its ``--once`` mode: the kubelet program prints what each registered resource lists
(``{"resources": {NAME: {"devices": N, "healthy": H}}}``), stops the plugin and exits. The argv and environment are
gpu_operator_standin's ``device_plugin_command`` and ``device_plugin_env``, the operator lab's own code path, with one
change: the plugin's health checks are on (``DP_DISABLE_HEALTHCHECKS`` unset, as the plugin's own default; the operator
lab turns them off). The config file is the collection's rendering (``inventory.render_configs``, as the ConfigMap
holds it).

For every case the plugin's resource names and device counts must be the model's (``gpu_operator.node_state``'s
resources, which the roles' ``predict`` and the operator lab's verification use), and every device healthy: the
plugin's health check registers every GPU of every layout with the mock's NVML events and finds no XID (a device it
cannot place or register it marks unhealthy). Cases:

* every product of the hardware tables (2 GPUs) x every kind of config the collection writes: no config file (the
  plugin's defaults), an explicit ``migStrategy: none``, time-slicing with replicas 2, 4 and 7, renameByDefault on
  (replicas 2 and 4), failRequestsGreaterThanOne on, both, a resource's own ``rename``, MPS with replicas 2 and 4 and
  renameByDefault on. Time-slicing with one replica is no config the collection writes (it refuses it, and so does
  the plugin: ``test_one_replica_is_refused_by_both``);
* 0, 1 and 8 GPUs (the first product, plugin defaults and time-slicing 4);
* MIG, mixed strategy (``MIG_STRATEGY=mixed``, as the ClusterPolicy sets it): every profile of every MIG product in its
  full layout on one GPU of two (the other MIG-enabled and empty), one layout per product with two profiles (one per
  GPU), a MIG GPU beside a time-sliced whole GPU, and a MIG-enabled node under the ``none`` strategy;
* MIG, single strategy: every product with its smallest profile on both GPUs, and one product under time-slicing
  (replicas 2, renameByDefault off and on).

The plugin's refusals are tested too: a layout the single strategy cannot advertise makes it exit non-zero, and the
model raises ``LayoutError`` for the same layouts.

Health checks (``test_an_xid_*``): a state file naming an XID on a GPU (``nvml_state.node_state``'s ``xids``) makes the
mock report that XID critical error as an NVML event, and the plugin marks the device unhealthy in a later ListAndWatch
answer, which the kubelet program's ``--once`` prints (it prints each resource's last answer, after a quiet second).
An XID the plugin ignores (13: an application error) leaves the device healthy unless ``DP_ENABLE_HEALTHCHECKS``
names it; with the operator lab's environment (health checks off) an XID changes nothing.

The comparison table is printed (``pytest -s`` or ``-rA`` show it) and given as a warning summary. Resources are
compared name by name, MIG profiles under the names NVIDIA documents (the tables give each profile the memory a board
reports, which go-nvlib names it from); any difference fails. Differences the test found in the model were fixed in the
model: a resource's own ``rename`` (the plugin ignores it) and the single strategy under time-slicing (the plugin
shares the MIG devices); in the tables: the H200's and B200's profile memory (go-nvml's mock gave their 1g profile a
little more than its share, and the plugin listed it under the next profile's name). About 200 cases, 40 s on 2 cores
(6 at a time; each run mostly waits for the kubelet program's quiet second).
"""
from __future__ import annotations

import concurrent.futures
import json
import subprocess
import time
import warnings

import pytest

from conftest import REPO, built_tool, subprocess_env, text_table
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import device_plugin
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import gpu_operator
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import operator_standin as gpu_operator_standin
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import products as gpu_products
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import mig
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import nvml_state

BUILD_MOCK = REPO / "tools" / "nvml-mock" / "build.sh"
BUILD_NVIDIA = REPO / "tools" / "nvidia" / "build.sh"
BUILD_KUBELET = REPO / "tools" / "device-plugin-kubelet" / "build.sh"
GPUS = 2
NODE = "dp-node"
RUN_TIMEOUT = 60
# The plugin's environment in these tests: device_plugin_env's, with the health checks on (the plugin's default: the
# variable unset). None removes a variable.
HEALTH_CHECKS_ON = {"DP_DISABLE_HEALTHCHECKS": None}
WORKERS = 6
# Two profiles of one GPU with the same compute slices and different memory, listed both on one node (one per GPU):
# go-nvml's mock gave the first a little more than its share of the memory, and NVIDIA's plugin then listed both under
# the second's name (test_two_profiles_of_one_size_apart_in_memory_are_listed_under_their_own_names).
DOUBLE_MEMORY = {"H200": ("1g.18gb", "1g.35gb"), "B200": ("1g.23gb", "1g.45gb"), "H100-NVL": ("1g.12gb", "1g.24gb"),
                 "GH200-480GB": ("1g.12gb", "1g.24gb")}


def _time_slicing(replicas, rename_by_default=False, fail=False, strategy=None):
    block = {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    if rename_by_default:
        block["renameByDefault"] = True
    if fail:
        block["failRequestsGreaterThanOne"] = True
    config = {"version": "v1", "sharing": {"timeSlicing": block}}
    if strategy:
        config["flags"] = {"migStrategy": strategy}
    return config


def _mps(replicas, rename_by_default=False):
    block = {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    if rename_by_default:
        block["renameByDefault"] = True
    return {"version": "v1", "sharing": {"mps": block}}


CONFIGS = {
    "none": {"version": "v1", "flags": {"migStrategy": "none"}},
    "ts2": _time_slicing(2),
    "ts4": _time_slicing(4),
    "ts7": _time_slicing(7),
    "ts2-rename": _time_slicing(2, rename_by_default=True),
    "ts4-rename": _time_slicing(4, rename_by_default=True),
    "ts4-fail": _time_slicing(4, fail=True),
    "ts4-rename-fail": _time_slicing(4, rename_by_default=True, fail=True),
    "ts4-own-rename": {"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4, "rename": "nvidia.com/gpu-sliced"}]}}},
    "mps2": _mps(2),
    "mps4": _mps(4),
    "mps4-rename": _mps(4, rename_by_default=True),
    "mig-mixed": {"version": "v1", "flags": {"migStrategy": "mixed"}},
    "mig-mixed-ts4": _time_slicing(4, strategy="mixed"),
    "mig-single": {"version": "v1", "flags": {"migStrategy": "single"}},
    "mig-single-ts2": _time_slicing(2, strategy="single"),
    "mig-single-ts2-rename": _time_slicing(2, rename_by_default=True, strategy="single"),
}
PLAIN_CONFIGS = [name for name in CONFIGS if not name.startswith("mig-")]
# The config texts the collection puts in the device-plugin ConfigMap (inventory.render_configs, as the roles do).
CONFIG_TEXTS = inventory.render_configs(CONFIGS)


def _gpu_state(gpus, devices=None):
    """gpu_operator's per-GPU state from nvml_state's ``mig_devices`` (None: MIG off; a list: MIG on, its profiles)."""
    devices = devices or [None] * gpus
    state = []
    for profiles in devices:
        counts = {}
        for profile in profiles or ():
            counts[profile] = counts.get(profile, 0) + 1
        state.append({"mig": profiles is not None, "devices": counts})
    return state


def _case(product, config, gpus, devices=None, strategy=None, layout="-"):
    return {"product": product, "config": config, "gpus": gpus, "devices": devices, "strategy": strategy, "layout": layout}


def plain_cases():
    products = ["NVIDIA-" + product for product in gpu_products.products()]
    cases = [_case(product, config, GPUS) for product in products for config in [None, *PLAIN_CONFIGS]]
    for gpus in (0, 1, 8):
        cases += [_case(products[0], None, gpus), _case(products[0], "ts4", gpus)]
    return cases


def mig_cases():
    cases = []
    for product in mig.products():
        spelled = "NVIDIA-" + product
        profiles = list(mig.profiles(product))
        for profile in profiles:
            count = mig.max_instances(product, profile)
            cases.append(_case(spelled, "mig-mixed", GPUS, [[profile] * count, []], "mixed", "%d x %s, none" % (count, profile)))
        first, last = profiles[0], profiles[-1]
        two = [[first] * mig.max_instances(product, first), [last] * mig.max_instances(product, last)]
        cases.append(_case(spelled, "mig-mixed", GPUS, two, "mixed", "%d x %s, %d x %s" % (len(two[0]), first, len(two[1]), last)))
        small = [profiles[0]] * mig.max_instances(product, profiles[0])
        cases.append(_case(spelled, "mig-single", GPUS, [small, small], "single", "%d x %s on both" % (len(small), profiles[0])))
    # a node holding two profiles of one size apart in memory (DOUBLE_MEMORY), one per GPU
    for product, (profile, other) in sorted(DOUBLE_MEMORY.items()):
        both = [[profile] * mig.max_instances(product, profile), [other] * mig.max_instances(product, other)]
        cases.append(_case("NVIDIA-" + product, "mig-mixed", GPUS, both, "mixed", "%d x %s, %d x %s" % (len(both[0]), profile, len(both[1]), other)))
    product = mig.products()[0]
    spelled = "NVIDIA-" + product
    profile = list(mig.profiles(product))[0]
    full = [profile] * mig.max_instances(product, profile)
    cases.append(_case(spelled, "mig-mixed-ts4", GPUS, [full, None], "mixed", "%d x %s, MIG off" % (len(full), profile)))
    cases.append(_case(spelled, "none", GPUS, [full, full], "none", "%d x %s on both" % (len(full), profile)))
    for config in ("mig-single-ts2", "mig-single-ts2-rename"):
        cases.append(_case(spelled, config, GPUS, [full, full], "single", "%d x %s on both" % (len(full), profile)))
    # MPS where the plugin takes it: whole GPUs under single, MIG-enabled GPUs under none (MIG ignored)
    cases.append(_case(spelled, "mps2", GPUS, None, "single"))
    cases.append(_case(spelled, "mps2", GPUS, [full, full], "none", "%d x %s on both" % (len(full), profile)))
    return cases


def model_resources(case):
    """The model's answer: gpu_operator.node_state's resources for the case's node (the config as the plugin reads it)."""
    config = device_plugin.parse_config(CONFIG_TEXTS[case["config"]], name=case["config"]) if case["config"] else None
    strategy = case["strategy"] or ((config or {}).get("flags") or {}).get("migStrategy") or "none"
    resources, _labels = gpu_operator.node_state(NODE, case["product"], _gpu_state(case["gpus"], case["devices"]), config, strategy,
                                                 config_name=case["config"])
    return {name: count for name, count in resources.items() if count}


@pytest.fixture(scope="module")
def tools():
    """(nvidia-device-plugin, device-plugin-kubelet, directory of our libnvidia-ml.so.1), built once, cached."""
    return built_tool(BUILD_NVIDIA) / "nvidia-device-plugin", built_tool(BUILD_KUBELET), built_tool(BUILD_MOCK)


def run_plugin(tools, workdir, product, gpus, devices=None, config_text=None, strategy=None, xids=None, env_changes=None):
    """NVIDIA's plugin once, as the operator lab runs it but for ``env_changes`` (default: health checks on, see
    HEALTH_CHECKS_ON; ``{}``: the lab's own environment): ``(CompletedProcess, {resource: {"devices", "healthy"}} or None)``.

    ``xids`` (``{GPU index: XID code}``) puts an XID on those GPUs in the state file, for the mock to report as an event.
    """
    plugin, kubelet, mock = tools
    workdir.mkdir(parents=True, exist_ok=True)
    state = workdir / "nvml-state"
    nvml_state.write(str(state), nvml_state.node_state(product, gpus, node=NODE, mig_devices=devices, xids=xids))
    config = None
    if config_text is not None:
        config = workdir / "config.yaml"
        config.write_text(config_text + "\n")
    argv = gpu_operator_standin.device_plugin_command(str(plugin), str(kubelet), str(workdir), str(config) if config else None, once=True)
    env = gpu_operator_standin.device_plugin_env(str(mock), str(workdir), str(state), gpus, strategy)
    for name, value in (HEALTH_CHECKS_ON if env_changes is None else env_changes).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, env=env, check=False)
    resources = None
    if proc.returncode == 0:
        resources = json.loads(proc.stdout.strip().splitlines()[-1])["resources"]
    return proc, resources


def _show(resources):
    return ", ".join("%s=%s" % (name[len("nvidia.com/"):], count) for name, count in sorted(resources.items())) or "(none)"


@pytest.fixture(scope="module")
def comparison(tools, tmp_path_factory):
    """Every case run through NVIDIA's plugin and the model: a list of dicts (the case, both answers, the differences)."""
    workdir = tmp_path_factory.mktemp("device-plugin")
    cases = plain_cases() + mig_cases()

    def one(index_case):
        index, case = index_case
        text = CONFIG_TEXTS[case["config"]] if case["config"] else None
        proc, listed = run_plugin(tools, workdir / ("case-%03d" % index), case["product"], case["gpus"], case["devices"], text, case["strategy"])
        return proc, listed

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outputs = list(pool.map(one, enumerate(cases)))
    elapsed = time.monotonic() - start
    results = []
    for case, (proc, listed) in zip(cases, outputs):
        where = "%s x %s x %d GPUs x %s" % (case["product"], case["config"] or "(plugin defaults)", case["gpus"], case["layout"])
        assert proc.returncode == 0, "the device plugin failed on %s:\n%s" % (where, proc.stderr[-3000:])
        plugin = {name: value["devices"] for name, value in listed.items()}
        unhealthy = {name: value for name, value in listed.items() if value["healthy"] != value["devices"]}
        model = model_resources(case)
        # compared per resource name: two profiles listed under one name would show as a difference, never as a sum
        differences = [(name, plugin.get(name, "(absent)"), model.get(name, "(absent)")) for name in sorted(set(plugin) | set(model))
                       if plugin.get(name) != model.get(name)]
        results.append(dict(case, where=where, plugin=plugin, model=model, unhealthy=unhealthy, differences=differences))
    rows = [(r["product"], r["config"] or "(defaults)", r["gpus"], r["strategy"] or "-", r["layout"], _show(r["plugin"]),
             "same" if not r["differences"] else "DIFFERS: model " + _show(r["model"])) for r in results]
    table = text_table(rows, ("product", "config", "gpus", "MIG strategy", "MIG devices (GPU 0, GPU 1)", "NVIDIA's plugin lists", "model"))
    print("\nNVIDIA nvidia-device-plugin v0.18.0 over our NVML mock vs the model (%d cases, %.1f s):\n\n%s" % (len(results), elapsed, table))
    by_config = {}
    for result in results:
        counts = by_config.setdefault(result["config"] or "(plugin defaults)", [0, 0])
        counts[1 if result["differences"] else 0] += 1
    summary = text_table([(config, same + differ, same, differ) for config, (same, differ) in sorted(by_config.items())],
                         ("config", "cases", "same", "differ"))
    report = ("nvidia-device-plugin v0.18.0 vs the model: %d products, %d configs, %d MIG layouts; %d cases in %.1f s (%d at a time)\n%s"
              % (len(gpu_products.products()), len(CONFIGS), sum(1 for r in results if r["devices"]), len(results), elapsed, WORKERS, summary))
    print("\n" + report)
    warnings.warn(report, stacklevel=1)
    return results


def test_the_plugin_advertises_the_models_resources_for_every_case(comparison):
    failing = [r for r in comparison if r["differences"]]
    rows = [(r["where"], name, plugin, model) for r in failing for name, plugin, model in r["differences"]]
    assert not failing, "%d of %d cases differ from NVIDIA's device plugin:\n%s" % (
        len(failing), len(comparison), text_table(rows, ("case", "resource", "plugin", "model")))


def test_two_profiles_of_one_size_apart_in_memory_are_listed_under_their_own_names(comparison):
    """On a node holding both (one per GPU), the plugin lists each profile under the name NVIDIA documents, each with
    its own count: the H200's 1g.18gb and 1g.35gb, the B200's 1g.23gb and 1g.45gb, the H100 NVL's and GH200's 1g.12gb
    and 1g.24gb."""
    for product, (small, large) in DOUBLE_MEMORY.items():
        cases = [r for r in comparison if gpu_products.canonical(r["product"]) == product and r["strategy"] == "mixed"
                 and [sorted(set(gpu or ())) for gpu in r["devices"] or ()] == [[small], [large]]]
        assert len(cases) == 1, (product, [r["where"] for r in comparison if gpu_products.canonical(r["product"]) == product])
        listed = cases[0]["plugin"]
        assert listed == {mig.resource_name(small): mig.max_instances(product, small), mig.resource_name(large): mig.max_instances(product, large)}, listed


def test_every_device_the_plugin_lists_is_healthy(comparison):
    """Health checks on, no XID: every GPU of every layout is registered with the mock's events and none is unhealthy."""
    assert not [r for r in comparison if r["unhealthy"]], [(r["where"], r["unhealthy"]) for r in comparison if r["unhealthy"]]


# ---------------------------------------------------------------------------
# health checks: an XID on a GPU makes the plugin list its device unhealthy

def _gpus(devices, healthy):
    return {"nvidia.com/gpu": {"devices": devices, "healthy": healthy}}


XID_CASES = {
    "no XID": ({}, None, _gpus(2, 2)),
    "XID 79 on GPU 1": ({1: 79}, None, _gpus(2, 1)),
    "XID 79 on GPU 0, XID 48 on GPU 1": ({0: 79, 1: 48}, None, _gpus(2, 0)),
    # 13 (graphics engine exception) is one of the application errors the plugin ignores...
    "XID 13 on GPU 1 (ignored)": ({1: 13}, None, _gpus(2, 2)),
    # ... unless DP_ENABLE_HEALTHCHECKS names it: the mock did report it
    "XID 13 on GPU 1, DP_ENABLE_HEALTHCHECKS=13": ({1: 13}, dict(HEALTH_CHECKS_ON, DP_ENABLE_HEALTHCHECKS="13"), _gpus(2, 1)),
    # the operator lab's environment (DP_DISABLE_HEALTHCHECKS=all): no health check, the XID is not seen
    "XID 79 on GPU 1, the operator lab's environment": ({1: 79}, {}, _gpus(2, 2)),
}


@pytest.mark.parametrize("case", list(XID_CASES))
def test_an_xid_on_a_gpu_makes_the_plugin_list_it_unhealthy(tools, tmp_path, case):
    xids, env_changes, expected = XID_CASES[case]
    proc, listed = run_plugin(tools, tmp_path, "NVIDIA-A100-SXM4-80GB", 2, xids=xids, env_changes=env_changes)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert listed == expected, proc.stderr[-3000:]


def test_an_xid_on_a_time_sliced_gpu_makes_the_plugin_list_one_replica_unhealthy(tools, tmp_path):
    """NVIDIA v0.18.0 maps a GPU's UUID to one device of its own (the last replica): one of the GPU's 4 is unhealthy."""
    proc, listed = run_plugin(tools, tmp_path, "NVIDIA-A100-SXM4-80GB", 2, config_text=CONFIG_TEXTS["ts4"], xids={1: 79})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert listed == _gpus(8, 7), proc.stderr[-3000:]


def test_an_xid_on_a_mig_gpu_makes_the_plugin_list_one_of_its_mig_devices_unhealthy(tools, tmp_path):
    """Mixed strategy, one resource per GPU: the XID (not attributed to a GPU instance) reaches the resource of its GPU
    only, where the plugin marks one MIG device (the last it mapped to the GPU's UUID) unhealthy."""
    devices = [["1g.10gb"] * 7, ["2g.20gb"] * 3]
    proc, listed = run_plugin(tools, tmp_path, "NVIDIA-A100-SXM4-80GB", 2, devices, CONFIG_TEXTS["mig-mixed"], "mixed", xids={1: 79})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert listed == {"nvidia.com/mig-1g.10gb": {"devices": 7, "healthy": 7}, "nvidia.com/mig-2g.20gb": {"devices": 3, "healthy": 2}}, proc.stderr[-3000:]


def test_the_cases_cover_what_the_collection_writes(comparison):
    listed = {name for r in comparison for name in r["plugin"]}
    assert {"nvidia.com/gpu", "nvidia.com/gpu.shared"} <= listed
    assert {mig.resource_name(profile) for product in mig.products() for profile in mig.profiles(product)} <= listed
    assert {r["config"] for r in comparison} == {None, *CONFIGS}
    assert {r["gpus"] for r in comparison} >= {0, 1, 2, 8}
    assert all(r["plugin"] == {} for r in comparison if r["gpus"] == 0)


def test_the_plugin_ignores_a_resources_own_rename(comparison):
    """NVIDIA v0.18.0 drops ``rename`` (DisableResourceNamingInConfig): the slices stay ``nvidia.com/gpu``."""
    for result in comparison:
        if result["config"] == "ts4-own-rename":
            assert result["plugin"] == {"nvidia.com/gpu": 4 * result["gpus"]}, result["where"]


# ---------------------------------------------------------------------------
# what the plugin refuses, the model refuses

SINGLE_REFUSED = {
    "two profiles": [["1g.10gb"] * 7, ["2g.20gb"] * 3],
    "an empty MIG-enabled GPU": [["1g.10gb"] * 7, []],
    "a GPU with MIG off": [["1g.10gb"] * 7, None],
}


@pytest.mark.parametrize("layout", sorted(SINGLE_REFUSED))
def test_a_layout_the_single_strategy_cannot_advertise_is_refused_by_both(tools, tmp_path, layout):
    devices = SINGLE_REFUSED[layout]
    proc, listed = run_plugin(tools, tmp_path, "NVIDIA-A100-SXM4-80GB", 2, devices, CONFIG_TEXTS["mig-single"], "single")
    assert proc.returncode != 0 and listed is None, proc.stdout
    assert "invalid MIG configuration" in proc.stderr or "same migEnabled value" in proc.stderr, proc.stderr[-2000:]
    with pytest.raises(gpu_operator.LayoutError, match="single strategy needs"):
        gpu_operator.node_state(NODE, "A100-SXM4-80GB", _gpu_state(2, devices), None, "single")


MPS_REFUSED = {
    "mixed": (None, "using --mig-strategy=mixed is not supported with MPS"),
    "single": ([["1g.10gb"] * 7, ["1g.10gb"] * 7], "sharing using MPS is not supported for MIG devices"),
}


@pytest.mark.parametrize("strategy", sorted(MPS_REFUSED))
def test_mps_where_the_plugin_refuses_it_is_refused_by_both(tools, tmp_path, strategy):
    """MPS under the mixed strategy (the ClusterPolicy's MIG_STRATEGY, every node's), and on MIG devices under single."""
    devices, message = MPS_REFUSED[strategy]
    proc, listed = run_plugin(tools, tmp_path, "NVIDIA-A100-SXM4-80GB", 2, devices, CONFIG_TEXTS["mps2"], strategy)
    assert proc.returncode != 0 and listed is None, proc.stdout
    assert message in proc.stderr, proc.stderr[-2000:]
    with pytest.raises(gpu_operator.LayoutError, match=message.replace("-", ".")):
        gpu_operator.node_state(NODE, "A100-SXM4-80GB", _gpu_state(2, devices), CONFIGS["mps2"], strategy)


def test_one_replica_is_refused_by_both(tools, tmp_path):
    """Time-slicing with one replica: the collection will not write it, and the plugin refuses the file."""
    config = _time_slicing(1)
    with pytest.raises(device_plugin.ConfigError, match="must be 2 or more"):
        inventory.render_configs({"ts1": config})
    text = device_plugin.dump_yaml(config)
    proc, listed = run_plugin(tools, tmp_path, "NVIDIA-A100-SXM4-80GB", 2, config_text=text)
    assert proc.returncode != 0 and listed is None
    assert "number of replicas must be >= 2" in proc.stderr, proc.stderr[-2000:]


def test_the_builds_are_cached(tools):
    for script in (BUILD_NVIDIA, BUILD_KUBELET, BUILD_MOCK):
        proc = subprocess.run([str(script)], cwd=REPO, capture_output=True, text=True, timeout=60, env=subprocess_env(), check=False)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
