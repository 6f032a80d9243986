#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Section sharing of benchmarks/run.py: the configure-only playbook's no-op re-run against a kubectl check, one cluster and two."""

from __future__ import annotations

from pathlib import Path
import re
import statistics
import time

import yaml

from harness import (
    BENCH, BenchError, RESULTS, ROOT, TIMINGS_ENV, _tail, aggregate, fmt, load_timings, say, short_action, show, stamp, wait_quiet,
)


POOL_LABEL = "example.com/gpu-pool"


POOLS = {"lab-node-1": "inference", "lab-node-2": "training"}  # lab-node-0 stays in no pool (the playbook warns about it)


RECAP = re.compile(r"^(\S+)\s*: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def readme_inventory():
    """The vars of the README's configure-only inventory (section "On a real GPU cluster", the block naming gpu-cluster.yml)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## On a real GPU cluster\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(# gpu-cluster\.yml: .*?)```\n", section, re.S)
    if len(blocks) != 1:
        raise BenchError("README.md's section 'On a real GPU cluster' has no single yaml block starting '# gpu-cluster.yml: '")
    return yaml.safe_load(blocks[0])


def write_inventory(path, clusters, names):
    """The README's inventory with one host per cluster (its own gpushare_kubeconfig), the README's host vars for each."""
    inventory = readme_inventory()
    host_vars = dict(inventory["all"]["hosts"]["localhost"])
    inventory["all"]["hosts"] = {name: dict(host_vars, gpushare_kubeconfig=str(clusters.kubeconfig(name))) for name in names}
    Path(path).write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


def recaps(log):
    """{host: (ok, changed, unreachable, failed)} of the PLAY RECAP."""
    return {m.group(1): tuple(int(v) for v in m.groups()[1:]) for m in RECAP.finditer(Path(log).read_text(errors="replace"))}


def run_sharing(env, inventory, hosts, tag, timings=None):
    """ansible-playbook -i inventory playbooks/gpu_sharing.yml; returns (seconds, {host: recap}, profile or None)."""
    extra = dict(TIMINGS_ENV, BENCH_TIMINGS_FILE=str(timings)) if timings else None
    spawn = time.time()
    seconds, rc, log = env.run(["ansible-playbook", "-i", inventory, "playbooks/gpu_sharing.yml"], tag, env=extra, check=False)
    finish = time.time()
    counts = recaps(log)
    if rc != 0 or sorted(counts) != sorted(hosts) or any(c[2] or c[3] for c in counts.values()):
        raise BenchError("gpu_sharing.yml %s failed (exit %d, recap %s); see %s:\n%s" % (tag, rc, counts, log, _tail(log, 25)))
    profile = load_timings(timings, spawn, finish) if timings and Path(timings).exists() else None
    return seconds, counts, profile


def create_standin(env, clusters, name):
    """A lab cluster running the GPU Operator stand-in, registered for deletion before it exists."""
    if not name.startswith(env.args.prefix):
        raise BenchError("refusing to manage cluster %s: not a benchmark cluster" % name)
    if clusters.exists(name):
        clusters.delete(name)
    clusters.live.append(name)
    seconds, _rc, _log = env.run(["make", "-C", ROOT, "--no-print-directory", "cluster",
                                  "PLAYBOOK=ansible-playbook -e gpushare_cluster_name=%s -e gpushare_gpu_operator_standin=true" % name],
                                 "make-cluster-" + name)
    for node, pool in POOLS.items():
        env.kube(clusters.kubeconfig(name), "label", "node", node, "%s=%s" % (POOL_LABEL, pool), "--overwrite")
    return seconds


def print_sharing_profile(agg, wall):
    say("  profile of the one-cluster no-op re-run (median of %d runs; wall %s):" % (agg["runs"], fmt(wall, "s")))
    say("    start-up until the first task %s, %d tasks %s (%.0f ms each), after the last task %s"
        % (fmt(agg["startup"], "s"), agg["task_count"], fmt(agg["tasks_total"], "s"), 1000 * agg["tasks_total"] / max(agg["task_count"], 1),
           fmt(agg["shutdown"], "s")))
    say("    per role:")
    for role, seconds in agg["roles"]:
        say("      %-34s %8s  %4.0f%%" % (role, fmt(seconds, "s"), 100 * seconds / max(agg["tasks_total"], 1e-9)))
    say("    per action (module runs = tasks + loop items that started a module):")
    for action, seconds, runs in agg["actions"]:
        per = (" %5.2f s/run" % (seconds / runs)) if runs else ""
        share = 100 * seconds / max(agg["tasks_total"], 1e-9)
        say("      %-34s %8s  %4.0f%%  runs %4.1f%s" % (short_action(action), fmt(seconds, "s"), share, runs, per))
    say("    slowest tasks:")
    for task, seconds in agg["tasks"][:10]:
        say("      %8s  %s" % (fmt(seconds, "s"), task))


def section_sharing(env, args, clusters):
    """The configure-only playbook's no-op re-run against benchmarks/baseline-sharing-kubectl.sh; two clusters against one."""
    say("\n== sharing: playbooks/gpu_sharing.yml no-op re-run against benchmarks/baseline-sharing-kubectl.sh; two clusters against one")
    wait_quiet(args, "sharing")
    one_name, two_name = "%s-sharing-1" % args.prefix, "%s-sharing-2" % args.prefix
    for name in (one_name, two_name):  # both run through every sample: the same background load for each figure
        say("%s %s: operator stand-in cluster (new) %s, nodes labelled into pools" % (stamp(), name, fmt(create_standin(env, clusters, name), "s")))
    one = write_inventory(env.work / "sharing-one.yml", clusters, [one_name])
    two = write_inventory(env.work / "sharing-two.yml", clusters, [one_name, two_name])

    first, counts, _prof = run_sharing(env, two, [one_name, two_name], "sharing-first")
    if not all(c[1] for c in counts.values()):
        raise BenchError("the first run on fresh clusters changed nothing somewhere: %s" % {h: c[1] for h, c in counts.items()})
    RESULTS.add("sharing.first_two", first, "gpu_sharing.yml first run, two clusters (configures both)")
    say("%s first run, two clusters: %s, changed %s" % (stamp(), fmt(first, "s"), {h: c[1] for h, c in counts.items()}))
    script = ["bash", BENCH / "baseline-sharing-kubectl.sh"]
    for name in (one_name, two_name):  # the script agrees that the playbook established the state it checks
        env.run(script + [clusters.kubeconfig(name)], "sharing-script-check-" + name, env={"KUBECTL": env.kubectl})

    profiles = []
    runs = args.fast_runs
    for i in range(runs):
        order = ("one", "script", "two", "trivial") if i % 2 == 0 else ("trivial", "two", "script", "one")
        line = []
        for what in order:
            if what == "one":
                seconds, counts, prof = run_sharing(env, one, [one_name], "sharing-rerun-one-%d" % (i + 1),
                                                    timings=env.work / ("timings-sharing-%d.json" % (i + 1)))
                RESULTS.add("sharing.rerun_one", seconds, "gpu_sharing.yml no-op re-run, one cluster (changed=0)")
                if prof:
                    profiles.append(prof)
            elif what == "two":
                seconds, counts, _prof = run_sharing(env, two, [one_name, two_name], "sharing-rerun-two-%d" % (i + 1))
                RESULTS.add("sharing.rerun_two", seconds, "gpu_sharing.yml no-op re-run, two clusters (changed=0)")
            elif what == "script":
                seconds, _rc, _log = env.run(script + [clusters.kubeconfig(one_name)], "sharing-script-%d" % (i + 1), env={"KUBECTL": env.kubectl})
                RESULTS.add("sharing.script", seconds, "kubectl check script (baseline-sharing-kubectl.sh), one cluster")
                counts = None
            else:
                seconds, _rc, _log = env.run(["ansible-playbook", BENCH / "playbooks" / "trivial.yml"], "sharing-trivial-%d" % (i + 1))
                RESULTS.add("sharing.trivial", seconds, "ansible-playbook, trivial playbook (1 debug task)")
                counts = None
            if counts is not None:
                changed = {h: c[1] for h, c in counts.items() if c[1]}
                if changed:
                    raise BenchError("the re-run (%s) changed something: %s" % (what, changed))
            line.append("%s %s" % (what, fmt(seconds, "s")))
        say("%s run %d/%d  %s" % (stamp(), i + 1, runs, ", ".join(line)))

    show("sharing.first_two", "sharing.rerun_one", "sharing.script", "sharing.rerun_two", "sharing.trivial")
    RESULTS.ratio("gpu_sharing.yml no-op re-run / kubectl check script", "sharing.rerun_one", "sharing.script",
                  "<= 1x (not slower)", lambda v: v <= 1.0)
    RESULTS.ratio("gpu_sharing.yml no-op re-run, two clusters / one cluster", "sharing.rerun_two", "sharing.rerun_one")
    RESULTS.ratio("gpu_sharing.yml no-op re-run / trivial playbook", "sharing.rerun_one", "sharing.trivial")
    if profiles:
        agg = aggregate(profiles)
        agg["task_count"] = round(statistics.median(len(p["tasks"]) for p in profiles))
        RESULTS.profile["sharing_rerun"] = agg
        print_sharing_profile(agg, RESULTS.median("sharing.rerun_one"))
    for name in (two_name, one_name):
        clusters.delete(name)
