#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark harness of gpushare.k8s (`make bench`).

    benchmarks/run.py [--only lab,scale,check,setup,operator,dra] [--quick] [--runs N] [--json FILE] [--markdown FILE]

Sections (all but dra by default, in this order):

  check  request check: plugins/module_utils/check_request.py (what bin/check-request.sh runs) on a
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
the lab playbook's own two runs. Its figures are a smoke test, not the record.
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
VENV_BIN = ROOT / ".venv" / "bin"
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable
SECTIONS = ("check", "lab", "scale", "setup", "operator", "dra")
DEFAULT_SECTIONS = ("check", "lab", "scale", "setup", "operator")  # dra runs when asked (--only dra)

BUILD_SCRIPT = ROOT / "roles" / "lab_cluster" / "files" / "build-binaries.sh"

SCALE_SELECTOR = "kwok.x-k8s.io/kwokctl-scale=node"  # the label kwokctl scale puts on its nodes
RESOURCE = "nvidia.com/gpu"
CONTROLLER_ACTIONS = {
    # run inside ansible-playbook itself: no module process is started for them
    "set_fact", "assert", "debug", "include_role", "include_tasks", "import_tasks", "include_vars",
    "meta", "validate_argument_spec", "fail", "set_stats",
}
LAB_OUTPUTS = {
    "out/isolation.txt": "TIMESLICING_MEMORY_ISOLATION=no\nMPS_MEMORY_ISOLATION=partial\nMIG_MEMORY_ISOLATION=yes\n"
    "TIMESLICING_FAULT_ISOLATION=no\nMIG_FAULT_ISOLATION=yes\n",
    "out/placement.txt": "prod-inference=lab-node-2\nnotebook=lab-node-1\nbatch-train=lab-node-0\n",
}
TIMINGS_ENV = {"ANSIBLE_CALLBACK_PLUGINS": str(BENCH / "callback_plugins"), "ANSIBLE_CALLBACKS_ENABLED": "bench_timings"}
LAB_MANIFESTS = ("device-plugin-configs.yaml", "mig-job.yaml", "gpu-quota.yaml", "team-over.yaml", "placement.yaml")


# ----------------------------------------------------------------------------- figures


def fmt(value, unit):
    if value is None:
        return "-"
    if unit == "s":
        return "%.2f s" % value if value < 100 else "%.0f s" % value
    if unit == "MB":
        return "%.1f MB" % value
    if unit == "x":
        return "%.2fx" % value if value < 100 else "%.0fx" % value
    if unit == "/s":
        return "%.0f/s" % value
    return "%g %s" % (value, unit)


class Figure:
    def __init__(self, key, label, unit="s", note=""):
        self.key, self.label, self.unit, self.note = key, label, unit, note
        self.samples = []

    @property
    def median(self):
        return statistics.median(self.samples) if self.samples else None

    def spread(self):
        if not self.samples:
            return "-"
        if len(self.samples) == 1:
            return "(1 run)"
        return "%s-%s" % (fmt(min(self.samples), self.unit).split()[0], fmt(max(self.samples), self.unit))

    def line(self):
        return "%-58s %10s  %-18s n=%d%s" % (
            self.label, fmt(self.median, self.unit), self.spread(), len(self.samples), ("  " + self.note) if self.note else "")

    def as_dict(self):
        return {"label": self.label, "unit": self.unit, "median": self.median, "min": min(self.samples, default=None),
                "max": max(self.samples, default=None), "n": len(self.samples), "samples": self.samples, "note": self.note}


class Results:
    def __init__(self):
        self.figures = {}
        self.ratios = []  # (label, value, numerator key, denominator key, target text, met or None)
        self.notes = []
        self.profile = {}
        self.failures = []
        self.machine = {}

    def fig(self, key, label=None, unit="s", note=""):
        if key not in self.figures:
            self.figures[key] = Figure(key, label or key, unit, note)
        return self.figures[key]

    def add(self, key, value, label=None, unit="s", note=""):
        figure = self.fig(key, label, unit, note)
        figure.samples.append(value)
        return figure

    def median(self, key):
        figure = self.figures.get(key)
        return figure.median if figure else None

    def ratio(self, label, num, den, target=None, check=None, invert=False):
        """Record median(num) / median(den) (or den / num with invert); check(value) -> met."""
        a, b = self.median(num), self.median(den)
        if a is None or b is None or (b if not invert else a) == 0:
            return None
        value = b / a if invert else a / b
        met = check(value) if check else None
        self.ratios.append({"label": label, "value": value, "num": num, "den": den, "target": target, "met": met, "invert": invert})
        say("  ratio  %-52s %8s%s" % (label, fmt(value, "x"), ("   target %s: %s" % (target, "met" if met else "MISSED")) if target else ""))
        return value


