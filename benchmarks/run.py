#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark harness of gpushare.k8s (`make bench`).

    benchmarks/run.py [--only lab,scale,check,setup,operator,sharing,intent,dra] [--quick] [--runs N] [--json FILE] [--markdown FILE]

Sections (all but dra by default, in this order):

  check  request check: plugins/module_utils/requests/check_request.py (what bin/check-request.sh runs) on a
         generated 10,000-document manifest, wall time and peak RSS of the child, against a naive
         yaml.safe_load_all checker on the same file.
  lab    `ansible-playbook playbooks/lab.yml`: first run on a fresh cluster and the idempotent
         re-run, against benchmarks/baseline-kubectl.sh (the same steps with kubectl) on its own
         fresh cluster; per-task profile of every playbook run (where the time goes).
  scale  1,000 kwok nodes: one gpushare.k8s.node_resources task (label_selector; parallelism
         swept) against a `kubectl patch --subresource=status` loop, every node verified after
         each write; then 1,000 one-slice Pods created and waited for until all are bound.
  setup  warm `make cluster` from no cluster and on a running one, ansible-playbook start-up
         (trivial playbook, one builtin module, one kubernetes.core module) against the lab;
         and, with --cold-build, the cold build of the binaries from empty Go caches.
  operator  on a GPU Operator stand-in cluster: a node's nvidia.com/device-plugin.config label
         changed back and forth, until its allocatable changes, against the label's API round trip.
  sharing  on two GPU Operator stand-in clusters configured once by playbooks/gpu_sharing.yml
         (the README's inventory, nodes labelled into its pools): the no-op re-run (changed=0)
         against benchmarks/baseline-sharing-kubectl.sh (the same state checked with kubectl, one
         `kubectl get` per kind), and the re-run with both clusters in the inventory against one;
         per-task profile of the one-cluster re-run.
  intent  on a lab cluster with the GPU intent policies (lab.yml --tags step1,intent_admission): 1,000
         server dry-run Pod creates, one at a time, in a namespace without the policies (baseline), then
         where they are bound for a Pod that names its GPU (the policies' matchConditions skip it) and
         for Pods asking by intent (rewritten and validated; each checked rewritten).

  dra    (only with --only dra) 1,000 kwok nodes published as DRA ResourceSlices by one
         gpushare.k8s.dra_resource_slices task (half whole-GPU nodes, half MIG nodes with every
         profile as partitionable devices) and its unchanged re-run; then 1,000 Pods with a claim each
         from a template, allocated by the scheduler (whole GPUs, then MIG 1g.10gb slices): created,
         all bound, rate, every claim read back allocated to a distinct device.

Every figure is the median of several runs with its min-max, and every ratio is taken
against a baseline measured in the same invocation. Each section creates its own kwokctl
clusters (names start with --prefix, default gpushare-bench) and deletes them, also on
failure or Ctrl-C; the shared `gpushare` cluster is never touched. Before each section the
harness waits (up to --quiet-wait seconds) for the 1-minute load average to drop below
--max-load, and prints the load with every sample.

--quick runs each slow figure once, scales to 200 nodes, tries parallelism 32 only and skips
the pure-Python naive checker and the profiles: about 5 minutes on a quiet machine, most of it
the lab playbook's own two runs, and 1.5 more for the sharing section (its two clusters, 3 runs
of each of its fast figures). Its figures are a smoke test, not the record.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the section files beside this one

from harness import (  # noqa: E402
    BenchError, Clusters, DEFAULT_SECTIONS, Env, RESULTS, SECTION, SECTIONS, fmt, machine_info, say, stamp,
    summary, write_markdown,
)
from section_check import section_check  # noqa: E402
from section_lab import section_lab  # noqa: E402
from section_setup import section_setup  # noqa: E402
from section_scale import section_scale  # noqa: E402
from section_dra import section_dra  # noqa: E402
from section_operator import section_operator  # noqa: E402
from section_sharing import section_sharing  # noqa: E402
from section_intent import section_intent  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--only", default=",".join(DEFAULT_SECTIONS),
                        help="comma-separated sections: %s (default: all but dra)" % ",".join(SECTIONS))
    parser.add_argument("--quick", action="store_true", help="one run of each slow figure, 200 nodes, no pure-Python naive check (~6.5 min)")
    parser.add_argument("--runs", type=int, help="runs of each slow figure (default 3; --quick 1)")
    parser.add_argument("--fast-runs", type=int, help="runs of each fast figure (default 5; --quick 3)")
    parser.add_argument("--naive-runs", type=int, help="runs of the pure-Python naive checker (default 3; --quick 0)")
    parser.add_argument("--loop-runs", type=int, help="runs of the kubectl patch loop (default --runs)")
    parser.add_argument("--pod-runs", type=int, help="runs of the Pod scheduling figure (default --runs)")
    parser.add_argument("--nodes", type=int, help="kwok nodes of the scale section (default 1000; --quick 200)")
    parser.add_argument("--pods", type=int, help="one-slice Pods to schedule (default: --nodes)")
    parser.add_argument("--parallelism", help="node_resources parallelism values to try (default 16,32,64; --quick 32)")
    parser.add_argument("--documents", type=int, default=10000, help="documents in the generated manifest (default 10000)")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="skip the profiles (cProfile of the request check, node_resources without Ansible); --quick implies it")
    parser.add_argument("--cold-build", action="store_true",
                        help="setup: really build kwok, etcd and Kubernetes from empty Go caches (about 10 minutes on 2 cores)")
    parser.add_argument("--prefix", default="gpushare-bench", help="name prefix of the clusters the harness creates and deletes")
    parser.add_argument("--max-load", type=float, default=1.5, help="1-minute load average below which a section starts (default 1.5)")
    parser.add_argument("--quiet-wait", type=int, default=300, help="seconds to wait for that load per section (default 300; 0: don't)")
    parser.add_argument("--kubectl", help="kubectl binary (default: the lab cluster's build cache)")
    parser.add_argument("--kwokctl", help="kwokctl binary (default: the lab cluster's build cache)")
    parser.add_argument("--work-dir", help="keep logs, timings and lab roots here (default: a temporary directory, removed)")
    parser.add_argument("--json", help="write every sample, ratio and profile as JSON to this file")
    parser.add_argument("--markdown", help="write the figure and ratio tables as Markdown to this file")
    args = parser.parse_args(argv)
    quick = args.quick
    args.runs = args.runs or (1 if quick else 3)
    args.fast_runs = args.fast_runs or (3 if quick else 5)
    args.naive_runs = args.naive_runs if args.naive_runs is not None else (0 if quick else 3)
    args.loop_runs = args.loop_runs if args.loop_runs is not None else args.runs
    args.pod_runs = args.pod_runs if args.pod_runs is not None else args.runs
    args.nodes = args.nodes or (200 if quick else 1000)
    args.pods = args.pods or args.nodes
    args.parallelism = [int(p) for p in (args.parallelism or ("32" if quick else "16,32,64")).split(",")]
    args.profile = args.profile and not quick
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in args.only if s not in SECTIONS]
    if unknown:
        parser.error("unknown section(s) %s; choose from %s" % (", ".join(unknown), ", ".join(SECTIONS)))
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.work_dir:
        work = Path(args.work_dir).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="gpushare-bench-"))
        atexit.register(lambda: subprocess.run(["rm", "-rf", str(work)], check=False))
    env = Env(args, work)
    for tool in (env.kubectl, env.kwokctl):
        if not os.access(tool, os.X_OK):
            raise SystemExit("run.py: %s not found; run `make cluster` first (it builds the binaries), or pass --kubectl/--kwokctl" % tool)
    clusters = Clusters(env)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    RESULTS.machine.update(machine_info(env))
    m = RESULTS.machine
    say("gpushare.k8s benchmarks: %s%s; sections %s; work dir %s" % (m["date"], " (--quick)" if args.quick else "", ",".join(args.only), work))
    say("machine: %s CPUs, %s, %s GiB; load %s; other kwok clusters: %s"
        % (m["nproc"], m.get("cpu"), m.get("memory_gib"), m["load_before"], ", ".join(m["other_kwok_clusters"]) or "none"))
    started = time.monotonic()
    sections = {"check": lambda: section_check(env, args), "lab": lambda: section_lab(env, args, clusters),
                "setup": lambda: section_setup(env, args, clusters), "scale": lambda: section_scale(env, args, clusters),
                "operator": lambda: section_operator(env, args, clusters), "sharing": lambda: section_sharing(env, args, clusters),
                "intent": lambda: section_intent(env, args, clusters),
                "dra": lambda: section_dra(env, args, clusters)}
    try:
        for name in SECTIONS:
            if name in args.only:
                t0 = time.monotonic()
                SECTION["name"] = name
                try:
                    sections[name]()
                except Exception as exc:  # one broken section must not lose the others' figures
                    detail = str(exc) if isinstance(exc, BenchError) else traceback.format_exc()
                    RESULTS.failures.append("%s: %s" % (name, str(exc) or type(exc).__name__))
                    say("%s %s FAILED: %s" % (stamp(), name, detail))
                    clusters.cleanup()
                RESULTS.machine.setdefault("section_seconds", {})[name] = round(time.monotonic() - t0)
                peak = RESULTS.machine.get("load_max", {}).get(name, 0.0)
                if peak >= args.max_load:
                    RESULTS.notes.append("%s: the 1-minute load average reached %.2f during the section (others' work, or the"
                                         " section's own clusters): its figures are slower than on a quiet machine" % (name, peak))
                SECTION["name"] = None
                say("%s %s section took %s" % (stamp(), name, fmt(time.monotonic() - t0, "s")))
    except KeyboardInterrupt:
        say("\ninterrupted; removing the benchmark clusters")
        clusters.cleanup()
        return 130
    finally:
        clusters.cleanup()
    RESULTS.machine["total_seconds"] = round(time.monotonic() - started)
    summary(args)
    say("total %s" % fmt(time.monotonic() - started, "s"))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": RESULTS.machine, "figures": {k: f.as_dict() for k, f in RESULTS.figures.items()},
                                               "ratios": RESULTS.ratios, "profile": RESULTS.profile, "notes": RESULTS.notes,
                                               "failures": RESULTS.failures}, indent=1, default=str))
    if args.markdown:
        write_markdown(args.markdown)
    return 1 if RESULTS.failures else 0


if __name__ == "__main__":
    sys.exit(main())
