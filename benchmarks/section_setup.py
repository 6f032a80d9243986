#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Section setup of benchmarks/run.py: make cluster, ansible-playbook start-up, the cold build."""

from __future__ import annotations

from pathlib import Path
import os
import shutil
import subprocess

from harness import BENCH, BUILD_SCRIPT, PYTHON, RESULTS, aggregate, fmt, say, show, stamp, wait_quiet


COMPONENTS = ("kwok", "etcd", "kubernetes")


def size_mb(path):
    path = Path(path)
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6 if path.exists() else 0.0


def _writable(path):
    """Go's module cache is read-only; make it removable."""
    for dirpath, dirnames, _files in os.walk(path):
        os.chmod(dirpath, 0o755)
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)


def cold_build(env):
    """Build each component with the role's own script, from empty Go build and module caches
    (modules come from the module proxy again), into the work directory; then remove it all."""
    cold = env.work / "cold-build"
    caches = {"GOCACHE": str(cold / "gocache"), "GOMODCACHE": str(cold / "gomodcache")}
    try:
        for component in COMPONENTS:
            version = env.versions["lab_cluster_%s_version" % component]
            dest = cold / "bin" / ("%s-%s" % (component, version))
            say("%s cold build of %s %s (empty GOCACHE and GOMODCACHE) ..." % (stamp(), component, version))
            seconds, _rc, _log = env.run(["bash", BUILD_SCRIPT, component, version, dest], "cold-build-" + component, env=caches)
            RESULTS.add("setup.cold_build_" + component, seconds, "cold build of %s %s (empty Go caches)" % (component, version))
            RESULTS.add("setup.cold_build_%s_mb" % component, size_mb(dest), "cold build of %s: binaries" % component, unit="MB")
            say("%s   %s %s, %s" % (stamp(), component, fmt(seconds, "s"), fmt(size_mb(dest), "MB")))
        total = sum(RESULTS.median("setup.cold_build_" + c) for c in COMPONENTS)
        RESULTS.machine["cold_build"] = {"total_seconds": round(total), "measured_now": True,
                                         "mb": round(sum(size_mb(cold / "bin" / d) for d in os.listdir(cold / "bin")))}
        say("  cold build, all three components: %dm%02ds" % (total // 60, total % 60))
    finally:
        if cold.exists():
            _writable(cold)
            shutil.rmtree(cold, ignore_errors=True)


def section_setup(env, args, clusters):
    built = "measured" if args.cold_build else "last figures; --cold-build measures it"
    say("\n== setup: cold build (%s), warm make cluster, ansible-playbook start-up" % built)
    wait_quiet(args, "setup")
    if args.cold_build:
        cold_build(env)
    else:
        sizes = {component: size_mb(env.cache / ("%s-%s" % (component, env.versions.get("lab_cluster_%s_version" % component, ""))))
                 for component in COMPONENTS}
        RESULTS.machine["cold_build"] = {"measured_now": False, "cache_mb_now": sizes}
        say("  cold build: not measured (--cold-build measures it; the last figures are in BENCHMARKS.md);"
            " binaries in the cache now: %s" % (", ".join("%s %.0f MB" % kv for kv in sizes.items() if kv[1]) or "none"))
    cluster = "%s-setup" % args.prefix
    have = RESULTS.figures["setup.make_cluster_new"].samples if "setup.make_cluster_new" in RESULTS.figures else []
    need = max(0, args.runs - len(have))
    for n in range(need):
        created = clusters.create(cluster)
        reuse, _rc, _log = env.run(clusters.make_cluster(cluster), "make-cluster-reuse")
        RESULTS.add("setup.make_cluster_reuse", reuse, "warm `make cluster`, cluster running (changed=0)")
        say("%s make cluster: new %s, running %s" % (stamp(), fmt(created, "s"), fmt(reuse, "s")))
        if n < need - 1:
            RESULTS.add("setup.cluster_delete", clusters.delete(cluster), "remove a cluster (cluster.yml lab_cluster_state=absent)")
    if need:
        kubeconfig = clusters.kubeconfig(cluster)
    else:
        # The lab section measured `make cluster` already; the k8s_info probe only reads the
        # default Namespace, from the shared lab cluster (`make bench` depends on `make cluster`).
        kubeconfig = clusters.kubeconfig("gpushare")
        if subprocess.run([env.kubectl, "--kubeconfig", kubeconfig, "get", "--raw", "/readyz"], capture_output=True,
                          env=env.env, check=False).returncode != 0:
            clusters.create(cluster)
            kubeconfig = clusters.kubeconfig(cluster)
    probes = [
        ("setup.python", "python -c pass (interpreter start-up)", [PYTHON, "-c", "pass"]),
        ("setup.version", "ansible-playbook --version (imports)", ["ansible-playbook", "--version"]),
        ("setup.trivial", "ansible-playbook, trivial playbook (1 debug task)", ["ansible-playbook", BENCH / "playbooks" / "trivial.yml"]),
        ("setup.stat", "ansible-playbook, 1 ansible.builtin.stat task", ["ansible-playbook", BENCH / "playbooks" / "file.yml"]),
        ("setup.k8s_info", "ansible-playbook, 1 kubernetes.core.k8s_info task",
         ["ansible-playbook", BENCH / "playbooks" / "k8s_info.yml", "-e", "bench_kubeconfig=%s" % kubeconfig]),
    ]
    for r in range(args.fast_runs):
        for key, label, cmd in probes:
            seconds, _rc, _log = env.run(cmd, key.split(".")[1])
            RESULTS.add(key, seconds, label)
    if cluster in clusters.live:
        RESULTS.add("setup.cluster_delete", clusters.delete(cluster), "remove a cluster (cluster.yml lab_cluster_state=absent)")
    show(*(("setup.make_cluster_new", "setup.make_cluster_reuse", "setup.cluster_delete") + tuple(p[0] for p in probes)))
    if clusters.profiles:
        agg = aggregate(clusters.profiles)
        RESULTS.profile["make_cluster"] = agg
        say("  profile of `make cluster` from no cluster (median of %d runs): start-up until the first task %s, tasks %s; slowest tasks:"
            % (agg["runs"], fmt(agg["startup"], "s"), fmt(agg["tasks_total"], "s")))
        for task, seconds in agg["tasks"][:6]:
            say("      %8s  %s" % (fmt(seconds, "s"), task))
    new = RESULTS.median("setup.make_cluster_new")
    RESULTS.ratios.append({"label": "warm make cluster from no cluster <= 30 s", "value": new, "target": "<= 30 s", "met": new <= 30, "unit": "s"})
    say("  target  warm make cluster from no cluster <= 30 s: %s (%s)" % ("met" if new <= 30 else "MISSED", fmt(new, "s")))
    RESULTS.ratio("1-stat-task playbook / trivial playbook", "setup.stat", "setup.trivial")
    RESULTS.ratio("1-k8s_info-task playbook / trivial playbook", "setup.k8s_info", "setup.trivial")
    RESULTS.ratio("lab first run / trivial playbook", "lab.first", "setup.trivial")
    RESULTS.ratio("lab re-run / trivial playbook", "lab.rerun", "setup.trivial")
    stat_cost = RESULTS.median("setup.stat") - RESULTS.median("setup.trivial")
    k8s_cost = RESULTS.median("setup.k8s_info") - RESULTS.median("setup.trivial")
    RESULTS.machine["per_task_cost"] = {"builtin_module": stat_cost, "kubernetes_core_module": k8s_cost}
    say("  one builtin module task costs %s over the trivial playbook, one kubernetes.core task %s"
        % (fmt(stat_cost, "s"), fmt(k8s_cost, "s")))
