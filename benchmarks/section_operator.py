#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Section operator of benchmarks/run.py: label change to advertised change through the GPU Operator stand-in.

What advertises is NVIDIA's device plugin (one per node, registered with device-plugin-kubelet): a config relabel
reaches it as a SIGHUP, a MIG layout restarts it after the MIG manager has applied the layout.
"""

from __future__ import annotations

import json
import time

from harness import BenchError, RESOURCE, RESULTS, ROOT, fmt, kube_client, say, show, wait_quiet


def section_operator(env, args, clusters):
    """Label change -> advertised change through the GPU Operator stand-in (lab-node-1: shared 8 <-> default 2)."""
    say("\n== operator: nvidia.com/device-plugin.config relabel -> allocatable through the GPU Operator stand-in")
    wait_quiet(args, "operator")
    name = "%s-operator" % args.prefix
    if clusters.exists(name):
        clusters.delete(name)
    clusters.live.append(name)
    env.run(["make", "-C", ROOT, "--no-print-directory", "cluster",
             "PLAYBOOK=ansible-playbook -e gpushare_cluster_name=%s -e gpushare_gpu_operator_standin=true" % name], "make-cluster-operator")
    root = env.work / "operator-root"
    env.run(["ansible-playbook", "playbooks/lab.yml", "-e", "gpushare_cluster_name=" + name, "-e", "gpushare_mode=operator",
             "-e", "gpushare_lab_root=%s" % root, "--tags", "step1,step2,step3"], "lab-operator-steps-1-3")
    api = kube_client(clusters.kubeconfig(name), 4)

    def allocatable():
        return (api.read_node("lab-node-1").status.allocatable or {}).get(RESOURCE)

    def label(value):
        api.patch_node("lab-node-1", {"metadata": {"labels": {"nvidia.com/device-plugin.config": value}}})

    samples = 20 if not args.quick else 6
    for n in range(samples):
        config, want = ("default", "2") if n % 2 == 0 else ("shared", "8")
        start = time.perf_counter()
        label(config)
        seen = api.read_node("lab-node-1").metadata.labels.get("nvidia.com/device-plugin.config")
        RESULTS.add("operator.label_visible", time.perf_counter() - start, "label patch, then read back (baseline: API round trip)")
        assert seen == config
        deadline = start + 30
        while allocatable() != want:
            if time.perf_counter() > deadline:
                raise BenchError("lab-node-1 did not advertise %s within 30 s of the label %s" % (want, config))
            time.sleep(0.01)
        RESULTS.add("operator.relabel_advertised", time.perf_counter() - start, "label change -> allocatable changed (stand-in)")
    show("operator.label_visible", "operator.relabel_advertised")
    figure = RESULTS.figures["operator.relabel_advertised"]
    say("  max %s over %d changes (target: within 2 s)" % (fmt(max(figure.samples), "s"), len(figure.samples)))
    RESULTS.ratio("stand-in relabel -> advertised vs API round trip", "operator.relabel_advertised", "operator.label_visible")
    _mig_layouts(api, samples)
    clusters.delete(name)


MIG_NODE, MIG_RESOURCE = "lab-node-2", "nvidia.com/mig-1g.10gb"
APPLIED = "gpushare.k8s/mig-applied"  # the stand-in's record of the layout its MIG manager applied


def _mig_layouts(api, samples):
    """MIG layout relabel (the lab's layout <-> all-disabled) -> mig.config.state success -> the plugin's new devices."""
    labels = api.read_node(MIG_NODE).metadata.labels or {}
    layout = labels.get("nvidia.com/mig.config")
    if not layout or layout == "all-disabled":
        raise BenchError("%s has no MIG layout of the lab (nvidia.com/mig.config=%r): step 3 did not run" % (MIG_NODE, layout))
    want_devices = (api.read_node(MIG_NODE).status.allocatable or {}).get(MIG_RESOURCE)
    for n in range(samples):
        config, want = ("all-disabled", None) if n % 2 == 0 else (layout, want_devices)
        start = time.perf_counter()
        api.patch_node(MIG_NODE, {"metadata": {"labels": {"nvidia.com/mig.config": config}}})
        deadline, succeeded = start + 60, None
        while True:
            node = api.read_node(MIG_NODE)
            state = (node.metadata.labels or {}).get("nvidia.com/mig.config.state")
            applied = json.loads((node.metadata.annotations or {}).get(APPLIED, "{}")).get("layout")
            if succeeded is None and state == "success" and applied == config:  # not the previous layout's success
                succeeded = time.perf_counter()
                RESULTS.add("operator.mig_success", succeeded - start, "MIG layout label -> mig.config.state=success (nvidia-mig-parted apply)")
            if succeeded is not None and (node.status.allocatable or {}).get(MIG_RESOURCE) == want:
                RESULTS.add("operator.mig_advertised", time.perf_counter() - start, "MIG layout label -> the device plugin's new devices")
                break
            if time.perf_counter() > deadline:
                raise BenchError("%s: layout %s not applied and advertised within 60 s (state %s)" % (MIG_NODE, config, state))
            time.sleep(0.01)
    show("operator.mig_success", "operator.mig_advertised")
    figure = RESULTS.figures["operator.mig_advertised"]
    say("  max %s over %d layout changes (the plugin restarts on each)" % (fmt(max(figure.samples), "s"), len(figure.samples)))
    RESULTS.ratio("MIG layout -> advertised vs relabel -> advertised", "operator.mig_advertised", "operator.relabel_advertised")
