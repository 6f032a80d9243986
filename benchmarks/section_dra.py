#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Section dra of benchmarks/run.py: 1,000 nodes of ResourceSlices and 1,000 claims allocated by the scheduler."""

from __future__ import annotations

import json
import sys
import time

from harness import (
    BENCH, RESULTS, ROOT, TIMINGS_ENV, create_namespace_ready, create_pods_until_bound, fmt, load_timings, say, show, stamp,
    wait_nodes_usable, wait_quiet,
)


def dra_bench_nodes(names):
    """Half whole-GPU nodes (2 GPUs), half MIG nodes (1 GPU, every A100 profile), alternating."""
    return [{"name": name, "gpus": 2} if index % 2 == 0 else {"name": name, "gpus": 1, "mig": True} for index, name in enumerate(names)]


def dra_claims(api_client, namespace, count, template, device_class, expression=None):
    """A ResourceClaimTemplate and `count` Pods with a claim each (16 at a time); wait until all are bound.

    Returns (create s, bound s, allocated devices): every claim is read back from its status.
    """
    from kubernetes import client

    core, resource = client.CoreV1Api(api_client), client.ResourceV1Api(api_client)
    create_namespace_ready(core, namespace)
    request = {"deviceClassName": device_class}
    if expression:
        request["selectors"] = [{"cel": {"expression": expression}}]
    resource.create_namespaced_resource_claim_template(namespace, {"metadata": {"name": template}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": request}]}}}})

    def pod(i):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "claim-%05d" % i},
                "spec": {"terminationGracePeriodSeconds": 0, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                         "containers": [{"name": "work", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}]}}

    created, bound = create_pods_until_bound(core, namespace, [pod(i) for i in range(count)], timeout=1200, interval=0.5)
    claims = json.loads(resource.list_namespaced_resource_claim(namespace, _preload_content=False).data)["items"]
    devices = [(r["pool"], r["device"]) for c in claims for r in c.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])]
    return created, bound, devices


def section_dra(env, args, clusters):
    say("\n== dra: %d kwok nodes published as ResourceSlices by one dra_resource_slices task; %d claims allocated by the scheduler"
        % (args.nodes, args.pods))
    wait_quiet(args, "dra")
    cluster = "%s-dra" % args.prefix
    kubeconfig = clusters.kubeconfig(cluster)
    clusters.create(cluster)
    env.run([env.kwokctl, "--name", cluster, "scale", "node", "--replicas", args.nodes], "kwokctl-scale-dra")
    _usable, nodes = wait_nodes_usable(env, kubeconfig, args.nodes)
    names = sorted(n["metadata"]["name"] for n in nodes)
    spec = dra_bench_nodes(names)
    nodes_file = env.work / "dra-nodes.json"
    nodes_file.write_text(json.dumps(spec))
    whole = sum(node["gpus"] for node in spec if not node.get("mig"))
    mig_gpus = sum(node["gpus"] for node in spec if node.get("mig"))
    from kubernetes import config as kube_config

    api_client = kube_config.new_client_from_config(config_file=str(kubeconfig))
    for run, expected in (("first", len(spec)), ("re-run", 0)):
        timings = env.work / ("timings-dra-%s.json" % run)
        spawn = time.time()
        wall, _rc, _log = env.run(
            ["ansible-playbook", BENCH / "playbooks" / "dra_slices.yml", "-e", "bench_kubeconfig=%s" % kubeconfig,
             "-e", "bench_nodes_file=%s" % nodes_file, "-e", "bench_parallelism=32", "-e", "bench_expected=%d" % expected],
            "dra-slices-%s" % run, env=dict(TIMINGS_ENV, BENCH_TIMINGS_FILE=str(timings)))
        prof = load_timings(timings, spawn, time.time())
        task = prof["tasks"][0]["end"] - prof["tasks"][0]["start"]
        key = "dra.publish" if expected else "dra.republish"
        RESULTS.add(key, task, "dra_resource_slices task, %d pools (%s)" % (len(spec), "first" if expected else "unchanged re-run"))
        slices = json.loads(env.kube(kubeconfig, "get", "resourceslices", "--field-selector", "spec.driver=gpu.nvidia.com", "-o", "json"))["items"]
        devices = sum(len(s["spec"].get("devices", [])) for s in slices)
        pools = {s["spec"]["pool"]["name"] for s in slices}
        say("%s %s publish of %d pools: task %s, playbook %s; read back %d slices, %d pools, %d devices"
            % (stamp(), run, len(spec), fmt(task, "s"), fmt(wall, "s"), len(slices), len(pools), devices))
        if pools != set(names):
            RESULTS.failures.append("dra publish (%s): %d pools published, %d nodes" % (run, len(pools), len(names)))
    RESULTS.machine["dra_published"] = {"nodes": len(spec), "slices": len(slices), "devices": devices, "whole_gpus": whole, "mig_gpus": mig_gpus}
    show("dra.publish", "dra.republish")
    RESULTS.add("dra.publish.rate", len(spec) / RESULTS.median("dra.publish"), "pools published per second", unit="/s")
    show("dra.publish.rate")

    for label, device_class, expression, capacity in (
            ("whole", "gpu.nvidia.com", None, whole),
            ("mig", "mig.nvidia.com", "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", mig_gpus * 7)):
        count = min(args.pods, capacity)
        if label == "whole":  # the lab's DeviceClasses, as the dra_driver role writes them
            sys.path.insert(0, str(ROOT / ".collections"))
            from ansible_collections.gpushare.k8s.plugins.module_utils.dra.devices import device_classes

            classes = env.work / "dra-device-classes.json"
            classes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": device_classes()}))
            env.kube(kubeconfig, "apply", "-f", classes)
        created_s, bound_s, devices = dra_claims(api_client, "bench-dra-%s" % label, count, "one-" + label, device_class, expression)
        RESULTS.add("dra.claims.%s.create" % label, created_s, "create %d Pods with a %s claim each (16 client threads)" % (count, label))
        RESULTS.add("dra.claims.%s.bound" % label, bound_s, "  ... until the scheduler has allocated every claim and bound every Pod")
        RESULTS.add("dra.claims.%s.rate" % label, count / bound_s, "  %s claims allocated per second (end to end)" % label, unit="/s")
        distinct = len(set(devices))
        say("%s %d %s claims: Pods created in %s, all bound after %s = %.0f claims/s; %d allocations read back, %d distinct devices"
            % (stamp(), count, label, fmt(created_s, "s"), fmt(bound_s, "s"), count / bound_s, len(devices), distinct))
        if len(devices) != count or distinct != count:
            RESULTS.failures.append("dra %s claims: %d allocations, %d distinct devices, %d Pods" % (label, len(devices), distinct, count))
        show("dra.claims.%s.create" % label, "dra.claims.%s.bound" % label, "dra.claims.%s.rate" % label)
    clusters.delete(cluster)