RESULTS = Results()
LOG_START = time.monotonic()


def show(*keys):
    for key in keys:
        if key in RESULTS.figures:
            say("  " + RESULTS.figures[key].line())


def say(message=""):
    print(message, flush=True)


SECTION = {"name": None}


def stamp():
    load = os.getloadavg()[0]
    if SECTION["name"]:
        peaks = RESULTS.machine.setdefault("load_max", {})
        peaks[SECTION["name"]] = round(max(load, peaks.get(SECTION["name"], 0.0)), 2)
    return "[%5.0fs load %.2f]" % (time.monotonic() - LOG_START, load)


# ----------------------------------------------------------------------------- processes


class Env:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        env = dict(os.environ)
        env["PATH"] = "%s:%s" % (VENV_BIN, env.get("PATH", ""))
        env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
        env.setdefault("ANSIBLE_HOME", str(Path.home() / ".ansible"))
        env["KWOK_WORKDIR"] = str(Path.home() / ".kwok")
        env.pop("KUBECONFIG", None)  # every tool gets its cluster's kubeconfig explicitly
        self.env = env
        defaults = _role_defaults()
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpushare"
        self.kubectl = args.kubectl or str(cache / ("kubernetes-" + defaults["lab_cluster_kubernetes_version"]) / "kubectl")
        self.kwokctl = args.kwokctl or str(cache / ("kwok-" + defaults["lab_cluster_kwok_version"]) / "kwokctl")
        self.cache = cache
        self.versions = {k: defaults[k] for k in defaults if k.endswith("_version")}
        self.counter = 0

    def log(self, tag):
        self.counter += 1
        return self.work / ("%03d-%s.log" % (self.counter, tag))

    def run(self, cmd, tag, env=None, check=True, cwd=ROOT, stdin=subprocess.DEVNULL):
        """Run cmd with stdout+stderr to a log file; return (seconds, returncode, log path)."""
        log = self.log(tag)
        merged = dict(self.env, **(env or {}))
        with open(log, "w") as out:
            out.write("$ %s\n" % " ".join(shlex.quote(str(c)) for c in cmd))
            out.flush()
            start = time.perf_counter()
            proc = subprocess.run([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT, env=merged, cwd=cwd, stdin=stdin, check=False)
            seconds = time.perf_counter() - start
        if check and proc.returncode != 0:
            raise BenchError("%s failed (exit %d); see %s:\n%s" % (tag, proc.returncode, log, _tail(log)))
        return seconds, proc.returncode, log

    def rusage(self, cmd, tag):
        """Run cmd; return (seconds, peak RSS in MB of that program, returncode, output).

        The RSS comes from GNU time (/usr/bin/time -f %M), which forks from a tiny process: a
        child forked from this harness would count the harness's own pages until exec.
        """
        log = self.log(tag)
        measure = self.work / "rusage.txt"
        gnu_time = Path("/usr/bin/time")
        argv = [str(c) for c in cmd]
        if gnu_time.exists():
            argv = [str(gnu_time), "-q", "-f", "%M", "-o", str(measure)] + argv
        with open(log, "w+") as out:
            start = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT)
            _pid, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - start
            out.seek(0)
            text = out.read()
        rss_kb = usage.ru_maxrss
        if gnu_time.exists():
            rss_kb = int(measure.read_text().split()[-1])
        return seconds, rss_kb / 1024.0, os.waitstatus_to_exitcode(status), text

    def kube(self, kubeconfig, *args, check=True):
        proc = subprocess.run([self.kubectl, "--kubeconfig", str(kubeconfig)] + [str(a) for a in args],
                              capture_output=True, text=True, env=self.env, check=False)
        if check and proc.returncode != 0:
            raise BenchError("kubectl %s: %s" % (" ".join(map(str, args)), proc.stderr.strip()))
        return proc.stdout


class BenchError(Exception):
    pass


