#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Section intent of benchmarks/run.py: admission latency of 1,000 Pods with and without the GPU intent policies."""

from __future__ import annotations

import time

from harness import BenchError, RESULTS, create_namespace_ready, fmt, kube_client, say, show, wait_quiet

INTENT = "gpushare.k8s/gpu"
BOUND, PLAIN = "gpu-share", "bench-no-policy"  # the lab's namespace (the policies' binding covers it) and one outside


def _pod(name, intent=None, resource=None):
    container = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
    if resource:
        container["resources"] = {"limits": {resource: "1"}}
    metadata = {"name": name}
    if intent:
        metadata["annotations"] = {INTENT: intent}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}}


def section_intent(env, args, clusters):
    """Server dry-run creates, one at a time: no policy (baseline), the policies skipping a Pod without intent, rewriting one."""
    say("\n== intent: admission latency of Pods with and without the GPU intent policies (server dry run)")
    wait_quiet(args, "intent")
    name = "%s-intent" % args.prefix
    if clusters.exists(name):
        clusters.delete(name)
    clusters.create(name)
    env.run(["ansible-playbook", "playbooks/lab.yml", "-e", "gpushare_cluster_name=" + name, "-e", "gpushare_lab_root=%s" % (env.work / "intent-root"),
             "--tags", "step1,intent_admission"], "lab-intent-policies")
    api = kube_client(clusters.kubeconfig(name), 4)
    create_namespace_ready(api, PLAIN)
    count = 1000 if not args.quick else 200
    intents = ("whole", "shared", "isolated", "1g.10gb")
    # The policies load asynchronously: wait until a dry-run Pod asking by intent comes back rewritten.
    deadline = time.monotonic() + 60
    while not (api.create_namespaced_pod(BOUND, _pod("probe", "whole"), dry_run="All").spec.containers[0].resources.limits or {}):
        if time.monotonic() > deadline:
            raise BenchError("the intent policies did not rewrite a Pod in %s within 60 s" % BOUND)
        time.sleep(0.5)
    cases = (
        ("intent.no_policy", PLAIN, lambda i: _pod("p-%d" % i, resource="nvidia.com/gpu"),
         "a Pod naming nvidia.com/gpu, namespace without the policies"),
        ("intent.no_intent", BOUND, lambda i: _pod("p-%d" % i, resource="nvidia.com/gpu"),
         "the same Pod where the policies are bound (matchConditions skip it)"),
        ("intent.rewritten", BOUND, lambda i: _pod("p-%d" % i, intents[i % len(intents)]),
         "a Pod asking by intent, rewritten and validated"),
    )
    totals = {}
    for key, namespace, body, label in cases:
        start = time.perf_counter()
        for i in range(count):
            one = time.perf_counter()
            stored = api.create_namespaced_pod(namespace, body(i), dry_run="All")
            RESULTS.add(key, (time.perf_counter() - one) * 1000, label, unit="ms")
            if key == "intent.rewritten" and not (stored.spec.containers[0].resources.limits or {}):
                raise BenchError("Pod %d asking for %s was not rewritten" % (i, intents[i % len(intents)]))
        totals[key] = time.perf_counter() - start
        say("  %s: %d Pods in %s (%.0f/s)" % (key, count, fmt(totals[key], "s"), count / totals[key]))
    show(*(key for key, _ns, _body, _label in cases))
    RESULTS.ratio("admission with the intent policies, Pod without intent vs no policy", "intent.no_intent", "intent.no_policy")
    RESULTS.ratio("admission with the intent policies, Pod rewritten vs no policy", "intent.rewritten", "intent.no_policy")
    clusters.delete(name)
