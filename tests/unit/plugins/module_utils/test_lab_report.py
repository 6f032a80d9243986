# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/lab/report.py: the lab's summary is short lines, one per node and per Pod, the files by folder, the
export line."""
from __future__ import annotations

from ansible_collections.gpushare.k8s.plugins.module_utils.lab.report import lab_summary

PRODUCT = "NVIDIA-A100-SXM4-80GB"


def node(name, labels, allocatable):
    return {"metadata": {"name": name, "labels": dict(labels, **{"kubernetes.io/hostname": name, "nvidia.com/gfd.timestamp": "1"})},
            "status": {"allocatable": dict(allocatable, cpu="32", memory="256Gi", pods="110")}}


NODES = [
    node("lab-node-2", {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": PRODUCT, "nvidia.com/mig.capable": "true"},
         {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/gpu": "0"}),
    node("lab-node-0", {"nvidia.com/device-plugin.config": "default", "nvidia.com/gpu.product": PRODUCT, "nvidia.com/gpu.count": "2"},
         {"nvidia.com/gpu": "2"}),
    node("lab-node-1", {"nvidia.com/device-plugin.config": "shared", "nvidia.com/gpu.product": PRODUCT + "-SHARED",
                        "nvidia.com/gpu.replicas": "4"}, {"nvidia.com/gpu": "8"}),
    node("other", {}, {}),
]
PODS = [
    {"metadata": {"namespace": "team-a", "name": "team-a-job-1"}, "spec": {"nodeName": "lab-node-1"}, "status": {"phase": "Running"}},
    {"metadata": {"namespace": "gpu-share", "name": "mig-job"}, "spec": {"nodeName": "lab-node-2"}, "status": {"phase": "Running"}},
    {"metadata": {"namespace": "gpu-share", "name": "waiting"}, "spec": {}, "status": {"phase": "Pending"}},
]
ROOT = "/root/gpushare"
FILES = [ROOT + "/out/placement.txt", ROOT + "/k8s/mig-job.yaml", ROOT + "/bin/check-request.sh", ROOT + "/k8s/device-plugin-configs.yaml"]
KUBECONFIG = "/root/.kwok/clusters/gpushare/kubeconfig.yaml"


def test_the_lab_summary_reads_line_by_line():
    lines = lab_summary(NODES, PODS, FILES, ROOT, KUBECONFIG, node_names=["lab-node-0", "lab-node-1", "lab-node-2"])
    assert lines == [
        "node lab-node-0  config default  nvidia.com/gpu=2          gpu.product=NVIDIA-A100-SXM4-80GB",
        "node lab-node-1  config shared   nvidia.com/gpu=8          gpu.product=NVIDIA-A100-SXM4-80GB-SHARED",
        "node lab-node-2  config -        nvidia.com/mig-1g.10gb=7  gpu.product=NVIDIA-A100-SXM4-80GB mig.strategy=mixed",
        "pod gpu-share/mig-job    on lab-node-2       Running",
        "pod gpu-share/waiting    on (not scheduled)  Pending",
        "pod team-a/team-a-job-1  on lab-node-1       Running",
        "files in /root/gpushare:",
        "bin/: check-request.sh",
        "k8s/: device-plugin-configs.yaml, mig-job.yaml",
        "out/: placement.txt",
        "next: export KUBECONFIG=/root/.kwok/clusters/gpushare/kubeconfig.yaml",
    ]
    assert max(len(line) for line in lines) <= 120


def test_without_a_node_filter_every_node_is_shown_and_one_without_gpus_says_so():
    lines = lab_summary(NODES, [], [], "", None)
    assert lines[3] == "node other       config -        no GPU"
    assert lines[4:] == ["pods: none"]


def test_a_context_is_named_and_a_dict_kubeconfig_gets_no_export_line():
    assert lab_summary([], [], [], "", KUBECONFIG, context="lab")[-1] == "next: export KUBECONFIG=%s and pass kubectl --context lab" % KUBECONFIG
    assert not any(line.startswith("next:") for line in lab_summary([], [], [], "", {"clusters": []}))


def test_missing_nodes_and_an_empty_lab_root_are_said():
    lines = lab_summary([], [], [], ROOT, "", node_names=["lab-node-9"])
    assert lines == ["nodes: none of lab-node-9 found", "pods: none", "files: none in /root/gpushare"]


def test_the_labels_shown_can_be_chosen():
    lines = lab_summary(NODES, node_names=["lab-node-1"], labels=["nvidia.com/gpu.replicas", "kubernetes.io/hostname"])
    assert lines[0].endswith("gpu.replicas=4 kubernetes.io/hostname=lab-node-1")


def test_a_long_list_of_files_wraps_under_its_folder():
    files = ["/r/k8s/manifest-%02d.yaml" % n for n in range(12)]
    lines = lab_summary([], [], files, "/r", None, width=60)
    assert lines[:2] == ["nodes: none", "pods: none"]
    assert lines[2:] == ["files in /r:",
                         "k8s/: manifest-00.yaml, manifest-01.yaml, manifest-02.yaml,",
                         "      manifest-03.yaml, manifest-04.yaml, manifest-05.yaml,",
                         "      manifest-06.yaml, manifest-07.yaml, manifest-08.yaml,",
                         "      manifest-09.yaml, manifest-10.yaml, manifest-11.yaml"]


def test_hidden_files_are_not_the_labs_files():
    """Step 8's stored verdict (and any hidden file or folder) is the collection's record, not a file of the lab's."""
    files = [ROOT + "/.gpushare/intent-verdict.json", ROOT + "/out/.swp", ROOT + "/out/placement.txt"]
    assert lab_summary([], [], files, ROOT, "")[-2:] == ["files in /root/gpushare:", "out/: placement.txt"]
    assert lab_summary([], [], files[:1], ROOT, "")[-1] == "files: none in /root/gpushare"