def create_pods_until_bound(core, namespace, bodies, timeout, interval):
    """Create ``bodies`` (16 at a time) and wait until the scheduler has bound every Pod of ``namespace``.

    Returns the seconds until all were created and until all were bound, both from the start.
    """
    start = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda body: core.create_namespaced_pod(namespace, body, _preload_content=False).data, bodies))
    created = time.perf_counter() - start
    while True:
        pending = json.loads(core.list_namespaced_pod(namespace, field_selector="spec.nodeName=", _preload_content=False).data)["items"]
        if not pending:
            return created, time.perf_counter() - start
        if time.perf_counter() - start > timeout:
            raise BenchError("%d Pods still unbound after %d s" % (len(pending), timeout))
        time.sleep(interval)


def _tail(path, lines=15):
    try:
        return "".join(Path(path).read_text(errors="replace").splitlines(True)[-lines:])
    except OSError:
        return ""


def _role_defaults():
    import yaml  # the venv has it; only the version pins are read

    return yaml.safe_load((ROOT / "roles" / "lab_cluster" / "defaults" / "main.yml").read_text())


def recap(log):
    """(ok, changed, failed) of the last PLAY RECAP line for localhost."""
    found = re.findall(r"ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", Path(log).read_text(errors="replace"))
    if not found:
        return None
    ok, changed, _unreachable, failed = map(int, found[-1])
    return ok, changed, failed


# ----------------------------------------------------------------------------- clusters


class Clusters:
    """kwokctl clusters this harness created; deleted at exit whatever happens."""

    def __init__(self, env):
        self.env = env
        self.live = []
        self.profiles = []  # per-task timings of each `make cluster` from nothing
        atexit.register(self.cleanup)

    def kubeconfig(self, name):
        return Path.home() / ".kwok" / "clusters" / name / "kubeconfig.yaml"

    def exists(self, name):
        out = subprocess.run([self.env.kwokctl, "get", "clusters"], capture_output=True, text=True, env=self.env.env, check=False).stdout
        return name in out.split()

    def create(self, name):
        """`make cluster` for cluster `name` from nothing; returns seconds (a setup sample)."""
        if not name.startswith(self.env.args.prefix):
            raise BenchError("refusing to manage cluster %s: not a benchmark cluster" % name)
        if self.exists(name):
            self.delete(name)
        self.live.append(name)
        timings = self.env.work / ("timings-make-cluster-%d.json" % self.env.counter)
        spawn = time.time()
        seconds, _rc, _log = self.env.run(self.make_cluster(name), "make-cluster-" + name, env=dict(TIMINGS_ENV, BENCH_TIMINGS_FILE=str(timings)))
        if timings.exists():
            self.profiles.append(load_timings(timings, spawn, time.time()))
        RESULTS.add("setup.make_cluster_new", seconds, "warm `make cluster`, no cluster yet")
        return seconds

    def make_cluster(self, name):
        return ["make", "-C", ROOT, "--no-print-directory", "cluster",
                "PLAYBOOK=ansible-playbook -e gpushare_cluster_name=%s" % name]

    def delete(self, name):
        seconds, _rc, _log = self.env.run(
            ["ansible-playbook", "playbooks/cluster.yml", "-e", "gpushare_cluster_name=" + name, "-e", "lab_cluster_state=absent"],
            "delete-" + name, check=False)
        if name in self.live:
            self.live.remove(name)
        return seconds

    def cleanup(self):
        for name in list(self.live):
            say("%s removing cluster %s" % (stamp(), name))
            self.delete(name)


# ----------------------------------------------------------------------------- quiet machine


def wait_quiet(args, section):
    load = os.getloadavg()[0]
    waited = 0
    while load >= args.max_load and waited < args.quiet_wait:
        if waited == 0:
            say("%s waiting for the 1-minute load average to drop below %.1f before %s (up to %ds)"
                % (stamp(), args.max_load, section, args.quiet_wait))
        time.sleep(10)
        waited += 10
        load = os.getloadavg()[0]
    RESULTS.machine.setdefault("load_at_start", {})[section] = round(load, 2)
    if load >= args.max_load:
        note = "%s: started with load %.2f (>= %.1f) after waiting %ds: the machine was busy" % (section, load, args.max_load, waited)
        RESULTS.notes.append(note)
        say("%s WARNING %s" % (stamp(), note))
    else:
        say("%s load %.2f: starting %s" % (stamp(), load, section))


