#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Section operator of benchmarks/run.py: label change to advertised change through the GPU Operator stand-in."""

from __future__ import annotations

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
             "-e", "gpushare_lab_root=%s" % root, "--tags", "step1,step2"], "lab-operator-steps-1-2")
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
    clusters.delete(name)
