# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator stand-in's pure pieces: the MIG manager's files and mig-parted's reason, GFD's output file,
the label patch (GFD's labels on, stale GFD labels off, every other label kept) and the GFD runner's cache.

A fake gpu-feature-discovery (a shell script) stands in for NVIDIA's here; tests/integration/test_gpu_operator_mode.py
runs the real one on a cluster.
"""
from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.lab import operator_standin as standin
from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import nvml_state


def test_mig_parted_reason_is_its_own_error_messages():
    output = (
        'time="2026-12-04T11:48:41Z" level=debug msg="Walking MigConfig for (devices=all)"\n'
        'time="2026-12-04T11:48:41Z" level=error msg="Error creating GPU instance for \'1g.10gb\': ERROR_INSUFFICIENT_RESOURCES"\n'
        'time="2026-12-04T11:48:41Z" level=fatal msg="Error applying MIG configuration with hooks: error setting MIGConfig: all orderings failed"\n')
    assert standin.mig_parted_reason(output) == ("Error creating GPU instance for '1g.10gb': ERROR_INSUFFICIENT_RESOURCES; "
                                                 "Error applying MIG configuration with hooks: error setting MIGConfig: all orderings failed")
    assert standin.mig_parted_reason("line one\nexec: no such file\n") == "exec: no such file"
    assert standin.mig_parted_reason("") == "no output"


def test_the_mig_manager_keeps_what_mig_parted_changed_until_the_gpus_are_others(tmp_path):
    """MigParted.gpus writes the node's machine (MIG off) and its PCI devices once, then returns the state file as
    mig-parted left it; other GPUs (a new count or product) replace it."""
    mig = standin.MigParted("nvidia-mig-parted", str(tmp_path / "mock"), str(tmp_path))
    machine = nvml_state.node_state("A100-SXM4-80GB", 2, node="n1")
    assert mig.gpus("n1", machine) == machine
    pci = tmp_path / "n1" / "pci-devices"
    assert sorted(p.name for p in pci.iterdir()) == ["0000:01:00.0", "0000:02:00.0"]
    assert (pci / "0000:01:00.0" / "vendor").read_text() == "0x10de\n" and (pci / "0000:01:00.0" / "device").read_text() == "0x20b2\n"
    state = tmp_path / "n1" / "nvml-state"
    # what the mock writes back after mig-parted enabled MIG and made a GPU instance without a compute instance yet
    changed = state.read_text().replace("device.0.mig_mode 0\n", "") + "device.0.mig_mode 1\ndevice.0.gi.0 1 0 0 1\n"
    state.write_text(changed)
    assert mig.gpus("n1", machine) == nvml_state.parse(changed)
    assert mig.gpus("n1", nvml_state.node_state("A100-SXM4-80GB", 1, node="n1")) == nvml_state.node_state("A100-SXM4-80GB", 1, node="n1")
    assert sorted(p.name for p in pci.iterdir()) == ["0000:01:00.0"]


def test_parse_gfd_output_keeps_nvidia_labels_only():
    text = "nvidia.com/gpu.count=2\nnvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB-SHARED\n\nfeature.node.kubernetes.io/x=1\nnoise\nnvidia.com/empty=\n"
    assert standin.parse_gfd_output(text) == {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED",
                                              "nvidia.com/empty": ""}


def test_label_patch_adds_changes_removes_stale_and_keeps_the_rest():
    current = {"kubernetes.io/hostname": "n", "nvidia.com/device-plugin.config": "shared", "nvidia.com/mig.config.state": "success",
               "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "4", "nvidia.com/cuda.driver.major": "550",
               "nvidia.com/mig-1g.10gb.count": "7", "nvidia.com/something.gfd.wrote": "x"}
    gfd = {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "2", "nvidia.com/cuda.driver.major": "550", "nvidia.com/mps.capable": "true"}
    patch = standin.gfd_label_patch(gfd, current, previous={"nvidia.com/something.gfd.wrote", "nvidia.com/gpu.count"})
    assert patch == {"nvidia.com/gpu.replicas": "2", "nvidia.com/mps.capable": "true",
                     "nvidia.com/mig-1g.10gb.count": None,  # a GFD label the collection knows, no longer written
                     "nvidia.com/something.gfd.wrote": None}  # written by GFD before, no longer
    # the operator's and the collection's own labels are never touched
    assert standin.gfd_label_patch({}, current, set()).keys() == {"nvidia.com/gpu.count", "nvidia.com/gpu.replicas", "nvidia.com/mig-1g.10gb.count"}
    assert standin.gfd_label_patch(gfd, dict(current, **gfd), set(gfd)) == {"nvidia.com/mig-1g.10gb.count": None}


FAKE_GFD = """#!/bin/sh
# a fake gpu-feature-discovery: writes what it was given as labels, counts its runs
echo run >> "{runs}"
out=""; config=""
while [ $# -gt 0 ]; do
  case "$1" in --output-file) out=$2; shift;; --config-file) config=$2; shift;; esac
  shift
