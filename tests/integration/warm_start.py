# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible-playbook for the live tests, started warm: the same program without paying its start-up on every run.

A run of ansible-playbook spends about 1.2 s of CPU before the first task (the interpreter, ansible-core's imports and
configuration, the kubernetes client the collection's action plugins import); the live tests run it ~180 times on a
2-core machine. So each pytest worker keeps a server (one per environment, more while runs overlap) that does what the
ansible-playbook script does up to ``main()``: it imports ``ansible.cli.playbook`` (and the kubernetes client) once,
with the environment and working directory of the run, and then forks a child per run that sets ``sys.argv``,
points stdin at /dev/null and stdout/stderr at files, and ends with ``sys.exit(main())``, the script's last line.
The server also imports the collection's own Python that every run's controller imports (module_utils, plugin_utils,
the module files its action plugins run in the controller and the filter files: ansible-core's collection loader
compiles them from source each time; the modules and filters alone cost about 0.2 s of CPU in a run that stops at its
first check, 1 s in a configure-only run of gpu_sharing.yml), through ansible-core's collection loader, configured from
the same settings and removed again before any run, so the run configures its own and finds them imported. Importing
them defines functions and classes and does nothing else. Everything else of the collection (its action plugins, whose import
loads template plugins through the run's plugin loaders, the playbook, inventory, templates) is loaded in the child,
as in a cold run; the child exits through the interpreter's normal shutdown (atexit handlers run). The server freezes
what it imported (gc.freeze) before forking: without it, each child's garbage collections and exit write to every
inherited object and copy the server's memory page by page, which cost about as much as the imports saved.

Two things differ from a cold start, and are put back in the child: ansible-core guards writes to stdout/stderr with
a lock that it disables in forked children (its workers); the server is such a fork's parent, so the child wraps them
again with a live lock (ansible.utils.display._synchronize_textiowrapper, what Display() does at start-up). Python's
``random`` is reseeded by Python itself after a fork.

The child's os.environ is the run's environment. Runs given another environment get a server of their own (servers
are keyed by the environment, as ansible and the kubernetes client read some of it at import time), except for the
variables in PER_RUN, which pytest changes with every test. ``GPUSHARE_TEST_COLD_START=1`` runs every playbook as a new process instead (the measure
of what this saves: BENCHMARKS.md). Some tests always start the script itself: the lab without a cluster
(test_no_cluster), the installed collection (test_collection_artifact), the control-plane build (test_lab_cluster_build),
the lab with a user's own ansible.cfg (test_lab_playbook) and the runs the fault tests interrupt (reliability.Background);
test_warm_start compares a warm run with a cold one, output and exit code.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

COLD = os.environ.get("GPUSHARE_TEST_COLD_START") == "1"
# Variables that change from test to test and that nothing reads at import time: they do not start a server of their
# own (the child's os.environ is the run's whole environment, these included).
PER_RUN = frozenset({"PYTEST_CURRENT_TEST"})

# The server: `python -c SERVER <fd>`, requests (JSON lines) on stdin, replies on descriptor <fd>.
SERVER = r'''
import json, os, sys
reply = os.fdopen(int(sys.argv[1]), "w", buffering=1)
from ansible.cli.playbook import main  # what the ansible-playbook script imports
import kubernetes.client, kubernetes.config, kubernetes.dynamic  # what the collection's action plugins import
from kubernetes.client import ApiClient, Configuration, V1DeleteOptions  # what they import lazily (controller_action)
from ansible.utils.display import Display, _synchronize_textiowrapper
# The collection's Python every run imports in its controller (module_utils, plugin_utils, the module files and the
# filter files), imported through ansible-core's collection loader configured as the run configures it, which is then
# removed again: the run configures its own, and finds these modules already imported (as ansible-core's plugin loader
# finds any module it has imported once). Not its action plugins: importing one loads template plugins in the controller.
import importlib, pkgutil
from ansible.plugins.loader import init_plugin_loader, _on_collection_load_handler
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
init_plugin_loader()
try:
    for package in ("module_utils", "plugin_utils", "modules", "filter"):
        try:
            package = importlib.import_module("ansible_collections.gpushare.k8s.plugins." + package)
        except ModuleNotFoundError:  # not on this environment's collections path: the run says so itself
            break
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(package.__name__ + "." + module.name)
finally:
    _AnsibleCollectionFinder._remove()
    AnsibleCollectionConfig.on_collection_load -= _on_collection_load_handler
null = os.open(os.devnull, os.O_RDWR)  # after the imports: an import error reaches pytest's output
requests = os.fdopen(os.dup(0), "r")
for fd in (0, 1, 2):
    os.dup2(null, fd)
import gc
gc.freeze()  # what is imported stays shared with the children: their collections and exit do not copy its pages
reply.write(json.dumps({"ready": True}) + "\n")
for line in requests:
    request = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        requests.close(); reply.close()
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_TRUNC)
            os.dup2(out, fd)
            os.close(out)
        lock = Display()._lock
        _synchronize_textiowrapper(sys.stdout, lock)
        _synchronize_textiowrapper(sys.stderr, lock)
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = request["argv"]
        sys.exit(main())
    reply.write(json.dumps({"pid": pid}) + "\n")
    _pid, status = os.waitpid(pid, 0)
    reply.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
'''


class _Server:
    """One warm server: a python process with ansible-playbook imported, for one environment and working directory."""

    def __init__(self, python: str, env: dict, cwd: str):
        self.replies, write_fd = os.pipe()
        self.popen = subprocess.Popen([python, "-c", SERVER, str(write_fd)], stdin=subprocess.PIPE, env=env, cwd=cwd,
                                      pass_fds=(write_fd,), text=True)
        os.close(write_fd)
        self.pending = b""
        self._expect("ready")

    def _expect(self, what, timeout=None):
        """The server's next reply (`what` of it); None when `timeout` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending:
            if deadline is not None and not select.select([self.replies], [], [], max(deadline - time.monotonic(), 0))[0]:
                return None
            chunk = os.read(self.replies, 4096)
            if not chunk:
                raise RuntimeError(f"the warm ansible-playbook server ended (exit {self.popen.wait()}) instead of {what}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)[what]

    def run(self, argv: list, env: dict, timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="warm-playbook-") as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            out.touch()
            err.touch()
            request = {"argv": argv, "env": env, "stdout": str(out), "stderr": str(err)}
            self.popen.stdin.write(json.dumps(request) + "\n")
            self.popen.stdin.flush()
            pid = self._expect("pid")
            returncode = self._expect("returncode", timeout)
            if returncode is not None:
                return subprocess.CompletedProcess(argv, returncode, *(f.read_text(errors="replace") for f in (out, err)))
            # what subprocess.run does on a timeout: kill, wait, raise with the output so far
            os.kill(pid, signal.SIGKILL)
            self._expect("returncode")
            raise subprocess.TimeoutExpired(argv, timeout, *(f.read_text(errors="replace") for f in (out, err)))

    def close(self):
        self.popen.stdin.close()
        self.popen.wait()
        os.close(self.replies)


_idle: dict = {}
_lock = threading.Lock()


def interpreter(script: str) -> str:
    """The interpreter a script's #! line names: the server must be that one (ansible_playbook_python, what the lab
    writes into bin/check-request.sh, is sys.executable)."""
    with open(script, "rb") as handle:
        first = handle.readline().decode()
    if not first.startswith("#!") or len(first[2:].split()) != 1:
        raise ValueError(f"{script}: its first line is not #!<interpreter>: {first!r}")
    return first[2:].strip()


def cold(argv: list, env: dict, cwd: str, timeout: float) -> subprocess.CompletedProcess:
    """ansible-playbook `argv` started as a new process, the script itself."""
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def run(argv: list, env: dict, cwd: str, timeout: float) -> subprocess.CompletedProcess:
    """ansible-playbook `argv` (argv[0] the script's path) warm, returning what cold() returns."""
    if COLD:
        return cold(argv, env, cwd, timeout)
    key = (cwd, tuple(sorted((name, value) for name, value in env.items() if name not in PER_RUN)))
    with _lock:
        idle = _idle.setdefault(key, [])
        server = idle.pop() if idle else None
    if server is None:
        server = _Server(interpreter(argv[0]), env, cwd)
    try:
        result = server.run(argv, env, timeout)
    except BaseException:
        server.close()
        raise
    with _lock:
        _idle[key].append(server)
    return result


def close_all():
    """End every idle server (pytest's session end)."""
    with _lock:
        servers = [server for idle in _idle.values() for server in idle]
        _idle.clear()
    for server in servers:
        server.close()