def machine_info(env):
    info = {}
    info["nproc"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        meminfo = Path("/proc/meminfo").read_text()
        info["memory_gib"] = round(int(re.search(r"MemTotal:\s+(\d+)", meminfo).group(1)) / 1024 / 1024, 1)
        cpu = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text())
        info["cpu"] = cpu.group(1).strip() if cpu else platform.processor()
    except (OSError, AttributeError):
        pass
    info["kernel"] = platform.release()
    info["python"] = platform.python_version()
    try:
        info["ansible_core"] = subprocess.run([PYTHON, "-c", "import ansible.release as r; print(r.__version__)"],
                                              capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        pass
    info["versions"] = env.versions
    clusters = subprocess.run([env.kwokctl, "get", "clusters"], capture_output=True, text=True, env=env.env, check=False).stdout.split()
    info["other_kwok_clusters"] = [c for c in clusters if not c.startswith(env.args.prefix)]
    info["load_before"] = [round(x, 2) for x in os.getloadavg()]
    info["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return info


# ----------------------------------------------------------------------------- profile of playbook runs


def load_timings(path, spawn, finish):
    data = json.loads(Path(path).read_text())
    tasks = [t for t in data["tasks"] if t.get("end") is not None]
    total_tasks = sum(t["end"] - t["start"] for t in tasks)
    first = tasks[0]["start"] if tasks else data.get("stats_time", finish)
    return {
        "startup": first - spawn,  # Python, imports, inventory, playbook parse, until the first task
        "shutdown": finish - data.get("stats_time", finish),
        "tasks_total": total_tasks,
        "tasks": tasks,
    }


def short_action(action):
    return action.rsplit(".", 1)[-1] if action.startswith("ansible.builtin.") else action


def aggregate(profiles):
    """Median per-role, per-action and per-task seconds over several runs of one playbook."""
    def med(values):
        return statistics.median(values) if values else 0.0

    by_role, by_action, by_task, calls = {}, {}, {}, {}
    for prof in profiles:
        roles, actions, tasks = {}, {}, {}
        for task in prof["tasks"]:
            seconds = task["end"] - task["start"]
            role = (task.get("top_role") or "(play)").replace("gpushare.k8s.", "")
            roles[role] = roles.get(role, 0.0) + seconds
            action = short_action(task["action"])
            actions[action] = actions.get(action, 0.0) + seconds
            key = "%s | %s" % (role, task["name"].split(" : ", 1)[-1])
            tasks[key] = tasks.get(key, 0.0) + seconds
            if action not in CONTROLLER_ACTIONS and seconds > 0.01:
                calls.setdefault(action, []).append(max(1, task["items"]))
        for target, source in ((by_role, roles), (by_action, actions), (by_task, tasks)):
            for key, value in source.items():
                target.setdefault(key, []).append(value)
    runs = max(1, len(profiles))
    return {
        "startup": med([p["startup"] for p in profiles]),
        "shutdown": med([p["shutdown"] for p in profiles]),
        "tasks_total": med([p["tasks_total"] for p in profiles]),
        "roles": sorted(((k, med(v)) for k, v in by_role.items()), key=lambda kv: -kv[1]),
        "actions": sorted(((k, med(v), sum(calls.get(k, [])) / runs) for k, v in by_action.items()), key=lambda kv: -kv[1]),
        "tasks": sorted(((k, med(v)) for k, v in by_task.items()), key=lambda kv: -kv[1])[:12],
        "runs": len(profiles),
    }


def lab_roles():
    """{role: the comment playbooks/lab.yml puts beside it} (e.g. "step 1", "beyond the lab: ...")."""
    found = {}
    for match in re.finditer(r"^\s*- role: gpushare\.k8s\.(\w+)[ \t]*(?:#[ \t]*(.*))?$", (ROOT / "playbooks" / "lab.yml").read_text(), re.M):
        found.setdefault(match.group(1), []).append((match.group(2) or "").strip())
    return {role: "; ".join(c for c in comments if c) for role, comments in found.items()}


def is_step_role(comment):
    return bool(re.match(r"step \d", comment or ""))


def print_profile(title, agg, wall):
    say("  profile of %s (median of %d runs; wall %s):" % (title, agg["runs"], fmt(wall, "s")))
    say("    start-up until the first task %s, tasks %s, after the last task %s"
        % (fmt(agg["startup"], "s"), fmt(agg["tasks_total"], "s"), fmt(agg["shutdown"], "s")))
    say("    per role (the play's roles; included roles counted in their caller; lab.yml's comment):")
    comments = lab_roles()
    extra = 0.0
    for role, seconds in agg["roles"]:
        comment = comments.get(role, "pre_tasks" if role == "(play)" else "")
        if not is_step_role(comment):
            extra += seconds
        say("      %-34s %8s  %4.0f%%  %s" % (role, fmt(seconds, "s"), 100 * seconds / max(agg["tasks_total"], 1e-9), comment[:70]))
    agg["outside_steps"] = extra
    say("    roles outside steps 1-8 (preflight, report, beyond the lab): %s of %s in tasks"
        % (fmt(extra, "s"), fmt(agg["tasks_total"], "s")))
    say("    per action (module runs = tasks + loop items that started a module):")
    for action, seconds, runs in agg["actions"]:
        per = (" %5.2f s/run" % (seconds / runs)) if runs else ""
        say("      %-34s %8s  %4.0f%%  runs %4.1f%s" % (action, fmt(seconds, "s"), 100 * seconds / max(agg["tasks_total"], 1e-9), runs, per))
    say("    slowest tasks:")
    for task, seconds in agg["tasks"][:10]:
        say("      %8s  %s" % (fmt(seconds, "s"), task))


# ----------------------------------------------------------------------------- section: check


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

    checker = ROOT / "plugins" / "module_utils" / "check_request.py"
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


# ----------------------------------------------------------------------------- section: lab


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
        order = ("lab", "kubectl", "modules") if i % 2 == 0 else ("modules", "kubectl", "lab")
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
                script = ["bash", BENCH / "baseline-kubectl.sh", kubeconfig, root]
                first, _rc, _log = env.run(script, "kubectl-first-%d" % (i + 1), env=kubectl_env)
                problems = verify_lab(root)
                rerun, _rc, _log = env.run(script, "kubectl-rerun-%d" % (i + 1), env=kubectl_env)
                problems += verify_lab(root)
                RESULTS.add("kubectl.first", first, "kubectl script, first run (fresh cluster)")
                RESULTS.add("kubectl.rerun", rerun, "kubectl script, re-run (warm cluster)")
                say("%s run %d/%d kubectl first %s, re-run %s%s"
                    % (stamp(), i + 1, args.runs, fmt(first, "s"), fmt(rerun, "s"), "" if not problems else "  PROBLEMS: " + "; ".join(problems)))
            if problems:
                RESULTS.failures.append("lab run %d (%s): %s" % (i + 1, what, "; ".join(problems)))
            deleted = clusters.delete(cluster)
            RESULTS.add("setup.cluster_delete", deleted, "remove a cluster (cluster.yml lab_cluster_state=absent)")
    show("lab.first", "lab.rerun", "modules.first", "modules.rerun", "kubectl.first", "kubectl.rerun")
    RESULTS.ratio("lab as modules / lab in the controller, first run", "modules.first", "lab.first")
    RESULTS.ratio("lab as modules / lab in the controller, re-run", "modules.rerun", "lab.rerun")
    RESULTS.ratio("lab first run / kubectl script first run", "lab.first", "kubectl.first", "<= 2x", lambda v: v <= 2.0)
    RESULTS.ratio("lab re-run / kubectl script re-run", "lab.rerun", "kubectl.rerun", "< 1x (faster)", lambda v: v < 1.0)
    RESULTS.ratio("lab re-run / kubectl script first run", "lab.rerun", "kubectl.first")
    RESULTS.ratio("lab first run / lab re-run", "lab.first", "lab.rerun")
    for key, title in (("first", "the first run"), ("rerun", "the re-run")):
        if profiles[key]:
            agg = aggregate(profiles[key])
            RESULTS.profile["lab_" + key] = agg
            print_profile(title, agg, RESULTS.median("lab.first" if key == "first" else "lab.rerun"))


# ----------------------------------------------------------------------------- section: setup


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


# ----------------------------------------------------------------------------- section: scale


def kube_client(kubeconfig, pool):
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return client.CoreV1Api(client.ApiClient(configuration))


def list_nodes(env, kubeconfig):
    return json.loads(env.kube(kubeconfig, "get", "nodes", "-l", SCALE_SELECTOR, "-o", "json"))["items"]


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


def wait_nodes_usable(env, kubeconfig, count, timeout=600):
    """Until `count` scale nodes exist, are Ready and carry no taint (node.kubernetes.io/not-ready goes last)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        nodes = list_nodes(env, kubeconfig)
        usable = [n for n in nodes if not n.get("spec", {}).get("taints")
                  and any(c.get("type") == "Ready" and c.get("status") == "True" for c in n.get("status", {}).get("conditions", []))]
        if len(usable) >= count:
            return time.perf_counter() - start, nodes
        time.sleep(2)
    raise BenchError("only %d of %d nodes usable after %ds" % (len(usable), count, timeout))


def schedule_pods(api, namespace, count, selector_value):
    """Create `count` one-slice Pods (16 at a time), wait until all are bound; return (create s, bound s, nodes used)."""
    from kubernetes.client.exceptions import ApiException

    api.create_namespace({"metadata": {"name": namespace}})
    for _attempt in range(300):  # the ServiceAccount admission plugin needs the namespace's default ServiceAccount
        try:
            api.read_namespaced_service_account("default", namespace)
            break
        except ApiException:
            time.sleep(0.1)
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


# ----------------------------------------------------------------------------- section: dra


def dra_bench_nodes(names):
    """Half whole-GPU nodes (2 GPUs), half MIG nodes (1 GPU, every A100 profile), alternating."""
    return [{"name": name, "gpus": 2} if index % 2 == 0 else {"name": name, "gpus": 1, "mig": True} for index, name in enumerate(names)]


def dra_claims(api_client, namespace, count, template, device_class, expression=None):
    """A ResourceClaimTemplate and `count` Pods with a claim each (16 at a time); wait until all are bound.

    Returns (create s, bound s, allocated devices): every claim is read back from its status.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core, resource = client.CoreV1Api(api_client), client.ResourceV1Api(api_client)
    core.create_namespace({"metadata": {"name": namespace}})
    for _attempt in range(300):  # the ServiceAccount admission plugin needs the namespace's default ServiceAccount
        try:
            core.read_namespaced_service_account("default", namespace)
            break
        except ApiException:
            time.sleep(0.1)
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
            from ansible_collections.gpushare.k8s.plugins.module_utils.dra import device_classes

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


# ----------------------------------------------------------------------------- summary


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


def summary(args):
    say("\n== summary (median, min-max, runs) — %s" % RESULTS.machine.get("date", ""))
    m = RESULTS.machine
    say("machine: %s CPUs (%s), %s GiB memory, kernel %s, Python %s, ansible-core %s; other kwok clusters running: %s"
        % (m.get("nproc"), m.get("cpu"), m.get("memory_gib"), m.get("kernel"), m.get("python"), m.get("ansible_core"),
           ", ".join(m.get("other_kwok_clusters", [])) or "none"))
    say("1-minute load average at the start of each section: %s; highest seen during it: %s"
        % (", ".join("%s %.2f" % kv for kv in m.get("load_at_start", {}).items()),
           ", ".join("%s %.2f" % kv for kv in m.get("load_max", {}).items())))
    for figure in RESULTS.figures.values():
        say(figure.line())
    say("\nratios and targets:")
    for r in RESULTS.ratios:
        value = fmt(r["value"], r.get("unit", "x"))
        say("  %-62s %9s   %s" % (r["label"], value, ("target %s: %s" % (r["target"], "met" if r["met"] else "MISSED")) if r.get("target") else ""))
    for note in RESULTS.notes:
        say("note: " + note)
    for failure in RESULTS.failures:
        say("FAILURE: " + failure)


def write_markdown(path):
    lines = ["| figure | median | min-max | runs |", "|---|---:|---|---:|"]
    for f in RESULTS.figures.values():
        lines.append("| %s | %s | %s | %d |" % (f.label.strip(), fmt(f.median, f.unit), f.spread(), len(f.samples)))
    lines += ["", "| ratio / target | value | target | met |", "|---|---:|---|---|"]
    for r in RESULTS.ratios:
        met = "" if not r.get("target") else ("yes" if r["met"] else "**no**")
        lines.append("| %s | %s | %s | %s |" % (r["label"], fmt(r["value"], r.get("unit", "x")), r.get("target") or "", met))
    Path(path).write_text("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------- main


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--only", default=",".join(DEFAULT_SECTIONS),
                        help="comma-separated sections: %s (default: all but dra)" % ",".join(SECTIONS))
    parser.add_argument("--quick", action="store_true", help="one run of each slow figure, 200 nodes, no pure-Python naive check (< 5 min)")
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
                "operator": lambda: section_operator(env, args, clusters), "dra": lambda: section_dra(env, args, clusters)}
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
