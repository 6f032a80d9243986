#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Section scale of benchmarks/run.py: 1,000-node advertising against a kubectl patch loop, Pod scheduling."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import json
import subprocess
import time

from harness import (
    BENCH, BenchError, PYTHON, RESOURCE, RESULTS, SCALE_SELECTOR, TIMINGS_ENV, create_namespace_ready, create_pods_until_bound, fmt,
    kube_client, list_nodes, load_timings, say, show, stamp, wait_nodes_usable, wait_quiet,
)


def verify_nodes(env, kubeconfig, expected_count, value):
    """Read every scale node with kubectl (not the module) and check the resource and the rest of its status."""
    nodes = list_nodes(env, kubeconfig)
    bad = []
    for node in nodes:
        status = node.get("status", {})
        capacity, allocatable = status.get("capacity", {}), status.get("allocatable", {})
        ok = capacity.get(RESOURCE) == value and allocatable.get(RESOURCE) == value
        ok = ok and all(capacity.get(k) == v and allocatable.get(k) == v for k, v in (("cpu", "32"), ("memory", "256Gi"), ("pods", "110")))
        ready = [c for c in status.get("conditions", []) if c.get("type") == "Ready"]
        ok = ok and bool(ready) and ready[0].get("status") == "True"
        if not ok:
            bad.append(node["metadata"]["name"])
    return len(nodes) - len(bad), len(nodes), bad[:5]


def reset_nodes(api, names):
    body = {"status": {"capacity": {RESOURCE: None}, "allocatable": {RESOURCE: None}}}

    def one(name):
        api.patch_node_status(name, body, _content_type="application/merge-patch+json", _preload_content=False).data

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(one, names))


