#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Section lab of benchmarks/run.py: the lab playbook (in the controller and as modules) against the kubectl scripts."""

from __future__ import annotations

from pathlib import Path
import os
import time

from harness import (
    BENCH, BenchError, LAB_MANIFESTS, LAB_OUTPUTS, PYTHON, RESULTS, TIMINGS_ENV, _tail, aggregate, fmt,
    load_timings, print_profile, recap, say, show, stamp, wait_quiet,
)


def verify_lab(root):
    problems = []
    for rel, want in LAB_OUTPUTS.items():
        path = Path(root) / rel
        if not path.exists() or path.read_text() != want:
            problems.append("%s: %r" % (rel, path.read_text() if path.exists() else "missing"))
    denied = Path(root) / "out" / "quota-denied.txt"
    if not denied.exists() or "exceeded quota: gpu-quota" not in denied.read_text():
        problems.append("out/quota-denied.txt has no quota rejection")
    for name in LAB_MANIFESTS:
        if not (Path(root) / "k8s" / name).exists():
            problems.append("k8s/%s missing" % name)
    if not os.access(Path(root) / "bin" / "check-request.sh", os.X_OK):
        problems.append("bin/check-request.sh missing")
    return problems


def run_lab_playbook(env, cluster, root, tag, extra_args=()):
    timings = env.work / ("timings-%s.json" % tag)
    extra = dict(TIMINGS_ENV, BENCH_TIMINGS_FILE=str(timings))
    spawn = time.time()
    seconds, rc, log = env.run(["ansible-playbook", "playbooks/lab.yml", "-e", "gpushare_cluster_name=" + cluster,
                                "-e", "gpushare_lab_root=" + str(root)] + list(extra_args), tag, env=extra, check=False)
    finish = time.time()
    counts = recap(log)
    if rc != 0 or counts is None:
        raise BenchError("lab playbook %s failed (exit %d); see %s:\n%s" % (tag, rc, log, _tail(log, 25)))
    profile = load_timings(timings, spawn, finish) if timings.exists() else None
    return seconds, counts, profile


