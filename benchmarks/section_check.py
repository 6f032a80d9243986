#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Section check of benchmarks/run.py: the request check on a generated manifest against a naive checker."""

from __future__ import annotations

from pathlib import Path
import re
import shutil
import subprocess

from harness import BENCH, PYTHON, RESULTS, ROOT, fmt, say, show, stamp, wait_quiet


def section_check(env, args):
    say("\n== check: request check on a generated %d-document manifest" % args.documents)
    wait_quiet(args, "check")
    manifest = env.work / ("manifest-%d.yaml" % args.documents)
    small = env.work / "manifest-1000.yaml"
    subprocess.run([PYTHON, BENCH / "gen_manifest.py", manifest, "--documents", str(args.documents)], check=True)
    subprocess.run([PYTHON, BENCH / "gen_manifest.py", small, "--documents", "1000"], check=True)
    text = manifest.read_text()
    containers = len(re.findall(r"^\s*- name: ", text, re.M))
    RESULTS.machine["manifest"] = {"documents": args.documents, "bytes": len(text), "lines": text.count("\n"), "containers": containers}
    say("  manifest: %d documents, %.1f MB, %d lines, %d containers" % (args.documents, len(text) / 1e6, text.count("\n"), containers))

    # the four files side by side, as bin/check-request.sh hands them to Python
    for name in ("k8s/quantity.py", "k8s/manifest_yaml.py", "requests/gpu_requests.py", "requests/check_request.py"):
        shutil.copy(ROOT / "plugins" / "module_utils" / name, env.work)
    checker = env.work / "check_request.py"
    candidates = [
        ("ours", "check_request.py (check-request.sh)", [PYTHON, checker, manifest], args.fast_runs),
        ("naive_c", "naive safe_load_all with CSafeLoader (libyaml)", [PYTHON, BENCH / "naive_check.py", manifest, "--libyaml"],
         1 if args.quick else args.fast_runs),
    ]
    if args.naive_runs:
        candidates.append(("naive", "naive yaml.safe_load_all (pure Python)", [PYTHON, BENCH / "naive_check.py", manifest], args.naive_runs))
    else:
        say("  naive pure-Python yaml.safe_load_all: skipped (--naive-runs 0 / --quick)")
    floors = [("floor", "python -c 'import yaml' (start-up floor)", [PYTHON, "-c", "import yaml"])]
    if args.profile:
        floors += [
            ("events", "libyaml event scan of the file, nothing built (PyYAML floor)",
             [PYTHON, "-c", "import sys, yaml.cyaml\np = yaml.cyaml.CParser(open(sys.argv[1], 'rb').read())\n"
                            "while p.check_event():\n    p.get_event()", manifest]),
            ("compose", "yaml.compose_all with CSafeLoader, nothing checked",
             [PYTHON, "-c", "import sys, yaml\nfor _d in yaml.compose_all(open(sys.argv[1], 'rb').read(), Loader=yaml.CSafeLoader):\n"
                            "    pass", manifest]),
        ]
    outputs = {}
    rounds = max(c[3] for c in candidates)
    for r in range(rounds):
        for key, label, cmd, runs in candidates:
            if r >= runs:
                continue
            seconds, rss, rc, out = env.rusage(cmd, "check-" + key)
            outputs.setdefault(key, set()).add((rc, out))
            RESULTS.add("check.%s.time" % key, seconds, "check %s: wall" % label)
            RESULTS.add("check.%s.rss" % key, rss, "check %s: peak RSS" % label, unit="MB")
            say("%s %-48s %s, peak RSS %s, exit %d" % (stamp(), label, fmt(seconds, "s"), fmt(rss, "MB"), rc))
        if r < args.fast_runs:
            for key, label, cmd in floors:
                seconds, rss, _rc, _out = env.rusage(cmd, "check-" + key)
                RESULTS.add("check.%s.time" % key, seconds, label)
                RESULTS.add("check.%s.rss" % key, rss, label.split(" (", maxsplit=1)[0] + ": peak RSS", unit="MB")
    for r in range(args.fast_runs):
        seconds, rss, rc, _out = env.rusage([PYTHON, checker, small], "check-ours-1000")
        RESULTS.add("check.ours1k.time", seconds, "check check_request.py on 1,000 documents: wall")
        RESULTS.add("check.ours1k.rss", rss, "check check_request.py on 1,000 documents: peak RSS", unit="MB")

    reference = next(iter(outputs["ours"]))
    offenders = reference[1].count("OVER=")
    same = all(o == {reference} for o in outputs.values())
    say("  verification: exit %d, %d OVER lines; every checker printed the same output in every run: %s"
        % (reference[0], offenders, "yes" if same else "NO"))
    if not same:
        RESULTS.failures.append("check: the checkers disagree on the manifest")
    RESULTS.machine["manifest"]["offenders"] = offenders
    show("check.ours.time", "check.ours.rss", "check.naive_c.time", "check.naive_c.rss", "check.naive.time", "check.naive.rss",
         "check.ours1k.time", "check.ours1k.rss", "check.floor.time", "check.floor.rss", "check.events.time", "check.events.rss",
         "check.compose.time", "check.compose.rss")
    RESULTS.ratio("check: naive pure-Python / ours (time)", "check.naive.time", "check.ours.time", ">1 (faster than naive)", lambda v: v > 1)
    RESULTS.ratio("check: naive pure-Python / ours (peak RSS)", "check.naive.rss", "check.ours.rss")
    RESULTS.ratio("check: naive libyaml / ours (time)", "check.naive_c.time", "check.ours.time")
    RESULTS.ratio("check: naive libyaml / ours (peak RSS)", "check.naive_c.rss", "check.ours.rss")
    RESULTS.ratio("check: ours 10,000 / 1,000 documents (peak RSS)", "check.ours.rss", "check.ours1k.rss")
    RESULTS.ratio("check: ours / compose_all alone (time)", "check.ours.time", "check.compose.time")
    RESULTS.ratio("check: ours / libyaml event scan alone (time)", "check.ours.time", "check.events.time")
    met = RESULTS.median("check.ours.time") <= 2.0
    RESULTS.ratios.append({"label": "check: ours on %d documents <= 2 s" % args.documents, "value": RESULTS.median("check.ours.time"),
                           "target": "<= 2 s", "met": met, "unit": "s"})
    say("  target  check_request.py <= 2 s: %s (%s)" % ("met" if met else "MISSED", fmt(RESULTS.median("check.ours.time"), "s")))

    if args.profile:
        proc = subprocess.run([PYTHON, "-m", "cProfile", "-s", "tottime", checker, manifest], capture_output=True, text=True,
                              env=env.env, check=False)
        rows = [line for line in proc.stdout.splitlines() if re.match(r"\s*\d+(/\d+)?\s+\d", line)][:8]
        total = re.search(r"in ([\d.]+) seconds", proc.stdout)
        RESULTS.profile["check"] = {"total": float(total.group(1)) if total else None, "rows": rows}
        say("  cProfile of check_request.py (one run, profiler overhead included; %s s):" % (total.group(1) if total else "?"))
        say("       ncalls  tottime  percall  cumtime  percall filename:lineno(function)")
        for row in rows:
            say("    " + row.replace(str(ROOT) + "/", "").replace(str(Path(PYTHON).parent.parent), ".venv"))
