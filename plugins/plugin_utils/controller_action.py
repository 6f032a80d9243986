# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run one of the collection's modules in the controller: the base of its action plugins.

ansible-core imports an action plugin's Python module once per playbook run, in the controller,
before it forks the worker of each task. The action plugin of a module imports that module's file
(and with it ``kubernetes`` and the module_utils), so a task costs a fork and the API calls
(milliseconds) instead of a new Python process that imports ``kubernetes`` (0.7-0.9 s).

The module's own ``main()`` runs, with :class:`ControllerModule` in place of ``AnsibleModule``:
the same argument spec and checks, the same code, the same result. When the task's connection is
not local (a task delegated to a bastion that holds the kubeconfig), the module runs on that host
as any module does. The variable ``gpushare_in_controller: false`` runs it as a module everywhere
(the benchmarks compare both ways).

The module runs with the environment its process would have had: the task's ``environment:`` (computed and
templated by ansible-core's own ``ActionBase._compute_environment_string``, as for a module process) is put over
``os.environ`` while ``main()`` runs, so the ``K8S_AUTH_*`` variables, ``KUBECONFIG`` and the rest reach the
module exactly as they reach kubernetes.core's modules (module_utils/k8s/auth.py reads them at the call).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import os
from collections.abc import Mapping

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.errors import UnsupportedError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

COLLECTION = "gpushare.k8s"
LOCAL_CONNECTIONS = frozenset(("local", "ansible.builtin.local"))
FILTER_FILES = ("control_plane", "dra", "gpu_features", "gpu_operator", "gpushare", "guards", "intents", "lab_objects", "lab_report",
                "manifests", "node_pools", "preflight", "quota", "rbac", "sharing")
# The modules preloaded with kubernetes=False: they never talk to a cluster, so they run here without the client.
_NO_CLIENT = set()


@functools.lru_cache(maxsize=None)
def has_kubernetes():
    """Whether the controller's Python has the kubernetes client (imported once, when a module needs it)."""
    try:
        import kubernetes  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        return False
    return True


class ModuleDone(BaseException):
    """The module called exit_json or fail_json: its result.

    A BaseException, as the SystemExit that AnsibleModule's exit_json raises: a module's ``except Exception``
    around its work must not catch its own exit.
    """

    def __init__(self, result):
        super().__init__(result.get("msg", ""))
        self.result = result


class ControllerModule:
    """The part of ``AnsibleModule`` the collection's modules use, returning through :class:`ModuleDone`.

    A subclass made by :func:`bound_module` carries the task's arguments, check mode and diff mode.
    """

    task_args: dict = {}
    task_check_mode = False
    task_diff = False
    task_name = ""

    def __init__(self, argument_spec, mutually_exclusive=None, required_together=None, required_one_of=None,
                 required_if=None, required_by=None, supports_check_mode=False, **_ignored):
        self.check_mode = self.task_check_mode
        self._diff = self.task_diff
        self._name = self.task_name
        self.warnings = []
        self.no_log_values = set()
        validated = ArgumentSpecValidator(
            argument_spec,
            mutually_exclusive=mutually_exclusive,
            required_together=required_together,
            required_one_of=required_one_of,
            required_if=required_if,
            required_by=required_by,
        ).validate(plain(self.task_args))
        self.no_log_values.update(validated._no_log_values)
        self.params = validated.validated_parameters
        if validated.error_messages:  # AnsibleModule's message: the first error, unknown options named as such
            msg = validated.errors.msg
            if isinstance(validated.errors[0], UnsupportedError):
                msg = "Unsupported parameters for (%s) module: %s" % (self._name, msg)
            self.fail_json(msg=msg)
        if self.check_mode and not supports_check_mode:
            raise ModuleDone(dict(skipped=True, msg="remote module (%s) does not support check mode" % self._name))

    def warn(self, warning):
        self.warnings.append(warning)

    def deprecate(self, msg, **_kwargs):
        self.warnings.append(msg)

    def debug(self, _msg):
        return None

    def _done(self, result):
        if self.warnings:
            result.setdefault("warnings", []).extend(self.warnings)
        raise ModuleDone(remove_values(result, self.no_log_values))

    def exit_json(self, **kwargs):
        self._done(dict(kwargs))

    def fail_json(self, msg, **kwargs):
        self._done(dict(kwargs, msg=msg, failed=True))


def plain(value):
    """``value`` as a module process receives it: plain dict, list, str, int, float, bool and None.

    ansible-core hands an action plugin its arguments as tagged subclasses of str, int, dict and list (where each
    value came from); a module process gets them through JSON, as the plain types. Modules pass them on to code
    that checks exact types (PyYAML's safe_dump refuses a str subclass), so the controller gives them the same.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__add__("", value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {plain(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(item) for item in value]
    return value


def bound_module(args, check_mode, diff, name):
    """A ControllerModule class that carries one task's arguments (``main(module_class=...)`` instantiates it)."""
    return type("BoundControllerModule", (ControllerModule,), dict(
        task_args=args, task_check_mode=check_mode, task_diff=diff, task_name=name))


def import_module_file(name):
    """The collection's module file ``name``, imported as Python (its main() and its module_utils)."""
    return importlib.import_module("ansible_collections.gpushare.k8s.plugins.modules.%s" % name)


_WARMED = []