def schedule_pods(api, namespace, count, selector_value):
    """Create `count` one-slice Pods (16 at a time), wait until all are bound; return (create s, bound s, nodes used)."""
    create_namespace_ready(api, namespace)
    key, value = selector_value.split("=", 1)

    def pod(i):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "slice-%05d" % i},
                "spec": {"nodeSelector": {key: value}, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "work", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {"limits": {RESOURCE: "1"}}}]}}

    created, bound = create_pods_until_bound(api, namespace, [pod(i) for i in range(count)], timeout=900, interval=0.2)
    pods = json.loads(api.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    per_node = {}
    for p in pods:
        per_node[p["spec"].get("nodeName")] = per_node.get(p["spec"].get("nodeName"), 0) + 1
    return created, bound, len(pods), per_node


def section_scale(env, args, clusters):
    say("\n== scale: %d kwok nodes; node_resources in one task against a kubectl patch loop; %d one-slice Pods"
        % (args.nodes, args.pods))
    wait_quiet(args, "scale")
    cluster = "%s-scale" % args.prefix
    kubeconfig = clusters.kubeconfig(cluster)
    created = clusters.create(cluster)
    seconds, _rc, _log = env.run([env.kwokctl, "--name", cluster, "scale", "node", "--replicas", args.nodes], "kwokctl-scale")
    usable, nodes = wait_nodes_usable(env, kubeconfig, args.nodes)
    names = sorted(n["metadata"]["name"] for n in nodes)
    sample = nodes[0]
    taints = sum(1 for n in nodes if n.get("spec", {}).get("taints"))
    say("%s cluster %s; kwokctl scale node --replicas %d: %s; all Ready and untainted after %s more" %
        (stamp(), fmt(created, "s"), args.nodes, fmt(seconds, "s"), fmt(usable, "s")))
    say("  kwokctl's nodes: annotation kwok.x-k8s.io/node=%s, label %s, capacity %s, taints now %d"
        " (the node lifecycle controller adds node.kubernetes.io/not-ready:NoSchedule at creation and lifts it"
        " once kwok reports Ready)" % (sample["metadata"].get("annotations", {}).get("kwok.x-k8s.io/node"), SCALE_SELECTOR,
                                       json.dumps(sample["status"]["capacity"], sort_keys=True), taints))
    RESULTS.machine["scale_nodes"] = {"count": len(names), "kwokctl_scale_s": seconds, "usable_after_s": usable}
    if len(names) != args.nodes:
        raise BenchError("expected %d scale nodes, found %d" % (args.nodes, len(names)))
    api = kube_client(kubeconfig, 32)

    loop = ["bash", BENCH / "baseline-patch-loop.sh", kubeconfig, SCALE_SELECTOR, RESOURCE, "8"]
    verified = []
    for r in range(args.runs):
        for par in args.parallelism:
            reset_nodes(api, names)
            timings = env.work / ("timings-nr-%d-%d.json" % (par, r))
            spawn = time.time()
            wall, _rc, _log = env.run(
                ["ansible-playbook", BENCH / "playbooks" / "node_resources.yml", "-e", "bench_kubeconfig=%s" % kubeconfig,
                 "-e", "bench_selector=" + SCALE_SELECTOR, "-e", "bench_resource=" + RESOURCE, "-e", "bench_count=8",
                 "-e", "bench_parallelism=%d" % par, "-e", "bench_expected=%d" % len(names)],
                "node-resources-p%d" % par, env=dict(TIMINGS_ENV, BENCH_TIMINGS_FILE=str(timings)))
            prof = load_timings(timings, spawn, time.time())
            task = prof["tasks"][0]["end"] - prof["tasks"][0]["start"]
            ok, total, bad = verify_nodes(env, kubeconfig, len(names), "8")
            verified.append((ok, total))
            RESULTS.add("scale.module.p%d" % par, task, "node_resources task, %d nodes, parallelism %d" % (len(names), par))
            RESULTS.add("scale.playbook.p%d" % par, wall, "  ansible-playbook wall (1 task + assert), parallelism %d" % par)
            say("%s run %d/%d node_resources parallelism %3d: task %s, playbook %s; verified %d/%d nodes%s"
                % (stamp(), r + 1, args.runs, par, fmt(task, "s"), fmt(wall, "s"), ok, total, "" if not bad else " BAD: %s" % bad))
            if ok != total:
                RESULTS.failures.append("node_resources p=%d run %d: %d of %d nodes wrong (%s)" % (par, r + 1, total - ok, total, bad))
        if r < args.loop_runs:
            reset_nodes(api, names)
            seconds, _rc, _log = env.run(loop, "patch-loop", env={"KUBECTL": env.kubectl})
            ok, total, bad = verify_nodes(env, kubeconfig, len(names), "8")
            verified.append((ok, total))
            RESULTS.add("scale.loop", seconds, "kubectl patch loop, %d nodes" % len(names))
            say("%s run %d/%d kubectl patch loop: %s (%.0f ms/node); verified %d/%d nodes%s"
                % (stamp(), r + 1, args.runs, fmt(seconds, "s"), 1000 * seconds / len(names), ok, total, "" if not bad else " BAD: %s" % bad))
            if ok != total:
                RESULTS.failures.append("patch loop run %d: %d of %d nodes wrong" % (r + 1, total - ok, total))

    if args.profile:
        say("  where the task's time goes (the module's code run directly, no Ansible; one run per parallelism):")
    for par in (args.parallelism if args.profile else []):
        reset_nodes(api, names)
        proc = subprocess.run([PYTHON, BENCH / "node_resources_direct.py", kubeconfig, SCALE_SELECTOR, RESOURCE, "8", str(par)],
                              capture_output=True, text=True, env=env.env, check=False)
        if proc.returncode != 0:
            raise BenchError("node_resources_direct.py failed: %s" % proc.stderr[-2000:])
        d = json.loads(proc.stdout.strip().splitlines()[-1])
        ok, total, bad = verify_nodes(env, kubeconfig, len(names), "8")
        verified.append((ok, total))
        RESULTS.profile.setdefault("scale_direct", {})[par] = d
        ansible_share = RESULTS.median("scale.module.p%d" % par) - d["total"]
        say("    parallelism %3d: imports %s, client %s, LIST %s, %d PATCHes in %s (%.1f ms each, %d re-reads after conflicts),"
            " result %.0f kB; total %s -> Ansible's share of the task %s; verified %d/%d"
            % (par, fmt(d["imports"], "s"), fmt(d["client"], "s"), fmt(d["list"], "s"), d["patch_calls"], fmt(d["patch_wall"], "s"),
               1000 * d["patch_sum"] / max(d["patch_calls"], 1), d["get_calls"], d["result_bytes"] / 1000, fmt(d["total"], "s"),
               fmt(ansible_share, "s"), ok, total))
        if ok != total:
            RESULTS.failures.append("direct apply p=%d: %d of %d nodes wrong (%s)" % (par, total - ok, total, bad))

    best = min(args.parallelism, key=lambda p: RESULTS.median("scale.module.p%d" % p))
    RESULTS.machine["scale_best_parallelism"] = best
    for par in args.parallelism:
        show("scale.module.p%d" % par, "scale.playbook.p%d" % par)
    show("scale.loop")
    all_ok = all(ok == total for ok, total in verified)
    say("  verification: after each of %d writes every node was read back with kubectl: %s (%d node checks, 0 lost updates%s)"
        % (len(verified), "all correct" if all_ok else "ERRORS", sum(t for _o, t in verified), "" if all_ok else " NOT"))
    RESULTS.machine["scale_verified"] = {"writes": len(verified), "node_checks": sum(t for _o, t in verified),
                                         "correct": sum(o for o, _t in verified)}
    task = RESULTS.median("scale.module.p%d" % best)
    RESULTS.ratios.append({"label": "node_resources on %d nodes <= 10 s (parallelism %d)" % (len(names), best), "value": task,
                           "target": "<= 10 s", "met": task <= 10, "unit": "s"})
    say("  target  node_resources task <= 10 s (parallelism %d, the fastest): %s (%s)" % (best, "met" if task <= 10 else "MISSED", fmt(task, "s")))
    RESULTS.ratio("kubectl loop / node_resources task (parallelism %d)" % best, "scale.loop", "scale.module.p%d" % best, ">= 20x", lambda v: v >= 20)
    if 16 in args.parallelism and best != 16:
        RESULTS.ratio("kubectl loop / node_resources task (default parallelism 16)", "scale.loop", "scale.module.p16", ">= 20x", lambda v: v >= 20)
    RESULTS.ratio("kubectl loop / whole ansible-playbook (parallelism %d)" % best, "scale.loop", "scale.playbook.p%d" % best)

    for r in range(args.pod_runs):
        created_s, bound_s, count, per_node = schedule_pods(api, "bench-pods-%d" % (r + 1), args.pods, SCALE_SELECTOR)
        RESULTS.add("scale.pods.create", created_s, "create %d one-slice Pods (16 client threads)" % args.pods)
        RESULTS.add("scale.pods.bound", bound_s, "create %d Pods and wait until all are bound" % args.pods)
        RESULTS.add("scale.pods.rate", args.pods / bound_s, "Pods bound per second (end to end)", unit="/s")
        over = [n for n, c in per_node.items() if c > 8 or n not in names]
        say("%s run %d/%d %d Pods: created in %s, all bound after %s = %.0f pods/s, on %d nodes, max %d per node%s"
            % (stamp(), r + 1, args.pod_runs, count, fmt(created_s, "s"), fmt(bound_s, "s"), args.pods / bound_s, len(per_node),
               max(per_node.values()), "" if not over else " WRONG NODES %s" % over[:3]))
        if count != args.pods or over:
            RESULTS.failures.append("pods run %d: %d Pods, misplaced %s" % (r + 1, count, over[:3]))
    show("scale.pods.create", "scale.pods.bound", "scale.pods.rate")
    RESULTS.add("setup.cluster_delete", clusters.delete(cluster), "remove a cluster (cluster.yml lab_cluster_state=absent)")