done
[ -n "$FAIL" ] && {{ echo "E0000 something broke" >&2; exit 1; }}
{{
  echo "nvidia.com/gpu.count=$(awk '$1 == "device_count" {{print $2}}' "$GPUSHARE_NVML_STATE")"
  echo "nvidia.com/mig.strategy=${{MIG_STRATEGY:-unset}}"
  echo "nvidia.com/lib=$LD_LIBRARY_PATH"
  [ -n "$config" ] && echo "nvidia.com/config=$(head -n 1 "$config")"
  echo "other.io/ignored=1"
}} > "$out"
"""


@pytest.fixture
def fake(tmp_path):
    runs = tmp_path / "runs"
    binary = tmp_path / "gpu-feature-discovery"
    binary.write_text(FAKE_GFD.format(runs=runs))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    gfd = standin.Gfd(str(binary), str(tmp_path / "mock"), str(tmp_path / "state"))
    return gfd, runs


def test_gfd_runs_with_the_nodes_files_and_env_and_caches_by_input(fake, tmp_path):
    gfd, runs = fake
    state = nvml_state.node_state("A100-SXM4-80GB", 2, node="n1")
    labels = gfd.labels("n1", state, "version: v1", "mixed")
    assert labels == {"nvidia.com/gpu.count": "2", "nvidia.com/mig.strategy": "mixed", "nvidia.com/lib": str(tmp_path / "mock"),
                      "nvidia.com/config": "version: v1"}
    node_dir = tmp_path / "state" / "n1"
    assert {p.name for p in node_dir.iterdir()} == {"nvml-state", "config.yaml", "gfd-labels", "gfd.log"}
    assert nvml_state.parse((node_dir / "nvml-state").read_text()) == state
    assert oct(node_dir.stat().st_mode & 0o777) == "0o700"
    assert gfd.labels("n1", state, "version: v1", "mixed") == labels and gfd.runs == 1  # same inputs: no run
    assert gfd.labels("n1", state, "version: v1", None)["nvidia.com/mig.strategy"] == "unset" and gfd.runs == 2
    # no config: no config file
    assert "nvidia.com/config" not in gfd.labels("n1", state, None, None) and not (node_dir / "config.yaml").exists()
    gfd.labels("n1", nvml_state.node_state("A100-SXM4-80GB", 1, node="n1"), None, None)
    assert gfd.runs == 4 and runs.read_text().count("run") == 4
    gfd.labels("n2", state, None, None)  # another node: its own files and cache
    assert gfd.runs == 5 and (tmp_path / "state" / "n2" / "gfd-labels").is_file()


def test_gfd_reads_the_state_file_as_mig_parted_left_it(fake, tmp_path):
    """One writer of a node's GPUs: the file mig-parted changed through the mock (its own layout of the lines) is read
    as it is when it holds the GPUs GFD is asked about, and written only when it holds others."""
    gfd, _runs = fake
    state_file = tmp_path / "state" / "n1" / "nvml-state"
    state_file.parent.mkdir(parents=True)
    machine = nvml_state.node_state("A100-SXM4-80GB", 1, node="n1")
    as_mock_wrote = "\n".join("%s %s" % entry for entry in reversed(machine)) + "\n"
    state_file.write_text(as_mock_wrote)
    gfd.labels("n1", nvml_state.parse(as_mock_wrote))
    assert state_file.read_text() == as_mock_wrote
    gfd.labels("n1", nvml_state.node_state("A100-SXM4-80GB", 2, node="n1"))
    assert nvml_state.parse(state_file.read_text()) == nvml_state.node_state("A100-SXM4-80GB", 2, node="n1")


def test_a_failing_gfd_raises_with_its_last_lines_once_per_input(fake, monkeypatch):
    gfd, _runs = fake
    monkeypatch.setenv("FAIL", "1")
    state = nvml_state.node_state("A100-SXM4-80GB", 2, node="n1")
    repeated = []
    for _attempt in range(2):
        with pytest.raises(standin.GfdError, match=r"exited 1 and wrote no label; its last lines .*\n.*something broke") as info:
            gfd.labels("n1", state)
        repeated.append(info.value.repeated)
    assert gfd.runs == 1 and repeated == [False, True]  # the stand-in says it once


def test_a_missing_binary_is_an_error(tmp_path):
    gfd = standin.Gfd(str(tmp_path / "nothing"), str(tmp_path), str(tmp_path / "state"))
    with pytest.raises(standin.GfdError, match="cannot run"):
        gfd.labels("n1", nvml_state.node_state("A100-SXM4-80GB", 1, node="n1"))
    assert os.path.isdir(tmp_path / "state" / "n1")


def test_the_node_side_reads_what_the_operand_daemonset_derives_from_the_cluster_policy():
    policy = {"metadata": {"name": "cluster-policy", "uid": "u1"},
              "spec": {"mig": {"strategy": "mixed"}, "devicePlugin": {"config": {"name": "device-plugin-configs", "default": "default"}}}}
    daemonset = standin.operand_daemonset("nvidia-device-plugin-daemonset", "nvidia-device-plugin", "gpu-operator", policy)
    pod = standin.daemonset_pod(daemonset)
    assert (pod["configmap"], pod["default_config"], pod["strategy"]) == ("device-plugin-configs", "default", "mixed")
    template = daemonset["spec"]["template"]["spec"]
    assert [c["name"] for c in template["initContainers"]] == ["config-manager-init"]
    assert [c["name"] for c in template["containers"]] == ["nvidia-device-plugin", "config-manager"]
    assert {"name": "PROCESS_TO_SIGNAL", "value": "nvidia-device-plugin"} in template["containers"][1]["env"]
    assert daemonset["metadata"]["ownerReferences"][0]["uid"] == "u1"
    # a rollout (a new Pod template annotation) is a new Pod; the same template is the same Pod
    assert standin.daemonset_pod(json.loads(json.dumps(daemonset)))["pod"] == pod["pod"]
    daemonset["spec"]["template"]["metadata"]["annotations"] = {"kubectl.kubernetes.io/restartedAt": "now"}
    assert standin.daemonset_pod(daemonset)["pod"] != pod["pod"]
    # no config named: no config-manager, no volume, the strategy unset when the ClusterPolicy sets none
    bare = standin.daemonset_pod(standin.operand_daemonset("gpu-feature-discovery", "gpu-feature-discovery", "gpu-operator", {"metadata": {}}))
    assert (bare["configmap"], bare["default_config"], bare["strategy"]) == (None, None, None)


@pytest.mark.parametrize("section, image", [
    (None, "gpushare-lab/k8s-device-plugin:v0.18.0"),                                   # the lab's ClusterPolicy names none
    ({"version": "v0.17.4"}, "gpushare-lab/k8s-device-plugin:v0.17.4"),
    ({"repository": "registry.example/nvidia", "image": "k8s-device-plugin", "version": "v0.17.4"}, "registry.example/nvidia/k8s-device-plugin:v0.17.4"),
    ({"repository": "registry.example/nvidia", "image": "k8s-device-plugin", "version": "sha256:" + "a" * 64},
     "registry.example/nvidia/k8s-device-plugin@sha256:" + "a" * 64),                  # a digest: the operator writes @
    ({"image": "registry.example/mirror/k8s-device-plugin:v0.16.2"}, "registry.example/mirror/k8s-device-plugin:v0.16.2"),  # a full path alone
])
def test_the_operand_image_is_composed_as_the_operator_composes_it(section, image):
    assert standin.operand_image(section, "v0.18.0") == image


def test_the_operand_daemonsets_run_the_image_the_cluster_policy_names_and_the_node_reads_its_release():
    policy = {"metadata": {"name": "cluster-policy"}, "spec": {"devicePlugin": {"version": "v0.17.4", "config": {"name": "cm", "default": "default"}},
                                                               "gfd": {"repository": "gpushare-lab", "image": "k8s-device-plugin", "version": "v0.18.0"}}}
    plugin = standin.operand_daemonset("nvidia-device-plugin-daemonset", "nvidia-device-plugin", "gpu-operator", policy, "v0.18.0")
    template = plugin["spec"]["template"]["spec"]
    # every container of the Pod runs the release's image (config-manager is in the k8s-device-plugin image)
    assert {c["image"] for c in template["containers"] + template["initContainers"]} == {"gpushare-lab/k8s-device-plugin:v0.17.4"}
    assert standin.daemonset_pod(plugin)["version"] == "v0.17.4"
    gfd = standin.operand_daemonset("gpu-feature-discovery", "gpu-feature-discovery", "gpu-operator", policy, "v0.18.0")
    assert standin.daemonset_pod(gfd)["version"] == "v0.18.0"
    # a new version is a new Pod template: a rollout
    older = standin.operand_daemonset("nvidia-device-plugin-daemonset", "nvidia-device-plugin", "gpu-operator",
                                      {"metadata": {}, "spec": {"devicePlugin": {"config": {"name": "cm", "default": "default"}}}}, "v0.18.0")
    assert standin.daemonset_pod(older)["pod"] != standin.daemonset_pod(plugin)["pod"]
    assert standin.daemonset_pod(older)["version"] == "v0.18.0"


def _script(path, text):
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_binary_says_its_release(tmp_path):
    assert standin.binary_version(_script(tmp_path / "plugin", "echo 'NVIDIA Device Plugin version v0.17.4'\n")) == "v0.17.4"
    assert standin.binary_version(_script(tmp_path / "gfd", "echo 'GPU Feature Discovery version v0.18.0' >&2\n")) == "v0.18.0"
    assert standin.binary_version(_script(tmp_path / "mute", "exit 1\n")) is None
    assert standin.binary_version(str(tmp_path / "nothing")) is None


def test_a_release_the_stand_in_lacks_starts_no_pod(tmp_path):
    """The DaemonSet's image names a release the stand-in has no binaries of: as with an image a node cannot pull, nothing
    starts (the running Pod of a stuck rollout is kept); GFD says so and labels nothing."""
    plugin = standin.DevicePlugin(str(tmp_path / "v0.18.0" / "nvidia-device-plugin"), "kubelet", str(tmp_path), str(tmp_path / "state"), "kubeconfig",
                                  releases={"v0.18.0": str(tmp_path / "v0.18.0" / "nvidia-device-plugin")}, version="v0.18.0")
    state = nvml_state.node_state("A100-SXM4-80GB", 1, node="n1")
    assert plugin.ensure("n1", state, version="v0.16.2") == [] and plugin.nodes() == [] and plugin.starts == 0
    gfd = standin.Gfd(str(tmp_path / "gfd"), str(tmp_path), str(tmp_path / "state"), releases={"v0.18.0": str(tmp_path / "gfd")})
    with pytest.raises(standin.GfdError, match="names release v0.17.4, and the stand-in has no gpu-feature-discovery of it .it has: v0.18.0."):
        gfd.labels("n1", state, version="v0.17.4")
    assert gfd.runs == 0