def warm_template_plugins():
    """Load the Jinja filters, tests and lookups the collection's roles use, once, in the controller.

    ansible-core loads its filter and test plugins at a worker's first template that names one (about 12 ms: it
    imports every builtin filter file), and a lookup plugin at its first call; a worker's loads die with it, so
    every task paid them again. Loaded here, before the forks, every worker inherits them. The collection's own
    filter files too: a task's first gpushare.k8s filter loads all of them.
    """
    if _WARMED:
        return
    _WARMED.append(True)
    for filter_file in FILTER_FILES:
        importlib.import_module("ansible_collections.%s.plugins.filter.%s" % (COLLECTION, filter_file))
    try:
        from ansible.plugins.loader import filter_loader, lookup_loader, test_loader
        for loader, plugin in ((filter_loader, "ansible.builtin.default"), (test_loader, "ansible.builtin.defined"),
                               (filter_loader, COLLECTION + ".node_entries"), (lookup_loader, "ansible.builtin.env"),
                               (lookup_loader, "ansible.builtin.template")):
            loader.get(plugin)
    except Exception as error:  # pylint: disable=broad-exception-caught
        # Only a head start: a worker loads whatever is missing, as it would without this.
        display.vvv("gpushare.k8s: could not preload template plugins: %s" % error)


def preload(name, kubernetes=True):
    """Import module file ``name`` now, and, when it talks to a cluster, what ``kubernetes.client`` would import lazily.

    Called when ansible-core imports an action plugin in the controller, so that every task's forked worker
    inherits the loaded modules instead of importing them again. A module that never talks to a cluster
    (``kubernetes=False``: files, kwokctl) leaves the client unimported (0.3 s of a playbook that needs none).
    """
    module_file = import_module_file(name)
    warm_template_plugins()
    if not kubernetes:
        _NO_CLIENT.add(name)
    elif has_kubernetes():
        _preload_client()
    _freeze()
    return module_file


def _preload_client():
    from kubernetes import client as k8s_client  # pylint: disable=import-outside-toplevel

    # Not the typed API classes (CoreV1Api ...): their first use imports their models (1.3 s for CoreV1Api), and the
    # collection calls REST paths itself (cluster_objects.Route).
    for attribute in ("ApiClient", "Configuration", "V1DeleteOptions"):
        getattr(k8s_client, attribute)


def _freeze():
    # Move what the controller holds now (ansible-core, kubernetes, this collection: most of its heap) out of the
    # garbage collector's sight, as prefork servers do (the gc.freeze documentation): a worker's collection of the
    # oldest generation then no longer walks, and so copies page by page, the whole inherited heap. The lab runs
    # about 0.5 s faster. Cyclic garbage that exists at this point is kept for the run.
    gc.freeze()


def task_environment(action):
    """The variables a module process of ``action``'s task would be started with, over the connection's own.

    The task's ``environment:`` (play, blocks and task merged in ansible-core's order, templated with the task's
    variables) as ansible-core's ``ActionBase._compute_environment_string`` computes it for a module, each value as
    text, as the shell prefix of the module's command writes it (``True`` is ``"True"``).
    """
    environment = {}
    action._compute_environment_string(environment)  # pylint: disable=protected-access
    return {str(plain(name)): str(plain(value)) for name, value in environment.items()}


@contextlib.contextmanager
def process_environment(environment):
    """``os.environ`` with ``environment`` over it while the block runs, and as it was afterwards.

    A module process of the task starts with the controller's environment plus these variables (its command's
    prefix), and its code reads them through ``os.environ``: kubernetes.core's ``K8S_AUTH_*`` fallbacks, the
    kubernetes library's ``KUBECONFIG``, in-cluster and exec-plugin variables, a program the module starts. The
    action plugin runs in the task's own forked worker, so no other task sees the change, and it is undone when the
    module returns.
    """
    saved = {name: os.environ.get(name) for name in environment}
    try:
        os.environ.update(environment)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_in_process(module_file, args, check_mode=False, diff=False, environment=None):
    """Run ``module_file.main`` with these arguments in this process, ``environment`` over ``os.environ``; return its result."""
    module_class = bound_module(args, check_mode, diff, module_file.__name__.rsplit(".", 1)[-1])
    try:
        with process_environment(environment or {}):
            module_file.main(module_class=module_class)
    except ModuleDone as done:
        return done.result
    return dict(failed=True, msg="%s returned without a result" % module_file.__name__)


class ControllerAction(ActionBase):
    """Run the module named ``MODULE`` (this collection's) here when the connection is local."""

    _supports_check_mode = True
    _supports_async = True  # an async task runs as a module (ansible-core's async wrapper needs a module process)

    MODULE = ""

    def _runs_here(self, task_vars):
        if self._task.async_val:
            return False
        if not boolean(task_vars.get("gpushare_in_controller", True), strict=False):
            return False
        if self.MODULE not in _NO_CLIENT and not has_kubernetes():  # the controller's Python lacks the client: the module's interpreter may have it
            return False
        return getattr(self._connection, "transport", None) in LOCAL_CONNECTIONS

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        if not self._runs_here(task_vars):
            result.update(self._execute_module(module_name="%s.%s" % (COLLECTION, self.MODULE), module_args=self._task.args,
                                               task_vars=task_vars, wrap_async=bool(self._task.async_val)))
            return result
        # -vvv says where the work runs, as the connection's "<host> EXEC" line does for a module process.
        display.vvv("RUN %s.%s IN THE CONTROLLER (no module process)" % (COLLECTION, self.MODULE), host=self._play_context.remote_addr)
        result.update(run_in_process(import_module_file(self.MODULE), self._task.args,
                                     check_mode=bool(self._task.check_mode), diff=bool(self._task.diff),
                                     environment=task_environment(self)))
        return result