def section_lab(env, args, clusters):
    say("\n== lab: ansible-playbook playbooks/lab.yml against benchmarks/baseline-kubectl.sh, fresh cluster for each first run")
    wait_quiet(args, "lab")
    profiles = {"first": [], "rerun": []}
    kubectl_env = {"KUBECTL": env.kubectl, "PYTHON": PYTHON}
    for i in range(args.runs):
        # "modules": the same lab with gpushare_in_controller=false, every module of the collection in its own process
        # (the path of a task delegated to another host), against the default: in the controller.
        # "fair": the kubectl script with the lab's verification (baseline-kubectl-fair.sh: every write read back,
        # the API server and nodes checked first, placements checked to fit).
        order = ("lab", "kubectl", "fair", "modules") if i % 2 == 0 else ("modules", "fair", "kubectl", "lab")
        for what in order:
            cluster = "%s-%s" % (args.prefix, what)
            root = env.work / ("%s-%d" % (what, i + 1))
            created = clusters.create(cluster)
            say("%s run %d/%d %-7s make cluster (new) %s" % (stamp(), i + 1, args.runs, what, fmt(created, "s")))
            if what == "lab":
                reuse = None
                if not args.quick:
                    reuse, _rc, _log = env.run(clusters.make_cluster(cluster), "make-cluster-reuse")
                    RESULTS.add("setup.make_cluster_reuse", reuse, "warm `make cluster`, cluster running (changed=0)")
                first, counts1, prof1 = run_lab_playbook(env, cluster, root, "lab-first-%d" % (i + 1))
                problems = verify_lab(root)
                rerun, counts2, prof2 = run_lab_playbook(env, cluster, root, "lab-rerun-%d" % (i + 1))
                problems += verify_lab(root)
                if counts2[1] != 0:
                    problems.append("re-run reported changed=%d (not idempotent)" % counts2[1])
                RESULTS.add("lab.first", first, "lab playbook, first run (fresh cluster)")
                RESULTS.add("lab.rerun", rerun, "lab playbook, re-run (warm cluster)")
                for key, prof in (("first", prof1), ("rerun", prof2)):
                    if prof:
                        profiles[key].append(prof)
                say("%s run %d/%d lab     first %s (ok=%d changed=%d), re-run %s (ok=%d changed=%d), make cluster (running) %s%s"
                    % (stamp(), i + 1, args.runs, fmt(first, "s"), counts1[0], counts1[1], fmt(rerun, "s"), counts2[0], counts2[1],
                       fmt(reuse, "s"), "" if not problems else "  PROBLEMS: " + "; ".join(problems)))
            elif what == "modules":
                as_modules = ("-e", "gpushare_in_controller=false")
                first, _counts1, _prof = run_lab_playbook(env, cluster, root, "modules-first-%d" % (i + 1), as_modules)
                problems = verify_lab(root)
                rerun, counts2, _prof = run_lab_playbook(env, cluster, root, "modules-rerun-%d" % (i + 1), as_modules)
                problems += verify_lab(root)
                if counts2[1] != 0:
                    problems.append("re-run reported changed=%d (not idempotent)" % counts2[1])
                RESULTS.add("modules.first", first, "lab playbook as modules (gpushare_in_controller=false), first run")
                RESULTS.add("modules.rerun", rerun, "lab playbook as modules (gpushare_in_controller=false), re-run")
                say("%s run %d/%d modules first %s, re-run %s%s"
                    % (stamp(), i + 1, args.runs, fmt(first, "s"), fmt(rerun, "s"), "" if not problems else "  PROBLEMS: " + "; ".join(problems)))
            else:
                kubeconfig = clusters.kubeconfig(cluster)
                key = "kubectl" if what == "kubectl" else "fair"
                script = ["bash", BENCH / ("baseline-kubectl.sh" if what == "kubectl" else "baseline-kubectl-fair.sh"), kubeconfig, root]
                first, _rc, _log = env.run(script, "%s-first-%d" % (key, i + 1), env=kubectl_env)
                problems = verify_lab(root)
                rerun, _rc, _log = env.run(script, "%s-rerun-%d" % (key, i + 1), env=kubectl_env)
                problems += verify_lab(root)
                label = "kubectl script" if what == "kubectl" else "fair kubectl script (verifies as the lab does)"
                RESULTS.add(key + ".first", first, label + ", first run (fresh cluster)")
                RESULTS.add(key + ".rerun", rerun, label + ", re-run (warm cluster)")
                say("%s run %d/%d %-7s first %s, re-run %s%s"
                    % (stamp(), i + 1, args.runs, key, fmt(first, "s"), fmt(rerun, "s"), "" if not problems else "  PROBLEMS: " + "; ".join(problems)))
            if problems:
                RESULTS.failures.append("lab run %d (%s): %s" % (i + 1, what, "; ".join(problems)))
            deleted = clusters.delete(cluster)
            RESULTS.add("setup.cluster_delete", deleted, "remove a cluster (cluster.yml lab_cluster_state=absent)")
    show("lab.first", "lab.rerun", "modules.first", "modules.rerun", "fair.first", "fair.rerun", "kubectl.first", "kubectl.rerun")
    RESULTS.ratio("lab first run / fair kubectl script first run", "lab.first", "fair.first", "<= 2x", lambda v: v <= 2.0)
    RESULTS.ratio("lab re-run / fair kubectl script re-run", "lab.rerun", "fair.rerun", "<= 1.5x", lambda v: v <= 1.5)
    RESULTS.ratio("lab as modules / lab in the controller, first run", "modules.first", "lab.first")
    RESULTS.ratio("lab as modules / lab in the controller, re-run", "modules.rerun", "lab.rerun")
    RESULTS.ratio("lab first run / kubectl script first run", "lab.first", "kubectl.first", "<= 3x", lambda v: v <= 3.0)
    RESULTS.ratio("lab re-run / kubectl script re-run", "lab.rerun", "kubectl.rerun", "<= 2x", lambda v: v <= 2.0)
    RESULTS.ratio("lab re-run / kubectl script first run", "lab.rerun", "kubectl.first")
    RESULTS.ratio("lab first run / lab re-run", "lab.first", "lab.rerun")
    for key, title in (("first", "the first run"), ("rerun", "the re-run")):
        if profiles[key]:
            agg = aggregate(profiles[key])
            RESULTS.profile["lab_" + key] = agg
            print_profile(title, agg, RESULTS.median("lab.first" if key == "first" else "lab.rerun"))
