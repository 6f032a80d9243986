#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every section of benchmarks/run.py shares: figures and ratios, processes, clusters, a quiet machine, profiles."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import atexit
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time

import yaml


ROOT = Path(__file__).resolve().parent.parent


BENCH = ROOT / "benchmarks"


VENV_BIN = ROOT / ".venv" / "bin"


PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable


SECTIONS = ("check", "lab", "scale", "setup", "operator", "sharing", "intent", "dra")


DEFAULT_SECTIONS = ("check", "lab", "scale", "setup", "operator", "sharing", "intent")  # dra runs when asked (--only dra)


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
    if unit == "ms":
        return "%.1f ms" % value
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


def create_namespace_ready(core, namespace):
    """Create ``namespace`` and wait until its default ServiceAccount exists (the ServiceAccount admission plugin
    refuses Pods before that)."""
    from kubernetes.client.exceptions import ApiException

    core.create_namespace({"metadata": {"name": namespace}})
    for _attempt in range(300):
        try:
            core.read_namespaced_service_account("default", namespace)
            return
        except ApiException:
            time.sleep(0.1)


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
    """{role: where playbooks/lab.yml runs it, from its task names} (e.g. "step 1; step 7", "beyond the lab")."""
    found = {}
    play = yaml.safe_load((ROOT / "playbooks" / "lab.yml").read_text())[0]
    for task in (task for block in play["tasks"] for task in block.get("block", [])):
        role = (task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role") or {}).get("name")
        if role:
            found.setdefault(role.rsplit(".", 1)[-1], []).append(task["name"].split(":", 1)[0].lower())
    return {role: "; ".join(comments) for role, comments in found.items()}


def is_step_role(comment):
    return bool(re.match(r"step \d", comment or ""))


def print_profile(title, agg, wall):
    say("  profile of %s (median of %d runs; wall %s):" % (title, agg["runs"], fmt(wall, "s")))
    say("    start-up until the first task %s, tasks %s, after the last task %s"
        % (fmt(agg["startup"], "s"), fmt(agg["tasks_total"], "s"), fmt(agg["shutdown"], "s")))
    say("    per role (the play's roles; included roles counted in their caller; where lab.yml runs it):")
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


def kube_client(kubeconfig, pool):
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return client.CoreV1Api(client.ApiClient(configuration))


def list_nodes(env, kubeconfig):
    return json.loads(env.kube(kubeconfig, "get", "nodes", "-l", SCALE_SELECTOR, "-o", "json"))["items"]


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
